//! Write request bodies on arbitrary bytes, through the whole write
//! transition against core's in-memory fake store (the one core's write
//! tests use). The first byte picks the method (POST, PUT, DELETE), the
//! record a PUT or DELETE addresses and who writes; the rest is the body.
//! The store holds a note type, Alice's note with three replies that depend
//! on it (two levels of cascade), Bob's note and a blob.
//!
//! Reading a body must be deterministic. A request that reads must come to
//! the same result on two fresh identical stores; the fake store itself
//! asserts that each stored version replaces the latest one and that
//! `received_at` grows. A stored version carries its own hash and the
//! user as its version's author, and a cascade stores only tombstones. A
//! replayable write (a create with `id` and `created_at`, an update or
//! deletion with `version.parent_hash` and `version.created_at`, PROTOCOL.md
//! §5) sent again must be answered with the version it stored, storing
//! nothing.

#![no_main]

include!("../../core/tests/support/fake_store.rs");
include!("../../core/tests/support/note_fixture.rs");

use fake_store::{FakeStore, id};
use folio_core::auth::access::{Access, AppGrant};
use folio_core::schema::builtin::BuiltinType;
use folio_core::model::{Record, RecordLink};
use folio_core::write::{Commit, RecordKey, WriteError, WriteRequest};
use libfuzzer_sys::fuzz_target;
use note_fixture::{ALICE, BLOB, BOB, NOTE_TYPE, NOW, note_type_content};
use serde_json::{Value, json};

fn post(store: &mut FakeStore, body: Value) -> Record {
    let access = store.owner();
    let request = WriteRequest::post(&serde_json::to_vec(&body).expect("json")).expect("a body");
    store
        .run(request, access)
        .expect("the setup writes")
        .record()
        .clone()
}

/// Alice's store: Bob is known, the note type, a note of Alice's that
/// links Bob and the blob, a note of Bob's readable by Alice, and a blob.
fn setup() -> (FakeStore, Value) {
    let mut store = FakeStore::new(ALICE, NOW);
    store.know(BOB);
    store.put_blob(BLOB, 10, true);
    let body = json!({"id": id(NOTE_TYPE), "type": BuiltinType::Type.link(), "content": note_type_content()});
    let note_type = post(&mut store, body);
    let note_type =
        json!({"entity": ALICE, "record_id": note_type.id, "version_hash": note_type.version.hash});
    let body = json!({
        "id": id('a'), "type": note_type, "permissions": {"read": "public"},
        "content": {"text": "Alice's", "mention": {"entity": BOB},
            "attachment": {"hash": BLOB, "type": "text/plain", "name": "a.txt"}}
    });
    post(&mut store, body);
    // Replies that a deletion of Alice's note cascades to, two levels deep.
    let parent = |digit: char| json!({"entity": ALICE, "record_id": id(digit)});
    for (digit, to, permissions) in [
        ('d', 'a', json!({"read": "public"})),
        ('e', 'a', json!({})),
        ('f', 'd', json!({"read": [{"entity": BOB}]})),
    ] {
        let body = json!({
            "id": id(digit), "type": note_type, "permissions": permissions,
            "content": {"text": "a reply", "parent": parent(to)}
        });
        post(&mut store, body);
    }
    let mut bobs: Record = serde_json::from_value(json!({
        "author": {"entity": BOB}, "id": id('b'), "source": "self",
        "created_at": NOW, "received_at": NOW,
        "version": {"author": {"entity": BOB}, "hash": "0".repeat(64), "created_at": NOW, "received_at": NOW},
        "permissions": {"read": [{"entity": ALICE}]}, "type": note_type, "content": {"text": "Bob's"}
    }))
    .expect("Bob's note");
    bobs.version.hash = bobs.hash_input().hash();
    store.insert(bobs);
    (store, note_type)
}

/// An app that may write notes, one that may only read them, or neither.
fn access(store: &FakeStore, note_type: &Value, which: u8) -> Access {
    let note = RecordLink {
        entity: ALICE.parse().expect("an entity"),
        original_entity: None,
        record_id: note_type["record_id"]
            .as_str()
            .expect("an id")
            .parse()
            .expect("an id"),
    };
    let app = |write: Vec<RecordLink>, read: Vec<RecordLink>| Access::App {
        entity: ALICE.parse().expect("an entity"),
        grant: AppGrant {
            app_record: None,
            read,
            write,
            subscribe: Vec::new(),
            every_type: false,
        },
    };
    match which {
        0 => store.owner(),
        1 => app(vec![note.clone()], vec![note]),
        2 => app(Vec::new(), vec![note]),
        _ => Access::Anonymous,
    }
}

