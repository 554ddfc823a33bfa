//! The built-in types: valid Type records, each checked against the Type
//! type's own schema, with pinned version hashes.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");

use folio_core::model::{Record, RecordBody, RecordSource};
use folio_core::schema::builtin::{BuiltinType, SYSTEM_ENTITY, builtin_records};
use folio_core::schema::{RecordType, Rule, TypeRecordError};
use serde_json::{Value, json};

fn type_type() -> RecordType {
    let record = builtin_records()
        .iter()
        .rev()
        .find(|r| r.id == BuiltinType::Type.record_id())
        .unwrap();
    RecordType::from_content(record.content().unwrap().as_value()).unwrap()
}

/// A Type record with this content, authored like the built-ins.
fn type_record(content: Value, permissions: Value) -> Record {
    let mut record = serde_json::to_value(BuiltinType::Type.record()).unwrap();
    record["content"] = content;
    record["permissions"] = permissions;
    serde_json::from_value(record).unwrap()
}

#[test]
fn every_built_in_type_is_a_valid_type_record_by_the_type_types_schema() {
    let type_type = type_type();
    for record in builtin_records() {
        let content = record.content().unwrap();
        let read = RecordType::from_content(content.as_value())
            .unwrap_or_else(|e| panic!("{}: {e}", record.id));
        type_type
            .schema
            .validate(record)
            .unwrap_or_else(|v| panic!("{}: {v}", read.name));
        assert_eq!(record.author.entity.as_str(), SYSTEM_ENTITY);
        assert_eq!(record.source, RecordSource::Resolution);
        assert_eq!(record.hash_input().hash(), record.version.hash);
    }
    let names: Vec<&str> = BuiltinType::ALL.iter().map(|t| t.name()).collect();
    for (builtin, name) in BuiltinType::ALL.iter().zip(names) {
        let record = builtin_records()
            .iter()
            .rev()
            .find(|r| r.id == builtin.record_id())
            .unwrap();
        assert_eq!(record.content().unwrap().as_map()["name"], name);
    }
}

#[test]
fn the_type_type_is_its_own_type_through_its_first_version() {
    let records = builtin_records();
    let (genesis, latest) = (&records[0], &records[1]);
    assert_eq!(
        (genesis.id, latest.id),
        (BuiltinType::Type.record_id(), BuiltinType::Type.record_id())
    );
    assert_eq!(genesis.type_link.version_hash.to_string(), "0".repeat(64));
    assert_eq!(latest.version.parent_hash, Some(genesis.version.hash));
    assert_eq!(latest.type_link.version_hash, genesis.version.hash);
    assert!(
        matches!((&genesis.body, &latest.body), (RecordBody::Live(a), RecordBody::Live(b)) if a == b)
    );
    for record in &records[2..] {
        assert_eq!(record.type_link, BuiltinType::Type.link());
        assert_eq!(record.type_link.version_hash, latest.version.hash);
    }
}

#[test]
fn the_real_app_types_are_valid_type_records_too() {
    let type_type = type_type();
    let public = json!({"read": "public"});
    for text in [
        shared_file!("real-types/post.json"),
        shared_file!("real-types/message.json"),
        shared_file!("real-types/conversation.json"),
        shared_file!("real-types/file.json"),
        shared_file!("real-types/folder.json"),
        shared_file!("real-types/task.json"),
    ] {
        let content: Value = serde_json::from_str(&text).unwrap();
        type_type
            .schema
            .validate(&type_record(content, public.clone()))
            .unwrap();
    }
}

#[test]
fn the_type_type_rejects_malformed_type_records() {
    let type_type = type_type();
    let public = json!({"read": "public"});
    let task = |schema: Value| json!({"name": "task", "schema": schema});
    let object = |properties: Value| json!({"type": "object", "properties": properties});

    let unknown_kind = task(object(json!({"content": {"type": "text"}})));
    assert!(
        type_type
            .schema
            .validate(&type_record(unknown_kind, public.clone()))
            .is_err()
    );
    let extra_key = task(object(json!({"content": {"type": "string", "min": 1}})));
    assert!(
        type_type
            .schema
            .validate(&type_record(extra_key, public.clone()))
            .is_err()
    );
    let one_branch = task(object(
        json!({"content": {"type": "union", "schemas": [{"type": "null"}]}}),
    ));
    assert!(
        type_type
            .schema
            .validate(&type_record(one_branch, public.clone()))
            .is_err()
    );
    let fine = task(object(
        json!({"content": object(json!({"title": {"type": "string", "default": {"any": [1, null]}}}))}),
    ));
    type_type
        .schema
        .validate(&type_record(fine.clone(), public))
        .unwrap();

    // Type records are public, and nothing else.
    let private = type_type
        .schema
        .validate(&type_record(fine.clone(), json!({})))
        .unwrap_err();
    assert_eq!(private.rule, Rule::MissingProperty("read".into()));
    let shared = json!({"read": "public", "write": [{"entity": "bob.example"}]});
    let writable = type_type
        .schema
        .validate(&type_record(fine, shared))
        .unwrap_err();
    assert_eq!(writable.rule, Rule::UndeclaredProperty("write".into()));
}

/// A change to a built-in type's content, id or date changes its hash, and
/// every server's: such a change is a protocol change, made on purpose here.
#[test]
fn the_built_in_type_hashes_are_pinned() {
    let hashes: Vec<(String, String)> = builtin_records()
        .iter()
        .map(|record| {
            (
                record.content().unwrap().as_map()["name"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                record.version.hash.to_string(),
            )
        })
        .collect();
    let pinned: Vec<(String, String)> = [
        (
            "type",
            "eaae0d865939861abdd04b6665398263e65511dbf3398d5a8e0b4a73c1038a02",
        ),
        (
            "type",
            "2ad282c56767d277c2eed0b71151abd5208fae42b7a9157bcbc7cb2fe6a0c96a",
        ),
        (
            "entity",
            "1d9b2d509a1b37b18bcf14cd51b9f74c1b4789815ce4ce1eca303c12aa008d76",
        ),
        (
            "app",
            "2dcd225c8190ae5ab426a3ca5a5563feedc1cf06edaf8940ebcecd8d5bd427cd",
        ),
        (
            "app_authorization",
            "4e2d81394cbbba691d4cf296db29fe0f6e9165e8fc7e4b0ed609d54737167fe5",
        ),
        (
            "credentials",
            "8c00b91aa8c7d8c89092cd499af3f9dcb468461641315e2977d549c36688b989",
        ),
    ]
    .iter()
    .map(|(name, hash)| (name.to_string(), hash.to_string()))
    .collect();
    assert_eq!(hashes, pinned);
}

#[test]
fn a_type_record_must_compile_and_follow_the_type_type() {
    let task: Value = serde_json::from_str(&shared_file!("real-types/task.json")).unwrap();
    let public = json!({"read": "public"});
    assert_eq!(
        RecordType::from_record(&type_record(task.clone(), public.clone()))
            .unwrap()
            .name,
        "task"
    );
    for builtin in BuiltinType::ALL {
        assert_eq!(
            RecordType::from_record(builtin.record()).unwrap().name,
            builtin.name()
        );
    }

    let private = RecordType::from_record(&type_record(task, json!({}))).unwrap_err();
    assert!(
        matches!(private, TypeRecordError::Violation(_)),
        "{private}"
    );
    let broken = json!({"name": "task", "schema": {"type": "object", "properties": {"content": {"type": "text"}}}});
    let faults = RecordType::record_faults(&type_record(broken, public));
    assert!(
        matches!(faults.as_slice(), [TypeRecordError::Schema(_)]),
        "{faults:?}"
    );
}
