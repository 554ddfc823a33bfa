//! The owner's user commands: `folio backup --user` copies one store,
//! `folio user passwd` sets a password by the console's rules, and
//! `folio user remove` deletes one store whole (its blobs no other store
//! holds, its apps' keys) after the name is typed again, leaving the
//! others untouched.

mod support;

use std::path::Path;

use folio_conformance::context::Ctx;
use serde_json::json;
use support::{Server, add_app, add_me, folio, folio_with_input, free_port, scratch};

/// The client's view of user `you`'s store on `server`, as `app`.
fn as_you(app: &support::App, server: &Server) -> folio_conformance::Target {
    let mut target = app.target(server);
    target.user = "you".to_owned();
    target.entity = "you.localhost".to_owned();
    target
}

fn count(data: &Path, sql: &str) -> i64 {
    let db = rusqlite::Connection::open(data.join("folio.db")).expect("the database");
    db.query_row(sql, [], |row| row.get(0)).expect("a count")
}

fn blob_file(data: &Path, hash: &str) -> std::path::PathBuf {
    data.join("blobs").join(&hash[..2]).join(hash)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_of_one_user_passwd_and_remove() {
    let data = scratch("user-commands");
    let port = free_port();
    let base_url = format!("https://localhost:{port}");
    add_me(&data, &base_url);
    folio(&data, &["user", "add", "you", "--entity", "you.localhost"]);
    let me = add_app(&data, "me", &["--full-access"]);
    let you = add_app(&data, "you", &["--full-access"]);

    // Both stores hold the same bytes (one shared file); each holds bytes of its own.
    let shared = vec![1u8; 2_000];
    let (you_record, you_only, me_only) = {
        let server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));
        let me_ctx = Ctx::new(&me.target(&server)).expect("a client");
        let you_ctx = Ctx::new(&as_you(&you, &server)).expect("a client");
        let mut hashes = Vec::new();
        for (ctx, own) in [(&me_ctx, vec![2u8; 3_000]), (&you_ctx, vec![3u8; 4_000])] {
            ctx.upload_blob(&shared, "application/octet-stream")
                .await
                .expect("the shared upload");
            let uploaded = ctx
                .upload_blob(&own, "application/octet-stream")
                .await
                .expect("an upload");
            hashes.push(uploaded["hash"].as_str().expect("a hash").to_owned());
        }
        let ty = you_ctx.note_type().await.expect("a type");
        let record = you_ctx
            .note(&ty, json!({"title": "kept in the backup"}))
            .await
            .expect("a record");
        let you_record = record["id"].as_str().expect("an id").to_owned();
        (you_record, hashes.pop().unwrap(), hashes.pop().unwrap())
    };

    // One user's backup: only that store, its blobs, and a server that serves it.
    let copy = scratch("user-commands-backup");
    std::fs::remove_dir(&copy).expect("a free place");
    folio(&data, &["backup", "--user", "you", copy.to_str().unwrap()]);
    assert_eq!(folio(&copy, &["user", "list"]).trim(), "you\tyou.localhost");
    assert!(
        blob_file(&copy, &you_only).is_file(),
        "you's blob is copied"
    );
    assert!(!blob_file(&copy, &me_only).exists(), "me's blob is not");
    {
        let copy_port = free_port();
        let server = tokio::task::block_in_place(|| Server::start(&copy, copy_port, &[]));
        let ctx = Ctx::new(&as_you(&you, &server)).expect("a client");
        let got = ctx.get_record(&you_record).await.expect("an answer");
        assert_eq!(got.status, 200, "the backup serves you's record");
    }

    // A password by the console's rules, which signs out earlier sessions.
    let short = folio_with_input(
        &data,
        &["user", "passwd", "you", "--password-stdin"],
        "short\n",
    );
    assert!(!short.status.success(), "a short password is refused");
    let hash_of = |data: &Path| -> String {
        let db = rusqlite::Connection::open(data.join("folio.db")).expect("the database");
        db.query_row(
            "SELECT password_hash FROM users WHERE name = 'you'",
            [],
            |row| row.get(0),
        )
        .expect("a hash")
    };
    let set = folio_with_input(
        &data,
        &["user", "passwd", "you", "--password-stdin"],
        "a new pass phrase\n",
    );
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    assert!(folio_core::service::consent::verify_password(
        &hash_of(&data),
        "a new pass phrase"
    ));
    assert!(count(&data, "SELECT sessions_after FROM users WHERE name = 'you'") > 0);

    // Removal: asks for the name again; then the store goes whole.
    let wrong = folio_with_input(&data, &["user", "remove", "you"], "me\n");
    assert!(!wrong.status.success(), "a different name removes nothing");
    assert_eq!(count(&data, "SELECT count(*) FROM users"), 2);
    let removed = folio_with_input(&data, &["user", "remove", "you"], "you\n");
    assert!(
        removed.status.success(),
        "{}",
        String::from_utf8_lossy(&removed.stderr)
    );
    assert_eq!(folio(&data, &["user", "list"]).trim(), "me\tlocalhost");
    for table in [
        "versions",
        "records",
        "link_index",
        "events",
        "blobs",
        "apps",
    ] {
        let left = count(
            &data,
            &format!("SELECT count(*) FROM {table} WHERE user_id NOT IN (SELECT id FROM users)"),
        );
        assert_eq!(left, 0, "rows of the removed user left in {table}");
    }
    assert!(
        !blob_file(&data, &you_only).exists(),
        "you's own blob file is removed"
    );
    assert!(blob_file(&data, &me_only).is_file(), "me's blob file stays");
    let shared_hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&shared));
    assert!(
        blob_file(&data, &shared_hash).is_file(),
        "the shared file stays"
    );
    // me's store still serves.
    let server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));
    let ctx = Ctx::new(&me.target(&server)).expect("a client");
    assert_eq!(ctx.list(&[]).await.map(|_| ()), Ok(()));
}

