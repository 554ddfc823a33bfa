//! Connection floods held open while a step is measured: thousands of
//! idle connections (TLS done, then nothing), or a slowloris (TLS done,
//! then a request's headers one byte every two seconds). Each connection
//! the server closes is opened again, so the count holds while the server's
//! timeouts do their work; a connection the server refuses is counted and
//! retried a little later.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::http::{Endpoint, RawConn};

/// What each connection of a flood does once open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing.
    Idle,
    /// A request line and then a header, one byte every [`DRIP`].
    Slowloris,
}

/// How often a slowloris connection sends its next byte.
const DRIP: Duration = Duration::from_secs(2);

/// How many connections are being opened at once.
const OPENING_AT_ONCE: usize = 256;

/// How long a refused or failed connection waits before it tries again.
const RETRY: Duration = Duration::from_millis(250);

/// Counters of a flood.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections open now.
    pub held: AtomicUsize,
    /// Connections opened (TLS done), first times and again.
    pub opened: AtomicU64,
    /// Connections the server closed after they were open.
    pub closed_by_server: AtomicU64,
    /// Connections refused: the server closed them before or during TLS,
    /// or the connect failed.
    pub refused: AtomicU64,
}

/// A flood in progress; it stops when dropped.
pub struct Flood {
    pub kind: Kind,
    pub target: usize,
    pub counts: Arc<Counts>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Flood {
    /// Starts `target` connections of `kind`, and waits until they are all
    /// open or `ramp` has passed.
    pub async fn start(endpoint: &Endpoint, kind: Kind, target: usize, ramp: Duration) -> Flood {
        let counts = Arc::new(Counts::default());
        let (stop, stopped) = watch::channel(false);
        let opening = Arc::new(Semaphore::new(OPENING_AT_ONCE));
        let mut tasks = JoinSet::new();
        for _ in 0..target {
            tasks.spawn(hold(
                endpoint.clone(),
                kind,
                counts.clone(),
                opening.clone(),
                stopped.clone(),
            ));
        }
        let deadline = Instant::now() + ramp;
        while counts.held.load(Ordering::Relaxed) < target && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Flood {
            kind,
            target,
            counts,
            stop,
            tasks,
        }
    }

    /// How it stands, for the table's notes.
    pub fn summary(&self) -> String {
        let counts = &self.counts;
        format!(
            "{} of {} {} connections held; {} opened, {} closed by the server, {} refused",
            counts.held.load(Ordering::Relaxed),
            self.target,
            match self.kind {
                Kind::Idle => "idle",
                Kind::Slowloris => "slowloris",
            },
            counts.opened.load(Ordering::Relaxed),
            counts.closed_by_server.load(Ordering::Relaxed),
            counts.refused.load(Ordering::Relaxed),
        )
    }

    /// Closes every connection.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}

/// One connection of the flood, opened again each time it is closed.
async fn hold(
    endpoint: Endpoint,
    kind: Kind,
    counts: Arc<Counts>,
    opening: Arc<Semaphore>,
    mut stopped: watch::Receiver<bool>,
) {
    while !*stopped.borrow() {
        let opened = {
            let Ok(_turn) = opening.acquire().await else {
                return;
            };
            endpoint.open_raw().await
        };
        let Ok(conn) = opened else {
            counts.refused.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(RETRY).await;
            continue;
        };
        counts.opened.fetch_add(1, Ordering::Relaxed);
        counts.held.fetch_add(1, Ordering::Relaxed);
        let closed = tokio::select! {
            () = occupy(conn, kind) => true,
            _ = stopped.wait_for(|stop| *stop) => false,
        };
        counts.held.fetch_sub(1, Ordering::Relaxed);
        if closed {
            counts.closed_by_server.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Keeps the connection busy as `kind` says until the server closes it.
async fn occupy(conn: RawConn, kind: Kind) {
    match conn {
        RawConn::Plain(stream) => occupy_stream(stream, kind).await,
        RawConn::Tls(stream) => occupy_stream(*stream, kind).await,
    }
}

async fn occupy_stream<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, kind: Kind) {
    match kind {
        Kind::Idle => {
            let mut buf = [0; 256];
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        }
        Kind::Slowloris => {
            if stream
                .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
                .await
                .is_err()
            {
                return;
            }
            let mut buf = [0; 256];
            loop {
                tokio::select! {
                    read = stream.read(&mut buf) => {
                        if !matches!(read, Ok(n) if n > 0) {
                            return;
                        }
                    }
                    () = tokio::time::sleep(DRIP) => {
                        if stream.write_all(b"a").await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}
