//! The checks, one module per area, each a small async fn registered in its
//! module's table under a stable `area/what-it-checks` name. The order of
//! [`all`] is the order of the run: rate limits come last because they
//! exhaust the server's buckets (federation's notification flood empties
//! only its hostile entity's).

use std::future::Future;
use std::pin::Pin;

use crate::context::Ctx;

mod auth;
mod bearer;
mod blobs;
mod consent;
mod console;
mod cors;
mod discovery;
mod errors;
mod events;
mod faults;
mod federation;
mod filters;
mod identity;
mod limits;
mod links;
mod list;
mod permissions;
mod rate_limits;
mod records;
mod registration;
mod revocation;
mod scopes;
mod search;
mod transport;
mod types;
mod updates;
mod versions;

/// What a check returns: `Err` holds the reason it failed.
pub type CheckResult = Result<(), String>;

pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = CheckResult> + 'a>>;

/// What a check needs from the target beyond the API itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Api,
    /// TLS and ALPN on `base_url` (`transport: true`).
    Transport,
    /// A plain-HTTP `http_redirect_url` (and `transport: true`).
    Redirect,
    /// The user's `password`, to sign in on the consent page.
    Password,
    /// A second user's store (`other_user`).
    OtherUser,
    /// A way to make the store fail (`fault_hook`).
    Faults,
    /// The suite's hostile peer (`hostile_peer`), which the server reaches.
    HostilePeer,
    /// A target on loopback, which the suite reaches from several of its
    /// addresses (127.0.0.2, 127.0.0.3, …).
    Loopback,
}

pub struct Check {
    pub name: &'static str,
    pub needs: Needs,
    pub run: for<'a> fn(&'a Ctx) -> CheckFuture<'a>,
}

/// Registers `function` as the check `name`.
macro_rules! check {
    ($name:literal, $function:path) => {
        check!($name, $function, $crate::checks::Needs::Api)
    };
    ($name:literal, $function:path, $needs:expr) => {
        $crate::checks::Check {
            name: $name,
            needs: $needs,
            run: |ctx| Box::pin($function(ctx)),
        }
    };
}

pub(crate) use check;

/// Every check, in the order they run.
pub fn all() -> Vec<Check> {
    [
        transport::checks(),
        cors::checks(),
        discovery::checks(),
        identity::checks(),
        errors::checks(),
        auth::checks(),
        bearer::checks(),
        records::checks(),
        updates::checks(),
        types::checks(),
        links::checks(),
        list::checks(),
        filters::checks(),
        search::checks(),
        versions::checks(),
        permissions::checks(),
        scopes::checks(),
        registration::checks(),
        consent::checks(),
        console::checks(),
        revocation::checks(),
        blobs::checks(),
        events::checks(),
        faults::checks(),
        federation::checks(),
        limits::checks(),
        rate_limits::checks(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
