//! Properties over generated inputs: round trips hold, and no input, however
//! hostile, makes the parsers panic. Native only (proptest).

use folio_core::auth::BearerToken;
use folio_core::model::canonical::to_canonical_json;
use folio_core::model::dialect::Dialect;
use folio_core::model::{Record, RecordDate, RecordId, VersionHash};
use folio_core::schema::Schema;
use proptest::prelude::*;
use serde_json::{Value, json};

/// 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.9999999Z, in 100 ns ticks.
const TICKS: std::ops::RangeInclusive<i64> =
    -621_672_192_000_000_000..=2_534_023_008_000_000_000 - 1;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Schemas of every kind, nested, with keys drawn from a small set so that
/// generated values often meet them.
fn schema_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "null"})),
        Just(json!({"type": "boolean", "enum": [true]})),
        (0..4_u64, 0..6_u64).prop_map(
            |(min, extra)| json!({"type": "string", "min_length": min, "max_length": min + extra})
        ),
        Just(json!({"type": "int", "min": -3, "max": 3})),
        Just(json!({"type": "number", "max": 1.5})),
        Just(json!({"type": "tag_link", "enum": ["a", "b"]})),
        Just(json!({"type": "entity_link", "min_permissions": ["read"]})),
        Just(json!({"type": "record_link", "existential": true})),
        Just(json!({"type": "version_link"})),
        Just(json!({"type": "blob_link", "max_size": 10, "content_types": ["image/png"]})),
        Just(json!({"type": "never"})),
        Just(json!({"type": "ref", "ref": "any"})),
    ];
    leaf.prop_recursive(4, 48, 4, |inner| {
        prop_oneof![
            (prop::collection::btree_map("[a-c]", inner.clone(), 0..4), any::<bool>())
                .prop_map(|(properties, strict)| json!({"type": "object", "properties": properties, "strict": strict})),
            (inner.clone(), any::<bool>())
                .prop_map(|(items, distinct)| json!({"type": "array", "items": items, "distinct_items": distinct, "max_items": 3})),
            inner.clone().prop_map(|values| json!({"type": "map", "values": values})),
            (prop::collection::vec(inner.clone(), 2..4), any::<bool>())
                .prop_map(|(schemas, strict)| json!({"type": "union", "schemas": schemas, "strict": strict})),
            prop::collection::vec(inner, 2..4).prop_map(|schemas| json!({"type": "intersection", "schemas": schemas})),
        ]
    })
}

