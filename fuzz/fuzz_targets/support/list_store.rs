//! A small store on a real SQLite (in memory, with core's migrations), for
//! the targets that check what a parsed list or events request compiles to:
//! the SQL must prepare and run with its bound parameters, and a list must
//! answer exactly as core's in-memory reference (`ListQuery::select_page`)
//! does over the same versions.

// Each target uses its own part of this module.
#![allow(dead_code)]

use std::cell::RefCell;

use folio_core::auth::access::{Access, AppGrant};
use folio_core::model::{Entity, ReceivedRecord, Record, RecordDate, RecordLink};
use folio_core::query::{IndexEntry, ListItem, ListQuery, index_entries};
use folio_core::schema::Schema;
use folio_core::store::{MIGRATIONS, Statement, list_sql, read_version, version_statements};
use rusqlite::Connection;
use serde_json::{Value, json};

pub const USER_ID: i64 = 1;
pub const USER: &str = "alice.example";
const AUTHORS: [&str; 3] = [USER, "bob.example", "carol.example"];
const TAGS: [&str; 6] = ["apple", "Zebra", "é", "a b", "quote\"d", "日本"];
pub const TYPE_IDS: [&str; 3] = [
    "11111111111111111111111111111111",
    "22222222222222222222222222222222",
    "33333333333333333333333333333333",
];
const SOURCES: [&str; 4] = ["self", "notification", "subscription", "resolution"];
const BLOB: &str = "b10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10b";
/// How many versions the store holds: few, so every query stays fast.
const RECORDS: usize = 24;

pub struct ListStore {
    pub db: Connection,
    pub versions: Vec<(Record, Vec<IndexEntry>)>,
}

thread_local! {
    static STORE: RefCell<Option<ListStore>> = const { RefCell::new(None) };
}

/// Runs `f` on the store, built once per process.
pub fn with_store<T>(f: impl FnOnce(&ListStore) -> T) -> T {
    STORE.with(|cell| {
        let mut slot = cell.borrow_mut();
        f(slot.get_or_insert_with(build))
    })
}

/// A version's search text, as a write finds it.
fn text_of(record: &Record) -> String {
    schema().validate(record).expect("valid").search_text
}

pub fn user() -> Entity {
    USER.parse().expect("an entity")
}

/// The owner, an app with a narrow grant, and a stranger.
pub fn accesses() -> [Access; 3] {
    let link = |id: &str| RecordLink {
        entity: "types.example".parse().expect("an entity"),
        original_entity: None,
        record_id: id.parse().expect("an id"),
    };
    [
        Access::Owner { entity: user() },
        Access::App {
            entity: user(),
            grant: AppGrant {
                app_record: None,
                read: vec![link(TYPE_IDS[0])],
                write: vec![link(TYPE_IDS[1])],
                subscribe: Vec::new(),
                every_type: false,
            },
        },
        Access::Anonymous,
    ]
}

/// Core's statement values as rusqlite binds them: the helper core's own
/// SQLite tests use.
#[path = "../../../core/tests/support/sqlite.rs"]
mod sqlite;
use sqlite::bind;

