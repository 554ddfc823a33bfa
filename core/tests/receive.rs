//! Receiving another server's versions (`WriteRequest::receive`,
//! docs/federation.md §4): a version is stored when it continues the chain
//! the store holds and its type validates it; a replay stores nothing; a
//! missing parent, a fork, the user's own record and a version by another
//! author are refused; a record keeps its highest source.

// The shared fixtures hold more than these tests use.
#![allow(dead_code, unused_macros)]

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");
include!("support/fake_store.rs");
include!("support/note_fixture.rs");

use fake_store::{FakeStore, id};
use folio_core::model::{DeletionAction, Record, RecordBody, RecordSource};
use folio_core::schema::builtin::BuiltinType;
use folio_core::write::{Commit, RecordKey, Unresolved, WriteError, WriteRequest};
use note_fixture::{ALICE, BOB, NOTE_TYPE, NOW, note_type_content};
use serde_json::{Value, json};

/// Alice's store, with the note type; and a version link to that type.
fn setup() -> (FakeStore, Value) {
    let mut store = FakeStore::new(ALICE, NOW);
    store.know(BOB);
    let body = json!({"id": id(NOTE_TYPE), "type": BuiltinType::Type.link(), "content": note_type_content()});
    let request = WriteRequest::post(&serde_json::to_vec(&body).unwrap()).unwrap();
    let access = store.owner();
    let commit = store.run(request, access).unwrap();
    let record = commit.record();
    let link = json!({"entity": record.author.entity, "record_id": record.id, "version_hash": record.version.hash});
    (store, link)
}

/// Bob's note `digit`, first version, as Bob's server serves it (its own
/// receipt dates and source, which the receiver replaces).
fn bobs(note_type: &Value, digit: char, text: &str) -> Record {
    let mut record: Record = serde_json::from_value(json!({
        "author": {"entity": BOB}, "id": id(digit), "source": "self",
        "created_at": "2026-01-01T00:00:00.0000000Z", "received_at": "2026-01-01T00:00:00.5000000Z",
        "version": {"author": {"entity": BOB}, "hash": "0".repeat(64),
                    "created_at": "2026-01-01T00:00:00.0000000Z", "received_at": "2026-01-01T00:00:00.5000000Z"},
        "permissions": {"read": [{"entity": ALICE}, {"entity": BOB}]},
        "type": note_type, "content": {"text": text}
    }))
    .unwrap();
    record.version.hash = record.hash_input().hash();
    record
}

/// The next version of `parent`, with `text`.
fn next(parent: &Record, text: &str, second: u32) -> Record {
    let mut record = parent.clone();
    record.version.parent_hash = Some(parent.version.hash);
    record.version.created_at = format!("2026-01-01T00:00:{second:02}.0000000Z")
        .parse()
        .unwrap();
    record.body = serde_json::from_value::<Record>(json!({
        "author": {"entity": BOB}, "id": id('0'), "source": "self", "created_at": "2026-01-01T00:00:00.0000000Z",
        "version": {"author": {"entity": BOB}, "hash": "0".repeat(64), "created_at": "2026-01-01T00:00:00.0000000Z"},
        "permissions": {}, "type": parent.type_link, "content": {"text": text}
    }))
    .unwrap()
    .body;
    record.version.hash = record.hash_input().hash();
    record
}

fn receive(
    store: &mut FakeStore,
    record: &Record,
    source: RecordSource,
) -> Result<Commit, WriteError> {
    let access = store.owner();
    store.run(WriteRequest::receive(record.clone(), source, false), access)
}

#[test]
fn a_chain_is_received_in_order_with_its_hashes_and_the_receivers_dates() {
    let (mut store, note_type) = setup();
    let first = bobs(&note_type, '1', "one");
    let commit = receive(&mut store, &first, RecordSource::Notification).unwrap();
    let stored = commit.record();
    assert_eq!(
        stored.version.hash, first.version.hash,
        "the hash is the author's"
    );
    assert_eq!(stored.source, RecordSource::Notification);
    assert_ne!(stored.received_at, first.received_at, "received here, now");
    let second = next(&first, "two", 5);
    receive(&mut store, &second, RecordSource::Notification).unwrap();
    let key = RecordKey::of(&first);
    assert_eq!(store.version_count(&key), 2);
    assert_eq!(store.latest(&key).version.hash, second.version.hash);
    assert_eq!(
        store.latest(&key).received_at,
        stored.received_at,
        "the record's first receipt stays"
    );
    // Both again: replays, nothing stored.
    for version in [&first, &second] {
        assert!(
            receive(&mut store, version, RecordSource::Notification)
                .unwrap()
                .is_replay()
        );
    }
    assert_eq!(store.version_count(&key), 2);
}

