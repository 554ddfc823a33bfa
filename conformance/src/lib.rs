//! Folio's conformance suite: an independent client that checks, against any
//! base URL, every behaviour of the record service API a client can observe
//! (the spec, as settled by PROTOCOL.md).
//!
//! It shares no code with the server: it is built on the Rust client,
//! `folio-client` (re-exported here as [`signer`], [`client`] and [`sse`]),
//! which signs requests with a signer of its own, speaks HTTP (reqwest over
//! rustls, HTTP/2 when the server offers it) and reads event streams; it
//! opens raw TLS connections through [`tls`] for the transport checks.
//!
//! - [`target`]: the JSON description of the server under test.
//! - [`context`]: what each check receives, with helpers that create the
//!   records a check needs under fresh ids.
//! - [`expect`]: comparing responses with the protocol (statuses, problem
//!   types, dates, hashes).
//! - [`dates`]: RecordDates to and from the clock.
//! - [`apps`]: apps the checks register themselves and take through the
//!   consent page; [`browser`] drives that page over plain HTML forms,
//!   reading them with [`html`].
//! - [`hostile`]: the hostile peer, an HTTPS server for entities that
//!   break federation's rules, signing as their server with
//!   [`server_signature`] and hashing with [`version_hash`].
//! - `checks`: the checks by area, one module each, and their order.
//!
//! Checks run one after the other (a few send concurrent requests on
//! purpose); each is caught if it panics and bounded in time, so one broken
//! answer fails one check and never the run. Rate limits run last, since
//! they empty the server's buckets; every other request that meets a `429`
//! is retried after its `Retry-After`.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;

pub mod apps;
pub mod browser;
pub mod context;
pub mod dates;
pub mod expect;
pub mod faults;
pub mod hostile;
pub mod hostile_tls;
pub mod html;
pub mod server_signature;
pub mod target;
pub mod tls;
pub mod version_hash;

mod checks;

pub use folio_client::{client, signer, sse};
pub use target::{AppCredentials, HostilePeerConfig, ScopedAppCredentials, Target};

use checks::Needs;
use context::Ctx;

/// The longest a single check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(180);

/// Which checks run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Run only checks whose name contains this.
    pub name_filter: Option<String>,
    /// Checks not to run, each with the reason reported for it.
    pub excludes: Vec<Exclusion>,
    /// Makes the store fail for the `faults/*` checks, in the test's own
    /// process; else the target's `fault_hook` command, if any.
    pub faults: Option<faults::FaultSwitch>,
}

#[derive(Debug, Clone)]
pub struct Exclusion {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
    Excluded(String),
}

#[derive(Debug, Clone)]
pub struct CheckReport {
    pub name: &'static str,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub checks: Vec<CheckReport>,
    /// Whether the main client negotiated HTTP/2 with the server.
    pub http2: bool,
}

impl Report {
    fn count(&self, wanted: fn(&Outcome) -> bool) -> usize {
        self.checks
            .iter()
            .filter(|check| wanted(&check.outcome))
            .count()
    }

    pub fn passed(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Passed))
    }

    pub fn failed(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Failed(_)))
    }

    pub fn excluded(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Excluded(_)))
    }
}

/// The names of every check, in the order they run.
pub fn check_names() -> Vec<&'static str> {
    checks::all().iter().map(|check| check.name).collect()
}

/// Runs the selected checks against `target`, one after the other.
pub async fn run(target: &Target, options: &RunOptions) -> Report {
    let selected: Vec<checks::Check> = checks::all()
        .into_iter()
        .filter(|check| {
            options
                .name_filter
                .as_ref()
                .is_none_or(|filter| check.name.contains(filter.as_str()))
        })
        .collect();
    let ctx = match Ctx::new(target) {
        Ok(ctx) => ctx.with_faults(options.faults.clone()),
        Err(error) => {
            let checks = selected
                .iter()
                .map(|check| CheckReport {
                    name: check.name,
                    outcome: Outcome::Failed(format!("target: {error}")),
                })
                .collect();
            return Report {
                checks,
                http2: false,
            };
        }
    };
    let mut report = Report::default();
    for check in &selected {
        let outcome = match exclusion(check, target, options) {
            Some(reason) => Outcome::Excluded(reason),
            None => run_one(check, &ctx).await,
        };
        report.checks.push(CheckReport {
            name: check.name,
            outcome,
        });
    }
    report.http2 = ctx.http.http2_seen();
    report
}

fn exclusion(check: &checks::Check, target: &Target, options: &RunOptions) -> Option<String> {
    if let Some(excluded) = options.excludes.iter().find(|e| e.name == check.name) {
        return Some(excluded.reason.clone());
    }
    match check.needs {
        Needs::Api => None,
        Needs::Password if target.password.is_none() => {
            Some("the target has no \"password\" to sign in on the consent page with".into())
        }
        Needs::Password => None,
        Needs::OtherUser if target.other_user.is_none() => {
            Some("the target has no \"other_user\" whose store to read as well".into())
        }
        Needs::OtherUser => None,
        Needs::Faults if target.fault_hook.is_none() && options.faults.is_none() => {
            Some("the target has no \"fault_hook\" to make its store fail with".into())
        }
        Needs::Faults => None,
        Needs::HostilePeer if target.hostile_peer.is_none() => {
            Some("the target has no \"hostile_peer\" to serve hostile entities from".into())
        }
        Needs::HostilePeer => None,
        Needs::Loopback if !target.is_loopback() => Some(
            "the target is not on loopback, where the suite can send from many addresses".into(),
        ),
        Needs::Loopback => None,
        _ if !target.transport => Some("the target has \"transport\": false".into()),
        Needs::Redirect if target.http_redirect_url.is_none() => {
            Some("the target has no \"http_redirect_url\"".into())
        }
        _ => None,
    }
}

