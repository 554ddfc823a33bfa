//! Folio's edge host on Cloudflare Workers: the same core service as the
//! native host, over D1 (records), R2 (blobs) and one Durable Object per
//! user ([`UserStore`]) that runs every request to that user's store: its
//! writes go through one ordered place, its nonces and event streams live
//! there.
//!
//! The worker entry only sends each request to its object; the object
//! hands it to `folio_core::handle` with itself as the host. Rates
//! of a client address are counted across users in one [`RateObject`] per
//! address (`rates`).

mod d1;
mod peers;
mod rates;
mod store;

use folio_core::model::RecordDate;
use folio_core::service::route::route;
use folio_core::{UpkeepReport, UpkeepRound, UpkeepStep};
use worker::{Context, Env, Request, Response, Result, ScheduleContext, ScheduledEvent, event};

pub use rates::RateObject;
pub use store::UserStore;

/// The Durable Object namespace of the user stores.
pub(crate) const USERS: &str = "USERS";

/// The object that answers requests outside any user's store (discovery,
/// error-type pages, unknown paths).
const SERVER_OBJECT: &str = "";

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let url = req.url()?;
    if let Some(location) =
        folio_core::service::http::https_redirect(url.as_str(), store::is_dev(&env))
    {
        return Response::redirect_with_status(
            worker::Url::parse(&location)?,
            folio_core::service::http::HTTPS_REDIRECT_STATUS,
        );
    }
    // The host users' objects hand local deliveries over on: never
    // reachable from outside, even where a client chooses its Host.
    if url.host_str() == Some(store::INTERNAL_HOST) {
        return Response::error("Not Found", 404);
    }
    let object = match route(url.path()) {
        Ok(endpoint) => endpoint.user().map(|name| name.as_str().to_owned()),
        Err(_) => None,
    };
    let namespace = env.durable_object(USERS)?;
    let stub = namespace
        .id_from_name(object.as_deref().unwrap_or(SERVER_OBJECT))?
        .get_stub()?;
    stub.fetch_with_request(req).await
}

/// The cron trigger: events past retention and expired unlinked blobs.
/// Nonces are forgotten by each user object as it checks new ones.
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    if let Err(error) = upkeep(&env).await {
        worker::console_error!("upkeep: {error}");
    }
}

/// How often the cron trigger runs upkeep (`crons` in wrangler.toml).
pub const UPKEEP_INTERVAL_MS: u64 = 15 * 60 * 1_000;

/// A round of core's upkeep ([`UpkeepRound`]), on D1 and R2.
async fn upkeep(env: &Env) -> Result<()> {
    let db = env.d1("DB")?;
    let bucket = env.bucket("BLOBS")?;
    let now = store::now();
    let mut round = UpkeepRound::start(now, UPKEEP_INTERVAL_MS);
    loop {
        let done = match round.step() {
            UpkeepStep::RemoveUnfinishedUploads { begun_before } => {
                remove_unfinished_uploads(&bucket, begun_before)
                    .await
                    .map(|count| round.uploads_removed(count))
            }
            UpkeepStep::Read(statement) => d1::fetch(&db, statement)
                .await
                .map(|rows| round.supply(rows)),
            UpkeepStep::ListKept => kept_blobs(&bucket).await.map(|hashes| round.kept(hashes)),
            // Uploads place their bytes without a lock here: R2 dates an
            // object by its latest upload, which core's freshness rule reads.
            UpkeepStep::Lock | UpkeepStep::Unlock => {
                round.done();
                Ok(())
            }
            UpkeepStep::Run(job) => match d1::run_job(&db, job, now).await {
                Ok((Ok(_), _)) => {
                    round.done();
                    Ok(())
                }
                Ok((Err(refused), _)) => Err(worker::Error::RustError(refused.to_string())),
                Err(error) => Err(error),
            },
            UpkeepStep::StoredAt(hash) => {
                let stored_at = bucket.head(hash).await.map(|object| {
                    let millis = i64::try_from(object?.uploaded().as_millis()).ok()?;
                    RecordDate::from_unix_millis(millis).ok()
                });
                stored_at.map(|stored_at| round.stored_at(stored_at))
            }
            UpkeepStep::RemoveBytes(hash) => bucket.delete(hash).await.map(|()| round.done()),
            // An address's buckets live in its rate object, in memory,
            // and go with it once idle (rates.rs).
            UpkeepStep::ForgetIdleRates(_) => {
                round.done();
                Ok(())
            }
            UpkeepStep::Done(report) => {
                log(report);
                return Ok(());
            }
        };
        if let Err(error) = done {
            round.failed(error);
        }
    }
}

/// One line for what a round removed, and one for each step that failed.
fn log(report: &UpkeepReport) {
    for (phase, error) in &report.failures {
        worker::console_error!("upkeep: {phase}: {error}");
    }
    if report.did_anything() {
        worker::console_log!(
            "upkeep: {} unfinished uploads, {} unheld blobs, {} expired blobs of which {} collected, \
             {} records indexed for search ({} unreadable)",
            report.unfinished_uploads,
            report.stray_blobs,
            report.expired_blobs,
            report.collected_blobs,
            report.searched,
            report.unsearchable
        );
    }
}

/// The hashes of the blobs whose bytes R2 keeps: every object outside
/// [`store::UNFINISHED_UPLOADS`].
async fn kept_blobs(bucket: &worker::Bucket) -> Result<Vec<String>> {
    let mut hashes = Vec::new();
    let mut cursor = None;
    loop {
        let mut listing = bucket.list();
        if let Some(cursor) = cursor.take() {
            listing = listing.cursor(cursor);
        }
        let page = listing.execute().await?;
        hashes.extend(
            (page.objects().iter())
                .map(|object| object.key())
                .filter(|key| !key.starts_with(store::UNFINISHED_UPLOADS)),
        );
        match page.cursor() {
            Some(next) if page.truncated() => cursor = Some(next),
            _ => return Ok(hashes),
        }
    }
}

/// Removes what uploads that stopped half way left under
/// [`store::UNFINISHED_UPLOADS`] (an object's upload stopped between
/// receiving the bytes and placing them under their hash), begun before
/// `before` (every one: `None`); how many.
async fn remove_unfinished_uploads(
    bucket: &worker::Bucket,
    before: Option<RecordDate>,
) -> Result<usize> {
    let mut removed = 0;
    let mut cursor = None;
    loop {
        let mut listing = bucket.list().prefix(store::UNFINISHED_UPLOADS);
        if let Some(cursor) = cursor.take() {
            listing = listing.cursor(cursor);
        }
        let page = listing.execute().await?;
        for object in page.objects() {
            let started = i64::try_from(object.uploaded().as_millis())
                .ok()
                .and_then(|millis| RecordDate::from_unix_millis(millis).ok());
            let abandoned = match before {
                None => true,
                Some(before) => started.is_some_and(|started| started < before),
            };
            if abandoned {
                bucket.delete(object.key()).await?;
                removed += 1;
            }
        }
        match page.cursor() {
            Some(next) if page.truncated() => cursor = Some(next),
            _ => return Ok(removed),
        }
    }
}
