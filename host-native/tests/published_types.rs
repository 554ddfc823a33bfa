//! `folio type add --published ENTITY/RECORD_ID`: the real apps' six types
//! (`../shared/real-types`) installed by the ids `types.baq.dev` publishes
//! them under, in two users' stores, and then a conversation and a message
//! written as the real messaging app writes them, by an app granted the
//! types by name; the other user's store receives both. Installing again
//! changes nothing, other content under the same id is refused, and
//! `--emit-sql` writes SQL that makes the same records on a fresh database
//! (as on the worker's D1).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use folio_client::TrustOptions;
use folio_conformance::client::{Call, Http};
use folio_conformance::signer::AppKey;
use reqwest::Url;
use serde_json::{Value, json};
use support::{FOLIO, Server, add_app, add_me, folio, free_port, scratch};

const PUBLISHER: &str = "types.baq.dev";

/// Each real type's file and the record id it is published under
/// (`../shared/real-types/README.md`).
const REAL_TYPES: [(&str, &str); 6] = [
    ("post.json", "875d6b82645e4833a3f0dca3fb79d69d"),
    ("message.json", "153b3cb3a2f0494e950599de1cc13ef3"),
    ("conversation.json", "7583995c51cf44ad972fdc123105e1dc"),
    ("file.json", "2b6f7bc8ffd54c8db8062700c040e04f"),
    ("folder.json", "3050fc130d4142a9994af0ef7c89099e"),
    ("task.json", "fe727f22b5c34fb185a370449e4f0128"),
];
const MESSAGE: &str = "153b3cb3a2f0494e950599de1cc13ef3";
const CONVERSATION: &str = "7583995c51cf44ad972fdc123105e1dc";

fn real_type_file(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/real-types")
        .join(file)
}

/// `folio type add --published types.baq.dev/ID FILE --json` for `user`,
/// with `more` arguments: its one JSON object.
fn install(data: &Path, user: &str, file: &Path, id: &str, more: &[&str]) -> Value {
    let published = format!("{PUBLISHER}/{id}");
    let mut args = vec!["type", "add", "--user", user, "--published", &published];
    args.extend_from_slice(more);
    args.extend(["--json", file.to_str().expect("a UTF-8 path")]);
    serde_json::from_str(&folio(data, &args)).expect("one JSON object")
}

fn install_all(data: &Path, user: &str) -> Vec<Value> {
    REAL_TYPES
        .iter()
        .map(|(file, id)| install(data, user, &real_type_file(file), id, &[]))
        .collect()
}

fn version_link(installed: &Value) -> Value {
    json!({
        "entity": installed["entity"],
        "record_id": installed["record_id"],
        "version_hash": installed["version_hash"],
    })
}

/// One user's app on the running server.
struct Side<'a> {
    http: &'a Http,
    port: u16,
    user: &'a str,
    key: AppKey,
}

