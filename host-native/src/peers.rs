//! Requests to other servers: the native host's side of
//! `folio_core::service::federation::peer`.
//!
//! Core decides every [`PeerRequest`] and judges every [`PeerAnswer`];
//! [`PeerClient::send`] only carries one across, under the rules core
//! states for hosts, because the server at the other end may be hostile:
//!
//! - only `https` URLs (`http` when [`PeerOptions::allow_http`]);
//! - only addresses [`address_allowed`] allows: a literal IP is checked
//!   before connecting, a name in the resolver this client installs into
//!   reqwest, so the address checked is the address connected to (a name
//!   that resolves once to a public address and then to a private one
//!   gains nothing);
//! - no proxy from the environment, which would connect in our place to
//!   an address we never checked;
//! - never a redirect: a 3xx is an answer, and core follows it or not;
//! - the handshake within [`PeerOptions::connect_timeout`], the whole
//!   exchange (every byte of the answer included) within
//!   [`PeerOptions::exchange_timeout`];
//! - no more answer than [`PeerRequest::max_answer_bytes`], refused on its
//!   `Content-Length` or as soon as the bytes read pass it.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use folio_core::service::federation::{
    AnswerBody, PEER_CONNECT_TIMEOUT_MS, PEER_EXCHANGE_TIMEOUT_MS, PeerAnswer, PeerFailure,
    PeerMethod, PeerRequest, address_allowed, target_url,
};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Method, Url};

/// Sent with every request to a peer.
const USER_AGENT: &str = concat!("folio/", env!("CARGO_PKG_VERSION"));

/// The most bytes of HTTP/2 header block a peer may send; core reads a
/// handful of short headers (hyper's own default is 16 MiB).
const MAX_ANSWER_HEADER_BYTES: u32 = 64 * 1024;

/// How a [`PeerClient`] connects. The default is what production needs:
/// public addresses over HTTPS with the built-in roots, and core's timeouts.
#[derive(Debug, Clone)]
pub struct PeerOptions {
    /// Development only: connect to loopback/private addresses too.
    pub allow_private: bool,
    /// Development only: allow `http://` URLs (plain HTTP between local test servers).
    pub allow_http: bool,
    /// Extra trust roots (PEM files, each may hold several certificates),
    /// added to the built-in webpki roots.
    pub extra_roots: Vec<PathBuf>,
    /// Test-only name overrides: host name -> socket address. The operator
    /// named these addresses: they are used as given, loopback included,
    /// while every other name and literal address is still checked. The
    /// port is pinned too: a URL of that name without a port goes to it,
    /// and one naming another port is refused ([`PeerFailure::BadUrl`]),
    /// so a peer's URL cannot reach another service of the pinned address.
    pub resolve: Vec<(String, SocketAddr)>,
    /// For the TCP and TLS handshakes.
    pub connect_timeout: Duration,
    /// For the whole exchange: connection, request, and every byte of the answer.
    pub exchange_timeout: Duration,
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions {
            allow_private: false,
            allow_http: false,
            extra_roots: Vec::new(),
            resolve: Vec::new(),
            connect_timeout: Duration::from_millis(PEER_CONNECT_TIMEOUT_MS),
            exchange_timeout: Duration::from_millis(PEER_EXCHANGE_TIMEOUT_MS),
        }
    }
}

/// Sends core's requests to other servers. Cheap to clone: clones share
/// one connection pool.
#[derive(Clone)]
pub struct PeerClient {
    http: reqwest::Client,
    allow_private: bool,
    allow_http: bool,
    /// The overrides' ports, by lowercase name.
    pinned_ports: Arc<HashMap<String, u16>>,
    connect_timeout: Duration,
    exchange_timeout: Duration,
}

