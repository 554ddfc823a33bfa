//! Delivering the outbox (`docs/federation.md` §4): what is due, how it is
//! cut into deliveries, and what each delivery's outcome does to the rows.
//!
//! A **delivery** is one user's due notifications for one recipient. Each
//! runs on its own, so that a slow recipient delays nobody else's:
//!
//! 1. the host asks [`plan_deliveries`] what is due, naming the deliveries
//!    it still has in flight (their rows are left out, so a recipient is
//!    never sent to twice at once);
//! 2. it runs each [`Delivery`] as a task of its own
//!    ([`Delivery::run`]), under a deadline of
//!    [`DELIVERY_DEADLINE_MS`]; a delivery records each batch's outcome
//!    in the outbox as soon as the recipient answered it;
//! 3. a delivery past its deadline is dropped, and the host records that
//!    with [`Delivery::deadline_passed`] (a failure tried again later);
//! 4. [`next_due`] says when to plan again; the host also plans again as
//!    soon as a write queues a notification or a delivery ends.
//!
//! Recording is idempotent: a delivered notification's row is gone, and a
//! failed attempt is counted only against the attempt it was planned at,
//! so a deadline that passes while a failure is being recorded counts it
//! once.

use crate::model::{Entity, RecordDate, RecordId, VersionHash, VersionLink};
use crate::service::federation::notify::{MAX_NOTIFIED_VERSIONS, NotificationAnswer, RetryPolicy};
use crate::service::federation::{PeerError, PeerFailure};
use crate::service::fresh::Fresh;
use crate::store::{delivered_sql, due_notifications_sql, failed_attempt_sql, next_due_sql};

use super::endpoints::federation::{Federation, Trouble, receive_here, serving_user};
use super::store::{Row, RowError, RowExt};
use super::{Failure, Host, User};
use crate::service::jobs::Job;

/// The most outbox rows one plan reads.
pub const DELIVERY_PLAN_ROWS: i64 = 500;

/// How long one delivery may take, every batch and every request to the
/// recipient's server (discovery included) together; past it the host
/// drops the delivery and records it with [`Delivery::deadline_passed`].
/// Each request has its own limits below this (`docs/federation.md` §6).
pub const DELIVERY_DEADLINE_MS: u64 = 60_000;

/// How soon a notification waiting for a retry is sent once its
/// recipient's server is seen up again (it signed a request to the user):
/// a moment for it to settle after a restart.
pub(crate) const RECOVERED_PEER_DELAY_MS: i64 = 1_000;

/// The most deliveries a host runs at once; past it, what is due waits
/// for a delivery to end (each ends by its deadline).
pub const MAX_DELIVERIES_AT_ONCE: usize = 256;

/// What one delivery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Notifications accepted by the recipient's server.
    pub delivered: usize,
    /// Notifications that failed and are due again later.
    pub retried: usize,
    /// Notifications given up.
    pub failed: usize,
    /// One line per failed request, or per failure to record an outcome.
    pub errors: Vec<String>,
}

/// One pending notification, as the outbox holds it.
#[derive(Debug, Clone)]
struct Queued {
    id: i64,
    user_id: i64,
    recipient: Entity,
    record_id: RecordId,
    version_hash: VersionHash,
    queued_at_ms: i64,
    attempts: u32,
}

/// A delivery's key: the user (by id) and the recipient.
pub type DeliveryKey = (i64, Entity);

/// One user's due notifications for one recipient, oldest first: what one
/// task sends, in requests of at most [`MAX_NOTIFIED_VERSIONS`].
#[derive(Debug, Clone)]
pub struct Delivery {
    user: User,
    recipient: Entity,
    items: Vec<Queued>,
}

