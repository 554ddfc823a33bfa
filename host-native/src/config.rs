//! The data directory and the settings of `folio serve`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use folio_core::service::limits::{Limits, RateLimit, ReceivedQuota};

use crate::db::Durability;

/// The default base URL written into Entity records (PROTOCOL.md §12).
pub const DEFAULT_BASE_URL: &str = "https://localhost:8443";

/// A data directory: the database, blobs, the TLS certificate and settings.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

/// What the data directory remembers between runs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    pub base_url: String,
}

impl DataDir {
    /// Opens a data directory, creating it (private to this user) on first use.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        for dir in [
            root.to_owned(),
            root.join("blobs"),
            root.join("blobs/tmp"),
            root.join("tls"),
        ] {
            std::fs::create_dir_all(&dir)?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(DataDir {
            root: root.to_owned(),
        })
    }

    /// A data directory that exists, as it is.
    pub fn existing(root: &Path) -> std::io::Result<Self> {
        if !root.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no data directory at {}", root.display()),
            ));
        }
        Ok(DataDir {
            root: root.to_owned(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn database(&self) -> PathBuf {
        self.root.join("folio.db")
    }

    pub fn blobs(&self) -> PathBuf {
        self.root.join("blobs")
    }

    pub fn tls_cert(&self) -> PathBuf {
        self.root.join("tls/cert.pem")
    }

    pub fn tls_key(&self) -> PathBuf {
        self.root.join("tls/key.pem")
    }

    /// The secret that signs consent-page session cookies: 32 random bytes
    /// in `session.key` (readable by this user only), made on first use.
    /// Deleting the file signs everyone out.
    pub fn session_key(&self) -> std::io::Result<[u8; 32]> {
        let path = self.root.join("session.key");
        match std::fs::read(&path) {
            Ok(bytes) => bytes.try_into().map_err(|_| {
                std::io::Error::other(format!("{} does not hold 32 bytes", path.display()))
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let key: [u8; 32] = rand::random();
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut file = options.open(&path)?;
                std::io::Write::write_all(&mut file, &key)?;
                file.sync_all()?;
                Ok(key)
            }
            Err(error) => Err(error),
        }
    }

    fn settings_path(&self) -> PathBuf {
        self.root.join("settings.json")
    }

    /// The stored settings, or the defaults on first use.
    pub fn settings(&self) -> std::io::Result<Settings> {
        match std::fs::read(self.settings_path()) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings {
                base_url: DEFAULT_BASE_URL.to_owned(),
            }),
            Err(e) => Err(e),
        }
    }

    /// Stores the settings (write to a temporary file, then rename).
    pub fn save_settings(&self, settings: &Settings) -> std::io::Result<()> {
        let tmp = self.root.join("settings.json.tmp");
        let json = serde_json::to_vec_pretty(settings).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, json)?;
        std::fs::rename(tmp, self.settings_path())
    }
}

/// A setting that can be switched `off` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrOff<T>(pub Option<T>);

/// As the command line writes it: the value, or `off`.
impl<T: std::fmt::Display> std::fmt::Display for OrOff<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(value) => value.fmt(f),
            None => f.write_str("off"),
        }
    }
}

/// Core's defaults (PROTOCOL.md §13), which `--help` shows.
fn default_limits() -> Limits {
    Limits::default()
}

/// A limit on the command line: a value, or `off`.
pub fn parse_limit<T: std::str::FromStr>(text: &str) -> Result<OrOff<T>, String> {
    match text {
        "off" => Ok(OrOff(None)),
        _ => text
            .parse()
            .map(|value| OrOff(Some(value)))
            .map_err(|_| format!("`{text}` is neither a valid value nor `off`")),
    }
}

/// Attempts per minute on the command line: a positive number, or `off`.
pub fn parse_per_minute(text: &str) -> Result<OrOff<u32>, String> {
    folio_core::service::limits::parse_per_minute_setting(text).map(OrOff)
}

/// A rate on the command line: `PER_SECOND/BURST`, or `off`.
pub fn parse_rate(text: &str) -> Result<OrOff<RateLimit>, String> {
    RateLimit::parse_setting(text).map(OrOff)
}

/// A quota on the command line: `VERSIONS/BYTES`, or `off`.
pub fn parse_quota(text: &str) -> Result<OrOff<ReceivedQuota>, String> {
    ReceivedQuota::parse_setting(text).map(OrOff)
}

