//! Writes driven end to end against an in-memory store with a fixed clock:
//! creates, updates, deletions, replays, conflicts, cascades, permissions,
//! link validation, Type records and the calling contract (PROTOCOL.md §4-§6).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");
include!("support/fake_store.rs");
include!("support/note_fixture.rs");

use fake_store::{FakeStore, id};
use folio_core::auth::access::{Access, AppGrant};
use folio_core::model::{DeletionAction, Link, Record, RecordBody, RecordDate, RecordLink};
use folio_core::problem::{Problem, ProblemType};
use folio_core::schema::builtin::BuiltinType;
use folio_core::write::{
    Commit, LinkFault, MAX_RECORDS_PER_WRITE, RecordKey, Step, Supplied, Write, WriteContext,
    WriteError, WriteRequest,
};
use note_fixture::{ALICE, BLOB, BOB, NOTE_TYPE, NOW, note_type_content};
use serde_json::{Value, json};

const NOW_MILLIS: &str = "2026-11-21T10:00:00.1230000Z";

fn bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap()
}

fn post(store: &mut FakeStore, body: Value) -> Result<Commit, WriteError> {
    let access = store.owner();
    post_as(store, access, body)
}

fn post_as(store: &mut FakeStore, access: Access, body: Value) -> Result<Commit, WriteError> {
    store.run(WriteRequest::post(&bytes(&body))?, access)
}

fn put(store: &mut FakeStore, key: &RecordKey, body: Value) -> Result<Commit, WriteError> {
    let access = store.owner();
    store.run(WriteRequest::put(key.clone(), &bytes(&body))?, access)
}

fn delete(store: &mut FakeStore, key: &RecordKey, body: Value) -> Result<Commit, WriteError> {
    let access = store.owner();
    delete_as(store, access, key, body)
}

fn delete_as(
    store: &mut FakeStore,
    access: Access,
    key: &RecordKey,
    body: Value,
) -> Result<Commit, WriteError> {
    store.run(WriteRequest::delete(key.clone(), &bytes(&body))?, access)
}

#[track_caller]
fn problem(result: Result<Commit, WriteError>) -> Problem {
    match result {
        Ok(commit) => panic!("should fail, wrote {:?}", commit.record()),
        Err(error) => Problem::from(&error),
    }
}

#[track_caller]
fn link_fault(result: Result<Commit, WriteError>) -> (String, LinkFault) {
    match result {
        Err(WriteError::InvalidLink { path, fault, .. }) => (path.to_string(), fault),
        other => panic!("should be an invalid link: {other:?}"),
    }
}

fn version_link(record: &Record) -> Value {
    json!({"entity": record.author.entity, "record_id": record.id, "version_hash": record.version.hash})
}

fn record_link(record: &Record) -> Value {
    json!({"entity": record.author.entity, "record_id": record.id})
}

fn key(record: &Record) -> RecordKey {
    RecordKey::of(record)
}

/// Alice's store, where Bob is known and the note type exists; and a
/// version link to that type.
fn setup() -> (FakeStore, Value) {
    let mut store = FakeStore::new(ALICE, NOW);
    store.know(BOB);
    let body = json!({"id": id(NOTE_TYPE), "type": BuiltinType::Type.link(), "content": note_type_content()});
    let note_type = version_link(post(&mut store, body).unwrap().record());
    (store, note_type)
}

fn note(store: &mut FakeStore, note_type: &Value, content: Value) -> Record {
    let body = json!({"type": note_type, "content": content});
    post(store, body).unwrap().record().clone()
}

/// A note by Bob, as it would reach Alice's store, with these permissions.
fn bobs_note(store: &mut FakeStore, note_type: &Value, digit: char, permissions: Value) -> Record {
    let mut record: Record = serde_json::from_value(json!({
        "author": {"entity": BOB}, "id": id(digit), "source": "self",
        "created_at": NOW, "received_at": NOW,
        "version": {"author": {"entity": BOB}, "hash": "0".repeat(64), "created_at": NOW, "received_at": NOW},
        "permissions": permissions, "type": note_type, "content": {"text": "Bob's"}
    }))
    .unwrap();
    record.version.hash = record.hash_input().hash();
    store.insert(record.clone());
    record
}

fn app(write: &[&Value], read: &[&Value]) -> Access {
    let links = |types: &[&Value]| -> Vec<RecordLink> {
        types
            .iter()
            .map(|t| RecordLink {
                entity: t["entity"].as_str().unwrap().parse().unwrap(),
                original_entity: None,
                record_id: t["record_id"].as_str().unwrap().parse().unwrap(),
            })
            .collect()
    };
    Access::App {
        entity: ALICE.parse().unwrap(),
        grant: AppGrant {
            app_record: None,
            read: links(read),
            write: links(write),
            subscribe: Vec::new(),
            every_type: false,
        },
    }
}

// --- Create -------------------------------------------------------------

#[test]
fn create_uses_the_fresh_id_the_users_entity_and_the_time_in_milliseconds() {
    let (mut store, note_type) = setup();
    let commit = post(
        &mut store,
        json!({"type": note_type, "content": {"text": "hi"}}),
    )
    .unwrap();
    let Commit::Store { written, cascaded } = &commit else {
        panic!("a create stores its version");
    };
    assert!(cascaded.is_empty());
    assert_eq!(written.replaces, None);
    let record = &written.record;
    assert_eq!(record.author.entity.as_str(), ALICE);
    assert_eq!(record.version.author.entity.as_str(), ALICE);
    assert_eq!(store.latest(&key(record)), record);
    assert_eq!(record.created_at.to_string(), NOW_MILLIS);
    assert_eq!(record.version.created_at.to_string(), NOW_MILLIS);
    assert!(record.version.parent_hash.is_none());
    assert_eq!(record.version.hash, record.hash_input().hash());
    assert_eq!(
        serde_json::to_value(record).unwrap()["source"],
        json!("self")
    );
    assert_eq!(
        serde_json::to_value(&record.permissions).unwrap(),
        json!({})
    );
    // The fresh id, not one the body chose.
    assert!(record.id.to_string().starts_with("00000000"));
}

