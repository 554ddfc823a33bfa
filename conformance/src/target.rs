//! The server under test, as described by the `--target` JSON file.

use serde::{Deserialize, Serialize};

/// Where the server is and which credentials the suite may use.
#[derive(Debug, Clone, Deserialize)]
pub struct Target {
    /// The service address, without a trailing slash, e.g. `https://localhost:8443`.
    pub base_url: String,
    /// The `{user}` path segment.
    pub user: String,
    /// The user's entity name.
    pub entity: String,
    /// A PEM certificate to trust (the server's self-signed one).
    #[serde(default)]
    pub ca_cert: Option<String>,
    /// Accept any server certificate.
    #[serde(default)]
    pub insecure: bool,
    /// A plain-HTTP address that must redirect to `base_url`.
    #[serde(default)]
    pub http_redirect_url: Option<String>,
    /// Whether the transport checks (TLS versions, ALPN, redirect) apply.
    #[serde(default = "yes")]
    pub transport: bool,
    /// The user's password, for the checks that sign in on the consent
    /// page; without it they are reported as excluded.
    #[serde(default)]
    pub password: Option<String>,
    /// Another user of the same server (its `{user}` path segment), for the
    /// checks that a client address's rate holds across users' stores;
    /// without it they are reported as excluded.
    #[serde(default)]
    pub other_user: Option<String>,
    /// A command that makes the server's store fail and recover, for the
    /// `faults/*` checks: run with `sql STATEMENTS` (to run on the store's
    /// database) or `blob-store on|off`; it exits 0 once done (see
    /// [`crate::faults`]). Without it (or a switch in the run's options)
    /// those checks are reported as excluded.
    #[serde(default)]
    pub fault_hook: Option<Vec<String>>,
    /// Where the suite serves hostile entities from, for the
    /// `federation/*` checks that need another server (see
    /// [`crate::hostile`]). Without it they are reported as excluded.
    #[serde(default)]
    pub hostile_peer: Option<HostilePeerConfig>,
    /// An app authorized with read, write and subscribe on every type.
    pub full_app: AppCredentials,
    /// An app authorized to read `read_type` records and to write and
    /// subscribe to `write_type` records only.
    pub scoped_app: ScopedAppCredentials,
}

fn yes() -> bool {
    true
}

impl Target {
    /// Whether `base_url` names a loopback host (`localhost`, `127.x.x.x`,
    /// `[::1]`): a server on this machine.
    pub fn is_loopback(&self) -> bool {
        url::Url::parse(&self.base_url).is_ok_and(|url| match url.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(address)) => address.is_loopback(),
            Some(url::Host::Ipv6(address)) => address.is_loopback(),
            None => false,
        })
    }

    /// A target reached as one app, for a tool or test that drives the API
    /// rather than run the suite: `app` stands for the full and the scoped
    /// app alike (no scoped types), the server's certificate is `ca_cert`,
    /// and the checks beyond the API (transport, consent sign-in, a second
    /// user, faults) do not apply.
    pub fn one_app(
        base_url: String,
        user: &str,
        entity: &str,
        ca_cert: Option<String>,
        app: AppCredentials,
    ) -> Self {
        Target {
            base_url,
            user: user.to_owned(),
            entity: entity.to_owned(),
            ca_cert,
            insecure: false,
            http_redirect_url: None,
            transport: false,
            password: None,
            other_user: None,
            fault_hook: None,
            hostile_peer: None,
            full_app: app.clone(),
            scoped_app: ScopedAppCredentials {
                app,
                read_type: String::new(),
                write_type: String::new(),
            },
        }
    }
}

/// The suite's hostile peer: an HTTPS server the suite runs on `listen`,
/// answering for the entities `{fault}.{domain}` (each fault of
/// [`crate::hostile::Fault::ALL`]). The server under test must reach those
/// names at `listen` and trust `cert` (as `folio serve --peer-resolve
/// NAME=ADDR:PORT --peer-ca CA` arranges).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct HostilePeerConfig {
    /// The address the suite listens on.
    pub listen: std::net::SocketAddr,
    /// The hostile entities' parent domain, e.g. `peer.test`.
    pub domain: String,
    /// A PEM certificate (chain) valid for every `{fault}.{domain}`.
    pub cert: String,
    /// Its PEM private key.
    pub key: String,
    /// Also answer as a development relay on this address: plain HTTP,
    /// each request naming its own `https://` URL in
    /// `x-folio-relayed-url` (the edge's `FOLIO_PEER_RELAY`), for a server
    /// under test that reaches other servers only through one.
    #[serde(default)]
    pub relay: Option<std::net::SocketAddr>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AppCredentials {
    pub app_id: String,
    pub authorization_id: String,
    /// Standard base64 of the 32-byte Ed25519 seed.
    pub private_key: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ScopedAppCredentials {
    #[serde(flatten)]
    pub app: AppCredentials,
    /// Record id of the Type record in the app's read grant.
    pub read_type: String,
    /// Record id of the Type record in the app's write and subscribe grants.
    pub write_type: String,
}

impl folio_client::Trust for Target {
    fn ca_cert(&self) -> Option<&str> {
        self.ca_cert.as_deref()
    }

    fn insecure(&self) -> bool {
        self.insecure
    }
}
