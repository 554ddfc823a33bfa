//! `folio-load federation`: two `folio serve` processes that federate
//! (docs/federation.md), set up as `host-native/tests/federation.rs` sets
//! them up: Alice (`alice.test`, base URL `https://a.test`) on one, Bob
//! (`bob.test`, `https://b.test`) on the other, on loopback, their names
//! resolved to them by `--peer-resolve`, over TLS with certificates of a
//! fresh test CA both trust (`--peer-ca`); Alice publishes the real apps'
//! conversation and message types and starts a conversation with Bob.
//!
//! [`measure`] puts a price on a delivery: Alice's server's CPU per private
//! record (nobody notified) against its CPU per message to Bob, and the
//! delay from Alice's answer to the event on Bob's stream. [`soak`] writes
//! messages for a long while, with the seeded actions of `workload`
//! beside them, as the servers are killed in turn, Alice's moves and Alice
//! names a user of Bob's server while it is down; then checks issue 42's
//! rule (`convergence`): every record the same on both sides but the
//! intended differences, and both outboxes empty.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use folio_client::TrustOptions;
use folio_client::client::{Call, Http, now_ms, read_response, record_id};
use folio_client::signer::AppKey;
use folio_client::sse::EventStream;
use folio_conformance::dates::record_date;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Semaphore, watch};
use url::Url;

use crate::drive::latency_histogram;
use workload::{FirstContact, Workload};

mod convergence;
mod workload;
use crate::folio::{cli, text};
use crate::{free_port, procfs};

/// The real apps' types (`shared/real-types`), by the ids their apps
/// publish them under.
const CONVERSATION_TYPE: &str = "7583995c51cf44ad972fdc123105e1dc";
const MESSAGE_TYPE: &str = "153b3cb3a2f0494e950599de1cc13ef3";
const POST_TYPE: &str = "875d6b82645e4833a3f0dca3fb79d69d";
/// How long `folio serve` may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Between two attempts of a write, or of opening Bob's event stream.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How long a write is tried again in the soak before it counts as failed.
const WRITE_RETRY_FOR: Duration = Duration::from_secs(120);
/// How long the measurement waits for the last deliveries.
const DELIVERY_WAIT: Duration = Duration::from_secs(60);
/// How long the soak waits, after its last write, for Bob to hold every
/// message.
const SOAK_DELIVERY_WAIT: Duration = Duration::from_secs(300);
/// How long Bob's server stays down in fault (b) at most (two thirds of
/// the time between faults when that is shorter).
const BOB_DOWN: Duration = Duration::from_secs(60);
/// Waited after a phase's last write (or delivery) before the CPU is
/// sampled, so work the phase left behind is counted in it.
const SETTLE: Duration = Duration::from_secs(1);
/// The soak's outbox retries (`--outbox-first-retry-ms`,
/// `--outbox-max-retry-ms`): a delivery that failed is tried again within
/// seconds rather than the default 30 s doubling to an hour.
const SOAK_FIRST_RETRY_MS: u32 = 1000;
const SOAK_MAX_RETRY_MS: u32 = 5000;

/// What both modes take from the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `folio` binary.
    pub folio: PathBuf,
    /// Under which `federation/` is made afresh.
    pub dir: PathBuf,
    /// Writes a second.
    pub rate: f64,
    /// Each phase's writes (measure), or the soak's.
    pub duration: Duration,
    /// Unmeasured writes of each kind before the measurement.
    pub warmup: Duration,
    /// Writes in flight at most.
    pub concurrency: usize,
    /// The `text` of every record written, in bytes.
    pub text_bytes: usize,
    /// Between two faults of the soak.
    pub fault_every: Duration,
    /// The seed of the soak's actions' RNG.
    pub seed: u64,
}

// ---------------------------------------------------------------------------
// Certificates

/// A test CA, and certificates it signs.
struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: PathBuf,
}

impl TestCa {
    fn new(dir: &Path) -> Result<TestCa, String> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())
            .map_err(|error| format!("CA parameters: {error}"))?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "folio-load federation test CA");
        let key = rcgen::KeyPair::generate().map_err(|error| format!("a CA key: {error}"))?;
        let cert = params
            .self_signed(&key)
            .map_err(|error| format!("the CA certificate: {error}"))?;
        let pem = dir.join("ca.pem");
        write_file(&pem, &cert.pem())?;
        Ok(TestCa {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        })
    }

    /// A certificate for `names`, written as `{stem}.pem` and `{stem}.key`.
    fn certificate(
        &self,
        dir: &Path,
        stem: &str,
        names: &[&str],
    ) -> Result<(PathBuf, PathBuf), String> {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let params = rcgen::CertificateParams::new(names)
            .map_err(|error| format!("certificate parameters: {error}"))?;
        let key = rcgen::KeyPair::generate().map_err(|error| format!("a key: {error}"))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|error| format!("a certificate: {error}"))?;
        let (cert_path, key_path) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        write_file(&cert_path, &cert.pem())?;
        write_file(&key_path, &key.serialize_pem())?;
        Ok((cert_path, key_path))
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|error| format!("{}: {error}", path.display()))
}

// ---------------------------------------------------------------------------
// Servers

/// One `folio serve`, started again on the same data, port and settings
/// after a kill. Its stderr is appended to `log`.
struct Server {
    name: &'static str,
    binary: PathBuf,
    data: PathBuf,
    /// Everything after `serve`.
    args: Vec<String>,
    rust_log: &'static str,
    log: PathBuf,
    child: Option<Child>,
    pid: u32,
}

impl Server {
    async fn start(&mut self) -> Result<Duration, String> {
        let started = Instant::now();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|error| format!("{}: {error}", self.log.display()))?;
        let _ = writeln!(
            file,
            "--- folio-load starts {}'s server at {}",
            self.name,
            record_date(now_ms())
        );
        let mut child = Command::new(&self.binary)
            .arg("--data-dir")
            .arg(&self.data)
            .arg("serve")
            .args(&self.args)
            .env("RUST_LOG", self.rust_log)
            .env_remove("FOLIO_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("starting {}: {error}", self.binary.display()))?;
        let pid = child.id().ok_or("folio serve exited at once")?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (ready, listening) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut ready = Some(ready);
            let mut file = std::io::LineWriter::new(file);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = writeln!(file, "{line}");
                if line.contains("listening on https://")
                    && let Some(ready) = ready.take()
                {
                    let _ = ready.send(());
                }
            }
        });
        match tokio::time::timeout(START_TIMEOUT, listening).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                return Err(format!(
                    "{}'s folio serve exited before listening (its log: {})",
                    self.name,
                    self.log.display()
                ));
            }
            Err(_) => {
                return Err(format!(
                    "{}'s folio serve did not listen within 60 s (its log: {})",
                    self.name,
                    self.log.display()
                ));
            }
        }
        self.child = Some(child);
        self.pid = pid;
        Ok(started.elapsed())
    }

    /// SIGKILL, as a crash would.
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    fn cpu(&self) -> Duration {
        procfs::sample(self.pid).map(|s| s.cpu).unwrap_or_default()
    }

    fn rss_mib(&self) -> f64 {
        procfs::sample(self.pid).map(|s| s.rss).unwrap_or_default() as f64 / (1024.0 * 1024.0)
    }
}

// ---------------------------------------------------------------------------
// Clients

/// An app with full access to one user's records, talking to that user's
/// server at `https://localhost:PORT` (the certificate names `localhost`
/// too), trusting the test CA.
#[derive(Clone)]
struct Client {
    http: Http,
    key: Arc<AppKey>,
    /// `https://localhost:PORT/api/{user}`.
    api: String,
}

impl Client {
    fn url(&self, path: &str) -> Result<Url, String> {
        Url::parse(&format!("{}{path}", self.api)).map_err(|error| format!("{path}: {error}"))
    }

    /// A signed GET that must answer 200; its JSON.
    async fn get(&self, url: Url) -> Result<Value, String> {
        let call = Call::get(url).signed(&self.key);
        let response = self.http.send(&call).await?;
        if response.status != 200 {
            return Err(format!(
                "GET {}: {} {}",
                call.url,
                response.status,
                response.excerpt()
            ));
        }
        response.json()
    }

