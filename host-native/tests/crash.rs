//! Crash safety: `folio serve` is killed with SIGKILL at random moments
//! under a concurrent write load, then restarted on the same data, round
//! after round.
//!
//! The load: writers creating records, writers uploading a blob and then
//! creating a record that links it, and writers updating the same few
//! records at once with `version.parent_hash` (409 version conflicts are
//! expected answers). After every restart:
//!
//! - every write answered 200 is there with the version hash it was
//!   answered with (an update: its version, inside an intact chain);
//! - every write cut by the kill is either wholly there or not at all;
//! - nothing the server refused is stored;
//! - `PRAGMA integrity_check` is `ok`, every earlier acknowledged write is
//!   still in the database, and every record's chain is whole;
//! - the blob directory holds a file for each `blobs` row, with the right
//!   size and SHA-256, no file that no row names, and no temporary upload
//!   file (`blobs/tmp`) left from before the restart.
//!
//! `FOLIO_CRASH_ROUNDS` sets the number of kills (20 by default, what CI
//! runs; `scripts/crash-soak` runs 1,000 in release mode). The seed of the
//! kill delays and of the load's choices is printed; `FOLIO_CRASH_SEED`
//! replays them (the server's timing still varies). The last line is a
//! summary; the test fails after it if any check found a defect.

mod support;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use folio_conformance::client::{Auth, Call, Http, Response, now_ms, sign_call};
use folio_conformance::signer::{AppKey, Layout};
use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::{App, Server, add_app, add_me, free_port, scratch};

/// Kills when `FOLIO_CRASH_ROUNDS` is not set.
const DEFAULT_ROUNDS: usize = 20;
/// Writers that create plain records.
const CREATORS: usize = 8;
/// Writers that upload a blob, then create a record linking it.
const BLOB_WRITERS: usize = 2;
/// Writers that update the round's hot records.
const UPDATERS: usize = 4;
/// Records created at the start of each round that the updaters share.
const HOT_RECORDS: usize = 3;
/// Uploaded blobs are 1 byte to this many.
const MAX_BLOB: usize = 48 * 1024;
/// How long the load runs before the kill, in milliseconds.
const KILL_AFTER_MS: std::ops::Range<u64> = 50..400;
/// Concurrent GETs when verifying.
const READERS: usize = 16;
/// Findings of each kind printed in full; the rest are only counted.
const PRINTED: usize = 20;
const SERVE_FLAGS: &[&str] = &["--write-rate", "off", "--read-rate", "off"];
const BLOB_TYPE: &str = "application/octet-stream";
const BLOB_NAME: &str = "blob.bin";

/// Nonces unique for the whole test (at most 10 characters): a counter, so
/// two requests can never collide in the server's replay guard.
static NONCES: AtomicU64 = AtomicU64::new(0);

fn nonce() -> String {
    format!("{:010x}", NONCES.fetch_add(1, Ordering::Relaxed))
}

/// The `n` each write puts in its content: unique for the whole test, so
/// a stored version tells which write made it.
static NS: AtomicI64 = AtomicI64::new(0);

fn next_n() -> i64 {
    NS.fetch_add(1, Ordering::Relaxed)
}

/// A signed-request client for one server process: requests are signed
/// just before they are sent (fresh `ts`, so never older than the server's
/// boot fence), and each boot gets new connections.
#[derive(Clone)]
struct Client {
    http: Http,
    key: Arc<AppKey>,
    base_url: String,
}

impl Client {
    fn new(server: &Server, app: &App) -> Client {
        let target = app.target(server);
        let key = app.key();
        Client {
            http: Http::new(&target).expect("an HTTP client"),
            key: Arc::new(key),
            base_url: server.base_url(),
        }
    }

    fn get(&self, path: &str) -> Call<'static> {
        Call::get(self.url(path).parse().expect("a URL"))
    }

    fn post(&self, path: &str, body: &Value) -> Call<'static> {
        Call::post(self.url(path).parse().expect("a URL")).json(body)
    }

    fn put(&self, path: &str, body: &Value) -> Call<'static> {
        Call::put(self.url(path).parse().expect("a URL")).json(body)
    }

    fn upload(&self, bytes: Vec<u8>) -> Call<'static> {
        Call::post(self.url("/blobs").parse().expect("a URL")).body(bytes, Some(BLOB_TYPE))
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/me{path}", self.base_url)
    }

    async fn send(&self, mut call: Call<'static>) -> Result<Response, String> {
        let authorization = sign_call(
            &call,
            &self.key,
            &[],
            Layout::WithAlgorithmLine,
            now_ms(),
            &nonce(),
        );
        call.auth = Auth::Header(authorization);
        self.http.send(&call).await
    }

    /// An answer while the server is up: a failure to get one fails the test.
    async fn answer(&self, call: Call<'static>) -> Response {
        let what = format!("{} {}", call.method, call.url);
        self.send(call)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    /// A JSON answer that must be 200.
    async fn ok(&self, call: Call<'static>) -> Value {
        let what = format!("{} {}", call.method, call.url);
        let response = self.answer(call).await;
        assert_eq!(response.status, 200, "{what}: {}", response.excerpt());
        response.json().expect("a JSON body")
    }

    /// Every record in the store, following `next_page`.
    async fn all_records(&self) -> Vec<Value> {
        self.pages("/records").await
    }

    /// Every item of a list, following `next_page`.
    async fn pages(&self, list: &str) -> Vec<Value> {
        let mut items = Vec::new();
        let mut path = format!("{list}?page_size=200");
        loop {
            let page = self.ok(self.get(&path)).await;
            items.extend(page["records"].as_array().expect("records").iter().cloned());
            match page["next_page"].as_str() {
                Some(next) => path = format!("{list}{next}"),
                None => return items,
            }
        }
    }
}

