//! The suite's hostile peer (docs/federation.md §6): one HTTPS server
//! answering for several entities, `{fault}.{domain}`, each a server that
//! breaks one rule when asked for a record. The server under test reaches
//! them as it would any other entity's server (by discovery), so the
//! `federation/*` checks see what it makes of each answer.
//!
//! Every entity answers discovery honestly: `HEAD /` (or `GET /`) links
//! `/entity`, its Entity record, authored by it with a hash that
//! recomputes ([`crate::version_hash`]) and a signing key the peer holds.
//! Asked for a record (`/records/{entity}/{record_id}`, or one version of
//! it), each answers after its [`Fault`]. A notification sent to it
//! (`POST /notifications`) is accepted (`200`). It speaks HTTP/1.1 only
//! (ALPN `http/1.1`), one request per connection, and remembers every
//! request and when it arrived.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::client::{now_ms, record_id};
use crate::dates::record_date;
use crate::server_signature::ServerKey;
use crate::target::HostilePeerConfig;
use crate::version_hash::version_hash;

/// How the entity `{fault}.{domain}` answers for a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Has no records (`404`); signs requests with the key it publishes.
    Honest,
    /// Serves a record of its own whose `version.hash` is not its hash.
    WrongHash,
    /// Serves a record authored by `honest.{domain}`, hashed correctly; a
    /// record asked under another author's path as that author's; and a
    /// list (`GET /records`) of one record of its own and one of
    /// `honest.{domain}`.
    WrongAuthor,
    /// Answers `200` with 3 MiB, more than a record answer may be.
    Oversized,
    /// Redirects (`302`) to the same path on `elsewhere.{domain}`.
    Redirect,
    /// Answers anything `200`; nothing should ever ask it.
    Elsewhere,
    /// Has no records; sends the notification flood.
    Flood,
    /// A stranger the user never linked to: serves, honestly, the records
    /// a check [publishes](HostilePeer::publish) for it, whatever their
    /// size, and notifies them.
    Stranger,
    /// Another name under the same domain, for the many-names sender.
    Swarm,
    /// Has no records; holds every notification and record request open
    /// for [`SLOW_HOLD`] before answering it.
    Slow,
}

impl Fault {
    pub const ALL: [Fault; 10] = [
        Fault::Honest,
        Fault::WrongHash,
        Fault::WrongAuthor,
        Fault::Oversized,
        Fault::Redirect,
        Fault::Elsewhere,
        Fault::Flood,
        Fault::Stranger,
        Fault::Swarm,
        Fault::Slow,
    ];

    /// The first label of the entity's name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Honest => "honest",
            Fault::WrongHash => "wrong-hash",
            Fault::WrongAuthor => "wrong-author",
            Fault::Oversized => "oversized",
            Fault::Redirect => "redirect",
            Fault::Elsewhere => "elsewhere",
            Fault::Flood => "flood",
            Fault::Stranger => "stranger",
            Fault::Swarm => "swarm",
            Fault::Slow => "slow",
        }
    }
}

/// Every entity name the peer answers for under `domain`: the names its
/// certificate must hold and the server under test must resolve to it.
pub fn entity_names(domain: &str) -> Vec<String> {
    Fault::ALL
        .iter()
        .map(|fault| format!("{}.{domain}", fault.name()))
        .collect()
}

/// The size of [`Fault::Oversized`]'s answer: past the 2 MiB a record
/// answer may have.
const OVERSIZED_BYTES: usize = 3 * 1024 * 1024;
/// The most bytes of request head read.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most bytes of request body read.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// The longest one connection is served.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`Fault::Slow`] holds a request before it answers: long
/// enough to stand out, shorter than the server's 15 s for a whole
/// exchange.
pub const SLOW_HOLD: Duration = Duration::from_secs(10);
/// The relation of the discovery link.
const ENTITY_RECORD_RELATION: &str = "https://folio.dev/rels/entity-record";

/// One request the peer received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    /// The `Host` header's name, without a port.
    pub host: String,
    /// The request target: path and query.
    pub path: String,
    /// When its whole request had arrived.
    pub at: Instant,
}

/// The running peer. Dropping it stops accepting connections.
pub struct HostilePeer {
    state: Arc<State>,
    accept: JoinHandle<()>,
    /// The plain-HTTP relay's loop, when the configuration asks for one.
    relay: Option<JoinHandle<()>>,
}

impl Drop for HostilePeer {
    fn drop(&mut self) {
        self.accept.abort();
        if let Some(relay) = &self.relay {
            relay.abort();
        }
    }
}

