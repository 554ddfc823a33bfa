//! Crash safety: `folio serve` is killed with SIGKILL at random moments
//! under a concurrent write load, 20 times; after every restart each write
//! that was answered 200 is there with the version hash it was answered
//! with, and at the end SQLite's `PRAGMA integrity_check` is `ok`.
//!
//! Set `FOLIO_CRASH_SEED` to replay the kill delays of a failed run (the
//! seed is printed).

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use folio_conformance::client::{Auth, Call, Http, Response, now_ms, sign_call};
use folio_conformance::signer::{AppKey, Layout};
use folio_conformance::{AppCredentials, ScopedAppCredentials, Target};
use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::{App, Server, add_app, add_me, free_port, scratch};

const ROUNDS: usize = 20;
const WRITERS: usize = 8;
/// How long the load runs before the kill, in milliseconds.
const KILL_AFTER_MS: std::ops::Range<u64> = 50..400;
/// Concurrent GETs when verifying.
const READERS: usize = 16;
const SERVE_FLAGS: &[&str] = &["--write-rate", "off", "--read-rate", "off"];

/// Nonces unique for the whole test (at most 10 characters): a counter, so
/// two requests can never collide in the server's replay guard.
static NONCES: AtomicU64 = AtomicU64::new(0);

fn nonce() -> String {
    format!("{:010x}", NONCES.fetch_add(1, Ordering::Relaxed))
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
        let credentials = AppCredentials {
            app_id: app.app_id.clone(),
            authorization_id: app.authorization_id.clone(),
            private_key: app.private_key.clone(),
        };
        let target = Target {
            base_url: server.base_url(),
            user: "me".to_owned(),
            entity: "localhost".to_owned(),
            // The server's self-signed certificate, trusted as a root.
            ca_cert: Some(server.cert().display().to_string()),
            insecure: false,
            http_redirect_url: None,
            transport: false,
            password: None,
            other_user: None,
            full_app: credentials.clone(),
            scoped_app: ScopedAppCredentials {
                app: credentials,
                read_type: String::new(),
                write_type: String::new(),
            },
        };
        let key = AppKey::new(&app.app_id, &app.authorization_id, &app.private_key)
            .expect("the app's key");
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

    /// A JSON answer that must be 200.
    async fn ok(&self, call: Call<'static>) -> Value {
        let what = format!("{} {}", call.method, call.url);
        let response = self
            .send(call)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(response.status, 200, "{what}: {}", response.excerpt());
        response.json().expect("a JSON body")
    }

    /// Every record in the store, following `next_page`.
    async fn all_records(&self) -> Vec<Value> {
        let mut records = Vec::new();
        let mut path = "/records?page_size=200".to_owned();
        loop {
            let page = self.ok(self.get(&path)).await;
            records.extend(page["records"].as_array().expect("records").iter().cloned());
            match page["next_page"].as_str() {
                Some(next) => path = format!("/records{next}"),
                None => return records,
            }
        }
    }
}

fn version_link(record: &Value) -> Value {
    json!({
        "entity": record["author"]["entity"],
        "record_id": record["id"],
        "version_hash": record["version"]["hash"],
    })
}

/// What one writer saw: writes answered 200 as (id, version hash), and any
/// other answer the server gave (requests cut by the kill are not counted).
#[derive(Default)]
struct Load {
    acked: Vec<(String, String)>,
    refused: Vec<String>,
    failed: usize,
}

