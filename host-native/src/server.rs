//! `folio serve`: the phases of a run, from the data directory to the
//! last commit ([`serve`]), the listeners, graceful shutdown and the
//! background upkeep (event retention, expired blobs, rate buckets). What
//! the handlers share is [`App`] (`app.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use folio_core::RateLimits;
use folio_core::Resident;
use folio_core::auth::ReplayGuard;
use folio_core::service::consent::SessionKey;
use folio_core::service::console::page::console_href;
use folio_core::service::events::StreamCaps;
use folio_core::service::http::{HTTPS_REDIRECT_STATUS, https_location};
use folio_core::service::limits::Limits;
use http::{HeaderValue, StatusCode};
use rusqlite::Connection;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::App;
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
use crate::writer::{Effector, Writer};
use crate::{db, https, tls, users};

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
    let base_url = settle_base_url(&data, &options)?;
    let writer_conn = db::open_writer(&data.database(), options.durability)?;
    provision_users(&writer_conn, &base_url).await?;
    let tls_config = tls_config(&data, &options, &base_url)?;
    let settings = folio_core::Settings::new(
        base_url,
        options.docs_url.clone(),
        options.limits(),
        env!("CARGO_PKG_VERSION"),
    );
    let (store, threads) = start_store(&data, &options, &settings.limits, writer_conn)?;
    let (stop, shutdown) = watch::channel(false);
    let app = Arc::new(build_app(settings, &data, &options, store, shutdown)?);
    let serves_from = restore_nonces(&app).await?;

    crate::upkeep::before_serving(&app).await;
    let wait_ms = serves_from.saturating_sub(Clock.now().unix_millis());
    if let Ok(wait_ms @ 1..) = u64::try_from(wait_ms) {
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }

    let listeners = open_listeners(&app, &options, tls_config).await?;
    // Last, once every listener is open: scripts wait for this line.
    crate::logs::listening(&format!("https://{}", listeners.https_addr));

    let upkeep = tokio::spawn(crate::upkeep::every_interval(Arc::clone(&app)));
    let delivery = tokio::spawn(crate::outbox::deliver(Arc::clone(&app)));
    shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop.send(true);
    listeners.closed().await;
    upkeep.abort();
    delivery.abort();
    drain(app, threads).await;
    tracing::info!("stopped");
    Ok(())
}

/// The base URL: `--base-url` when given (saved in the data directory for
/// the next runs), else the one saved.
fn settle_base_url(data: &DataDir, options: &ServeOptions) -> Result<String, ServeError> {
    let mut settings = data.settings()?;
    if let Some(base_url) = &options.base_url {
        let base_url = base_url.trim_end_matches('/').to_owned();
        if base_url != settings.base_url {
            settings = Settings { base_url };
            data.save_settings(&settings)?;
        }
    }
    Ok(settings.base_url)
}

