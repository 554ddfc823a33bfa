//! Schema parsing and validation on arbitrary input: a Type record's content
//! and a record's content, as two JSON texts separated by a NUL byte.
//! Neither may panic, recurse without bound, or validate differently twice.

#![no_main]

use folio_core::model::Record;
use folio_core::schema::RecordType;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let type_text = parts.next().unwrap_or_default();
    let content_text = parts.next().unwrap_or(b"{}");

    let Ok(type_content) = serde_json::from_slice::<Value>(type_text) else {
        return;
    };
    let Ok(record_type) = RecordType::from_content(&type_content) else {
        return;
    };
    let Ok(content) = serde_json::from_slice::<Value>(content_text) else {
        return;
    };
    if !content.is_object() {
        return;
    }
    let record = json!({
        "author": {"entity": "alice.example"},
        "id": "0123456789abcdef0123456789abcdef",
        "source": "self",
        "created_at": "2026-11-21T10:00:00.0000000Z",
        "version": {
            "author": {"entity": "alice.example"},
            "hash": "a".repeat(64),
            "created_at": "2026-11-21T10:00:00.0000000Z"
        },
        "permissions": {"read": [{"entity": "bob.example"}]},
        "type": {"entity": "types.example", "record_id": "f".repeat(32), "version_hash": "b".repeat(64)},
        "content": content
    });
    let Ok(record) = serde_json::from_value::<Record>(record) else {
        return;
    };
    let first = record_type.schema.validate(&record);
    let second = record_type.schema.validate(&record);
    assert_eq!(first, second, "validation is deterministic");
});