    /// A record of `entity`, if this user's store holds it.
    async fn record(&self, entity: &str, id: &str) -> Result<Option<Value>, String> {
        let call = Call::get(self.url(&format!("/records/{entity}/{id}"))?).signed(&self.key);
        let response = self.http.send(&call).await?;
        match response.status {
            200 => Ok(Some(response.json()?["record"].clone())),
            404 => Ok(None),
            status => Err(format!("GET {}: {status} {}", call.url, response.excerpt())),
        }
    }

    /// Creates a record; the stored record.
    async fn create(&self, body: &Value) -> Result<Value, String> {
        let call = Call::post(self.url("/records")?)
            .json(body)
            .signed(&self.key);
        let response = self.http.send(&call).await?;
        if response.status != 200 {
            return Err(format!(
                "creating a record: {} {}",
                response.status,
                response.excerpt()
            ));
        }
        Ok(response.json()?["record"].clone())
    }

    /// The version link of the built-in type named `name`.
    async fn builtin_type(&self, name: &str) -> Result<Value, String> {
        let mut url = self.url("/records")?;
        url.query_pairs_mut()
            .append_pair("sources", "resolution")
            .append_pair("page_size", "200");
        let page = self.get(url).await?;
        page["records"]
            .as_array()
            .and_then(|records| {
                records
                    .iter()
                    .find(|record| record["content"]["name"] == name)
            })
            .map(version_link)
            .ok_or_else(|| format!("no built-in type named {name}"))
    }
}

fn version_link(record: &Value) -> Value {
    json!({
        "entity": record["author"]["entity"],
        "record_id": record["id"],
        "version_hash": record["version"]["hash"],
    })
}

fn record_link(record: &Value) -> Value {
    json!({"entity": record["author"]["entity"], "record_id": record["id"]})
}

/// A real app's type (`shared/real-types/{file}`), published by `entity`
/// under `id`.
fn real_type(file: &str, id: &str, entity: &str, type_type: &Value) -> Result<Value, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/real-types")
        .join(file);
    let text =
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let content: Value = serde_json::from_str(&text.replace("types.baq.dev", entity))
        .map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(json!({"id": id, "type": type_type, "content": content}))
}

// ---------------------------------------------------------------------------
// The pair

const ALICE: &str = "alice";
const ALICE_ENTITY: &str = "alice.test";
const BOB: &str = "bob";
const BOB_ENTITY: &str = "bob.test";
/// The host of Alice's base URL, and the one her server moves to in the
/// soak (`Fault::MoveAlice`).
const OLD_HOST: &str = "a.test";
const MOVED_HOST: &str = "moved-a.test";

/// A user the soak acts for: their entity and an app with full access.
#[derive(Clone)]
struct Person {
    entity: String,
    client: Client,
}

/// Alice's and Bob's servers, their apps, and what Alice published.
struct Pair {
    alice: Server,
    bob: Server,
    to_alice: Client,
    to_bob: Client,
    /// The users of Bob's server whom Alice names for the first time while
    /// it is down (the soak's first contacts), with their apps.
    contacts: Vec<Person>,
    /// A message in the conversation, and a private record.
    message: Kind,
    private: Kind,
    conversation_id: String,
    /// The types Alice published, and the conversation with Bob.
    published: workload::Published,
}

impl Pair {
    /// Both servers on fresh data under `settings.dir/federation`, set up
    /// as host-native/tests/federation.rs does; `outbox_retry` adds the
    /// soak's quick outbox retries; `contacts` more users on Bob's server
    /// (`contact1.test`, …), whom Alice's server has never heard of.
    async fn start(
        settings: &Settings,
        outbox_retry: bool,
        contacts: usize,
    ) -> Result<Pair, String> {
        let root = settings.dir.join("federation");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).map_err(|error| format!("{}: {error}", root.display()))?;
        let root = root
            .canonicalize()
            .map_err(|error| format!("{}: {error}", root.display()))?;
        let ca = TestCa::new(&root)?;
        let trust = TrustOptions {
            ca_cert: Some(ca.pem.display().to_string()),
            insecure: false,
        };
        let (port_a, port_b) = (free_port()?, free_port()?);
        // `moved-a.test` is where Alice's server moves in the soak
        // (`Fault::MoveAlice`); until then nothing names it.
        let mut resolve = vec![
            format!("alice.test=127.0.0.1:{port_a}"),
            format!("{OLD_HOST}=127.0.0.1:{port_a}"),
            format!("{MOVED_HOST}=127.0.0.1:{port_a}"),
            format!("bob.test=127.0.0.1:{port_b}"),
            format!("b.test=127.0.0.1:{port_b}"),
        ];
        let contact_entities: Vec<String> =
            (1..=contacts).map(|n| format!("contact{n}.test")).collect();
        for entity in &contact_entities {
            resolve.push(format!("{entity}=127.0.0.1:{port_b}"));
        }
        let rust_log = if outbox_retry { "info" } else { "warn" };
        let mut sides = Vec::new();
        let mut contacts = Vec::new();
        for (user, entity, host, port) in [
            (ALICE, ALICE_ENTITY, OLD_HOST, port_a),
            (BOB, BOB_ENTITY, "b.test", port_b),
        ] {
            let data = root.join(user);
            std::fs::create_dir_all(&data)
                .map_err(|error| format!("{}: {error}", data.display()))?;
            let base_url = format!("https://{host}");
            let key = provision(&settings.folio, &data, user, entity, &base_url).await?;
            let mut names = vec![host, entity, "localhost"];
            if user == ALICE {
                names.push(MOVED_HOST);
            } else {
                names.extend(contact_entities.iter().map(String::as_str));
            }
            let (cert, tls_key) = ca.certificate(&root, user, &names)?;
            let mut args: Vec<String> = vec![
                "--listen".into(),
                format!("127.0.0.1:{port}"),
                "--http-listen".into(),
                "off".into(),
                "--base-url".into(),
                base_url.clone(),
                "--tls-cert".into(),
                cert.display().to_string(),
                "--tls-key".into(),
                tls_key.display().to_string(),
                "--peer-ca".into(),
                ca.pem.display().to_string(),
                // The load is the app's writes at a fixed rate, not the
                // limits: a restarted server's backlog comes in a burst.
                // The notification rate stays at its default.
                "--write-rate".into(),
                "off".into(),
                "--replay-nonces-per-app".into(),
                "off".into(),
            ];
            if outbox_retry {
                args.extend([
                    "--outbox-first-retry-ms".into(),
                    SOAK_FIRST_RETRY_MS.to_string(),
                    "--outbox-max-retry-ms".into(),
                    SOAK_MAX_RETRY_MS.to_string(),
                ]);
            }
            for rule in &resolve {
                args.extend(["--peer-resolve".into(), rule.clone()]);
            }
            let mut server = Server {
                name: user,
                binary: settings.folio.clone(),
                data: data.clone(),
                args,
                rust_log,
                log: root.join(format!("{user}.log")),
                child: None,
                pid: 0,
            };
            // The contacts are users of Bob's server, made before it starts.
            if user == BOB {
                for (n, entity) in contact_entities.iter().enumerate() {
                    let name = format!("contact{}", n + 1);
                    let key = provision(&settings.folio, &data, &name, entity, &base_url).await?;
                    contacts.push(Person {
                        entity: entity.clone(),
                        client: Client {
                            http: Http::new(&trust)?,
                            key: Arc::new(key),
                            api: format!("https://localhost:{port}/api/{name}"),
                        },
                    });
                }
            }
            server.start().await?;
            let client = Client {
                http: Http::new(&trust)?,
                key: Arc::new(key),
                api: format!("https://localhost:{port}/api/{user}"),
            };
            sides.push((server, client));
        }
        let (bob, to_bob) = sides.pop().expect("two sides");
        let (alice, to_alice) = sides.pop().expect("two sides");