/// `folio serve`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeOptions {
    /// The HTTPS address.
    #[arg(long, env = "FOLIO_LISTEN", default_value = "127.0.0.1:8443")]
    pub listen: SocketAddr,
    /// The plain-HTTP address that redirects to HTTPS, or `off`.
    #[arg(long, env = "FOLIO_HTTP_LISTEN", default_value = "127.0.0.1:8080", value_parser = parse_limit::<SocketAddr>)]
    pub http_listen: OrOff<SocketAddr>,
    /// A PEM certificate chain; without one, a self-signed certificate is
    /// created in the data directory on first start.
    #[arg(long, env = "FOLIO_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, env = "FOLIO_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The public base URL (stored in the data directory; default https://localhost:8443).
    #[arg(long, env = "FOLIO_BASE_URL")]
    pub base_url: Option<String>,
    /// Where error types are documented (default: `{base_url}/docs`, served here).
    #[arg(long, env = "FOLIO_DOCS_URL")]
    pub docs_url: Option<String>,
    /// `full`: every acknowledged write survives a power loss; `normal`: a crash.
    #[arg(long, env = "FOLIO_DURABILITY", value_enum, default_value = "full")]
    pub durability: Durability,
    /// Read-only connections: how many reads run at once.
    #[arg(long, env = "FOLIO_READERS", default_value_t = 8)]
    pub readers: u32,
    /// Largest JSON body in bytes, or `off`.
    #[arg(long, value_parser = parse_limit::<u64>, default_value_t = OrOff(default_limits().json_body_bytes))]
    pub json_body_limit: OrOff<u64>,
    /// Largest blob in bytes, or `off`.
    #[arg(long, value_parser = parse_limit::<u64>, default_value_t = OrOff(default_limits().blob_bytes))]
    pub blob_limit: OrOff<u64>,
    /// Most open event streams on the server, or `off`.
    #[arg(long, value_parser = parse_limit::<usize>, default_value_t = OrOff(default_limits().sse_connections_per_server))]
    pub sse_per_server: OrOff<usize>,
    /// Most open event streams per user, or `off`.
    #[arg(long, value_parser = parse_limit::<usize>, default_value_t = OrOff(default_limits().sse_connections_per_user))]
    pub sse_per_user: OrOff<usize>,
    /// Silence on an event stream before a heartbeat, in milliseconds.
    #[arg(long, default_value_t = default_limits().heartbeat_ms)]
    pub heartbeat_ms: u64,
    /// Longest request target in bytes, or `off`.
    #[arg(long, value_parser = parse_limit::<usize>, default_value_t = OrOff(default_limits().request_target_bytes))]
    pub target_limit: OrOff<usize>,
    /// Largest request header section in bytes, or `off`.
    #[arg(long, value_parser = parse_limit::<usize>, default_value_t = OrOff(default_limits().request_header_bytes))]
    pub header_limit: OrOff<usize>,
    /// Writes per app: `PER_SECOND/BURST`, or `off`.
    #[arg(long, value_parser = parse_rate, default_value_t = OrOff(default_limits().writes_per_app))]
    pub write_rate: OrOff<RateLimit>,
    /// Unauthenticated reads per client address: `PER_SECOND/BURST`, or `off`.
    #[arg(long, value_parser = parse_rate, default_value_t = OrOff(default_limits().unauthenticated_reads_per_address))]
    pub read_rate: OrOff<RateLimit>,
    /// App registrations per client address: `PER_SECOND/BURST`, or `off`.
    #[arg(long, value_parser = parse_rate, default_value_t = OrOff(default_limits().registrations_per_address))]
    pub register_rate: OrOff<RateLimit>,
    /// Sign-in attempts (consent page, console, password change) per client
    /// address (an IPv6 address by its /64) per minute, or `off`. Each
    /// account's own budget with back-off is fixed and stays on.
    #[arg(long, value_parser = parse_per_minute, default_value_t = OrOff(default_limits().sign_in_attempts_per_minute))]
    pub sign_in_rate: OrOff<u32>,
    /// Notifications one other entity's server may send one user, `PER_SECOND/BURST` or `off`.
    #[arg(long, value_parser = parse_rate, default_value_t = OrOff(default_limits().notifications_per_entity))]
    pub notification_rate: OrOff<RateLimit>,
    /// Notifications the servers of every entity under one registrable
    /// domain (`*.evil.example`) may send one user together, `PER_SECOND/BURST` or `off`.
    #[arg(long, value_parser = parse_rate, default_value_t = OrOff(default_limits().notifications_per_domain))]
    pub notification_domain_rate: OrOff<RateLimit>,
    /// Notifications one user may receive from every other server together,
    /// `PER_SECOND/BURST` or `off`.
    #[arg(long, value_parser = parse_rate, default_value_t = OrOff(default_limits().notifications_per_user))]
    pub notification_user_rate: OrOff<RateLimit>,
    /// What the servers of entities a user knows may store in the user's
    /// store by notification: `VERSIONS/BYTES` (bytes may end in KiB, MiB,
    /// GiB), or `off`. Past it a notification is `507 quota_exceeded`.
    #[arg(long, value_parser = parse_quota, default_value_t = OrOff(default_limits().received_from_known))]
    pub received_quota: OrOff<ReceivedQuota>,
    /// What the servers of entities a user never linked to may store in the
    /// user's store (versions that name the user): `VERSIONS/BYTES`, or `off`.
    #[arg(long, value_parser = parse_quota, default_value_t = OrOff(default_limits().received_from_strangers))]
    pub unsolicited_quota: OrOff<ReceivedQuota>,
    /// Most nonces one app may hold in the replay window (about 800 signed
    /// requests a second, sustained), or `off`.
    #[arg(long, value_parser = parse_limit::<usize>, default_value_t = OrOff(Some(folio_core::auth::MAX_NONCES_PER_APP)))]
    pub replay_nonces_per_app: OrOff<usize>,
    /// Most HTTPS connections open at once (default: the open-file limit,
    /// raised to its hard value, less 1,024); past it a connection is closed
    /// as soon as it is accepted.
    #[arg(long, env = "FOLIO_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Most HTTPS connections open at once from one client address, or `off`.
    #[arg(long, env = "FOLIO_MAX_CONNECTIONS_PER_ADDRESS", value_parser = parse_limit::<usize>, default_value_t = OrOff(Some(crate::connections::DEFAULT_CONNECTIONS_PER_ADDRESS)))]
    pub max_connections_per_address: OrOff<usize>,
    /// TLS handshakes started per second, on average (default: 250 per
    /// core); a new connection waits for its turn, and is closed if that is
    /// further off than the header timeout.
    #[arg(long, env = "FOLIO_HANDSHAKES_PER_SECOND")]
    pub handshakes_per_second: Option<std::num::NonZeroU32>,
    /// Seconds a connection may send and receive nothing before it is closed.
    #[arg(long, env = "FOLIO_IDLE_TIMEOUT_SECS", default_value_t = crate::connections::DEFAULT_IDLE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_secs: u64,
    /// Seconds a client may take for its TLS handshake, and for a request's
    /// headers over HTTP/1.1.
    #[arg(long, env = "FOLIO_HEADER_TIMEOUT_SECS", default_value_t = crate::connections::DEFAULT_HEADER_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,
    /// A plain-HTTP address for Prometheus metrics (`/metrics`) and a
    /// readiness answer (`/ready`); off unless given. Keep it private:
    /// it is not authenticated.
    #[arg(long, env = "FOLIO_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Development only (two test servers on one machine): let this server
    /// talk to other servers at loopback and private addresses.
    #[arg(long)]
    pub allow_private_peers: bool,
    /// Development only: let this server talk to other servers over plain
    /// HTTP (`http://` URLs in their Entity records).
    #[arg(long)]
    pub allow_http_peers: bool,
    /// Development only: resolve another server's host name to this
    /// address and port: a URL of that name that names no port goes to
    /// PORT, one that names another port is refused. `NAME=ADDRESS:PORT`,
    /// repeatable.
    #[arg(long, value_name = "NAME=ADDRESS:PORT", value_parser = parse_peer_resolve)]
    pub peer_resolve: Vec<(String, SocketAddr)>,
    /// A CA certificate (PEM) to trust for other servers besides the
    /// public roots: a test CA. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub peer_ca: Vec<PathBuf>,
    /// Milliseconds before a failed notification is tried again the first
    /// time; each next wait doubles, up to `--outbox-max-retry-ms`.
    #[arg(long, default_value_t = folio_core::service::federation::notify::FIRST_RETRY_DELAY_MS, value_parser = clap::value_parser!(i64).range(1..))]
    pub outbox_first_retry_ms: i64,
    /// The longest wait between two attempts of a notification, in milliseconds.
    #[arg(long, default_value_t = folio_core::service::federation::notify::MAX_RETRY_DELAY_MS, value_parser = clap::value_parser!(i64).range(1..))]
    pub outbox_max_retry_ms: i64,
}