impl PeerClient {
    /// Fails when an extra root cannot be read or holds no certificate.
    pub fn new(options: PeerOptions) -> Result<Self, String> {
        let resolver = CheckingResolver {
            overrides: options
                .resolve
                .iter()
                .map(|(name, address)| (name.to_ascii_lowercase(), *address))
                .collect(),
            allow_private: options.allow_private,
        };
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .user_agent(USER_AGENT)
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .no_proxy()
            .dns_resolver(Arc::new(resolver))
            .connect_timeout(options.connect_timeout)
            .http2_max_header_list_size(MAX_ANSWER_HEADER_BYTES);
        for path in &options.extra_roots {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let roots = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("{}: {}", path.display(), describe(&e)))?;
            if roots.is_empty() {
                return Err(format!("{}: no PEM certificate", path.display()));
            }
            for root in roots {
                builder = builder.add_root_certificate(root);
            }
        }
        let http = builder
            .build()
            .map_err(|e| format!("the peer client: {}", describe(&e)))?;
        let pinned_ports = options
            .resolve
            .iter()
            .map(|(name, address)| (name.to_ascii_lowercase(), address.port()))
            .collect();
        Ok(PeerClient {
            http,
            allow_private: options.allow_private,
            allow_http: options.allow_http,
            pinned_ports: Arc::new(pinned_ports),
            connect_timeout: options.connect_timeout,
            exchange_timeout: options.exchange_timeout,
        })
    }

    /// Sends `request` and reads its answer whole. Any status, 3xx
    /// included, is an answer; a failure means core has no answer to judge.
    pub async fn send(&self, request: PeerRequest) -> Result<PeerAnswer, PeerFailure> {
        let url = self.checked_url(&request.url)?;
        let method = match request.method {
            PeerMethod::Head => Method::HEAD,
            PeerMethod::Get => Method::GET,
            PeerMethod::Post => Method::POST,
        };
        let mut outgoing = self.http.request(method, url);
        for (name, value) in &request.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| PeerFailure::BadUrl(format!("{name:?} is not a header name")))?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                PeerFailure::BadUrl(format!("the {name} header's value is not valid"))
            })?;
            outgoing = outgoing.header(name, value);
        }
        if let Some(body) = request.body {
            outgoing = outgoing.body(body);
        }
        let max = request.max_answer_bytes;
        let exchange = async {
            let response = outgoing
                .send()
                .await
                .map_err(|e| sending_failure(e, self.connect_timeout))?;
            read_answer(response, max).await
        };
        tokio::time::timeout(self.exchange_timeout, exchange)
            .await
            .unwrap_or(Err(PeerFailure::TimedOut))
    }

    /// The URL, if core may ask it: reqwest never calls the resolver for a
    /// literal IP, so that is checked here; and a name the operator pinned
    /// is asked at its pinned port only.
    fn checked_url(&self, text: &str) -> Result<Url, PeerFailure> {
        let url = target_url(text, self.allow_http, self.allow_private)?;
        let pinned = url
            .host_str()
            .and_then(|host| self.pinned_ports.get(&host.to_ascii_lowercase()));
        if let (Some(pinned), Some(port)) = (pinned, url.port())
            && port != *pinned
        {
            return Err(PeerFailure::BadUrl(format!(
                "{text}: its host is pinned to port {pinned} (--peer-resolve)"
            )));
        }
        Ok(url)
    }
}

/// Reads the answer's body, refusing it as soon as it is longer than `max`.
async fn read_answer(
    mut response: reqwest::Response,
    max: usize,
) -> Result<PeerAnswer, PeerFailure> {
    let mut body = AnswerBody::new(max);
    // The body's announced length, which is 0 for a HEAD whatever its
    // Content-Length says.
    body.announced(response.content_length())?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| PeerFailure::Unreachable(format!("reading the answer: {}", describe(&e))))?
    {
        body.push(&chunk)?;
    }
    Ok(PeerAnswer {
        status,
        headers,
        body: body.into_bytes(),
    })
}

fn sending_failure(error: reqwest::Error, connect_timeout: Duration) -> PeerFailure {
    if let Some(RefusedAddress(ip)) = resolver_error(&error) {
        return PeerFailure::ForbiddenAddress(*ip);
    }
    if let Some(NoSuchName(name)) = resolver_error(&error) {
        return PeerFailure::NoSuchName(name.clone());
    }
    // The client has no timeout of its own but the handshake's.
    if error.is_timeout() {
        return PeerFailure::Unreachable(format!(
            "no TCP and TLS handshake within {} ms",
            connect_timeout.as_millis()
        ));
    }
    PeerFailure::Unreachable(describe(&error))
}

