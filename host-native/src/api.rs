//! The API: every request of the HTTPS listener goes to core's service,
//! which answers it through the native host ([`crate::host`]). This module
//! only translates between axum's types and core's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::Response;
use folio_core::auth::{HeaderLookup, SignedRequest};
use folio_core::service::limits::header_section_len;
use folio_core::{Fresh, Reply, ReplyBody};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};

use crate::app::App;
use crate::logs::{self, RequestId};
use crate::metrics::METRICS;

/// A request's headers, as core reads them.
pub struct Headers<'h>(pub &'h HeaderMap);

impl HeaderLookup for Headers<'_> {
    fn header(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.0.get(lowercase_name).map(|value| value.as_bytes())
    }
}

/// Every request of the HTTPS listener.
pub async fn handle(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let started = Instant::now();
    let id = RequestId::new();
    let (parts, body) = request.into_parts();
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path(), |pq| pq.as_str());
    let (host, port) = host_and_port(&parts.uri, &parts.headers);
    let headers = Headers(&parts.headers);
    let request = folio_core::Request {
        method: parts.method.as_str(),
        target,
        host: &host,
        port,
        headers: &headers,
        header_bytes: header_section_len(
            parts
                .headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes())),
        ),
        peer: Some(peer.ip()),
        now: app.clock.now(),
        fresh: Fresh::from_seed(rand::random()),
        // Taken before anything is read for the request: what is read under
        // it is remembered under it (folio_core::service::standing).
        epoch: app.standings.epoch(),
    };
    let reply = folio_core::handle(&*app, request, body).await;
    let took = started.elapsed();
    logs::request(id, parts.method.as_str(), &reply, took);
    METRICS.request(&reply, took);
    let mut response = response(reply);
    if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// The header that carries a request's id, as its log line does.
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// `host` without port, and the explicit port else 443 (PROTOCOL.md §10).
fn host_and_port(uri: &http::Uri, headers: &HeaderMap) -> (String, u16) {
    let host_header = || {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<http::uri::Authority>().ok())
    };
    match uri.authority().cloned().or_else(host_header) {
        Some(authority) => (
            authority.host().to_ascii_lowercase(),
            SignedRequest::port_of(authority.port_u16()),
        ),
        None => (String::new(), SignedRequest::port_of(None)),
    }
}

/// Core's reply as axum's response.
fn response(reply: Reply<Body>) -> Response {
    let body = match reply.body {
        ReplyBody::Empty => Body::empty(),
        ReplyBody::Bytes(bytes) => Body::from(bytes),
        ReplyBody::Stream(body) => body,
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    for (name, value) in reply.headers {
        match HeaderValue::from_str(&value) {
            Ok(value) => {
                headers.insert(HeaderName::from_static(name), value);
            }
            Err(_) => tracing::error!(header = name, "a reply header is not a valid value"),
        }
    }
    response
}