/// One entity the peer answers for.
struct HostileEntity {
    fault: Fault,
    name: String,
    key: ServerKey,
    /// Its Entity record.
    record: Value,
}

struct State {
    domain: String,
    entities: Vec<HostileEntity>,
    /// A version link to a Type record, for the records served.
    type_link: Value,
    seen: Mutex<Vec<SeenRequest>>,
    /// What [`Fault::Stranger`] serves: its published records, by id.
    published: Mutex<Vec<Value>>,
}

impl HostilePeer {
    /// Listens on `config.listen` with `config`'s certificate (and on
    /// `config.relay` as a plain-HTTP relay, if set) and serves until
    /// dropped. `entity_type` is a version link to the built-in Entity
    /// type as the server under test knows it, the type of every Entity
    /// record served.
    pub async fn start(config: &HostilePeerConfig, entity_type: Value) -> Result<Self, String> {
        let acceptor = acceptor(config)?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|error| format!("listening on {}: {error}", config.listen))?;
        let entities = Fault::ALL
            .iter()
            .map(|&fault| {
                let name = format!("{}.{}", fault.name(), config.domain);
                let key = ServerKey::generate(&name);
                let record = entity_record(&name, &key, &entity_type);
                HostileEntity {
                    fault,
                    name,
                    key,
                    record,
                }
            })
            .collect();
        let state = Arc::new(State {
            domain: config.domain.clone(),
            entities,
            type_link: entity_type,
            seen: Mutex::new(Vec::new()),
            published: Mutex::new(Vec::new()),
        });
        let relay = match config.relay {
            Some(address) => {
                let listener = TcpListener::bind(address)
                    .await
                    .map_err(|error| format!("relaying on {address}: {error}"))?;
                Some(tokio::spawn(accept_loop(
                    listener,
                    None,
                    Arc::clone(&state),
                )))
            }
            None => None,
        };
        let accept = tokio::spawn(accept_loop(listener, Some(acceptor), Arc::clone(&state)));
        Ok(Self {
            state,
            accept,
            relay,
        })
    }

    /// The name of the entity with this fault.
    pub fn entity(&self, fault: Fault) -> String {
        format!("{}.{}", fault.name(), self.state.domain)
    }

    /// The key the entity with this fault publishes and signs with.
    pub fn key(&self, fault: Fault) -> ServerKey {
        self.state.entity(fault).key.clone()
    }

    /// Publishes a record of the entity with `fault` (only
    /// [`Fault::Stranger`] serves them): authored by it, of `type_link`,
    /// with `permissions` and `content`, hashed right. Returns the record.
    pub fn publish(
        &self,
        fault: Fault,
        type_link: &Value,
        permissions: Value,
        content: Value,
    ) -> Value {
        let mut published = record(&self.entity(fault), &record_id(), type_link, content);
        published["permissions"] = permissions;
        published["version"]["hash"] = version_hash(&published).into();
        self.state
            .published
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(published.clone());
        published
    }

    /// Every request received so far, in order.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.state
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

fn acceptor(config: &HostilePeerConfig) -> Result<TlsAcceptor, String> {
    let certificates = CertificateDer::pem_file_iter(&config.cert)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|error| format!("hostile_peer.cert {}: {error}", config.cert))?;
    let key = PrivateKeyDer::from_pem_file(&config.key)
        .map_err(|error| format!("hostile_peer.key {}: {error}", config.key))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS settings: {error}"))?
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .map_err(|error| format!("hostile_peer certificate: {error}"))?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(tls)))
}

/// A record of `author` in wire form, with the hash it computes to.
fn record(author: &str, id: &str, type_link: &Value, content: Value) -> Value {
    let date = record_date(now_ms());
    let mut record = json!({
        "author": {"entity": author},
        "id": id,
        "source": "self",
        "created_at": date,
        "version": {"author": {"entity": author}, "hash": "", "created_at": date},
        "permissions": {"read": "public"},
        "type": type_link,
        "content": content,
    });
    record["version"]["hash"] = version_hash(&record).into();
    record
}

