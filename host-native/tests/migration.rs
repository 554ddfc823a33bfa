//! A data directory written by the release before storage v2 (schema 4)
//! is upgraded by `folio serve` and reads back identical: every version of
//! every record (deleted ones included), every blob's bytes, and the
//! answer to each list query the fixture recorded, filters on envelope and
//! content paths, bare values, tag sorts and `distinct` among them.
//!
//! The fixture in `tests/fixtures/store-v4` was made by
//! `write_the_schema_4_fixture` below, run with `--ignored` on commit
//! `d6e250f` (schema 4). Run on a later build it makes a store of that
//! build's schema, and says so: a fixture of the old layout cannot be made
//! again by new code.

mod support;

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use folio_conformance::client::Call;
use folio_conformance::context::{Ctx, record_link, record_value, type_filter, version_link};
use serde_json::{Value, json};
use support::{App, Server, add_app, add_me, free_port, scratch};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v4")
}

/// The list queries whose answers the fixture records: each a set of
/// parameters, `{type}` standing for the note type's filter value and
/// `{first}` for the first note's.
const QUERIES: &[&[(&str, &str)]] = &[
    &[("filter", "$['type']={type}")],
    &[("filter", "$['type']={type},$['author']=localhost")],
    &[(
        "filter",
        "$['type']={type},$['version']['author']=localhost",
    )],
    &[("filter", "$['type']={type},$['content']['tags'][*]=\"red\"")],
    &[(
        "filter",
        "$['type']={type},$['content']['person']=bob.example",
    )],
    &[("filter", "$['type']={type},$['content']['parent']={first}")],
    &[("filter", "$['type']={type},$['content']['file']=")],
    &[(
        "filter",
        "$['type']={type},$['permissions']['read'][*]=carol.example",
    )],
    &[("filter", "$['type']={type}"), ("filter", "\"blue\"")],
    &[("filter", "bob.example")],
    &[("filter", "{first}")],
    &[("filter", "{type}")],
    &[("filter", "$['author']=")],
    &[
        ("filter", "$['type']={type}"),
        ("sort", "$['content']['label']+asc"),
    ],
    &[
        ("filter", "$['type']={type}"),
        ("sort", "$['created_at']+asc"),
    ],
    &[
        ("filter", "$['type']={type}"),
        ("sort", "$['version']['received_at']+desc"),
    ],
    &[
        ("filter", "$['type']={type}"),
        ("distinct", "$['content']['label']"),
    ],
    &[("filter", "$['type']={type}"), ("distinct", "$['type']")],
    &[("filter", "$['type']={type}"), ("include_deleted", "true")],
];

/// The parameters of one recorded query, with the fixture's values put in.
fn query_params(query: &[(&str, &str)], ty: &str, first: &str) -> Vec<(String, String)> {
    query
        .iter()
        .map(|(name, value)| {
            let value = value.replace("{type}", ty).replace("{first}", first);
            (name.to_string(), value)
        })
        .collect()
}