#[test]
fn create_keeps_the_clients_created_at_and_permissions() {
    let (mut store, note_type) = setup();
    let created_at = "2026-11-20T08:00:00.7654321Z";
    let permissions = json!({"read": [{"entity": BOB}]});
    let body = json!({"type": note_type, "content": {"text": "hi"}, "created_at": created_at, "permissions": permissions});
    let record = post(&mut store, body).unwrap().record().clone();
    assert_eq!(record.created_at.to_string(), created_at);
    assert_eq!(record.version.created_at.to_string(), created_at);
    assert_eq!(
        serde_json::to_value(&record.permissions).unwrap(),
        permissions
    );
}

#[test]
fn create_without_type_or_content_is_missing_properties() {
    let (mut store, note_type) = setup();
    let empty = problem(post(&mut store, json!({})));
    assert_eq!(empty.kind, ProblemType::NewRecordMissingProperties);
    assert_eq!(
        empty.detail.as_deref(),
        Some("a new record needs `type` and `content`")
    );
    let no_content = problem(post(&mut store, json!({"type": note_type})));
    assert_eq!(no_content.kind, ProblemType::NewRecordMissingProperties);
}

#[test]
fn create_ignores_the_fields_clients_echo() {
    let (mut store, note_type) = setup();
    let body = json!({
        "author": {"entity": ALICE}, "source": "self", "received_at": NOW, "color": "blue",
        "version": {"author": {"entity": BOB}, "hash": "0".repeat(64)},
        "no_content": {"links": []},
        "type": note_type, "content": {"text": "hi"}
    });
    let record = post(&mut store, body).unwrap().record().clone();
    assert_eq!(record.version.author.entity.as_str(), ALICE);
    // The hash is the server's, and the echoed `no_content` deletes nothing.
    assert_eq!(record.version.hash, record.hash_input().hash());
    assert_ne!(record.version.hash.to_string(), "0".repeat(64));
    assert!(!record.is_tombstone());
    assert_eq!(record.content().unwrap().as_value(), &json!({"text": "hi"}));
}

#[test]
fn create_with_another_author_is_an_invalid_body() {
    let (mut store, note_type) = setup();
    let body = json!({"author": {"entity": BOB}, "type": note_type, "content": {"text": "hi"}});
    assert_eq!(
        problem(post(&mut store, body)).kind,
        ProblemType::InvalidBody
    );
}

#[test]
fn a_body_that_is_not_a_json_object_is_rejected() {
    let kind = |body: &[u8]| Problem::from(&WriteRequest::post(body).unwrap_err()).kind;
    assert_eq!(kind(b"{\"type\": "), ProblemType::InvalidJson);
    assert_eq!(kind(b""), ProblemType::InvalidJson);
    assert_eq!(kind(b"[]"), ProblemType::InvalidBody);
    assert_eq!(kind(b"\"content\""), ProblemType::InvalidBody);
    assert_eq!(kind(b"{\"id\": \"XYZ\"}"), ProblemType::InvalidBody);
    assert_eq!(kind(b"{\"content\": []}"), ProblemType::InvalidBody);
}

#[test]
fn create_with_a_taken_id_is_an_id_conflict() {
    let (mut store, note_type) = setup();
    let body = json!({"id": id('a'), "type": note_type, "content": {"text": "one"}});
    post(&mut store, body.clone()).unwrap();
    // The same body, but without `created_at` its hash holds the current time.
    assert_eq!(
        problem(post(&mut store, body)).kind,
        ProblemType::IdConflict
    );
    let other =
        json!({"id": id('a'), "created_at": NOW, "type": note_type, "content": {"text": "two"}});
    assert_eq!(
        problem(post(&mut store, other)).kind,
        ProblemType::IdConflict
    );
}

#[test]
fn replayed_create_with_id_and_created_at_returns_the_stored_version() {
    let (mut store, note_type) = setup();
    let body =
        json!({"id": id('a'), "created_at": NOW, "type": note_type, "content": {"text": "one"}});
    let first = post(&mut store, body.clone()).unwrap();
    store.now = RecordDate::from_unix_ticks(store.now.unix_ticks() + 50_000_000).unwrap();
    let again = post(&mut store, body.clone()).unwrap();
    assert!(again.is_replay());
    assert_eq!(again.record(), first.record());
    assert_eq!(again.versions().count(), 0);

    // Still a replay once the record has moved on: the version is found by its hash.
    put(
        &mut store,
        &key(first.record()),
        json!({"content": {"text": "edited"}}),
    )
    .unwrap();
    let late = post(&mut store, body).unwrap();
    assert!(late.is_replay());
    assert_eq!(late.record(), first.record());
    assert_eq!(store.version_count(&key(first.record())), 2);
}

#[test]
fn every_version_is_received_strictly_after_the_users_previous_one() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    let second = note(&mut store, &note_type, json!({"text": "two"}));
    let (first_at, second_at) = (
        first.version.received_at.unwrap(),
        second.version.received_at.unwrap(),
    );
    // The clock stood still: one tick later.
    assert_eq!(second_at.unix_ticks(), first_at.unix_ticks() + 1);

    let update = put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "edited"}}),
    )
    .unwrap();
    let updated = update.record();
    assert!(updated.version.received_at.unwrap() > second_at);
    // The record's own `received_at` is its first version's.
    assert_eq!(updated.received_at, first.received_at);
}

