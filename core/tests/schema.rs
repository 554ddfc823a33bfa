//! The schema format and validator: every kind, the top-level, closure,
//! intersection and strict-union rules, recursion, limits, and link extraction.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use folio_core::model::{Link, Permission};
use folio_core::schema::{Rule, Schema, SchemaFault, Validated, Violation};
use serde_json::{Value, json};

const ALICE: &str = "alice.example";

include!("support/record.rs");

fn content_schema(content: Value) -> Schema {
    Schema::compile(&json!({"type": "object", "properties": {"content": content}}))
        .expect("a valid schema")
}

fn check(content: Value, value: Value) -> Result<Validated, Violation> {
    content_schema(content).validate(&record(value, json!({})))
}

#[track_caller]
fn passes(content: Value, value: Value) -> Validated {
    check(content, value).unwrap_or_else(|violation| panic!("should pass: {violation}"))
}

#[track_caller]
fn fails(content: Value, value: Value) -> Violation {
    match check(content, value) {
        Ok(_) => panic!("should fail"),
        Err(violation) => violation,
    }
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

fn with_field(field: Value) -> Value {
    object(json!({ "field": field }))
}

#[track_caller]
fn field_passes(field: Value, value: Value) {
    passes(with_field(field), json!({ "field": value }));
}

#[track_caller]
fn field_fails(field: Value, value: Value) -> Rule {
    let violation = fails(with_field(field), json!({ "field": value }));
    violation.rule
}

#[test]
fn objects_require_their_properties_and_close_content() {
    let schema = object(json!({"a": {"type": "int"}, "b": {"type": "int", "optional": true}}));
    passes(schema.clone(), json!({"a": 1}));
    passes(schema.clone(), json!({"a": 1, "b": 2}));
    let missing = fails(schema.clone(), json!({"b": 2}));
    assert_eq!(
        (missing.path.as_str(), missing.rule),
        ("$['content']", Rule::MissingProperty("a".into()))
    );
    let extra = fails(schema.clone(), json!({"a": 1, "c": 3}));
    assert_eq!(
        (extra.path.as_str(), extra.rule),
        ("$['content']['c']", Rule::UndeclaredProperty("c".into()))
    );
    let nested = object(json!({"inner": object(json!({"x": {"type": "null"}}))}));
    let deep_extra = fails(nested, json!({"inner": {"x": null, "y": null}}));
    assert_eq!(deep_extra.path, "$['content']['inner']['y']");
}

#[test]
fn optional_does_not_mean_nullable() {
    assert_eq!(
        field_fails(json!({"type": "string", "optional": true}), json!(null)),
        Rule::WrongType {
            expected: "a string"
        }
    );
}

#[test]
fn removed_properties_must_be_absent() {
    let schema =
        object(json!({"old": {"type": "string", "removed": true}, "new": {"type": "string"}}));
    passes(schema.clone(), json!({"new": "x"}));
    assert_eq!(
        fails(schema, json!({"new": "x", "old": "y"})).rule,
        Rule::RemovedProperty("old".into())
    );
}

#[test]
fn objects_outside_content_are_open_unless_strict() {
    let permissions = |strict: bool| {
        Schema::compile(&json!({"type": "object", "properties": {
            "permissions": {"type": "object", "strict": strict, "properties": {"read": {"type": "tag_link"}}}
        }}))
        .unwrap()
    };
    let public_and_more = record(
        json!({}),
        json!({"read": "public", "write": [{"entity": "bob.example"}]}),
    );
    assert!(permissions(false).validate(&public_and_more).is_ok());
    let violation = permissions(true).validate(&public_and_more).unwrap_err();
    assert_eq!(
        (violation.path.as_str(), violation.rule),
        (
            "$['permissions']['write']",
            Rule::UndeclaredProperty("write".into())
        )
    );
}

#[test]
fn the_top_level_checks_only_what_the_schema_names() {
    // No `content` named: content must be {}; envelope fields are never "additional".
    let schema = Schema::compile(&json!({"type": "object", "properties": {}})).unwrap();
    assert!(schema.validate(&record(json!({}), json!({}))).is_ok());
    let violation = schema
        .validate(&record(json!({"x": 1}), json!({})))
        .unwrap_err();
    assert_eq!(
        (violation.path.as_str(), violation.rule),
        ("$['content']", Rule::ContentNotEmpty)
    );

    // Naming permissions checks them as stored, with no defaults filled in.
    let public_only = Schema::compile(&json!({"type": "object", "properties": {
        "permissions": {"type": "object", "properties": {"read": {"type": "tag_link", "enum": ["public"]}}}
    }}))
    .unwrap();
    assert!(
        public_only
            .validate(&record(json!({}), json!({"read": "public"})))
            .is_ok()
    );
    let private = public_only
        .validate(&record(json!({}), json!({})))
        .unwrap_err();
    assert_eq!(
        (private.path.as_str(), private.rule),
        ("$['permissions']", Rule::MissingProperty("read".into()))
    );
}

#[test]
fn arrays_check_bounds_items_and_distinctness() {
    let schema = json!({"type": "array", "items": {"type": "int"}, "min_items": 1, "max_items": 3});
    field_passes(schema.clone(), json!([1, 2, 3]));
    assert_eq!(
        field_fails(schema.clone(), json!([])),
        Rule::TooFewItems { min: 1 }
    );
    assert_eq!(
        field_fails(schema.clone(), json!([1, 2, 3, 4])),
        Rule::TooManyItems { max: 3 }
    );
    let bad_item = fails(with_field(schema), json!({"field": [1, "two"]}));
    assert_eq!(bad_item.path, "$['content']['field'][1]");

    let distinct = json!({"type": "array", "distinct_items": true, "items": {"type": "map", "values": {"type": "int"}}});
    field_passes(
        distinct.clone(),
        json!([{"a": 1, "b": 2}, {"a": 2, "b": 1}]),
    );
    // Distinct by canonical JSON: key order does not make two objects different.
    assert_eq!(
        field_fails(distinct, json!([{"a": 1, "b": 2}, {"b": 2, "a": 1}])),
        Rule::DuplicateItems
    );
}

#[test]
fn booleans_and_null() {
    field_passes(json!({"type": "boolean"}), json!(false));
    field_passes(json!({"type": "boolean", "enum": [true]}), json!(true));
    assert_eq!(
        field_fails(json!({"type": "boolean", "enum": [true]}), json!(false)),
        Rule::NotInEnum
    );
    assert_eq!(
        field_fails(json!({"type": "boolean"}), json!(0)),
        Rule::WrongType {
            expected: "a boolean"
        }
    );
    field_passes(json!({"type": "null"}), json!(null));
    assert_eq!(
        field_fails(json!({"type": "null"}), json!(false)),
        Rule::WrongType { expected: "null" }
    );
}

#[test]
fn strings_are_nfc_and_measured_in_code_points() {
    let schema = json!({"type": "string", "min_length": 2, "max_length": 3});
    field_passes(schema.clone(), json!("😀😀😀"));
    field_passes(schema.clone(), json!("éé"));
    assert_eq!(
        field_fails(schema.clone(), json!("😀😀😀😀")),
        Rule::TooLong { max: 3 }
    );
    assert_eq!(
        field_fails(schema.clone(), json!("a")),
        Rule::TooShort { min: 2 }
    );
    assert_eq!(
        field_fails(json!({"type": "string"}), json!("e\u{301}")),
        Rule::NotNfc
    );
    assert_eq!(
        field_fails(json!({"type": "string", "enum": ["a", "b"]}), json!("c")),
        Rule::NotInEnum
    );
    assert_eq!(
        field_fails(json!({"type": "string"}), json!(1)),
        Rule::WrongType {
            expected: "a string"
        }
    );
}

#[test]
fn ints_are_safe_integers() {
    let int = json!({"type": "int"});
    field_passes(int.clone(), json!(9_007_199_254_740_991_i64));
    field_passes(int.clone(), json!(-9_007_199_254_740_991_i64));
    field_passes(int.clone(), serde_json::from_str::<Value>("1.0").unwrap());
    assert_eq!(
        field_fails(int.clone(), json!(9_007_199_254_740_992_i64)),
        Rule::UnsafeInteger
    );
    assert_eq!(
        field_fails(int.clone(), json!(u64::MAX)),
        Rule::UnsafeInteger
    );
    assert_eq!(
        field_fails(int.clone(), serde_json::from_str::<Value>("1e300").unwrap()),
        Rule::UnsafeInteger
    );
    assert_eq!(
        field_fails(int.clone(), json!(1.5)),
        Rule::WrongType {
            expected: "an integer"
        }
    );
    let bounded = json!({"type": "int", "min": -1, "max": 1, "enum": [-1, 1]});
    field_passes(bounded.clone(), json!(1));
    assert_eq!(field_fails(bounded.clone(), json!(0)), Rule::NotInEnum);
    assert_eq!(
        field_fails(json!({"type": "int", "min": 0}), json!(-1)),
        Rule::BelowMinimum
    );
    assert_eq!(
        field_fails(json!({"type": "int", "max": 0}), json!(1)),
        Rule::AboveMaximum
    );
}

#[test]
fn numbers_are_bounded_typed_and_enumerated() {
    let number = json!({"type": "number", "min": 0, "max": 1});
    field_passes(number.clone(), json!(0.5));
    field_passes(number.clone(), json!(1));
    field_passes(number.clone(), json!(0));
    assert_eq!(field_fails(number.clone(), json!(1.5)), Rule::AboveMaximum);
    assert_eq!(field_fails(number.clone(), json!(-0.5)), Rule::BelowMinimum);
    assert_eq!(
        field_fails(number, json!("0.5")),
        Rule::WrongType {
            expected: "a number"
        }
    );
    assert_eq!(
        field_fails(json!({"type": "number", "enum": [0.5]}), json!(0.25)),
        Rule::NotInEnum
    );
}

#[test]
fn tag_links_are_tags_with_rules_and_are_found() {
    let tag = json!({"type": "tag_link", "max_length": 5, "enum": ["rust", "go", "toolong"]});
    let validated = passes(with_field(tag.clone()), json!({"field": "rust"}));
    let found: Vec<_> = validated.content_links().collect();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].path.as_str(), "$['content']['field']");
    assert!(matches!(&found[0].link, Link::Tag(t) if t.as_str() == "rust"));
    assert_eq!(field_fails(tag.clone(), json!("java")), Rule::NotInEnum);
    assert_eq!(field_fails(tag, json!("toolong")), Rule::TooLong { max: 5 });
    assert!(matches!(
        field_fails(json!({"type": "tag_link"}), json!("")),
        Rule::InvalidLink(_)
    ));
    assert!(matches!(
        field_fails(json!({"type": "tag_link"}), json!("x".repeat(101))),
        Rule::InvalidLink(_)
    ));
}