#[test]
fn a_missing_parent_is_asked_for_unless_the_chain_starts_there() {
    let (mut store, note_type) = setup();
    let first = bobs(&note_type, '1', "one");
    let second = next(&first, "two", 5);
    let third = next(&second, "three", 9);
    assert_eq!(
        receive(&mut store, &second, RecordSource::Notification).unwrap_err(),
        WriteError::MissingParent {
            parent: first.version.hash
        }
    );
    receive(&mut store, &first, RecordSource::Notification).unwrap();
    assert_eq!(
        receive(&mut store, &third, RecordSource::Notification).unwrap_err(),
        WriteError::MissingParent {
            parent: second.version.hash
        }
    );
    // A record the store holds none of may start where the receiver could fetch.
    let (mut fresh, note_type) = setup();
    let access = fresh.owner();
    let other = next(&bobs(&note_type, '2', "one"), "two", 5);
    let commit = fresh
        .run(
            WriteRequest::receive(other.clone(), RecordSource::Resolution, true),
            access,
        )
        .unwrap();
    assert_eq!(commit.record().version.hash, other.version.hash);
}

#[test]
fn a_fork_and_a_second_first_version_are_conflicts() {
    let (mut store, note_type) = setup();
    let first = bobs(&note_type, '1', "one");
    let second = next(&first, "two", 5);
    receive(&mut store, &first, RecordSource::Notification).unwrap();
    receive(&mut store, &second, RecordSource::Notification).unwrap();
    let sibling = next(&first, "another two", 6);
    assert_eq!(
        receive(&mut store, &sibling, RecordSource::Notification).unwrap_err(),
        WriteError::VersionConflict {
            latest: second.version.hash
        }
    );
    let mut again = bobs(&note_type, '1', "one, again");
    again.created_at = "2026-01-02T00:00:00.0000000Z".parse().unwrap();
    again.version.hash = again.hash_input().hash();
    assert!(matches!(
        receive(&mut store, &again, RecordSource::Notification),
        Err(WriteError::VersionConflict { .. })
    ));
}

#[test]
fn own_records_foreign_versions_and_invalid_content_are_refused() {
    let (mut store, note_type) = setup();
    // The user's own entity never arrives from elsewhere.
    let mut own = bobs(&note_type, '1', "mine");
    own.author.entity = ALICE.parse().unwrap();
    own.version.author.entity = ALICE.parse().unwrap();
    own.version.hash = own.hash_input().hash();
    assert!(matches!(
        receive(&mut store, &own, RecordSource::Notification),
        Err(WriteError::NotReceivable(_))
    ));
    // A version by someone else than the record's author.
    let mut foreign = bobs(&note_type, '2', "by Carol");
    foreign.version.author.entity = "carol.example".parse().unwrap();
    foreign.version.hash = foreign.hash_input().hash();
    assert!(matches!(
        receive(&mut store, &foreign, RecordSource::Notification),
        Err(WriteError::NotReceivable(_))
    ));
    // Content its type refuses.
    let mut invalid = bobs(&note_type, '3', "x");
    invalid.body = serde_json::from_value::<Record>(json!({
        "author": {"entity": BOB}, "id": id('3'), "source": "self", "created_at": NOW,
        "version": {"author": {"entity": BOB}, "hash": "0".repeat(64), "created_at": NOW},
        "permissions": {}, "type": note_type, "content": {"unknown": 1}
    }))
    .unwrap()
    .body;
    invalid.version.hash = invalid.hash_input().hash();
    assert!(matches!(
        receive(&mut store, &invalid, RecordSource::Notification),
        Err(WriteError::SchemaViolation(_))
    ));
}

#[test]
fn a_type_the_store_lacks_is_named_for_resolution() {
    let (mut store, _) = setup();
    let elsewhere = json!({"entity": BOB, "record_id": id('9'), "version_hash": "ab".repeat(32)});
    let record = bobs(&elsewhere, '1', "one");
    match receive(&mut store, &record, RecordSource::Notification) {
        Err(WriteError::InvalidLink {
            unresolved: Some(unresolved),
            ..
        }) => {
            assert_eq!(*unresolved, Unresolved::Version(record.type_link.clone()));
        }
        other => panic!("should name the type: {other:?}"),
    }
}

