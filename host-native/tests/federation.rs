//! Federation between two `folio serve` processes (docs/federation.md):
//! Alice on one, Bob on the other, on loopback, their entity names
//! resolved to them by `--peer-resolve`, over TLS with certificates of a
//! test CA both servers are told to trust (`--peer-ca`).
//!
//! Alice publishes the real apps' conversation, message and post types,
//! starts a conversation with Bob and writes messages; Bob's app lists
//! them and receives them live; Bob replies and Alice receives the reply;
//! Alice edits and deletes a message and Bob's copy follows; a post that
//! mentions Bob reaches him; Bob reads Alice's public posts with
//! `proxy_to`. Every version hash is the same on both servers.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use folio_client::TrustOptions;
use folio_conformance::client::{Call, Http};
use folio_conformance::signer::AppKey;
use folio_conformance::sse::EventStream;
use folio_core::builtin::BuiltinType;
use reqwest::Url;
use serde_json::{Value, json};
use support::{App, Server, add_app, folio, free_port, scratch};

/// How long a notification may take to arrive in this test.
const DELIVERY: Duration = Duration::from_secs(30);

/// A test CA, and certificates it signs.
struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: PathBuf,
}

impl TestCa {
    fn new(dir: &Path) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Folio federation test CA");
        let key = rcgen::KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("the CA certificate");
        let pem = dir.join("ca.pem");
        std::fs::write(&pem, cert.pem()).expect("ca.pem");
        TestCa {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        }
    }

    /// A certificate for `names`, written as `{stem}.pem` and `{stem}.key`.
    fn certificate(&self, dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let params = rcgen::CertificateParams::new(names).expect("params");
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        let (cert_path, key_path) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).expect("cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("key");
        (cert_path, key_path)
    }
}

/// One side: a server, its user and an app with full access.
struct Side {
    server: Server,
    user: &'static str,
    entity: &'static str,
    app: App,
    http: Http,
}

impl Side {
    fn key(&self) -> AppKey {
        self.app.key()
    }

    /// `https://localhost:PORT/api/{user}{path}`: the app talks to its own
    /// server by its address.
    fn url(&self, path: &str) -> Url {
        Url::parse(&format!(
            "https://localhost:{}/api/{}{path}",
            self.server.port, self.user
        ))
        .expect("a URL")
    }

    async fn send(&self, call: Call<'_>) -> Value {
        let response = self.http.send(&call).await.expect("an answer");
        assert_eq!(
            response.status,
            200,
            "{} {}: {}",
            call.method,
            call.url,
            response.excerpt()
        );
        response.json().expect("JSON")
    }

    async fn create(&self, body: Value) -> Value {
        let key = self.key();
        let call = Call::post(self.url("/records")).json(&body).signed(&key);
        self.send(call).await["record"].clone()
    }

    async fn get(&self, entity: &str, id: &str) -> Option<Value> {
        let key = self.key();
        let call = Call::get(self.url(&format!("/records/{entity}/{id}"))).signed(&key);
        let response = self.http.send(&call).await.expect("an answer");
        match response.status {
            200 => Some(response.json().expect("JSON")["record"].clone()),
            404 => None,
            status => panic!("GET {id}: {status} {}", response.excerpt()),
        }
    }