/// The error of type `E` [`CheckingResolver`] answered, wherever reqwest
/// and hyper wrapped it.
fn resolver_error<'e, E: StdError + 'static>(error: &'e (dyn StdError + 'static)) -> Option<&'e E> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<E>() {
            return Some(found);
        }
        // An io::Error's `source` skips the error it wraps.
        if let Some(inner) = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<E>())
        {
            return Some(inner);
        }
        next = error.source();
    }
    None
}

/// An error and its causes, short: reqwest's own message names the URL,
/// which core knows, so the causes say it when there are any.
fn describe(error: &(dyn StdError + 'static)) -> String {
    let mut causes: Vec<String> = Vec::new();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !causes.iter().any(|seen| seen.contains(&text)) {
            causes.push(text);
        }
        next = cause.source();
    }
    if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    }
}

/// Every address of a name was one [`address_allowed`] refuses; carried
/// out of reqwest as the source of its error.
#[derive(Debug)]
struct RefusedAddress(IpAddr);

impl fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the address {} is not allowed for a peer", self.0)
    }
}

impl StdError for RefusedAddress {}

/// The system's resolver answered that a name does not exist (or has no
/// address), not that it could not ask; carried out of reqwest as the
/// source of its error.
#[derive(Debug)]
struct NoSuchName(String);

impl fmt::Display for NoSuchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the name {} has no address", self.0)
    }
}

impl StdError for NoSuchName {}

/// Whether a failed lookup says the name does not exist: the resolver's
/// `EAI_NONAME` or `EAI_NODATA` (glibc, musl and BSD texts), which std
/// carries only as the message. Any other failure (`EAI_AGAIN`, a timeout,
/// no resolver) says nothing of the name: it may resolve later.
fn names_nothing(error: &std::io::Error) -> bool {
    let text = error.to_string();
    [
        "Name or service not known",
        "No address associated with hostname",
        "nodename nor servname provided",
        "Name does not resolve",
    ]
    .iter()
    .any(|known| text.contains(known))
}

/// Resolves through the overrides (used as given) or the system, keeping
/// only the addresses a peer may have. An address with port 0 (from the system)
/// gets the URL's port; an override's port is kept (a URL naming another
/// port never gets here: [`PeerClient::checked_url`] refuses it).
struct CheckingResolver {
    overrides: HashMap<String, SocketAddr>,
    allow_private: bool,
}