async fn writer(client: Client, ty: Value, stop: Arc<AtomicBool>) -> Load {
    let mut load = Load::default();
    let mut n = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let id = hex::encode(rand::random::<[u8; 16]>());
        let body = json!({"id": id, "type": ty, "content": {"n": n}});
        n += 1;
        match client.send(client.post("/records", &body)).await {
            Ok(response) if response.status == 200 => {
                let answer = response.json().expect("a 200 answer is JSON");
                let record = &answer["record"];
                assert_eq!(record["id"], id.as_str(), "the answer names the record");
                let hash = record["version"]["hash"].as_str().expect("a version hash");
                load.acked.push((id, hash.to_owned()));
            }
            Ok(response) => {
                load.refused
                    .push(format!("{}: {}", response.status, response.excerpt()))
            }
            Err(_) => {
                // Cut by the kill (or refused once the server is gone).
                load.failed += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    load
}

fn start(data: &std::path::Path, port: u16) -> Server {
    tokio::task::block_in_place(|| Server::start(data, port, SERVE_FLAGS))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_and_the_database_stays_sound() {
    let began = Instant::now();
    let seed: u64 = std::env::var("FOLIO_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("crash seed {seed} (FOLIO_CRASH_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);

    let data = scratch("crash");
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
        "properties": {"content": {"type": "object", "properties": {"n": {"type": "int"}}}},
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

    // Every write answered 200 so far: id -> version hash.
    let mut acked: HashMap<String, String> = HashMap::new();
    let mut single_gets = 0usize;
    let mut cut = 0usize;
    let mut refused: Vec<String> = Vec::new();
    for round in 0..ROUNDS {
        // The load, then the kill at a random moment.
        let client = Client::new(&server, &app);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| tokio::spawn(writer(client.clone(), ty.clone(), stop.clone())))
            .collect();
        let delay = rng.random_range(KILL_AFTER_MS);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        server.kill();
        stop.store(true, Ordering::Relaxed);
        let mut fresh = Vec::new();
        for handle in writers {
            let load = handle.await.expect("a writer task");
            fresh.extend(load.acked);
            refused.extend(load.refused);
            cut += load.failed;
        }
        drop(client);

        // Restart on the same data and port; check this round's writes one
        // by one, then every write so far through the list.
        server = start(&data, port);
        let client = Client::new(&server, &app);
        let missing: Vec<String> = futures_util::stream::iter(fresh.iter())
            .map(|(id, hash)| {
                let client = client.clone();
                async move {
                    let path = format!("/records/localhost/{id}");
                    let response = client
                        .send(client.get(&path))
                        .await
                        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
                    if response.status != 200 {
                        return Some(format!("{id}: {} {}", response.status, response.excerpt()));
                    }
                    let got = response.json().expect("JSON");
                    let got = got["record"]["version"]["hash"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    (got != *hash).then(|| format!("{id}: acknowledged {hash}, now {got}"))
                }
            })
            .buffer_unordered(READERS)
            .filter_map(|missing| async move { missing })
            .collect()
            .await;
        single_gets += fresh.len();
        assert!(
            missing.is_empty(),
            "round {round} (killed after {delay} ms): {} of {} acknowledged writes are not \
             there after the restart: {missing:#?}",
            missing.len(),
            fresh.len()
        );
        acked.extend(fresh);

        let listed: HashMap<String, String> = client
            .all_records()
            .await
            .into_iter()
            .map(|r| {
                let id = r["id"].as_str().expect("id").to_owned();
                let hash = r["version"]["hash"].as_str().expect("hash").to_owned();
                (id, hash)
            })
            .collect();
        let lost: Vec<_> = acked
            .iter()
            .filter(|(id, hash)| listed.get(*id) != Some(*hash))
            .collect();
        assert!(
            lost.is_empty(),
            "after round {round}: acknowledged writes missing from the list: {lost:#?}"
        );
    }
    server.kill();

    assert!(
        refused.is_empty(),
        "the server refused writes under load: {refused:#?}"
    );
    assert!(
        acked.len() >= ROUNDS,
        "too few writes were acknowledged to test anything: {}",
        acked.len()
    );

    // The database itself, with the server gone.
    let db = rusqlite::Connection::open(data.join("folio.db")).expect("folio.db opens");
    let check: Vec<String> = db
        .prepare("PRAGMA integrity_check")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<_, _>>()
        })
        .expect("PRAGMA integrity_check runs");
    assert_eq!(check, ["ok"], "PRAGMA integrity_check");
    let mut statement = db
        .prepare("SELECT version_hash FROM records WHERE record_id = ?1")
        .expect("a query");
    let mut stored = 0usize;
    for (id, hash) in &acked {
        let hashes: Vec<String> = statement
            .query_map([id], |row| row.get(0))
            .and_then(|rows| rows.collect())
            .expect("the records table reads");
        assert_eq!(hashes, [hash.as_str()], "record {id} in the records table");
        stored += 1;
    }
    let notes: i64 = db
        .query_row(
            "SELECT count(*) FROM records WHERE type_record_id = ?1",
            [ty["record_id"].as_str().expect("type id")],
            |row| row.get(0),
        )
        .expect("a count");
    assert!(
        notes as usize >= acked.len(),
        "the records table holds every acknowledged note"
    );

    println!(
        "crash: {ROUNDS} rounds, {} writes acknowledged, {single_gets} verified by GET after \
         their crash, {} re-listed every round, {stored} found in the records table \
         ({notes} notes stored, {cut} requests cut by kills), integrity_check ok, {:.1} s",
        acked.len(),
        acked.len(),
        began.elapsed().as_secs_f64()
    );
}