fn blob(media_type: &str, size: Option<u64>) -> Value {
    let mut blob = json!({"hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99", "type": media_type, "name": "a.jpg"});
    if let Some(size) = size {
        blob["size"] = json!(size);
    }
    blob
}

#[test]
fn blob_links_check_what_the_link_itself_states() {
    let schema = json!({"type": "blob_link", "max_size": 1000, "content_types": ["image/jpeg"]});
    let validated = passes(
        with_field(schema.clone()),
        json!({"field": blob("image/JPEG", None)}),
    );
    assert_eq!(validated.checks.blobs.len(), 1);
    assert_eq!(
        validated.checks.blobs[0].max_size,
        Some(1000),
        "the real size is the store's to check"
    );
    assert_eq!(validated.checks.blobs[0].size, None);
    field_passes(schema.clone(), blob("image/jpeg", Some(1000)));
    assert_eq!(
        field_fails(schema.clone(), blob("image/jpeg", Some(1001))),
        Rule::BlobTooLarge { max: 1000 }
    );
    assert_eq!(
        field_fails(schema.clone(), blob("image/png", None)),
        Rule::ContentTypeNotAllowed("image/png".into())
    );
    let mut nameless = blob("image/jpeg", None);
    nameless.as_object_mut().unwrap().remove("name");
    assert!(matches!(
        field_fails(schema, nameless),
        Rule::InvalidLink(_)
    ));
}

