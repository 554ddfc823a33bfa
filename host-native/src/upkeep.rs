//! Core's upkeep rounds ([`UpkeepRound`]) on the native host: their reads
//! on the readers, their jobs in the writer, blob bytes in the data
//! directory, under the lock uploads place their bytes and rows under, and
//! the per-address rate buckets.

use std::sync::Arc;
use std::time::Duration;

use folio_core::{UPKEEP_INTERVAL_MS, UpkeepReport, UpkeepRound, UpkeepStep};

use crate::app::App;

/// Runs a round of upkeep every [`UPKEEP_INTERVAL_MS`], for good.
pub async fn every_interval(app: Arc<App>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(UPKEEP_INTERVAL_MS));
    loop {
        ticks.tick().await;
        let mut round = UpkeepRound::start(app.clock.now(), UPKEEP_INTERVAL_MS);
        log(&drive(&app, &mut round).await);
    }
}

/// The sweep before the listener opens, when no upload is on its way:
/// what an earlier run left half done (an unfinished upload, a file whose
/// row never committed) goes now.
pub async fn before_serving(app: &App) {
    let mut round = UpkeepRound::before_serving(app.clock.now());
    log(&drive(app, &mut round).await);
}

/// Does what each step of `round` says, until it is done.
async fn drive(app: &App, round: &mut UpkeepRound) -> UpkeepReport {
    let mut placing = None;
    loop {
        match round.step() {
            UpkeepStep::RemoveUnfinishedUploads { begun_before } => {
                match app.blobs.sweep_uploads(begun_before).await {
                    Ok(count) => round.uploads_removed(count),
                    Err(error) => round.failed(error),
                }
            }
            UpkeepStep::Read(statement) => match app.readers.fetch(statement).await {
                Ok(rows) => round.supply(rows),
                Err(error) => round.failed(error),
            },
            UpkeepStep::ListKept => match app.blobs.kept().await {
                Ok(hashes) => round.kept(hashes),
                Err(error) => round.failed(error),
            },
            UpkeepStep::Lock => {
                placing = Some(app.blobs.lock().await);
                round.done();
            }
            UpkeepStep::Unlock => {
                placing = None;
                round.done();
            }
            UpkeepStep::Run(job) => match app.writer.run_when_ready(job).await {
                Ok(Ok(_)) => round.done(),
                Ok(Err(refused)) => round.failed(refused),
                Err(error) => round.failed(error),
            },
            UpkeepStep::StoredAt(hash) => match app.blobs.stored_at(hash).await {
                Ok(stored_at) => round.stored_at(stored_at),
                Err(error) => round.failed(error),
            },
            UpkeepStep::RemoveBytes(hash) => match app.blobs.remove(hash).await {
                Ok(()) => round.done(),
                Err(error) => round.failed(error),
            },
            UpkeepStep::ForgetIdleRates(now) => {
                app.resident.rates().forget_idle(now);
                round.done();
            }
            UpkeepStep::Done(report) => {
                drop(placing);
                return report.clone();
            }
        }
    }
}

/// One line for what a round removed, and one for each step that failed.
fn log(report: &UpkeepReport) {
    for (phase, error) in &report.failures {
        tracing::warn!(phase, %error, "an upkeep step failed");
    }
    if report.did_anything() {
        tracing::info!(
            unfinished_uploads = report.unfinished_uploads,
            unheld_files = report.stray_blobs,
            expired_blobs = report.expired_blobs,
            collected_blobs = report.collected_blobs,
            searched = report.searched,
            unsearchable = report.unsearchable,
            "upkeep removed what nothing holds and indexed unsearched records"
        );
    }
}
