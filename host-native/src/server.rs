//! `folio serve`: the listeners, the shared state, graceful shutdown and
//! the background upkeep (event retention, expired blobs, rate buckets).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use folio_core::auth::ReplayGuard;
use folio_core::model::dialect::Dialect;
use folio_core::problem::default_docs_url;
use folio_core::service::consent::SessionKey;
use folio_core::service::events::StreamCaps;
use folio_core::service::http::{HTTPS_REDIRECT_STATUS, https_location};
use folio_core::{RateLimits, RowExt};
use http::{HeaderValue, StatusCode};
use tokio::sync::watch;

use crate::blobs::BlobStore;
use crate::clock::Clock;
use crate::config::{DataDir, ServeOptions, Settings};
use crate::connections::{
    self, ConnectionLimits, HandshakeGate, HandshakePace, LimitAcceptor, LimitedListener,
};
use crate::hub::Hub;
use crate::passwords::{PASSWORD_CHECKS_AT_ONCE, PasswordChecks};
use crate::peers::{PeerClient, PeerOptions};
use crate::standings::Standings;
use crate::users::UserCache;
use crate::writer::{Effector, Writer};
use crate::{db, https, tls, users};
use folio_core::service::jobs::memo::Memo;

/// Everything a request handler shares.
pub struct App {
    pub settings: folio_core::Settings,
    pub clock: Clock,
    pub readers: db::Readers,
    pub writer: Writer,
    pub hub: Arc<Hub>,
    pub users: UserCache,
    pub replay: Mutex<ReplayGuard>,
    pub rates: Mutex<RateLimits>,
    /// Signs the consent page's session cookies.
    pub session_key: SessionKey,
    pub blobs: BlobStore,
    /// Turns for password checks ([`PASSWORD_CHECKS_AT_ONCE`]).
    pub password_checks: PasswordChecks,
    /// Turns true when the server shuts down: open event streams end.
    pub shutdown: watch::Receiver<bool>,
    pub data: DataDir,
    /// Apps' standings, remembered between requests.
    pub standings: Arc<Standings>,
    /// Stored versions and compiled types, remembered between writes.
    pub memo: Memo,
    /// Other servers, reached under core's rules (federation).
    pub peers: PeerClient,
    /// Wakes the outbox's delivery loop: a write queued notifications.
    pub outbox: Arc<tokio::sync::Notify>,
    /// When failed deliveries are tried again.
    pub outbox_retry: folio_core::service::federation::RetryPolicy,
}

