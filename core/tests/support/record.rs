// Included (`include!`) by the core tests that validate records.

/// A live record by `alice.example` with this content and these permissions.
fn record(content: serde_json::Value, permissions: serde_json::Value) -> folio_core::model::Record {
    serde_json::from_value(serde_json::json!({
        "author": {"entity": "alice.example"},
        "id": "0123456789abcdef0123456789abcdef",
        "source": "self",
        "created_at": "2026-11-21T10:00:00.0000000Z",
        "received_at": "2026-11-21T10:00:00.0000000Z",
        "version": {
            "author": {"entity": "alice.example"},
            "hash": "a".repeat(64),
            "created_at": "2026-11-21T10:00:00.0000000Z",
            "received_at": "2026-11-21T10:00:00.0000000Z"
        },
        "permissions": permissions,
        "type": {"entity": "types.example", "record_id": "f".repeat(32), "version_hash": "b".repeat(64)},
        "content": content
    }))
    .expect("a well-formed record")
}
