//! The record types real apps publish (`../shared/real-types`): each is a
//! valid Type record, and records written the way those apps write them
//! validate, while near misses do not.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");

use folio_core::schema::{RecordType, Rule, Validated, Violation};
use serde_json::{Value, json};

const ALICE: &str = "alice.example";
const BOB: &str = "bob.example";

fn record_type(file_text: &str) -> RecordType {
    let content: Value = serde_json::from_str(file_text).unwrap();
    RecordType::from_content(&content).unwrap_or_else(|e| panic!("a valid Type record: {e}"))
}

include!("support/record.rs");

fn validate(
    record_type: &RecordType,
    content: Value,
    permissions: Value,
) -> Result<Validated, Violation> {
    record_type.schema.validate(&record(content, permissions))
}

fn record_link(id: char) -> Value {
    json!({"entity": BOB, "record_id": id.to_string().repeat(32)})
}

fn jpeg(name: &str, size: u64) -> Value {
    json!({"hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99", "type": "image/jpeg", "name": name, "size": size})
}

fn link_paths(validated: &Validated) -> Vec<&str> {
    validated
        .content_links()
        .map(|link| link.path.as_str())
        .collect()
}

#[test]
fn all_six_real_types_are_valid_type_records() {
    let files = [
        ("post", shared_file!("real-types/post.json")),
        ("message", shared_file!("real-types/message.json")),
        ("conversation", shared_file!("real-types/conversation.json")),
        ("file", shared_file!("real-types/file.json")),
        ("folder", shared_file!("real-types/folder.json")),
        ("task", shared_file!("real-types/task.json")),
    ];
    for (name, text) in files {
        assert_eq!(record_type(&text).name, name);
    }
}

#[test]
fn posts_validate_as_the_social_app_writes_them() {
    let post = record_type(&shared_file!("real-types/post.json"));
    let public = json!({"read": "public"});
    let mention = json!({
        "text": "Hi @bob, look at this",
        "text_facets": [
            {"index": 3, "length": 4, "type": "mention", "mention": {"entity": BOB}},
            {"index": 9, "length": 4, "type": "web_link", "url": "https://example.org"}
        ]
    });
    let validated = validate(&post, mention.clone(), public.clone()).unwrap();
    assert_eq!(
        link_paths(&validated),
        ["$['content']['text_facets'][*]['mention']"]
    );

    let images = json!({
        "media": {"type": "images", "images": [{
            "small": jpeg("small.jpg", 8_000), "medium": jpeg("medium.jpg", 60_000), "large": jpeg("large.jpg", 200_000),
            "width": 1024, "height": 768
        }]},
        "reply_to_post": record_link('1')
    });
    let validated = validate(&post, images, public.clone()).unwrap();
    assert_eq!(
        link_paths(&validated),
        [
            "$['content']['media']['type']",
            "$['content']['media']['images'][*]['small']",
            "$['content']['media']['images'][*]['medium']",
            "$['content']['media']['images'][*]['large']",
            "$['content']['reply_to_post']"
        ]
    );
    assert_eq!(validated.checks.blobs.len(), 3);
    assert_eq!(validated.checks.records.len(), 1);

    // A reply and a quote at once breaks the strict union.
    let both =
        json!({"text": "x", "reply_to_post": record_link('1'), "quote_post": record_link('2')});
    assert!(matches!(
        validate(&post, both, public.clone()).unwrap_err().rule,
        Rule::NoBranchMatches { .. }
    ));
    // Posts are public.
    let private = validate(&post, json!({"text": "hello"}), json!({})).unwrap_err();
    assert_eq!(private.rule, Rule::MissingProperty("read".into()));
    // An oversized thumbnail breaks the blob limit of its schema.
    let big = json!({"media": {"type": "images", "images": [{
        "small": jpeg("small.jpg", 81_921), "medium": jpeg("m.jpg", 1), "large": jpeg("l.jpg", 1), "width": 1, "height": 1
    }]}});
    assert!(validate(&post, big, public).is_err());
}

#[test]
fn messages_and_conversations_validate_as_the_messaging_app_writes_them() {
    let message = record_type(&shared_file!("real-types/message.json"));
    let conversation = record_type(&shared_file!("real-types/conversation.json"));
    let between = json!({"read": [{"entity": ALICE}, {"entity": BOB}]});

    // The app states `write: []`: its type makes `write` required and empty.
    let conversation_permissions =
        json!({"read": [{"entity": ALICE}, {"entity": BOB}], "write": []});
    validate(&conversation, json!({}), conversation_permissions).unwrap();
    let unstated = validate(&conversation, json!({}), between.clone()).unwrap_err();
    assert_eq!(unstated.rule, Rule::MissingProperty("write".into()));
    let writable =
        json!({"read": [{"entity": ALICE}, {"entity": BOB}], "write": [{"entity": BOB}]});
    assert_eq!(
        validate(&conversation, json!({}), writable)
            .unwrap_err()
            .rule,
        Rule::TooManyItems { max: 0 }
    );
    let crowd = json!({"read": [{"entity": ALICE}, {"entity": BOB}, {"entity": "carol.example"}], "write": []});
    assert_eq!(
        validate(&conversation, json!({}), crowd).unwrap_err().rule,
        Rule::TooManyItems { max: 2 }
    );

    let hello = json!({"conversation": record_link('c'), "text": "hello"});
    let validated = validate(&message, hello, between.clone()).unwrap();
    let conversation_link = validated
        .content_links()
        .find(|l| l.path.as_str() == "$['content']['conversation']");
    assert!(conversation_link.is_some_and(|link| link.existential));
    let photo = json!({"conversation": record_link('c'), "images": [{
        "small": jpeg("s.jpg", 10), "medium": jpeg("m.jpg", 10), "large": jpeg("l.jpg", 10), "original": jpeg("o.jpg", 10),
        "original_width": 4000, "original_height": 3000, "original_size": 10
    }]});
    assert!(validate(&message, photo, between.clone()).is_ok());
    let empty = json!({"conversation": record_link('c'), "text": ""});
    assert!(validate(&message, empty, between).is_err());
}

#[test]
fn files_folders_and_tasks_validate_as_their_apps_write_them() {
    let file = record_type(&shared_file!("real-types/file.json"));
    let folder = record_type(&shared_file!("real-types/folder.json"));
    let task = record_type(&shared_file!("real-types/task.json"));
    let pdf = json!({"hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99", "type": "application/pdf", "name": "Report 2026.pdf"});

    assert!(
        validate(
            &file,
            json!({"blob": pdf, "size": 1234, "parent": record_link('d')}),
            json!({})
        )
        .is_ok()
    );
    assert!(validate(&file, json!({"blob": pdf, "size": -1}), json!({})).is_err());
    assert!(validate(&folder, json!({"name": "Documents"}), json!({})).is_ok());
    assert!(validate(&folder, json!({"name": "x".repeat(101)}), json!({})).is_err());
    assert!(
        validate(
            &task,
            json!({"title": "Buy milk", "completed": false}),
            json!({})
        )
        .is_ok()
    );
    let extra = validate(
        &task,
        json!({"title": "Buy milk", "completed": false, "due": "today"}),
        json!({}),
    );
    assert_eq!(
        extra.unwrap_err().rule,
        Rule::UndeclaredProperty("due".into())
    );
}