/// `NAME=ADDRESS:PORT`, as `--peer-resolve` takes it.
fn parse_peer_resolve(text: &str) -> Result<(String, SocketAddr), String> {
    let (name, address) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=ADDRESS:PORT"))?;
    let address = address
        .parse()
        .map_err(|e| format!("`{address}` is not ADDRESS:PORT: {e}"))?;
    Ok((name.to_ascii_lowercase(), address))
}

impl ServeOptions {
    pub fn limits(&self) -> Limits {
        Limits {
            json_body_bytes: self.json_body_limit.0,
            blob_bytes: self.blob_limit.0,
            sse_connections_per_server: self.sse_per_server.0,
            sse_connections_per_user: self.sse_per_user.0,
            heartbeat_ms: self.heartbeat_ms.max(1),
            request_target_bytes: self.target_limit.0,
            request_header_bytes: self.header_limit.0,
            writes_per_app: self.write_rate.0,
            unauthenticated_reads_per_address: self.read_rate.0,
            registrations_per_address: self.register_rate.0,
            sign_in_attempts_per_minute: self.sign_in_rate.0,
            notifications_per_entity: self.notification_rate.0,
            notifications_per_domain: self.notification_domain_rate.0,
            notifications_per_user: self.notification_user_rate.0,
            received_from_known: self.received_quota.0,
            received_from_strangers: self.unsolicited_quota.0,
        }
    }
}
