//! The whole API as one function both hosts call: [`handle`] takes a
//! request as the host received it and answers the reply to send.
//!
//! Every decision of a request lives here: limits, routing, who is asking,
//! which statements to run, what a write stores, which headers the answer
//! carries. The service does no IO and runs on no runtime: it awaits what
//! the host does.
//!
//! ```text
//! native:  axum request ──► handle(&App, Request) ──► Reply ──► axum response
//! worker:  fetch event  ──► user object ──► handle(&UserStore, Request) ──► Reply ──► Response
//! ```
//!
//! # The calling contract
//!
//! **One input per request.** The host reads its clock once and draws 32
//! random bytes once, and hands both in with the [`Request`] (`now`,
//! `fresh`). Every time-dependent decision of the request (signature
//! windows, nonces, rates, bearer expiry, cookies, upload expiry) uses that
//! `now`; every id, key and nonce it makes comes from that [`Fresh`]. The
//! service never asks the host for the time or for randomness.
//!
//! **What a host provides**, as small traits ([`Host`] is all of them): a
//! [`Store`] to read (user lookups and core's statements, outside any
//! write); [`Jobs`], its one ordered place of writes; [`Bodies`], request
//! bodies read on demand up to a limit; [`Blobs`] (uploads through core's
//! [`UploadMeter`](crate::blob::UploadMeter), bytes by hash); [`Streams`]
//! (a place among a user's subscribers, within core's
//! [`StreamCaps`](crate::events::StreamCaps), and the live stream);
//! [`Guards`] (rates with core's [`RateLimits`], nonces); [`Secrets`] (the
//! consent page's session key and password check).
//!
//! **In what order.** Within one request, calls happen one at a time, in
//! this order: the user lookup; reads for authentication (the app's key,
//! its authorization), then the nonce check and the rate; the body, read at
//! most once and only after the headers passed; further reads; at most
//! **one job** ([`Jobs::run`], or [`Blobs::place_blob`] for an upload),
//! whose versions the host publishes to the user's streams once durable;
//! then the reads of the answer (linked records). An events request takes
//! its place with its [`EventStream`](crate::events::EventStream)
//! ([`Streams::subscribe`]) before it reads the catch-up, so that nothing
//! committed meanwhile is missed, and hands the place back with the
//! catch-up in [`Streams::event_stream`], whose body the host drives as
//! the stream says. A body the service did not read is handed to
//! [`Bodies::discard`] before the reply.
//!
//! **What may interleave.** Requests run concurrently: their reads see any
//! committed state, and nothing a request decided before its job is trusted
//! by the job. A job ([`writes::Job`]) re-reads what it depends on inside
//! its transaction, at its scheduler's time, and runs again from the start
//! if its commit loses a race ([`store::CommitError::Conflict`]).
//!
//! **Failures.** A host's error becomes `server/500-internal`; the service
//! logs it once, through [`Host::report`], and never sends its text.

mod auth;
mod blobs;
mod consent;
mod console;
mod events;
mod federation;
mod host;
pub mod memo;
mod outbox;
mod rates;
mod records;
pub mod standing;
pub mod store;
pub mod upkeep;
pub mod writes;

pub use auth::Caller;
pub use federation::receive_locally;
pub use host::{
    Blobs, Bodies, BodyError, Guards, Host, Jobs, Limited, Note, Peers, Rate,
    STORAGE_FULL_RETRY_AFTER_SECS, Secrets, Settings, Store, Streams, UploadFailure, User,
    WriteFailure,
};
pub use host::{UNVERIFIED_DISCOVERIES_PER_ADDRESS_PER_MINUTE, UNVERIFIED_DISCOVERIES_PER_MINUTE};
pub use outbox::{
    DELIVERY_DEADLINE_MS, DELIVERY_PLAN_ROWS, Delivery, DeliveryKey, DeliveryReport,
    MAX_DELIVERIES_AT_ONCE, next_due, plan_deliveries,
};
pub use rates::{
    ACCOUNT_BACKOFF_FIRST_SECS, ACCOUNT_BACKOFF_MAX_SECS, ACCOUNT_BACKOFF_RESET_SECS,
    ACCOUNT_SIGN_IN_ATTEMPTS, AccountAttempts, AccountBackoff, AddressRate, AddressRateKind,
    AddressVerdict, RateLimits, address_key,
};

