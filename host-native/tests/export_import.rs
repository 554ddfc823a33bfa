//! `folio export` → `folio import` moves a user to a fresh server whole:
//! through the API, every record, every version (same hashes, same
//! order), every blob's bytes and every app are the same there, and the
//! apps' signatures still verify. An archive with one byte changed, or cut
//! short, is refused and imports nothing.

mod support;

use std::path::Path;
use std::process::Command;

use folio_conformance::client::Call;
use folio_conformance::context::Ctx;
use serde_json::json;
use support::{FOLIO, Server, add_app, add_me, folio, free_port, scratch};

/// Every record of the store (deleted ones included) with its versions'
/// hashes, oldest first, by record id; and each blob record's bytes.
async fn contents(
    ctx: &Ctx,
    blob_records: &[(String, String)],
) -> (Vec<(String, Vec<String>)>, Vec<Vec<u8>>) {
    let page = ctx
        .list(&[("page_size", "200"), ("include_deleted", "true")])
        .await
        .expect("a list");
    assert!(page.get("next_page").is_none(), "one page holds the store");
    let mut records = Vec::new();
    for record in page["records"].as_array().expect("records") {
        let id = record["id"].as_str().expect("an id").to_owned();
        let author = record["author"]["entity"].as_str().expect("an author");
        let url = ctx.record_url_at(author, &id).expect("a URL");
        let url = format!("{url}/versions?page_size=200")
            .parse()
            .expect("a URL");
        let versions = ctx
            .send(Call::get(url).signed(&ctx.full))
            .await
            .expect("the versions");
        assert_eq!(versions.status, 200, "versions of {id}");
        let hashes = versions.json().expect("JSON")["records"]
            .as_array()
            .expect("versions")
            .iter()
            .map(|version| {
                version["version"]["hash"]
                    .as_str()
                    .expect("a hash")
                    .to_owned()
            })
            .collect();
        records.push((id, hashes));
    }
    records.sort();
    let mut blobs = Vec::new();
    for (id, hash) in blob_records {
        let url = ctx.blob_url(id, hash, "data.bin").expect("a URL");
        let got = ctx
            .send(Call::get(url).signed(&ctx.full))
            .await
            .expect("a blob");
        assert_eq!(got.status, 200);
        blobs.push(got.body);
    }
    (records, blobs)
}

fn import(data: &Path, archive: &Path) -> std::process::Output {
    Command::new(FOLIO)
        .arg("--data-dir")
        .arg(data)
        .arg("import")
        .arg(archive)
        .output()
        .expect("folio import runs")
}