/// Reads the notifications due at `now` (of every user, or of `user`
/// alone) and cuts them into at most `max` deliveries, one per user and
/// recipient, in the order their first notification came due. The rows of
/// the deliveries `in_flight` names are left out.
pub async fn plan_deliveries<H: Host>(
    host: &H,
    now: RecordDate,
    user: Option<i64>,
    in_flight: &[DeliveryKey],
    max: usize,
) -> Result<Vec<Delivery>, String> {
    let rows = host
        .fetch(&due_notifications_sql(
            now.unix_millis(),
            DELIVERY_PLAN_ROWS,
            user,
            in_flight,
        ))
        .await
        .map_err(|e| e.to_string())?;
    let users = host.users().await.map_err(|e| e.to_string())?;
    let mut deliveries: Vec<Delivery> = Vec::new();
    for row in &rows {
        let item = queued_row(row).map_err(|e| format!("an outbox row: {e}"))?;
        let planned = deliveries
            .iter()
            .position(|d| d.user.id == item.user_id && d.recipient == item.recipient);
        match planned {
            Some(at) => deliveries[at].items.push(item),
            None if deliveries.len() < max => {
                // A user removed since the row was read has nothing to send.
                if let Some(user) = users.iter().find(|user| user.id == item.user_id) {
                    deliveries.push(Delivery {
                        user: user.clone(),
                        recipient: item.recipient.clone(),
                        items: vec![item],
                    });
                }
            }
            None => {}
        }
    }
    for delivery in &mut deliveries {
        delivery.items.sort_by_key(|item| item.id);
    }
    Ok(deliveries)
}

/// When the next notification not `in_flight` (of every user, or of
/// `user`) is due, in Unix milliseconds; `None` when none is pending.
pub async fn next_due<H: Host>(
    host: &H,
    user: Option<i64>,
    in_flight: &[DeliveryKey],
) -> Result<Option<i64>, String> {
    let rows = host
        .fetch(&next_due_sql(user, in_flight))
        .await
        .map_err(|e| e.to_string())?;
    match rows.first() {
        Some(row) => row.optional_integer(0).map_err(|e| e.to_string()),
        None => Ok(None),
    }
}

impl Delivery {
    /// The user and the recipient: no two deliveries with the same key run
    /// at once.
    pub fn key(&self) -> DeliveryKey {
        (self.user.id, self.recipient.clone())
    }

    /// Sends the notifications, a batch at a time, and records each
    /// batch's outcome as soon as it is known: a delivered notification
    /// leaves the outbox; a failed one is due again after the recipient's
    /// backoff, the rest waiting with it, or is given up after
    /// [`GIVE_UP_AFTER_MS`](crate::service::federation::notify::GIVE_UP_AFTER_MS)
    /// (at once when retrying cannot help). A recipient that is a user of this server receives
    /// them in-process. Call it once per plan; `fresh` is drawn for it.
    pub async fn run<H: Host>(
        &self,
        host: &H,
        now: RecordDate,
        fresh: &Fresh,
        retry: &RetryPolicy,
    ) -> DeliveryReport {
        let mut report = DeliveryReport::default();
        let users = match host.users().await {
            Ok(users) => users,
            Err(error) => {
                report.errors.push(format!("the users: {error}"));
                return report;
            }
        };
        for batch in self.items.chunks(MAX_NOTIFIED_VERSIONS) {
            let outcome = self.send(host, &users, batch, now, fresh).await;
            let failed = outcome.is_err();
            self.record(host, batch, outcome, now, fresh, retry, &mut report)
                .await;
            if failed {
                // The rest wait with the failed batch: the recipient backs
                // off as a whole (`due_notifications_sql`).
                break;
            }
        }
        report
    }

    /// Records a delivery dropped past [`DELIVERY_DEADLINE_MS`]: every
    /// notification it still held failed for now, and is due again after
    /// the recipient's backoff. Those it delivered or recorded before are
    /// left as they are.
    pub async fn deadline_passed<H: Host>(
        &self,
        host: &H,
        now: RecordDate,
        fresh: &Fresh,
        retry: &RetryPolicy,
    ) -> DeliveryReport {
        let mut report = DeliveryReport::default();
        let timed_out = Err(Trouble::Peer(PeerError::Failed(PeerFailure::TimedOut)));
        self.record(host, &self.items, timed_out, now, fresh, retry, &mut report)
            .await;
        report
    }