use std::fmt;
use std::net::IpAddr;

use crate::auth::{HeaderLookup, SignedRequest};
use crate::discovery::{discovery_link, entity_record_url, server_info_json, user_for_host};
use crate::docs::{ERROR_TYPE_PAGE_CONTENT_TYPE, error_type_page};
use crate::fresh::Fresh;
use crate::http::{NO_CACHE, NOSNIFF, PREFLIGHT_STATUS, strict_transport_security};
use crate::limits::{check_header_bytes, check_request_target};
use crate::model::RecordDate;
use crate::problem::{PROBLEM_CONTENT_TYPE, Problem, ProblemType};
use crate::query::decode_query_string;
use crate::route::{Endpoint, Method, route};
use crate::store::{entity_record_sql, read_version};

use store::version_row;

/// A request as the host received it, without its body.
pub struct Request<'r> {
    /// The method, as sent.
    pub method: &'r str,
    /// The path and query, as sent.
    pub target: &'r str,
    /// The host name the request addressed (lowercase, without port) and
    /// its port (the explicit one, else 443; PROTOCOL.md §10).
    pub host: &'r str,
    pub port: u16,
    /// Every header, looked up by lowercase name.
    pub headers: &'r (dyn HeaderLookup + Sync),
    /// The size of the header section, as
    /// [`header_section_len`](crate::limits::header_section_len) counts it.
    pub header_bytes: usize,
    /// The client's address, when the host knows it (rates per address).
    pub peer: Option<IpAddr>,
    /// The time the request arrived: the one "now" of every decision it
    /// leads to (signature windows, nonces, rates, expiries, cookies). A
    /// write job is stamped with its scheduler's time instead.
    pub now: RecordDate,
    /// The randomness the request may use (ids, keys, nonces).
    pub fresh: Fresh,
}

impl Request<'_> {
    fn header(&self, lowercase_name: &str) -> Option<&str> {
        self.headers
            .header(lowercase_name)
            .and_then(|value| std::str::from_utf8(value).ok())
    }

    fn signed(&self) -> SignedRequest<'_> {
        SignedRequest {
            method: self.method,
            path_and_query: self.target,
            host: self.host,
            port: self.port,
        }
    }
}

/// [`Reply::route`] of a request no endpoint matched.
pub const UNROUTED: &str = "unknown";