impl Resolve for CheckingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let overridden = self.overrides.get(&host).copied();
        let allow_private = self.allow_private;
        Box::pin(async move {
            if let Some(address) = overridden {
                return Ok(Box::new(std::iter::once(address)) as Addrs);
            }
            let looked_up = tokio::net::lookup_host((host.as_str(), 0)).await;
            let found: Vec<SocketAddr> = match looked_up {
                Ok(found) => found.collect(),
                Err(error) if names_nothing(&error) => return Err(NoSuchName(host.clone()).into()),
                Err(error) => return Err(error.into()),
            };
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = found
                .into_iter()
                .partition(|address| address_allowed(address.ip(), allow_private));
            if !allowed.is_empty() {
                return Ok(Box::new(allowed.into_iter()) as Addrs);
            }
            Err(match refused.first() {
                Some(address) => RefusedAddress(address.ip()).into(),
                None => NoSuchName(host.clone()).into(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bytes::Bytes;
    use http_body_util::Full;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    use super::*;

    fn get(url: String, max_answer_bytes: usize) -> PeerRequest {
        PeerRequest {
            method: PeerMethod::Get,
            url,
            headers: vec![("accept", "application/json".into())],
            body: None,
            max_answer_bytes,
        }
    }

    fn local_http() -> PeerOptions {
        PeerOptions {
            allow_private: true,
            allow_http: true,
            exchange_timeout: Duration::from_secs(5),
            ..PeerOptions::default()
        }
    }

    /// A plain HTTP/1.1 server on loopback: for every connection, it sends
    /// the request it read (head and body) on the channel, writes `answer`
    /// (nothing if `None`), then holds the connection until the client
    /// closes it, so an answer shorter than its Content-Length never ends.
    async fn http_server(answer: Option<Vec<u8>>) -> (SocketAddr, mpsc::UnboundedReceiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (requests, received) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (answer, requests) = (answer.clone(), requests.clone());
                tokio::spawn(async move {
                    let mut stream = stream;
                    let request = read_request(&mut stream).await;
                    let _ = requests.send(request);
                    if let Some(answer) = answer {
                        stream.write_all(&answer).await.unwrap();
                    }
                    let mut rest = Vec::new();
                    let _ = stream.read_to_end(&mut rest).await;
                });
            }
        });
        (address, received)
    }

    async fn read_request(stream: &mut TcpStream) -> String {
        let mut read = Vec::new();
        let mut buffer = [0; 4096];
        loop {
            if let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&read[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length: "))
                    .map_or(0, |value| value.trim().parse().unwrap());
                if read.len() >= end + 4 + length {
                    return String::from_utf8_lossy(&read).into_owned();
                }
            }
            let count = stream.read(&mut buffer).await.unwrap();
            if count == 0 {
                return String::from_utf8_lossy(&read).into_owned();
            }
            read.extend_from_slice(&buffer[..count]);
        }
    }

    #[tokio::test]
    async fn private_addresses_are_refused_unless_allowed() {
        let (address, _) = http_server(Some(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
        ))
        .await;
        let port = address.port();
        let public_only = PeerClient::new(PeerOptions {
            allow_private: false,
            resolve: vec![("local.test".into(), address)],
            ..local_http()
        })
        .unwrap();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        for (url, refused) in [
            // Literal addresses, which never reach the resolver.
            (format!("http://127.0.0.1:{port}/"), loopback),
            (
                format!("http://[::ffff:127.0.0.1]:{port}/"),
                "::ffff:127.0.0.1".parse().unwrap(),
            ),
            (format!("http://[::1]:{port}/"), "::1".parse().unwrap()),
        ] {
            let failure = public_only.send(get(url.clone(), 100)).await.unwrap_err();
            assert_eq!(failure, PeerFailure::ForbiddenAddress(refused), "{url}");
        }
        // A name the operator resolved with `--peer-resolve` goes where it
        // says; any other name through the system's resolver is checked.
        let answer = public_only
            .send(get("http://local.test/".into(), 100))
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        match public_only
            .send(get(format!("http://localhost:{port}/"), 100))
            .await
        {
            Err(PeerFailure::ForbiddenAddress(ip)) => assert!(ip.is_loopback(), "{ip}"),
            other => panic!("localhost: {other:?}"),
        }

        let development = PeerClient::new(local_http()).unwrap();
        let answer = development
            .send(get(format!("http://127.0.0.1:{port}/"), 100))
            .await
            .unwrap();
        assert_eq!((answer.status, answer.body.as_slice()), (200, &b"ok"[..]));
    }

    #[tokio::test]
    async fn an_override_connects_to_its_port_and_the_request_is_sent_as_given() {
        let (address, mut received) = http_server(Some(
            b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\nX-Peer: Yes\r\n\r\ndone".to_vec(),
        ))
        .await;
        let client = PeerClient::new(PeerOptions {
            resolve: vec![("Alice.test".into(), address)],
            ..local_http()
        })
        .unwrap();
        let answer = client
            .send(PeerRequest {
                method: PeerMethod::Post,
                url: "http://alice.test/inbox".into(),
                headers: vec![
                    ("content-type", "application/json".into()),
                    ("x-one", "1".into()),
                ],
                body: Some(b"{\"a\":1}".to_vec()),
                max_answer_bytes: 4,
            })
            .await
            .unwrap();
        assert_eq!(answer.status, 201);
        assert_eq!(answer.header("x-peer"), Some("Yes"));
        assert_eq!(answer.body, b"done");

        let request = received.recv().await.unwrap();
        assert!(request.starts_with("POST /inbox HTTP/1.1\r\n"), "{request}");
        // The URL's name without a port: the override's port is not the URL's.
        assert!(request.contains("\r\nhost: alice.test\r\n"), "{request}");
        let user_agent = format!("\r\nuser-agent: folio/{}\r\n", env!("CARGO_PKG_VERSION"));
        assert!(request.contains(&user_agent), "{request}");
        assert!(
            request.contains("\r\ncontent-type: application/json\r\n"),
            "{request}"
        );
        assert!(request.contains("\r\nx-one: 1\r\n"), "{request}");
        assert!(request.ends_with("\r\n\r\n{\"a\":1}"), "{request}");
    }

    #[tokio::test]
    async fn a_pinned_name_is_asked_at_its_pinned_port_only() {
        let (pinned, mut at_pinned) = http_server(Some(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
        ))
        .await;
        let (other, mut at_other) = http_server(Some(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nno".to_vec(),
        ))
        .await;
        let client = PeerClient::new(PeerOptions {
            allow_private: false,
            resolve: vec![("alice.test".into(), pinned)],
            ..local_http()
        })
        .unwrap();
        let url = format!("http://alice.test:{}/x", other.port());
        match client.send(get(url.clone(), 100)).await {
            Err(PeerFailure::BadUrl(reason)) => assert!(reason.contains("pinned"), "{reason}"),
            answer => panic!("{url}: {answer:?}"),
        }
        assert!(at_other.try_recv().is_err(), "the other port was asked");
        for url in [
            format!("http://alice.test:{}/y", pinned.port()),
            "http://alice.test/z".to_owned(),
        ] {
            let answer = client.send(get(url.clone(), 100)).await.unwrap();
            assert_eq!(answer.body, b"ok", "{url}");
            assert!(at_pinned.recv().await.is_some());
        }
    }

    #[tokio::test]
    async fn redirects_are_answers_not_followed() {
        let (address, mut received) = http_server(Some(
            b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/elsewhere\r\nContent-Length: 0\r\n\r\n"
                .to_vec(),
        ))
        .await;
        let client = PeerClient::new(local_http()).unwrap();
        let answer = client
            .send(get(format!("http://{address}/here"), 100))
            .await
            .unwrap();
        assert_eq!(answer.status, 302);
        assert_eq!(
            answer.header("location"),
            Some("http://127.0.0.1:9/elsewhere")
        );
        assert!(received.recv().await.unwrap().starts_with("GET /here "));
        assert!(received.try_recv().is_err(), "the redirect was followed");
    }

    #[tokio::test]
    async fn answers_longer_than_allowed_are_too_large() {
        let client = PeerClient::new(local_http()).unwrap();

        // Refused on its Content-Length, before the body (which never comes).
        let (announced, _) = http_server(Some(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nfirst bytes".to_vec(),
        ))
        .await;
        let started = Instant::now();
        let failure = client
            .send(get(format!("http://{announced}/"), 100))
            .await
            .unwrap_err();
        assert_eq!(failure, PeerFailure::TooLarge { max: 100 });
        assert!(started.elapsed() < Duration::from_secs(2));

        // Chunked: refused once the chunks read pass the limit, before the
        // last chunk (which never comes).
        let mut chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..11 {
            chunked.extend_from_slice(b"a\r\n0123456789\r\n");
        }
        let (streamed, _) = http_server(Some(chunked.clone())).await;
        let started = Instant::now();
        let failure = client
            .send(get(format!("http://{streamed}/"), 100))
            .await
            .unwrap_err();
        assert_eq!(failure, PeerFailure::TooLarge { max: 100 });
        assert!(started.elapsed() < Duration::from_secs(2));

        // Exactly the limit is fine.
        let mut exact = chunked[..chunked.len() - 15].to_vec();
        exact.extend_from_slice(b"0\r\n\r\n");
        let (limit, _) = http_server(Some(exact)).await;
        let answer = client
            .send(get(format!("http://{limit}/"), 100))
            .await
            .unwrap();
        assert_eq!(answer.body, b"0123456789".repeat(10));
    }

    #[tokio::test]
    async fn a_head_is_not_refused_for_the_content_length_it_describes() {
        let (address, _) = http_server(Some(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n".to_vec(),
        ))
        .await;
        let client = PeerClient::new(local_http()).unwrap();
        let answer = client
            .send(PeerRequest {
                method: PeerMethod::Head,
                ..get(format!("http://{address}/"), 100)
            })
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-length"), Some("1000000"));
        assert!(answer.body.is_empty());
    }

    #[tokio::test]
    async fn a_slow_peer_times_out() {
        let (silent, _) = http_server(None).await;
        // The head, and a tenth of the body it announces.
        let (trickling, _) = http_server(Some(
            b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n0123456789".to_vec(),
        ))
        .await;
        let client = PeerClient::new(PeerOptions {
            exchange_timeout: Duration::from_millis(300),
            ..local_http()
        })
        .unwrap();
        for address in [silent, trickling] {
            let started = Instant::now();
            let failure = client
                .send(get(format!("http://{address}/"), 100))
                .await
                .unwrap_err();
            assert_eq!(failure, PeerFailure::TimedOut);
            let elapsed = started.elapsed();
            assert!(
                elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2),
                "{elapsed:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_peer_that_never_shakes_hands_is_unreachable() {
        // Accepts TCP, then waits for an HTTP request that TLS never sends.
        let (silent, _) = http_server(None).await;
        let client = PeerClient::new(PeerOptions {
            connect_timeout: Duration::from_millis(300),
            ..local_http()
        })
        .unwrap();
        let started = Instant::now();
        let failure = client
            .send(get(format!("https://{silent}/"), 100))
            .await
            .unwrap_err();
        assert_eq!(
            failure,
            PeerFailure::Unreachable("no TCP and TLS handshake within 300 ms".into())
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let client = PeerClient::new(local_http()).unwrap();
        match client.send(get(format!("http://{address}/"), 100)).await {
            Err(PeerFailure::Unreachable(reason)) => {
                assert!(reason.contains("refused"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn only_https_urls_with_a_host_are_asked() {
        let production = PeerClient::new(PeerOptions::default()).unwrap();
        for url in [
            "http://peer.example/",
            "ftp://peer.example/",
            "mailto:someone@peer.example",
            "not a url",
            "https://",
        ] {
            match production.send(get(url.into(), 100)).await {
                Err(PeerFailure::BadUrl(reason)) => assert!(reason.contains(url), "{reason}"),
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    /// A TLS server for `peer.test` with a certificate from a fresh CA,
    /// answering with the HTTP version ALPN chose. Returns its address and
    /// the CA's certificate in PEM.
    async fn tls_server() -> (SocketAddr, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Folio test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let mut leaf_params = rcgen::CertificateParams::new(vec!["peer.test".to_string()]).unwrap();
        leaf_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();

        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                    let service =
                        hyper::service::service_fn(|request: hyper::Request<_>| async move {
                            let body = format!("hello over {:?}", request.version());
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                Bytes::from(body),
                            )))
                        });
                    let io = TokioIo::new(tls);
                    let _ = if h2 {
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(io, service)
                            .await
                    } else {
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .await
                    };
                });
            }
        });
        (address, ca.pem())
    }

    #[tokio::test]
    async fn tls_peers_are_trusted_through_extra_roots() {
        let (address, ca_pem) = tls_server().await;
        let roots = std::env::temp_dir().join(format!(
            "folio-peers-test-ca-{}-{}.pem",
            std::process::id(),
            address.port()
        ));
        std::fs::write(&roots, ca_pem).unwrap();
        let options = PeerOptions {
            allow_private: true,
            resolve: vec![("peer.test".into(), address)],
            exchange_timeout: Duration::from_secs(5),
            ..PeerOptions::default()
        };

        let trusting = PeerClient::new(PeerOptions {
            extra_roots: vec![roots.clone()],
            ..options.clone()
        });
        std::fs::remove_file(&roots).unwrap();
        let answer = trusting
            .unwrap()
            .send(get("https://peer.test/x".into(), 100))
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, b"hello over HTTP/2.0");

        let untrusting = PeerClient::new(options).unwrap();
        match untrusting
            .send(get("https://peer.test/x".into(), 100))
            .await
        {
            Err(PeerFailure::Unreachable(reason)) => {
                assert!(reason.contains("certificate"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn extra_roots_must_be_readable_and_hold_a_certificate() {
        let directory = std::env::temp_dir();
        let missing = directory.join(format!(
            "folio-peers-test-{}-missing.pem",
            std::process::id()
        ));
        let empty = directory.join(format!("folio-peers-test-{}-empty.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").unwrap();
        for path in [&missing, &empty] {
            let error = PeerClient::new(PeerOptions {
                extra_roots: vec![path.clone()],
                ..PeerOptions::default()
            })
            .err()
            .unwrap();
            assert!(error.starts_with(&path.display().to_string()), "{error}");
        }
        std::fs::remove_file(&empty).unwrap();
    }
}