/// `entity`'s Entity record: its server is this peer, its key `key`.
fn entity_record(entity: &str, key: &ServerKey, entity_type: &Value) -> Value {
    let record_url = format!("https://{entity}/records/{{entity}}/{{record_id}}");
    let endpoints = json!({
        "auth": format!("https://{entity}/auth/{{record_id}}"),
        "records": format!("https://{entity}/records"),
        "record": record_url,
        "record_versions": format!("{record_url}/versions"),
        "record_version": format!("{record_url}/versions/{{version_hash}}"),
        "new_record": format!("https://{entity}/records"),
        "record_blob": format!("{record_url}/blobs/{{blob_hash}}/{{file_name}}"),
        "record_version_blob":
            format!("{record_url}/versions/{{version_hash}}/blobs/{{blob_hash}}/{{file_name}}"),
        "new_blob": format!("https://{entity}/blobs"),
        "events": format!("https://{entity}/events"),
        "new_notification": format!("https://{entity}/notifications"),
        "server_info": format!("https://{entity}/server"),
    });
    let content = json!({
        "entity": entity,
        "previous_entities": [],
        "signing_keys": [{"algorithm": "ed25519", "public_key": key.public_key()}],
        "profile": {"name": "Mallory"},
        "servers": [{"version": "1.0.0", "preference": 0, "endpoints": endpoints}],
    });
    record(entity, &record_id(), entity_type, content)
}

/// Accepts connections until aborted: over TLS with `acceptor`, else as
/// the plain-HTTP development relay, where each request names its own
/// `https://` URL in [`RELAYED_URL_HEADER`] and is answered as if it had
/// come over TLS to that URL's host (the edge in development reaches other
/// servers only so: `FOLIO_PEER_RELAY`).
async fn accept_loop(listener: TcpListener, acceptor: Option<TlsAcceptor>, state: Arc<State>) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            // Out of descriptors, most likely: wait for some to close.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (acceptor, state) = (acceptor.clone(), Arc::clone(&state));
        tokio::spawn(async move {
            let served = async {
                match acceptor {
                    Some(acceptor) => serve(acceptor.accept(tcp).await?, &state, false).await,
                    None => serve(tcp, &state, true).await,
                }
            };
            // A failed connection concerns only the server that opened it.
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, served).await;
        });
    }
}

/// A request as the peer reads it.
struct Request {
    method: String,
    host: String,
    target: String,
    /// Its [`RELAYED_URL_HEADER`], if it has one.
    relayed_url: Option<String>,
}

/// What the peer answers.
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".to_owned())],
            body: body.to_string().into_bytes(),
        }
    }

    fn not_found() -> Self {
        Self::json(404, &json!({"code": "record_not_found"}))
    }
}

/// The header a relayed request carries its own URL in.
pub const RELAYED_URL_HEADER: &str = "x-folio-relayed-url";

/// The header of the relay's own answer: `no-such-name` for a name it
/// stands for no server of (the edge's `peers::RELAY_ANSWER_HEADER`).
pub const RELAY_ANSWER_HEADER: &str = "x-folio-relay";

/// Answers one request on `stream`; `relayed`: its URL is in
/// [`RELAYED_URL_HEADER`], not in its request line and `Host`.
async fn serve(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    state: &State,
    relayed: bool,
) -> std::io::Result<()> {
    let Some(mut request) = read_request(&mut stream).await? else {
        return Ok(());
    };
    if relayed {
        let Some((host, target)) = request.relayed_url.as_deref().and_then(split_https_url) else {
            let answer = Answer::json(400, &json!({"relay": "no https x-folio-relayed-url"}));
            return write_answer(&mut stream, &request, &answer).await;
        };
        // The relay is the network of the server under test: a name it
        // stands for no server of does not exist there, as a resolver
        // would say of it.
        if !state.entities.iter().any(|entity| entity.name == host) {
            let answer = Answer {
                status: 502,
                headers: vec![(RELAY_ANSWER_HEADER, "no-such-name".to_owned())],
                body: Vec::new(),
            };
            return write_answer(&mut stream, &request, &answer).await;
        }
        (request.host, request.target) = (host, target);
    }
    state
        .seen
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(SeenRequest {
            method: request.method.clone(),
            host: request.host.clone(),
            path: request.target.clone(),
            at: Instant::now(),
        });
    if state.holds(&request) {
        tokio::time::sleep(SLOW_HOLD).await;
    }
    let answer = state.answer(&request);
    write_answer(&mut stream, &request, &answer).await
}

/// `https://HOST[:PORT]/PATH?QUERY` as the host (lowercase, no port) and
/// the request target.
fn split_https_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("https://")?;
    let (authority, target) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    Some((host_name(authority), target.to_owned()))
}