impl Side<'_> {
    fn url(&self, path: &str) -> Url {
        let url = format!("https://localhost:{}/api/{}{path}", self.port, self.user);
        Url::parse(&url).expect("a URL")
    }

    async fn create(&self, body: Value) -> Value {
        let call = Call::post(self.url("/records"))
            .json(&body)
            .signed(&self.key);
        let response = self.http.send(&call).await.expect("an answer");
        assert_eq!(response.status, 200, "{}", response.excerpt());
        response.json().expect("JSON")["record"].clone()
    }

    async fn get(&self, entity: &str, id: &str) -> Option<Value> {
        let call = Call::get(self.url(&format!("/records/{entity}/{id}"))).signed(&self.key);
        let response = self.http.send(&call).await.expect("an answer");
        match response.status {
            200 => Some(response.json().expect("JSON")["record"].clone()),
            404 => None,
            status => panic!("GET {entity}/{id}: {status} {}", response.excerpt()),
        }
    }

    /// Waits until this user's store holds `record`'s version.
    async fn wait_for(&self, record: &Value, server: &Server) -> Value {
        let entity = record["author"]["entity"].as_str().expect("an author");
        let id = record["id"].as_str().expect("an id");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(held) = self.get(entity, id).await
                && held["version"]["hash"] == record["version"]["hash"]
            {
                return held;
            }
            assert!(
                Instant::now() < deadline,
                "{} never received {entity}/{id}; the log:\n{}",
                self.user,
                server.log_lines().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_types_by_their_published_ids_take_the_apps_messages() {
    let data = scratch("published-types");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    // A second user of the same server, the other person in the conversation.
    folio(
        &data,
        &[
            "user",
            "add",
            "you",
            "--entity",
            "you.localhost",
            "--base-url",
            &format!("https://localhost:{port}"),
        ],
    );

    let mine = install_all(&data, "me");
    for (installed, (_, id)) in mine.iter().zip(REAL_TYPES) {
        assert_eq!(installed["entity"], PUBLISHER);
        assert_eq!(installed["record_id"], id);
    }
    // The same file makes the same version in every store.
    assert_eq!(install_all(&data, "you"), mine);
    // Again: nothing changes.
    let message_file = real_type_file("message.json");
    assert_eq!(install(&data, "me", &message_file, MESSAGE, &[]), mine[1]);
    // Other content under a published id is another type: refused.
    let mut changed: Value =
        serde_json::from_str(&std::fs::read_to_string(&message_file).expect("the file"))
            .expect("JSON");
    changed["icon_name"] = json!("mail");
    let changed_file = data.join("changed-message.json");
    std::fs::write(&changed_file, changed.to_string()).expect("written");
    let published = format!("{PUBLISHER}/{MESSAGE}");
    let refused = Command::new(FOLIO)
        .arg("--data-dir")
        .arg(&data)
        .args(["type", "add", "--user", "me", "--published", &published])
        .arg(&changed_file)
        .output()
        .expect("folio runs");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("another version"), "{stderr}");

    // A messaging app granted the two types by name, as the consent page
    // would grant what it asks for; the other user reads with full access.
    let scope = "read=conversation,message;write=conversation,message";
    let app = add_app(&data, "me", &["--scope", scope]);
    let your_app = add_app(&data, "you", &["--full-access"]);
    let server = Server::start(&data, port, &[]);
    let http = Http::new(&TrustOptions {
        ca_cert: Some(server.cert().display().to_string()),
        insecure: false,
    })
    .expect("an HTTP client");
    let me = Side {
        http: &http,
        port,
        user: "me",
        key: app.key(),
    };
    let you = Side {
        http: &http,
        port,
        user: "you",
        key: your_app.key(),
    };

    // The store serves each as the publisher's record, as a resolution.
    let message_type = me.get(PUBLISHER, MESSAGE).await.expect("installed");
    assert_eq!(message_type["source"], "resolution");
    assert_eq!(message_type["author"]["entity"], PUBLISHER);
    assert_eq!(message_type["version"]["hash"], mine[1]["version_hash"]);

    let readers = json!([{"entity": "localhost"}, {"entity": "you.localhost"}]);
    let conversation = me
        .create(json!({
            "type": version_link(&mine[2]),
            "permissions": {"read": readers, "write": []},
            "content": {},
        }))
        .await;
    assert_eq!(conversation["type"]["record_id"], CONVERSATION);
    let message = me
        .create(json!({
            "type": version_link(&mine[1]),
            "permissions": {"read": readers},
            "content": {
                "conversation": {"entity": "localhost", "record_id": conversation["id"]},
                "text": "Hello, with the real message type",
            },
        }))
        .await;
    assert_eq!(message["type"]["entity"], PUBLISHER);

    // The other store holds the same type versions, so it takes both.
    you.wait_for(&conversation, &server).await;
    let received = you.wait_for(&message, &server).await;
    assert_eq!(
        received["content"]["text"],
        "Hello, with the real message type"
    );
}

#[test]
fn with_emit_sql_the_published_types_are_sql_that_makes_the_same_records() {
    let dir = scratch("published-types-emit");
    let untouched = dir.join("never-created");
    let sql_of = |args: &[&str]| {
        let output = Command::new(FOLIO)
            .arg("--data-dir")
            .arg(&untouched)
            .args(args)
            .output()
            .expect("folio runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8(output.stdout).expect("UTF-8");
        let reported = String::from_utf8(output.stderr).expect("UTF-8");
        (text, reported)
    };
    let base_url = "https://localhost:8443";
    let (user_sql, _) = sql_of(&[
        "user",
        "add",
        "me",
        "--entity",
        "localhost",
        "--base-url",
        base_url,
        "--json",
        "--emit-sql",
        "-",
    ]);
    let mut types_sql = Vec::new();
    let mut hashes = Vec::new();
    for (file, id) in REAL_TYPES {
        let published = format!("{PUBLISHER}/{id}");
        let file = real_type_file(file);
        let (sql, reported) = sql_of(&[
            "type",
            "add",
            "--user",
            "me",
            "--entity",
            "localhost",
            "--published",
            &published,
            "--json",
            "--emit-sql",
            "-",
            file.to_str().expect("a UTF-8 path"),
        ]);
        assert!(sql.contains("INSERT INTO versions"), "{sql}");
        let reported: Value = serde_json::from_str(reported.trim()).expect("one JSON object");
        hashes.push(
            reported["version_hash"]
                .as_str()
                .expect("a hash")
                .to_owned(),
        );
        types_sql.push(sql);
    }
    assert!(!untouched.exists(), "the data directory is not touched");

    // Natively, the same versions.
    let native = dir.join("native");
    add_me(&native, base_url);
    let installed: Vec<String> = install_all(&native, "me")
        .iter()
        .map(|each| each["version_hash"].as_str().expect("a hash").to_owned())
        .collect();
    assert_eq!(installed, hashes);

    // A fresh database with the migrations, then the files, as
    // `wrangler d1 execute --file` runs them; each file again is refused
    // whole and changes nothing.
    let data = dir.join("data");
    assert_eq!(folio(&data, &["user", "list"]), "");
    let db = rusqlite::Connection::open(data.join("folio.db")).expect("the database");
    db.execute_batch("PRAGMA foreign_keys = ON;")
        .expect("foreign keys");
    db.execute_batch(&user_sql).expect("the user's SQL runs");
    for sql in &types_sql {
        db.execute_batch(&format!("BEGIN; {sql} COMMIT;"))
            .expect("the type's SQL runs");
    }
    let stored = |db: &rusqlite::Connection| -> Vec<(String, String, String)> {
        let mut statement = db
            .prepare(
                "SELECT record_id, source, version_hash FROM records WHERE author = ?1 \
                 ORDER BY record_id",
            )
            .expect("a query");
        statement
            .query_map([PUBLISHER], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .expect("rows")
            .map(|row| row.expect("a row"))
            .collect()
    };
    let before = stored(&db);
    let mut expected: Vec<(String, String, String)> = REAL_TYPES
        .iter()
        .zip(&hashes)
        .map(|((_, id), hash)| (id.to_string(), "resolution".to_owned(), hash.clone()))
        .collect();
    expected.sort();
    assert_eq!(before, expected);
    db.execute_batch(&format!("BEGIN; {} COMMIT;", types_sql[1]))
        .expect_err("the same rows again");
    let _ = db.execute_batch("ROLLBACK;");
    assert_eq!(stored(&db), before);
}
