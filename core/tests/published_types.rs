//! Installing a Type record another entity publishes, by its published id
//! (`PublishedType`, docs/apps.md "Shared record types"): the real apps'
//! message and conversation types, stored as `types.baq.dev`'s records with
//! `source: "resolution"`, take a conversation and a message written as the
//! real apps write them; the same content makes the same version on every
//! server, again is a replay, and other content is refused.

// The shared fixtures hold more than these tests use.
#![allow(dead_code, unused_macros)]

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");
include!("support/fake_store.rs");
include!("support/note_fixture.rs");

use fake_store::FakeStore;
use folio_core::model::{Entity, RecordId, RecordSource};
use folio_core::schema::builtin::SYSTEM_ENTITY;
use folio_core::write::{
    PUBLISHED_TYPE_CREATED_AT_MS, PublishedType, PublishedTypeError, RecordKey, Unresolved,
    WriteError, WriteRequest,
};
use note_fixture::{ALICE, BOB, NOW};
use serde_json::{Value, json};

const PUBLISHER: &str = "types.baq.dev";
const MESSAGE: &str = "153b3cb3a2f0494e950599de1cc13ef3";
const CONVERSATION: &str = "7583995c51cf44ad972fdc123105e1dc";

fn published(id: &str, file_text: &str) -> PublishedType {
    let content: Value = serde_json::from_str(file_text).unwrap();
    PublishedType::new(&PUBLISHER.parse().unwrap(), id.parse().unwrap(), content).unwrap()
}

fn message_type() -> PublishedType {
    published(MESSAGE, &shared_file!("real-types/message.json"))
}

fn conversation_type() -> PublishedType {
    published(CONVERSATION, &shared_file!("real-types/conversation.json"))
}

fn version_link(published: &PublishedType) -> Value {
    let record = published.record();
    json!({"entity": record.author.entity, "record_id": record.id, "version_hash": record.version.hash})
}

fn install(store: &mut FakeStore, published: &PublishedType) -> folio_core::write::Commit {
    let access = store.owner();
    store
        .run(published.clone().install(), access)
        .unwrap_or_else(|e| panic!("installed: {e}"))
}

fn post(store: &mut FakeStore, body: Value) -> Result<folio_core::write::Commit, WriteError> {
    let access = store.owner();
    store.run(
        WriteRequest::post(&serde_json::to_vec(&body).unwrap()).unwrap(),
        access,
    )
}

/// A conversation between Alice and Bob, then a message in it, as the real
/// messaging app writes them.
fn converse(store: &mut FakeStore) -> Result<(), WriteError> {
    let conversation = post(
        store,
        json!({"type": version_link(&conversation_type()),
               "permissions": {"read": [{"entity": ALICE}, {"entity": BOB}], "write": []},
               "content": {}}),
    )?;
    let conversation = conversation.record();
    post(
        store,
        json!({"type": version_link(&message_type()),
               "permissions": {"read": [{"entity": ALICE}, {"entity": BOB}]},
               "content": {"conversation": {"entity": ALICE, "record_id": conversation.id},
                           "text": "Hello Bob"}}),
    )
    .map(drop)
}

#[test]
fn a_published_type_is_the_publishers_record_at_a_fixed_date_and_hash() {
    let message = message_type();
    let record = message.record();
    assert_eq!(record.author.entity.as_str(), PUBLISHER);
    assert_eq!(record.version.author.entity.as_str(), PUBLISHER);
    assert_eq!(record.id.to_string(), MESSAGE);
    assert_eq!(record.source, RecordSource::Resolution);
    assert_eq!(
        record.created_at.unix_millis(),
        PUBLISHED_TYPE_CREATED_AT_MS
    );
    assert_eq!(record.version.created_at, record.created_at);
    assert_eq!(record.version.parent_hash, None);
    assert_eq!(record.version.hash, record.hash_input().hash());
    // Every server that installs the same content holds the same version.
    assert_eq!(message_type().record().version.hash, record.version.hash);
    let mut other: Value = serde_json::from_str(&shared_file!("real-types/message.json")).unwrap();
    other["icon_name"] = json!("mail");
    let other =
        PublishedType::new(&PUBLISHER.parse().unwrap(), MESSAGE.parse().unwrap(), other).unwrap();
    assert_ne!(other.record().version.hash, record.version.hash);
}