#[test]
fn entity_links_check_min_permissions_against_the_record() {
    let schema = content_schema(object(
        json!({"mention": {"type": "entity_link", "min_permissions": ["read", "notify"]}}),
    ));
    let mention = |entity: &str| record(json!({"mention": {"entity": entity}}), json!({}));
    let with_permissions =
        |permissions: Value| record(json!({"mention": {"entity": "bob.example"}}), permissions);

    assert!(
        schema.validate(&mention(ALICE)).is_ok(),
        "the author holds every permission"
    );
    let private = schema.validate(&mention("bob.example")).unwrap_err();
    assert!(matches!(
        private.rule,
        Rule::MissingPermission {
            permission: Permission::Read,
            ..
        }
    ));
    assert!(
        schema
            .validate(&with_permissions(
                json!({"read": [{"entity": "bob.example"}]})
            ))
            .is_ok()
    );
    assert!(
        schema
            .validate(&with_permissions(json!({"read": "public"})))
            .is_ok()
    );
    let not_notified =
        with_permissions(json!({"read": "public", "notify": [{"entity": "carol.example"}]}));
    let violation = schema.validate(&not_notified).unwrap_err();
    assert!(matches!(
        violation.rule,
        Rule::MissingPermission {
            permission: Permission::Notify,
            ..
        }
    ));

    let validated = schema
        .validate(&with_permissions(json!({"read": "public"})))
        .unwrap();
    assert!(
        validated
            .checks
            .entities
            .iter()
            .any(|e| e.as_str() == "bob.example")
    );
    assert!(matches!(
        field_fails(json!({"type": "entity_link"}), json!({"entity": "Bob"})),
        Rule::InvalidLink(_)
    ));
    assert!(matches!(
        field_fails(
            json!({"type": "entity_link"}),
            json!({"entity": "bob.example", "extra": 1})
        ),
        Rule::InvalidLink(_)
    ));
}

