//! `folio schema`, run as a user runs it: the built binary on files.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

const REAL_TYPES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/real-types");

fn folio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_folio"))
        .args(args)
        .output()
        .expect("folio runs")
}

/// Writes `value` to a file of its own under the target directory (each run
/// writes the same files again, rather than leaving a directory behind in
/// the system's temp directory).
fn temp_json(name: &str, value: &Value) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("schema-command");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path
}

fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn real_type(name: &str) -> String {
    format!("{REAL_TYPES}/{name}.json")
}

#[test]
fn every_real_type_passes_check() {
    for name in ["post", "message", "conversation", "file", "folder", "task"] {
        let output = folio(&["schema", "check", &real_type(name)]);
        assert!(
            output.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}

#[test]
fn check_prints_every_fault_with_its_path_and_exits_1() {
    let bad = temp_json(
        "bad-type.json",
        &json!({"name": "bad", "schema": {"type": "object", "properties": {"content": {"type": "object", "properties": {
            "a": {"type": "text"},
            "b": {"type": "string", "min": 2},
            "c": {"type": "record_link", "record_types": [{"entity": "{var:entity}", "record_id": "{var:record_id}"}]}
        }}}}}),
    );
    let output = folio(&["schema", "check", bad.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let at = "$['content']['schema']['properties']['content']['properties']";
    let lines = stdout_lines(&output);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with(&format!("{at}['a']['type']: ")));
    assert!(lines[1].starts_with(&format!("{at}['b']['min']: ")));
    assert!(lines[2].starts_with(&format!("{at}['c']['record_types'][0]: ")));

    let vars = [
        "--var",
        "entity=types.example",
        "--var",
        "record_id=0123456789abcdef0123456789abcdef",
    ];
    let substituted = folio(&[&["schema", "check", bad.to_str().unwrap()][..], &vars].concat());
    assert_eq!(
        stdout_lines(&substituted).len(),
        2,
        "the placeholders are filled in"
    );
}

#[test]
fn check_takes_a_whole_type_record_and_applies_the_type_type() {
    let content: Value =
        serde_json::from_str(&std::fs::read_to_string(real_type("task")).unwrap()).unwrap();
    let mut record =
        serde_json::to_value(folio_core::schema::builtin::BuiltinType::Type.record()).unwrap();
    record["content"] = content;
    let public = temp_json("task-record.json", &record);
    assert!(
        folio(&["schema", "check", public.to_str().unwrap()])
            .status
            .success()
    );
    record["permissions"] = json!({});
    let private = temp_json("private-task-record.json", &record);
    let output = folio(&["schema", "check", private.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout_lines(&output)[0].starts_with("$['permissions']: "));
}

#[test]
fn validate_decides_what_the_schema_decides_and_lists_the_rest() {
    let message = temp_json(
        "message.json",
        &json!({
            "content": {
                "conversation": {"entity": "bob.example", "record_id": "7583995c51cf44ad972fdc123105e1dc"},
                "text": "hello"
            },
            "permissions": {"read": [{"entity": "author.invalid"}, {"entity": "bob.example"}]}
        }),
    );
    let plain = folio(&[
        "schema",
        "validate",
        &real_type("message"),
        message.to_str().unwrap(),
    ]);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stdout)
    );
    assert!(plain.stdout.is_empty());

    let output = folio(&[
        "schema",
        "validate",
        &real_type("message"),
        message.to_str().unwrap(),
        "--links",
    ]);
    assert!(output.status.success());
    let lines: Vec<Value> = stdout_lines(&output)
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let conversation = lines
        .iter()
        .find(|l| l["path"] == "$['content']['conversation']")
        .expect("the link");
    assert_eq!(
        (&conversation["type"], &conversation["existential"]),
        (&json!("record"), &json!(true))
    );
    let check = lines
        .iter()
        .find(|l| l["check"] == "record_readable")
        .expect("a store check");
    assert_eq!(
        check["record_types"][0]["record_id"],
        "7583995c51cf44ad972fdc123105e1dc"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["check"] == "entity_known" && l["entity"] == "bob.example")
    );

    let empty = temp_json(
        "empty-message.json",
        &json!({
            "content": {"conversation": conversation["link"], "text": ""},
            "permissions": {"read": [{"entity": "author.invalid"}, {"entity": "bob.example"}]}
        }),
    );
    let failed = folio(&[
        "schema",
        "validate",
        &real_type("message"),
        empty.to_str().unwrap(),
    ]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(stdout_lines(&failed)[0].starts_with("$['content']: "));
}

#[test]
fn unreadable_input_is_a_usage_error() {
    let output = folio(&["schema", "check", "/nonexistent/type.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/type.json"));
}