#[test]
fn only_a_valid_type_record_of_another_entity_is_published() {
    let id: RecordId = MESSAGE.parse().unwrap();
    let publisher: Entity = PUBLISHER.parse().unwrap();
    let reserved: Entity = SYSTEM_ENTITY.parse().unwrap();
    let content: Value = serde_json::from_str(&shared_file!("real-types/message.json")).unwrap();
    assert_eq!(
        PublishedType::new(&reserved, id, content),
        Err(PublishedTypeError::ReservedEntity)
    );
    assert_eq!(
        PublishedType::new(&publisher, id, json!(["not", "an", "object"])),
        Err(PublishedTypeError::NotAnObject)
    );
    let bad = json!({"name": "bad", "schema": {"type": "object", "properties": {"content": {"type": "no such type"}}}});
    let refused = PublishedType::new(&publisher, id, bad).unwrap_err();
    assert!(
        refused.to_string().contains("$['content']['schema']"),
        "{refused}"
    );
    let nameless = json!({"schema": {"type": "object", "properties": {}}});
    assert!(matches!(
        PublishedType::new(&publisher, id, nameless),
        Err(PublishedTypeError::NotATypeRecord(_))
    ));
}

#[test]
fn the_real_types_installed_by_their_published_ids_take_a_conversation_and_a_message() {
    let mut store = FakeStore::new(ALICE, NOW);
    store.know(BOB);
    // Before: the message's type names a version the store lacks, which
    // only types.baq.dev's server could resolve.
    let refused = converse(&mut store).unwrap_err();
    assert!(
        matches!(
            &refused,
            WriteError::InvalidLink { unresolved: Some(unresolved), .. }
                if matches!(**unresolved, Unresolved::Version(ref link) if link.entity.as_str() == PUBLISHER)
        ),
        "{refused:?}"
    );

    for published in [conversation_type(), message_type()] {
        let commit = install(&mut store, &published);
        assert!(!commit.is_replay());
        let stored = commit.record();
        assert_eq!(stored.source, RecordSource::Resolution);
        assert_eq!(stored.version.hash, published.record().version.hash);
    }
    converse(&mut store).unwrap_or_else(|e| panic!("the apps' records are accepted: {e}"));
}

#[test]
fn installing_again_is_a_replay_and_other_content_is_a_conflict() {
    let mut store = FakeStore::new(ALICE, NOW);
    let message = message_type();
    install(&mut store, &message);
    let again = install(&mut store, &message);
    assert!(again.is_replay());
    let key = RecordKey::of(message.record());
    assert_eq!(store.version_count(&key), 1);

    let mut changed: Value =
        serde_json::from_str(&shared_file!("real-types/message.json")).unwrap();
    changed["icon_name"] = json!("mail");
    let changed = PublishedType::new(
        &PUBLISHER.parse().unwrap(),
        MESSAGE.parse().unwrap(),
        changed,
    )
    .unwrap();
    let access = store.owner();
    assert_eq!(
        store.run(changed.install(), access),
        Err(WriteError::VersionConflict {
            latest: message.record().version.hash
        })
    );
    assert_eq!(store.version_count(&key), 1);
}

#[test]
fn a_user_cannot_install_a_type_as_their_own_entity() {
    let mut store = FakeStore::new(PUBLISHER, NOW);
    let access = store.owner();
    assert!(matches!(
        store.run(message_type().install(), access),
        Err(WriteError::NotReceivable(_))
    ));
}

#[test]
fn the_publishers_own_version_is_the_installed_one_only_if_it_is_the_same_version() {
    let mut store = FakeStore::new(ALICE, NOW);
    let message = message_type();
    install(&mut store, &message);
    let access = store.owner();
    // The publisher's server serving exactly this version: a replay.
    let same = WriteRequest::receive(message.record().clone(), RecordSource::Resolution, false);
    assert!(store.run(same, access.clone()).unwrap().is_replay());
    // Its own version, made at another date: a fork, refused; the
    // installed version stays.
    let mut theirs = message.record().clone();
    theirs.created_at = "2024-02-19T15:20:51.3590000Z".parse().unwrap();
    theirs.version.created_at = theirs.created_at;
    theirs.version.hash = theirs.hash_input().hash();
    let resolved = WriteRequest::receive(theirs, RecordSource::Resolution, false);
    assert_eq!(
        store.run(resolved, access),
        Err(WriteError::VersionConflict {
            latest: message.record().version.hash
        })
    );
    let key = RecordKey::of(message.record());
    assert_eq!(
        store.latest(&key).version.hash,
        message.record().version.hash
    );
}
