//! Requests to other servers from the edge (federation,
//! `docs/federation.md` §6), under core's rules: the runtime's `fetch`
//! with redirects returned as answers (`manual`), the exchange bounded by
//! [`PEER_EXCHANGE_TIMEOUT_MS`], and the answer read chunk by chunk up to
//! its limit.
//!
//! The edge resolves names itself and never reaches private networks from
//! Cloudflare's network; a literal address in a URL is still checked with
//! core's [`address_allowed`]. In the dev environment (`FOLIO_DEV=1`,
//! `wrangler dev` on one machine) plain HTTP is allowed, and with
//! `FOLIO_ALLOW_PRIVATE_PEERS=1` loopback and private addresses too, so
//! that two local test servers can talk. workerd resolves names itself and
//! trusts no test CA, so a dev-only `FOLIO_PEER_RELAY` (an `http://` URL)
//! sends every peer request there instead, the URL it was for in
//! [`RELAYED_URL_HEADER`]: a test harness's relay carries it on over HTTPS
//! to the test server that name stands for. The request is signed for its
//! own URL, so the relay changes nothing the other side checks. A name the
//! relay stands for no server of is answered with [`RELAY_ANSWER_HEADER`]
//! `no-such-name`, which is what the edge's resolver would say of it
//! ([`PeerFailure::NoSuchName`]).

use std::time::Duration;

use folio_core::service::federation::{
    AnswerBody, PEER_EXCHANGE_TIMEOUT_MS, PeerAnswer, PeerFailure, PeerMethod, PeerRequest,
    target_url,
};
use futures_util::future::{Either, select};
use futures_util::{StreamExt, pin_mut};
use worker::{Delay, Fetch, Headers, Method, Request, RequestInit, RequestRedirect, Url};

/// What the edge allows beyond the rules.
#[derive(Debug, Clone, Default)]
pub struct PeerOptions {
    /// Plain HTTP URLs: the dev environment.
    pub allow_http: bool,
    /// Loopback and private addresses.
    pub allow_private: bool,
    /// Where every peer request goes instead, in the dev environment.
    pub relay: Option<Url>,
}

/// The header that carries a relayed request's own URL.
pub const RELAYED_URL_HEADER: &str = "x-folio-relayed-url";

/// The header of a relay's own answer: `no-such-name` when the relay
/// stands for no server of the name asked.
pub const RELAY_ANSWER_HEADER: &str = "x-folio-relay";

/// Sends `request` and reads its answer whole, under core's rules.
pub async fn send(options: PeerOptions, request: PeerRequest) -> Result<PeerAnswer, PeerFailure> {
    let exchange = exchange(options, request);
    let timeout = Delay::from(Duration::from_millis(PEER_EXCHANGE_TIMEOUT_MS));
    pin_mut!(exchange);
    match select(exchange, timeout).await {
        Either::Left((answer, _)) => answer,
        Either::Right(((), _)) => Err(PeerFailure::TimedOut),
    }
}

async fn exchange(options: PeerOptions, request: PeerRequest) -> Result<PeerAnswer, PeerFailure> {
    let url = target_url(&request.url, options.allow_http, options.allow_private)?;
    let headers = Headers::new();
    for (name, value) in &request.headers {
        headers
            .set(name, value)
            .map_err(|e| PeerFailure::BadUrl(format!("header {name}: {e}")))?;
    }
    headers
        .set("user-agent", concat!("folio/", env!("CARGO_PKG_VERSION")))
        .map_err(|e| PeerFailure::BadUrl(e.to_string()))?;
    let mut init = RequestInit::new();
    init.with_method(match request.method {
        PeerMethod::Head => Method::Head,
        PeerMethod::Get => Method::Get,
        PeerMethod::Post => Method::Post,
    })
    .with_redirect(RequestRedirect::Manual);
    if let Some(body) = request.body {
        init.with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    }
    let host = url.host_str().unwrap_or_default().to_owned();
    let destination = match &options.relay {
        Some(relay) => {
            headers
                .set(RELAYED_URL_HEADER, url.as_str())
                .map_err(|e| PeerFailure::BadUrl(e.to_string()))?;
            relay.clone()
        }
        None => url,
    };
    init.with_headers(headers);
    let send = async || {
        let outgoing = Request::new_with_init(destination.as_str(), &init)
            .map_err(|e| PeerFailure::BadUrl(e.to_string()))?;
        Fetch::Request(outgoing)
            .send()
            .await
            .map_err(|e| sending_failure(e.to_string(), host.clone()))
    };
    // A request that only reads is sent once more when it got no answer:
    // the connection the edge reused may have been closed by the other
    // side meanwhile ("Network connection lost"). A POST is not: the
    // delivery that sent it tries again on its own schedule.
    let mut response = match send().await {
        Err(PeerFailure::Unreachable(_)) if request.method != PeerMethod::Post => send().await?,
        sent => sent?,
    };
    if options.relay.is_some()
        && response
            .headers()
            .get(RELAY_ANSWER_HEADER)
            .ok()
            .flatten()
            .as_deref()
            == Some("no-such-name")
    {
        return Err(PeerFailure::NoSuchName(host));
    }
    let mut body = AnswerBody::new(request.max_answer_bytes);
    // An answer to a HEAD has no body, whatever its Content-Length says.
    let declared = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|length| length.parse::<u64>().ok())
        .filter(|_| request.method != PeerMethod::Head);
    body.announced(declared)?;
    let headers = response
        .headers()
        .entries()
        .map(|(name, value)| (name.to_ascii_lowercase(), value))
        .collect();
    if request.method != PeerMethod::Head
        && let Ok(mut stream) = response.stream()
    {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| PeerFailure::Unreachable(e.to_string()))?;
            body.push(&chunk)?;
        }
    }
    Ok(PeerAnswer {
        status: response.status_code(),
        headers,
        body: body.into_bytes(),
    })
}

/// A failed fetch: a name the edge's resolver says does not exist (its
/// message carries the resolver's `gai_strerror`), or a peer that cannot
/// be reached now.
fn sending_failure(message: String, host: String) -> PeerFailure {
    let names_nothing = message.contains("DNS lookup failed")
        && [
            "Name or service not known",
            "No address associated with hostname",
        ]
        .iter()
        .any(|known| message.contains(known));
    match names_nothing {
        true => PeerFailure::NoSuchName(host),
        false => PeerFailure::Unreachable(message),
    }
}
