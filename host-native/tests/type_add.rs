//! `folio type add`: the owner adds a Type record to a store, so that apps
//! can be granted it; a schema that does not compile is refused with its
//! path; `--emit-sql` writes the same for the worker.

mod support;

use std::process::Command;

use serde_json::Value;
use support::{add_app, add_me, folio, scratch};

const FOLIO: &str = env!("CARGO_BIN_EXE_folio");

/// A copy of the real apps' task type in `data`.
fn real_task_type(data: &std::path::Path) -> std::path::PathBuf {
    let file = data.join("task.json");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/real-types/task.json"
        ),
        &file,
    )
    .expect("the real task type");
    file
}

#[test]
fn a_type_added_by_the_owner_can_be_granted_to_an_app() {
    let data = scratch("type-add");
    add_me(&data, "https://localhost:8443");
    let file = real_task_type(&data);
    let out = folio(
        &data,
        &[
            "type",
            "add",
            "--user",
            "me",
            "--json",
            file.to_str().unwrap(),
        ],
    );
    let added: Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(added["name"], "task");
    assert_eq!(added["entity"], "localhost");
    assert_eq!(added["record_id"].as_str().map(str::len), Some(32));
    assert_eq!(added["version_hash"].as_str().map(str::len), Some(64));
    // Now an app may be given it, by name.
    add_app(&data, "me", &["--scope", "read=task;write=task"]);

    // A type whose schema does not compile is refused, naming where.
    let bad = data.join("bad.json");
    std::fs::write(&bad, r#"{"name": "bad", "schema": {"type": "object", "properties": {"content": {"type": "no such type"}}}}"#)
        .expect("written");
    let refused = Command::new(FOLIO)
        .arg("--data-dir")
        .arg(&data)
        .args(["type", "add", "--user", "me", bad.to_str().unwrap()])
        .output()
        .expect("folio runs");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("$['content']"), "{stderr}");
}

#[test]
fn with_emit_sql_the_type_is_sql_for_the_worker() {
    let data = scratch("type-add-emit");
    let file = real_task_type(&data);
    let sql = folio(
        &data,
        &[
            "type",
            "add",
            "--user",
            "me",
            "--entity",
            "me.example",
            "--emit-sql",
            "-",
            file.to_str().unwrap(),
        ],
    );
    assert!(
        sql.starts_with("-- Made by `folio type add --emit-sql`"),
        "{sql}"
    );
    assert!(sql.contains("INSERT INTO versions"), "{sql}");
    assert!(
        !data.join("folio.db").exists(),
        "the data directory is not touched"
    );
}
