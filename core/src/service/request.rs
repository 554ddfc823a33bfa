//! The types every endpoint shares: the request as the host received it,
//! the reply, a failure on the way, and the context an endpoint answers in.

use std::fmt;
use std::net::IpAddr;

use crate::auth::{HeaderLookup, SignedRequest};
use crate::model::RecordDate;
use crate::problem::{PROBLEM_CONTENT_TYPE, Problem, ProblemType};
use crate::service::fresh::Fresh;
use crate::service::route::Method;
use crate::service::standing::Epoch;

use super::observe::NotificationReceipt;
use super::{Host, Limited, Rate, STORAGE_FULL_RETRY_AFTER_SECS, store};

/// A request as the host received it, without its body.
pub struct Request<'r> {
    /// The method, as sent.
    pub method: &'r str,
    /// The path and query, as sent.
    pub target: &'r str,
    /// The host name the request addressed (lowercase, without port) and
    /// its port (the explicit one, else 443; PROTOCOL.md §10).
    pub host: &'r str,
    /// The port the request addressed: the explicit one, else 443.
    pub port: u16,
    /// Every header, looked up by lowercase name.
    pub headers: &'r (dyn HeaderLookup + Sync),
    /// The size of the header section, as
    /// [`header_section_len`](crate::service::limits::header_section_len) counts it.
    pub header_bytes: usize,
    /// The client's address, when the host knows it (rates per address).
    pub peer: Option<IpAddr>,
    /// The time the request arrived: the one "now" of every decision it
    /// leads to (signature windows, nonces, rates, expiries, cookies). A
    /// write job is stamped with its scheduler's time instead.
    pub now: RecordDate,
    /// The randomness the request may use (ids, keys, nonces).
    pub fresh: Fresh,
    /// The host's [`Epoch`] when the request arrived, if it keeps a
    /// [`Resident`](super::Resident): what that holds of users, standings
    /// and versions is used only if read under this epoch. `None` uses none
    /// of it. A host passes one only if every commit that
    /// [changes a standing](crate::service::jobs::Effects::changes_standing)
    /// moves its epoch before it is acknowledged, and so does every change
    /// made to the store by anything else.
    pub epoch: Option<Epoch>,
}

impl Request<'_> {
    pub(in crate::service) fn header(&self, lowercase_name: &str) -> Option<&str> {
        self.headers
            .header(lowercase_name)
            .and_then(|value| std::str::from_utf8(value).ok())
    }

    pub(in crate::service) fn signed(&self) -> SignedRequest<'_> {
        SignedRequest {
            method: self.method,
            path_and_query: self.target,
            host: self.host,
            port: self.port,
        }
    }
}

/// [`Reply::route`] of a request no endpoint matched.
pub(super) const UNROUTED: &str = "unknown";

/// The answer to send.
pub struct Reply<S> {
    /// The HTTP status.
    pub status: u16,
    /// What the request did, as [`Endpoint::name`](crate::service::route::Endpoint::name) names it (`"unknown"`
    /// when no endpoint matched): for the host's logs and metrics.
    pub route: &'static str,
    /// The problem answered, if the reply is one: for logs and metrics.
    pub problem: Option<ProblemType>,
    /// Lowercase names; a name appears at most once.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: ReplyBody<S>,
    /// What a notification another server sent did, on the answers of
    /// `POST /api/{user}/notifications` only: for the host's metrics.
    pub notification: Option<NotificationReceipt>,
}

impl<S> Reply<S> {
    pub(in crate::service) fn new(status: u16, body: ReplyBody<S>) -> Self {
        Reply {
            status,
            route: UNROUTED,
            problem: None,
            headers: Vec::new(),
            body,
            notification: None,
        }
    }

    /// An answer without a body.
    pub fn empty(status: u16) -> Self {
        Reply::new(status, ReplyBody::Empty)
    }

    /// A JSON answer.
    pub fn json(status: u16, body: String) -> Self {
        Reply::new(status, ReplyBody::Bytes(body.into_bytes()))
            .with("content-type", "application/json")
    }

    /// The problem+json answer of `problem`.
    pub fn problem(problem: &Problem, docs_url: &str) -> Self {
        let mut reply = Reply::new(
            problem.status(),
            ReplyBody::Bytes(problem.to_json(docs_url).into_bytes()),
        )
        .with("content-type", PROBLEM_CONTENT_TYPE);
        reply.problem = Some(problem.kind);
        reply
    }