/// The ids of every record a query lists, through every page.
async fn listed(ctx: &Ctx, params: &[(String, String)]) -> Vec<String> {
    listed_records(ctx, params)
        .await
        .iter()
        .map(|record| record["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// Every record a query lists, through every page.
async fn listed_records(ctx: &Ctx, params: &[(String, String)]) -> Vec<Value> {
    let mut params: Vec<(String, String)> = params.to_vec();
    params.push(("page_size".into(), "7".into()));
    let mut ids = Vec::new();
    loop {
        let pairs: Vec<(&str, &str)> = params
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let page = ctx.list(&pairs).await.expect("a list");
        ids.extend(page["records"].as_array().expect("records").iter().cloned());
        let Some(next) = page["next_page"].as_str() else {
            return ids;
        };
        let query = next.split_once('?').map_or(next, |(_, q)| q);
        let url = reqwest::Url::parse(&format!("https://x/?{query}")).expect("a query");
        params = url.query_pairs().into_owned().collect();
    }
}

/// Every version of every record, oldest first, by record id.
async fn every_version(ctx: &Ctx) -> serde_json::Map<String, Value> {
    let listed = listed_records(ctx, &[("include_deleted".into(), "true".into())]).await;
    let mut records = serde_json::Map::new();
    for record in listed {
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
        let body = versions.json().expect("JSON");
        assert!(body.get("next_page").is_none(), "one page of versions");
        records.insert(id, body["records"].clone());
    }
    records
}

async fn download(ctx: &Ctx, id: &str, hash: &str) -> Vec<u8> {
    let url = ctx.blob_url(id, hash, "file.bin").expect("a URL");
    let got = ctx
        .send(Call::get(url).signed(&ctx.full))
        .await
        .expect("a blob");
    assert_eq!(got.status, 200, "blob of {id}");
    got.body
}

/// What the fixture's server answered: every version, each query's ids,
/// each blob's bytes.
async fn answers(ctx: &Ctx, ty: &str, first: &str, blobs: &[(String, String)]) -> Value {
    let mut queries = Vec::new();
    for query in QUERIES {
        let params = query_params(query, ty, first);
        queries.push(json!({"params": params, "ids": listed(ctx, &params).await}));
    }
    let mut blob_bytes = Vec::new();
    for (id, hash) in blobs {
        let bytes = download(ctx, id, hash).await;
        blob_bytes.push(json!({"record": id, "hash": hash, "bytes": STANDARD.encode(bytes)}));
    }
    json!({
        "records": every_version(ctx).await,
        "queries": queries,
        "blobs": blob_bytes,
    })
}

fn app_json(app: &App) -> Value {
    json!({
        "app_id": app.app_id,
        "authorization_id": app.authorization_id,
        "private_key": app.private_key,
    })
}

fn read_app(value: &Value) -> App {
    let text = |name: &str| value[name].as_str().expect("app field").to_owned();
    App {
        app_id: text("app_id"),
        authorization_id: text("authorization_id"),
        private_key: text("private_key"),
    }
}

/// Copies a directory tree.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("the fixture").flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("a copy");
        }
    }
}