#[test]
fn the_commit_carries_every_link_for_the_index() {
    let (mut store, note_type) = setup();
    let commit = post(
        &mut store,
        json!({"type": note_type, "content": {"text": "hi", "mention": {"entity": BOB}}}),
    )
    .unwrap();
    let paths: Vec<String> = commit
        .versions()
        .next()
        .unwrap()
        .links
        .iter()
        .map(|l| l.path.to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "$['author']",
            "$['version']['author']",
            "$['type']",
            "$['content']['mention']"
        ]
    );
}

// --- Update -------------------------------------------------------------

#[test]
fn put_takes_the_latest_as_parent_and_keeps_its_permissions_and_type() {
    let (mut store, note_type) = setup();
    let body =
        json!({"type": note_type, "content": {"text": "one"}, "permissions": {"read": "public"}});
    let first = post(&mut store, body).unwrap().record().clone();
    let commit = put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "two"}}),
    )
    .unwrap();
    let Commit::Store { written, .. } = &commit else {
        panic!("an update stores its version");
    };
    assert_eq!(written.replaces, Some(first.version.hash));
    let record = &written.record;
    assert_eq!(record.version.parent_hash, Some(first.version.hash));
    assert_eq!(record.permissions, first.permissions);
    assert_eq!(record.type_link, first.type_link);
    assert_eq!(record.created_at, first.created_at);
    assert_eq!(record.version.created_at.to_string(), NOW_MILLIS);
}

#[test]
fn put_with_stale_parent_is_a_version_conflict_naming_the_latest() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    let parent = first.version.hash;
    let second = put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "two"}, "version": {"parent_hash": parent}}),
    )
    .unwrap();
    let stale = put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "three"}, "version": {"parent_hash": parent}}),
    );
    let problem = problem(stale);
    assert_eq!(problem.kind, ProblemType::VersionConflict);
    let latest = second.record().version.hash.to_string();
    assert!(problem.detail.unwrap().contains(&latest));
}

#[test]
fn replayed_put_with_parent_hash_and_created_at_returns_the_stored_version() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    let body = json!({"content": {"text": "two"}, "version": {"parent_hash": first.version.hash, "created_at": NOW}});
    let written = put(&mut store, &key(&first), body.clone()).unwrap();
    let again = put(&mut store, &key(&first), body.clone()).unwrap();
    assert!(again.is_replay());
    assert_eq!(again.record(), written.record());

    put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "three"}}),
    )
    .unwrap();
    let late = put(&mut store, &key(&first), body).unwrap();
    assert_eq!(late.record(), written.record());
    assert_eq!(store.version_count(&key(&first)), 3);
}

#[test]
fn put_without_content_is_update_missing_properties() {
    let target = RecordKey::new(ALICE.parse().unwrap(), id('a'));
    let error = WriteRequest::put(target, br#"{"permissions": {}}"#).unwrap_err();
    assert_eq!(
        Problem::from(&error).kind,
        ProblemType::UpdateRecordMissingProperties
    );
}

#[test]
fn a_body_id_or_author_other_than_the_paths_is_an_invalid_body() {
    let target = RecordKey::new(ALICE.parse().unwrap(), id('a'));
    let other_id = json!({"id": id('b'), "content": {}});
    let other_author = json!({"author": {"entity": BOB}, "content": {}});
    for body in [other_id, other_author] {
        let put = WriteRequest::put(target.clone(), &bytes(&body)).unwrap_err();
        assert_eq!(Problem::from(&put).kind, ProblemType::InvalidBody);
        let delete = WriteRequest::delete(target.clone(), &bytes(&body)).unwrap_err();
        assert_eq!(Problem::from(&delete).kind, ProblemType::InvalidBody);
    }
    let same = json!({"id": id('a'), "author": {"entity": ALICE}, "content": {}});
    assert!(WriteRequest::put(target, &bytes(&same)).is_ok());
}

#[test]
fn post_with_id_and_parent_hash_updates_or_deletes_that_record() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    let update = json!({"id": first.id, "version": {"parent_hash": first.version.hash}, "content": {"text": "two"}});
    let second = post(&mut store, update).unwrap().record().clone();
    assert_eq!(second.version.parent_hash, Some(first.version.hash));

    let deletion = json!({"id": first.id, "author": {"entity": ALICE}, "version": {"parent_hash": second.version.hash}, "no_content": {"action": "local"}});
    let tombstone = post(&mut store, deletion).unwrap().record().clone();
    let RecordBody::Tombstone(no_content) = &tombstone.body else {
        panic!("a deletion writes a tombstone");
    };
    assert_eq!(no_content.action, DeletionAction::Local);
}

#[test]
fn writing_a_record_the_writer_cannot_read_or_that_does_not_exist_is_not_found() {
    let (mut store, note_type) = setup();
    let private = bobs_note(&mut store, &note_type, 'b', json!({}));
    let missing = RecordKey::new(ALICE.parse().unwrap(), id('c'));
    for target in [key(&private), missing] {
        let update = put(&mut store, &target, json!({"content": {"text": "mine"}}));
        assert_eq!(problem(update).kind, ProblemType::RecordNotFound);
        let deletion = delete(&mut store, &target, json!({}));
        assert_eq!(problem(deletion).kind, ProblemType::RecordNotFound);
    }
}

#[test]
fn put_needs_write_permission_and_keeps_the_records_author() {
    let (mut store, note_type) = setup();
    let readable = bobs_note(
        &mut store,
        &note_type,
        'b',
        json!({"read": [{"entity": ALICE}]}),
    );
    let update = put(
        &mut store,
        &key(&readable),
        json!({"content": {"text": "mine"}}),
    );
    assert!(matches!(update, Err(WriteError::WriteNotPermitted(_))));
    assert_eq!(problem(update).kind, ProblemType::Forbidden);

    let writable = json!({"read": [{"entity": ALICE}], "write": [{"entity": ALICE}]});
    let shared = bobs_note(&mut store, &note_type, 'c', writable);
    let record = put(
        &mut store,
        &key(&shared),
        json!({"content": {"text": "ours"}}),
    )
    .unwrap()
    .record()
    .clone();
    assert_eq!(record.author.entity.as_str(), BOB);
    assert_eq!(record.version.author.entity.as_str(), ALICE);
}