#[test]
fn record_and_version_links_become_store_checks() {
    let types =
        json!([{"entity": "types.example", "record_id": "3050fc130d4142a9994af0ef7c89099e"}]);
    let schema = object(json!({
        "parent": {"type": "record_link", "record_types": types, "existential": true},
        "pinned": {"type": "version_link"}
    }));
    let parent = json!({"entity": "bob.example", "record_id": "1".repeat(32)});
    let pinned = json!({"entity": "bob.example", "record_id": "2".repeat(32), "version_hash": "3".repeat(64)});
    let validated = passes(schema.clone(), json!({"parent": parent, "pinned": pinned}));
    let checks = &validated.checks;
    assert_eq!(checks.records.len(), 1);
    assert_eq!(checks.records[0].path.as_str(), "$['content']['parent']");
    assert_eq!(
        checks.records[0].record_types.as_ref().unwrap()[0]
            .record_id
            .to_string(),
        "3050fc130d4142a9994af0ef7c89099e"
    );
    let parent_link = validated
        .content_links()
        .find(|l| l.path.as_str() == "$['content']['parent']")
        .unwrap();
    assert!(parent_link.existential);
    // The type link is a version check too; the pinned version is the other.
    assert_eq!(checks.versions.len(), 2);
    let no_hash =
        json!({"parent": parent, "pinned": {"entity": "bob.example", "record_id": "2".repeat(32)}});
    assert!(matches!(fails(schema, no_hash).rule, Rule::InvalidLink(_)));
}

#[test]
fn maps_take_any_key_and_links_in_them_use_wildcards() {
    let schema = with_field(json!({"type": "map", "values": {"type": "entity_link"}}));
    let validated = passes(
        schema.clone(),
        json!({"field": {"x y": {"entity": "bob.example"}, "z": {"entity": "carol.example"}}}),
    );
    let paths: Vec<&str> = validated.content_links().map(|l| l.path.as_str()).collect();
    assert_eq!(
        paths,
        ["$['content']['field'][*]", "$['content']['field'][*]"]
    );
    let bad = fails(schema, json!({"field": {"k": {"entity": "BAD"}}}));
    assert_eq!(bad.path, "$['content']['field']['k']");
}