impl ListStore {
    /// Prepares and runs a statement; every row's columns as SQLite values.
    /// Any SQLite error is a panic naming the statement.
    pub fn rows(&self, statement: &Statement) -> Vec<Vec<rusqlite::types::Value>> {
        let mut prepared = self
            .db
            .prepare(&statement.sql)
            .unwrap_or_else(|e| panic!("SQLite refuses the statement: {e}\n{}", statement.sql));
        let columns = prepared.column_count();
        let rows = prepared
            .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
                (0..columns).map(|i| row.get(i)).collect()
            })
            .unwrap_or_else(|e| panic!("the statement does not run: {e}\n{}", statement.sql));
        rows.map(|row| row.unwrap_or_else(|e| panic!("a row fails: {e}\n{}", statement.sql)))
            .collect()
    }

    /// The page core's in-memory reference chooses, as version hashes, and
    /// whether more follow. A search is the same list over the versions
    /// holding every word. A ranked one is ranked by SQLite's BM25, which
    /// the reference does not compute: it gives every match, for
    /// [`ListStore::check_list`] to hold the page to.
    fn reference(&self, query: &ListQuery, access: &Access) -> (Vec<String>, bool) {
        let hash = |record: &Record| record.version.hash.to_string();
        let Some(search) = &query.search else {
            let page = query.select_page(
                access,
                self.versions
                    .iter()
                    .map(|(record, entries)| ListItem { record, entries }),
            );
            return (page.records.iter().map(|r| hash(r)).collect(), page.more);
        };
        let holds_every_word = |record: &Record| {
            let text = text_of(record);
            let words: Vec<&str> = text.split(' ').collect();
            search.words.iter().all(|word| words.contains(&word.as_str()))
        };
        let matching = self
            .versions
            .iter()
            .filter(|(record, _)| !record.is_tombstone() && holds_every_word(record));
        let mut unsearched = query.clone();
        unsearched.search = None;
        if search.ranked {
            unsearched.page_size = 200;
        }
        let page = unsearched.select_page(
            access,
            matching.map(|(record, entries)| ListItem { record, entries }),
        );
        (page.records.iter().map(|r| hash(r)).collect(), page.more)
    }

    /// Runs `query`'s SQL for every access and checks it answers the page
    /// core's in-memory reference chooses: the same versions in the same
    /// order, and whether more follow.
    pub fn check_list(&self, query: &ListQuery) {
        for access in accesses() {
            let sql = list_sql(USER_ID, query, &access).statement;
            let rows = self.rows(&sql);
            let mut got: Vec<String> = rows
                .iter()
                .map(|row| {
                    let (
                        Some(rusqlite::types::Value::Text(record)),
                        Some(rusqlite::types::Value::Text(links)),
                    ) = (row.first(), row.get(1))
                    else {
                        panic!("a list row is (record, links): {row:?}\n{}", sql.sql)
                    };
                    let (record, _) = read_version(record, links)
                        .unwrap_or_else(|e| panic!("a listed version reads back: {e:?}"));
                    record.version.hash.to_string()
                })
                .collect();
            let more = got.len() > query.page_size as usize;
            got.truncate(query.page_size as usize);
            let (expected_hashes, expected_more) = self.reference(query, &access);
            if query.search.as_ref().is_some_and(|search| search.ranked) {
                // Ranked: the best of the matches, by a score the reference
                // does not compute: as many as the page holds, each a match.
                assert!(
                    got.iter().all(|hash| expected_hashes.contains(hash)),
                    "a ranked search lists a record that does not match\n{query:?}"
                );
                assert_eq!(
                    got.len(),
                    expected_hashes.len().min(query.page_size as usize),
                    "a ranked search's page holds every match it can\n{query:?}"
                );
                assert!(!more, "a ranked search is one page\n{query:?}");
                continue;
            }
            assert_eq!(
                got, expected_hashes,
                "the SQL lists other versions than the reference, as {access:?}\n{query:?}\n{}",
                sql.sql
            );
            assert_eq!(
                more, expected_more,
                "the SQL and the reference disagree on `more`\n{query:?}"
            );
        }
    }
}

/// SplitMix64: the store's versions, the same in every process.
struct Cases(u64);

impl Cases {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn hex(&mut self, chars: usize) -> String {
        (0..chars)
            .map(|_| char::from_digit((self.next() % 16) as u32, 16).unwrap_or('0'))
            .collect()
    }
}

fn date(ticks: i64) -> String {
    RecordDate::from_unix_ticks(ticks)
        .expect("in range")
        .to_string()
}

fn schema() -> Schema {
    Schema::compile(&json!({
        "type": "object",
        "properties": {
            "content": {"type": "object", "properties": {
                "title": {"type": "tag_link", "sort_property": true, "optional": true},
                "tags": {"type": "array", "items": {"type": "tag_link"}, "optional": true},
                "mentions": {"type": "array", "items": {"type": "entity_link"}, "optional": true},
                "parent": {"type": "record_link", "existential": true, "optional": true},
                "conversation": {"type": "record_link", "optional": true},
                "quote": {"type": "version_link", "optional": true},
                "image": {"type": "blob_link", "optional": true}
            }}
        }
    }))
    .expect("the store's schema compiles")
}

