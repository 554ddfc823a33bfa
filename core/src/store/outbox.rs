//! The statements of federation: users' server keys and the outbox of
//! notifications (schema 8, `docs/federation.md`), what other servers
//! stored in each user's store (schema 9), and who keeps a copy of each of
//! the user's records (schema 10).

use super::{Binder, Statement};
use crate::model::{Entity, RecordId, RecordSource, VersionHash};
use crate::service::federation::notify::Audience;

/// `versions, bytes` that servers sent the user with `source`
/// (`notification` or `notification_unknown`): no row when none.
pub fn received_usage_sql(user_id: i64, source: RecordSource) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT versions, bytes FROM received_usage WHERE user_id = {} AND source = {}",
        b.bind(user_id),
        b.bind(source.as_str())
    );
    b.finish(sql)
}

/// Counts one version of `bytes` received with `source` in the user's usage.
pub fn count_received_sql(user_id: i64, source: RecordSource, bytes: u64) -> Statement {
    let mut b = Binder::default();
    let bytes = b.bind(i64::try_from(bytes).unwrap_or(i64::MAX));
    let sql = format!(
        "INSERT INTO received_usage (user_id, source, versions, bytes) VALUES ({}, {}, 1, {bytes}) \
         ON CONFLICT (user_id, source) DO UPDATE SET versions = versions + 1, bytes = bytes + excluded.bytes",
        b.bind(user_id),
        b.bind(source.as_str()),
    );
    b.finish(sql)
}

/// `seed, public_key` of the user's server key, if it has one.
pub fn server_key_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT seed, public_key FROM server_keys WHERE user_id = {}",
        b.bind(user_id)
    );
    b.finish(sql)
}

/// Forgets the user's server key (`folio key rotate`: a new one is given
/// with [`insert_server_key_sql`] in the same transaction).
pub fn forget_server_key_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "DELETE FROM server_keys WHERE user_id = {}",
        b.bind(user_id)
    );
    b.finish(sql)
}

/// Gives the user the server key `seed` / `public_key` (base64), unless it
/// has one already.
pub fn insert_server_key_sql(user_id: i64, seed: &str, public_key: &str) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT OR IGNORE INTO server_keys (user_id, seed, public_key) VALUES ({}, {}, {})",
        b.bind(user_id),
        b.bind(seed),
        b.bind(public_key)
    );
    b.finish(sql)
}

/// Queues a notification of version `hash` of the user's record `record_id`
/// for `recipient`, due at once; a second one of the same is ignored.
pub fn queue_notification_sql(
    user_id: i64,
    recipient: &Entity,
    record_id: &RecordId,
    hash: &VersionHash,
    now_ms: i64,
) -> Statement {
    let mut b = Binder::default();
    let now = b.bind(now_ms);
    let sql = format!(
        "INSERT OR IGNORE INTO outbox (user_id, recipient, record_id, version_hash, queued_at, \
         due_at) VALUES ({}, {}, {}, {}, {now}, {now})",
        b.bind(user_id),
        b.bind(recipient.as_str()),
        b.bind(record_id.to_string()),
        b.bind(hash.to_string()),
    );
    b.finish(sql)
}