#[test]
fn put_on_a_tombstone_is_gone() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    delete(&mut store, &key(&first), json!({})).unwrap();
    let update = put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "back"}}),
    );
    assert_eq!(problem(update).kind, ProblemType::RecordDeleted);
}

// --- Deletion -----------------------------------------------------------

#[test]
fn delete_writes_a_tombstone_listing_the_last_versions_content_links() {
    let (mut store, note_type) = setup();
    let parent = note(&mut store, &note_type, json!({"text": "parent"}));
    let content =
        json!({"text": "child", "mention": {"entity": BOB}, "see_also": record_link(&parent)});
    let child = note(&mut store, &note_type, content);
    let commit = delete(&mut store, &key(&child), json!({})).unwrap();
    let written = commit.versions().next().unwrap();
    assert_eq!(written.replaces, Some(child.version.hash));
    let record = &written.record;
    assert_eq!(record.version.parent_hash, Some(child.version.hash));
    let RecordBody::Tombstone(no_content) = &record.body else {
        panic!("a deletion writes a tombstone");
    };
    assert_eq!(no_content.action, DeletionAction::Delete);
    let listed = serde_json::to_value(&no_content.links).unwrap();
    assert_eq!(
        listed,
        json!([
            {"path": "$['content']['mention']", "type": "entity", "link": {"entity": BOB}},
            {"path": "$['content']['see_also']", "type": "record", "link": record_link(&parent)}
        ])
    );
    // The index rows: the envelope's links, then the tombstone's.
    let in_content = written.links.iter().filter(|l| l.in_content).count();
    assert_eq!((written.links.len(), in_content), (5, 2));
    assert_eq!(record.permissions, child.permissions);
    assert_eq!(record.type_link, child.type_link);
}

#[test]
fn delete_on_a_tombstone_is_gone_unless_it_is_a_replay() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    let body = json!({"version": {"parent_hash": first.version.hash, "created_at": NOW}});
    let tombstone = delete(&mut store, &key(&first), body.clone()).unwrap();
    let again = delete(&mut store, &key(&first), body).unwrap();
    assert!(again.is_replay());
    assert_eq!(again.record(), tombstone.record());

    let plain = delete(&mut store, &key(&first), json!({}));
    assert_eq!(problem(plain).kind, ProblemType::RecordDeleted);
    let other_time = json!({"version": {"parent_hash": first.version.hash, "created_at": "2026-11-21T11:00:00Z"}});
    let other = delete(&mut store, &key(&first), other_time);
    assert_eq!(problem(other).kind, ProblemType::RecordDeleted);
}

#[test]
fn delete_with_stale_parent_is_a_version_conflict() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "two"}}),
    )
    .unwrap();
    let stale = delete(
        &mut store,
        &key(&first),
        json!({"version": {"parent_hash": first.version.hash}}),
    );
    assert_eq!(problem(stale).kind, ProblemType::VersionConflict);
}

#[test]
fn delete_with_an_empty_body_uses_every_default() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "one"}));
    let request = WriteRequest::delete(key(&first), b"").unwrap();
    let access = store.owner();
    let record = store.run(request, access).unwrap().record().clone();
    assert_eq!(record.version.parent_hash, Some(first.version.hash));
    assert_eq!(record.version.created_at.to_string(), NOW_MILLIS);
    let RecordBody::Tombstone(no_content) = &record.body else {
        panic!("a deletion writes a tombstone");
    };
    assert_eq!(no_content.action, DeletionAction::Delete);
}