fn schema_version(data: &Path) -> i64 {
    let db = rusqlite::Connection::open(data.join("folio.db")).expect("the database");
    db.query_row("PRAGMA user_version", [], |row| row.get(0))
        .expect("user_version")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_4_store_upgrades_on_serve_and_reads_back_identical() {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture().join("expected.json")).expect("expected.json"),
    )
    .expect("JSON");
    let data = scratch("migration-v4");
    copy_dir(&fixture().join("data"), &data);
    assert_eq!(schema_version(&data), 4, "the fixture is of schema 4");

    let port = free_port();
    let server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));
    assert!(schema_version(&data) > 4, "serve upgraded the store");
    let app = read_app(&expected["app"]);
    let ctx = Ctx::new(&app.target(&server)).expect("a client");
    let ty = expected["type"].as_str().expect("type");
    let first = expected["first"].as_str().expect("first");
    let blobs: Vec<(String, String)> = expected["answers"]["blobs"]
        .as_array()
        .expect("blobs")
        .iter()
        .map(|b| {
            let text = |name: &str| b[name].as_str().expect("blob field").to_owned();
            (text("record"), text("hash"))
        })
        .collect();
    let got = answers(&ctx, ty, first, &blobs).await;
    let want = &expected["answers"];

    // The server names its new port in the Entity record: that record gains
    // one version, every other is exactly as it was.
    let entity_record = expected["entity_record"].as_str().expect("entity record");
    let (got_records, want_records) = (&got["records"], &want["records"]);
    let want_map = want_records.as_object().expect("records");
    assert_eq!(
        got_records.as_object().expect("records").len(),
        want_map.len(),
        "the same records"
    );
    for (id, versions) in want_map {
        let got_versions = got_records[id].as_array().expect("versions of a record");
        let want_versions = versions.as_array().expect("versions");
        if id == entity_record {
            assert_eq!(got_versions.len(), want_versions.len() + 1, "{id}");
            assert_eq!(&got_versions[..want_versions.len()], &want_versions[..]);
        } else {
            assert_eq!(got_versions, want_versions, "the versions of {id}");
        }
    }
    assert_eq!(got["queries"], want["queries"], "the lists answer alike");
    assert_eq!(got["blobs"], want["blobs"], "the blobs read back");
    let queries = want["queries"].as_array().expect("queries");
    let nonempty = queries
        .iter()
        .filter(|q| !q["ids"].as_array().expect("ids").is_empty())
        .count();
    assert!(nonempty >= queries.len() - 2, "the queries find records");

    // The notes stored before search (migration 11) were indexed before
    // the server served: a search for the word every note's title holds
    // lists the type's notes, as the type's own list does.
    let every = [
        ("filter", "$['type']={type}"),
        ("sort", "$['received_at']+desc"),
    ];
    let notes = listed(&ctx, &query_params(&every, ty, first)).await;
    let mut searched = every.to_vec();
    searched.push(("search", "NOTE"));
    let found = listed(&ctx, &query_params(&searched, ty, first)).await;
    assert!(!notes.is_empty(), "the fixture holds notes");
    assert_eq!(found, notes, "the migrated notes are found by their words");

    // And the upgraded store takes writes: a new version of a migrated
    // note, found again by its new tag, and a new note.
    let live = want["queries"][0]["ids"][0]
        .as_str()
        .expect("a listed note");
    let latest = want_map[live]
        .as_array()
        .expect("versions")
        .last()
        .expect("a version");
    let mut content = latest["content"].clone();
    content["tags"] = json!(["after-upgrade"]);
    let body = json!({"content": content, "version": {"parent_hash": latest["version"]["hash"]}});
    let call = Call::put(ctx.record_url(live).unwrap())
        .json(&body)
        .signed(&ctx.full);
    assert_eq!(ctx.send(call).await.expect("an update").status, 200);
    let created = ctx
        .create(json!({
            "type": latest["type"],
            "content": {"title": "after the upgrade", "tags": ["after-upgrade"]},
        }))
        .await
        .expect("a create");
    let tagged = listed(
        &ctx,
        &query_params(
            &[("filter", "$['content']['tags'][*]=\"after-upgrade\"")],
            ty,
            first,
        ),
    )
    .await;
    let mut want_tagged = vec![live.to_owned(), created["id"].as_str().unwrap().to_owned()];
    want_tagged.sort();
    let mut tagged_sorted = tagged.clone();
    tagged_sorted.sort();
    assert_eq!(tagged_sorted, want_tagged);
    drop(server);
}