async fn write_answer(
    stream: &mut (impl AsyncWrite + Unpin),
    request: &Request,
    answer: &Answer,
) -> std::io::Result<()> {
    let reason = match answer.status {
        200 => "OK",
        204 => "No Content",
        302 => "Found",
        404 => "Not Found",
        _ => "Other",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nconnection: close\r\n",
        answer.status
    );
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    // A 204 has no body and says no length.
    if answer.status != 204 {
        head.push_str(&format!("content-length: {}\r\n", answer.body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    if request.method != "HEAD" && answer.status != 204 {
        stream.write_all(&answer.body).await?;
    }
    stream.shutdown().await
}

/// Reads one request: its head up to the blank line, and a body of its
/// `Content-Length` (which is read and dropped). `None` when the client
/// closed before sending a whole head.
async fn read_request(stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Option<Request>> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut buffer = Vec::new();
    let mut chunk = [0; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return Err(invalid("request head too long"));
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = std::str::from_utf8(&buffer[..head_end]).map_err(|_| invalid("head not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default().to_owned();
    let mut relayed_url = None;
    let mut host = String::new();
    let mut content_length = 0;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "host" => host = host_name(value),
            RELAYED_URL_HEADER => relayed_url = Some(value.to_owned()),
            "content-length" => {
                content_length = value.parse().map_err(|_| invalid("bad Content-Length"))?
            }
            "transfer-encoding" => return Err(invalid("chunked requests are not read")),
            _ => {}
        }
    }
    if content_length > MAX_BODY_BYTES {
        return Err(invalid("request body too long"));
    }
    let mut body_read = buffer.len() - (head_end + 4);
    while body_read < content_length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(None);
        }
        body_read += read;
    }
    Ok(Some(Request {
        method,
        host,
        target,
        relayed_url,
    }))
}

/// A `Host` value's name, lowercase, without its port.
fn host_name(value: &str) -> String {
    let name = match value.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => value,
    };
    name.to_ascii_lowercase()
}

/// A record asked for: `/records/{author}/{id}` or
/// `/records/{author}/{id}/versions/{hash}`.
struct AskedRecord<'a> {
    author: &'a str,
    id: &'a str,
    hash: Option<&'a str>,
}

impl<'a> AskedRecord<'a> {
    fn parse(target: &'a str) -> Option<Self> {
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        let segments: Vec<&str> = path.strip_prefix("/records/")?.split('/').collect();
        let (author, id, hash) = match segments.as_slice() {
            [author, id] => (*author, *id, None),
            [author, id, "versions", hash] => (*author, *id, Some(*hash)),
            _ => return None,
        };
        let hex = |text: &str, length: usize| crate::expect::is_hex(text, length);
        (hex(id, 32) && hash.is_none_or(|hash| hex(hash, 64))).then_some(Self { author, id, hash })
    }
}

impl State {
    fn entity(&self, fault: Fault) -> &HostileEntity {
        // Every fault has its entity: they are made from `Fault::ALL`.
        self.entities
            .iter()
            .find(|entity| entity.fault == fault)
            .unwrap_or(&self.entities[0])
    }

    /// Whether the request is one [`Fault::Slow`] holds.
    fn holds(&self, request: &Request) -> bool {
        let slow = &self.entity(Fault::Slow).name;
        request.host == *slow
            && (request.target == "/notifications" || AskedRecord::parse(&request.target).is_some())
    }

    fn answer(&self, request: &Request) -> Answer {
        let Some(entity) = self
            .entities
            .iter()
            .find(|entity| entity.name == request.host)
        else {
            return Answer::not_found();
        };
        if entity.fault == Fault::Elsewhere {
            return Answer::json(200, &json!({}));
        }
        let name = &entity.name;
        match (request.method.as_str(), request.target.as_str()) {
            ("HEAD" | "GET", "/") => Answer {
                status: 204,
                headers: vec![(
                    "link",
                    format!("<https://{name}/entity>; rel=\"{ENTITY_RECORD_RELATION}\""),
                )],
                body: Vec::new(),
            },
            ("GET", "/entity") => {
                Answer::json(200, &json!({"record": entity.record, "linked_records": []}))
            }
            ("GET", target) if entity.fault == Fault::WrongAuthor => self.wrong_author(target),
            ("POST", "/notifications") => Answer::json(200, &json!({"received": 1})),
            ("GET", target) => match AskedRecord::parse(target) {
                Some(asked) if asked.author == name => self.record_answer(entity, &asked, target),
                _ => Answer::not_found(),
            },
            _ => Answer::not_found(),
        }
    }