#[test]
fn an_unknown_deletion_action_is_an_invalid_body() {
    let target = RecordKey::new(ALICE.parse().unwrap(), id('a'));
    let error =
        WriteRequest::delete(target, br#"{"no_content": {"action": "shred"}}"#).unwrap_err();
    assert_eq!(Problem::from(&error).kind, ProblemType::InvalidBody);
}

#[test]
fn local_and_leave_need_only_read_permission_and_delete_needs_write() {
    let (mut store, note_type) = setup();
    let readable = bobs_note(
        &mut store,
        &note_type,
        'b',
        json!({"read": [{"entity": ALICE}]}),
    );
    let deletion = delete(
        &mut store,
        &key(&readable),
        json!({"no_content": {"action": "delete"}}),
    );
    assert_eq!(problem(deletion).kind, ProblemType::Forbidden);
    let leave = delete(
        &mut store,
        &key(&readable),
        json!({"no_content": {"action": "leave"}}),
    )
    .unwrap();
    assert!(leave.record().is_tombstone());

    let other = bobs_note(
        &mut store,
        &note_type,
        'c',
        json!({"read": [{"entity": ALICE}]}),
    );
    let local = delete(
        &mut store,
        &key(&other),
        json!({"no_content": {"action": "local"}}),
    )
    .unwrap();
    assert!(local.record().is_tombstone());
}

// --- Apps and callers ---------------------------------------------------

#[test]
fn an_app_writes_only_the_types_its_grant_names() {
    let (mut store, note_type) = setup();
    let body = json!({"type": note_type, "content": {"text": "from an app"}});
    let reader = app(&[], &[&note_type]);
    let refused = post_as(&mut store, reader.clone(), body.clone());
    assert_eq!(problem(refused).kind, ProblemType::Forbidden);
    let writer = app(&[&note_type], &[]);
    let record = post_as(&mut store, writer.clone(), body)
        .unwrap()
        .record()
        .clone();

    // Updates need the write grant too; `local` deletion only the read grant.
    let request =
        WriteRequest::put(key(&record), &bytes(&json!({"content": {"text": "edit"}}))).unwrap();
    assert_eq!(
        problem(store.run(request, reader.clone())).kind,
        ProblemType::Forbidden
    );
    let deletion = delete_as(&mut store, reader.clone(), &key(&record), json!({}));
    assert_eq!(problem(deletion).kind, ProblemType::Forbidden);
    let local = json!({"no_content": {"action": "local"}});
    assert!(delete_as(&mut store, reader, &key(&record), local).is_ok());
}

#[test]
fn an_unauthenticated_write_is_refused() {
    let (mut store, note_type) = setup();
    let body = json!({"type": note_type, "content": {"text": "hi"}});
    let refused = post_as(&mut store, Access::Anonymous, body);
    assert_eq!(problem(refused).kind, ProblemType::MissingAuthorization);
}

// --- Links --------------------------------------------------------------

#[test]
fn a_link_to_an_unknown_entity_is_an_invalid_link_naming_its_path() {
    let (mut store, note_type) = setup();
    let body = json!({"type": note_type, "content": {"text": "hi", "mention": {"entity": "carol.example"}}});
    let result = post(&mut store, body);
    let problem = Problem::from(result.as_ref().unwrap_err());
    assert_eq!(problem.kind, ProblemType::InvalidLink);
    assert!(
        problem
            .detail
            .unwrap()
            .starts_with("$['content']['mention']")
    );
    assert_eq!(link_fault(result).1, LinkFault::UnknownEntity);
    // The reserved entity is always known.
    let system = json!({"type": note_type, "content": {"text": "hi", "mention": {"entity": "system.folio.dev"}}});
    assert!(post(&mut store, system).is_ok());
}

#[test]
fn a_record_link_must_reach_a_live_record_the_writer_can_read() {
    let (mut store, note_type) = setup();
    let private = bobs_note(&mut store, &note_type, 'b', json!({}));
    let gone = note(&mut store, &note_type, json!({"text": "gone"}));
    delete(&mut store, &key(&gone), json!({})).unwrap();
    let missing = json!({"entity": ALICE, "record_id": id('e')});
    for target in [record_link(&private), record_link(&gone), missing] {
        let body = json!({"type": note_type, "content": {"text": "hi", "see_also": target}});
        let (path, fault) = link_fault(post(&mut store, body));
        assert_eq!(
            (path.as_str(), fault),
            ("$['content']['see_also']", LinkFault::RecordNotFound)
        );
    }
}

#[test]
fn a_record_link_outside_the_schemas_record_types_is_an_invalid_link() {
    let (mut store, note_type) = setup();
    let type_record = store
        .latest(&RecordKey::new(ALICE.parse().unwrap(), id(NOTE_TYPE)))
        .clone();
    let body = json!({"type": note_type, "content": {"text": "hi", "see_also": record_link(&type_record)}});
    assert_eq!(
        link_fault(post(&mut store, body)).1,
        LinkFault::WrongRecordType
    );
    let target = note(&mut store, &note_type, json!({"text": "a note"}));
    let body =
        json!({"type": note_type, "content": {"text": "hi", "see_also": record_link(&target)}});
    assert!(post(&mut store, body).is_ok());
}

#[test]
fn a_version_link_must_name_a_stored_version() {
    let (mut store, note_type) = setup();
    let target = note(&mut store, &note_type, json!({"text": "quoted"}));
    let mut wrong = version_link(&target);
    wrong["version_hash"] = json!("e".repeat(64));
    let body = json!({"type": note_type, "content": {"text": "hi", "quote": wrong}});
    assert_eq!(
        link_fault(post(&mut store, body)),
        ("$['content']['quote']".into(), LinkFault::VersionNotFound)
    );
    let body =
        json!({"type": note_type, "content": {"text": "hi", "quote": version_link(&target)}});
    assert!(post(&mut store, body).is_ok());
}

#[test]
fn a_blob_link_needs_an_available_blob_of_its_stated_size_within_max_size() {
    let (mut store, note_type) = setup();
    let body = |size: Option<u64>| {
        let mut blob = json!({"hash": BLOB, "type": "image/jpeg", "name": "a.jpg"});
        if let Some(size) = size {
            blob["size"] = json!(size);
        }
        json!({"type": note_type, "content": {"text": "hi", "attachment": blob}})
    };
    assert_eq!(
        link_fault(post(&mut store, body(None))).1,
        LinkFault::BlobUnavailable
    );
    store.put_blob(BLOB, 800, false);
    assert_eq!(
        link_fault(post(&mut store, body(None))).1,
        LinkFault::BlobUnavailable
    );
    store.put_blob(BLOB, 800, true);
    let mismatch = LinkFault::BlobSizeMismatch {
        stated: 700,
        actual: 800,
    };
    assert_eq!(link_fault(post(&mut store, body(Some(700)))).1, mismatch);
    assert!(post(&mut store, body(Some(800))).is_ok());
    assert!(post(&mut store, body(None)).is_ok());
    store.put_blob(BLOB, 2_000, true);
    let too_large = LinkFault::BlobTooLarge {
        max: 1000,
        actual: 2000,
    };
    assert_eq!(link_fault(post(&mut store, body(None))).1, too_large);
}

#[test]
fn a_blob_not_uploaded_within_the_hour_needs_a_linking_record_the_writer_can_read() {
    let (mut store, note_type) = setup();
    let mut diary = note_type_content();
    diary["name"] = json!("diary");
    let body = json!({"type": BuiltinType::Type.link(), "content": diary});
    let diary_type = version_link(post(&mut store, body).unwrap().record());
    let with_blob = |ty: &Value| {
        let blob = json!({"hash": BLOB, "type": "image/jpeg", "name": "a.jpg"});
        json!({"type": ty, "content": {"text": "hi", "attachment": blob}})
    };
    store.put_blob(BLOB, 800, true);
    post(&mut store, with_blob(&diary_type)).unwrap();
    // An hour later, only the diary links it.
    store.put_blob(BLOB, 800, false);

    let notes_only = app(&[&note_type], &[]);
    assert_eq!(
        link_fault(post_as(&mut store, notes_only, with_blob(&note_type))).1,
        LinkFault::BlobUnavailable,
        "an app that cannot read the diary links its blob"
    );
    let diaries_too = app(&[&note_type], &[&diary_type]);
    assert!(post_as(&mut store, diaries_too.clone(), with_blob(&note_type)).is_ok());
    // Now a note links it too: the notes-only app may link it again.
    let notes_only = app(&[&note_type], &[]);
    assert!(post_as(&mut store, notes_only, with_blob(&note_type)).is_ok());
}

#[test]
fn a_schema_violation_names_its_path() {
    let (mut store, note_type) = setup();
    let body = json!({"type": note_type, "content": {"text": 7}});
    let problem = problem(post(&mut store, body));
    assert_eq!(problem.kind, ProblemType::SchemaViolation);
    assert!(problem.detail.unwrap().starts_with("$['content']['text']"));
}

#[test]
fn a_type_that_is_not_a_live_type_record_is_an_invalid_link_at_type() {
    let (mut store, note_type) = setup();
    let a_note = note(&mut store, &note_type, json!({"text": "not a type"}));
    let mut unknown = note_type.clone();
    unknown["version_hash"] = json!("e".repeat(64));
    let body = |type_link: &Value| json!({"type": type_link, "content": {"text": "hi"}});
    for type_link in [unknown, version_link(&a_note)] {
        let (path, fault) = link_fault(post(&mut store, body(&type_link)));
        assert_eq!(path, "$['type']");
        assert!(matches!(fault, LinkFault::NotAType(_)));
    }
    let type_key = RecordKey::new(ALICE.parse().unwrap(), id(NOTE_TYPE));
    let tombstone = delete(&mut store, &type_key, json!({}))
        .unwrap()
        .record()
        .clone();
    let (path, _) = link_fault(post(&mut store, body(&version_link(&tombstone))));
    assert_eq!(path, "$['type']");
}

// --- Type records -------------------------------------------------------

#[test]
fn a_type_record_without_permissions_is_public() {
    let (store, note_type) = setup();
    let key = RecordKey::new(ALICE.parse().unwrap(), id(NOTE_TYPE));
    let record = store.latest(&key);
    assert_eq!(version_link(record), note_type);
    assert!(record.permissions.is_public());
}

#[test]
fn a_type_record_with_other_permissions_is_a_schema_violation() {
    let (mut store, _) = setup();
    let body = json!({"type": BuiltinType::Type.link(), "content": note_type_content(), "permissions": {}});
    assert_eq!(
        problem(post(&mut store, body)).kind,
        ProblemType::SchemaViolation
    );
}

#[test]
fn a_type_record_whose_schema_does_not_compile_is_an_invalid_schema() {
    let (mut store, _) = setup();
    let content = json!({"name": "broken", "schema": {"type": "object", "properties": {"content": {"type": "union", "schemas": [{"type": "string"}]}}}});
    let body = json!({"type": BuiltinType::Type.link(), "content": content});
    let problem = problem(post(&mut store, body));
    assert_eq!(problem.kind, ProblemType::InvalidSchema);
    assert!(
        problem
            .detail
            .unwrap()
            .starts_with("$['content']['schema']")
    );
}

#[test]
fn built_in_records_can_never_be_written() {
    let (mut store, _) = setup();
    let builtin = key(BuiltinType::Entity.record());
    let update = put(&mut store, &builtin, json!({"content": {}}));
    assert_eq!(problem(update).kind, ProblemType::Forbidden);
    assert_eq!(store.rounds, 0, "decided without fetching");
    let local = delete(
        &mut store,
        &builtin,
        json!({"no_content": {"action": "local"}}),
    );
    assert!(matches!(local, Err(WriteError::BuiltinRecord)));
}

// --- Cascades -----------------------------------------------------------

#[test]
fn deleting_a_record_deletes_its_existential_dependants_recursively() {
    let (mut store, note_type) = setup();
    let root = note(&mut store, &note_type, json!({"text": "root"}));
    let child = note(
        &mut store,
        &note_type,
        json!({"text": "child", "parent": record_link(&root)}),
    );
    let grandchild = note(
        &mut store,
        &note_type,
        json!({"text": "grandchild", "parent": record_link(&child)}),
    );
    let sibling = note(
        &mut store,
        &note_type,
        json!({"text": "sibling", "parent": record_link(&root)}),
    );
    let unrelated = note(
        &mut store,
        &note_type,
        json!({"text": "see also", "see_also": record_link(&root)}),
    );

    let created_at = "2026-11-21T09:59:00.0000000Z";
    let body = json!({"version": {"created_at": created_at}});
    let commit = delete(&mut store, &key(&root), body).unwrap();
    let Commit::Store { written, cascaded } = &commit else {
        panic!("a deletion stores its tombstones");
    };
    assert_eq!(
        store.rounds, 4,
        "record; type and dependants; one round per level"
    );
    let mut deleted: Vec<RecordKey> = cascaded.iter().map(|v| key(&v.record)).collect();
    assert_eq!(deleted.pop(), Some(key(&grandchild)), "breadth first");
    deleted.sort_by_key(|k| k.record_id);
    let mut first_level = vec![key(&child), key(&sibling)];
    first_level.sort_by_key(|k| k.record_id);
    assert_eq!(deleted, first_level);

    let mut previous = written.record.version.received_at;
    for version in cascaded {
        let RecordBody::Tombstone(no_content) = &version.record.body else {
            panic!("cascaded versions are tombstones");
        };
        assert_eq!(no_content.action, DeletionAction::Delete);
        assert_eq!(version.record.version.created_at.to_string(), created_at);
        assert!(version.record.version.received_at > previous);
        previous = version.record.version.received_at;
        assert_eq!(
            version.replaces,
            Some(
                store
                    .latest(&key(&version.record))
                    .version
                    .parent_hash
                    .unwrap()
            )
        );
    }
    assert!(store.latest(&key(&grandchild)).is_tombstone());
    assert!(!store.latest(&key(&unrelated)).is_tombstone());
}

#[test]
fn local_and_leave_deletions_do_not_cascade() {
    let (mut store, note_type) = setup();
    for action in ["local", "leave"] {
        let root = note(&mut store, &note_type, json!({"text": "root"}));
        let child = note(
            &mut store,
            &note_type,
            json!({"text": "child", "parent": record_link(&root)}),
        );
        let commit = delete(
            &mut store,
            &key(&root),
            json!({"no_content": {"action": action}}),
        )
        .unwrap();
        assert_eq!(commit.versions().count(), 1, "{action}");
        assert!(!store.latest(&key(&child)).is_tombstone(), "{action}");
    }
}

#[test]
fn a_cascade_deletes_each_record_once_even_around_a_cycle() {
    let (mut store, note_type) = setup();
    let first = note(&mut store, &note_type, json!({"text": "first"}));
    let second = note(
        &mut store,
        &note_type,
        json!({"text": "second", "parent": record_link(&first)}),
    );
    let cycle = json!({"content": {"text": "first", "parent": record_link(&second)}});
    put(&mut store, &key(&first), cycle).unwrap();
    let commit = delete(&mut store, &key(&first), json!({})).unwrap();
    let deleted: Vec<RecordKey> = commit.versions().map(|v| key(&v.record)).collect();
    assert_eq!(deleted, [key(&first), key(&second)]);
}

#[test]
fn a_cascade_past_the_record_limit_is_an_invalid_body() {
    let (mut store, note_type) = setup();
    let root = note(&mut store, &note_type, json!({"text": "root"}));
    let children: Vec<Record> = (0..MAX_RECORDS_PER_WRITE)
        .map(|_| {
            note(
                &mut store,
                &note_type,
                json!({"text": "child", "parent": record_link(&root)}),
            )
        })
        .collect();
    let too_many = delete(&mut store, &key(&root), json!({}));
    assert_eq!(too_many, Err(WriteError::CascadeTooLarge));
    assert_eq!(problem(too_many).kind, ProblemType::InvalidBody);

    // One child fewer: exactly the limit.
    delete(
        &mut store,
        &key(&children[0]),
        json!({"no_content": {"action": "local"}}),
    )
    .unwrap();
    let commit = delete(&mut store, &key(&root), json!({})).unwrap();
    assert_eq!(commit.versions().count(), MAX_RECORDS_PER_WRITE);
}

#[test]
fn messages_are_deleted_with_their_conversation() {
    let mut store = FakeStore::new(ALICE, NOW);
    store.know(BOB);
    let publish = |name: &str, record_id: &str, text: String| -> Record {
        let mut record: Record = serde_json::from_value(json!({
            "author": {"entity": "types.baq.dev"}, "id": record_id, "source": "self",
            "created_at": NOW, "received_at": NOW,
            "version": {"author": {"entity": "types.baq.dev"}, "hash": "0".repeat(64), "created_at": NOW},
            "permissions": {"read": "public"}, "type": BuiltinType::Type.link(),
            "content": serde_json::from_str::<Value>(&text).unwrap()
        }))
        .unwrap();
        record.version.hash = record.hash_input().hash();
        assert!(name.len() > 1);
        record
    };
    let conversation_type = publish(
        "conversation",
        "7583995c51cf44ad972fdc123105e1dc",
        shared_file!("real-types/conversation.json"),
    );
    let message_type = publish(
        "message",
        "153b3cb3a2f0494e950599de1cc13ef3",
        shared_file!("real-types/message.json"),
    );
    store.insert(conversation_type.clone());
    store.insert(message_type.clone());

    let between = json!({"read": [{"entity": ALICE}, {"entity": BOB}]});
    let mut conversation_permissions = between.clone();
    conversation_permissions["write"] = json!([]);
    let body = json!({"type": version_link(&conversation_type), "content": {}, "permissions": conversation_permissions});
    let conversation = post(&mut store, body).unwrap().record().clone();
    let messages: Vec<Record> = ["hello", "how are you?"]
        .into_iter()
        .map(|text| {
            let content = json!({"conversation": record_link(&conversation), "text": text});
            let body = json!({"type": version_link(&message_type), "content": content, "permissions": between});
            post(&mut store, body).unwrap().record().clone()
        })
        .collect();

    let commit = delete(&mut store, &key(&conversation), json!({})).unwrap();
    assert_eq!(commit.versions().count(), 3);
    for message in &messages {
        let tombstone = store.latest(&key(message));
        let RecordBody::Tombstone(no_content) = &tombstone.body else {
            panic!("the message is deleted with its conversation");
        };
        assert!(
            matches!(&no_content.links[0].link, Link::Record(link) if link.record_id == conversation.id)
        );
    }
}

// --- Rounds and the calling contract ------------------------------------

#[test]
fn rounds_stay_few() {
    let (mut store, note_type) = setup();
    assert_eq!(
        store.rounds, 1,
        "a Type record with an id: only the record under that id"
    );
    let first = note(
        &mut store,
        &note_type,
        json!({"text": "hi", "mention": {"entity": BOB}}),
    );
    assert_eq!(store.rounds, 2, "the type; then the mentioned entity");
    put(
        &mut store,
        &key(&first),
        json!({"content": {"text": "edit", "mention": {"entity": BOB}}}),
    )
    .unwrap();
    assert_eq!(store.rounds, 3, "the record; its type; the entity");
    let typed = json!({"type": note_type, "content": {"text": "edit", "mention": {"entity": BOB}}});
    put(&mut store, &key(&first), typed).unwrap();
    assert_eq!(store.rounds, 2, "the record and the type; the entity");
    delete(&mut store, &key(&first), json!({})).unwrap();
    assert_eq!(store.rounds, 2, "the record; its type and dependants");
}

fn context(store: &FakeStore) -> WriteContext {
    WriteContext {
        user: store.user.clone(),
        access: store.owner(),
        now: store.now,
        received_at: store.now,
        last_received_at: None,
        fresh_id: id('f'),
    }
}

#[test]
fn step_repeats_its_needs_until_they_are_supplied() {
    let (store, note_type) = setup();
    let body = bytes(&json!({"type": note_type, "content": {"text": "hi"}}));
    let mut write = Write::new(WriteRequest::post(&body).unwrap(), context(&store));
    let Step::Fetch(first) = write.step() else {
        panic!("the type must be fetched");
    };
    let Step::Fetch(again) = write.step() else {
        panic!("still waiting for the type");
    };
    assert_eq!(first, again);
    write.supply(first.iter().map(|need| store.answer(need)).collect());
    let Step::Done(Ok(commit)) = write.step() else {
        panic!("decided once the type is known");
    };
    assert_eq!(commit.record().id, id('f'));
    assert_eq!(write.record_key().record_id, id('f'));
}

#[test]
fn driving_a_write_out_of_order_ends_it_with_an_internal_error() {
    let (store, note_type) = setup();
    let body = bytes(&json!({"type": note_type, "content": {"text": "hi"}}));
    let internal = |step: Step| match step {
        Step::Done(Err(error)) => Problem::from(&error).kind,
        other => panic!("should fail: {other:?}"),
    };

    let mut unasked = Write::new(WriteRequest::post(&body).unwrap(), context(&store));
    unasked.supply(Vec::new());
    assert_eq!(internal(unasked.step()), ProblemType::Internal);

    let mut short = Write::new(WriteRequest::post(&body).unwrap(), context(&store));
    assert!(matches!(short.step(), Step::Fetch(_)));
    short.supply(Vec::new());
    assert_eq!(internal(short.step()), ProblemType::Internal);

    let mut wrong_kind = Write::new(WriteRequest::post(&body).unwrap(), context(&store));
    assert!(matches!(wrong_kind.step(), Step::Fetch(_)));
    wrong_kind.supply(vec![Supplied::Known(true)]);
    assert_eq!(internal(wrong_kind.step()), ProblemType::Internal);
    assert_eq!(internal(wrong_kind.step()), ProblemType::Internal, "spent");
}

#[test]
fn the_bodys_include_links_are_kept_for_the_caller() {
    let listed = WriteRequest::post(
        br#"{"type": null, "content": {}, "include_links": ["entity", "$['content']['parent']"]}"#,
    );
    assert!(listed.is_err(), "a create still needs its type");
    let target = RecordKey::new(ALICE.parse().unwrap(), id('a'));
    let request = WriteRequest::delete(
        target.clone(),
        br#"{"include_links": ["entity", "existential"]}"#,
    )
    .unwrap();
    assert_eq!(
        request.include_links(),
        Some(&["entity".to_owned(), "existential".to_owned()][..])
    );
    let text = WriteRequest::delete(
        target.clone(),
        br#"{"include_links": "entity,existential"}"#,
    )
    .unwrap();
    assert_eq!(text.include_links(), request.include_links());
    assert_eq!(
        WriteRequest::delete(target, b"").unwrap().include_links(),
        None
    );
}

/// The entities an update's replaced version concerned, as the commit
/// carries them for the outbox.
fn former_audience(commit: &Commit) -> Vec<String> {
    let Commit::Store { written, .. } = commit else {
        panic!("an update stores its version");
    };
    written
        .former_audience
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn an_update_names_whom_the_version_it_replaces_concerned() {
    let (mut store, note_type) = setup();
    // Shared with Bob, then made private: Bob hears of the private version,
    // which ends his access.
    let body = json!({"type": note_type, "permissions": {"read": [{"entity": ALICE}, {"entity": BOB}]},
                      "content": {"text": "for Bob"}});
    let shared = post(&mut store, body).unwrap().record().clone();
    let private = json!({"permissions": {}, "content": {"text": "for nobody"}});
    let commit = put(&mut store, &key(&shared), private).unwrap();
    assert_eq!(former_audience(&commit), [BOB]);

    // A public note that mentions Bob, edited to drop the mention: the
    // mention made Bob a recipient of the version replaced.
    let body = json!({"type": note_type, "permissions": {"read": "public"},
                      "content": {"text": "hi Bob", "mention": {"entity": BOB}}});
    let mentioned = post(&mut store, body).unwrap().record().clone();
    let edit = json!({"content": {"text": "hi"}});
    let commit = put(&mut store, &key(&mentioned), edit).unwrap();
    assert_eq!(former_audience(&commit), [BOB]);

    // A private note concerned nobody.
    let private = note(&mut store, &note_type, json!({"text": "mine"}));
    let commit = put(
        &mut store,
        &key(&private),
        json!({"content": {"text": "still mine"}}),
    )
    .unwrap();
    assert!(former_audience(&commit).is_empty());
}