/// The answer to send.
pub struct Reply<S> {
    pub status: u16,
    /// What the request did, as [`Endpoint::name`] names it (`"unknown"`
    /// when no endpoint matched): for the host's logs and metrics.
    pub route: &'static str,
    /// The problem answered, if the reply is one: for logs and metrics.
    pub problem: Option<ProblemType>,
    /// Lowercase names; a name appears at most once.
    pub headers: Vec<(&'static str, String)>,
    pub body: ReplyBody<S>,
}

impl<S> Reply<S> {
    fn new(status: u16, body: ReplyBody<S>) -> Self {
        Reply {
            status,
            route: UNROUTED,
            problem: None,
            headers: Vec::new(),
            body,
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
    Empty,
    Bytes(Vec<u8>),
    /// Bytes the host streams (a blob, an event stream).
    Stream(S),
}

/// A refused request: its problem, and the headers some problems carry.
#[derive(Debug)]
pub struct Failure {
    pub problem: Problem,
    pub headers: Vec<(&'static str, String)>,
    /// What went wrong inside the server (`server/500-internal`): logged
    /// once, by [`handle`], and never sent.
    internal: Option<String>,
}

impl From<Problem> for Failure {
    fn from(problem: Problem) -> Self {
        Failure {
            problem,
            headers: Vec::new(),
            internal: None,
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

    /// The host's storage is full: `server/503-unavailable` with a
    /// `Retry-After`, and `error` in the host's log.
    pub(crate) fn storage_full(error: impl fmt::Display) -> Self {
        let problem = Problem::new(ProblemType::Unavailable)
            .with_detail("the server's storage is full; nothing was stored, retry later");
        Failure {
            problem,
            headers: vec![("retry-after", STORAGE_FULL_RETRY_AFTER_SECS.to_string())],
            internal: Some(format!("storage full: {error}")),
        }
    }
}

type Outcome<S> = Result<Reply<S>, Failure>;

/// Answers one request; `body` is its body, unread.
pub async fn handle<H: Host>(host: &H, request: Request<'_>, body: H::Body) -> Reply<H::Stream> {
    let preflight = request.method == "OPTIONS";
    let head = request.method == "HEAD";
    let settings = host.settings();
    let mut body = Some(body);
    let mut route = UNROUTED;
    // The API's CORS headers go on every answer but a page's.
    let mut cors = true;
    let outcome = dispatch(host, &request, &mut body, &mut route, &mut cors).await;
    // A body the answer did not read is drained, so that a client still
    // sending it receives the answer (and a proxy in front is not left
    // with half a stream).
    if let Some(body) = body {
        host.discard(body).await;
    }
    let mut reply = match outcome {
        Ok(reply) => reply,
        Err(failure) => {
            if let Some(error) = &failure.internal {
                host.report(error);
            }
            let mut reply = Reply::problem(&failure.problem, &settings.docs_url);
            for (name, value) in failure.headers {
                reply.set(name, value);
            }
            reply
        }
    };
    if !preflight {
        if cors {
            for (name, value) in settings.dialect.cors_headers() {
                reply.set(name, value);
            }
        }
        reply.set(NOSNIFF.0, NOSNIFF.1);
        if let Some(value) = strict_transport_security(&settings.base_url) {
            reply.set("strict-transport-security", value);
        }
    }
    if reply.header("cache-control").is_none() {
        reply.set("cache-control", NO_CACHE);
    }
    if head {
        reply.body = ReplyBody::Empty;
    }
    reply.route = route;
    reply
}

/// What every endpoint knows of its request.
struct Context<'h, 'r, H: Host> {
    host: &'h H,
    request: &'r Request<'r>,
    method: Method,
    params: Vec<(String, String)>,
}

impl<H: Host> Context<'_, '_, H> {
    /// The rows of a read; a failure of the host's store is internal.
    async fn fetch(&self, statement: &crate::store::Statement) -> Result<Vec<store::Row>, Failure> {
        self.host.fetch(statement).await.map_err(Failure::internal)
    }

    /// Counts the request against `rate`.
    async fn rate(&self, rate: Rate<'_>) -> Result<(), Limited> {
        self.host.rate(rate, self.request.now).await
    }
}

/// Answers a request; an endpoint that reads the body takes it from `body`.
async fn dispatch<'r, H: Host>(
    host: &H,
    request: &'r Request<'r>,
    body: &mut Option<H::Body>,
    route_name: &mut &'static str,
    cors: &mut bool,
) -> Outcome<H::Stream> {
    let limits = &host.settings().limits;
    check_request_target(request.target.len(), limits)?;
    check_header_bytes(request.header_bytes, limits)?;
    let (path, query) = match request.target.split_once('?') {
        Some((path, query)) => (path, query),
        None => (request.target, ""),
    };
    let endpoint = route(path);
    *cors = !endpoint.as_ref().is_ok_and(Endpoint::is_page);
    if request.method == "OPTIONS" {
        *route_name = "preflight";
        let mut reply = Reply::empty(PREFLIGHT_STATUS);
        if *cors {
            for (name, value) in host.settings().dialect.preflight_headers() {
                reply.set(name, value);
            }
        }
        return Ok(reply);
    }
    let endpoint = endpoint?;
    let method = Method::parse(request.method).ok_or_else(|| {
        Failure::from(Problem::new(ProblemType::MethodNotAllowed))
            .with("allow", endpoint.allow().to_string())
    })?;
    endpoint
        .check_method(method)
        .map_err(|p| Failure::from(p).with("allow", endpoint.allow().to_string()))?;
    *route_name = endpoint.name(method);
    let params = decode_query_string(query).map_err(|e| Problem::from(&e))?;
    let cx = Context {
        host,
        request,
        method,
        params,
    };
    let user = match endpoint.user() {
        Some(name) => {
            let found = host.user(name).await.map_err(Failure::internal)?;
            match found {
                Some(user) => Some(user),
                // A person reads the consent page: a page, not problem+json.
                None if matches!(endpoint, Endpoint::Consent { .. }) => {
                    return Ok(consent::not_found());
                }
                None if matches!(endpoint, Endpoint::Console { .. }) => {
                    return Ok(console::no_such_user());
                }
                None => {
                    return Err(Problem::new(ProblemType::NotFound)
                        .with_detail(format!("no user `{name}` here"))
                        .into());
                }
            }
        }
        None => None,
    };
    match (endpoint, user) {
        (Endpoint::Discovery, _) => discovery(&cx).await,
        (Endpoint::ErrorType { type_path }, _) => error_type(&type_path),
        (Endpoint::Consent { app, .. }, Some(user)) => {
            Ok(consent::consent(&cx, &user, app, take(body)?).await)
        }
        (Endpoint::Console { page, .. }, Some(user)) => {
            Ok(console::console(&cx, &user, page, take(body)?).await)
        }
        (Endpoint::NewNotification { .. }, Some(user)) => {
            federation::new_notification(&cx, &user, take(body)?).await
        }
        (Endpoint::ServerInfo { .. }, Some(_)) => Ok(Reply::json(
            200,
            server_info_json(&host.settings().version, limits),
        )),
        (Endpoint::Records { .. }, Some(user)) if method == Method::Post => {
            records::post(&cx, &user, take(body)?).await
        }
        (Endpoint::Records { .. }, Some(user)) => records::list(&cx, &user).await,
        (Endpoint::Record { record, .. }, Some(user)) => match method {
            Method::Put | Method::Delete => {
                records::put_or_delete(&cx, &user, record, take(body)?).await
            }
            _ => records::get(&cx, &user, &record).await,
        },
        (Endpoint::RecordVersions { record, .. }, Some(user)) => {
            records::versions(&cx, &user, &record).await
        }
        (Endpoint::RecordVersion { record, hash, .. }, Some(user)) => {
            records::version(&cx, &user, &record, &hash).await
        }
        (
            Endpoint::RecordBlob {
                record,
                version,
                blob,
                ..
            },
            Some(user),
        ) => blobs::download(&cx, &user, &record, version, &blob).await,
        (Endpoint::NewBlob { .. }, Some(user)) => blobs::upload(&cx, &user, take(body)?).await,
        (Endpoint::Events { .. }, Some(user)) => events::events(&cx, &user).await,
        (_, None) => Err(Problem::new(ProblemType::NotFound).into()),
    }
}

/// The request's body, for the one endpoint that reads it.
fn take<B>(body: &mut Option<B>) -> Result<B, Failure> {
    body.take()
        .ok_or_else(|| Problem::new(ProblemType::Internal).into())
}

async fn discovery<H: Host>(cx: &Context<'_, '_, H>) -> Outcome<H::Stream> {
    let host = cx.host;
    let settings = host.settings();
    // A browser's visit: a page about the server, naming no user.
    if cx.method == Method::Get && crate::http::prefers_html(cx.request.header("accept")) {
        return Ok(console::landing(cx.request.host, &settings.version));
    }
    let users = host.users().await.map_err(Failure::internal)?;
    let user = user_for_host(cx.request.host, &users, |u| &u.entity).ok_or_else(|| {
        Problem::new(ProblemType::NotFound).with_detail("no user's entity is served at this host")
    })?;
    let rows = cx.fetch(&entity_record_sql(user.id, &user.entity)).await?;
    let row = rows
        .first()
        .ok_or_else(|| Failure::internal("a user has no Entity record"))?;
    let (record, links) = version_row(row)?;
    let (record, _) = read_version(&record, &links)?;
    let url = entity_record_url(&settings.base_url, &user.name, &user.entity, &record.id);
    Ok(Reply::empty(204).with("link", discovery_link(settings.dialect, &url)))
}

fn error_type<S>(type_path: &str) -> Outcome<S> {
    let page = error_type_page(type_path).ok_or_else(|| Problem::new(ProblemType::NotFound))?;
    Ok(Reply::new(200, ReplyBody::Bytes(page.into_bytes()))
        .with("content-type", ERROR_TYPE_PAGE_CONTENT_TYPE))
}
