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
use folio_core::route::route;
use folio_core::{Job, Upkeep};
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
    if let Some(location) = folio_core::http::https_redirect(url.as_str(), store::is_dev(&env)) {
        return Response::redirect_with_status(
            worker::Url::parse(&location)?,
            folio_core::http::HTTPS_REDIRECT_STATUS,
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

/// Core's upkeep plan, on D1 and R2.
async fn upkeep(env: &Env) -> Result<()> {
    let db = env.d1("DB")?;
    let bucket = env.bucket("BLOBS")?;
    let now = store::now();
    let upkeep = Upkeep::at(now);
    run(&db, upkeep.prune(), now).await?;
    for row in d1::fetch(&db, &upkeep.expired_blobs()).await? {
        let Ok(blob) = Upkeep::expired_blob(&row) else {
            continue;
        };
        run(&db, blob.release(), now).await?;
        let held = d1::fetch(&db, &blob.held()).await?;
        // Another store may be uploading the same bytes right now: R2 dates
        // an object by its latest upload, which the plan's freshness rule reads.
        let stored_at = bucket.head(&blob.hash).await?.and_then(|object| {
            let millis = i64::try_from(object.uploaded().as_millis()).ok()?;
            RecordDate::from_unix_millis(millis).ok()
        });
        if upkeep.may_remove_bytes(&held, stored_at) {
            bucket.delete(&blob.hash).await?;
            worker::console_log!("collected the expired blob {}", blob.hash);
        }
    }
    remove_unfinished_uploads(&bucket, &upkeep).await
}

/// Removes what uploads that stopped half way left under
/// [`store::UNFINISHED_UPLOADS`] (an object's upload stopped between
/// receiving the bytes and placing them under their hash).
async fn remove_unfinished_uploads(bucket: &worker::Bucket, upkeep: &Upkeep) -> Result<()> {
    let before = upkeep.unfinished_uploads_before();
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
            if started.is_some_and(|started| started < before) {
                bucket.delete(object.key()).await?;
                worker::console_log!("removed the unfinished upload {}", object.key());
            }
        }
        match page.cursor() {
            Some(next) if page.truncated() => cursor = Some(next),
            _ => return Ok(()),
        }
    }
}

/// Runs one of upkeep's jobs on D1 (statements only, which no other write
/// races: outside any user object).
async fn run(db: &worker::D1Database, job: Job, now: RecordDate) -> Result<()> {
    let (outcome, _) = d1::run_job(db, job, now).await?;
    outcome.map_err(|refused| worker::Error::RustError(refused.to_string()))?;
    Ok(())
}