#[test]
fn a_record_keeps_its_highest_source() {
    let (mut store, note_type) = setup();
    let first = bobs(&note_type, '1', "one");
    receive(&mut store, &first, RecordSource::Resolution).unwrap();
    let second = next(&first, "two", 5);
    let commit = receive(&mut store, &second, RecordSource::NotificationUnknown).unwrap();
    assert_eq!(commit.record().source, RecordSource::Resolution);
    let (mut other, note_type) = setup();
    let first = bobs(&note_type, '1', "one");
    receive(&mut other, &first, RecordSource::NotificationUnknown).unwrap();
    let second = next(&first, "two", 5);
    let commit = receive(&mut other, &second, RecordSource::Notification).unwrap();
    assert_eq!(commit.record().source, RecordSource::Notification);
}

/// Bob's note `digit` with `permissions` and `content`, hashed.
fn bobs_with(note_type: &Value, digit: char, permissions: Value, content: Value) -> Record {
    let mut record = bobs(note_type, digit, "x");
    let mut value = serde_json::to_value(&record).unwrap();
    value["permissions"] = permissions;
    value["content"] = content;
    record = serde_json::from_value(value).unwrap();
    record.version.hash = record.hash_input().hash();
    record
}

/// Bob's record `digit` of a built-in type, as Bob's server serves it,
/// readable by Alice.
fn bobs_builtin(kind: BuiltinType, digit: char, content: Value) -> Record {
    let mut record: Record = serde_json::from_value(json!({
        "author": {"entity": BOB}, "id": id(digit), "source": "self",
        "created_at": "2026-01-01T00:00:00.0000000Z",
        "version": {"author": {"entity": BOB}, "hash": "0".repeat(64),
                    "created_at": "2026-01-01T00:00:00.0000000Z"},
        "permissions": {"read": [{"entity": ALICE}]},
        "type": kind.link(), "content": content
    }))
    .unwrap();
    record.version.hash = record.hash_input().hash();
    record
}

fn notified(
    store: &mut FakeStore,
    record: &Record,
    source: RecordSource,
) -> Result<Commit, WriteError> {
    let access = store.owner();
    let request = WriteRequest::receive(record.clone(), source, false).notified();
    store.run(request, access)
}

#[test]
fn a_strangers_notified_version_is_stored_only_if_it_names_the_user() {
    let (mut store, note_type) = setup();
    let public = json!({"read": "public"});
    // Public, naming nobody here: unsolicited from a stranger.
    let spam = bobs_with(&note_type, '1', public.clone(), json!({"text": "buy now"}));
    assert_eq!(
        notified(&mut store, &spam, RecordSource::NotificationUnknown).unwrap_err(),
        WriteError::Unsolicited
    );
    assert_eq!(store.version_count(&RecordKey::of(&spam)), 0);
    // The same from someone the user knows is theirs to send.
    notified(&mut store, &spam, RecordSource::Notification).unwrap();
    // A stranger may name the user: as a reader, in `notify`, or by a
    // mention in the content.
    let read = json!({"read": [{"entity": ALICE}, {"entity": BOB}]});
    let notify = json!({"read": "public", "notify": [{"entity": ALICE}]});
    let mention = json!({"text": "hi", "mention": {"entity": ALICE}});
    for (digit, permissions, content) in [
        ('2', read, json!({"text": "shared"})),
        ('3', notify, json!({"text": "look"})),
        ('4', public, mention),
    ] {
        let record = bobs_with(&note_type, digit, permissions, content);
        let commit = notified(&mut store, &record, RecordSource::NotificationUnknown)
            .unwrap_or_else(|error| panic!("{digit}: {error}"));
        assert_eq!(commit.record().source, RecordSource::NotificationUnknown);
    }
    // A parent fetched to fill a chain is not what the notification named.
    let parent = bobs_with(
        &note_type,
        '5',
        json!({"read": "public"}),
        json!({"text": "old"}),
    );
    receive(&mut store, &parent, RecordSource::NotificationUnknown).unwrap();
}