    /// Every version of a record, oldest first: their hashes.
    async fn version_hashes(&self, entity: &str, id: &str) -> Vec<String> {
        let key = self.key();
        let call = Call::get(self.url(&format!("/records/{entity}/{id}/versions?page_size=200")))
            .signed(&key);
        let versions = self.send(call).await;
        versions["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| r["version"]["hash"].as_str().expect("a hash").to_owned())
            .collect()
    }

    /// Waits until this side holds version `hash` of the record as its
    /// latest; returns it.
    async fn wait_for(&self, entity: &str, id: &str, hash: &str) -> Value {
        let deadline = Instant::now() + DELIVERY;
        loop {
            if let Some(record) = self.get(entity, id).await
                && record["version"]["hash"] == hash
            {
                return record;
            }
            assert!(
                Instant::now() < deadline,
                "{} never received {entity}/{id} version {hash}; its log:\n{}",
                self.entity,
                self.server.log_lines().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
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

fn record_link(record: &Value) -> Value {
    json!({"entity": record["author"]["entity"], "record_id": record["id"]})
}

/// A real app's type (../shared/real-types), published by `entity` under
/// the id its app publishes it with.
fn real_type(file: &str, id: &str, entity: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/real-types")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("a real type");
    let content: Value =
        serde_json::from_str(&text.replace("types.baq.dev", entity)).expect("JSON");
    let type_type = serde_json::to_value(BuiltinType::Type.link()).expect("a link");
    json!({"id": id, "type": type_type, "content": content})
}

const CONVERSATION_TYPE: &str = "7583995c51cf44ad972fdc123105e1dc";
const MESSAGE_TYPE: &str = "153b3cb3a2f0494e950599de1cc13ef3";
const POST_TYPE: &str = "875d6b82645e4833a3f0dca3fb79d69d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alice_and_bob_share_records_across_two_servers() {
    let dir = scratch("federation-two-servers");
    let ca = TestCa::new(&dir);
    let (port_a, port_b) = (free_port(), free_port());
    let resolve = [
        format!("alice.test=127.0.0.1:{port_a}"),
        format!("a.test=127.0.0.1:{port_a}"),
        format!("bob.test=127.0.0.1:{port_b}"),
        format!("b.test=127.0.0.1:{port_b}"),
    ];
    let start = |name: &'static str, entity: &'static str, host: &str, port: u16| {
        let data = dir.join(name);
        std::fs::create_dir_all(&data).expect("a data directory");
        let base_url = format!("https://{host}");
        folio(
            &data,
            &[
                "user",
                "add",
                name,
                "--entity",
                entity,
                "--base-url",
                &base_url,
                "--json",
            ],
        );
        let app = add_app(&data, name, &["--full-access"]);
        let (cert, key) = ca.certificate(&dir, name, &[host, entity, "localhost"]);
        let mut extra: Vec<String> = vec![
            "--tls-cert".into(),
            cert.display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
            "--peer-ca".into(),
            ca.pem.display().to_string(),
        ];
        for rule in &resolve {
            extra.push("--peer-resolve".into());
            extra.push(rule.clone());
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let server = Server::start_at(&data, port, &base_url, &extra, &[("RUST_LOG", "info")]);
        let trust = TrustOptions {
            ca_cert: Some(ca.pem.display().to_string()),
            insecure: false,
        };
        let http = Http::new(&trust).expect("an HTTP client");
        Side {
            server,
            user: name,
            entity,
            app,
            http,
        }
    };
    let alice = start("alice", "alice.test", "a.test", port_a);
    let bob = start("bob", "bob.test", "b.test", port_b);

    // Bob's app watches Bob's store from the start.
    let key = bob.key();
    let events = Call::get(bob.url("/events")).signed(&key);
    let mut bob_events = EventStream::new(bob.http.open(&events).await.expect("an event stream"));

    // Alice publishes the real apps' types, under her entity.
    let mut types = std::collections::HashMap::new();
    for (file, id) in [
        ("conversation.json", CONVERSATION_TYPE),
        ("message.json", MESSAGE_TYPE),
        ("post.json", POST_TYPE),
    ] {
        let record = alice.create(real_type(file, id, alice.entity)).await;
        types.insert(id, version_link(&record));
    }

    // A conversation between Alice and Bob: Alice's server resolves Bob's
    // entity, and notifies Bob's server.
    let both = json!([{"entity": alice.entity}, {"entity": bob.entity}]);
    let conversation = alice
        .create(json!({
            "type": types[CONVERSATION_TYPE],
            "permissions": {"read": both, "write": []},
            "content": {},
        }))
        .await;
    let conversation_id = conversation["id"].as_str().expect("an id").to_owned();
    let received = bob
        .wait_for(
            alice.entity,
            &conversation_id,
            conversation["version"]["hash"].as_str().unwrap(),
        )
        .await;
    assert_eq!(
        received["source"], "notification_unknown",
        "Bob never linked Alice"
    );

    // Alice's messages.
    let mut messages = Vec::new();
    for text in ["Hi Bob!", "Lunch on Friday?", "At noon."] {
        let message = alice
            .create(json!({
                "type": types[MESSAGE_TYPE],
                "permissions": {"read": both},
                "content": {"conversation": record_link(&conversation), "text": text},
            }))
            .await;
        messages.push(message);
    }
    for message in &messages {
        let id = message["id"].as_str().unwrap();
        let hash = message["version"]["hash"].as_str().unwrap();
        let copy = bob.wait_for(alice.entity, id, hash).await;
        assert_eq!(copy["content"], message["content"]);
    }

    // Bob's app lists them, and received them live.
    let key = bob.key();
    let filter = format!(
        "$['content']['conversation']={}+{conversation_id}",
        alice.entity
    );
    let mut url = bob.url("/records");
    url.query_pairs_mut().append_pair("filter", &filter);
    let listed = bob.send(Call::get(url).signed(&key)).await;
    let listed: Vec<&str> = listed["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    for message in &messages {
        assert!(
            listed.contains(&message["id"].as_str().unwrap()),
            "{listed:?}"
        );
    }
    let last = messages.last().unwrap()["id"].as_str().unwrap().to_owned();
    let live = bob_events
        .records_until(&last, DELIVERY)
        .await
        .expect("Bob's app hears the messages");
    assert!(live.iter().any(|e| e.record_id() == conversation_id));

    // Bob replies; Alice receives it.
    let reply = bob
        .create(json!({
            "type": types[MESSAGE_TYPE],
            "permissions": {"read": [{"entity": bob.entity}, {"entity": alice.entity}]},
            "content": {
                "conversation": record_link(&conversation),
                "replying_to": record_link(&messages[1]),
                "text": "Friday works.",
            },
        }))
        .await;
    let reply_id = reply["id"].as_str().unwrap();
    let copy = alice
        .wait_for(
            bob.entity,
            reply_id,
            reply["version"]["hash"].as_str().unwrap(),
        )
        .await;
    assert_eq!(copy["source"], "notification", "Alice linked Bob already");

    // Alice edits a message and deletes another: Bob's copies follow.
    let edited_id = messages[1]["id"].as_str().unwrap().to_owned();
    let key = alice.key();
    let edit = Call::put(alice.url(&format!("/records/{}/{edited_id}", alice.entity)))
        .json(&json!({
            "version": {"parent_hash": messages[1]["version"]["hash"]},
            "content": {"conversation": record_link(&conversation), "text": "Lunch on Friday, at 12?"},
        }))
        .signed(&key);
    let edited = alice.send(edit).await["record"].clone();
    let deleted_id = messages[2]["id"].as_str().unwrap().to_owned();
    let delete =
        Call::delete(alice.url(&format!("/records/{}/{deleted_id}", alice.entity))).signed(&key);
    let deleted = alice.send(delete).await["record"].clone();
    let copy = bob
        .wait_for(
            alice.entity,
            &edited_id,
            edited["version"]["hash"].as_str().unwrap(),
        )
        .await;
    assert_eq!(copy["content"]["text"], "Lunch on Friday, at 12?");
    let copy = bob
        .wait_for(
            alice.entity,
            &deleted_id,
            deleted["version"]["hash"].as_str().unwrap(),
        )
        .await;
    assert_eq!(copy["no_content"]["action"], "delete");

    // A public post that mentions Bob reaches him.
    let text = "Lunch with Bob on Friday";
    let post = alice
        .create(json!({
            "type": types[POST_TYPE],
            "permissions": {"read": "public"},
            "content": {
                "text": text,
                "text_facets": [{
                    "index": 11, "length": 3, "type": "mention",
                    "mention": {"entity": bob.entity},
                }],
            },
        }))
        .await;
    let post_id = post["id"].as_str().unwrap().to_owned();
    bob.wait_for(
        alice.entity,
        &post_id,
        post["version"]["hash"].as_str().unwrap(),
    )
    .await;

    // A public post that mentions nobody stays on Alice's server, but Bob
    // reads it there through `proxy_to`.
    let quiet = alice
        .create(json!({
            "type": types[POST_TYPE],
            "permissions": {"read": "public"},
            "content": {"text": "Nobody is mentioned here"},
        }))
        .await;
    let quiet_id = quiet["id"].as_str().unwrap().to_owned();
    assert!(bob.get(alice.entity, &quiet_id).await.is_none());
    let key = bob.key();
    let mut url = bob.url("/records");
    url.query_pairs_mut()
        .append_pair("proxy_to", alice.entity)
        .append_pair("filter", &format!("$['type']={}+{POST_TYPE}", alice.entity));
    let proxied = bob.send(Call::get(url).signed(&key)).await;
    let proxied = proxied["records"].as_array().unwrap();
    let found = proxied
        .iter()
        .find(|r| r["id"] == quiet_id.as_str())
        .expect("the quiet post, through proxy_to");
    assert_eq!(found["source"], "proxy");
    assert_eq!(found["version"]["hash"], quiet["version"]["hash"]);
    let mut url = bob.url(&format!("/records/{}/{quiet_id}", alice.entity));
    url.query_pairs_mut().append_pair("proxy_to", alice.entity);
    let one = bob.send(Call::get(url).signed(&key)).await;
    assert_eq!(one["record"]["source"], "proxy");
    assert!(
        bob.get(alice.entity, &quiet_id).await.is_none(),
        "proxy_to stores nothing"
    );

    // Every version of every shared record has the same hash on both sides.
    let shared: Vec<(&str, String)> = std::iter::once((alice.entity, conversation_id.clone()))
        .chain(
            messages
                .iter()
                .map(|m| (alice.entity, m["id"].as_str().unwrap().to_owned())),
        )
        .chain([
            (bob.entity, reply_id.to_owned()),
            (alice.entity, post_id.clone()),
        ])
        .collect();
    for (author, id) in &shared {
        let theirs = alice.version_hashes(author, id).await;
        let ours = bob.version_hashes(author, id).await;
        assert!(!theirs.is_empty());
        assert_eq!(theirs, ours, "the versions of {author}/{id}");
    }
    // Nothing is left to deliver.
    for side in [&alice, &bob] {
        let out = folio(&side.server.data, &["outbox", "list", "--json"]);
        assert_eq!(out.trim(), "", "{}'s outbox: {out}", side.entity);
    }
}