/// On the first start, a user `me` at `localhost`, with its password
/// printed once; then every user's Entity record made to name this server.
async fn provision_users(writer_conn: &Connection, base_url: &str) -> Result<(), ServeError> {
    if users::list_users(writer_conn)?.is_empty() {
        let password = users::generate_password();
        let entity = "localhost".parse().expect("`localhost` is an entity name");
        users::add_user(writer_conn, "me", &entity, &password, base_url).await?;
        let console = console_href("me", "");
        println!("Created user `me` at entity `localhost`.");
        println!("  Console:  {base_url}{console}");
        println!("  Password: {password}  (shown only now; `folio user passwd me` sets another)");
    }
    for (user, changed) in users::update_entity_records(writer_conn, base_url).await? {
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
    Ok(())
}

/// The HTTPS listener's TLS: `--tls-cert` and `--tls-key`, else a
/// self-signed certificate in the data directory, made on first use for
/// `localhost`, `127.0.0.1` and the base URL's host.
fn tls_config(
    data: &DataDir,
    options: &ServeOptions,
    base_url: &str,
) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    let (cert, key) = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        _ => {
            let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
            if let Some(host) = host_of(base_url)
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
    Ok(tls::server_config(&cert, &key)?)
}

/// What the running store shares with the requests.
struct SharedStore {
    writer: Writer,
    readers: db::Readers,
    /// Where the writer publishes what it committed, to the event streams.
    hub: Arc<Hub>,
    standings: Arc<Standings>,
    /// What core keeps between requests; the writer tells its memo what
    /// it stored.
    resident: Arc<Resident>,
    /// Wakes the outbox's delivery loop: a commit queued notifications.
    outbox: Arc<tokio::sync::Notify>,
}

/// The store's threads, joined when the server stops ([`drain`]).
struct StoreThreads {
    writer: std::thread::JoinHandle<()>,
    checkpointer: db::Checkpointer,
}

/// Starts the single writer on `writer_conn` (its thread), the
/// checkpointer beside it, and opens the readers.
fn start_store(
    data: &DataDir,
    options: &ServeOptions,
    limits: &Limits,
    writer_conn: Connection,
) -> Result<(SharedStore, StoreThreads), ServeError> {
    let hub = Arc::new(Hub::new(StreamCaps::of(limits)));
    let wal_restart = db::WalRestart::default();
    let checkpointer = db::Checkpointer::start(
        db::Checkpointer::connect(&data.database(), options.durability, &writer_conn)?,
        wal_restart.clone(),
    )?;
    let standings = Arc::new(Standings::new(data));
    let outbox = Arc::new(tokio::sync::Notify::new());
    let replay = ReplayGuard::new(Clock.now()).with_app_share(options.replay_nonces_per_app.0);
    let resident = Arc::new(Resident::new(replay, RateLimits::new(limits)));
    let effector = Effector {
        hub: Arc::clone(&hub),
        standings: Arc::clone(&standings),
        resident: Arc::clone(&resident),
        outbox: Arc::clone(&outbox),
    };
    let (writer, writer_thread) = Writer::start(writer_conn, Clock, effector, wal_restart)?;
    let readers = db::Readers::open(&data.database(), options.readers, db::READ_TIME_BUDGET)?;
    let store = SharedStore {
        writer,
        readers,
        hub,
        standings,
        resident,
        outbox,
    };
    let threads = StoreThreads {
        writer: writer_thread,
        checkpointer,
    };
    Ok((store, threads))
}

/// The client for other servers (federation), under `--allow-private-peers`,
/// `--allow-http-peers`, `--peer-ca` and `--peer-resolve`.
fn peer_client(options: &ServeOptions) -> Result<PeerClient, ServeError> {
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
    Ok(peers)
}

/// The state the handlers share; `shutdown` turns true when the server
/// stops.
fn build_app(
    settings: folio_core::Settings,
    data: &DataDir,
    options: &ServeOptions,
    store: SharedStore,
    shutdown: watch::Receiver<bool>,
) -> Result<App, ServeError> {
    let peers = peer_client(options)?;
    Ok(App {
        settings,
        session_key: SessionKey::from_bytes(data.session_key()?),
        clock: Clock,
        readers: store.readers,
        writer: store.writer,
        hub: store.hub,
        blobs: BlobStore::new(data.blobs()),
        password_checks: PasswordChecks::new(PASSWORD_CHECKS_AT_ONCE),
        shutdown,
        data: data.clone(),
        standings: store.standings,
        resident: store.resident,
        peers,
        outbox: store.outbox,
        outbox_retry: folio_core::service::federation::RetryPolicy {
            first_delay_ms: options.outbox_first_retry_ms,
            max_delay_ms: options.outbox_max_retry_ms,
            ..Default::default()
        },
    })
}

/// Restores the nonces the last run stored (of requests dated ahead), and
/// returns the guard's fence: no request is served before it (Unix
/// milliseconds; see folio_core::auth::replay).
async fn restore_nonces(app: &App) -> Result<i64, ServeError> {
    let stored = folio_core::Store::fetch(app, &ReplayGuard::stored_nonces(app.clock.now()))
        .await
        .map_err(|error| std::io::Error::other(format!("reading stored nonces: {error}")))?;
    let mut replay = app.resident.replay();
    replay
        .restore(&stored)
        .map_err(|error| std::io::Error::other(format!("a stored nonce: {error}")))?;
    Ok(replay.serves_from())
}

/// The open listeners, each serving until the server stops.
struct Listeners {
    https: JoinHandle<()>,
    https_addr: SocketAddr,
    /// Plain HTTP, redirected to HTTPS (`--http-listen`).
    redirect: Option<JoinHandle<()>>,
    /// `--metrics-listen`.
    metrics: Option<JoinHandle<()>>,
}

impl Listeners {
    /// Returns once every listener has closed (after the stop signal).
    async fn closed(self) {
        let _ = self.https.await;
        for task in [self.redirect, self.metrics].into_iter().flatten() {
            let _ = task.await;
        }
    }
}

/// Opens the HTTPS listener, then the plain-HTTP redirect and the metrics
/// listener when configured.
async fn open_listeners(
    app: &Arc<App>,
    options: &ServeOptions,
    tls_config: Arc<rustls::ServerConfig>,
) -> Result<Listeners, ServeError> {
    let (https, https_addr, limit) = serve_https(app, options, tls_config)?;
    let redirect = match options.http_listen.0 {
        Some(address) => Some(serve_redirect(app, address, https_addr.port(), limit).await?),
        None => None,
    };
    let metrics = match options.metrics_listen {
        Some(address) => Some(
            crate::metrics_listener::serve(address, Arc::clone(app))
                .await
                .map_err(|source| ServeError::Listen { address, source })?,
        ),
        None => None,
    };
    Ok(Listeners {
        https,
        https_addr,
        redirect,
        metrics,
    })
}

/// The connection caps of both listeners (`--max-connections`,
/// `--max-connections-per-address`, `--idle-timeout-secs`).
fn connection_limits(options: &ServeOptions) -> ConnectionLimits {
    ConnectionLimits {
        total: Some(
            options
                .max_connections
                .unwrap_or_else(connections::total_cap_from_file_limit),
        ),
        per_address: options.max_connections_per_address.0,
        idle: Duration::from_secs(options.idle_timeout_secs),
    }
}

/// `--handshakes-per-second`, else a pace per core.
fn handshakes_per_second(options: &ServeOptions) -> u32 {
    options.handshakes_per_second.map_or_else(
        || {
            let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
            connections::DEFAULT_HANDSHAKES_PER_SECOND_PER_CORE
                .saturating_mul(u32::try_from(cores).unwrap_or(u32::MAX))
        },
        |pace| pace.get(),
    )
}

/// Binds `--listen` and serves the API there over TLS (HTTP/2 or
/// HTTP/1.1) until the server stops; returns its task, its address, and
/// its connection count, which the redirect listener shares.
fn serve_https(
    app: &Arc<App>,
    options: &ServeOptions,
    tls_config: Arc<rustls::ServerConfig>,
) -> Result<(JoinHandle<()>, SocketAddr, LimitAcceptor), ServeError> {
    let router = Router::new()
        .fallback(crate::api::handle)
        .with_state(Arc::clone(app));
    let listener =
        std::net::TcpListener::bind(options.listen).map_err(|source| ServeError::Listen {
            address: options.listen,
            source,
        })?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let https_addr = listener.local_addr()?;
    let header_timeout = Duration::from_secs(options.header_timeout_secs);
    let connection_limits = connection_limits(options);
    let unlimited = |limit: Option<usize>| limit.map_or("none".to_owned(), |n| n.to_string());
    tracing::info!(
        max_connections = %unlimited(connection_limits.total),
        max_connections_per_address = %unlimited(connection_limits.per_address),
        idle_timeout_secs = connection_limits.idle.as_secs(),
        header_timeout_secs = header_timeout.as_secs(),
        "connection limits"
    );
    // One count for both listeners.
    let limit = LimitAcceptor::new(connection_limits);
    let tls = tokio_rustls::TlsAcceptor::from(tls_config);
    let handshakes_per_second = handshakes_per_second(options);
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
    Ok((https, https_addr, limit))
}

/// Binds `address` and redirects plain HTTP to the HTTPS port, under
/// `limit`, until the server stops.
async fn serve_redirect(
    app: &App,
    address: SocketAddr,
    https_port: u16,
    limit: LimitAcceptor,
) -> std::io::Result<JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let local = listener.local_addr()?;
    tracing::info!(address = %local, "redirecting plain HTTP to HTTPS");
    let router = Router::new().fallback(move |request: Request| redirect(request, https_port));
    let mut stop = app.shutdown.clone();
    let listener = LimitedListener::new(listener, limit);
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await;
    }))
}

/// The last handle to the writer goes with the state: it commits what is
/// queued, then stops; the checkpointer stops after it.
async fn drain(app: Arc<App>, threads: StoreThreads) {
    drop(app);
    let _ = tokio::task::spawn_blocking(move || {
        let _ = threads.writer.join();
        drop(threads.checkpointer);
    })
    .await;
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