        // Alice publishes the real apps' types under her entity, and a
        // private type of her own.
        let type_type = to_alice.builtin_type("type").await?;
        let mut published = HashMap::new();
        for (file, id) in [
            ("conversation.json", CONVERSATION_TYPE),
            ("message.json", MESSAGE_TYPE),
            ("post.json", POST_TYPE),
        ] {
            let body = real_type(file, id, ALICE_ENTITY, &type_type)?;
            published.insert(id, version_link(&to_alice.create(&body).await?));
        }
        // A note: private in the measurement, shared and unshared in the
        // soak (Type records are public, so Bob's server uses it too).
        let note_type = to_alice
            .create(&json!({
                "type": type_type,
                "content": {
                    "name": "note",
                    "schema": {"type": "object", "properties": {
                        "content": {"type": "object", "properties": {"text": {"type": "string"}}}
                    }}
                }
            }))
            .await?;

        // A conversation between Alice and Bob; it reaches Bob's server
        // before anything is measured (Alice's server discovers Bob's on
        // the way).
        let both = json!([{"entity": ALICE_ENTITY}, {"entity": BOB_ENTITY}]);
        let conversation = to_alice
            .create(&json!({
                "type": published[CONVERSATION_TYPE],
                "permissions": {"read": both, "write": []},
                "content": {},
            }))
            .await?;
        let conversation_id = text(&conversation, "id")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while to_bob
            .record(ALICE_ENTITY, &conversation_id)
            .await?
            .is_none()
        {
            if Instant::now() > deadline {
                return Err(format!(
                    "Bob's server never received the conversation (logs: {})",
                    root.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Pair {
            alice,
            bob,
            to_alice,
            to_bob,
            message: Kind::Message {
                ty: published[MESSAGE_TYPE].clone(),
                conversation: record_link(&conversation),
                read: both,
            },
            private: Kind::Private {
                ty: version_link(&note_type),
            },
            conversation_id,
            published: workload::Published {
                conversation_type: published[CONVERSATION_TYPE].clone(),
                message_type: published[MESSAGE_TYPE].clone(),
                post_type: published[POST_TYPE].clone(),
                note_type: version_link(&note_type),
                conversation: conversation.clone(),
            },
            contacts,
        })
    }

    async fn stop(mut self) {
        self.alice.kill().await;
        self.bob.kill().await;
    }
}

/// Makes the user with the CLI, and an app with full access; its key.
async fn provision(
    binary: &Path,
    data: &Path,
    user: &str,
    entity: &str,
    base_url: &str,
) -> Result<AppKey, String> {
    let add = [
        "user",
        "add",
        user,
        "--entity",
        entity,
        "--base-url",
        base_url,
        "--json",
        // Each entity is served at another host name (alice.test at a.test).
        "--allow-foreign-entity",
    ];
    cli(binary, data, &add).await?;
    let key = AppKey::from_seed("", "", rand::random());
    let public_key = key.public_key();
    let app = [
        "app",
        "add",
        "--user",
        user,
        "--public-key",
        &public_key,
        "--full-access",
        "--json",
    ];
    let added: Value = serde_json::from_str(&cli(binary, data, &app).await?)
        .map_err(|error| format!("folio app add --json: {error}"))?;
    AppKey::new(
        &text(&added, "app_id")?,
        &text(&added, "authorization_id")?,
        &key.private_key(),
    )
}

// ---------------------------------------------------------------------------
// Writes

/// What Alice writes.
#[derive(Clone)]
enum Kind {
    /// A record of her private type, `permissions: {}`: nobody notified.
    Private { ty: Value },
    /// A message in the conversation, read by Alice and Bob.
    Message {
        ty: Value,
        conversation: Value,
        read: Value,
    },
}

impl Kind {
    /// A create body with its own `id` and `created_at`, so that sending
    /// it again is an idempotent replay.
    fn body(&self, seq: u64, text_bytes: usize) -> (String, Value) {
        let id = record_id();
        let created_at = record_date(now_ms());
        let text = filler(seq, text_bytes);
        let body = match self {
            Kind::Private { ty } => json!({
                "id": id,
                "created_at": created_at,
                "type": ty,
                "permissions": {},
                "content": {"text": text},
            }),
            Kind::Message {
                ty,
                conversation,
                read,
            } => json!({
                "id": id,
                "created_at": created_at,
                "type": ty,
                "permissions": {"read": read},
                "content": {"conversation": conversation, "text": text},
            }),
        };
        (id, body)
    }
}

/// `bytes` of text (at least 1, at most the message type's 4,096) that
/// differ from one record to the next.
fn filler(seq: u64, bytes: usize) -> String {
    let bytes = bytes.clamp(1, 4096);
    let mut text = format!("Message {seq}. ");
    while text.len() < bytes {
        text.push_str("The quick brown fox jumps over the lazy dog. ");
    }
    text.truncate(bytes);
    text
}

/// Which part of the run a write belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Private,
    Messages,
}

/// One record Alice was asked to write.
struct Sent {
    phase: Phase,
    /// When Alice's server answered 200, and the version hash it answered.
    acked: Option<(Instant, String)>,
    /// When its first event arrived on Bob's stream, and its hash.
    seen: Option<(Instant, String)>,
    /// Events for it on Bob's stream.
    events: u32,
}

/// Every write, its answer and its event on Bob's stream.
#[derive(Default)]
struct Tracker {
    sent: Mutex<HashMap<String, Sent>>,
}

impl Tracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Sent>> {
        self.sent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn register(&self, id: &str, phase: Phase) {
        self.lock().insert(
            id.to_owned(),
            Sent {
                phase,
                acked: None,
                seen: None,
                events: 0,
            },
        );
    }

    fn ack(&self, id: &str, at: Instant, hash: String) {
        if let Some(sent) = self.lock().get_mut(id) {
            sent.acked = Some((at, hash));
        }
    }

    /// An event for `id` on Bob's stream; only those of the first version
    /// seen count (the soak's actions edit and delete some messages later).
    fn seen(&self, id: &str, at: Instant, hash: String) {
        if let Some(sent) = self.lock().get_mut(id) {
            match &sent.seen {
                None => {
                    sent.events += 1;
                    sent.seen = Some((at, hash));
                }
                Some((_, first)) if *first == hash => sent.events += 1,
                Some(_) => {}
            }
        }
    }

    /// Acknowledged writes of `phase`, and how many of them Bob's stream
    /// has shown.
    fn progress(&self, phase: Phase) -> (u64, u64) {
        let sent = self.lock();
        let mut acked = 0;
        let mut seen = 0;
        for entry in sent.values().filter(|entry| entry.phase == phase) {
            if entry.acked.is_some() {
                acked += 1;
                if entry.seen.is_some() {
                    seen += 1;
                }
            }
        }
        (acked, seen)
    }

    /// `(id, hash)` of every acknowledged write of `phase` that Bob's
    /// stream has shown.
    fn seen_by_bob(&self, phase: Phase) -> Vec<(String, String)> {
        self.lock()
            .iter()
            .filter(|(_, entry)| entry.phase == phase && entry.seen.is_some())
            .filter_map(|(id, entry)| Some((id.clone(), entry.acked.as_ref()?.1.clone())))
            .collect()
    }

    /// `(id, hash)` of every acknowledged write of `phase`.
    fn acknowledged(&self, phase: Phase) -> Vec<(String, String)> {
        self.lock()
            .iter()
            .filter(|(_, entry)| entry.phase == phase)
            .filter_map(|(id, entry)| Some((id.clone(), entry.acked.as_ref()?.1.clone())))
            .collect()
    }

