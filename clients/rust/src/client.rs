//! The HTTP client the checks use: builds each request, signs it when asked
//! (a fresh nonce and timestamp per attempt), retries a `429` after its
//! `Retry-After` unless told not to, and hands back the whole response.

use std::error::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Version};
use serde_json::Value;
use url::Url;

use crate::Trust;
use crate::signer::{AppKey, Layout, SVC, SignedTarget};

/// How often a `429` is retried before its answer is returned as it is.
const RATE_LIMIT_RETRIES: usize = 5;
/// A whole non-streaming exchange, body included.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an idle connection is kept for another request: shorter than
/// any server's keep-alive. `wrangler dev` (workerd) closes a connection
/// 5.0 s after its last answer (measured with a raw socket); a request
/// sent on one that old crossed the close and failed with "connection
/// closed before message completed" (stop 48's CI run). `folio serve`
/// keeps them 60 s.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(3);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as i64)
        .unwrap_or_default()
}

/// How long [`nonce`]'s nonces are: the longest Folio takes.
pub const NONCE_LEN: usize = 10;

/// A fresh nonce: a process-wide counter from a random start below 2^32, as
/// [`NONCE_LEN`] lowercase hex digits, which it fills for 2^39 requests. No
/// two requests of a process share one, however many clients send them (the
/// load tool sends millions): Folio refuses a nonce's second use as a replay,
/// and random nonces of 32 bits would meet again within a few ten thousand.
pub fn nonce() -> String {
    static START: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = *START.get_or_init(|| u64::from(rand::random::<u32>()));
    format!(
        "{:0width$x}",
        start + NEXT.fetch_add(1, Ordering::Relaxed),
        width = NONCE_LEN
    )
}

/// A fresh record id: 32 lowercase hex characters.
pub fn record_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// An error and every error it wraps, on one line.
pub fn describe(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The request body.
#[derive(Debug, Clone, Default)]
pub enum Body {
    #[default]
    Empty,
    /// Sent with `Content-Length`.
    Bytes {
        data: Vec<u8>,
        content_type: Option<String>,
    },
    /// Sent as a stream: no `Content-Length` (chunked on HTTP/1.1).
    Stream {
        data: Vec<u8>,
        content_type: Option<String>,
    },
}

/// How a request is authenticated.
#[derive(Debug, Clone, Default)]
pub enum Auth<'a> {
    #[default]
    Anonymous,
    /// Signed with this key when sent; `headers` are the signed header
    /// names, whose values are taken from the request's headers.
    Signed {
        app: &'a AppKey,
        headers: Vec<&'static str>,
        layout: Layout,
        ts_offset_ms: i64,
    },
    /// This exact `Authorization` value.
    Header(String),
}

/// One request, described fully before it is sent.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub method: Method,
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    pub auth: Auth<'a>,
}

impl<'a> Call<'a> {
    pub fn new(method: Method, url: Url) -> Self {
        Self {
            method,
            url,
            headers: Vec::new(),
            body: Body::Empty,
            auth: Auth::Anonymous,
        }
    }

    pub fn get(url: Url) -> Self {
        Self::new(Method::GET, url)
    }

    pub fn post(url: Url) -> Self {
        Self::new(Method::POST, url)
    }

    pub fn put(url: Url) -> Self {
        Self::new(Method::PUT, url)
    }

    pub fn delete(url: Url) -> Self {
        Self::new(Method::DELETE, url)
    }

    /// A JSON body with `Content-Type: application/json`.
    pub fn json(self, value: &Value) -> Self {
        self.body(value.to_string().into_bytes(), Some("application/json"))
    }

