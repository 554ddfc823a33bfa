//! The outbox (federation, `docs/federation.md` §4): the loop that
//! delivers what core queued, and `folio outbox`.
//!
//! Core decides everything (what is due, how it is batched and sent, what
//! an outcome does to the rows, when a failure is tried again); this loop
//! only runs it. It plans when a write queued notifications, when a
//! delivery ends, when the next one is due, and at least every
//! [`IDLE_WAKE`] in case another process (`folio outbox retry`, `send-now`) changed
//! the outbox; it starts each planned delivery (one user, one recipient)
//! as a task of its own under core's deadline, so a slow recipient delays
//! nobody else's, and never starts a delivery whose key is still in
//! flight. Stopping the loop stops its deliveries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use folio_core::Fresh;
use folio_core::service::{
    DELIVERY_DEADLINE_MS, Delivery, DeliveryKey, DeliveryReport, MAX_DELIVERIES_AT_ONCE,
    OutboxState, next_due, plan_deliveries,
};
use tokio::task::{Id, JoinSet};

use crate::app::App;

/// The longest the loop sleeps with nothing due: how soon it sees what
/// another process (`folio outbox send-now`, `retry`) made due. Each wake
/// reads two indexed statements of the outbox.
pub const IDLE_WAKE: Duration = Duration::from_secs(5);
/// The wait after the outbox could not be read.
const READ_FAILED_WAIT: Duration = Duration::from_secs(5);

/// Delivers notifications until the server stops (the task is aborted,
/// which aborts the deliveries it started).
pub async fn deliver(app: Arc<App>) {
    let mut deliveries = JoinSet::new();
    let mut in_flight: HashMap<Id, DeliveryKey> = HashMap::new();
    loop {
        while let Some(ended) = deliveries.try_join_next_with_id() {
            reap(ended, &mut in_flight);
        }
        let sleep = match start_due(&app, &mut deliveries, &mut in_flight).await {
            Ok(sleep) => sleep,
            Err(error) => {
                tracing::warn!(%error, "the outbox could not be read");
                READ_FAILED_WAIT
            }
        };
        if sleep.is_zero() {
            continue;
        }
        tokio::select! {
            () = app.outbox.notified() => {}
            () = tokio::time::sleep(sleep) => {}
            Some(ended) = deliveries.join_next_with_id() => reap(ended, &mut in_flight),
        }
    }
}

/// Logs a delivery that ended, and frees its key.
fn reap(
    ended: Result<(Id, DeliveryReport), tokio::task::JoinError>,
    in_flight: &mut HashMap<Id, DeliveryKey>,
) {
    let id = match ended {
        Ok((id, report)) => {
            report_delivery(&report);
            id
        }
        Err(error) => {
            tracing::error!(%error, "a delivery failed");
            error.id()
        }
    };
    in_flight.remove(&id);
}

/// Starts the deliveries due now whose keys are not in flight; how long
/// to wait for the next one.
async fn start_due(
    app: &Arc<App>,
    deliveries: &mut JoinSet<DeliveryReport>,
    in_flight: &mut HashMap<Id, DeliveryKey>,
) -> Result<Duration, String> {
    let now = app.clock.now();
    let busy: Vec<DeliveryKey> = in_flight.values().cloned().collect();
    let room = MAX_DELIVERIES_AT_ONCE.saturating_sub(busy.len());
    if room > 0 {
        for delivery in plan_deliveries(&**app, now, None, &busy, room).await? {
            let key = delivery.key();
            let task = deliveries.spawn(run(Arc::clone(app), delivery));
            in_flight.insert(task.id(), key);
        }
    }
    if in_flight.len() >= MAX_DELIVERIES_AT_ONCE {
        // Woken when one ends.
        return Ok(IDLE_WAKE);
    }
    let busy: Vec<DeliveryKey> = in_flight.values().cloned().collect();
    Ok(match next_due(&**app, None, &busy).await? {
        Some(due) => {
            let wait = due.saturating_sub(app.clock.now().unix_millis());
            Duration::from_millis(u64::try_from(wait).unwrap_or(0)).min(IDLE_WAKE)
        }
        None => IDLE_WAKE,
    })
}