/// Values shaped like records' content: objects with keys from the same set.
fn content_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5_i64..5).prop_map(Value::from),
        "[ab]{0,3}".prop_map(Value::String),
        Just(json!({"entity": "bob.example"})),
        Just(json!({"entity": "bob.example", "record_id": "1".repeat(32)})),
        Just(json!({"hash": "2".repeat(64), "type": "image/png", "name": "a.png", "size": 5})),
    ];
    leaf.prop_recursive(4, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn record_with(content: Value) -> Option<Record> {
    serde_json::from_value(json!({
        "author": {"entity": "alice.example"},
        "id": "0123456789abcdef0123456789abcdef",
        "source": "self",
        "created_at": "2026-11-21T10:00:00.0000000Z",
        "version": {"author": {"entity": "alice.example"}, "hash": "a".repeat(64), "created_at": "2026-11-21T10:00:00.0000000Z"},
        "permissions": {"read": [{"entity": "bob.example"}]},
        "type": {"entity": "types.example", "record_id": "f".repeat(32), "version_hash": "b".repeat(64)},
        "content": content
    }))
    .ok()
}

proptest! {
    #[test]
    fn random_schemas_and_values_never_panic_and_validate_deterministically(
        content_schema in schema_json(),
        content in prop::collection::btree_map("[a-c]", content_value(), 0..4),
    ) {
        let schema = json!({
            "type": "object",
            "definitions": {"any": {"type": "union", "schemas": [
                {"type": "null"}, {"type": "int"}, {"type": "string"},
                {"type": "array", "items": {"type": "ref", "ref": "any"}},
                {"type": "map", "values": {"type": "ref", "ref": "any"}}
            ]}},
            "properties": {"content": content_schema}
        });
        let schema = Schema::compile(&schema).unwrap_or_else(|e| panic!("generated schemas are valid: {e}"));
        let record = record_with(Value::Object(content.into_iter().collect())).expect("a record");
        let first = schema.validate(&record);
        prop_assert_eq!(first, schema.validate(&record));
    }

    /// Reads serve a stored record's JSON as the store holds it, instead of
    /// reading it into a record and writing it out again: the same text,
    /// whatever the content holds (any string, float or nesting), whether
    /// the version has a parent, a receipt date, or no content.
    #[test]
    fn a_stored_record_reads_back_to_the_text_it_was_stored_as(
        content in json_value(),
        received in TICKS,
        later in any::<bool>(),
        deleted in any::<bool>(),
    ) {
        let Some(mut record) = record_with(json!({"value": content})) else {
            return Ok(());
        };
        let date = RecordDate::from_unix_ticks(received).unwrap();
        record.received_at = Some(date);
        record.version.received_at = Some(date);
        if later {
            record.version.parent_hash = Some(VersionHash::from_bytes([7; 32]));
        }
        if deleted {
            let mut json = serde_json::to_value(&record).unwrap();
            json.as_object_mut().unwrap().remove("content");
            json["no_content"] = json!({"action": "delete", "links": []});
            record = serde_json::from_value(json).unwrap();
        }
        let stored = serde_json::to_string(&record).unwrap();
        let read: Record = serde_json::from_str(&stored).unwrap();
        prop_assert_eq!(serde_json::to_string(&read).unwrap(), stored);
    }

    #[test]
    fn arbitrary_json_never_panics_the_schema_compiler(schema in json_value()) {
        let _ = Schema::compile(&schema);
        let _ = Schema::faults(&json!({"type": "object", "properties": {"content": schema}}));
    }

    #[test]
    fn dates_round_trip_through_their_wire_form(ticks in TICKS) {
        let date = RecordDate::from_unix_ticks(ticks).unwrap();
        let wire = date.to_string();
        prop_assert_eq!(wire.len(), 28);
        prop_assert_eq!(wire.parse::<RecordDate>().unwrap(), date);
        let millis = date.millis_form().to_string();
        prop_assert_eq!(millis.parse::<RecordDate>().unwrap(), date.truncated_to_millis());
    }

    #[test]
    fn date_parsing_never_panics(text in "\\PC{0,40}") {
        let _ = text.parse::<RecordDate>();
    }

    #[test]
    fn ids_round_trip_through_hex(bytes in any::<[u8; 16]>(), hash in any::<[u8; 32]>()) {
        let id = RecordId::from_bytes(bytes);
        prop_assert_eq!(id.to_string().parse::<RecordId>().unwrap(), id);
        let hash = VersionHash::from_bytes(hash);
        prop_assert_eq!(hash.to_string().parse::<VersionHash>().unwrap(), hash);
    }

    #[test]
    fn canonical_json_is_a_fixed_point(value in json_value()) {
        let canonical = to_canonical_json(&value);
        let reparsed: Value = serde_json::from_str(&canonical).unwrap();
        prop_assert_eq!(to_canonical_json(&reparsed), canonical);
    }

    #[test]
    fn authorization_parsing_never_panics(text in "\\PC{0,200}") {
        let _ = Dialect::Svc.parse_authorization(&text);
        let _ = Dialect::Svc.parse_authorization(&format!("SVC {text}"));
    }

    #[test]
    fn authorization_parsing_survives_near_valid_headers(
        params in prop::collection::vec(("[a-zA-Z]{0,10}", "[ -~]{0,20}"), 0..8),
        separator in "[ ,\t]{0,3}",
    ) {
        let body: Vec<String> = params.iter().map(|(name, value)| format!("{name}=\"{value}\"")).collect();
        let _ = Dialect::Svc.parse_authorization(&format!("SVC {}", body.join(&separator)));
    }

    #[test]
    fn bearer_parsing_never_panics(token in "\\PC{0,200}", query in "[ -~]{0,100}") {
        let _ = BearerToken::parse(&token);
        let _ = BearerToken::from_target(&format!("/x?{query}"));
    }
}