    pub fn body(mut self, data: Vec<u8>, content_type: Option<&str>) -> Self {
        self.body = Body::Bytes {
            data,
            content_type: content_type.map(str::to_string),
        };
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Signs with the spec's layout and no signed headers.
    pub fn signed(self, app: &'a AppKey) -> Self {
        self.signed_with(app, &[], Layout::WithAlgorithmLine, 0)
    }

    /// Signs these headers (lowercase names, values from [`Call::header`]).
    pub fn signed_headers(self, app: &'a AppKey, headers: &[&'static str]) -> Self {
        self.signed_with(app, headers, Layout::WithAlgorithmLine, 0)
    }

    pub fn signed_with(
        mut self,
        app: &'a AppKey,
        headers: &[&'static str],
        layout: Layout,
        ts_offset_ms: i64,
    ) -> Self {
        self.auth = Auth::Signed {
            app,
            headers: headers.to_vec(),
            layout,
            ts_offset_ms,
        };
        self
    }

    pub fn authorization(mut self, value: String) -> Self {
        self.auth = Auth::Header(value);
        self
    }

    /// The value of one of this request's headers.
    fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// The request target as signed and sent: WHATWG-serialized path and query.
pub fn path_and_query(url: &Url) -> &str {
    &url[url::Position::BeforePath..url::Position::AfterQuery]
}

/// Host without port, and the explicit port else 443 (PROTOCOL.md §10).
pub fn host_and_port(url: &Url) -> (String, u16) {
    (
        url.host_str().unwrap_or_default().to_string(),
        url.port().unwrap_or(443),
    )
}

/// The `Authorization` value for `call` signed by `app` at `ts` with `nonce`.
pub fn sign_call(
    call: &Call<'_>,
    app: &AppKey,
    headers: &[&str],
    layout: Layout,
    ts: i64,
    nonce: &str,
) -> String {
    let signed: Vec<(String, String)> = headers
        .iter()
        .map(|name| {
            let value = call.header_value(name).unwrap_or_default();
            (name.to_string(), value.to_string())
        })
        .collect();
    let (host, port) = host_and_port(&call.url);
    let target = SignedTarget {
        method: call.method.as_str(),
        path_and_query: path_and_query(&call.url),
        host: &host,
        port,
        headers: &signed,
    };
    app.authorization_header(SVC, layout, ts, nonce, &target)
}

/// A response read to its end.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header, if it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The first value of a header as text, non-ASCII bytes read as UTF-8.
    pub fn header_text(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
    }

    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_slice(&self.body).map_err(|error| {
            format!(
                "status {}: body is not JSON ({error}): {}",
                self.status,
                self.excerpt()
            )
        })
    }

    /// The start of the body, for failure messages.
    pub fn excerpt(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let mut excerpt: String = text.chars().take(400).collect();
        if excerpt.len() < text.len() {
            excerpt.push('…');
        }
        excerpt
    }
}

/// Sends [`Call`]s.
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
    retry_rate_limited: bool,
    http2_seen: Arc<AtomicBool>,
}

impl Http {
    pub fn new(trust: &impl Trust) -> Result<Self, String> {
        Self::with_builder(Self::builder(trust)?)
    }

    /// A client like [`Http::new`]'s whose connections leave from the
    /// local address `local`: for a test that must come from several
    /// addresses of one machine (`127.0.0.2`, `127.0.0.3`, … to a server on
    /// loopback).
    pub fn bound_to(trust: &impl Trust, local: std::net::IpAddr) -> Result<Self, String> {
        Self::with_builder(Self::builder(trust)?.local_address(local))
    }

    fn builder(trust: &impl Trust) -> Result<reqwest::ClientBuilder, String> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .user_agent(concat!("folio-conformance/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = trust.ca_cert() {
            let pem = std::fs::read(path).map_err(|error| format!("ca_cert {path}: {error}"))?;
            let certificate = reqwest::Certificate::from_pem(&pem)
                .map_err(|error| format!("ca_cert {path}: {}", describe(&error)))?;
            builder = builder.add_root_certificate(certificate);
        }
        if trust.insecure() {
            builder = builder.danger_accept_invalid_certs(true);
        }
        Ok(builder)
    }