/// The statements that keep the audience of the user's record `record_id`
/// ([`Audience`]) as its version `hash` is stored, after the version's own
/// notifications to `recipients` were queued: the version is queued for
/// every entity of the audience too (the outbox takes each once), the
/// audience narrows to who may read the version (`after`), and the
/// recipients who may join it. Run them in the version's transaction, in
/// order. Each binds a list as one JSON array, however long it is (D1
/// binds at most 100 values a statement).
pub fn audience_statements(
    user_id: i64,
    record_id: &RecordId,
    hash: &VersionHash,
    queued_at_ms: i64,
    recipients: &[Entity],
    after: &Audience,
) -> Vec<Statement> {
    let record_id = record_id.to_string();
    let mut statements = Vec::with_capacity(3);

    let mut b = Binder::default();
    let now = b.bind(queued_at_ms);
    let sql = format!(
        "INSERT OR IGNORE INTO outbox (user_id, recipient, record_id, version_hash, queued_at, \
         due_at) SELECT user_id, entity, record_id, {}, {now}, {now} FROM audiences \
         WHERE user_id = {} AND record_id = {}",
        b.bind(hash.to_string()),
        b.bind(user_id),
        b.bind(record_id.as_str()),
    );
    statements.push(b.finish(sql));

    let json = |entities: &mut dyn Iterator<Item = &Entity>| {
        serde_json::to_string(&entities.map(Entity::as_str).collect::<Vec<_>>())
            .expect("strings serialize")
    };
    if let Audience::Only(readers) = after {
        let mut b = Binder::default();
        let mut sql = format!(
            "DELETE FROM audiences WHERE user_id = {} AND record_id = {}",
            b.bind(user_id),
            b.bind(record_id.as_str()),
        );
        if !readers.is_empty() {
            let readers = b.bind(json(&mut readers.iter()));
            sql.push_str(&format!(
                " AND entity NOT IN (SELECT value FROM json_each({readers}))"
            ));
        }
        statements.push(b.finish(sql));
    }

    let joining: Vec<&Entity> = recipients.iter().filter(|e| after.keeps(e)).collect();
    if !joining.is_empty() {
        let mut b = Binder::default();
        let sql = format!(
            "INSERT OR IGNORE INTO audiences (user_id, record_id, entity) \
             SELECT {}, {}, value FROM json_each({})",
            b.bind(user_id),
            b.bind(record_id.as_str()),
            b.bind(json(&mut joining.into_iter())),
        );
        statements.push(b.finish(sql));
    }
    statements
}

/// The columns [`due_notifications_sql`] and [`outbox_sql`] read, in order.
pub const OUTBOX_COLUMNS: &str = "o.id, o.user_id, o.recipient, o.record_id, o.version_hash, \
     o.queued_at, o.due_at, o.attempts, o.last_error, o.failed_at";

/// A recipient backs off as a whole: while a notification to it waits for
/// a retry, the recipient's other notifications wait too, and go together
/// when that one is due. `o` is the notification; true while none of its
/// recipient's waits past `now`.
fn recipient_not_backing_off(now: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM outbox b WHERE b.user_id = o.user_id \
         AND b.recipient = o.recipient AND b.failed_at IS NULL AND b.attempts > 0 \
         AND b.due_at > {now})"
    )
}

/// Leaves out the notifications of the deliveries `in_flight` names (user
/// id, recipient): one bound JSON array of `"{user_id} {recipient}"`, so
/// that any number of them costs one parameter. Empty when none is.
fn not_in_flight(b: &mut Binder, in_flight: &[(i64, Entity)]) -> String {
    if in_flight.is_empty() {
        return String::new();
    }
    let keys: Vec<String> = in_flight
        .iter()
        .map(|(user, recipient)| format!("{user} {recipient}"))
        .collect();
    let keys = serde_json::to_string(&keys).unwrap_or_default();
    format!(
        " AND (o.user_id || ' ' || o.recipient) NOT IN (SELECT value FROM json_each({}))",
        b.bind(keys)
    )
}

/// Up to `limit` notifications due at `now_ms`, of every user or of
/// `user` alone, in the order they came due; none of a recipient that is
/// backing off after a failure, nor of a delivery `in_flight` (user id,
/// recipient).
pub fn due_notifications_sql(
    now_ms: i64,
    limit: i64,
    user: Option<i64>,
    in_flight: &[(i64, Entity)],
) -> Statement {
    let mut b = Binder::default();
    let now = b.bind(now_ms);
    let of_user = match user {
        Some(user) => format!(" AND o.user_id = {}", b.bind(user)),
        None => String::new(),
    };
    let not_in_flight = not_in_flight(&mut b, in_flight);
    let sql = format!(
        "SELECT {OUTBOX_COLUMNS} FROM outbox o INDEXED BY outbox_due \
         WHERE o.failed_at IS NULL AND o.due_at <= {now}{of_user}{not_in_flight} AND {} \
         ORDER BY o.due_at, o.id LIMIT {}",
        recipient_not_backing_off(&now),
        b.bind(limit)
    );
    b.finish(sql)
}