async fn run_one(check: &checks::Check, ctx: &Ctx) -> Outcome {
    let guarded = AssertUnwindSafe((check.run)(ctx)).catch_unwind();
    match tokio::time::timeout(CHECK_TIMEOUT, guarded).await {
        Err(_) => Outcome::Failed(format!("timed out after {} s", CHECK_TIMEOUT.as_secs())),
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Outcome::Failed(format!("the check panicked: {message}"))
        }
        Ok(Ok(Ok(()))) => Outcome::Passed,
        Ok(Ok(Err(reason))) => Outcome::Failed(reason),
    }
}

/// Creates the scoped app's two Type records with the full app, when they
/// are missing. A server whose grants must name existing types (Folio's
/// `folio app add --scope` does) needs them before the scoped app is made;
/// the scoped app's credentials in `target` are not used here.
pub async fn prepare_scoped_types(target: &Target) -> Result<(), String> {
    Ctx::new(target)?.scoped_types().await.map(|_| ())
}

/// Authorizes the scoped app the way a real app is: creates its two Type
/// records with the full app, registers a fresh app asking to read the
/// read type and to write and subscribe to the write type, signs in as the
/// user on the consent page and approves. For a server whose CLI cannot
/// grant types it has not seen (the edge, provisioned with `--emit-sql`).
pub async fn authorize_scoped_app(target: &Target) -> Result<AppCredentials, String> {
    let mut target = target.clone();
    target.scoped_app.app = target.full_app.clone();
    let ctx = Ctx::new(&target)?;
    let types = ctx.scoped_types().await?;
    let scope = [
        apps::ScopeItem::of("read", &types.read)?,
        apps::ScopeItem::of("write", &types.write)?,
        apps::ScopeItem::of("subscribe", &types.write)?,
    ];
    let key = apps::authorize(&ctx, &apps::NewApp::fresh(), &scope, &scope).await?;
    Ok(AppCredentials {
        app_id: key.app_id.clone(),
        authorization_id: key.authorization_id.clone(),
        private_key: key.private_key(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(password: Option<&str>) -> Target {
        let app = AppCredentials {
            app_id: "0".repeat(32),
            authorization_id: "1".repeat(32),
            private_key: "A".repeat(43) + "=",
        };
        Target {
            base_url: "https://localhost:8443".into(),
            user: "me".into(),
            entity: "localhost".into(),
            ca_cert: None,
            insecure: false,
            http_redirect_url: None,
            transport: true,
            password: password.map(str::to_string),
            other_user: None,
            fault_hook: None,
            hostile_peer: None,
            full_app: app.clone(),
            scoped_app: ScopedAppCredentials {
                app,
                read_type: "2".repeat(32),
                write_type: "3".repeat(32),
            },
        }
    }

    fn excluded(target: &Target) -> Vec<&'static str> {
        checks::all()
            .iter()
            .filter(|check| exclusion(check, target, &RunOptions::default()).is_some())
            .map(|check| check.name)
            .collect()
    }

    #[test]
    fn checks_that_sign_in_are_excluded_without_a_password() {
        let without = excluded(&target(None));
        for name in [
            "consent/approve-redirects-with-authorization-id",
            "consent/grant-is-the-ticked-scopes",
            "revocation/deleting-authorization-revokes-at-once",
        ] {
            assert!(without.contains(&name), "{name} runs without a password");
        }
        for name in [
            "consent/wrong-password-401",
            "registration/good-key-x-svc-publickey-200",
        ] {
            assert!(!without.contains(&name), "{name} needs no password");
        }
        let with = excluded(&target(Some("secret")));
        assert!(
            !with
                .iter()
                .any(|name| name.starts_with("consent/") || name.starts_with("revocation/")),
            "excluded with a password: {with:?}"
        );
    }

    #[test]
    fn checks_that_need_the_hostile_peer_are_excluded_without_one() {
        let mut with = target(None);
        with.hostile_peer = Some(HostilePeerConfig {
            listen: ([127, 0, 0, 1], 9).into(),
            domain: "peer.test".into(),
            cert: "cert.pem".into(),
            key: "key.pem".into(),
            relay: None,
        });
        let with = excluded(&with);
        let without = excluded(&target(None));
        assert!(!without.contains(&"federation/private-address-refused"));
        for name in [
            "federation/wrong-hash-refused",
            "federation/server-request-replayed",
            "federation/notification-flood-limited",
        ] {
            assert!(
                without.contains(&name),
                "{name} runs without a hostile peer"
            );
            assert!(
                !with.contains(&name),
                "{name} is excluded with a hostile peer"
            );
        }
    }

    #[test]
    fn check_names_are_unique() {
        let mut names = check_names();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