/// The server remembers each app's standing between requests; `folio app
/// revoke` beside the running server still refuses the app's next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_revoked_beside_a_running_server_is_refused_at_once() {
    let data = scratch("revoke-beside");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let app = add_app(&data, "me", &["--full-access"]);
    let server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));
    let ctx = Ctx::new(&app.target(&server)).expect("a client");
    let absent = "00000000000000000000000000000001";
    for _ in 0..3 {
        let got = ctx.get_record(absent).await.expect("an answer");
        let text = String::from_utf8_lossy(&got.body);
        assert_eq!(got.status, 404, "the app is let in: {text}");
    }
    let out = folio(&data, &["app", "revoke", &app.app_id, "--user", "me"]);
    assert!(out.contains("revoked 1"), "{out}");
    let got = ctx.get_record(absent).await.expect("an answer");
    let text = String::from_utf8_lossy(&got.body);
    assert_eq!(got.status, 401, "the revoked app is refused: {text}");
    assert!(text.contains("unknown-app"), "{text}");
}

/// `folio user add` of an entity that is not this server's host nor a
/// subdomain of it is refused: such a user would shadow another server's
/// entity for this server's users. `--allow-foreign-entity` makes it, with
/// a warning.
#[test]
fn a_foreign_entity_needs_the_operators_word() {
    let data = scratch("foreign-entity");
    add_me(&data, "https://localhost:8443");
    let add = |extra: &[&str]| {
        let mut args = vec!["user", "add", "imposter", "--entity", "bob.test"];
        args.extend_from_slice(extra);
        folio_with_input(&data, &args, "")
    };
    let refused = add(&[]);
    assert!(
        !refused.status.success(),
        "bob.test was made a user of localhost"
    );
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains("--allow-foreign-entity"), "{error}");
    assert_eq!(folio(&data, &["user", "list"]), "me\tlocalhost\n");

    let allowed = add(&["--allow-foreign-entity"]);
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let warning = String::from_utf8_lossy(&allowed.stderr);
    assert!(
        warning.contains("WARNING") && warning.contains("bob.test"),
        "{warning}"
    );

    // A subdomain of the base URL's host is this server's to serve.
    folio(&data, &["user", "add", "you", "--entity", "you.localhost"]);

    // An entity a user here already has is refused in words, naming that
    // user and what to pass instead (it was SQLite's "UNIQUE constraint
    // failed: users.entity"), with or without the operator's word.
    for extra in [&[][..], &["--allow-foreign-entity"][..]] {
        let mut args = vec!["user", "add", "alice", "--entity", "localhost"];
        args.extend_from_slice(extra);
        let taken = folio_with_input(&data, &args, "");
        assert!(!taken.status.success());
        let error = String::from_utf8_lossy(&taken.stderr);
        assert!(
            error.contains("already the entity of user `me`")
                && error.contains("--entity NAME.localhost")
                && !error.contains("UNIQUE"),
            "{error}"
        );
    }
}
