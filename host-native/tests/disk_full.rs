//! A full disk, for real: the data directory lives on a 32 MiB tmpfs this
//! test mounts, and a filler file takes every byte left. Writes and blob
//! uploads are then refused with `server/503-unavailable` and a
//! `Retry-After` (never a 500, never acknowledged), reads go on, and once
//! the filler is removed the server writes again by itself; every write it
//! acknowledged is still there after a restart.
//!
//! Mounting needs root (CAP_SYS_ADMIN), which the CI machines and this
//! project's development machines have; without it the test fails and says
//! so rather than pass without testing anything.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use folio_conformance::client::{Auth, Call, Http, Response, now_ms, sign_call};
use folio_conformance::signer::{AppKey, Layout};
use serde_json::{Value, json};
use support::{App, Server, add_app, add_me, free_port, scratch};

const TMPFS_SIZE: &str = "32m";

/// The tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Tmpfs {
        std::fs::create_dir_all(at).expect("a mount point");
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("mount runs");
        assert!(
            output.status.success(),
            "this test mounts a {TMPFS_SIZE} tmpfs for the data directory and needs root \
             (CAP_SYS_ADMIN): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Tmpfs(at.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Fills the file system with one file until no byte is left.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).expect("the filler");
    let block = vec![0xa5; 64 << 10];
    loop {
        match file.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.raw_os_error() == Some(28) => break, // ENOSPC
            Err(error) => panic!("filling the disk: {error}"),
        }
    }
    // A last partial block, byte by byte.
    while matches!(file.write(&[0]), Ok(1)) {}
}

/// Signs each request as the full-access app, just before sending it.
struct Client {
    http: Http,
    key: AppKey,
    base_url: String,
    nonces: std::cell::Cell<u64>,
}

impl Client {
    fn new(server: &Server, app: &App) -> Client {
        let target = app.target(server);
        Client {
            http: Http::new(&target)
                .expect("an HTTP client")
                .without_retries(),
            key: app.key(),
            base_url: server.base_url(),
            nonces: std::cell::Cell::new(0),
        }
    }

    /// The URL of `path` in the user's API, as `Call` takes it.
    fn url<U: std::str::FromStr<Err: std::fmt::Debug>>(&self, path: &str) -> U {
        format!("{}/api/me{path}", self.base_url)
            .parse()
            .expect("a URL")
    }

    async fn send(&self, mut call: Call<'static>) -> Response {
        let nonce = self.nonces.get();
        self.nonces.set(nonce + 1);
        call.auth = Auth::Header(sign_call(
            &call,
            &self.key,
            &[],
            Layout::WithAlgorithmLine,
            now_ms(),
            &format!("{nonce:010}"),
        ));
        self.http.send(&call).await.expect("an answer")
    }

    async fn create(&self, ty: &Value, n: usize) -> Response {
        let body = json!({"type": ty, "content": {"n": n, "pad": "x".repeat(8 << 10)}});
        self.send(Call::post(self.url("/records")).json(&body))
            .await
    }

    async fn upload(&self, bytes: Vec<u8>) -> Response {
        let call = Call::post(self.url("/blobs")).body(bytes, Some("application/octet-stream"));
        self.send(call).await
    }
}

/// Each acknowledged write reads back with the version hash it was answered with.
async fn all_there(client: &Client, acked: &[(String, String)]) {
    for (id, hash) in acked {
        let read = client
            .send(Call::get(client.url(&format!("/records/localhost/{id}"))))
            .await;
        assert_eq!(read.status, 200, "{}", read.excerpt());
        assert_eq!(
            read.json().expect("a record")["record"]["version"]["hash"],
            *hash
        );
    }
}

/// The id and version hash of a write's answer.
fn written(response: &Response) -> (String, String) {
    let record = &response.json().expect("a record")["record"];
    let text = |value: &Value| value.as_str().expect("a string").to_owned();
    (text(&record["id"]), text(&record["version"]["hash"]))
}

fn storage_full(response: &Response, what: &str) {
    assert_eq!(response.status, 503, "{what}: {}", response.excerpt());
    let body = response.json().expect("problem+json");
    assert_eq!(body["code"], "unavailable", "{what}: {body}");
    assert_eq!(response.header("retry-after"), Some("30"), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_keeps_reads_and_recovers_when_space_returns() {
    let root = scratch("disk-full");
    let tmpfs = Tmpfs::mount(&root.join("fs"));
    let data = tmpfs.0.join("data");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let app = add_app(&data, "me", &["--full-access"]);
    let flags = ["--write-rate", "off", "--read-rate", "off"];
    let mut server = tokio::task::block_in_place(|| Server::start(&data, port, &flags));
    let client = Client::new(&server, &app);

    let types = client
        .send(Call::get(client.url("/records?page_size=200")))
        .await
        .json()
        .expect("a page");
    let type_type = types["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|r| r["source"] == "resolution" && r["content"]["name"] == "type")
        .expect("the built-in Type type")
        .clone();
    let type_link = |record: &Value| {
        json!({"entity": record["author"]["entity"], "record_id": record["id"],
               "version_hash": record["version"]["hash"]})
    };
    let schema = json!({"type": "object", "properties": {"content": {"type": "object",
        "properties": {"n": {"type": "int"}, "pad": {"type": "string"}}}}});
    let created = client
        .send(Call::post(client.url("/records")).json(
            &json!({"type": type_link(&type_type), "content": {"name": "note", "schema": schema}}),
        ))
        .await;
    assert_eq!(created.status, 200, "{}", created.excerpt());
    let ty = type_link(&created.json().expect("a record")["record"]);

    // Some writes, then a full disk: write until the server finds out.
    let mut acked: Vec<(String, String)> = Vec::new();
    for n in 0..20 {
        let response = client.create(&ty, n).await;
        assert_eq!(response.status, 200, "{}", response.excerpt());
        acked.push(written(&response));
    }
    let filler = tmpfs.0.join("filler");
    fill(&filler);
    let before = acked.len();
    let refused = loop {
        let n = acked.len();
        assert!(n < 4_000, "4,000 writes of 8 KiB succeeded on a full disk");
        let response = client.create(&ty, n).await;
        if response.status != 200 {
            break response;
        }
        acked.push(written(&response));
    };
    println!(
        "{} writes acknowledged on the full disk before the first refusal",
        acked.len() - before
    );
    storage_full(&refused, "a write on a full disk");
    storage_full(
        &client.upload(vec![7; 256 << 10]).await,
        "an upload on a full disk",
    );

    // Reads go on, and every acknowledged write is there.
    all_there(&client, &acked).await;

    // Space comes back: the server writes again by itself.
    std::fs::remove_file(&filler).expect("the filler goes");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = client.create(&ty, acked.len()).await;
        if response.status == 200 {
            acked.push(written(&response));
            break;
        }
        storage_full(&response, "a write while space returns");
        assert!(
            Instant::now() < deadline,
            "no write succeeded 10 s after space returned"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let uploaded = client.upload(vec![7; 256 << 10]).await;
    assert_eq!(uploaded.status, 200, "{}", uploaded.excerpt());

    // Nothing acknowledged is lost across a restart.
    server.kill();
    let server = tokio::task::block_in_place(|| Server::start(&data, port, &flags));
    let client = Client::new(&server, &app);
    all_there(&client, &acked).await;
    drop(server);
}