/// Another server's App, App Authorization and Credentials records are
/// never stored, however valid: only the user's own count (a stranger
/// would otherwise plant an "authorized app" in the user's console).
#[test]
fn another_servers_apps_authorizations_and_credentials_are_refused() {
    let (mut store, _) = setup();
    let app_link = json!({"entity": BOB, "record_id": id('a')});
    let scope = json!({"read": [], "write": [], "subscribe": []});
    let planted = [
        bobs_builtin(
            BuiltinType::App,
            'a',
            json!({"name": "Totally your app", "uris": {"redirect": "https://bob.example/cb"},
                   "scope_request": scope}),
        ),
        bobs_builtin(
            BuiltinType::AppAuthorization,
            'b',
            json!({"app": app_link, "scope_grant": scope}),
        ),
        bobs_builtin(
            BuiltinType::Credentials,
            'c',
            json!({"app": app_link, "algorithm": "ed25519",
                   "app_public_key": "A".repeat(43) + "=",
                   "server_public_key": "B".repeat(43) + "=",
                   "server_private_key": "C".repeat(43) + "="}),
        ),
    ];
    for record in &planted {
        for source in [RecordSource::Notification, RecordSource::Resolution] {
            let refused = receive(&mut store, record, source);
            assert!(
                matches!(refused, Err(WriteError::NotReceivable(_))),
                "{:?} was not refused: {refused:?}",
                record.type_link
            );
        }
        assert_eq!(store.version_count(&RecordKey::of(record)), 0);
    }
}

/// Bob's own store, holding Alice's note type (as a resolution would).
fn bobs_store(alices: &FakeStore) -> FakeStore {
    let mut store = FakeStore::new(BOB, NOW);
    store.know(ALICE);
    let type_key = RecordKey {
        entity: ALICE.parse().unwrap(),
        record_id: id(NOTE_TYPE),
    };
    store.insert(alices.latest(&type_key).clone());
    store
}

/// What `store`'s owner writes (`post`, `put` or `delete` of `target`).
fn write(store: &mut FakeStore, request: WriteRequest) -> Commit {
    let access = store.owner();
    store.run(request, access).unwrap()
}

fn body(value: Value) -> Vec<u8> {
    serde_json::to_vec(&value).unwrap()
}

#[test]
fn a_record_deleted_here_stays_deleted_whatever_its_author_writes_next() {
    let (mut alice, note_type) = setup();
    let mut bob = bobs_store(&alice);
    let permissions = json!({"read": [{"entity": ALICE}, {"entity": BOB}]});
    let first = write(
        &mut bob,
        WriteRequest::post(&body(
            json!({"type": note_type, "permissions": permissions, "content": {"text": "one"}}),
        ))
        .unwrap(),
    )
    .record()
    .clone();
    receive(&mut alice, &first, RecordSource::Notification).unwrap();
    let key = RecordKey::of(&first);
    let local = json!({"no_content": {"action": "local"}});
    let deleted = write(
        &mut alice,
        WriteRequest::delete(key.clone(), &body(local)).unwrap(),
    );
    let tombstone = deleted.record().clone();
    assert_eq!(
        tombstone.source,
        RecordSource::Notification,
        "the record still came from Bob's server"
    );
    // Bob edits, then deletes it everywhere: each is received, nothing is
    // stored, and Alice's copy stays deleted as she chose.
    let edit = json!({"content": {"text": "two"}});
    let second = write(
        &mut bob,
        WriteRequest::put(key.clone(), &body(edit)).unwrap(),
    )
    .record()
    .clone();
    let gone = write(&mut bob, WriteRequest::delete(key.clone(), b"{}").unwrap())
        .record()
        .clone();
    for version in [&second, &gone] {
        let commit = receive(&mut alice, version, RecordSource::Notification).unwrap();
        assert!(commit.is_replay(), "nothing to store");
        assert_eq!(alice.latest(&key).version.hash, tombstone.version.hash);
    }
    assert_eq!(alice.version_count(&key), 2);
}