    /// The deliveries of `phase` as Bob's stream showed them.
    fn delivery(&self, phase: Phase, stream: &StreamStats) -> Delivery {
        let sent = self.lock();
        let mut delays = latency_histogram();
        let mut delivery = Delivery::default();
        for entry in sent.values().filter(|entry| entry.phase == phase) {
            let Some((acked, hash)) = &entry.acked else {
                continue;
            };
            delivery.sent += 1;
            let Some((seen, seen_hash)) = &entry.seen else {
                continue;
            };
            delivery.delivered += 1;
            delivery.duplicate_events += u64::from(entry.events.saturating_sub(1));
            if seen_hash != hash {
                delivery.hash_mismatches += 1;
            }
            if seen < acked {
                delivery.seen_before_answer += 1;
            }
            let micros = seen.saturating_duration_since(*acked).as_micros();
            let _ = delays.record(u64::try_from(micros).unwrap_or(u64::MAX).max(1));
        }
        delivery.missing = delivery.sent - delivery.delivered;
        let ms = |micros: u64| micros as f64 / 1000.0;
        if !delays.is_empty() {
            delivery.p50_ms = ms(delays.value_at_quantile(0.50));
            delivery.p90_ms = ms(delays.value_at_quantile(0.90));
            delivery.p99_ms = ms(delays.value_at_quantile(0.99));
            delivery.max_ms = ms(delays.max());
        }
        delivery.stream_reconnects = stream.reconnects;
        delivery.stream_resets = stream.resets;
        delivery
    }
}

/// What [`drive`] saw.
struct Driven {
    due: u64,
    ok: u64,
    errors: u64,
    /// Writes that took more than one attempt (the soak tries again).
    retried: u64,
    first_error: Option<String>,
    /// From the first write to the last answer.
    elapsed: Duration,
    /// From a write's first attempt to its 200, microseconds.
    latency: Histogram<u64>,
}

impl Driven {
    fn per_second(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }
}

/// Alice's app writes `kind` at `settings.rate` for `duration`: write `n`
/// is due `n / rate` seconds after the first (a tokio interval), each its
/// own task, at most `settings.concurrency` in flight. With `retry`, a
/// write that fails is sent again, the same body, until it is answered
/// 200 or [`WRITE_RETRY_FOR`] has passed.
async fn drive(
    client: &Client,
    kind: &Kind,
    phase: Phase,
    settings: &Settings,
    duration: Duration,
    retry: bool,
    tracker: &Arc<Tracker>,
) -> Driven {
    let due = (settings.rate * duration.as_secs_f64()).round().max(1.0) as u64;
    let period = Duration::from_secs_f64(1.0 / settings.rate.max(0.001));
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let permits = Arc::new(Semaphore::new(settings.concurrency.max(1)));
    let results = Arc::new(Mutex::new(Driven {
        due,
        ok: 0,
        errors: 0,
        retried: 0,
        first_error: None,
        elapsed: Duration::ZERO,
        latency: latency_histogram(),
    }));
    let url = client.url("/records");
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(due as usize);
    for seq in 0..due {
        interval.tick().await;
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (id, body) = kind.body(seq, settings.text_bytes);
        tracker.register(&id, phase);
        let (client, url, tracker, results) = (
            client.clone(),
            url.clone(),
            tracker.clone(),
            results.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let outcome = match url {
                Ok(url) => write(&client, url, &body, retry).await,
                Err(error) => Err(error),
            };
            let answered = Instant::now();
            let mut driven = lock(&results);
            match outcome {
                Ok((hash, took, attempts)) => {
                    tracker.ack(&id, answered, hash);
                    driven.ok += 1;
                    if attempts > 1 {
                        driven.retried += 1;
                    }
                    let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
                    let _ = driven.latency.record(micros.max(1));
                }
                Err(error) => {
                    driven.errors += 1;
                    driven.first_error.get_or_insert(error);
                }
            }
            drop(permit);
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let mut driven = lock(&results);
    driven.elapsed = start.elapsed();
    Driven {
        latency: std::mem::replace(&mut driven.latency, latency_histogram()),
        first_error: driven.first_error.take(),
        ..*driven
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One create, sent again on failure when `retry`: the version hash
/// answered, how long it took from the first attempt, and the attempts.
async fn write(
    client: &Client,
    url: Url,
    body: &Value,
    retry: bool,
) -> Result<(String, Duration, u32), String> {
    let start = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let call = Call::post(url.clone()).json(body).signed(&client.key);
        let error = match client.http.send(&call).await {
            Ok(response) if response.status == 200 => {
                let answer = response.json()?;
                let hash = answer["record"]["version"]["hash"]
                    .as_str()
                    .ok_or_else(|| format!("a create's answer has no hash: {}", answer))?;
                return Ok((hash.to_owned(), start.elapsed(), attempts));
            }
            // A refusal of the body is final; a 429 was already retried by
            // the client, and a 5xx may pass.
            Ok(response) if response.status < 500 && response.status != 429 => {
                return Err(format!(
                    "a create answered {} after {attempts} attempts: {}",
                    response.status,
                    response.excerpt()
                ));
            }
            Ok(response) => format!(
                "a create answered {}: {}",
                response.status,
                response.excerpt()
            ),
            Err(error) => error,
        };
        if !retry || start.elapsed() > WRITE_RETRY_FOR {
            return Err(format!("{error} (after {attempts} attempts)"));
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

// ---------------------------------------------------------------------------
// Bob's event stream

/// How Bob's stream fared.
#[derive(Debug, Clone, Copy, Default)]
struct StreamStats {
    /// Times it broke and was opened again (with `Last-Event-Id`).
    reconnects: u64,
    /// Times the server answered `too_many_events` to `Last-Event-Id`,
    /// and the stream was opened again from now (the final checks list
    /// what it did not show).
    resets: u64,
}

/// Bob's app holds an event stream open on Bob's server until `stop`,
/// opening it again with `Last-Event-Id` when it breaks; every record event
/// for a record of Alice's goes to `tracker`.
async fn listen(
    bob: Client,
    tracker: Arc<Tracker>,
    mut stop: watch::Receiver<bool>,
) -> StreamStats {
    let mut stats = StreamStats::default();
    let mut last_id: Option<String> = None;
    let mut opened_once = false;
    while !*stop.borrow() {
        let Ok(url) = bob.url("/events") else {
            return stats;
        };
        let mut call = Call::get(url);
        if let Some(id) = &last_id {
            call = call.header("last-event-id", id);
        }
        let call = call.signed(&bob.key);
        let response = tokio::select! {
            _ = stop.changed() => return stats,
            response = bob.http.open(&call) => response,
        };
        let mut stream = match response {
            Ok(response) if response.status() == 200 => EventStream::new(response),
            Ok(response) => {
                let status = response.status().as_u16();
                let body = read_response(response)
                    .await
                    .map(|r| r.excerpt())
                    .unwrap_or_default();
                if status == 400 && body.contains("too_many_events") {
                    stats.resets += 1;
                    last_id = None;
                } else {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                continue;
            }
            Err(_) => {
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        if opened_once {
            stats.reconnects += 1;
        }
        opened_once = true;
        loop {
            let event = tokio::select! {
                _ = stop.changed() => return stats,
                event = stream.next_event(Duration::from_secs(1)) => event,
            };
            match event {
                Ok(Some(event)) => {
                    let at = Instant::now();
                    if let Some(id) = &event.id {
                        last_id = Some(id.clone());
                    }
                    if !event.is_record() {
                        continue;
                    }
                    let Ok(record) = serde_json::from_str::<Value>(&event.data) else {
                        continue;
                    };
                    if record["author"]["entity"] != ALICE_ENTITY {
                        continue;
                    }
                    if let (Some(id), Some(hash)) =
                        (record["id"].as_str(), record["version"]["hash"].as_str())
                    {
                        tracker.seen(id, at, hash.to_owned());
                    }
                }
                Ok(None) => {
                    if *stop.borrow() {
                        return stats;
                    }
                }
                Err(_) => break,
            }
        }
    }
    stats
}

/// Waits until Bob's stream has shown every acknowledged write of `phase`,
/// or `limit` has passed; whether it did.
async fn wait_seen(tracker: &Tracker, phase: Phase, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let (acked, seen) = tracker.progress(phase);
        if seen >= acked {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------
// Results

/// Deliveries as Bob's event stream showed them: from Alice's server's
/// answer to the event's arrival, both seen by this process.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Delivery {
    /// Messages Alice's server acknowledged.
    pub sent: u64,
    /// Of those, the ones whose event arrived on Bob's stream.
    pub delivered: u64,
    pub missing: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Events after the first for one message.
    pub duplicate_events: u64,
    /// Events whose version hash was not the one Alice answered.
    pub hash_mismatches: u64,
    /// Events that arrived before this process read Alice's answer
    /// (counted as a delay of 0).
    pub seen_before_answer: u64,
    pub stream_reconnects: u64,
    pub stream_resets: u64,
}

impl Delivery {
    fn line(&self) -> String {
        format!(
            "sent {}, delivered {}, missing {}; delay p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            self.sent,
            self.delivered,
            self.missing,
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.max_ms
        )
    }
}

/// One phase of the measurement.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub phase: String,
    pub writes_due: u64,
    pub writes: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Writes answered a second, from the first write to the last answer.
    pub per_second: f64,
    pub create_p50_ms: f64,
    pub create_p99_ms: f64,
    /// Between the CPU samples: the writes, the deliveries (phase B) and
    /// a second of settling.
    pub window_seconds: f64,
    pub alice_cpu_ms: f64,
    pub alice_cpu_ms_per_write: f64,
    pub bob_cpu_ms: f64,
    pub alice_rss_mib: f64,
    pub bob_rss_mib: f64,
}

/// `folio-load federation`'s measurement.
#[derive(Debug, Clone, Serialize)]
pub struct MeasureResult {
    pub mode: &'static str,
    pub folio: String,
    pub rate: f64,
    pub seconds: f64,
    pub text_bytes: usize,
    pub concurrency: usize,
    pub phases: Vec<PhaseResult>,
    pub delivery: Delivery,
    /// (Alice's CPU in B − in A) / messages acknowledged in B.
    pub sender_cpu_ms_per_delivery: f64,
    /// Bob's CPU in B / messages delivered.
    pub receiver_cpu_ms_per_message: f64,
}

impl MeasureResult {
    /// Whether every write was answered and every message delivered.
    pub fn clean(&self) -> Result<(), String> {
        if let Some(phase) = self.phases.iter().find(|phase| phase.errors > 0) {
            return Err(format!(
                "{}: {} writes failed; the first: {}",
                phase.phase,
                phase.errors,
                phase.first_error.as_deref().unwrap_or("none")
            ));
        }
        if self.delivery.missing > 0 {
            return Err(format!(
                "{} of {} messages never reached Bob's event stream",
                self.delivery.missing, self.delivery.sent
            ));
        }
        Ok(())
    }

    pub fn print(&self) {
        println!(
            "federation: Alice writes {}/s for {} s per phase, {} bytes of text ({})",
            self.rate, self.seconds, self.text_bytes, self.folio
        );
        println!(
            "{:<20} {:>7} {:>6} {:>8} {:>8} {:>8} {:>9} {:>9} {:>10} {:>8}",
            "phase",
            "writes",
            "errors",
            "write/s",
            "p50_ms",
            "p99_ms",
            "window_s",
            "alice_ms",
            "ms/write",
            "bob_ms"
        );
        for phase in &self.phases {
            println!(
                "{:<20} {:>7} {:>6} {:>8.1} {:>8.2} {:>8.2} {:>9.1} {:>9.0} {:>10.3} {:>8.0}",
                phase.phase,
                phase.writes,
                phase.errors,
                phase.per_second,
                phase.create_p50_ms,
                phase.create_p99_ms,
                phase.window_seconds,
                phase.alice_cpu_ms,
                phase.alice_cpu_ms_per_write,
                phase.bob_cpu_ms
            );
        }
        println!("deliveries to Bob's event stream: {}", self.delivery.line());
        if self.delivery.duplicate_events + self.delivery.hash_mismatches > 0 {
            println!(
                "  {} duplicate events, {} events with another hash",
                self.delivery.duplicate_events, self.delivery.hash_mismatches
            );
        }
        println!(
            "sender's CPU per delivery, (B - A) / messages: {:.3} ms",
            self.sender_cpu_ms_per_delivery
        );
        println!(
            "Bob's CPU per received message: {:.3} ms",
            self.receiver_cpu_ms_per_message
        );
    }
}

// ---------------------------------------------------------------------------
// Measure

/// Phase A, private records, then phase B, messages to Bob, each at
/// `settings.rate` for `settings.duration`, with Alice's and Bob's CPU
/// sampled around each.
pub async fn measure(settings: &Settings) -> Result<MeasureResult, String> {
    let pair = Pair::start(settings, false, 0).await?;
    let tracker = Arc::new(Tracker::default());
    let (stop, stopped) = watch::channel(false);
    let listener = tokio::spawn(listen(pair.to_bob.clone(), tracker.clone(), stopped));
    // The stream is open before anything is written.
    tokio::time::sleep(Duration::from_millis(500)).await;

    if !settings.warmup.is_zero() {
        for kind in [&pair.private, &pair.message] {
            let warm = drive(
                &pair.to_alice,
                kind,
                Phase::Warmup,
                settings,
                settings.warmup,
                false,
                &tracker,
            )
            .await;
            if warm.errors > 0 {
                return Err(format!(
                    "warm-up: {} writes failed; the first: {}",
                    warm.errors,
                    warm.first_error.unwrap_or_default()
                ));
            }
        }
        wait_seen(&tracker, Phase::Warmup, DELIVERY_WAIT).await;
        tokio::time::sleep(SETTLE).await;
    }

    let mut phases = Vec::new();
    for (name, kind, phase) in [
        ("A private records", &pair.private, Phase::Private),
        ("B messages to Bob", &pair.message, Phase::Messages),
    ] {
        eprintln!("federation: {name}");
        let window = Instant::now();
        let (alice_before, bob_before) = (pair.alice.cpu(), pair.bob.cpu());
        let driven = drive(
            &pair.to_alice,
            kind,
            phase,
            settings,
            settings.duration,
            false,
            &tracker,
        )
        .await;
        if phase == Phase::Messages && !wait_seen(&tracker, phase, DELIVERY_WAIT).await {
            eprintln!("federation: some messages had not reached Bob after 60 s");
        }
        tokio::time::sleep(SETTLE).await;
        let alice_cpu = pair.alice.cpu().saturating_sub(alice_before);
        let bob_cpu = pair.bob.cpu().saturating_sub(bob_before);
        let ms = |micros: u64| micros as f64 / 1000.0;
        let (p50, p99) = match driven.latency.is_empty() {
            true => (0.0, 0.0),
            false => (
                ms(driven.latency.value_at_quantile(0.50)),
                ms(driven.latency.value_at_quantile(0.99)),
            ),
        };
        let alice_ms = alice_cpu.as_secs_f64() * 1000.0;
        phases.push(PhaseResult {
            phase: name.to_owned(),
            writes_due: driven.due,
            writes: driven.ok,
            errors: driven.errors,
            first_error: driven.first_error.clone(),
            per_second: driven.per_second(),
            create_p50_ms: p50,
            create_p99_ms: p99,
            window_seconds: window.elapsed().as_secs_f64(),
            alice_cpu_ms: alice_ms,
            alice_cpu_ms_per_write: alice_ms / driven.ok.max(1) as f64,
            bob_cpu_ms: bob_cpu.as_secs_f64() * 1000.0,
            alice_rss_mib: pair.alice.rss_mib(),
            bob_rss_mib: pair.bob.rss_mib(),
        });
    }
    let _ = stop.send(true);
    let stream = listener.await.unwrap_or_default();
    let delivery = tracker.delivery(Phase::Messages, &stream);
    pair.stop().await;

    let (a, b) = (&phases[0], &phases[1]);
    Ok(MeasureResult {
        mode: "measure",
        folio: settings.folio.display().to_string(),
        rate: settings.rate,
        seconds: settings.duration.as_secs_f64(),
        text_bytes: settings.text_bytes,
        concurrency: settings.concurrency,
        sender_cpu_ms_per_delivery: (b.alice_cpu_ms - a.alice_cpu_ms) / b.writes.max(1) as f64,
        receiver_cpu_ms_per_message: b.bob_cpu_ms / delivery.delivered.max(1) as f64,
        phases,
        delivery,
    })
}

// ---------------------------------------------------------------------------
// Soak

/// The faults of the soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// (a) SIGKILL Alice's server and start it again at once.
    KillAlice,
    /// (b) SIGKILL Bob's server, keep it down, start it again; meanwhile
    /// Alice names one of its users for the first time.
    BobDown,
    /// (c) Nothing: a quiet period.
    Quiet,
    /// (d) Alice's server moves: its base URL becomes
    /// `https://moved-a.test` (same port, same data), and `a.test` no
    /// longer answers anywhere, as in host-native's
    /// `a_moved_server_is_found_again`: both servers are stopped, and
    /// started again with `a.test` resolved to a port nobody listens on.
    MoveAlice,
}

/// The `n`th fault (from 1): Bob's server down first (with a first
/// contact), then Alice's move, then in turn Alice's server killed, a
/// quiet period and Bob's server down again.
fn nth_fault(n: u32) -> Fault {
    match n {
        0 | 1 => Fault::BobDown,
        2 => Fault::MoveAlice,
        n => [Fault::KillAlice, Fault::Quiet, Fault::BobDown][(n as usize - 3) % 3],
    }
}

/// The faults due in a soak of `duration` with one every `every`.
fn schedule(duration: Duration, every: Duration) -> Vec<(Duration, Fault)> {
    if every.is_zero() {
        return Vec::new();
    }
    (1u32..)
        .map(|n| (every.mul_f64(f64::from(n)), nth_fault(n)))
        .take_while(|(due, _)| *due < duration)
        .collect()
}

/// One fault as it happened.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    /// Seconds after the first write.
    pub at_seconds: f64,
    pub fault: String,
    pub detail: String,
}

/// One final check of the soak.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

/// `folio-load federation --faults`'s result.
#[derive(Debug, Clone, Serialize)]
pub struct SoakResult {
    pub mode: &'static str,
    pub folio: String,
    pub rate: f64,
    pub seconds: f64,
    pub fault_every_seconds: f64,
    pub bob_down_seconds: f64,
    /// The actions' RNG's seed (`--seed`).
    pub seed: u64,
    pub outbox_first_retry_ms: u32,
    pub outbox_max_retry_ms: u32,
    pub writes_due: u64,
    pub writes: u64,
    pub write_errors: u64,
    /// Writes sent more than once (the same body: `id` and `created_at`).
    pub writes_retried: u64,
    pub faults: Vec<FaultRecord>,
    /// Action → outcome → times.
    pub actions: workload::ActionCounts,
    pub first_contacts: Vec<FirstContact>,
    /// From the last write's answer until both outboxes were empty and
    /// Bob's stream had shown every message.
    pub caught_up_seconds: Option<f64>,
    /// Records whose copies were compared, and "what was done: verdict" →
    /// records.
    pub records_checked: u64,
    pub verdicts: std::collections::BTreeMap<String, u64>,
    pub delivery: Delivery,
    pub checks: Vec<Check>,
    /// Where the servers' data and logs are.
    pub dir: String,
}

impl SoakResult {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|check| check.ok)
    }

    pub fn print(&self) {
        println!(
            "federation soak: Alice writes {}/s for {} s, a fault every {} s, Bob down {} s at a time, actions seeded {} ({})",
            self.rate,
            self.seconds,
            self.fault_every_seconds,
            self.bob_down_seconds,
            self.seed,
            self.folio
        );
        println!(
            "both servers run with --outbox-first-retry-ms {} --outbox-max-retry-ms {} (retries within seconds, not the default 30 s doubling to an hour)",
            self.outbox_first_retry_ms, self.outbox_max_retry_ms
        );
        println!("faults injected: {}", self.faults.len());
        for fault in &self.faults {
            println!(
                "  t={:>6.1} s  {:<10} {}",
                fault.at_seconds, fault.fault, fault.detail
            );
        }
        println!(
            "writes: {} due, {} acknowledged, {} failed, {} sent more than once (same id and created_at)",
            self.writes_due, self.writes, self.write_errors, self.writes_retried
        );
        println!("actions (outcome: times):");
        for (action, outcomes) in &self.actions {
            let outcomes: Vec<String> = outcomes
                .iter()
                .map(|(outcome, n)| format!("{outcome}: {n}"))
                .collect();
            println!("  {action}: {}", outcomes.join(", "));
        }
        for contact in &self.first_contacts {
            println!(
                "first contact with {} at t={:.1} s: first answer {}, {} answers 503 link_unreachable, {} unanswered (Alice's server down), {} attempts, written after {}{}",
                contact.entity,
                contact.at_seconds,
                contact.first_answer,
                contact.unreachable_answers,
                contact.unanswered,
                contact.attempts,
                contact
                    .created_after_seconds
                    .map_or("never".to_owned(), |s| format!("{s:.1} s")),
                contact
                    .error
                    .as_ref()
                    .map_or(String::new(), |e| format!("; {e}"))
            );
        }
        match self.caught_up_seconds {
            Some(seconds) => println!(
                "both outboxes empty and every message on Bob's stream {seconds:.1} s after the last write's answer"
            ),
            None => println!("the outboxes did not empty within 5 minutes"),
        }
        println!(
            "records compared on both sides: {} (what was done to each: verdict, records)",
            self.records_checked
        );
        for (verdict, n) in &self.verdicts {
            println!("  {verdict}: {n}");
        }
        println!("deliveries on Bob's event stream: {}", self.delivery.line());
        println!(
            "  stream reopened {} times with Last-Event-Id, {} times from now (too_many_events); {} duplicate events, {} with another hash",
            self.delivery.stream_reconnects,
            self.delivery.stream_resets,
            self.delivery.duplicate_events,
            self.delivery.hash_mismatches
        );
        println!("checks:");
        for check in &self.checks {
            println!(
                "  {:<6} {}: {}",
                if check.ok { "ok" } else { "FAILED" },
                check.check,
                check.detail
            );
        }
        println!("data and logs: {}", self.dir);
    }
}

/// What the faults' task hands back.
struct FaultsDone {
    alice: Server,
    bob: Server,
    done: Vec<FaultRecord>,
    first_contacts: Vec<tokio::task::JoinHandle<(FirstContact, Vec<workload::Tracked>)>>,
    failure: Option<String>,
}

/// Alice writes messages for `settings.duration`, and the seeded actions
/// of `workload` run beside them, as the faults happen in turn every
/// `settings.fault_every`; then, once both outboxes are empty, every record
/// written must be the same on both sides but for the intended differences
/// (`convergence`), Bob's listing of the conversation must show each live
/// message once, Bob's database must hold one event per version received,
/// and Bob's server must hold Alice's Entity record as it is after her move.
pub async fn soak(settings: &Settings) -> Result<SoakResult, String> {
    let (duration, every) = (settings.duration, settings.fault_every);
    let faults_due = schedule(duration, every);
    let bob_down = BOB_DOWN.min(every.mul_f64(2.0 / 3.0));
    let contacts_due = faults_due
        .iter()
        .filter(|(_, fault)| *fault == Fault::BobDown)
        .count();
    let pair = Pair::start(settings, true, contacts_due).await?;
    let Pair {
        alice,
        bob,
        to_alice,
        to_bob,
        contacts,
        message,
        conversation_id,
        published,
        ..
    } = pair;
    let dir = alice
        .data
        .parent()
        .map(|dir| dir.display().to_string())
        .unwrap_or_default();
    let alice_person = Person {
        entity: ALICE_ENTITY.to_owned(),
        client: to_alice.clone(),
    };
    let mut people = vec![
        alice_person.clone(),
        Person {
            entity: BOB_ENTITY.to_owned(),
            client: to_bob.clone(),
        },
    ];
    people.extend(contacts.iter().cloned());
    let tracker = Arc::new(Tracker::default());
    let (stop, stopped) = watch::channel(false);
    let listener = tokio::spawn(listen(to_bob.clone(), tracker.clone(), stopped));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The faults, on their own task; the servers come back with it.
    let start = Instant::now();
    let bob_up = Arc::new(AtomicBool::new(true));
    let contact_types = (
        published.conversation_type.clone(),
        published.message_type.clone(),
    );
    let faults = {
        let bob_up = bob_up.clone();
        tokio::spawn(async move {
            let mut task = FaultsDone {
                alice,
                bob,
                done: Vec::new(),
                first_contacts: Vec::new(),
                failure: None,
            };
            let mut contacts = contacts.into_iter().enumerate();
            for (due, fault) in faults_due {
                tokio::time::sleep_until((start + due).into()).await;
                let at_seconds = start.elapsed().as_secs_f64();
                eprintln!("federation: t={at_seconds:.1} s, fault {fault:?}");
                let outcome = match fault {
                    Fault::KillAlice => kill_alice(&mut task.alice).await,
                    Fault::BobDown => {
                        bob_up.store(false, Ordering::SeqCst);
                        task.bob.kill().await;
                        let mut detail = String::new();
                        if let Some((n, contact)) = contacts.next() {
                            detail = format!(
                                "; meanwhile Alice writes to {} for the first time",
                                contact.entity
                            );
                            task.first_contacts
                                .push(tokio::spawn(workload::first_contact(
                                    alice_person.clone(),
                                    contact,
                                    n + 2,
                                    contact_types.clone(),
                                    at_seconds,
                                )));
                        }
                        tokio::time::sleep(bob_down).await;
                        let started = task.bob.start().await;
                        bob_up.store(true, Ordering::SeqCst);
                        started.map(|took| {
                            format!(
                                "SIGKILL Bob's server, down {:.0} s, started again: listening after {:.2} s{detail}",
                                bob_down.as_secs_f64(),
                                took.as_secs_f64()
                            )
                        })
                    }
                    Fault::Quiet => Ok("nothing: a quiet period".to_owned()),
                    Fault::MoveAlice => {
                        bob_up.store(false, Ordering::SeqCst);
                        let moved = move_alice(&mut task.alice, &mut task.bob).await;
                        bob_up.store(true, Ordering::SeqCst);
                        moved
                    }
                };
                match outcome {
                    Ok(detail) => task.done.push(FaultRecord {
                        at_seconds,
                        fault: fault_name(fault).to_owned(),
                        detail,
                    }),
                    Err(error) => {
                        task.failure = Some(error);
                        break;
                    }
                }
            }
            task
        })
    };

    eprintln!(
        "federation: soak of {} s at {}/s, a fault every {} s, actions seeded {}",
        duration.as_secs_f64(),
        settings.rate,
        every.as_secs_f64(),
        settings.seed
    );
    let workload = Workload::new(
        settings.seed,
        people.clone(),
        published,
        tracker.clone(),
        bob_up,
    );
    let actions = tokio::spawn(workload.run(start + duration));
    let driven = drive(
        &to_alice,
        &message,
        Phase::Messages,
        settings,
        duration,
        true,
        &tracker,
    )
    .await;
    let last_answer = Instant::now();
    let FaultsDone {
        mut alice,
        mut bob,
        done: faults,
        first_contacts: contact_tasks,
        failure,
    } = faults
        .await
        .map_err(|error| format!("the faults' task: {error}"))?;
    if let Some(error) = failure {
        alice.kill().await;
        bob.kill().await;
        return Err(error);
    }
    let workload = actions
        .await
        .map_err(|error| format!("the actions' task: {error}"))?;
    let mut records = workload.records_with(&tracker.acknowledged(Phase::Messages));
    let mut first_contacts = Vec::new();
    for task in contact_tasks {
        let (contact, written) = task
            .await
            .map_err(|error| format!("a first contact's task: {error}"))?;
        first_contacts.push(contact);
        records.extend(written);
    }

    // Both outboxes must empty, and Bob's stream show every message.
    eprintln!("federation: waiting for both outboxes to empty");
    let deadline = last_answer + SOAK_DELIVERY_WAIT;
    let caught_up = loop {
        let (acked, seen) = tracker.progress(Phase::Messages);
        if seen >= acked
            && outbox_rows(&settings.folio, &alice.data).await? == 0
            && outbox_rows(&settings.folio, &bob.data).await? == 0
        {
            break Some(last_answer.elapsed());
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let _ = stop.send(true);
    let stream = listener.await.unwrap_or_default();
    let delivery = tracker.delivery(Phase::Messages, &stream);

    eprintln!(
        "federation: comparing {} records on both sides",
        records.len()
    );
    let mut checks = vec![
        Check {
            check: "every write acknowledged".to_owned(),
            ok: driven.errors == 0,
            detail: match &driven.first_error {
                None => format!("{} of {}", driven.ok, driven.due),
                Some(error) => format!("{} failed; the first: {error}", driven.errors),
            },
        },
        Check {
            check: "every action answered as it may be".to_owned(),
            ok: workload.failed == 0,
            detail: match workload.errors.is_empty() {
                true => format!(
                    "{} actions",
                    workload
                        .counts
                        .values()
                        .flat_map(|o| o.values())
                        .sum::<u64>()
                ),
                false => format!("{} failed: {}", workload.failed, workload.errors.join("; ")),
            },
        },
        Check {
            check: "first contact with a server that is down: 503 link_unreachable, then written"
                .to_owned(),
            ok: first_contacts.iter().all(FirstContact::ok),
            detail: first_contacts
                .iter()
                .map(|c| match c.created_after_seconds {
                    Some(seconds) => format!(
                        "{}: first answer {}, written after {seconds:.1} s",
                        c.entity, c.first_answer
                    ),
                    None => format!(
                        "{}: first answer {}, never written: {}",
                        c.entity,
                        c.first_answer,
                        c.error.as_deref().unwrap_or("?")
                    ),
                })
                .collect::<Vec<_>>()
                .join("; "),
        },
    ];
    let judged = convergence::judge_all(&people, &records, &conversation_id).await;
    let (verdicts, bobs_conversation) = match judged {
        Ok(judged) => {
            checks.push(Check {
                check: "every record the same on both sides, but the intended differences"
                    .to_owned(),
                ok: judged.diverged == 0,
                detail: match judged.diverged {
                    0 => format!("{} records", records.len()),
                    n => format!(
                        "{n} of {} diverged: {}",
                        records.len(),
                        judged.divergences.join("; ")
                    ),
                },
            });
            (judged.verdicts, judged.bobs_conversation)
        }
        Err(error) => {
            checks.push(Check {
                check: "every record the same on both sides, but the intended differences"
                    .to_owned(),
                ok: false,
                detail: format!("reading the copies: {error}"),
            });
            Default::default()
        }
    };
    checks.push(match list_conversation(&to_bob, &conversation_id).await {
        Ok(listed) => once_with_hash(&bobs_conversation, &listed),
        Err(error) => Check {
            check: "Bob's listing of the conversation: every live message once, same hash"
                .to_owned(),
            ok: false,
            detail: format!("listing Bob's records: {error}"),
        },
    });
    for (name, server) in [("Alice", &alice), ("Bob", &bob)] {
        let outbox = outbox_empty(&settings.folio, &server.data).await;
        checks.push(Check {
            check: format!("{name}'s outbox is empty (nothing pending, nothing given up)"),
            ok: outbox.is_ok(),
            detail: outbox
                .err()
                .unwrap_or_else(|| "folio outbox list --json prints nothing".to_owned()),
        });
    }
    checks.push(events_per_version(&bob.data).await);
    if faults
        .iter()
        .any(|fault| fault.fault == fault_name(Fault::MoveAlice))
    {
        checks.push(entity_followed(&to_bob).await);
    }
    alice.kill().await;
    bob.kill().await;

    Ok(SoakResult {
        mode: "soak",
        folio: settings.folio.display().to_string(),
        rate: settings.rate,
        seconds: settings.duration.as_secs_f64(),
        fault_every_seconds: settings.fault_every.as_secs_f64(),
        bob_down_seconds: bob_down.as_secs_f64(),
        seed: settings.seed,
        outbox_first_retry_ms: SOAK_FIRST_RETRY_MS,
        outbox_max_retry_ms: SOAK_MAX_RETRY_MS,
        writes_due: driven.due,
        writes: driven.ok,
        write_errors: driven.errors,
        writes_retried: driven.retried,
        faults,
        actions: workload.counts,
        first_contacts,
        caught_up_seconds: caught_up.map(|took| took.as_secs_f64()),
        records_checked: records.len() as u64,
        verdicts,
        delivery,
        checks,
        dir,
    })
}

fn fault_name(fault: Fault) -> &'static str {
    match fault {
        Fault::KillAlice => "a",
        Fault::BobDown => "b",
        Fault::Quiet => "c",
        Fault::MoveAlice => "d",
    }
}

/// Fault (a).
async fn kill_alice(alice: &mut Server) -> Result<String, String> {
    alice.kill().await;
    let took = alice.start().await?;
    Ok(format!(
        "SIGKILL Alice's server, started again at once: listening after {:.2} s",
        took.as_secs_f64()
    ))
}

/// Fault (d): both servers stopped; Alice's started again with her new
/// base URL (her server rewrites her Entity record at start), Bob's with
/// `a.test` resolved to a port nobody listens on, so that his server
/// finds her only by discovering her again.
async fn move_alice(alice: &mut Server, bob: &mut Server) -> Result<String, String> {
    let dead = free_port()?;
    alice.kill().await;
    bob.kill().await;
    for server in [&mut *alice, &mut *bob] {
        for arg in server.args.iter_mut() {
            if arg.starts_with(&format!("{OLD_HOST}=")) {
                *arg = format!("{OLD_HOST}=127.0.0.1:{dead}");
            }
        }
    }
    let base_url = alice
        .args
        .iter()
        .position(|arg| arg == "--base-url")
        .ok_or("Alice's server has no --base-url")?
        + 1;
    alice.args[base_url] = format!("https://{MOVED_HOST}");
    let bob_took = bob.start().await?;
    let alice_took = alice.start().await?;
    Ok(format!(
        "Alice's server moves to https://{MOVED_HOST} ({OLD_HOST} dead): both stopped, Bob's listening again after {:.2} s, Alice's after {:.2} s",
        bob_took.as_secs_f64(),
        alice_took.as_secs_f64()
    ))
}

/// Bob's server holds Alice's Entity record as it is since her move.
async fn entity_followed(bob: &Client) -> Check {
    let check = format!("Bob's server follows Alice's move (her Entity record names {MOVED_HOST})");
    let found = async {
        let entity_type = bob.builtin_type("entity").await?;
        let mut url = bob.url("/records")?;
        url.query_pairs_mut().append_pair(
            "filter",
            &format!(
                "$['type']={}+{}",
                text(&entity_type, "entity")?,
                text(&entity_type, "record_id")?
            ),
        );
        let page = bob.get(url).await?;
        page["records"]
            .as_array()
            .and_then(|records| {
                records
                    .iter()
                    .find(|record| record["author"]["entity"] == ALICE_ENTITY)
            })
            .cloned()
            .ok_or_else(|| "Bob's server holds no Entity record of Alice's".to_owned())
    }
    .await;
    match found {
        Ok(record) => Check {
            ok: record.to_string().contains(MOVED_HOST),
            detail: format!("version {}", record["version"]["hash"]),
            check,
        },
        Err(error) => Check {
            check,
            ok: false,
            detail: error,
        },
    }
}

/// Bob's records whose `conversation` links the conversation, every page
/// of 200: `(id, version hash)`, in the order listed.
async fn list_conversation(
    bob: &Client,
    conversation_id: &str,
) -> Result<Vec<(String, String)>, String> {
    let mut url = bob.url("/records")?;
    url.query_pairs_mut()
        .append_pair(
            "filter",
            &format!("$['content']['conversation']={ALICE_ENTITY}+{conversation_id}"),
        )
        .append_pair("page_size", "200");
    let mut records = Vec::new();
    loop {
        let page = bob.get(url).await?;
        for record in page["records"].as_array().ok_or("a page without records")? {
            records.push((text(record, "id")?, {
                record["version"]["hash"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            }));
        }
        match page["next_page"].as_str() {
            Some(next) => url = bob.url(&format!("/records{next}"))?,
            None => return Ok(records),
        }
    }
}

/// Bob's listing of the conversation shows every live message of it in
/// his store (`expected`: id → hash) once, with that hash, and nothing
/// else.
fn once_with_hash(expected: &HashMap<String, String>, listed: &[(String, String)]) -> Check {
    let mut times: HashMap<&str, (u32, &str)> = HashMap::new();
    for (id, hash) in listed {
        let entry = times.entry(id.as_str()).or_insert((0, hash.as_str()));
        entry.0 += 1;
    }
    let missing: Vec<&str> = expected
        .keys()
        .map(String::as_str)
        .filter(|id| !times.contains_key(id))
        .collect();
    let twice: Vec<&str> = times
        .iter()
        .filter(|(_, (count, _))| *count > 1)
        .map(|(id, _)| *id)
        .collect();
    let other_hash: Vec<&str> = expected
        .iter()
        .filter(|(id, hash)| {
            times
                .get(id.as_str())
                .is_some_and(|(_, listed)| listed != hash)
        })
        .map(|(id, _)| id.as_str())
        .collect();
    let unexpected: Vec<&str> = times
        .keys()
        .filter(|id| !expected.contains_key(**id))
        .copied()
        .collect();
    let sample = |ids: &[&str]| ids.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    let mut detail = format!(
        "{} live in Bob's store, {} listed",
        expected.len(),
        listed.len()
    );
    for (what, ids) in [
        ("missing", &missing),
        ("listed more than once", &twice),
        ("with another hash", &other_hash),
        ("listed but not live there", &unexpected),
    ] {
        if !ids.is_empty() {
            detail.push_str(&format!("; {} {what} ({})", ids.len(), sample(ids)));
        }
    }
    Check {
        check: "Bob's listing of the conversation: every live message once, same hash".to_owned(),
        ok: missing.is_empty()
            && twice.is_empty()
            && other_hash.is_empty()
            && unexpected.is_empty(),
        detail,
    }
}

/// The rows `folio outbox list --json` prints for the server on `data`:
/// pending and given up.
async fn outbox_rows(binary: &Path, data: &Path) -> Result<usize, String> {
    let out = cli(binary, data, &["outbox", "list", "--json"]).await?;
    Ok(out.lines().filter(|line| !line.trim().is_empty()).count())
}

/// `folio outbox list --json` on the server's data prints nothing, within
/// 30 s (the last accepted deliveries' rows are deleted after their answer).
async fn outbox_empty(binary: &Path, data: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cli(binary, data, &["outbox", "list", "--json"]).await?;
        let rows = out.lines().filter(|line| !line.trim().is_empty()).count();
        if rows == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            let first = out.lines().next().unwrap_or_default();
            return Err(format!("{rows} rows left; the first: {first}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Bob's database holds one event per version of Alice's records it
/// received (read-only, beside the running server).
async fn events_per_version(data: &Path) -> Check {
    let path = data.join("folio.db");
    let counted = tokio::task::spawn_blocking(move || -> Result<(i64, i64), String> {
        let conn = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|error| format!("{}: {error}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(|error| error.to_string())?;
        let count = |sql: &str| -> Result<i64, String> {
            conn.query_row(sql, [], |row| row.get(0))
                .map_err(|error| format!("{sql}: {error}"))
        };
        Ok((
            count(
                "SELECT COUNT(*) FROM events e JOIN records r ON r.row = e.record_row \
                 WHERE r.author = 'alice.test'",
            )?,
            count("SELECT COUNT(*) FROM versions WHERE author = 'alice.test'")?,
        ))
    })
    .await
    .map_err(|error| error.to_string())
    .and_then(|counted| counted);
    let check = "Bob's database: one event per version of Alice's records".to_owned();
    match counted {
        Ok((events, versions)) => Check {
            check,
            ok: events == versions,
            detail: format!("{events} events, {versions} versions"),
        },
        Err(error) => Check {
            check,
            ok: false,
            detail: error,
        },
    }
}