#[test]
fn a_union_passes_when_one_branch_does() {
    let schema =
        with_field(json!({"type": "union", "schemas": [{"type": "int"}, {"type": "string"}]}));
    passes(schema.clone(), json!({"field": 1}));
    passes(schema.clone(), json!({"field": "one"}));
    assert!(matches!(
        fails(schema, json!({"field": true})).rule,
        Rule::NoBranchMatches { .. }
    ));
}

#[test]
fn a_strict_union_is_exclusive() {
    // PROTOCOL.md §6: [{reply_to}, {quote}, {}] takes a reply, a quote or neither, never both.
    let link = json!({"type": "record_link"});
    let schema = json!({"type": "union", "strict": true, "schemas": [
        object(json!({"reply_to": link})), object(json!({"quote": link})), object(json!({}))
    ]});
    let target = json!({"entity": "bob.example", "record_id": "1".repeat(32)});
    passes(schema.clone(), json!({}));
    passes(schema.clone(), json!({"reply_to": target}));
    passes(schema.clone(), json!({"quote": target}));
    let both = fails(schema.clone(), json!({"reply_to": target, "quote": target}));
    assert!(matches!(both.rule, Rule::NoBranchMatches { .. }), "{both}");

    // Without strict, an empty branch would let anything through the union,
    // and closure would then reject the keys no passing branch declares.
    let loose =
        json!({"type": "union", "schemas": [object(json!({"reply_to": link})), object(json!({}))]});
    let passing = passes(loose.clone(), json!({"reply_to": target}));
    assert_eq!(passing.content_links().count(), 1);
}

#[test]
fn closure_counts_object_members_and_the_union_branches_that_passed() {
    let schema = json!({"type": "intersection", "schemas": [
        object(json!({"a": {"type": "int"}})),
        {"type": "union", "schemas": [object(json!({"b": {"type": "int"}})), object(json!({"c": {"type": "int"}, "d": {"type": "int"}}))]}
    ]});
    passes(schema.clone(), json!({"a": 1, "b": 2}));
    passes(schema.clone(), json!({"a": 1, "c": 2, "d": 3}));
    // `d` is declared only by a branch that failed (it lacks `c`).
    let violation = fails(schema.clone(), json!({"a": 1, "b": 2, "d": 3}));
    assert_eq!(
        (violation.path.as_str(), violation.rule),
        ("$['content']['d']", Rule::UndeclaredProperty("d".into()))
    );
    assert!(matches!(
        fails(schema, json!({"b": 2})).rule,
        Rule::MissingProperty(_)
    ));
}

#[test]
fn links_of_a_failed_branch_are_not_kept() {
    let schema = with_field(json!({"type": "union", "schemas": [
        object(json!({"who": {"type": "entity_link"}, "n": {"type": "int"}})),
        object(json!({"who": {"type": "entity_link"}, "s": {"type": "string"}}))
    ]}));
    let validated = passes(
        schema,
        json!({"field": {"who": {"entity": "bob.example"}, "s": "x"}}),
    );
    assert_eq!(validated.content_links().count(), 1);
}

#[test]
fn refs_resolve_to_the_nearest_definition_and_may_recurse() {
    let tree = json!({
        "type": "ref", "ref": "node",
        "definitions": {
            "label": {"type": "int"},
            "node": {"type": "object", "properties": {
                "label": {"type": "ref", "ref": "label"},
                "children": {"type": "array", "items": {"type": "ref", "ref": "node"},
                    "definitions": {"label": {"type": "string"}}}
            }}
        }
    });
    let schema = with_field(tree);
    let leaf = json!({"label": 3, "children": []});
    passes(
        schema.clone(),
        json!({"field": {"label": 1, "children": [leaf, {"label": 2, "children": [leaf]}]}}),
    );
    let bad = fails(
        schema,
        json!({"field": {"label": 1, "children": [{"label": "x", "children": []}]}}),
    );
    assert_eq!(bad.path, "$['content']['field']['children'][0]['label']");
}