/// Writes `tests/fixtures/store-v4` with the current build. See the module
/// comment: only meaningful on a build of schema 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "makes the fixture; run on a schema-4 build only"]
async fn write_the_schema_4_fixture() {
    let data = scratch("migration-fixture");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let app = add_app(&data, "me", &["--full-access"]);
    assert_eq!(schema_version(&data), 4, "this build is not of schema 4");
    let server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));
    let ctx = Ctx::new(&app.target(&server)).expect("a client");

    let ty = ctx.note_type().await.expect("a type");
    // Entity records make the two people known entities.
    for person in ["bob.example", "carol.example"] {
        let name = person.split('.').next().unwrap();
        ctx.known_entity(person, name)
            .await
            .expect("an Entity record");
    }
    let tags = ["red", "blue", "green"];
    let people = ["bob.example", "carol.example"];
    let mut notes: Vec<Value> = Vec::new();
    let mut blobs = Vec::new();
    for n in 0..40usize {
        let mut content = json!({
            "title": format!("note {n}"),
            "tags": [tags[n % 3], tags[(n / 3) % 3]],
            "count": n,
        });
        if n % 4 != 3 {
            content["label"] = json!(format!("label {}", n % 5));
        }
        if n % 2 == 0 {
            content["person"] = json!({"entity": people[n % 4 / 2]});
        }
        if n > 0 {
            content["ref"] = record_link(&notes[n / 2]).unwrap();
            content["pinned"] = version_link(&notes[n - 1]).unwrap();
        }
        if n > 0 && n % 3 == 0 {
            content["parent"] = record_link(&notes[0]).unwrap();
        }
        if n % 7 == 1 && n % 3 != 0 {
            let bytes: Vec<u8> = (0..n * 100).map(|i| (i * 31 % 251) as u8).collect();
            let uploaded = ctx
                .upload_blob(&bytes, "application/octet-stream")
                .await
                .expect("an upload");
            let hash = uploaded["hash"].as_str().unwrap().to_owned();
            content["file"] = json!({"hash": hash, "type": "application/octet-stream",
                "name": "file.bin", "size": bytes.len()});
            blobs.push(hash);
        }
        let mut body = json!({"type": ty, "content": content});
        match n % 5 {
            0 => body["permissions"] = json!({"read": "public"}),
            1 => body["permissions"] = json!({"read": [{"entity": "carol.example"}]}),
            _ => {}
        }
        let record = ctx.create(body).await.expect("a note");
        if let Some(hash) = record["content"]["file"]["hash"].as_str()
            && blobs.last().map(String::as_str) == Some(hash)
        {
            let id = record["id"].as_str().unwrap().to_owned();
            blobs.pop();
            blobs.push(format!("{id} {hash}"));
        }
        notes.push(record);
    }
    // Updates (a chain of three on some), and deletions: one plain, and the
    // parent of every third note, whose deletion cascades.
    for n in (2..40).step_by(5) {
        for edit in 0..(n % 3 + 1) {
            let note = &notes[n];
            let mut content = note["content"].clone();
            content["title"] = json!(format!("note {n}, edit {edit}"));
            content["tags"] = json!([tags[(n + edit + 1) % 3]]);
            let body = json!({
                "content": content,
                "version": {"parent_hash": note["version"]["hash"]},
            });
            let call = Call::put(ctx.record_url(note["id"].as_str().unwrap()).unwrap())
                .json(&body)
                .signed(&ctx.full);
            let updated = ctx.send(call).await.expect("an update");
            assert_eq!(updated.status, 200, "{:?}", updated.json());
            notes[n] = updated.json().unwrap()["record"].clone();
        }
    }
    for n in [0usize, 11] {
        let note = &notes[n];
        let body = json!({"version": {"parent_hash": note["version"]["hash"]}});
        let call = Call::delete(ctx.record_url(note["id"].as_str().unwrap()).unwrap())
            .json(&body)
            .signed(&ctx.full);
        assert_eq!(ctx.send(call).await.expect("a delete").status, 200);
    }

    let ty_value = format!(
        "{}+{}",
        ty["entity"].as_str().unwrap(),
        ty["record_id"].as_str().unwrap()
    );
    let _ = type_filter(&ty).unwrap();
    let first = record_value(&notes[0]).unwrap();
    let blobs: Vec<(String, String)> = blobs
        .iter()
        .filter_map(|b| b.split_once(' '))
        .map(|(id, hash)| (id.to_owned(), hash.to_owned()))
        .collect();
    let answers = answers(&ctx, &ty_value, &first, &blobs).await;
    let entity_record = answers["records"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, v)| v[0]["content"]["entity"].as_str() == Some("localhost"))
        .map(|(id, _)| id.clone())
        .expect("the Entity record");
    drop(server);

    let out = fixture();
    let _ = std::fs::remove_dir_all(&out);
    let data_out = out.join("data");
    std::fs::create_dir_all(&data_out).unwrap();
    // One database file without its WAL: checkpointed by a clean stop,
    // copied with SQLite's backup so the WAL is folded in either way.
    let db = rusqlite::Connection::open(data.join("folio.db")).unwrap();
    db.execute(
        "VACUUM INTO ?1",
        [data_out.join("folio.db").to_str().unwrap()],
    )
    .unwrap();
    copy_dir(&data.join("blobs"), &data_out.join("blobs"));
    std::fs::copy(data.join("settings.json"), data_out.join("settings.json")).unwrap();
    let expected = json!({
        "made_by": "write_the_schema_4_fixture on a schema-4 build (d6e250f)",
        "app": app_json(&app),
        "type": ty_value,
        "first": first,
        "entity_record": entity_record,
        "answers": answers,
    });
    std::fs::write(
        out.join("expected.json"),
        serde_json::to_string_pretty(&expected).unwrap(),
    )
    .unwrap();
}
