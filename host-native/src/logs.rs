//! The log: `tracing` lines on stderr, as text or one JSON object a line,
//! filtered by `FOLIO_LOG` (else `RUST_LOG`, else `info`), coloured only
//! when stderr is a terminal.
//!
//! Every request of the HTTPS listener is one line ([`request`]) with its
//! request id, the route's name, status and duration. No line carries a
//! request's path, query or headers: the query may hold a bearer token,
//! the headers a signature or a cookie, and forms a password.

use std::io::IsTerminal;
use std::time::Duration;

use folio_core::Reply;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message`
    /// and the event's fields at the top level.
    Json,
}

/// The target of the line that says the server listens: always logged,
/// whatever the filter, because scripts wait for it.
const READY_TARGET: &str = "folio::ready";

/// The target of the per-request lines (`FOLIO_LOG=info,folio::request=off`
/// silences them).
const REQUEST_TARGET: &str = "folio::request";

/// Installs the log for the whole process.
pub fn init(format: LogFormat) {
    let (filter, fault) = filter();
    let filter = filter.add_directive(
        format!("{READY_TARGET}=info")
            .parse()
            .expect("a valid directive"),
    );
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
    if let Some(fault) = fault {
        tracing::warn!("{fault}; logging at `info`");
    }
}

/// The filter of `FOLIO_LOG`, else `RUST_LOG`, else `info`; and what was
/// wrong with a filter that could not be read.
fn filter() -> (EnvFilter, Option<String>) {
    let Some((name, text)) = ["FOLIO_LOG", "RUST_LOG"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().map(|text| (name, text)))
    else {
        return (EnvFilter::new("info"), None);
    };
    match EnvFilter::try_new(&text) {
        Ok(filter) => (filter, None),
        Err(error) => (
            EnvFilter::new("info"),
            Some(format!("{name}=`{text}` is not a log filter ({error})")),
        ),
    }
}

/// The line that says the server serves at `url`.
pub fn listening(url: &str) {
    tracing::info!(target: READY_TARGET, "folio: listening on {url}");
}

/// A request's id: 16 random hex digits, in its log line and its
/// `x-request-id` header.
#[derive(Debug, Clone, Copy)]
pub struct RequestId(u64);

impl RequestId {
    pub fn new() -> Self {
        RequestId(rand::random())
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// The line of one answered request. `took` runs to the answer's head: a
/// stream's body (events, a blob) goes on after it.
pub fn request<S>(id: RequestId, method: &str, reply: &Reply<S>, took: Duration) {
    let problem = reply.problem.map(|kind| kind.code());
    tracing::info!(
        target: REQUEST_TARGET,
        request_id = %id,
        route = reply.route,
        method,
        status = reply.status,
        problem,
        duration_ms = took.as_secs_f64() * 1e3,
        "request"
    );
}
