//! The HTTPS listener's connections: how many may be open, from one
//! address and in all, and how long one may sit idle.
//!
//! Each limit is a setting of `folio serve` with a default that a server on
//! its own can keep. A connection past a cap is closed as soon as it is
//! accepted, before its TLS handshake, so a flood of connections costs a
//! file descriptor for an instant each and never the process's last one:
//! the total cap stays below the file limit. A connection that sends and
//! receives nothing for the idle timeout is closed; an event stream is
//! never idle that long, since a heartbeat goes out every 15 seconds.
//!
//! TLS handshakes are the costly part of a new connection (a key exchange
//! and a signature each), so they start at a bounded pace
//! ([`HandshakePace`]): a burst of new connections (a slowloris
//! reconnecting) waits its turns, within the header timeout, and the
//! requests of connections already open go on meanwhile. A turn is a start
//! time, not a place held: a client that goes silent mid-handshake delays
//! no one.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::metrics::{Limit, METRICS};

/// Default most connections open from one client address.
pub const DEFAULT_CONNECTIONS_PER_ADDRESS: usize = 1_024;

/// Default longest time a connection may send and receive nothing.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default longest time a client may take to send a request's headers
/// (HTTP/1.1) or to complete its TLS handshake.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default TLS handshakes started per second, per core (and as many at
/// once after a quiet second). A handshake costs well under a millisecond
/// of a core here, so this pace leaves most of each core to requests.
pub const DEFAULT_HANDSHAKES_PER_SECOND_PER_CORE: u32 = 250;

/// File descriptors kept back from the total connection cap for the
/// database, blob files, the plain-HTTP listener and logs.
pub const RESERVED_FILES: u64 = 1_024;

/// How often a refused connection is logged at most (with a count of the
/// others refused meanwhile): a flood must not flood the log too.
const REFUSAL_LOG_INTERVAL_MS: u64 = 10_000;

/// The limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections open at once; `None`: as many as the file limit allows.
    pub total: Option<usize>,
    /// Most connections open at once from one client address.
    pub per_address: Option<usize>,
    /// A connection that sends and receives nothing this long is closed.
    pub idle: Duration,
}

/// Raises the soft limit on open files to the hard one, and answers the
/// total connection cap it leaves room for: that limit less
/// [`RESERVED_FILES`].
pub fn total_cap_from_file_limit() -> usize {
    let files = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(files) => files,
        Err(error) => {
            tracing::warn!(%error, "could not read the open-file limit; assuming 1,024");
            1_024
        }
    };
    let cap = files.saturating_sub(RESERVED_FILES).max(64);
    usize::try_from(cap).unwrap_or(usize::MAX)
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// Counts the listener's connections and refuses those past its caps.
#[derive(Debug, Clone)]
pub struct LimitAcceptor {
    limits: ConnectionLimits,
    counts: Arc<Mutex<Counts>>,
    refusals: Arc<Refusals>,
}

impl LimitAcceptor {
    pub fn new(limits: ConnectionLimits) -> Self {
        Self {
            limits,
            counts: Arc::default(),
            refusals: Arc::new(Refusals::new(
                "over the connection caps (--max-connections, --max-connections-per-address)",
                Limit::Connections,
            )),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more connection from `address`, if the caps allow.
    fn admit(&self, address: IpAddr) -> Option<Place> {
        let mut counts = self.lock();
        let from_address = counts.per_address.get(&address).copied().unwrap_or(0);
        let full = self.limits.total.is_some_and(|cap| counts.total >= cap)
            || self
                .limits
                .per_address
                .is_some_and(|cap| from_address >= cap);
        if full {
            return None;
        }
        counts.total += 1;
        *counts.per_address.entry(address).or_default() += 1;
        Some(Place {
            counts: Arc::clone(&self.counts),
            address,
        })
    }

    /// Connections open now, in all and from `address`.
    #[cfg(test)]
    fn open(&self, address: IpAddr) -> (usize, usize) {
        let counts = self.lock();
        let from = counts.per_address.get(&address).copied().unwrap_or(0);
        (counts.total, from)
    }

    fn take(&self, stream: TcpStream) -> io::Result<Limited<TcpStream>> {
        // TCP_NODELAY: an answer goes out when written, not after the
        // client's delayed ACK of the previous segment.
        stream.set_nodelay(true)?;
        let address = stream.peer_addr()?.ip();
        match self.admit(address) {
            Some(place) => Ok(Limited::new(stream, place, self.limits.idle)),
            None => {
                self.refusals.note(address);
                // Dropping the stream closes it.
                Err(io::Error::other("over the connection cap"))
            }
        }
    }
}

/// The pace at which TLS handshakes start: `per_second` on average, and up
/// to `per_second` at once after a quiet second. Each new connection is
/// given the next start time; one whose start is further off than the
/// longest wait is refused instead (its client retries later).
#[derive(Debug)]
pub struct HandshakePace {
    interval: Duration,
    burst: Duration,
    longest_wait: Duration,
    /// The start time the next handshake gets, unless the pace is behind.
    next: Mutex<Instant>,
}

impl HandshakePace {
    pub fn new(per_second: u32, longest_wait: Duration) -> Self {
        let per_second = per_second.max(1);
        let interval = Duration::from_secs(1) / per_second;
        let burst = interval * (per_second - 1);
        Self {
            interval,
            burst,
            longest_wait,
            next: Mutex::new(Instant::now()),
        }
    }

    /// When a handshake arriving `now` may start, or `None` if that is
    /// more than the longest wait away.
    fn start_at(&self, now: Instant) -> Option<Instant> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let start = (*next).max(now.checked_sub(self.burst).unwrap_or(now));
        let start_at = start.max(now);
        if start_at > now + self.longest_wait {
            return None;
        }
        *next = start + self.interval;
        Some(start_at)
    }
}

/// The HTTPS listener's acceptor: a connection past the caps is closed at
/// once; one within them waits for its handshake's start time (see
/// [`HandshakePace`]), then makes its TLS handshake within the header
/// timeout.
pub struct HandshakeGate {
    limit: LimitAcceptor,
    tls: TlsAcceptor,
    handshake_timeout: Duration,
    pace: Arc<HandshakePace>,
    refusals: Arc<Refusals>,
}

impl HandshakeGate {
    pub fn new(
        limit: LimitAcceptor,
        tls: TlsAcceptor,
        handshake_timeout: Duration,
        pace: HandshakePace,
    ) -> Self {
        Self {
            limit,
            tls,
            handshake_timeout,
            pace: Arc::new(pace),
            refusals: Arc::new(Refusals::new(
                "over the handshake pace (--handshakes-per-second)",
                Limit::HandshakePace,
            )),
        }
    }

