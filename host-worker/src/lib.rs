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

use folio_core::route::route;
use worker::{Context, Env, Request, Response, Result, event};

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