#[test]
fn a_cascade_deletes_another_entitys_records_here_only() {
    let (mut alice, note_type) = setup();
    let mut bob = bobs_store(&alice);
    let both = json!({"read": [{"entity": ALICE}, {"entity": BOB}]});
    let root = write(
        &mut alice,
        WriteRequest::post(&body(
            json!({"type": note_type, "permissions": both, "content": {"text": "root"}}),
        ))
        .unwrap(),
    )
    .record()
    .clone();
    bob.insert(root.clone());
    let reply = json!({"type": note_type, "permissions": both, "content": {"text": "Bob's reply", "parent": {"entity": ALICE, "record_id": root.id}}});
    let bobs_reply = write(&mut bob, WriteRequest::post(&body(reply)).unwrap())
        .record()
        .clone();
    receive(&mut alice, &bobs_reply, RecordSource::Notification).unwrap();
    let own = json!({"type": note_type, "content": {"text": "Alice's", "parent": {"entity": ALICE, "record_id": root.id}}});
    let alices_child = write(&mut alice, WriteRequest::post(&body(own)).unwrap())
        .record()
        .clone();

    let commit = write(
        &mut alice,
        WriteRequest::delete(RecordKey::of(&root), b"{}").unwrap(),
    );
    let actions: Vec<(String, String, DeletionAction)> = commit
        .versions()
        .map(|v| {
            let record = v.record.record();
            let RecordBody::Tombstone(no_content) = &record.body else {
                panic!("a tombstone")
            };
            (
                record.author.entity.to_string(),
                record.version.author.entity.to_string(),
                no_content.action,
            )
        })
        .collect();
    assert_eq!(actions.len(), 3, "{actions:?}");
    assert_eq!(
        actions[0],
        (ALICE.into(), ALICE.into(), DeletionAction::Delete)
    );
    assert!(actions.contains(&(ALICE.into(), ALICE.into(), DeletionAction::Delete)));
    assert!(
        actions.contains(&(BOB.into(), ALICE.into(), DeletionAction::Local)),
        "Bob's reply is deleted here only: {actions:?}"
    );
    assert!(alice.latest(&RecordKey::of(&alices_child)).is_tombstone());
    // Bob deletes his reply himself: Alice's store takes it, and keeps its own deletion.
    let gone = write(
        &mut bob,
        WriteRequest::delete(RecordKey::of(&bobs_reply), b"{}").unwrap(),
    );
    let commit = receive(&mut alice, gone.record(), RecordSource::Notification).unwrap();
    assert!(commit.is_replay());
}

#[test]
fn a_received_deletion_cascades_to_the_users_records_and_leaves_the_senders_to_it() {
    let (mut alice, note_type) = setup();
    let mut bob = bobs_store(&alice);
    let both = json!({"read": [{"entity": ALICE}, {"entity": BOB}]});
    let post = |store: &mut FakeStore, text: &str, parent: Option<&Record>| {
        let mut content = json!({"text": text});
        if let Some(parent) = parent {
            content["parent"] = json!({"entity": parent.author.entity, "record_id": parent.id});
        }
        let request = json!({"type": note_type, "permissions": both, "content": content});
        write(store, WriteRequest::post(&body(request)).unwrap())
            .record()
            .clone()
    };
    // Bob's conversation, and his first message in it; Alice's reply.
    let root = post(&mut bob, "Bob's conversation", None);
    let bobs_message = post(&mut bob, "Bob's message", Some(&root));
    for record in [&root, &bobs_message] {
        receive(&mut alice, record, RecordSource::Notification).unwrap();
    }
    let alices_reply = post(&mut alice, "Alice's reply", Some(&root));

    // Bob deletes the conversation: Alice's server receives the tombstone.
    let deleted = write(
        &mut bob,
        WriteRequest::delete(RecordKey::of(&root), b"{}").unwrap(),
    );
    let tombstone = deleted.record().clone();
    let commit = receive(&mut alice, &tombstone, RecordSource::Notification).unwrap();
    let versions: Vec<&Record> = commit.versions().map(|v| v.record.record()).collect();
    assert_eq!(versions.len(), 2, "the tombstone and Alice's reply's");
    assert_eq!(versions[0].version.hash, tombstone.version.hash);
    let reply = versions[1];
    assert_eq!(reply.id, alices_reply.id);
    assert_eq!(reply.version.author.entity.as_str(), ALICE);
    let RecordBody::Tombstone(no_content) = &reply.body else {
        panic!("a tombstone")
    };
    assert_eq!(
        no_content.action,
        DeletionAction::Delete,
        "Alice's own reply is deleted everywhere"
    );
    assert!(
        !alice.latest(&RecordKey::of(&bobs_message)).is_tombstone(),
        "Bob's message is left to Bob's server, which sends its tombstone"
    );
}