    /// Sets a header, replacing one of the same name.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.set(name, value);
        self
    }

    /// Sets a header, replacing one of the same name.
    pub fn set(&mut self, name: &'static str, value: impl Into<String>) {
        let value = value.into();
        match self.headers.iter_mut().find(|(known, _)| *known == name) {
            Some(slot) => slot.1 = value,
            None => self.headers.push((name, value)),
        }
    }

    /// The value of header `name`, if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The body of a reply.
pub enum ReplyBody<S> {
    /// No body.
    Empty,
    /// These bytes, whole.
    Bytes(Vec<u8>),
    /// Bytes the host streams (a blob, an event stream).
    Stream(S),
}

/// A refused request: its problem, and the headers some problems carry.
#[derive(Debug)]
pub(super) struct Failure {
    /// The problem to answer with.
    pub problem: Problem,
    /// Headers the problem carries (`Retry-After`, `Allow`, …): lowercase names.
    pub headers: Vec<(&'static str, String)>,
    /// What went wrong inside the server (`server/500-internal`): logged
    /// once, by [`handle`], and never sent.
    pub(in crate::service) internal: Option<String>,
    /// What the refused notification's versions each did, when it is one
    /// whose every version was refused ([`Reply::notification`]).
    pub(in crate::service) notification: Option<NotificationReceipt>,
}

impl From<Problem> for Failure {
    fn from(problem: Problem) -> Self {
        Failure {
            problem,
            headers: Vec::new(),
            internal: None,
            notification: None,
        }
    }
}

impl Failure {
    /// An unexpected failure of the host or of stored data: answered
    /// `server/500-internal` without details a client could misuse.
    pub(crate) fn internal(error: impl std::fmt::Display) -> Self {
        Failure {
            internal: Some(error.to_string()),
            ..Failure::from(Problem::new(ProblemType::Internal))
        }
    }
}

impl From<store::RowError> for Failure {
    fn from(error: store::RowError) -> Self {
        Failure::internal(error)
    }
}

impl From<crate::store::StoredDataError> for Failure {
    fn from(error: crate::store::StoredDataError) -> Self {
        Failure::internal(error)
    }
}

impl From<Limited> for Failure {
    fn from(limited: Limited) -> Self {
        Failure::from(limited.problem).with("retry-after", limited.retry_after_secs.to_string())
    }
}

impl Failure {
    pub(crate) fn with(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The failure of a notification whose every version was refused, as
    /// `answer` lists them: for the host's metrics.
    pub(crate) fn with_refused_notification(
        mut self,
        answer: crate::service::federation::NotificationAnswer,
    ) -> Self {
        self.notification = Some(NotificationReceipt::failed(
            self.problem.kind,
            Some(&answer),
        ));
        self
    }

    /// The host's storage is full: `server/503-unavailable` with a
    /// `Retry-After`, and `error` in the host's log.
    pub(crate) fn storage_full(error: impl fmt::Display) -> Self {
        let problem = Problem::new(ProblemType::Unavailable)
            .with_detail("the server's storage is full; nothing was stored, retry later");
        Failure {
            problem,
            headers: vec![("retry-after", STORAGE_FULL_RETRY_AFTER_SECS.to_string())],
            internal: Some(format!("storage full: {error}")),
            notification: None,
        }
    }
}

/// What an endpoint answers: a reply, or the failure it is made of.
pub(in crate::service) type Outcome<S> = Result<Reply<S>, Failure>;

/// What every endpoint knows of its request.
pub(in crate::service) struct Context<'h, 'r, H: Host> {
    pub(in crate::service) host: &'h H,
    pub(in crate::service) request: &'r Request<'r>,
    pub(in crate::service) method: Method,
    pub(in crate::service) params: Vec<(String, String)>,
}

impl<H: Host> Context<'_, '_, H> {
    /// The rows of a read; a failure of the host's store is internal.
    pub(in crate::service) async fn fetch(
        &self,
        statement: &crate::store::Statement,
    ) -> Result<Vec<store::Row>, Failure> {
        self.host.fetch(statement).await.map_err(Failure::internal)
    }

    /// Counts the request against `rate`.
    pub(in crate::service) async fn rate(&self, rate: Rate<'_>) -> Result<(), Limited> {
        super::resident::count(self.host, rate, self.request.now).await
    }

    /// Runs `job` ([`resident::run`](super::resident::run)).
    pub(in crate::service) async fn run_job(
        &self,
        job: crate::service::jobs::Job,
    ) -> Result<crate::service::jobs::JobOutcome, super::WriteFailure> {
        super::resident::run(self.host, job, self.request.epoch).await
    }
}