/// Versions of every kind a filter can match: tags, entity, record,
/// version and blob links, tombstones, every source and permission shape,
/// and ties on dates (so the record id breaks them).
fn build() -> ListStore {
    let schema = schema();
    let mut cases = Cases(0x5EED);
    let base: i64 = 17_000_000_000_000_000;
    let mut ids: Vec<(String, String, String)> = Vec::new();
    let mut versions = Vec::new();
    for i in 0..RECORDS {
        let author = *cases.pick(&AUTHORS);
        let id = cases.hex(32);
        let mut content = serde_json::Map::new();
        if cases.chance(70) {
            content.insert("title".into(), json!(cases.pick(&TAGS)));
        }
        if cases.chance(50) {
            let tags: Vec<&str> = (0..cases.below(3) + 1)
                .map(|_| *cases.pick(&TAGS))
                .collect();
            content.insert("tags".into(), json!(tags));
        }
        if cases.chance(40) {
            content.insert("mentions".into(), json!([{"entity": cases.pick(&AUTHORS)}]));
        }
        if !ids.is_empty() && cases.chance(40) {
            let (entity, record_id, _) = cases.pick(&ids).clone();
            content.insert(
                "parent".into(),
                json!({"entity": entity, "record_id": record_id}),
            );
        }
        if !ids.is_empty() && cases.chance(50) {
            let (entity, record_id, _) = ids[cases.below(ids.len().min(4))].clone();
            content.insert(
                "conversation".into(),
                json!({"entity": entity, "record_id": record_id}),
            );
        }
        if !ids.is_empty() && cases.chance(30) {
            let (entity, record_id, hash) = cases.pick(&ids).clone();
            content.insert(
                "quote".into(),
                json!({"entity": entity, "record_id": record_id, "version_hash": hash}),
            );
        }
        if cases.chance(20) {
            let name = *cases.pick(&["photo.jpg", "notes.txt"]);
            content.insert(
                "image".into(),
                json!({"hash": BLOB, "type": "image/jpeg", "name": name}),
            );
        }
        let permissions = match cases.below(4) {
            0 => json!({"read": "public"}),
            1 => json!({}),
            2 => json!({"read": [{"entity": "bob.example"}]}),
            _ => json!({"read": [{"entity": USER}, {"entity": "carol.example"}]}),
        };
        let created = base + (cases.below(6) as i64) * 10_000_000;
        let received = base + (i as i64 / 3) * 10_000_000;
        let version_received = base + i as i64 * 10_000_000 + 1;
        let mut record = json!({
            "author": {"entity": author},
            "id": id,
            "source": cases.pick(&SOURCES),
            "created_at": date(created),
            "received_at": date(received),
            "version": {
                "author": {"entity": author},
                "hash": cases.hex(64),
                "created_at": date(created + (cases.below(2) as i64) * 10_000_000),
                "received_at": date(version_received)
            },
            "permissions": permissions,
            "type": {"entity": "types.example", "record_id": cases.pick(&TYPE_IDS), "version_hash": "c".repeat(64)},
            "content": Value::Object(content),
        });
        let live: Record = serde_json::from_value(record.clone()).expect("a valid record");
        let validated = schema
            .validate(&live)
            .expect("the content follows the schema");
        let record: Record = if cases.chance(15) {
            let links: Vec<Value> = validated
                .content_links()
                .map(|found| json!({"path": found.path, "type": found.link.kind(), "link": found.link}))
                .collect();
            let object = record.as_object_mut().expect("an object");
            object.remove("content");
            object.insert(
                "no_content".into(),
                json!({"action": cases.pick(&["delete", "local", "leave"]), "links": links}),
            );
            serde_json::from_value(record).expect("a valid tombstone")
        } else {
            live
        };
        let links = schema.validate(&record).expect("valid").links;
        ids.push((author.to_owned(), id, record.version.hash.to_string()));
        versions.push((record, index_entries(&links)));
    }

    let db = Connection::open_in_memory().expect("an in-memory database");
    db.execute_batch("PRAGMA foreign_keys = ON;")
        .expect("foreign keys");
    for migration in MIGRATIONS {
        db.execute_batch(migration.sql).expect("the migration runs");
    }
    db.execute(
        "INSERT INTO users (id, name, entity, created_at) VALUES (?1, 'alice', ?2, 0)",
        rusqlite::params![USER_ID, USER],
    )
    .expect("a user");
    for (record, entries) in &versions {
        let received = ReceivedRecord::new(record.clone()).expect("a stored version is received");
        let text = text_of(record);
        for statement in version_statements(
            USER_ID,
            &received,
            entries,
            Some(&text),
            Default::default(),
        ) {
            db.execute(
                &statement.sql,
                rusqlite::params_from_iter(bind(&statement.params)),
            )
            .unwrap_or_else(|e| panic!("{e}: {}", statement.sql));
        }
    }
    ListStore { db, versions }
}
