//! The outbox (federation, `docs/federation.md` §4): the loop that
//! delivers what core queued, and `folio outbox`.
//!
//! Core decides everything (what is due, how it is batched and sent, when
//! a failure is tried again); this loop only wakes it: when a write queued
//! notifications, when the next one is due, and at least every
//! [`IDLE_WAKE`] in case another process (`folio outbox retry`) changed
//! the outbox.

use std::sync::Arc;
use std::time::Duration;

use folio_core::Fresh;
use folio_core::service::deliver_due;

use crate::server::App;

/// The longest the loop sleeps with nothing due.
const IDLE_WAKE: Duration = Duration::from_secs(30);

/// Delivers notifications until the server stops.
pub async fn deliver(app: Arc<App>) {
    loop {
        let now = app.clock.now();
        let fresh = Fresh::from_seed(rand::random());
        let sleep = match deliver_due(&*app, now, &fresh, None, &app.outbox_retry).await {
            Ok(round) => {
                if round.delivered + round.retried + round.failed > 0 {
                    tracing::info!(
                        delivered = round.delivered,
                        retried = round.retried,
                        failed = round.failed,
                        "outbox"
                    );
                }
                for error in &round.errors {
                    tracing::warn!(%error, "a notification was not delivered");
                }
                match round.next_due_ms {
                    Some(due) => {
                        let wait = due.saturating_sub(app.clock.now().unix_millis());
                        Duration::from_millis(u64::try_from(wait).unwrap_or(0)).min(IDLE_WAKE)
                    }
                    None => IDLE_WAKE,
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the outbox could not be read");
                Duration::from_secs(5)
            }
        };
        if sleep.is_zero() {
            continue;
        }
        tokio::select! {
            () = app.outbox.notified() => {}
            () = tokio::time::sleep(sleep) => {}
        }
    }
}

/// The rows `folio outbox` lists at most.
const LISTED_ROWS: i64 = 10_000;

/// Prints the pending and failed notifications: a line each, or JSON.
pub fn list(conn: &rusqlite::Connection, json: bool) -> Result<(), crate::db::DbError> {
    use folio_core::RowExt;
    let rows = crate::db::fetch(conn, &folio_core::store::outbox_sql(LISTED_ROWS))?;
    if rows.is_empty() && !json {
        println!("The outbox is empty: every notification was delivered.");
    }
    for row in &rows {
        let millis = |column| row.optional_integer(column).ok().flatten();
        let date = |ms: Option<i64>| {
            ms.and_then(|ms| folio_core::model::RecordDate::from_unix_millis(ms).ok())
                .map(|date| date.to_string())
        };
        let state = match millis(9) {
            Some(_) => "failed",
            None => "pending",
        };
        let entry = serde_json::json!({
            "user": row.text(10).unwrap_or_default(),
            "recipient": row.text(2).unwrap_or_default(),
            "record_id": row.text(3).unwrap_or_default(),
            "version_hash": row.text(4).unwrap_or_default(),
            "state": state,
            "queued_at": date(millis(5)),
            "due_at": date(millis(6)),
            "attempts": millis(7).unwrap_or(0),
            "last_error": row.optional_text(8).ok().flatten(),
            "failed_at": date(millis(9)),
        });
        if json {
            println!("{entry}");
        } else {
            println!(
                "{state}\t{}\t{} -> {}\t{}\tattempts {}\t{}",
                entry["user"].as_str().unwrap_or_default(),
                entry["record_id"].as_str().unwrap_or_default(),
                entry["recipient"].as_str().unwrap_or_default(),
                entry["due_at"].as_str().unwrap_or_default(),
                entry["attempts"],
                entry["last_error"].as_str().unwrap_or("-"),
            );
        }
    }
    Ok(())
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