/// The files under `dir` (recursively).
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                found.extend(files(&path));
            } else {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_moves_between_servers_whole_and_a_changed_archive_is_refused() {
    let from = scratch("export-from");
    let port = free_port();
    let password = add_me(&from, &format!("https://localhost:{port}"));
    let app = add_app(&from, "me", &["--full-access"]);
    let other = add_app(&from, "me", &["--full-access"]);
    let server = tokio::task::block_in_place(|| Server::start(&from, port, &[]));
    let ctx = Ctx::new(&app.target(&server)).expect("a client");

    // Records with several versions, a deleted one, and blobs (one empty).
    let ty = ctx.note_type().await.expect("a type");
    for n in 0..5 {
        let record = ctx
            .note(&ty, json!({"title": format!("note {n}")}))
            .await
            .expect("a note");
        let id = record["id"].as_str().unwrap().to_owned();
        let mut parent = record["version"]["hash"].as_str().unwrap().to_owned();
        for edit in 0..n {
            let body = json!({
                "content": {"title": format!("note {n}, edit {edit}")},
                "version": {"parent_hash": parent},
            });
            let call = Call::put(ctx.record_url(&id).unwrap())
                .json(&body)
                .signed(&ctx.full);
            let updated = ctx
                .send(call)
                .await
                .expect("an update")
                .json()
                .expect("JSON");
            parent = updated["record"]["version"]["hash"]
                .as_str()
                .expect("a hash")
                .to_owned();
        }
        if n == 4 {
            let body = json!({"version": {"parent_hash": parent}});
            let call = Call::delete(ctx.record_url(&id).unwrap())
                .json(&body)
                .signed(&ctx.full);
            assert_eq!(ctx.send(call).await.expect("a delete").status, 200);
        }
    }
    let mut blob_records = Vec::new();
    for bytes in [vec![], b"some bytes".to_vec(), vec![9u8; 1_500_000]] {
        let uploaded = ctx
            .upload_blob(&bytes, "application/octet-stream")
            .await
            .expect("an upload");
        let hash = uploaded["hash"].as_str().unwrap().to_owned();
        let file = json!({"hash": hash, "type": "application/octet-stream", "name": "data.bin", "size": bytes.len()});
        let record = ctx
            .note(&ty, json!({"title": "a file", "file": file}))
            .await
            .expect("a blob record");
        blob_records.push((record["id"].as_str().unwrap().to_owned(), hash));
    }
    let before = contents(&ctx, &blob_records).await;
    let apps_before = folio(&from, &["app", "list", "--user", "me", "--json"]);

    // Exported while the server runs.
    let archive = from.join("me.folio");
    folio(
        &from,
        &[
            "export",
            "--user",
            "me",
            "--with-credentials",
            archive.to_str().unwrap(),
        ],
    );
    drop(server);
    let bytes = std::fs::read(&archive).expect("the archive");

    // One byte changed in the middle of a version line, or the end cut off:
    // refused, and nothing is imported.
    // The destination serves at the same base URL (the first server is
    // stopped), so the Entity record needs no new version naming it.
    let to = scratch("import-to");
    folio(&to, &["user", "list"]);
    let settings = json!({"base_url": format!("https://localhost:{port}")});
    std::fs::write(to.join("settings.json"), settings.to_string()).unwrap();
    let mut changed = bytes.clone();
    let middle = bytes.len() / 3;
    let at = middle
        + bytes[middle..]
            .iter()
            .position(|b| b.is_ascii_digit())
            .unwrap();
    changed[at] = if changed[at] == b'7' { b'8' } else { b'7' };
    let cut = &bytes[..bytes.len() - 10];
    for (what, archive_bytes) in [("one byte changed", &changed[..]), ("cut short", cut)] {
        let file = to.join("bad.folio");
        std::fs::write(&file, archive_bytes).unwrap();
        let output = import(&to, &file);
        assert!(
            !output.status.success(),
            "an archive with {what} was imported"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("nothing was imported"), "{what}: {stderr}");
        assert_eq!(folio(&to, &["user", "list"]), "", "{what}: a user was left");
        assert_eq!(
            files(&to.join("blobs")),
            Vec::<std::path::PathBuf>::new(),
            "{what}: files were left"
        );
    }

    // The archive as written: the same store on the other server.
    let output = import(&to, &archive);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let again = import(&to, &archive);
    assert!(
        !again.status.success(),
        "a second import of the same user is refused"
    );
    assert_eq!(
        folio(&to, &["app", "list", "--user", "me", "--json"]),
        apps_before
    );
    let moved = tokio::task::block_in_place(|| Server::start(&to, port, &[]));
    let on_moved = Ctx::new(&app.target(&moved)).expect("a client");
    let after = contents(&on_moved, &blob_records).await;
    assert_eq!(after.0, before.0, "records and version hashes, in order");
    assert!(
        after
            .0
            .iter()
            .map(|(_, versions)| versions.len())
            .sum::<usize>()
            > 15
    );
    assert_eq!(after.1, before.1, "blob bytes");
    // The other app's key moved too: it still signs.
    let scoped = Ctx::new(&other.target(&moved)).expect("a client");
    let list = scoped
        .send(Call::get(scoped.records_url().unwrap()).signed(&scoped.full))
        .await
        .expect("a list");
    assert_eq!(list.status, 200);
    // The password came with --with-credentials.
    let db = rusqlite::Connection::open(to.join("folio.db")).unwrap();
    let hash: String = db
        .query_row(
            "SELECT password_hash FROM users WHERE name = 'me'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(folio_core::service::consent::verify_password(
        &hash, &password
    ));
}

/// An archive of `localhost` imported where the base URL is another host:
/// that entity may be another server's, so the import is refused unless
/// the operator passes --allow-foreign-entity (docs/federation.md §1).
#[test]
fn an_archive_of_a_foreign_entity_needs_the_operators_word() {
    let from = scratch("export-foreign-from");
    add_me(&from, "https://localhost:8443");
    let archive = from.join("me.folio");
    folio(
        &from,
        &["export", "--user", "me", archive.to_str().unwrap()],
    );
    let to = scratch("export-foreign-to");
    folio(&to, &["user", "list"]);
    let settings = json!({"base_url": "https://elsewhere.example"});
    std::fs::write(to.join("settings.json"), settings.to_string()).unwrap();

    let refused = import(&to, &archive);
    assert!(!refused.status.success(), "localhost was imported");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--allow-foreign-entity"), "{stderr}");
    assert_eq!(folio(&to, &["user", "list"]), "");

    let allowed = Command::new(FOLIO)
        .arg("--data-dir")
        .arg(&to)
        .args(["import", "--allow-foreign-entity"])
        .arg(&archive)
        .output()
        .expect("folio import runs");
    let stderr = String::from_utf8_lossy(&allowed.stderr);
    assert!(allowed.status.success(), "{stderr}");
    assert!(stderr.contains("WARNING"), "{stderr}");
    assert_eq!(folio(&to, &["user", "list"]), "me\tlocalhost\n");
}