#[test]
fn never_allows_nothing() {
    let schema = object(json!({"gone": {"type": "never", "optional": true}}));
    passes(schema.clone(), json!({}));
    assert_eq!(fails(schema, json!({"gone": null})).rule, Rule::Never);
}

#[test]
fn deep_values_stop_at_the_nesting_limit() {
    let nested = json!({"type": "ref", "ref": "n", "definitions": {"n": {"type": "map", "values": {"type": "ref", "ref": "n"}}}});
    let mut value = json!({});
    for _ in 0..70 {
        value = json!({ "k": value });
    }
    assert!(matches!(field_fails(nested.clone(), value), Rule::TooDeep));
    let mut shallow = json!({});
    for _ in 0..50 {
        shallow = json!({ "k": shallow });
    }
    field_passes(nested, shallow);
}

#[test]
fn exponential_schemas_stop_at_the_step_budget() {
    // Each level tries both branches, the first of which fails at the bottom.
    let doubling = json!({"type": "ref", "ref": "n", "definitions": {"n": {"type": "union", "schemas": [
        {"type": "array", "items": {"type": "ref", "ref": "n"}, "min_items": 1},
        {"type": "array", "items": {"type": "ref", "ref": "n"}}
    ]}}});
    let mut value = json!([]);
    for _ in 0..40 {
        value = json!([value]);
    }
    let rule = field_fails(doubling, value);
    assert!(matches!(rule, Rule::TooComplex), "{rule}");
}

#[test]
fn envelope_links_are_always_found() {
    let schema = Schema::compile(&json!({"type": "object", "properties": {}})).unwrap();
    let permissions =
        json!({"read": [{"entity": "bob.example"}], "write": [{"entity": "bob.example"}]});
    let validated = schema.validate(&record(json!({}), permissions)).unwrap();
    let paths: Vec<&str> = validated.links.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "$['author']",
            "$['version']['author']",
            "$['type']",
            "$['permissions']['read'][*]",
            "$['permissions']['write'][*]"
        ]
    );
    assert!(validated.links.iter().all(|l| !l.in_content));
    let entities: Vec<&str> = validated
        .checks
        .entities
        .iter()
        .map(|e| e.as_str())
        .collect();
    assert_eq!(entities, [ALICE, "bob.example"]);
}

#[track_caller]
fn schema_fault(schema: Value) -> (String, SchemaFault) {
    let error = Schema::compile(&schema).expect_err("an invalid schema");
    (error.path, error.fault)
}

#[test]
fn invalid_schemas_are_rejected_with_the_path_of_the_fault() {
    let in_field =
        |field: Value| json!({"type": "object", "properties": {"content": with_field(field)}});
    let at = |tail: &str| format!("$['properties']['content']['properties']['field']{tail}");
    let cases = [
        (
            in_field(json!({"type": "text"})),
            at("['type']"),
            SchemaFault::UnknownType("text".into()),
        ),
        (
            in_field(json!({"type": "string", "min": 1})),
            at("['min']"),
            SchemaFault::UnknownProperty("min".into()),
        ),
        (
            in_field(json!({"enum": ["a"]})),
            at(""),
            SchemaFault::MissingType,
        ),
        (in_field(json!("string")), at(""), SchemaFault::NotAnObject),
        (
            in_field(json!({"type": "array"})),
            at(""),
            SchemaFault::MissingProperty("items"),
        ),
        (
            in_field(json!({"type": "union", "schemas": [{"type": "int"}]})),
            at("['schemas']"),
            SchemaFault::TooFewSchemas,
        ),
        (
            in_field(json!({"type": "string", "min_length": 3, "max_length": 2})),
            at("['max_length']"),
            SchemaFault::BoundsReversed,
        ),
        (
            in_field(json!({"type": "int", "max": 9_007_199_254_740_992_i64})),
            at("['max']"),
            SchemaFault::Expected("a safe integer"),
        ),
        (
            in_field(json!({"type": "ref", "ref": "nowhere"})),
            at("['ref']"),
            SchemaFault::UnknownDefinition("nowhere".into()),
        ),
        (
            in_field(json!({"type": "entity_link", "min_permissions": ["read", "own"]})),
            at("['min_permissions'][1]"),
            SchemaFault::Expected("permission names"),
        ),
        (
            in_field(json!({"type": "tag_link", "enum": ["ok", ""]})),
            at("['enum'][1]"),
            SchemaFault::Expected("strings"),
        ),
        (
            in_field(json!({"type": "blob_link", "content_types": ["image"]})),
            at("['content_types'][0]"),
            SchemaFault::Expected("media types"),
        ),
        (
            in_field(json!({"type": "object", "properties": {"it's": {"type": "null"}}})),
            at("['properties']['it\\'s']"),
            SchemaFault::PropertyName("it's".into()),
        ),
        (
            json!({"type": "map", "values": {"type": "null"}}),
            "$".into(),
            SchemaFault::RootNotObject,
        ),
    ];
    for (schema, path, fault) in cases {
        assert_eq!(schema_fault(schema), (path, fault));
    }
}