    /// A new connection within the caps and the pace, or `None` (and the
    /// connection closed) if it is past either.
    pub fn admit(&self, stream: TcpStream) -> Option<Admitted> {
        let stream = self.limit.take(stream).ok()?;
        let Some(start_at) = self.pace.start_at(Instant::now()) else {
            self.refusals.note(stream.place.address);
            return None;
        };
        Some(Admitted {
            stream,
            start_at,
            tls: self.tls.clone(),
            handshake_timeout: self.handshake_timeout,
        })
    }
}

/// A connection let in, its TLS handshake still to make.
pub struct Admitted {
    stream: Limited<TcpStream>,
    start_at: Instant,
    tls: TlsAcceptor,
    handshake_timeout: Duration,
}

impl Admitted {
    /// Waits for the handshake's start time, then makes it within the
    /// header timeout.
    pub async fn handshake(self) -> io::Result<TlsStream<Limited<TcpStream>>> {
        tokio::time::sleep_until(self.start_at).await;
        tokio::time::timeout(self.handshake_timeout, self.tls.accept(self.stream))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
    }
}

/// A plain TCP listener under the same limits (the plain-HTTP listener
/// that redirects to HTTPS): connections past a cap are closed at once.
pub struct LimitedListener {
    listener: tokio::net::TcpListener,
    acceptor: LimitAcceptor,
}

impl LimitedListener {
    pub fn new(listener: tokio::net::TcpListener, acceptor: LimitAcceptor) -> Self {
        Self { listener, acceptor }
    }
}

impl axum::serve::Listener for LimitedListener {
    type Io = Limited<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, address) = axum::serve::Listener::accept(&mut self.listener).await;
            if let Ok(stream) = self.acceptor.take(stream) {
                return (stream, address);
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// Refusals since the last log line.
#[derive(Debug)]
struct Refusals {
    unlogged: AtomicU64,
    last_logged_ms: AtomicU64,
    /// Which limit refused them.
    why: &'static str,
    limit: Limit,
}

impl Refusals {
    fn new(why: &'static str, limit: Limit) -> Self {
        Self {
            unlogged: AtomicU64::new(0),
            last_logged_ms: AtomicU64::new(0),
            why,
            limit,
        }
    }

    fn note(&self, address: IpAddr) {
        METRICS.refused(self.limit);
        let refused = self.unlogged.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = u64::try_from(crate::clock::Clock.now().unix_millis()).unwrap_or(0);
        let last = self.last_logged_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= REFUSAL_LOG_INTERVAL_MS
            && self
                .last_logged_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.unlogged.store(0, Ordering::Relaxed);
            tracing::warn!(
                %address,
                refused,
                limit = self.why,
                "connections refused since the last such line"
            );
        }
    }
}

/// A connection's place among the open ones; given back when dropped.
#[derive(Debug)]
struct Place {
    counts: Arc<Mutex<Counts>>,
    address: IpAddr,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if let Some(open) = counts.per_address.get_mut(&self.address) {
            *open -= 1;
            if *open == 0 {
                counts.per_address.remove(&self.address);
            }
        }
    }
}