    fn with_builder(builder: reqwest::ClientBuilder) -> Result<Self, String> {
        let client = builder
            .build()
            .map_err(|error| format!("HTTP client: {}", describe(&error)))?;
        Ok(Self {
            client,
            retry_rate_limited: true,
            http2_seen: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The same connections, but a `429` comes back as it is.
    pub fn without_retries(&self) -> Self {
        Self {
            retry_rate_limited: false,
            ..self.clone()
        }
    }

    /// Whether any response so far came over HTTP/2.
    pub fn http2_seen(&self) -> bool {
        self.http2_seen.load(Ordering::Relaxed)
    }

    /// Sends `call` and reads the whole response.
    pub async fn send(&self, call: &Call<'_>) -> Result<Response, String> {
        let exchange = async { read_response(self.open(call).await?).await };
        tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{} {}: no complete answer in 60 s", call.method, call.url))?
    }

    /// Sends `call` and returns once the response head has arrived.
    pub async fn open(&self, call: &Call<'_>) -> Result<reqwest::Response, String> {
        let mut attempt = 0;
        loop {
            let request = self.build(call)?;
            let response =
                self.client.execute(request).await.map_err(|error| {
                    format!("{} {}: {}", call.method, call.url, describe(&error))
                })?;
            if response.version() == Version::HTTP_2 {
                self.http2_seen.store(true, Ordering::Relaxed);
            }
            attempt += 1;
            if response.status().as_u16() != 429
                || !self.retry_rate_limited
                || attempt > RATE_LIMIT_RETRIES
            {
                return Ok(response);
            }
            let wait = retry_after(response.headers()).unwrap_or(Duration::from_secs(1));
            tokio::time::sleep(wait).await;
        }
    }

    fn build(&self, call: &Call<'_>) -> Result<reqwest::Request, String> {
        let mut headers = HeaderMap::new();
        for (name, value) in &call.headers {
            headers.append(header_name(name)?, header_value(value)?);
        }
        let authorization = match &call.auth {
            Auth::Anonymous => None,
            Auth::Header(value) => Some(value.clone()),
            Auth::Signed {
                app,
                headers: signed,
                layout,
                ts_offset_ms,
            } => Some(sign_call(
                call,
                app,
                signed,
                *layout,
                now_ms() + ts_offset_ms,
                &nonce(),
            )),
        };
        if let Some(value) = authorization {
            headers.insert(reqwest::header::AUTHORIZATION, header_value(&value)?);
        }
        let mut builder = self
            .client
            .request(call.method.clone(), call.url.clone())
            .headers(headers);
        match &call.body {
            Body::Empty => {}
            Body::Bytes { data, content_type } => {
                if let Some(content_type) = content_type {
                    builder = builder.header(reqwest::header::CONTENT_TYPE, content_type);
                }
                builder = builder.body(data.clone());
            }
            Body::Stream { data, content_type } => {
                if let Some(content_type) = content_type {
                    builder = builder.header(reqwest::header::CONTENT_TYPE, content_type);
                }
                let chunks = vec![Ok::<_, std::io::Error>(data.clone())];
                builder = builder.body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                    chunks,
                )));
            }
        }
        builder.build().map_err(|error| {
            format!(
                "building {} {}: {}",
                call.method,
                call.url,
                describe(&error)
            )
        })
    }
}

/// Reads an opened response to its end.
pub async fn read_response(response: reqwest::Response) -> Result<Response, String> {
    let status = response.status().as_u16();
    let version = response.version();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|error| format!("reading the body: {}", describe(&error)))?;
    Ok(Response {
        status,
        version,
        headers,
        body: body.to_vec(),
    })
}

/// A `Retry-After` given in seconds.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds.clamp(1, 10)))
}

fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("bad header name {name:?}"))
}

fn header_value(value: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(value).map_err(|_| format!("bad header value {value:?}"))
}