    /// What [`Fault::WrongAuthor`] answers to a `GET`: a list of its own
    /// record and the honest entity's, or a record asked of it, whoever's
    /// path it is under, authored by someone else than it.
    fn wrong_author(&self, target: &str) -> Answer {
        let entity = self.entity(Fault::WrongAuthor);
        let honest = &self.entity(Fault::Honest).name;
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        if path == "/records" {
            let records = [
                record(&entity.name, &record_id(), &self.type_link, json!({})),
                record(honest, &record_id(), &self.type_link, json!({})),
            ];
            return Answer::json(200, &json!({"records": records, "linked_records": []}));
        }
        match AskedRecord::parse(target) {
            Some(asked) if asked.author == entity.name => {
                self.record_answer(entity, &asked, target)
            }
            Some(asked) => Answer::json(
                200,
                &json!({
                    "record": record(asked.author, asked.id, &self.type_link, json!({})),
                    "linked_records": [],
                }),
            ),
            None => Answer::not_found(),
        }
    }

    /// What `entity` answers when asked for a record of its own.
    fn record_answer(
        &self,
        entity: &HostileEntity,
        asked: &AskedRecord<'_>,
        target: &str,
    ) -> Answer {
        let found =
            |record: Value| Answer::json(200, &json!({"record": record, "linked_records": []}));
        match entity.fault {
            Fault::WrongHash => {
                let mut record = record(&entity.name, asked.id, &self.type_link, json!({}));
                let other = hex::encode(Sha256::digest(b"a version this record is not"));
                record["version"]["hash"] = asked.hash.unwrap_or(&other).into();
                found(record)
            }
            Fault::WrongAuthor => {
                let honest = &self.entity(Fault::Honest).name;
                found(record(honest, asked.id, &self.type_link, json!({})))
            }
            Fault::Oversized => {
                let mut body = b"{\"record\": \"".to_vec();
                body.resize(OVERSIZED_BYTES - 2, b'a');
                body.extend_from_slice(b"\"}");
                Answer {
                    status: 200,
                    headers: vec![("content-type", "application/json".to_owned())],
                    body,
                }
            }
            Fault::Redirect => Answer {
                status: 302,
                headers: vec![(
                    "location",
                    format!(
                        "https://{}.{}{target}",
                        Fault::Elsewhere.name(),
                        self.domain
                    ),
                )],
                body: Vec::new(),
            },
            Fault::Stranger => {
                let published = self
                    .published
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                let hash_matches = |record: &Value| {
                    asked
                        .hash
                        .is_none_or(|hash| record["version"]["hash"] == hash)
                };
                match published
                    .iter()
                    .find(|record| record["id"] == asked.id && hash_matches(record))
                {
                    Some(record) => found(record.clone()),
                    None => Answer::not_found(),
                }
            }
            Fault::Honest | Fault::Elsewhere | Fault::Flood | Fault::Swarm | Fault::Slow => {
                Answer::not_found()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_to_their_end() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let text = b"POST /notifications HTTP/1.1\r\nHost: Flood.Peer.Test:8443\r\n\
                     Content-Length: 5\r\n\r\nhello";
        let request = runtime
            .block_on(read_request(&mut &text[..]))
            .unwrap()
            .unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.host, "flood.peer.test");
        assert_eq!(request.target, "/notifications");
        let cut = b"GET / HTTP/1.1\r\nHost: a\r\n";
        assert!(
            runtime
                .block_on(read_request(&mut &cut[..]))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn record_paths_name_a_record_or_one_version() {
        let id = "0".repeat(32);
        let hash = "a".repeat(64);
        let path = format!("/records/e.test/{id}");
        let asked = AskedRecord::parse(&path).unwrap();
        assert_eq!(
            (asked.author, asked.id, asked.hash),
            ("e.test", &id[..], None)
        );
        let path = format!("/records/e.test/{id}/versions/{hash}?x=1");
        assert_eq!(AskedRecord::parse(&path).unwrap().hash, Some(&hash[..]));
        assert!(AskedRecord::parse("/records/e.test/nothex").is_none());
        assert!(AskedRecord::parse(&format!("/records/e.test/{id}/blobs")).is_none());
    }

    #[test]
    fn entity_records_hash_to_their_hash() {
        let key = ServerKey::generate("honest.peer.test");
        let type_link = json!({"entity": "system.folio.dev", "record_id": "1".repeat(32), "version_hash": "2".repeat(64)});
        let record = entity_record("honest.peer.test", &key, &type_link);
        assert_eq!(record["version"]["hash"], version_hash(&record));
        assert_eq!(
            record["content"]["signing_keys"][0]["public_key"],
            key.public_key()
        );
        assert!(crate::expect::is_record_date(
            record["created_at"].as_str().unwrap()
        ));
    }
}