/// When the next notification (of every user, or of `user`) not of a
/// delivery `in_flight` is due, if any is pending: a notification of a
/// recipient that backs off is due with the recipient's latest retry.
pub fn next_due_sql(user: Option<i64>, in_flight: &[(i64, Entity)]) -> Statement {
    let mut b = Binder::default();
    let of_user = match user {
        Some(user) => format!(" AND o.user_id = {}", b.bind(user)),
        None => String::new(),
    };
    let not_in_flight = not_in_flight(&mut b, in_flight);
    b.finish(format!(
        "SELECT MIN(MAX(o.due_at, IFNULL((SELECT MAX(b.due_at) FROM outbox b \
         WHERE b.user_id = o.user_id AND b.recipient = o.recipient AND b.failed_at IS NULL \
         AND b.attempts > 0), o.due_at))) FROM outbox o INDEXED BY outbox_due \
         WHERE o.failed_at IS NULL{of_user}{not_in_flight}"
    ))
}

/// Every notification still pending or failed for good, oldest first (for
/// `folio outbox`): at most `limit`. Its `due_at` is when it will be sent:
/// its recipient's latest retry when that is later ([`next_due_sql`]).
pub fn outbox_sql(limit: i64) -> Statement {
    outbox_rows_sql(None, limit)
}

/// [`outbox_sql`] of one user's notifications alone (the console's Outbox
/// page).
pub fn user_outbox_sql(user_id: i64, limit: i64) -> Statement {
    outbox_rows_sql(Some(user_id), limit)
}

fn outbox_rows_sql(user: Option<i64>, limit: i64) -> Statement {
    let mut b = Binder::default();
    let columns = OUTBOX_COLUMNS.replace(
        "o.due_at,",
        "MAX(o.due_at, IFNULL((SELECT MAX(b.due_at) FROM outbox b \
         WHERE b.user_id = o.user_id AND b.recipient = o.recipient AND b.failed_at IS NULL \
         AND b.attempts > 0), o.due_at)),",
    );
    let of_user = match user {
        Some(user) => format!(" WHERE o.user_id = {}", b.bind(user)),
        None => String::new(),
    };
    let sql = format!(
        "SELECT {columns}, u.name FROM outbox o JOIN users u ON u.id = o.user_id{of_user} \
         ORDER BY o.id LIMIT {}",
        b.bind(limit)
    );
    b.finish(sql)
}

/// The outbox by state, for the metrics and the health answer
/// (`crate::service::outbox_summary`): `state, notifications, oldest
/// queued_at, recipients`, a row per state that has notifications;
/// `state` is `pending` (never tried), `retrying` (failed, due again) or
/// `failed` (given up). One scan of the outbox's rows.
pub fn outbox_summary_sql() -> Statement {
    Binder::default().finish(
        "SELECT state, COUNT(*), MIN(queued_at), COUNT(DISTINCT recipient) FROM \
         (SELECT CASE WHEN failed_at IS NOT NULL THEN 'failed' \
         WHEN attempts > 0 THEN 'retrying' ELSE 'pending' END AS state, queued_at, recipient \
         FROM outbox) GROUP BY state"
            .to_owned(),
    )
}

/// Makes the notifications that wait past `now_ms` due then, of every
/// user or of `user`, for every recipient or for `recipient` (`folio
/// outbox send-now`, the console's "retry now"); with `failed_too`, those
/// given up as well, with a fresh day of retries (as [`retry_failed_sql`]).
/// A notification waiting for a retry keeps its count of attempts: if it
/// fails again, it waits as long as it would have.
pub fn send_now_sql(
    now_ms: i64,
    user: Option<i64>,
    recipient: Option<&Entity>,
    failed_too: bool,
) -> Statement {
    let mut b = Binder::default();
    let now = b.bind(now_ms);
    let mut filter = String::new();
    if let Some(user) = user {
        filter.push_str(&format!(" AND user_id = {}", b.bind(user)));
    }
    if let Some(recipient) = recipient {
        filter.push_str(&format!(" AND recipient = {}", b.bind(recipient.as_str())));
    }
    let which = match failed_too {
        true => format!("(failed_at IS NOT NULL OR due_at > {now})"),
        false => format!("failed_at IS NULL AND due_at > {now}"),
    };
    // The right-hand sides read the row as it was: a failed row starts over.
    let sql = format!(
        "UPDATE outbox SET due_at = {now}, \
         attempts = CASE WHEN failed_at IS NULL THEN attempts ELSE 0 END, \
         queued_at = CASE WHEN failed_at IS NULL THEN queued_at ELSE {now} END, \
         failed_at = NULL WHERE {which}{filter}"
    );
    b.finish(sql)
}

