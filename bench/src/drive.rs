//! The closed-loop driver: `concurrency` workers, each on its own kept-alive
//! connection, send one request after another until the time is up, and
//! every answer's latency goes into a histogram.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http::Request;
use http_body_util::Full;

use crate::http::{Answer, Endpoint};

/// One kind of request, as each worker sends it again and again.
pub trait Workload: Send + Sync + 'static {
    /// What one worker carries from one request to the next (an update
    /// chain's last hash, say).
    type State: Send + 'static;

    fn state(&self, worker: usize) -> Self::State;

    fn request(&self, state: &mut Self::State) -> Result<Request<Full<Bytes>>, String>;

    /// Whether the answer is the expected one; may advance the state.
    fn check(&self, state: &mut Self::State, answer: &Answer) -> Result<(), String>;
}

/// What a run of one workload measured on the client's side.
pub struct Measured {
    /// Requests answered as expected.
    pub ok: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    /// Latency of the expected answers, microseconds.
    pub latency: Histogram<u64>,
}

impl Measured {
    fn empty() -> Self {
        Self {
            ok: 0,
            errors: 0,
            first_error: None,
            elapsed: Duration::ZERO,
            latency: latency_histogram(),
        }
    }

    fn merge(&mut self, other: Measured) {
        self.ok += other.ok;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.elapsed = self.elapsed.max(other.elapsed);
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency.add(other.latency);
    }

    fn error(&mut self, error: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(error);
        }
    }

    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }
}

/// Microseconds up to 10 minutes, three significant digits; 0 is recorded
/// as 0 (the lowest value told apart from it is 1 µs).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("constant histogram bounds are valid")
}

/// When a run ends.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    After(Duration),
    /// After this many requests (answered or not) in all.
    Count(u64),
}

/// Runs `workload` with `concurrency` workers until `stop`.
pub async fn drive<W: Workload>(
    endpoint: &Endpoint,
    workload: Arc<W>,
    concurrency: usize,
    stop: Stop,
) -> Measured {
    let start = Instant::now();
    let (deadline, budget) = match stop {
        Stop::After(duration) => (start + duration, u64::MAX),
        // A day: the budget ends it.
        Stop::Count(count) => (start + Duration::from_secs(86_400), count),
    };
    let budget = Arc::new(AtomicU64::new(budget));
    let workers: Vec<_> = (0..concurrency)
        .map(|worker| {
            let endpoint = endpoint.clone();
            let workload = workload.clone();
            let budget = budget.clone();
            tokio::spawn(async move {
                let until = Until { deadline, budget };
                run_worker(&endpoint, &*workload, worker, start, until).await
            })
        })
        .collect();
    let mut measured = Measured::empty();
    for worker in workers {
        match worker.await {
            Ok(result) => measured.merge(result),
            Err(error) => measured.error(format!("a load worker failed: {error}")),
        }
    }
    measured
}

struct Until {
    deadline: Instant,
    /// Requests left to send, shared by the workers.
    budget: Arc<AtomicU64>,
}

impl Until {
    /// Whether to send one more request (taking it from the budget).
    fn more(&self) -> bool {
        Instant::now() < self.deadline
            && self
                .budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(1)
                })
                .is_ok()
    }
}

/// After this many errors in a row a worker gives up: the server is gone.
const CONSECUTIVE_ERRORS_BEFORE_GIVING_UP: u32 = 100;

async fn run_worker<W: Workload>(
    endpoint: &Endpoint,
    workload: &W,
    worker: usize,
    start: Instant,
    until: Until,
) -> Measured {
    let mut measured = Measured::empty();
    let mut state = workload.state(worker);
    let mut conn = None;
    let mut failing = 0;
    while until.more() && failing < CONSECUTIVE_ERRORS_BEFORE_GIVING_UP {
        let connection = match &mut conn {
            Some(connection) => connection,
            None => match endpoint.connect().await {
                Ok(connection) => conn.insert(connection),
                Err(error) => {
                    measured.error(error);
                    failing += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let request = match workload.request(&mut state) {
            Ok(request) => request,
            Err(error) => {
                measured.error(error);
                failing += 1;
                continue;
            }
        };
        let sent = Instant::now();
        match connection.send(request).await {
            Ok(answer) => {
                let latency = sent.elapsed();
                match workload.check(&mut state, &answer) {
                    Ok(()) => {
                        measured.ok += 1;
                        failing = 0;
                        let _ = measured.latency.record((latency.as_micros() as u64).max(1));
                    }
                    Err(error) => {
                        measured.error(error);
                        failing += 1;
                    }
                }
            }
            Err(error) => {
                measured.error(error);
                failing += 1;
                conn = None;
            }
        }
    }
    measured.elapsed = start.elapsed();
    measured
}