/// A connection that holds its place and ends when idle too long.
#[derive(Debug)]
pub struct Limited<T> {
    io: T,
    place: Place,
    idle: Duration,
    /// When the connection last sent or received a byte.
    active: Instant,
    /// Fires at `active + idle` at the earliest; when it fires early (the
    /// connection was active meanwhile) it is set again, so activity costs
    /// a clock read, not a timer change.
    deadline: Pin<Box<Sleep>>,
}

impl<T> Limited<T> {
    fn new(io: T, place: Place, idle: Duration) -> Self {
        let active = Instant::now();
        Self {
            io,
            place,
            idle,
            active,
            deadline: Box::pin(tokio::time::sleep_until(active + idle)),
        }
    }

    /// Whether the connection has been idle too long; otherwise arms the
    /// timer to wake the task at the end of the idle time.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            let end = self.active + self.idle;
            if self.deadline.deadline() < end {
                self.deadline.as_mut().reset(end);
            }
            match self.deadline.as_mut().poll(cx) {
                Poll::Pending => return false,
                Poll::Ready(()) if self.active + self.idle <= Instant::now() => return true,
                Poll::Ready(()) => {}
            }
        }
    }

    fn timed_out() -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, "the connection was idle too long")
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Limited<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.active = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending if this.poll_idle(cx) => Poll::Ready(Err(Self::timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Limited<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            this.active = Instant::now();
        }
        written
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            this.active = Instant::now();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let address = listener.local_addr().expect("an address");
        let client = TcpStream::connect(address).await.expect("a connection");
        let (server, _) = listener.accept().await.expect("accepted");
        (client, server)
    }

    #[tokio::test]
    async fn connections_past_either_cap_are_refused_and_places_come_back() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a listener");
        let acceptor = LimitAcceptor::new(ConnectionLimits {
            total: Some(3),
            per_address: Some(2),
            idle: DEFAULT_IDLE_TIMEOUT,
        });
        let loopback: IpAddr = "127.0.0.1".parse().expect("an address");
        let mut kept = Vec::new();
        for _ in 0..2 {
            let (client, server) = pair(&listener).await;
            kept.push((client, acceptor.take(server).expect("within the caps")));
        }
        let (mut refused_client, server) = pair(&listener).await;
        assert!(acceptor.take(server).is_err(), "a third from one address");
        let mut byte = [0; 1];
        assert_eq!(
            refused_client
                .read(&mut byte)
                .await
                .expect("closed, not reset"),
            0,
            "the refused connection is closed"
        );
        assert_eq!(acceptor.open(loopback), (2, 2));
        // The total cap counts every address.
        let other: IpAddr = "127.0.0.2".parse().expect("an address");
        let place = acceptor.admit(other).expect("a place");
        assert!(acceptor.admit(other).is_none(), "the total cap");
        drop(place);
        kept.pop();
        assert_eq!(acceptor.open(loopback), (1, 1));
        let (_client, server) = pair(&listener).await;
        assert!(acceptor.take(server).is_ok(), "a place came back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_idle_too_long_ends_and_activity_keeps_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a listener");
        let acceptor = LimitAcceptor::new(ConnectionLimits {
            total: None,
            per_address: None,
            idle: Duration::from_secs(60),
        });
        let (mut client, server) = pair(&listener).await;
        let mut server = acceptor.take(server).expect("a place");
        let mut buf = [0; 8];
        // Active every 40 seconds: never idle for 60.
        for _ in 0..3 {
            tokio::time::advance(Duration::from_secs(40)).await;
            client.write_all(b"x").await.expect("sent");
            assert_eq!(server.read(&mut buf).await.expect("a byte"), 1);
        }
        let silent = server.read(&mut buf).await;
        let error = silent.expect_err("a silent connection ends");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn handshakes_start_at_their_pace_and_those_too_far_off_are_refused() {
        let pace = HandshakePace::new(10, Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(5)).await;
        let now = Instant::now();
        let starts: Vec<Option<Instant>> = (0..21).map(|_| pace.start_at(now)).collect();
        // After a quiet second, a second's worth at once...
        assert!(starts[..10].iter().all(|start| *start == Some(now)));
        // ...then one every 100 ms, as far as the longest wait...
        for (waiting, start) in starts[10..20].iter().enumerate() {
            let after = Duration::from_millis(100) * (u32::try_from(waiting).unwrap() + 1);
            assert_eq!(*start, Some(now + after));
        }
        // ...and none further off, which takes no turn from later ones.
        assert_eq!(starts[20], None);
        tokio::time::advance(Duration::from_millis(150)).await;
        assert_eq!(
            pace.start_at(Instant::now()),
            Some(now + Duration::from_millis(1_100))
        );
    }
}