/// A write's result with its cascade in key order. A deletion tombstones
/// its dependants in the order the store lists them, and core's fake store
/// lists them from a `HashMap`, whose order differs between two stores: the
/// tombstones' `received_at`s are compared as a set, everything else exactly.
fn normalised(result: &Result<Commit, WriteError>) -> String {
    match result {
        Ok(Commit::Store { written, cascaded }) => {
            let mut tombstones: Vec<String> = cascaded
                .iter()
                .map(|v| {
                    let record = v.record.record();
                    format!(
                        "{} {} {:?} {:?}",
                        RecordKey::of(record),
                        record.version.hash,
                        v.replaces,
                        v.links
                    )
                })
                .collect();
            tombstones.sort();
            let mut received: Vec<_> = cascaded
                .iter()
                .map(|v| v.record.version_received_at())
                .collect();
            received.sort();
            format!("store {written:?} cascade {tombstones:?} received {received:?}")
        }
        other => format!("{other:?}"),
    }
}

fn non_null(value: Option<&Value>) -> bool {
    value.is_some_and(|v| !v.is_null())
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let target = match (choice >> 2) & 3 {
        0 => RecordKey::new(ALICE.parse().expect("an entity"), id('a')),
        1 => RecordKey::new(ALICE.parse().expect("an entity"), id(NOTE_TYPE)),
        2 => RecordKey::new(BOB.parse().expect("an entity"), id('b')),
        _ => RecordKey::new(ALICE.parse().expect("an entity"), id('c')),
    };
    let read = |body: &[u8]| match choice & 3 {
        1 => WriteRequest::put(target.clone(), body),
        2 => WriteRequest::delete(target.clone(), body),
        _ => WriteRequest::post(body),
    };
    let request = read(body);
    assert_eq!(request, read(body), "reading a body is deterministic");
    let Ok(request) = request else { return };

    let (mut store, note_type) = setup();
    let access = access(&store, &note_type, (choice >> 4) & 3);
    let result = store.run(request.clone(), access.clone());
    let (mut twin, _) = setup();
    let again = twin.run(request.clone(), access.clone());
    assert_eq!(
        normalised(&result),
        normalised(&again),
        "a write is deterministic"
    );

    let Ok(Commit::Store { written, cascaded }) = &result else {
        return;
    };
    let key = RecordKey::of(&written.record);
    assert_eq!(
        store.latest(&key),
        written.record.record(),
        "the written version is the latest"
    );
    for version in std::iter::once(&**written).chain(cascaded) {
        let record = &version.record;
        assert_eq!(
            record.version.hash,
            record.hash_input().hash(),
            "a version carries its hash"
        );
        assert_eq!(
            record.version.author.entity, store.user,
            "the user writes every version"
        );
    }
    assert!(
        cascaded.iter().all(|v| v.record.is_tombstone()),
        "a cascade stores tombstones"
    );

    // A replayable write, sent again, is answered with what it stored.
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let version = json.get("version");
    let is_update_or_delete = match choice & 3 {
        1 | 2 => true,
        _ => non_null(json.get("id")) && non_null(version.and_then(|v| v.get("parent_hash"))),
    };
    let replayable = match is_update_or_delete {
        true => {
            non_null(version.and_then(|v| v.get("parent_hash")))
                && non_null(version.and_then(|v| v.get("created_at")))
        }
        false => non_null(json.get("id")) && non_null(json.get("created_at")),
    };
    if replayable {
        let versions = store.version_count(&key);
        match store.run(request, access) {
            Ok(Commit::Replay(record)) => assert_eq!(
                record.version.hash, written.record.version.hash,
                "the replay answers the stored version"
            ),
            other => panic!("a replayable write sent again: {other:?}"),
        }
        assert_eq!(
            store.version_count(&key),
            versions,
            "a replay stores nothing"
        );
    }
});
