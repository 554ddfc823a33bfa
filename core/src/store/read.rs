//! The reads besides lists: one record, the records `include_links` asks
//! for, the event log, and seeding a new store with the built-in types.
//!
//! Every query that returns versions yields rows of `(record, links)` (see
//! [`super::read_version`]), after any leading columns it names.

use crate::model::{Entity, ReceivedRecord, RecordDate, RecordId, VersionHash};
use crate::query::{LinkPlan, index_entries};
use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY, builtin_records, type_type};
use crate::service::events::{CatchUpStart, EventId};

use super::{Binder, DESCRIBED_ENTITY, Statement, WriteOrigin, version_statements};

/// The latest version of one record, whatever its state.
pub fn latest_version_sql(user_id: i64, author: &Entity, record_id: &RecordId) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT v.record, v.links FROM records r \
         JOIN versions v ON v.record_row = r.row AND v.hash = r.version_hash \
         WHERE r.user_id = {} AND r.author = {} AND r.record_id = {}",
        b.bind(user_id),
        b.bind(author.as_str()),
        b.bind(record_id.to_string()),
    );
    b.finish(sql)
}

/// One row `(version_hash)` if the record is stored: its latest version's
/// hash, which a prepared write checks is still the one it read.
pub fn latest_hash_sql(user_id: i64, author: &Entity, record_id: &RecordId) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT version_hash FROM records WHERE user_id = {} AND author = {} AND record_id = {}",
        b.bind(user_id),
        b.bind(author.as_str()),
        b.bind(record_id.to_string()),
    );
    b.finish(sql)
}

/// One page of a record's versions, oldest first: those received after
/// `after` (the last `version.received_at` of the previous page), at most
/// `page_size + 1` (one more means another page follows).
pub fn versions_sql(
    user_id: i64,
    author: &Entity,
    record_id: &RecordId,
    after: Option<RecordDate>,
    page_size: u32,
) -> Statement {
    let mut b = Binder::default();
    let after = after.map_or(i64::MIN, RecordDate::unix_ticks);
    let sql = format!(
        "SELECT record, links FROM versions WHERE record_row = \
         (SELECT row FROM records WHERE user_id = {} AND author = {} AND record_id = {}) \
         AND received_at > {} ORDER BY received_at LIMIT {}",
        b.bind(user_id),
        b.bind(author.as_str()),
        b.bind(record_id.to_string()),
        b.bind(after),
        b.bind(i64::from(page_size) + 1),
    );
    b.finish(sql)
}

/// One version of a record by its hash.
pub fn version_sql(
    user_id: i64,
    author: &Entity,
    record_id: &RecordId,
    hash: &VersionHash,
) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT record, links FROM versions WHERE record_row = \
         (SELECT row FROM records WHERE user_id = {} AND author = {} AND record_id = {}) \
         AND hash = {}",
        b.bind(user_id),
        b.bind(author.as_str()),
        b.bind(record_id.to_string()),
        b.bind(hash.to_string()),
    );
    b.finish(sql)
}

/// The records a [`LinkPlan`] names: the live Entity records describing each
/// entity ([`crate::auth::access::described_entity`]),
/// the latest live version of each record, and each exact version. Missing
/// ones are simply absent; [`crate::query::linked_records`] chooses what
/// the caller sees.
///
/// Each part steps through its JSON list and looks every item up by key
/// (`CROSS JOIN` keeps that order): left to itself, SQLite chose to step
/// through every record of the user and search the list for each, which
/// cost milliseconds per answer on a store of thousands of records.
pub fn linked_sql(user_id: i64, plan: &LinkPlan) -> Statement {
    let mut b = Binder::default();
    let user = b.bind(user_id);
    let entities: Vec<&str> = plan.entities.iter().map(Entity::as_str).collect();
    let records: Vec<[String; 2]> = plan
        .records
        .iter()
        .map(|(entity, id)| [entity.to_string(), id.to_string()])
        .collect();
    let versions: Vec<[String; 3]> = plan
        .versions
        .iter()
        .map(|(entity, id, hash)| [entity.to_string(), id.to_string(), hash.to_string()])
        .collect();
    let json = |value: serde_json::Value| value.to_string();
    let sql = format!(
        "SELECT v.record, v.links FROM json_each({entities}) j \
         JOIN versions v INDEXED BY versions_by_described_entity \
         ON v.user_id = {user} AND {DESCRIBED_ENTITY} = j.value \
         JOIN records r ON r.user_id = v.user_id AND r.author = v.author \
         AND r.record_id = v.record_id AND r.version_hash = v.hash \
         WHERE r.type_record_id = {entity_type} AND r.type_entity = {system} AND r.deleted = 0 \
         UNION ALL \
         SELECT v.record, v.links FROM json_each({records}) j \
         CROSS JOIN records r ON r.user_id = {user} AND r.author = json_extract(j.value, '$[0]') \
         AND r.record_id = json_extract(j.value, '$[1]') \
         JOIN versions v ON v.record_row = r.row AND v.hash = r.version_hash \
         WHERE r.deleted = 0 \
         UNION ALL \
         SELECT v.record, v.links FROM json_each({versions}) j \
         CROSS JOIN records r ON r.user_id = {user} AND r.author = json_extract(j.value, '$[0]') \
         AND r.record_id = json_extract(j.value, '$[1]') \
         JOIN versions v ON v.record_row = r.row AND v.hash = json_extract(j.value, '$[2]')",
        entities = b.bind(json(serde_json::json!(entities))),
        entity_type = b.bind(BuiltinType::Entity.record_id().to_string()),
        system = b.bind(SYSTEM_ENTITY),
        records = b.bind(json(serde_json::json!(records))),
        versions = b.bind(json(serde_json::json!(versions))),
    );
    b.finish(sql)
}