#[test]
fn refs_that_never_descend_into_the_value_are_rejected() {
    let loops = [
        json!({"type": "ref", "ref": "a", "definitions": {"a": {"type": "ref", "ref": "a"}}}),
        json!({"type": "ref", "ref": "a", "definitions": {"a": {"type": "union", "schemas": [{"type": "ref", "ref": "a"}, {"type": "null"}]}}}),
        json!({"type": "ref", "ref": "a", "definitions": {
            "a": {"type": "intersection", "schemas": [{"type": "ref", "ref": "b"}, {"type": "null"}]},
            "b": {"type": "ref", "ref": "a"}
        }}),
    ];
    for field in loops {
        let (_, fault) =
            schema_fault(json!({"type": "object", "properties": {"content": with_field(field)}}));
        assert!(matches!(fault, SchemaFault::RefCycle(_)), "{fault}");
    }
}

#[test]
fn schemas_nest_at_most_64_levels() {
    // Below the root: `content`, then `arrays` arrays, then their `null`.
    let nested = |arrays: usize| {
        let mut schema = json!({"type": "null"});
        for _ in 0..arrays {
            schema = json!({"type": "array", "items": schema});
        }
        json!({"type": "object", "properties": {"content": with_field(schema)}})
    };
    Schema::compile(&nested(62)).expect("64 levels below the root compile");
    assert_eq!(
        schema_fault(nested(63)).1,
        SchemaFault::TooDeep,
        "65 levels"
    );
    let (_, fault) = schema_fault(nested(70));
    assert_eq!(fault, SchemaFault::TooDeep);
}

#[test]
fn every_fault_of_a_schema_can_be_listed_at_once() {
    let schema = object(json!({
        "a": {"type": "text"},
        "b": {"type": "string", "min": 1},
        "c": {"type": "union", "schemas": [{"type": "int"}, {"type": "nope"}]},
        "d": {"type": "int"}
    }));
    let paths: Vec<String> = Schema::faults(&schema)
        .into_iter()
        .map(|fault| fault.path)
        .collect();
    assert_eq!(
        paths,
        [
            "$['properties']['a']['type']",
            "$['properties']['b']['min']",
            "$['properties']['c']['schemas'][1]['type']"
        ]
    );
    assert!(Schema::faults(&object(json!({"d": {"type": "int"}}))).is_empty());
    assert_eq!(
        Schema::compile(&schema).unwrap_err().path,
        "$['properties']['a']['type']"
    );
}

#[test]
fn faults_and_violations_map_to_their_problem_types() {
    use folio_core::problem::{Problem, ProblemType};
    let fault = Schema::compile(&json!({"type": "map", "values": {"type": "null"}})).unwrap_err();
    let problem = Problem::from(&fault);
    assert_eq!(
        (problem.kind, problem.detail.as_deref()),
        (
            ProblemType::InvalidSchema,
            Some("$: a record schema is an `object` schema")
        )
    );
    let violation = fails(object(json!({"a": {"type": "int"}})), json!({}));
    let problem = Problem::from(&violation);
    assert_eq!(problem.kind, ProblemType::SchemaViolation);
    assert_eq!(
        problem.detail.as_deref(),
        Some("$['content']: the property `a` is required")
    );
}