/// Runs one delivery under its deadline, and records it when the deadline
/// passed first.
async fn run(app: Arc<App>, delivery: Delivery) -> DeliveryReport {
    let fresh = Fresh::from_seed(rand::random());
    let deadline = Duration::from_millis(DELIVERY_DEADLINE_MS);
    let sending = delivery.run(&*app, app.clock.now(), &fresh, &app.outbox_retry);
    match tokio::time::timeout(deadline, sending).await {
        Ok(report) => report,
        Err(_) => {
            delivery
                .deadline_passed(&*app, app.clock.now(), &fresh, &app.outbox_retry)
                .await
        }
    }
}

/// Counts what a delivery did, and logs it.
fn report_delivery(report: &DeliveryReport) {
    crate::metrics::METRICS.delivery(report);
    if report.delivered + report.retried + report.failed > 0 {
        tracing::info!(
            delivered = report.delivered,
            retried = report.retried,
            failed = report.failed,
            "outbox"
        );
    }
    for error in &report.errors {
        tracing::warn!(%error, "a notification was not delivered");
    }
}

/// The rows `folio outbox` lists at most.
const LISTED_ROWS: i64 = 10_000;

/// The columns of `folio outbox`'s human output, tab-separated.
const LIST_HEADER: &str = "STATE\tUSER\tRECORD -> RECIPIENT\tDUE\tATTEMPTS\tLAST ERROR";

/// Prints the notifications waiting and given up: a header and a line
/// each, or a JSON object each. A notification is `pending` (never tried),
/// `retrying` (failed, due again at its `due_at`) or `failed` (given up).
pub fn list(conn: &rusqlite::Connection, json: bool) -> Result<(), crate::db::DbError> {
    use folio_core::RowExt;
    let rows = crate::db::fetch(conn, &folio_core::store::outbox_sql(LISTED_ROWS))?;
    if rows.is_empty() && !json {
        println!("The outbox is empty: every notification was delivered.");
    }
    if !rows.is_empty() && !json {
        println!("{LIST_HEADER}");
    }
    for row in &rows {
        let millis = |column| row.optional_integer(column).ok().flatten();
        let date = |ms: Option<i64>| {
            ms.and_then(|ms| folio_core::model::RecordDate::from_unix_millis(ms).ok())
                .map(|date| date.to_string())
        };
        let attempts = millis(7).unwrap_or(0);
        let state = match (millis(9), attempts) {
            (Some(_), _) => OutboxState::Failed,
            (None, 0) => OutboxState::Pending,
            (None, _) => OutboxState::Retrying,
        };
        let entry = serde_json::json!({
            "user": row.text(10).unwrap_or_default(),
            "recipient": row.text(2).unwrap_or_default(),
            "record_id": row.text(3).unwrap_or_default(),
            "version_hash": row.text(4).unwrap_or_default(),
            "state": state.label(),
            "queued_at": date(millis(5)),
            "due_at": date(millis(6)),
            "attempts": attempts,
            "last_error": row.optional_text(8).ok().flatten(),
            "failed_at": date(millis(9)),
        });
        if json {
            println!("{entry}");
        } else {
            // A failed notification is due never (until `retry`).
            let due = match state {
                OutboxState::Failed => "-",
                _ => entry["due_at"].as_str().unwrap_or_default(),
            };
            println!(
                "{}\t{}\t{} -> {}\t{due}\t{attempts}\t{}",
                state.label(),
                entry["user"].as_str().unwrap_or_default(),
                entry["record_id"].as_str().unwrap_or_default(),
                entry["recipient"].as_str().unwrap_or_default(),
                entry["last_error"].as_str().unwrap_or("-"),
            );
        }
    }
    Ok(())
}

/// Makes the notifications waiting for a retry (of every recipient, or of
/// `recipient`) due now; how many. A running server sends them at its next
/// plan, within [`IDLE_WAKE`].
pub fn send_now(
    conn: &rusqlite::Connection,
    now: folio_core::model::RecordDate,
    recipient: Option<&folio_core::model::Entity>,
) -> Result<usize, crate::db::DbError> {
    crate::db::execute(
        conn,
        &folio_core::store::send_now_sql(now.unix_millis(), None, recipient, false),
    )
}

/// Makes every failed notification due again; how many.
pub fn retry_failed(
    conn: &rusqlite::Connection,
    now: folio_core::model::RecordDate,
) -> Result<usize, crate::db::DbError> {
    crate::db::execute(
        conn,
        &folio_core::store::retry_failed_sql(now.unix_millis()),
    )
}
