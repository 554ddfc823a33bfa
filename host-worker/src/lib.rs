//! Folio's edge host on Cloudflare Workers: the same core service as the
//! native host, over D1 (records), R2 (blobs) and one Durable Object per
//! user ([`UserStore`]) that runs every request to that user's store: its
//! writes go through one ordered place, its nonces and event streams live
//! there.
//!
//! The worker entry only sends each request to its object; the object
//! hands it to `folio_core::service::handle` with itself as the host.

mod d1;
mod store;

use folio_core::blob::UNLINKED_BLOB_LIFETIME_MS;
use folio_core::events::retention_cutoff;
use folio_core::route::route;
use folio_core::service::store::RowExt;
use folio_core::store::{blob_held_sql, delete_blob_sql, expired_blobs_sql, prune_events_sql};
use worker::{Context, Env, Request, Response, Result, ScheduleContext, ScheduledEvent, event};

pub use store::UserStore;

/// The Durable Object namespace of the user stores.
const USERS: &str = "USERS";

/// The object that answers requests outside any user's store (discovery,
/// error-type pages, unknown paths).
const SERVER_OBJECT: &str = "";

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let url = req.url()?;
    if let Some(location) = folio_core::http::https_redirect(url.as_str(), store::is_dev(&env)) {
        return Response::redirect_with_status(worker::Url::parse(&location)?, 308);
    }
    let object = match route(url.path()) {
        Ok(endpoint) => endpoint.user().map(str::to_owned),
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

async fn upkeep(env: &Env) -> Result<()> {
    let db = env.d1("DB")?;
    let bucket = env.bucket("BLOBS")?;
    let now = store::now();
    d1::fetch(&db, &prune_events_sql(retention_cutoff(now))).await?;
    for row in d1::fetch(&db, &expired_blobs_sql(now)).await? {
        let (Ok(user_id), Ok(hash)) = (row.integer(0), row.text(1)) else {
            continue;
        };
        d1::fetch(&db, &delete_blob_sql(user_id, hash)).await?;
        let held = d1::fetch(&db, &blob_held_sql(hash)).await?;
        if held.first().and_then(|row| row.integer(0).ok()) != Some(0) {
            continue;
        }
        // Another store may be uploading the same bytes right now: its
        // object is fresh, so only an object older than an upload's
        // lifetime is removed.
        let fresh_after = now.unix_millis() - UNLINKED_BLOB_LIFETIME_MS;
        let uploaded = bucket
            .head(hash)
            .await?
            .map(|object| object.uploaded().as_millis());
        if uploaded.is_some_and(|at| i64::try_from(at).unwrap_or(i64::MAX) < fresh_after) {
            bucket.delete(hash).await?;
            worker::console_log!("collected the expired blob {hash}");
        }
    }
    Ok(())
}
