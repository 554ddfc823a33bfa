//! `folio user add --emit-sql` and `folio app add --emit-sql`, black-box:
//! the SQL they print, run on a fresh migrated database (as on D1), makes a
//! store that `folio serve` serves: discovery finds the user's Entity
//! record, and the app signs requests that write and read records. The
//! commands never touch the data directory.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use folio_conformance::client::{Call, Response};
use folio_conformance::context::Ctx;
use folio_conformance::{AppCredentials, Target};
use serde_json::{Value, json};
use support::{FOLIO, Server, folio, free_port, key_pair, scratch};

const USER: &str = "alice";
const ENTITY: &str = "localhost";

/// Runs `folio --data-dir DATA ARGS`, whatever its exit status.
fn run(data: &Path, args: &[&str]) -> Output {
    Command::new(FOLIO)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("folio runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

/// The one JSON object a command reported, on its last line.
fn reported(bytes: &[u8]) -> Value {
    let text = text(bytes);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Runs a command that must fail; returns its stderr.
fn refused(data: &Path, args: &[&str]) -> String {
    let output = run(data, args);
    assert!(!output.status.success(), "folio {args:?} succeeded");
    text(&output.stderr)
}

fn emit_user(data: &Path, base_url: &str) -> (String, Value) {
    let args = [
        "user",
        "add",
        USER,
        "--entity",
        ENTITY,
        "--base-url",
        base_url,
        "--json",
        "--emit-sql",
        "-",
    ];
    let output = run(data, &args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    (text(&output.stdout), reported(&output.stderr))
}

/// Writes only, one a line after the heading comments: no reads (the
/// driver's trailing `SELECT`), no `BEGIN` or `COMMIT` (D1 refuses them).
fn assert_is_sql(sql: &str) {
    assert!(sql.starts_with("-- Made by `folio "), "{sql}");
    for line in sql.lines().filter(|line| !line.starts_with("-- ")) {
        let write = ["INSERT ", "UPDATE ", "DELETE "]
            .iter()
            .any(|verb| line.starts_with(verb));
        assert!(write && line.ends_with(';'), "{line}");
        assert!(
            !line.contains("BEGIN") && !line.contains("COMMIT"),
            "{line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emitted_sql_makes_a_user_and_app_that_folio_serves() {
    let dir = scratch("emit-sql");
    let untouched = dir.join("never-created");
    let port = free_port();
    let base_url = format!("https://localhost:{port}");

    let (user_sql, user) = emit_user(&untouched, &base_url);
    assert_is_sql(&user_sql);
    assert_eq!(user["user"], USER);
    assert_eq!(user["entity"], ENTITY);
    let password = user["password"].as_str().expect("a generated password");

    let (private_key, public_key) = key_pair();
    let app_file = dir.join("app.sql");
    let app_name = "Zoë's app ✓ -- ?1";
    let app_file_arg = app_file.to_str().expect("a UTF-8 path");
    let output = run(
        &untouched,
        &[
            "app",
            "add",
            "--user",
            USER,
            "--entity",
            ENTITY,
            "--public-key",
            &public_key,
            "--full-access",
            "--name",
            app_name,
            "--json",
            "--emit-sql",
            app_file_arg,
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let app = reported(&output.stdout);
    assert_eq!(app["entity"], ENTITY);
    let app_sql = std::fs::read_to_string(&app_file).expect("the app's SQL");
    assert_is_sql(&app_sql);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&app_file)
            .expect("the file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the file holds a private key");
    }
    assert!(!untouched.exists(), "--emit-sql created the data directory");

    // A fresh database with the migrations (`user list` migrates it), then
    // the two files, as `wrangler d1 execute --file` would run them.
    let data = dir.join("data");
    assert_eq!(folio(&data, &["user", "list"]), "");
    {
        let db = rusqlite::Connection::open(data.join("folio.db")).expect("the database");
        db.execute_batch("PRAGMA foreign_keys = ON;")
            .expect("foreign keys");
        db.execute_batch(&user_sql).expect("the user's SQL runs");
        db.execute_batch(&app_sql).expect("the app's SQL runs");
        let (id, hash): (i64, String) = db
            .query_row("SELECT id, password_hash FROM users", [], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .expect("one user");
        assert_eq!(id, folio_core::store::user_row_id(USER));
        assert!(
            hash.starts_with("$argon2id$"),
            "an argon2id PHC string: {hash}"
        );
        assert!(
            folio_core::service::consent::verify_password(&hash, password),
            "the stored hash is the password's"
        );
    }
    assert_eq!(
        folio(&data, &["user", "list"]),
        format!("{USER}\t{ENTITY}\n")
    );

    // The same commands without --emit-sql store rows of the same shape.
    let native = dir.join("native");
    folio(
        &native,
        &[
            "user",
            "add",
            USER,
            "--entity",
            ENTITY,
            "--base-url",
            &base_url,
        ],
    );
    let app_args = ["--full-access", "--name", app_name];
    support::add_app(&native, USER, &app_args);
    assert_eq!(shape(&data), shape(&native));

    let server = Server::start(&data, port, &[]);
    let credentials = AppCredentials {
        app_id: app["app_id"].as_str().expect("app_id").to_owned(),
        authorization_id: app["authorization_id"]
            .as_str()
            .expect("authorization_id")
            .to_owned(),
        private_key,
    };
    let ctx = Ctx::new(&Target {
        password: Some(password.to_owned()),
        ..Target::one_app(
            server.base_url(),
            USER,
            ENTITY,
            Some(server.cert().display().to_string()),
            credentials.clone(),
        )
    })
    .expect("a client");

    // Discovery: the root links the Entity record, readable unsigned.
    let root = send(&ctx, Call::get(ctx.url("/").expect("a URL"))).await;
    assert_eq!(root.status, 204, "{}", root.excerpt());
    let link = root.header("link").expect("a Link header");
    let url = link
        .split_once('>')
        .and_then(|(target, _)| target.strip_prefix('<'))
        .expect("<url>");
    let prefix = format!("{base_url}/api/{USER}/records/{ENTITY}/");
    assert!(url.starts_with(&prefix), "{link}");
    let entity = json_200(&ctx, Call::get(url.parse().expect("a URL"))).await;
    assert_eq!(entity["record"]["content"]["entity"], ENTITY);
    assert!(
        entity["record"]["version"].get("parent_hash").is_none(),
        "the served Entity record is the emitted first version: {entity}"
    );
    assert_eq!(entity["record"]["permissions"]["read"], "public");
    assert_eq!(
        entity["record"]["content"]["servers"][0]["endpoints"]["records"],
        format!("{base_url}/api/{USER}/records"),
        "the Entity record names the base URL it was emitted with: {entity}"
    );

    // The app writes a type and a record of it, and reads them back.
    let note_type = ctx.note_type().await.expect("a Type record is created");
    let note = ctx
        .note(&note_type, json!({"title": "written on an emitted store"}))
        .await
        .expect("a record is created");
    let id = note["id"].as_str().expect("an id");
    let read = ctx.get_record(id).await.expect("a GET");
    let read = read.json().expect("JSON");
    assert_eq!(
        read["record"]["content"]["title"],
        "written on an emitted store"
    );
    let app_record = ctx
        .get_record(&credentials.app_id)
        .await
        .expect("a GET")
        .json()
        .expect("JSON");
    assert_eq!(app_record["record"]["content"]["name"], app_name);
}

/// How many rows each table holds, and the link index's rows by path.
fn shape(data: &Path) -> Vec<(String, i64)> {
    let db = rusqlite::Connection::open(data.join("folio.db")).expect("the database");
    let tables = [
        "users",
        "versions",
        "records",
        "link_index",
        "events",
        "blobs",
        "apps",
    ];
    let mut counts = Vec::new();
    for table in tables {
        let count = db
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                row.get(0)
            })
            .expect("a count");
        counts.push((table.to_owned(), count));
    }
    let mut paths = db
        .prepare("SELECT path, count(*) FROM link_index GROUP BY path ORDER BY path")
        .expect("a query");
    let paths = paths
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("the paths");
    counts.extend(paths.map(|row| row.expect("a row")));
    counts
}

async fn send(ctx: &Ctx, call: Call<'_>) -> Response {
    ctx.send(call).await.expect("the request is answered")
}

async fn json_200(ctx: &Ctx, call: Call<'_>) -> Value {
    let response = send(ctx, call).await;
    assert_eq!(response.status, 200, "{}", response.excerpt());
    response.json().expect("a JSON body")
}

#[test]
fn emitting_refuses_what_it_cannot_make_without_the_edge_store() {
    let dir = scratch("emit-sql-refusals");
    let untouched = dir.join("never-created");
    let (_, public_key) = key_pair();
    let app_add = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["app", "add", "--user", USER, "--public-key", &public_key];
        args.extend_from_slice(extra);
        args.iter().map(|arg| (*arg).to_owned()).collect()
    };
    let refused_app = |extra: &[&str]| {
        let args = app_add(extra);
        refused(
            &untouched,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };

    let error = refused(
        &untouched,
        &["user", "add", USER, "--entity", ENTITY, "--emit-sql", "-"],
    );
    assert!(error.contains("--base-url"), "{error}");
    let error = refused_app(&["--full-access", "--emit-sql", "-"]);
    assert!(error.contains("--entity"), "{error}");

    let custom = format!("read={ENTITY}+{}", "a".repeat(32));
    for scope in ["read=note", custom.as_str()] {
        let error = refused_app(&["--entity", ENTITY, "--scope", scope, "--emit-sql", "-"]);
        assert!(error.contains("is not a built-in type"), "{scope}: {error}");
    }

    // Built-in types resolve by name and by id.
    let by_id = "read=system.folio.dev+4f1f0a1c9a6b4d0e8a3c2b7d5e6f7a81;write=entity";
    for scope in ["read=entity,type;subscribe=app", by_id] {
        let args = app_add(&["--entity", ENTITY, "--scope", scope, "--emit-sql", "-"]);
        let output = run(
            &untouched,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert!(text(&output.stdout).contains("INSERT INTO apps"));
        assert!(text(&output.stderr).starts_with("app id: "));
    }
    assert!(!untouched.exists(), "--emit-sql created the data directory");

    // Without --emit-sql, an --entity must be the user's.
    let data = dir.join("data");
    support::add_me(&data, "https://localhost:8443");
    let args = [
        "app",
        "add",
        "--user",
        "me",
        "--entity",
        "elsewhere.example",
        "--public-key",
        &public_key,
        "--full-access",
    ];
    let error = refused(&data, &args);
    assert!(error.contains("is at entity `localhost`"), "{error}");
}