impl App {
    /// The bytes of the blob files the stores hold (a read of the store).
    pub async fn blob_bytes(&self) -> Result<i64, db::DbError> {
        let rows = self
            .readers
            .fetch(&folio_core::store::stored_blob_bytes_sql())
            .await?;
        Ok(rows
            .first()
            .and_then(|row| row.integer(0).ok())
            .unwrap_or(0))
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("data directory: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Db(#[from] db::DbError),
    #[error("tls: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("{0}")]
    Provision(#[from] users::ProvisionError),
}

/// How long a graceful shutdown waits for requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs the server until SIGTERM or SIGINT.
pub async fn serve(data: DataDir, options: ServeOptions) -> Result<(), ServeError> {
    let mut settings = data.settings()?;
    if let Some(base_url) = &options.base_url {
        let base_url = base_url.trim_end_matches('/').to_owned();
        if base_url != settings.base_url {
            settings = Settings { base_url };
            data.save_settings(&settings)?;
        }
    }
    let base_url = settings.base_url.clone();
    let writer_conn = db::open_writer(&data.database(), options.durability)?;

    // First start: a user `me` at `localhost`, with its password printed once.
    if users::list_users(&writer_conn)?.is_empty() {
        let password = users::generate_password();
        let entity = "localhost".parse().expect("`localhost` is an entity name");
        users::add_user(&writer_conn, "me", &entity, &password, &base_url).await?;
        println!("Created user `me` at entity `localhost`. Its password (shown once): {password}");
    }
    for (user, changed) in users::update_entity_records(&writer_conn, &base_url).await? {
        let changed = changed.join(", ");
        let user = &user.name;
        if changed.contains("signing_keys") {
            tracing::warn!(
                user, %changed,
                "rewrote the user's Entity record: its signing_keys were not exactly the user's server key"
            );
        } else {
            tracing::info!(user, %changed, %base_url, "rewrote the user's Entity record for this server");
        }
    }

    let (cert, key) = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        _ => {
            let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
            if let Some(host) = host_of(&base_url)
                && !hosts.contains(&host)
            {
                hosts.push(host);
            }
            if tls::ensure_self_signed(&data.tls_cert(), &data.tls_key(), hosts)? {
                tracing::info!(cert = %data.tls_cert().display(), "created a self-signed certificate");
            }
            (data.tls_cert(), data.tls_key())
        }
    };
    let tls_config = tls::server_config(&cert, &key)?;

    let limits = options.limits();
    let rates = RateLimits::new(&limits);
    let clock = Clock;
    let hub = Arc::new(Hub::new(StreamCaps::of(&limits)));
    let wal_restart = db::WalRestart::default();
    let checkpointer = db::Checkpointer::start(
        db::Checkpointer::connect(&data.database(), options.durability, &writer_conn)?,
        wal_restart.clone(),
    )?;
    let standings = Arc::new(Standings::new(&data));
    let outbox = Arc::new(tokio::sync::Notify::new());
    let effector = Effector {
        hub: Arc::clone(&hub),
        standings: Arc::clone(&standings),
        outbox: Arc::clone(&outbox),
    };
    let (writer, writer_thread) = Writer::start(writer_conn, clock, effector, wal_restart)?;
    let readers = db::Readers::open(&data.database(), options.readers, db::READ_TIME_BUDGET)?;
    let (stop, shutdown) = watch::channel(false);
    let peers = PeerClient::new(PeerOptions {
        allow_private: options.allow_private_peers,
        allow_http: options.allow_http_peers,
        extra_roots: options.peer_ca.clone(),
        resolve: options.peer_resolve.clone(),
        ..PeerOptions::default()
    })
    .map_err(std::io::Error::other)?;
    if options.allow_private_peers || options.allow_http_peers || !options.peer_resolve.is_empty() {
        tracing::warn!(
            allow_private_peers = options.allow_private_peers,
            allow_http_peers = options.allow_http_peers,
            peer_resolve = ?options.peer_resolve,
            "development settings for other servers are on: never use them in production"
        );
    }
    let app = Arc::new(App {
        settings: folio_core::Settings {
            dialect: Dialect::default(),
            docs_url: options
                .docs_url
                .clone()
                .unwrap_or_else(|| default_docs_url(&base_url)),
            base_url,
            limits,
            version: env!("CARGO_PKG_VERSION").to_owned(),
        },
        rates: Mutex::new(rates),
        session_key: SessionKey::from_bytes(data.session_key()?),
        clock,
        readers,
        writer,
        hub,
        users: UserCache::default(),
        replay: Mutex::new(
            ReplayGuard::new(clock.now()).with_app_share(options.replay_nonces_per_app.0),
        ),
        blobs: BlobStore::new(data.blobs()),
        password_checks: PasswordChecks::new(PASSWORD_CHECKS_AT_ONCE),
        shutdown,
        data: data.clone(),
        standings,
        memo: Memo::new(),
        peers,
        outbox,
        outbox_retry: folio_core::service::federation::RetryPolicy {
            first_delay_ms: options.outbox_first_retry_ms,
            max_delay_ms: options.outbox_max_retry_ms,
            ..Default::default()
        },
    });

    // The nonces the last run stored (of requests dated ahead), and no
    // request before the guard's fence: see folio_core::auth::replay.
    let stored = folio_core::Store::fetch(&*app, &ReplayGuard::stored_nonces(clock.now()))
        .await
        .map_err(|error| std::io::Error::other(format!("reading stored nonces: {error}")))?;
    let serves_from = {
        let mut replay = app.replay.lock().unwrap_or_else(|p| p.into_inner());
        replay
            .restore(&stored)
            .map_err(|error| std::io::Error::other(format!("a stored nonce: {error}")))?;
        replay.serves_from()
    };

    crate::upkeep::before_serving(&app).await;

    let router = Router::new()
        .fallback(crate::api::handle)
        .with_state(Arc::clone(&app));
    let wait_ms = serves_from.saturating_sub(clock.now().unix_millis());
    if let Ok(wait_ms @ 1..) = u64::try_from(wait_ms) {
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }
    let listener =
        std::net::TcpListener::bind(options.listen).map_err(|source| ServeError::Listen {
            address: options.listen,
            source,
        })?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let https_addr = listener.local_addr()?;
    let header_timeout = Duration::from_secs(options.header_timeout_secs);
    let connection_limits = ConnectionLimits {
        total: Some(
            options
                .max_connections
                .unwrap_or_else(connections::total_cap_from_file_limit),
        ),
        per_address: options.max_connections_per_address.0,
        idle: Duration::from_secs(options.idle_timeout_secs),
    };
    tracing::info!(?connection_limits, ?header_timeout, "connection limits");
    // One count for both listeners.
    let limit = LimitAcceptor::new(connection_limits);
    let tls = tokio_rustls::TlsAcceptor::from(tls_config);
    let handshakes_per_second = options.handshakes_per_second.map_or_else(
        || {
            let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
            connections::DEFAULT_HANDSHAKES_PER_SECOND_PER_CORE
                .saturating_mul(u32::try_from(cores).unwrap_or(u32::MAX))
        },
        |pace| pace.get(),
    );
    tracing::info!(handshakes_per_second, "TLS handshake pace");
    let pace = HandshakePace::new(handshakes_per_second, header_timeout);
    let gate = HandshakeGate::new(limit.clone(), tls, header_timeout, pace);
    // The server's own limits answer with problem+json; hyper's must be higher.
    let protocols = https::Protocols::new(HTTP_LIBRARY_HEADER_BYTES, header_timeout);
    let https = tokio::spawn(https::serve(
        listener,
        gate,
        protocols,
        router,
        app.shutdown.clone(),
        SHUTDOWN_GRACE,
    ));
    tracing::info!(address = %https_addr, base_url = %app.settings.base_url, "serving HTTPS (h2, http/1.1)");

    let redirect = match options.http_listen.0 {
        Some(address) => {
            let listener = tokio::net::TcpListener::bind(address).await?;
            let local = listener.local_addr()?;
            tracing::info!(address = %local, "redirecting plain HTTP to HTTPS");
            let port = https_addr.port();
            let router = Router::new().fallback(move |request: Request| redirect(request, port));
            let mut stop = app.shutdown.clone();
            let listener = LimitedListener::new(listener, limit);
            Some(tokio::spawn(async move {
                let _ = axum::serve(listener, router)
                    .with_graceful_shutdown(async move {
                        let _ = stop.wait_for(|stopped| *stopped).await;
                    })
                    .await;
            }))
        }
        None => None,
    };

    let metrics = match options.metrics_listen {
        Some(address) => Some(
            crate::metrics::serve(address, Arc::clone(&app))
                .await
                .map_err(|source| ServeError::Listen { address, source })?,
        ),
        None => None,
    };

    // Last, once every listener is open: scripts wait for this line.
    crate::logs::listening(&format!("https://{https_addr}"));

    let upkeep = tokio::spawn(crate::upkeep::every_interval(Arc::clone(&app)));
    let delivery = tokio::spawn(crate::outbox::deliver(Arc::clone(&app)));
    shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop.send(true);
    let _ = https.await;
    for task in [redirect, metrics].into_iter().flatten() {
        let _ = task.await;
    }
    upkeep.abort();
    delivery.abort();
    // The last handle to the writer goes with the state: it commits what is
    // queued, then stops.
    drop(app);
    let _ = tokio::task::spawn_blocking(move || {
        let _ = writer_thread.join();
        drop(checkpointer);
    })
    .await;
    tracing::info!("stopped");
    Ok(())
}

/// hyper's own header limit, above the server's (PROTOCOL.md §13).
const HTTP_LIBRARY_HEADER_BYTES: usize = 256 * 1024;

/// The host name of a URL such as the base URL, for its certificate.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    Some(host.to_owned())
}

/// Core's redirect of a plain-HTTP request to the HTTPS listener.
async fn redirect(request: Request, https_port: u16) -> Response {
    let authority = request
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok());
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let location = https_location(authority, target, https_port);
    let status =
        StatusCode::from_u16(HTTPS_REDIRECT_STATUS).unwrap_or(StatusCode::PERMANENT_REDIRECT);
    let mut response = status.into_response();
    // A Host that passed `to_str` and a parsed target make a valid value.
    if let Ok(location) = HeaderValue::from_str(&location) {
        response
            .headers_mut()
            .insert(http::header::LOCATION, location);
    }
    response
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler installs");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