    /// Sends one batch.
    async fn send<H: Host>(
        &self,
        host: &H,
        users: &[User],
        batch: &[Queued],
        now: RecordDate,
        fresh: &Fresh,
    ) -> Result<NotificationAnswer, Trouble> {
        // The user's own records: the user authored every version queued.
        let links: Vec<VersionLink> = batch
            .iter()
            .map(|item| VersionLink {
                entity: self.user.entity.clone(),
                original_entity: None,
                record_id: item.record_id,
                version_hash: item.version_hash,
            })
            .collect();
        let local = serving_user(host, users, &self.recipient)
            .await
            .map_err(Trouble::Failure)?;
        match &local {
            Some(local) => match host.hand_over(&self.user, local, &links).await {
                Some(handed) => handed.map_err(|error| {
                    Trouble::Failure(Failure::internal(format!("handing over: {error}")))
                }),
                None => receive_here(host, &self.user, local, &links, now, fresh).await,
            },
            None => {
                Federation::new(host, &self.user, now, fresh, None)
                    .notify(&self.recipient, links)
                    .await
            }
        }
    }

    /// Records `outcome` for `items` in one job.
    #[allow(clippy::too_many_arguments)]
    async fn record<H: Host>(
        &self,
        host: &H,
        items: &[Queued],
        outcome: Result<NotificationAnswer, Trouble>,
        now: RecordDate,
        fresh: &Fresh,
        retry: &RetryPolicy,
        report: &mut DeliveryReport,
    ) {
        let now_ms = now.unix_millis();
        let statements = match outcome {
            Ok(answer) => {
                // Each version refused for good is given up on its own; the
                // rest were delivered.
                let mut statements = Vec::with_capacity(items.len());
                for item in items {
                    let refused = answer.refused.iter().find(|refused| {
                        refused.record_id == item.record_id
                            && refused.version_hash == item.version_hash
                    });
                    match refused {
                        None => {
                            report.delivered += 1;
                            statements.push(delivered_sql(item.id));
                        }
                        Some(refused) => {
                            report.failed += 1;
                            let error = format!("{}: {refused}", self.recipient);
                            statements.push(failed_attempt_sql(
                                item.id,
                                item.attempts,
                                None,
                                now_ms,
                                &error,
                            ));
                            report.errors.push(error);
                        }
                    }
                }
                statements
            }
            Err(trouble) => {
                let error = format!("{}: {trouble}", self.recipient);
                let transient = trouble.is_transient();
                // A peer that limits our rate says when to come back.
                let not_before = match &trouble {
                    Trouble::Peer(PeerError::RateLimited {
                        retry_after_secs, ..
                    }) => Some(
                        now_ms.saturating_add(
                            i64::try_from(*retry_after_secs)
                                .unwrap_or(i64::MAX / 1000)
                                .saturating_mul(1000),
                        ),
                    ),
                    _ => None,
                };
                // One jitter for the batch: its notifications stay together.
                let jitter = f64::from(fresh.bytes::<1>()[0]) / 255.0;
                let mut statements = Vec::with_capacity(items.len());
                for item in items {
                    let due = transient
                        .then(|| {
                            retry.retry_at(item.attempts + 1, item.queued_at_ms, now_ms, jitter)
                        })
                        .flatten()
                        .map(|due| not_before.map_or(due, |at| due.max(at)));
                    match due {
                        Some(_) => report.retried += 1,
                        None => report.failed += 1,
                    }
                    statements.push(failed_attempt_sql(
                        item.id,
                        item.attempts,
                        due,
                        now_ms,
                        &error,
                    ));
                }
                report.errors.push(error);
                statements
            }
        };
        let recorded = match host.run(Job::Statements(statements)).await {
            Ok(Ok(_)) => return,
            Ok(Err(refused)) => refused.to_string(),
            Err(failure) => failure.to_string(),
        };
        report.errors.push(format!(
            "{}: recording the outcome failed: {recorded}",
            self.recipient
        ));
    }
}

fn queued_row(row: &Row) -> Result<Queued, RowError> {
    let parse = |column: usize, expected: &'static str| RowError { column, expected };
    let recipient = row.text(2)?.parse().map_err(|_| parse(2, "an entity"))?;
    let record_id = row.text(3)?.parse().map_err(|_| parse(3, "a record id"))?;
    let version_hash = row
        .text(4)?
        .parse()
        .map_err(|_| parse(4, "a version hash"))?;
    Ok(Queued {
        id: row.integer(0)?,
        user_id: row.integer(1)?,
        record_id,
        version_hash,
        recipient,
        queued_at_ms: row.integer(5)?,
        attempts: u32::try_from(row.integer(7)?).unwrap_or(u32::MAX),
    })
}
