// Included (`include!`) by core's write tests and the write_body fuzz
// target: the users, the clock and the note type both write against.

mod note_fixture {
    use serde_json::{Value, json};

    pub const ALICE: &str = "alice.example";
    pub const BOB: &str = "bob.example";
    pub const NOW: &str = "2026-11-21T10:00:00.1234567Z";
    /// The id digit of the note type (see `fake_store::id`).
    pub const NOTE_TYPE: char = '7';
    pub const BLOB: &str = "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99";

    /// The note type: one field of each link kind.
    pub fn note_type_content() -> Value {
        json!({"name": "note", "schema": {"type": "object", "properties": {"content": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "mention": {"type": "entity_link", "optional": true},
                "parent": {"type": "record_link", "existential": true, "optional": true},
                "see_also": {"type": "record_link", "optional": true,
                    "record_types": [{"entity": ALICE, "record_id": super::fake_store::id(NOTE_TYPE)}]},
                "quote": {"type": "version_link", "optional": true},
                "attachment": {"type": "blob_link", "optional": true, "max_size": 1000}
            }
        }}}})
    }
}