/// Events of the log after a catch-up start (and after `after`, the last
/// event a previous chunk returned), oldest first, at most `limit`. Rows
/// are `(seq, client_id, record, links)`.
pub fn events_sql(
    user_id: i64,
    start: CatchUpStart,
    after: Option<EventId>,
    limit: u32,
) -> Statement {
    let mut b = Binder::default();
    let user = b.bind(user_id);
    let mut conditions = vec![format!("e.user_id = {user}")];
    match start {
        CatchUpStart::AfterEvent(id) => conditions.push(format!("e.seq > {}", b.bind(seq(id)))),
        CatchUpStart::AfterReceivedAt(date) => {
            // Receipt dates increase with the sequence: the events after
            // the last one received at or before `date`, found by stepping
            // back from the newest through the few received since.
            conditions.push(format!(
                "e.seq > COALESCE((SELECT k.seq FROM events k WHERE k.user_id = {user} \
                 AND k.received_at <= {} ORDER BY k.seq DESC LIMIT 1), 0)",
                b.bind(date.unix_ticks())
            ));
        }
    }
    if let Some(after) = after {
        conditions.push(format!("e.seq > {}", b.bind(seq(after))));
    }
    let sql = format!(
        "SELECT e.seq, e.client_id, v.record, v.links FROM events e \
         JOIN versions v ON v.record_row = e.record_row AND v.hash = e.version_hash \
         WHERE {} ORDER BY e.seq LIMIT {}",
        conditions.join(" AND "),
        b.bind(i64::from(limit)),
    );
    b.finish(sql)
}

/// A sequence as SQLite stores it; sequences count commits, far below `i64::MAX`.
fn seq(id: EventId) -> i64 {
    i64::try_from(id.sequence()).unwrap_or(i64::MAX)
}

/// One row `(oldest retained seq or NULL, latest seq)`: the
/// [`crate::service::events::EventLogBounds`] of a user's log (a latest of 0 means none).
pub fn event_log_bounds_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let user = b.bind(user_id);
    b.finish(format!(
        "SELECT (SELECT MIN(seq) FROM events WHERE user_id = {user}), \
         event_seq FROM users WHERE id = {user}"
    ))
}

/// Removes the events older than [`crate::service::events::retention_cutoff`], in every store.
///
/// Receipt dates increase with each user's sequence, so a user's expired
/// events are those before its first one received at or after the cutoff:
/// found by stepping through the expired ones from the oldest, one user
/// after another (`CROSS JOIN` keeps SQLite from reading every event
/// and looking up its user instead).
pub fn prune_events_sql(cutoff: RecordDate) -> Statement {
    let mut b = Binder::default();
    let cutoff = b.bind(cutoff.unix_ticks());
    let sql = format!(
        "DELETE FROM events WHERE (user_id, seq) IN (\
         SELECT e.user_id, e.seq FROM users u CROSS JOIN events e ON e.user_id = u.id \
         AND e.seq < COALESCE((SELECT k.seq FROM events k WHERE k.user_id = u.id \
         AND k.received_at >= {cutoff} ORDER BY k.seq LIMIT 1), u.event_seq + 1))"
    );
    b.finish(sql)
}

/// The statements that put the built-in types into a new user's store,
/// to run in the transaction that creates the user, before any other write.
pub fn seed_statements(user_id: i64) -> Vec<Statement> {
    builtin_records()
        .iter()
        .flat_map(|record| {
            let validated = type_type()
                .schema
                .validate(record)
                .expect("the built-in types follow the Type type");
            // Each built-in record carries its receipt dates (builtin.rs).
            let record =
                ReceivedRecord::new(record.clone()).expect("a built-in record is received");
            version_statements(
                user_id,
                &record,
                &index_entries(&validated.links),
                Some(&validated.search_text),
                WriteOrigin::default(),
            )
        })
        .collect()
}
