//! The HTTPS listener's loop: it accepts connections through the
//! [`HandshakeGate`], and serves each with the protocol its TLS handshake
//! chose by ALPN: HTTP/2 for `h2`, HTTP/1.1 otherwise.
//!
//! Choosing by ALPN rather than by the first bytes (as a server that may see
//! either protocol in the clear must) matters to long-lived connections:
//! sniffing hands HTTP/1.1 its request in two reads, and hyper's read buffer
//! then doubles to 16 KiB for the connection's life, a third of what an
//! open event stream costs (bench/README.md, "Where a live stream's memory
//! goes").
//!
//! On shutdown the listener closes, every connection is asked to finish the
//! requests it has under way (HTTP/1.1 closes after its current response,
//! HTTP/2 sends GOAWAY), and whatever is still open after the grace period
//! is dropped.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::connections::{Admitted, HandshakeGate, Limited};

/// hyper's settings for each protocol.
pub struct Protocols {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Protocols {
    /// hyper's header limit is `header_bytes` (above the server's own, which
    /// answers with problem+json); a client has `header_timeout` to send an
    /// HTTP/1.1 request's headers.
    pub fn new(header_bytes: usize, header_timeout: Duration) -> Self {
        let mut http1 = http1::Builder::new();
        http1
            .max_buf_size(header_bytes)
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout);
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(header_bytes).unwrap_or(u32::MAX));
        Self { http1, http2 }
    }
}

/// Serves `listener` until `stop` turns true, then shuts down as the module
/// doc says.
pub async fn serve(
    mut listener: TcpListener,
    gate: HandshakeGate,
    protocols: Protocols,
    router: Router,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) {
    let connections = TaskTracker::new();
    let shared = Arc::new(Shared {
        protocols,
        router,
        finish: CancellationToken::new(),
        drop_now: CancellationToken::new(),
    });
    // A stop signal whose sender is gone stops too.
    let mut stopping = std::pin::pin!(async move {
        let _ = stop.wait_for(|stopped| *stopped).await;
    });
    loop {
        // axum's accept skips errors that concern one connection, and pauses
        // after the others (out of file descriptors, most likely).
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut stopping => break,
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
        };
        if let Some(admitted) = gate.admit(stream) {
            connections.spawn(connection(Arc::clone(&shared), admitted, peer));
        }
    }
    // New connections are refused from here on.
    drop(listener);
    shared.finish.cancel();
    connections.close();
    if tokio::time::timeout(grace, connections.wait())
        .await
        .is_err()
    {
        tracing::info!(
            open = connections.len(),
            "dropping the connections still open after the grace period"
        );
        shared.drop_now.cancel();
        connections.wait().await;
    }
}

/// What every connection's task shares.
struct Shared {
    protocols: Protocols,
    router: Router,
    /// Cancelled when connections should finish what they have under way.
    finish: CancellationToken,
    /// Cancelled when the connections still open are dropped.
    drop_now: CancellationToken,
}

/// One connection's task: its handshake, then its requests.
///
/// Each open connection holds this future, so its size is each event
/// stream's too (bench/README.md, "Where a live stream's memory goes").
async fn connection(shared: Arc<Shared>, admitted: Admitted, peer: SocketAddr) {
    // Boxed, because the compiler does not overlap its state with the
    // connection's, and it is over in milliseconds while the connection may
    // last hours. A failed handshake is the client's business (a scanner, a
    // client that does not trust the certificate): no log line. One still
    // under way at shutdown ends there.
    let handshake = Box::pin(admitted.handshake());
    let tls = tokio::select! {
        tls = handshake => match tls {
            Ok(tls) => tls,
            Err(_) => return,
        },
        () = shared.finish.cancelled() => return,
    };
    let (h2, io) = negotiated(tls);
    let router = shared.router.clone();
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request)
    });
    let (finish, drop_now) = (&shared.finish, &shared.drop_now);
    if h2 {
        // Boxed: an HTTP/2 connection's state is larger than an HTTP/1.1
        // one's, and unboxed every connection's task would be sized for it.
        let mut connection = Box::pin(shared.protocols.http2.serve_connection(io, service));
        run(connection.as_mut(), finish, drop_now).await;
    } else {
        let connection = std::pin::pin!(shared.protocols.http1.serve_connection(io, service));
        run(connection, finish, drop_now).await;
    }
}

/// Whether the handshake chose HTTP/2, and the stream for hyper.
///
/// A function of its own so that the stream is never borrowed in
/// [`connection`]: a borrowed local keeps its place in the future to the end
/// of its scope, beside the connection it was moved into.
fn negotiated(
    tls: TlsStream<Limited<TcpStream>>,
) -> (bool, TokioIo<TlsStream<Limited<TcpStream>>>) {
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    (h2, TokioIo::new(tls))
}

/// Runs one connection until it ends, or asks it to finish once `finish` is
/// cancelled and drops it once `drop_now` is.
async fn run<C>(
    mut connection: Pin<&mut C>,
    finish: &CancellationToken,
    drop_now: &CancellationToken,
) where
    C: GracefulConnection,
{
    tokio::select! {
        _ = connection.as_mut() => return,
        () = finish.cancelled() => connection.as_mut().graceful_shutdown(),
    }
    tokio::select! {
        _ = connection => {}
        () = drop_now.cancelled() => {}
    }
}
