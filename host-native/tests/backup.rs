//! `folio backup` while the server writes: 8 writers create records (one
//! of them uploading a blob for each and linking it) while the backup is
//! taken; then a second server starts on the backup as it is. The copy
//! passes `PRAGMA integrity_check`, holds a file for every blob row, and
//! serves every write acknowledged before the backup began, with the
//! version hash it was acknowledged with, and its blob's bytes.
//!
//! `FOLIO_BACKUP_ROUNDS` sets the number of backups (1 by default, what CI
//! runs; `scripts/backup-soak` runs 20 in release mode).

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use folio_conformance::client::Call;
use folio_conformance::context::Ctx;
use serde_json::{Value, json};
use support::{FOLIO, Server, add_app, add_me, free_port, scratch};

/// Writers creating records while the backup runs.
const WRITERS: usize = 8;
/// How long the writers run before the backup starts, and after it ends.
const LOAD_AROUND: Duration = Duration::from_millis(300);

/// A write the server acknowledged.
struct Acked {
    id: String,
    hash: String,
    /// The blob the record links, and its bytes.
    blob: Option<(String, Vec<u8>)>,
    at: Instant,
}

/// Creates records until `stop`; one writer (`with_blobs`) uploads a blob
/// for each and links it.
async fn writer(ctx: Arc<Ctx>, ty: Value, with_blobs: bool, stop: Arc<AtomicBool>) -> Vec<Acked> {
    let mut acked = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let mut content = json!({"title": format!("write {n}")});
        let mut blob = None;
        if with_blobs {
            let bytes: Vec<u8> = (0..512 + n * 7).map(|_| rand::random::<u8>()).collect();
            let uploaded = ctx
                .upload_blob(&bytes, "application/octet-stream")
                .await
                .expect("an upload");
            let hash = uploaded["hash"].as_str().expect("a hash").to_owned();
            content["file"] = json!({
                "hash": hash, "type": "application/octet-stream", "name": "data.bin", "size": bytes.len(),
            });
            blob = Some((hash, bytes));
        }
        let record = ctx
            .create(json!({"type": ty, "content": content}))
            .await
            .expect("a create");
        acked.push(Acked {
            id: record["id"].as_str().expect("an id").to_owned(),
            hash: record["version"]["hash"]
                .as_str()
                .expect("a hash")
                .to_owned(),
            blob,
            at: Instant::now(),
        });
    }
    acked
}

fn env_rounds() -> usize {
    match std::env::var("FOLIO_BACKUP_ROUNDS") {
        Ok(text) => text
            .parse()
            .ok()
            .filter(|&n: &usize| n > 0)
            .expect("FOLIO_BACKUP_ROUNDS is a whole number of at least 1"),
        Err(_) => 1,
    }
}

/// The copy's own checks, read straight from its files.
fn check_copy(dir: &Path) {
    let db = rusqlite::Connection::open_with_flags(
        dir.join("folio.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("the backup's database opens");
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity_check runs");
    assert_eq!(check, "ok", "PRAGMA integrity_check of the backup");
    let mut rows = db
        .prepare("SELECT DISTINCT hash FROM blobs")
        .expect("a statement");
    let hashes: Vec<String> = rows
        .query_map([], |row| row.get(0))
        .expect("the blob rows")
        .map(|hash| hash.expect("a hash"))
        .collect();
    for hash in hashes {
        let file = dir.join("blobs").join(&hash[..2]).join(&hash);
        assert!(file.is_file(), "no file for blob row {hash} in the backup");
    }
    for side in ["session.key", "tls/cert.pem", "tls/key.pem"] {
        assert!(dir.join(side).is_file(), "{side} is in the backup");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_taken_under_writes_holds_every_write_acknowledged_before_it() {
    let data = scratch("backup");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let app = add_app(&data, "me", &["--full-access"]);
    // No write rate: the writers would wait out its 429s, not the backup.
    let server =
        tokio::task::block_in_place(|| Server::start(&data, port, &["--write-rate", "off"]));
    let ctx = Arc::new(Ctx::new(&app.target(&server)).expect("a client"));
    let ty = ctx.note_type().await.expect("a type");

    let rounds = env_rounds();
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|i| tokio::spawn(writer(ctx.clone(), ty.clone(), i == 0, stop.clone())))
            .collect();
        tokio::time::sleep(LOAD_AROUND).await;

        let copy = scratch(&format!("backup-copy-{round}"));
        std::fs::remove_dir(&copy).expect("the backup's place is free");
        let began = Instant::now();
        let output = tokio::process::Command::new(FOLIO)
            .arg("--data-dir")
            .arg(&data)
            .arg("backup")
            .arg(&copy)
            .output()
            .await
            .expect("folio backup runs");
        let took = began.elapsed();
        assert!(
            output.status.success(),
            "folio backup failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        tokio::time::sleep(LOAD_AROUND).await;
        stop.store(true, Ordering::Relaxed);
        let mut acked = Vec::new();
        for writer in writers {
            acked.extend(writer.await.expect("a writer"));
        }
        let before: Vec<&Acked> = acked.iter().filter(|write| write.at < began).collect();
        let during = acked
            .iter()
            .filter(|write| write.at >= began && write.at < began + took)
            .count();
        assert!(
            !before.is_empty(),
            "writes were acknowledged before the backup"
        );
        // A fast backup may see none land while it runs (a release build's
        // takes a few milliseconds); the writers never stop meanwhile.
        let since = acked.iter().filter(|write| write.at >= began).count();
        assert!(
            since > 0,
            "the server acknowledged writes once the backup began"
        );

        check_copy(&copy);
        let copy_port = free_port();
        let restored = tokio::task::block_in_place(|| Server::start(&copy, copy_port, &[]));
        let on_copy = Ctx::new(&app.target(&restored)).expect("a client");
        for write in &before {
            let response = on_copy.get_record(&write.id).await.expect("an answer");
            assert_eq!(
                response.status, 200,
                "round {round}: record {} acknowledged before the backup is missing from it",
                write.id
            );
            let record = response.json().expect("a record");
            assert_eq!(record["record"]["version"]["hash"], write.hash.as_str());
            if let Some((hash, bytes)) = &write.blob {
                let url = on_copy
                    .blob_url(&write.id, hash, "data.bin")
                    .expect("a blob URL");
                let got = on_copy
                    .send(Call::get(url).signed(&on_copy.full))
                    .await
                    .expect("a download");
                assert_eq!(got.status, 200, "round {round}: the blob of {}", write.id);
                assert_eq!(&got.body, bytes, "round {round}: the blob's bytes");
            }
        }
        // The longest the writers went without an acknowledgement, and when.
        let mut times: Vec<Instant> = acked.iter().map(|write| write.at).collect();
        times.sort();
        let (pause, pause_at) = times
            .windows(2)
            .map(|pair| (pair[1] - pair[0], pair[0]))
            .max()
            .unwrap_or((Duration::ZERO, began));
        let pause_from = pause_at.saturating_duration_since(began).as_millis() as i128
            - began.saturating_duration_since(pause_at).as_millis() as i128;
        println!(
            "backup round {round}: {} writes acknowledged before it, {during} during its {} ms, \
             {} in all; the longest pause {} ms, from {pause_from} ms after it began",
            before.len(),
            took.as_millis(),
            acked.len(),
            pause.as_millis(),
        );
        drop(restored);
    }
}