/// Whether the user has a notification for `recipient` waiting for a
/// retry later than `soon_ms`: one row, or none.
pub fn waiting_for_sql(user_id: i64, recipient: &Entity, soon_ms: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT 1 FROM outbox WHERE user_id = {} AND recipient = {} AND failed_at IS NULL \
         AND due_at > {} LIMIT 1",
        b.bind(user_id),
        b.bind(recipient.as_str()),
        b.bind(soon_ms)
    );
    b.finish(sql)
}

/// Makes the user's notifications for `recipient` that wait past
/// `soon_ms` due then: its server answers again.
pub fn bring_forward_sql(user_id: i64, recipient: &Entity, soon_ms: i64) -> Statement {
    let mut b = Binder::default();
    let soon = b.bind(soon_ms);
    let sql = format!(
        "UPDATE outbox SET due_at = {soon} WHERE user_id = {} AND recipient = {} \
         AND failed_at IS NULL AND due_at > {soon}",
        b.bind(user_id),
        b.bind(recipient.as_str()),
    );
    b.finish(sql)
}

/// Forgets a delivered notification.
pub fn delivered_sql(id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!("DELETE FROM outbox WHERE id = {}", b.bind(id));
    b.finish(sql)
}

/// Records a failed attempt, the one after `attempts` earlier ones: tried
/// again at `due_at_ms`, or, with `None`, given up at `now_ms`. Recording
/// the same attempt twice changes nothing the second time.
pub fn failed_attempt_sql(
    id: i64,
    attempts: u32,
    due_at_ms: Option<i64>,
    now_ms: i64,
    error: &str,
) -> Statement {
    let mut b = Binder::default();
    let (id, attempts, error) = (b.bind(id), b.bind(i64::from(attempts)), b.bind(error));
    let sql = match due_at_ms {
        Some(due) => format!(
            "UPDATE outbox SET attempts = attempts + 1, due_at = {}, last_error = {error} \
             WHERE id = {id} AND attempts = {attempts}",
            b.bind(due)
        ),
        None => format!(
            "UPDATE outbox SET attempts = attempts + 1, failed_at = {}, last_error = {error} \
             WHERE id = {id} AND attempts = {attempts}",
            b.bind(now_ms)
        ),
    };
    b.finish(sql)
}

/// Makes every failed notification due again at `now_ms` (`folio outbox
/// retry`), with a fresh day of retries.
pub fn retry_failed_sql(now_ms: i64) -> Statement {
    let mut b = Binder::default();
    let now = b.bind(now_ms);
    let sql = format!(
        "UPDATE outbox SET failed_at = NULL, due_at = {now}, queued_at = {now}, attempts = 0 \
         WHERE failed_at IS NOT NULL"
    );
    b.finish(sql)
}

/// One row if the user ever linked `entity` in a record of their own (in
/// its permissions or content): the user knows that entity, whose
/// notifications are then `notification` rather than
/// `notification_unknown` (`docs/federation.md` §4).
pub fn knows_entity_sql(user_id: i64, user: &Entity, entity: &Entity) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT 1 FROM link_index l JOIN records r ON r.row = l.record_row \
         WHERE l.user_id = {} AND l.key = {} AND r.author = {} LIMIT 1",
        b.bind(user_id),
        b.bind(crate::query::entity_key(entity)),
        b.bind(user.as_str()),
    );
    b.finish(sql)
}
