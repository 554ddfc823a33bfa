//! The console's Outbox page (`console/outbox`): the owner's notifications
//! that wait for other servers, grouped by recipient, each group with why
//! its latest attempt failed and a "Retry now" form
//! (`console/outbox/send-now`), which makes the group's notifications due
//! now, those given up included, and wakes the host's delivery
//! ([`Job::Reschedule`]).

use crate::model::{Entity, RecordDate};
use crate::service::console::Form;
use crate::service::console::page::{
    Frame, OutboxPage, OutboxPeer, OutboxRow, console_href, render,
};
use crate::service::jobs::Job;
use crate::service::observe::OutboxState;
use crate::service::store::{RowError, RowExt};
use crate::service::{Context, Host, User};
use crate::store::{send_now_sql, user_outbox_sql};

use super::{Page, html, logged, message, see_other, write_failed};

/// The most notifications the page lists, the oldest: a store may hold
/// many for a peer that is long down, and the page's work stays bounded.
pub(crate) const MAX_OUTBOX_ROWS_SHOWN: usize = 500;

/// The Outbox page.
pub(super) async fn outbox_page<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    frame: Frame<'_>,
    notice: Option<&str>,
) -> Page<H::Stream> {
    let rows = cx
        .host
        .fetch(&user_outbox_sql(user.id, MAX_OUTBOX_ROWS_SHOWN as i64 + 1))
        .await
        .map_err(|error| logged(cx.host, &error))?;
    let truncated = rows.len() > MAX_OUTBOX_ROWS_SHOWN;
    let mut peers: Vec<OutboxPeer> = Vec::new();
    for row in rows.iter().take(MAX_OUTBOX_ROWS_SHOWN) {
        let (recipient, row, last_error) =
            outbox_row(&frame, &user.entity, row).map_err(|error| logged(cx.host, &error))?;
        let at = match peers.iter().position(|peer| peer.recipient == recipient) {
            Some(at) => at,
            None => {
                peers.push(OutboxPeer {
                    anchor: peers.len().to_string(),
                    recipient,
                    last_error: None,
                    rows: Vec::new(),
                });
                peers.len() - 1
            }
        };
        // Rows come oldest first: the last error seen is the latest.
        if last_error.is_some() {
            peers[at].last_error = last_error;
        }
        peers[at].rows.push(row);
    }
    Ok(html(
        200,
        render(&OutboxPage {
            frame,
            peers,
            truncated,
            notice,
        }),
    ))
}

/// One row of `user_outbox_sql`: its recipient, what the page shows of it,
/// and its last error.
fn outbox_row(
    frame: &Frame<'_>,
    entity: &Entity,
    row: &[crate::store::SqlValue],
) -> Result<(String, OutboxRow, Option<String>), RowError> {
    let attempts = row.integer(7)?;
    let failed = row.optional_integer(9)?.is_some();
    let state = match (failed, attempts) {
        (true, _) => OutboxState::Failed,
        (false, 0) => OutboxState::Pending,
        (false, _) => OutboxState::Retrying,
    };
    let due_at = match state {
        OutboxState::Failed => None,
        _ => RecordDate::from_unix_millis(row.integer(6)?)
            .ok()
            .map(|date| date.to_string()),
    };
    let id = row.text(3)?.to_owned();
    let shown = OutboxRow {
        href: frame.href(&format!("/browse/{entity}/{id}")),
        id,
        state: state.label(),
        due_at,
        attempts,
    };
    Ok((
        row.text(2)?.to_owned(),
        shown,
        row.optional_text(8)?.map(str::to_owned),
    ))
}

/// "Retry now" for the recipient the form names: its notifications are
/// due now, those given up with a fresh day of retries; then the Outbox
/// page again.
pub(super) async fn send_now<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    form: &Form,
    now: RecordDate,
) -> Page<H::Stream> {
    let Some(recipient) = form
        .get("recipient")
        .and_then(|entity| entity.parse::<Entity>().ok())
    else {
        return Err(message(
            400,
            Some(&user.name),
            "No such recipient",
            "The form did not name a recipient. Go back to the Outbox page and use its buttons.",
        ));
    };
    let job = Job::Reschedule {
        user: user.id,
        statements: vec![send_now_sql(
            now.unix_millis(),
            Some(user.id),
            Some(&recipient),
            true,
        )],
    };
    match cx.run_job(job).await {
        Ok(_) => Ok(see_other(
            &console_href(&user.name, "/outbox?done=sent"),
            None,
        )),
        Err(failure) => Err(write_failed(cx.host, &user.name, &failure)),
    }
}