fn record_path(id: &str) -> String {
    format!("/records/localhost/{id}")
}

fn version_link(record: &Value) -> Value {
    json!({
        "entity": record["author"]["entity"],
        "record_id": record["id"],
        "version_hash": record["version"]["hash"],
    })
}

/// A version's hash, or "" when the JSON has none.
fn hash_of(record: &Value) -> String {
    text(&record["version"]["hash"])
}

/// A version's parent hash, or "" for a first version.
fn parent_of(record: &Value) -> String {
    text(&record["version"]["parent_hash"])
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A blob as uploaded: its SHA-256 and length.
#[derive(Clone, Debug)]
struct Blob {
    hash: String,
    size: u64,
}

impl Blob {
    /// The `blob_link` a record carries for it.
    fn link(&self) -> Value {
        json!({"hash": self.hash, "type": BLOB_TYPE, "name": BLOB_NAME, "size": self.size})
    }
}

/// A create: the id and `n` it sent, the blob it linked, and the version
/// hash it was answered with (`None`: no answer, the kill cut it).
#[derive(Clone, Debug)]
struct Create {
    id: String,
    n: i64,
    blob: Option<Blob>,
    hash: Option<String>,
}

/// An update of a hot record: the `n` and parent it sent, and the version
/// hash it was answered with (`None`: no answer).
#[derive(Clone, Debug)]
struct Update {
    id: String,
    n: i64,
    parent: String,
    hash: Option<String>,
}

/// A blob upload, answered 200 or not answered.
#[derive(Clone, Debug)]
struct Upload {
    blob: Blob,
    acked: bool,
}

/// What the writers of one round sent and were answered.
#[derive(Default)]
struct Load {
    creates: Vec<Create>,
    updates: Vec<Update>,
    uploads: Vec<Upload>,
    conflicts: usize,
    /// Answers other than 200 and the expected 409s.
    refused: Vec<String>,
}

impl Load {
    fn add(&mut self, other: Load) {
        self.creates.extend(other.creates);
        self.updates.extend(other.updates);
        self.uploads.extend(other.uploads);
        self.conflicts += other.conflicts;
        self.refused.extend(other.refused);
    }

    fn acked(&self) -> usize {
        self.creates.iter().filter(|c| c.hash.is_some()).count()
            + self.updates.iter().filter(|u| u.hash.is_some()).count()
            + self.uploads.iter().filter(|u| u.acked).count()
    }

    fn unknown(&self) -> usize {
        self.creates.len() + self.updates.len() + self.uploads.len() - self.acked()
    }
}

/// Sends a create; records it as acknowledged or unknown. `false` when the
/// request got no answer.
async fn create(client: &Client, ty: &Value, blob: Option<Blob>, load: &mut Load) -> bool {
    let id = hex::encode(rand::random::<[u8; 16]>());
    let n = next_n();
    let mut content = json!({"n": n});
    if let Some(blob) = &blob {
        content["file"] = blob.link();
    }
    let body = json!({"id": id, "type": ty, "content": content});
    let mut write = Create {
        id,
        n,
        blob,
        hash: None,
    };
    match client.send(client.post("/records", &body)).await {
        Ok(response) if response.status == 200 => {
            let answer = response.json().expect("a 200 answer is JSON");
            let record = &answer["record"];
            assert_eq!(
                record["id"],
                write.id.as_str(),
                "the answer names the record"
            );
            write.hash = Some(hash_of(record));
            load.creates.push(write);
            true
        }
        Ok(response) => {
            load.refused.push(format!(
                "create: {}: {}",
                response.status,
                response.excerpt()
            ));
            true
        }
        Err(_) => {
            load.creates.push(write);
            false
        }
    }
}

/// Creates plain records until stopped.
async fn creator(client: Client, ty: Value, stop: Arc<AtomicBool>) -> Load {
    let mut load = Load::default();
    while !stop.load(Ordering::Relaxed) {
        if !create(&client, &ty, None, &mut load).await {
            // Cut by the kill (or refused once the server is gone).
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    load
}

/// Uploads a blob of random bytes and, once it is answered, creates a
/// record linking it; until stopped.
async fn blob_writer(client: Client, ty: Value, stop: Arc<AtomicBool>, seed: u64) -> Load {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut load = Load::default();
    while !stop.load(Ordering::Relaxed) {
        let mut bytes = vec![0u8; rng.random_range(1..=MAX_BLOB)];
        rng.fill(&mut bytes[..]);
        let blob = Blob {
            hash: sha256(&bytes),
            size: bytes.len() as u64,
        };
        match client.send(client.upload(bytes)).await {
            Ok(response) if response.status == 200 => {
                let answer = response.json().expect("a 200 answer is JSON");
                if answer["hash"] != blob.hash.as_str() || answer["size"] != blob.size {
                    load.refused.push(format!(
                        "upload of {} ({} bytes) answered {answer}",
                        blob.hash, blob.size
                    ));
                    continue;
                }
                load.uploads.push(Upload {
                    blob: blob.clone(),
                    acked: true,
                });
                if !create(&client, &ty, Some(blob), &mut load).await {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            Ok(response) => load.refused.push(format!(
                "upload: {}: {}",
                response.status,
                response.excerpt()
            )),
            Err(_) => {
                load.uploads.push(Upload { blob, acked: false });
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    load
}

/// Updates the hot records with the parent it last heard of, until
/// stopped: a 409 version conflict is expected when another updater got
/// there first, and then the record is read again.
async fn updater(
    client: Client,
    latest: Arc<Mutex<HashMap<String, String>>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Load {
    let mut rng = StdRng::seed_from_u64(seed);
    let ids: Vec<String> = {
        let mut ids: Vec<String> = latest.lock().unwrap().keys().cloned().collect();
        ids.sort();
        ids
    };
    let mut load = Load::default();
    while !stop.load(Ordering::Relaxed) {
        let id = &ids[rng.random_range(0..ids.len())];
        let parent = latest.lock().unwrap()[id].clone();
        let n = next_n();
        let body = json!({"content": {"n": n}, "version": {"parent_hash": parent}});
        let mut write = Update {
            id: id.clone(),
            n,
            parent,
            hash: None,
        };
        match client.send(client.put(&record_path(id), &body)).await {
            Ok(response) if response.status == 200 => {
                let answer = response.json().expect("a 200 answer is JSON");
                let hash = hash_of(&answer["record"]);
                latest.lock().unwrap().insert(id.clone(), hash.clone());
                write.hash = Some(hash);
                load.updates.push(write);
            }
            Ok(response) if is_version_conflict(&response) => {
                load.conflicts += 1;
                if let Ok(response) = client.send(client.get(&record_path(id))).await
                    && response.status == 200
                {
                    let got = response.json().expect("a 200 answer is JSON");
                    latest
                        .lock()
                        .unwrap()
                        .insert(id.clone(), hash_of(&got["record"]));
                }
            }
            Ok(response) => load.refused.push(format!(
                "update: {}: {}",
                response.status,
                response.excerpt()
            )),
            Err(_) => {
                load.updates.push(write);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    load
}

/// A `record/409-version-conflict` answer.
fn is_version_conflict(response: &Response) -> bool {
    response.status == 409
        && response
            .json()
            .is_ok_and(|problem| text(&problem["type"]).ends_with("/record/409-version-conflict"))
}

/// What a check can find wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// An acknowledged write that is not there as it was answered.
    Lost,
    /// A write stored only in part, or a record whose chain is broken.
    Half,
    /// A version no acknowledged or unanswered write made (a refused write stored).
    Phantom,
    /// A blob file that no `blobs` row names.
    Orphaned,
    /// A temporary upload file still in `blobs/tmp` after the restart: the
    /// server did not collect it.
    Leftover,
    /// A `blobs` row without its file, or with a file of the wrong size or hash.
    Missing,
}

/// One thing found wrong: `key` names it, so that it is counted once
/// however many rounds see it again.
struct Finding {
    kind: Kind,
    key: String,
    detail: String,
}

/// What some checks saw.
#[derive(Default)]
struct Seen {
    findings: Vec<Finding>,
    /// Writes checked.
    checked: usize,
    /// Unanswered writes found wholly there, and found not there.
    present: usize,
    absent: usize,
}

impl Seen {
    fn find(&mut self, kind: Kind, key: impl Into<String>, detail: impl Into<String>) {
        self.findings.push(Finding {
            kind,
            key: key.into(),
            detail: detail.into(),
        });
    }

    fn add(&mut self, other: Seen) {
        self.findings.extend(other.findings);
        self.checked += other.checked;
        self.present += other.present;
        self.absent += other.absent;
    }
}

/// Downloads a record's blob; `None` when it is whole, else what is wrong.
async fn download_fault(client: &Client, id: &str, blob: &Blob) -> Option<String> {
    let path = format!("{}/blobs/{}/{BLOB_NAME}", record_path(id), blob.hash);
    let response = client.answer(client.get(&path)).await;
    if response.status != 200 {
        return Some(format!(
            "blob download {}: {}",
            response.status,
            response.excerpt()
        ));
    }
    let (size, hash) = (response.body.len() as u64, sha256(&response.body));
    (size != blob.size || hash != blob.hash).then(|| {
        format!(
            "blob download: {size} bytes with SHA-256 {hash}, linked as {} bytes {}",
            blob.size, blob.hash
        )
    })
}

/// A create after the restart: answered, it is there with its hash (and
/// its blob downloads whole); unanswered, it is wholly there or absent.
async fn check_create(client: Client, write: Create) -> Seen {
    let mut seen = Seen {
        checked: 1,
        ..Seen::default()
    };
    let id = &write.id;
    let response = client.answer(client.get(&record_path(id))).await;
    let kind = if write.hash.is_some() {
        Kind::Lost
    } else {
        Kind::Half
    };
    match (response.status, &write.hash) {
        (404, None) => {
            seen.absent += 1;
            return seen;
        }
        (200, _) => {}
        (status, _) => {
            seen.find(
                kind,
                id,
                format!("{id}: GET {status}: {}", response.excerpt()),
            );
            return seen;
        }
    }
    let answer = response.json().expect("JSON");
    let record = &answer["record"];
    let got = hash_of(record);
    if let Some(hash) = &write.hash
        && got != *hash
    {
        seen.find(kind, id, format!("{id}: acknowledged {hash}, now {got}"));
        return seen;
    }
    if write.hash.is_none() {
        let parent = parent_of(record);
        if record["content"]["n"] != write.n || !parent.is_empty() {
            seen.find(
                kind,
                id,
                format!(
                    "{id}: unanswered create of n={} stored as {record}",
                    write.n
                ),
            );
            return seen;
        }
    }
    if let Some(blob) = &write.blob {
        if record["content"]["file"] != blob.link() {
            seen.find(
                kind,
                id,
                format!(
                    "{id}: links {}, sent {}",
                    record["content"]["file"],
                    blob.link()
                ),
            );
            return seen;
        }
        if let Some(fault) = download_fault(&client, id, blob).await {
            seen.find(kind, id, format!("{id}: {fault}"));
            return seen;
        }
    }
    if write.hash.is_none() {
        seen.present += 1;
    }
    seen
}

/// A hot record after the restart: its versions form one chain from its
/// creation to the latest version; each acknowledged update is a version
/// of it with the parent it was sent; each unanswered update is there
/// with that parent or absent; no other version exists.
async fn check_hot(client: Client, created: Create, updates: Vec<Update>) -> Seen {
    let id = &created.id;
    let mut seen = Seen {
        checked: updates.len(),
        ..Seen::default()
    };
    let chain = client.pages(&format!("{}/versions", record_path(id))).await;
    let created_hash = created.hash.as_deref().unwrap_or_default();
    match chain.first() {
        Some(first) if hash_of(first) == created_hash && parent_of(first).is_empty() => {}
        first => seen.find(
            Kind::Half,
            format!("chain:{id}"),
            format!(
                "{id}: the chain starts with {:?}, not the acknowledged creation {created_hash}",
                first.map(hash_of)
            ),
        ),
    }
    for pair in chain.windows(2) {
        if parent_of(&pair[1]) != hash_of(&pair[0]) {
            seen.find(
                Kind::Half,
                format!("chain:{id}"),
                format!(
                    "{id}: version {} follows {} but names parent {:?}",
                    hash_of(&pair[1]),
                    hash_of(&pair[0]),
                    parent_of(&pair[1])
                ),
            );
        }
    }
    let latest = hash_of(&client.ok(client.get(&record_path(id))).await["record"]);
    let tip = chain.last().map(hash_of).unwrap_or_default();
    if latest != tip {
        seen.find(
            Kind::Half,
            format!("chain:{id}"),
            format!("{id}: the record's latest version is {latest}, the chain ends at {tip}"),
        );
    }

    let by_n: HashMap<i64, &Update> = updates.iter().map(|u| (u.n, u)).collect();
    let mut stored: HashMap<i64, String> = HashMap::new();
    for version in chain.iter().skip(1) {
        let hash = hash_of(version);
        let Some(n) = version["content"]["n"].as_i64() else {
            seen.find(
                Kind::Phantom,
                &hash,
                format!("{id}: version {hash} has no n"),
            );
            continue;
        };
        if stored.insert(n, hash.clone()).is_some() {
            seen.find(
                Kind::Half,
                &hash,
                format!("{id}: n={n} is stored twice ({hash})"),
            );
        }
        match by_n.get(&n) {
            None => seen.find(
                Kind::Phantom,
                &hash,
                format!(
                    "{id}: version {hash} (n={n}) was made by no write that was answered 200 \
                     or left unanswered"
                ),
            ),
            Some(update) if update.parent != parent_of(version) => seen.find(
                Kind::Half,
                &hash,
                format!(
                    "{id}: n={n} was sent with parent {}, stored with {:?}",
                    update.parent,
                    parent_of(version)
                ),
            ),
            Some(update) => {
                if let Some(acked) = &update.hash
                    && *acked != hash
                {
                    seen.find(
                        Kind::Lost,
                        acked,
                        format!("{id}: n={n} was acknowledged as {acked}, stored as {hash}"),
                    );
                }
            }
        }
    }
    for update in &updates {
        let Some(hash) = &update.hash else {
            if stored.contains_key(&update.n) {
                seen.present += 1;
            } else {
                seen.absent += 1;
            }
            continue;
        };
        let path = format!("{}/versions/{hash}", record_path(id));
        let response = client.answer(client.get(&path)).await;
        let version = (response.status == 200).then(|| response.json().expect("JSON"));
        let fault = match &version {
            None => Some(format!(
                "GET {path}: {} {}",
                response.status,
                response.excerpt()
            )),
            Some(got) if hash_of(&got["record"]) != *hash => {
                Some(format!("GET {path} answered {}", hash_of(&got["record"])))
            }
            Some(got) if parent_of(&got["record"]) != update.parent => Some(format!(
                "its parent is {:?}, sent {}",
                parent_of(&got["record"]),
                update.parent
            )),
            Some(_) if stored.get(&update.n) != Some(hash) => {
                Some("it is not in the record's chain".to_owned())
            }
            Some(_) => None,
        };
        if let Some(fault) = fault {
            seen.find(
                Kind::Lost,
                hash,
                format!("{id}: acknowledged update {hash}: {fault}"),
            );
        }
    }
    seen
}

/// Every acknowledged write so far, as the database must keep it.
#[derive(Default)]
struct History {
    /// Records never updated: id -> the acknowledged version hash.
    latest: HashMap<String, String>,
    /// Acknowledged versions of hot records: (id, hash, parent or "").
    versions: Vec<(String, String, String)>,
    /// Records that link a blob: (id, blob hash).
    linked: Vec<(String, String)>,
    /// Every upload sent: hash -> whether it was answered 200.
    uploads: HashMap<String, bool>,
}

/// The blob files already hashed and found right, by hash (files never
/// change once placed).
type Verified = HashSet<String>;

/// The store as the database and the blob directory hold it, read while
/// the server is up and idle: `integrity_check`, every acknowledged write
/// so far, whole chains, the round's uploads, and the blob files. `known`
/// are the findings of earlier rounds.
fn check_store(
    data: &Path,
    history: &History,
    uploads: &[Upload],
    verified: &mut Verified,
    known: &HashSet<(Kind, String)>,
) -> (Seen, Result<(), Vec<String>>) {
    let mut seen = Seen::default();
    let db = Connection::open_with_flags(
        data.join("folio.db"),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("folio.db opens read-only");
    db.busy_timeout(Duration::from_secs(30)).expect("a timeout");
    let integrity = integrity_check(&db);

    let user: i64 = db
        .query_row("SELECT id FROM users WHERE name = 'me'", [], |row| {
            row.get(0)
        })
        .expect("the user's row");
    let latest: HashMap<String, String> = rows(
        &db,
        "SELECT record_id, version_hash FROM records WHERE user_id = ?1",
        [user],
    )
    .into_iter()
    .collect();
    for (id, hash) in &history.latest {
        let now = latest.get(id);
        if now != Some(hash) {
            seen.find(
                Kind::Lost,
                id,
                format!("{id}: acknowledged {hash}, the records table holds {now:?}"),
            );
        }
    }
    let mut version = db
        .prepare("SELECT record_id, parent_hash FROM versions WHERE user_id = ?1 AND hash = ?2")
        .expect("a query");
    for (id, hash, parent) in &history.versions {
        let row: Option<(String, String)> = version
            .query_row(rusqlite::params![user, hash], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()
            .expect("the versions table reads");
        if row.as_ref() != Some(&(id.clone(), parent.clone())) {
            seen.find(
                Kind::Lost,
                hash,
                format!(
                    "{id}: acknowledged version {hash} (parent {parent:?}): versions holds {row:?}"
                ),
            );
        }
    }
    // Whole chains, for every record: a version's parent is a version of
    // the same record, the latest pointer names a version that has no
    // child, and every version belongs to a record row.
    let broken = [
        (
            "a version whose parent is not stored",
            "SELECT v.record_id, v.hash FROM versions v WHERE v.user_id = ?1 AND v.parent_hash <> '' \
             AND NOT EXISTS (SELECT 1 FROM versions p WHERE p.user_id = v.user_id \
             AND p.hash = v.parent_hash AND p.record_id = v.record_id AND p.author = v.author)",
        ),
        (
            "the latest version has a child",
            "SELECT r.record_id, r.version_hash FROM records r WHERE r.user_id = ?1 \
             AND EXISTS (SELECT 1 FROM versions c WHERE c.user_id = r.user_id \
             AND c.author = r.author AND c.record_id = r.record_id AND c.parent_hash = r.version_hash)",
        ),
        (
            "the latest version is not stored",
            "SELECT r.record_id, r.version_hash FROM records r WHERE r.user_id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM versions v WHERE v.user_id = r.user_id \
             AND v.hash = r.version_hash AND v.record_id = r.record_id)",
        ),
        (
            "a version without its record row",
            "SELECT v.record_id, v.hash FROM versions v WHERE v.user_id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM records r WHERE r.user_id = v.user_id \
             AND r.author = v.author AND r.record_id = v.record_id)",
        ),
    ];
    for (what, sql) in broken {
        for (id, hash) in rows::<String, String>(&db, sql, [user]) {
            seen.find(
                Kind::Half,
                format!("chain:{id}"),
                format!("{id}: {what} ({hash})"),
            );
        }
    }

    let blobs: HashMap<String, u64> = rows(&db, "SELECT hash, size FROM blobs", ())
        .into_iter()
        .map(|(hash, size): (String, i64)| (hash, size as u64))
        .collect();
    let mine: HashSet<String> = rows(
        &db,
        "SELECT hash, size FROM blobs WHERE user_id = ?1",
        [user],
    )
    .into_iter()
    .map(|(hash, _): (String, i64)| hash)
    .collect();
    drop(version);
    drop(db);
    for upload in uploads {
        let blob = &upload.blob;
        match (upload.acked, mine.contains(&blob.hash)) {
            (true, true) if blobs[&blob.hash] == blob.size => {}
            (true, _) => seen.find(
                Kind::Lost,
                &blob.hash,
                format!(
                    "acknowledged upload {} ({} bytes): blobs row size {:?}",
                    blob.hash,
                    blob.size,
                    blobs.get(&blob.hash)
                ),
            ),
            (false, true) => seen.present += 1,
            (false, false) => seen.absent += 1,
        }
    }
    for (id, hash) in &history.linked {
        if !mine.contains(hash) {
            seen.find(
                Kind::Lost,
                format!("blob:{id}"),
                format!("{id}: links blob {hash}, which has no blobs row"),
            );
        }
    }

    // The files: the scan is repeated once after a pause when it finds a
    // new orphaned or missing file, so that an expired blob being collected
    // at that moment (its row is released first, then its file removed)
    // is not taken for one.
    let mut files = blob_files(data, &blobs, &history.uploads, verified);
    if files.iter().any(|f| {
        matches!(f.kind, Kind::Orphaned | Kind::Missing)
            && !known.contains(&(f.kind, f.key.clone()))
    }) {
        std::thread::sleep(Duration::from_millis(200));
        let db = Connection::open_with_flags(
            data.join("folio.db"),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .expect("folio.db opens read-only");
        db.busy_timeout(Duration::from_secs(30)).expect("a timeout");
        let blobs: HashMap<String, u64> = rows(&db, "SELECT hash, size FROM blobs", ())
            .into_iter()
            .map(|(hash, size): (String, i64)| (hash, size as u64))
            .collect();
        files = blob_files(data, &blobs, &history.uploads, verified);
    }
    seen.findings.extend(files);
    (seen, integrity)
}

/// `PRAGMA integrity_check`: `Ok` when it answers `ok`, else its lines.
fn integrity_check(db: &Connection) -> Result<(), Vec<String>> {
    let lines: Vec<String> = db
        .prepare("PRAGMA integrity_check")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<_, _>>()
        })
        .expect("PRAGMA integrity_check runs");
    if lines == ["ok"] { Ok(()) } else { Err(lines) }
}

/// The rows of a two-column query.
fn rows<A, B>(db: &Connection, sql: &str, params: impl rusqlite::Params) -> Vec<(A, B)>
where
    A: rusqlite::types::FromSql,
    B: rusqlite::types::FromSql,
{
    db.prepare(sql)
        .and_then(|mut statement| {
            statement
                .query_map(params, |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<Result<_, _>>()
        })
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The blob directory against the `blobs` rows: files no row names,
/// temporary files left over, and rows whose file is absent or not the
/// bytes it names. `uploads` tells where an orphaned file came from.
fn blob_files(
    data: &Path,
    blobs: &HashMap<String, u64>,
    uploads: &HashMap<String, bool>,
    verified: &mut Verified,
) -> Vec<Finding> {
    let root = data.join("blobs");
    let mut findings = Vec::new();
    let orphan = |path: &Path, why: &str| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let from = match uploads.get(name.as_ref()) {
            Some(true) => "the bytes of an upload answered 200",
            Some(false) => "the bytes of an upload the kill left unanswered",
            None => "not the bytes of any upload of this test",
        };
        Finding {
            kind: Kind::Orphaned,
            key: path.display().to_string(),
            detail: format!("{}: {why} ({from})", path.display()),
        }
    };
    for entry in std::fs::read_dir(&root).expect("the blob directory") {
        let entry = entry.expect("a directory entry");
        let (path, name) = (
            entry.path(),
            entry.file_name().to_string_lossy().into_owned(),
        );
        if name == "tmp" {
            for file in std::fs::read_dir(&path).expect("blobs/tmp") {
                let file = file.expect("an entry").path();
                let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
                findings.push(Finding {
                    kind: Kind::Leftover,
                    key: file.display().to_string(),
                    detail: format!(
                        "{}: a temporary upload file ({size} bytes) the restart did not collect",
                        file.display()
                    ),
                });
            }
            continue;
        }
        if !path.is_dir() {
            findings.push(orphan(&path, "not a blob file"));
            continue;
        }
        for file in std::fs::read_dir(&path).expect("a blob directory") {
            let file = file.expect("an entry").path();
            let hash = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !blobs.contains_key(&hash) {
                findings.push(orphan(&file, "no blobs row names it"));
            } else if !hash.starts_with(&name) {
                findings.push(orphan(&file, "in the wrong directory"));
            }
        }
    }
    for (hash, size) in blobs {
        let path = root.join(&hash[..2]).join(hash);
        let fault = match std::fs::metadata(&path) {
            Err(e) => Some(format!("{e}")),
            Ok(meta) if meta.len() != *size => Some(format!("{} bytes, not {size}", meta.len())),
            Ok(_) if verified.contains(hash) => None,
            Ok(_) => {
                let got = sha256(&std::fs::read(&path).expect("a blob file reads"));
                (got != *hash).then(|| format!("its SHA-256 is {got}"))
            }
        };
        match fault {
            Some(fault) => findings.push(Finding {
                kind: Kind::Missing,
                key: hash.clone(),
                detail: format!("blobs row {hash} ({size} bytes): {fault}"),
            }),
            None => {
                verified.insert(hash.clone());
            }
        }
    }
    findings
}

/// Everything found so far, each finding counted once.
#[derive(Default)]
struct Tally {
    counts: HashMap<Kind, usize>,
    keys: HashSet<(Kind, String)>,
    /// The first findings of each kind, with their round.
    printed: Vec<String>,
}

impl Tally {
    /// Counts the findings not seen before; answers how many there were.
    fn add(&mut self, round: usize, findings: Vec<Finding>) -> usize {
        let mut new = 0;
        for finding in findings {
            if !self.keys.insert((finding.kind, finding.key)) {
                continue;
            }
            new += 1;
            let count = self.counts.entry(finding.kind).or_default();
            *count += 1;
            if *count <= PRINTED {
                let line = format!("round {round}: {:?}: {}", finding.kind, finding.detail);
                println!("{line}");
                self.printed.push(line);
            }
        }
        new
    }

    fn count(&self, kind: Kind) -> usize {
        self.counts.get(&kind).copied().unwrap_or(0)
    }
}

fn start(data: &Path, port: u16) -> Server {
    tokio::task::block_in_place(|| Server::start(data, port, SERVE_FLAGS))
}

/// A positive whole number from the environment, or `default` when unset.
fn env_number<T: std::str::FromStr>(name: &str, default: impl FnOnce() -> T) -> T {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a whole number")),
        Err(_) => default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_and_the_store_stays_whole() {
    let began = Instant::now();
    let rounds: usize = env_number("FOLIO_CRASH_ROUNDS", || DEFAULT_ROUNDS);
    assert!(rounds > 0, "FOLIO_CRASH_ROUNDS must be at least 1");
    let seed: u64 = env_number("FOLIO_CRASH_SEED", rand::random);
    println!("crash seed {seed} (FOLIO_CRASH_SEED to replay), {rounds} rounds");
    let mut rng = StdRng::seed_from_u64(seed);

    // A directory per length of run: the soak (scripts/crash-soak) and the
    // short run of the test suite may run side by side.
    let data = scratch(&format!("crash-{rounds}"));
    let port = free_port();
    let base_url = format!("https://localhost:{port}");
    add_me(&data, &base_url);
    let app = add_app(&data, "me", &["--full-access"]);

    // The note type, created once through the API.
    let mut server = start(&data, port);
    let client = Client::new(&server, &app);
    let builtin_type = client
        .all_records()
        .await
        .into_iter()
        .find(|r| r["source"] == "resolution" && r["content"]["name"] == "type")
        .expect("the built-in Type type is listed");
    let schema = json!({
        "type": "object",
        "properties": {"content": {"type": "object", "properties": {
            "n": {"type": "int"},
            "file": {"type": "blob_link", "optional": true},
        }}},
    });
    let created = client
        .ok(client.post(
            "/records",
            &json!({
                "type": version_link(&builtin_type),
                "content": {"name": "crash_note", "schema": schema},
            }),
        ))
        .await;
    let ty = version_link(&created["record"]);
    drop(client);

    let mut history = History::default();
    let mut verified = Verified::new();
    let mut tally = Tally::default();
    let mut totals = Load::default();
    let (mut acked, mut unknown) = (0usize, 0usize);
    let mut seen_all = Seen::default();
    for round in 1..=rounds {
        // The round's hot records, then the load, then the kill at a
        // random moment.
        let client = Client::new(&server, &app);
        let mut hot = Vec::new();
        for _ in 0..HOT_RECORDS {
            let id = hex::encode(rand::random::<[u8; 16]>());
            let n = next_n();
            let body = json!({"id": id, "type": ty, "content": {"n": n}});
            let answer = client.ok(client.post("/records", &body)).await;
            hot.push(Create {
                id,
                n,
                blob: None,
                hash: Some(hash_of(&answer["record"])),
            });
        }
        let latest: HashMap<String, String> = hot
            .iter()
            .map(|c| (c.id.clone(), c.hash.clone().unwrap_or_default()))
            .collect();
        let latest = Arc::new(Mutex::new(latest));
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for _ in 0..CREATORS {
            writers.push(tokio::spawn(creator(
                client.clone(),
                ty.clone(),
                stop.clone(),
            )));
        }
        for _ in 0..BLOB_WRITERS {
            let seed = rng.random();
            writers.push(tokio::spawn(blob_writer(
                client.clone(),
                ty.clone(),
                stop.clone(),
                seed,
            )));
        }
        for _ in 0..UPDATERS {
            let seed = rng.random();
            writers.push(tokio::spawn(updater(
                client.clone(),
                latest.clone(),
                stop.clone(),
                seed,
            )));
        }
        let delay = rng.random_range(KILL_AFTER_MS);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        server.kill();
        stop.store(true, Ordering::Relaxed);
        let mut load = Load::default();
        for handle in writers {
            load.add(handle.await.expect("a writer task"));
        }
        drop(client);
        let (round_acked, round_unknown) = (load.acked() + hot.len(), load.unknown());
        acked += round_acked;
        unknown += round_unknown;

        // Restart on the same data and port; check this round's writes
        // through the API, then the whole store.
        let restarting = Instant::now();
        server = start(&data, port);
        let restart_ms = restarting.elapsed().as_millis();
        let client = Client::new(&server, &app);
        let mut checks = Vec::new();
        for write in &load.creates {
            checks.push(futures_util::future::Either::Left(check_create(
                client.clone(),
                write.clone(),
            )));
        }
        for created in &hot {
            let updates = load
                .updates
                .iter()
                .filter(|u| u.id == created.id)
                .cloned()
                .collect();
            checks.push(futures_util::future::Either::Right(check_hot(
                client.clone(),
                created.clone(),
                updates,
            )));
        }
        let mut seen = futures_util::stream::iter(checks)
            .buffer_unordered(READERS)
            .fold(Seen::default(), |mut all, one| async move {
                all.add(one);
                all
            })
            .await;
        seen.checked += hot.len();

        for write in load.creates.iter().chain(&hot) {
            if let Some(hash) = &write.hash
                && !latest.lock().unwrap().contains_key(&write.id)
            {
                history.latest.insert(write.id.clone(), hash.clone());
                if let Some(blob) = &write.blob {
                    history.linked.push((write.id.clone(), blob.hash.clone()));
                }
            }
        }
        for created in &hot {
            let hash = created.hash.clone().unwrap_or_default();
            history
                .versions
                .push((created.id.clone(), hash, String::new()));
        }
        for update in &load.updates {
            if let Some(hash) = &update.hash {
                history
                    .versions
                    .push((update.id.clone(), hash.clone(), update.parent.clone()));
            }
        }
        for upload in &load.uploads {
            history
                .uploads
                .insert(upload.blob.hash.clone(), upload.acked);
        }
        let (store, integrity) = tokio::task::block_in_place(|| {
            check_store(&data, &history, &load.uploads, &mut verified, &tally.keys)
        });
        if let Err(lines) = integrity {
            panic!(
                "seed {seed}, round {round} (killed after {delay} ms): PRAGMA integrity_check: \
                 {lines:#?}"
            );
        }
        seen.checked += load.uploads.len();
        seen.add(store);
        let found = tally.add(round, std::mem::take(&mut seen.findings));
        println!(
            "round {round}/{rounds}: killed after {delay} ms; {round_acked} acknowledged, \
             {round_unknown} unanswered ({} there, {} not), {} version conflicts; \
             restarted in {restart_ms} ms, checked in {} ms, {found} new findings",
            seen.present,
            seen.absent,
            load.conflicts,
            restarting.elapsed().as_millis() - restart_ms
        );
        seen_all.add(seen);
        totals.add(load);
    }

    // Every acknowledged record through the list, then the database with
    // the server gone.
    let client = Client::new(&server, &app);
    let listed: HashMap<String, String> = client
        .all_records()
        .await
        .iter()
        .map(|r| (text(&r["id"]), hash_of(r)))
        .collect();
    let mut unlisted = Vec::new();
    for (id, hash) in &history.latest {
        if listed.get(id) != Some(hash) {
            unlisted.push(Finding {
                kind: Kind::Lost,
                key: id.clone(),
                detail: format!("{id}: acknowledged {hash}, listed as {:?}", listed.get(id)),
            });
        }
    }
    tally.add(rounds, unlisted);
    drop(client);
    server.kill();
    let db = Connection::open(data.join("folio.db")).expect("folio.db opens");
    let integrity = integrity_check(&db);

    let creates = totals.creates.iter().filter(|c| c.hash.is_some());
    let linking = creates.clone().filter(|c| c.blob.is_some()).count();
    let updates = totals.updates.iter().filter(|u| u.hash.is_some()).count();
    println!(
        "crash summary: seed {seed}, {rounds} kills, {acked} writes acknowledged ({} creates, \
         {linking} of them linking a blob; {updates} updates; {} uploads), {unknown} unknown \
         ({} there, {} not), {} checked, {} lost, {} half-written, {} phantom, \
         {} orphaned blob files, {} uncollected temporary files, {} missing blob files; \
         {} version conflicts, {} refused, {:.1} s",
        creates.count() + rounds * HOT_RECORDS,
        totals.uploads.iter().filter(|u| u.acked).count(),
        seen_all.present,
        seen_all.absent,
        seen_all.checked,
        tally.count(Kind::Lost),
        tally.count(Kind::Half),
        tally.count(Kind::Phantom),
        tally.count(Kind::Orphaned),
        tally.count(Kind::Leftover),
        tally.count(Kind::Missing),
        totals.conflicts,
        totals.refused.len(),
        began.elapsed().as_secs_f64()
    );

    assert_eq!(integrity, Ok(()), "PRAGMA integrity_check at the end");
    assert!(
        totals.refused.is_empty(),
        "the server refused writes under load: {:#?}",
        totals.refused
    );
    assert!(
        tally.keys.is_empty(),
        "seed {seed}: {} faults after kills (the first of each kind, with the round that \
         found it): {:#?}",
        tally.keys.len(),
        tally.printed
    );
    assert_eq!(
        seen_all.checked,
        acked + unknown,
        "every write was checked after the restart that followed it"
    );
    assert!(
        updates > 0 && linking > 0 && acked >= rounds,
        "too few writes were acknowledged to test anything: {acked}, {updates} updates, \
         {linking} blob-linking creates"
    );
}
