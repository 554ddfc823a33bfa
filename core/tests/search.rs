//! Search over records' text (`docs/search.md`) on a real SQLite: the text
//! each write keeps in the full-text index (`record_text`), a list's
//! `search` ranked or in its sort, combined with filters and permissions,
//! updates and deletions keeping the index at the latest version, and
//! upkeep's backfill for versions stored unsearched (a migrated store, an
//! imported archive).
//!
//! Native only: it needs SQLite.

#![cfg(not(target_arch = "wasm32"))]

#[path = "support/sqlite.rs"]
mod sqlite;

use folio_core::auth::access::Access;
use folio_core::model::{Entity, ReceivedRecord, Record};
use folio_core::query::{ListQuery, index_entries};
use folio_core::schema::builtin::BuiltinType;
use folio_core::schema::{RecordType, Schema};
use folio_core::store::{
    Backfill, Replaces, SqlValue, Statement, list_sql, read_record, unsearched_sql,
    version_statements_replacing,
};
use rusqlite::Connection;
use serde_json::{Value, json};
use sqlite::bind;

const USER_ID: i64 = 1;
const USER: &str = "alice.example";

fn note_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "content": {"type": "object", "properties": {
                "title": {"type": "string", "max_length": 200},
                "body": {"type": "string", "optional": true},
                "label": {"type": "tag_link", "optional": true},
                "person": {"type": "entity_link", "optional": true},
                "count": {"type": "int", "optional": true}
            }}
        }
    })
}

fn fresh_db() -> Connection {
    sqlite::migrated_store(USER_ID, USER)
}

fn run(db: &Connection, statement: &Statement) {
    db.execute(
        &statement.sql,
        rusqlite::params_from_iter(bind(&statement.params)),
    )
    .unwrap_or_else(|e| panic!("{e}: {}", statement.sql));
}

fn query_rows(db: &Connection, statement: &Statement) -> Vec<Vec<SqlValue>> {
    let mut prepared = db.prepare(&statement.sql).expect("prepares");
    let columns = prepared.column_count();
    prepared
        .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
            Ok((0..columns)
                .map(|at| match row.get_ref(at).expect("a column") {
                    rusqlite::types::ValueRef::Integer(n) => SqlValue::Integer(n),
                    rusqlite::types::ValueRef::Text(t) => {
                        SqlValue::Text(String::from_utf8_lossy(t).into_owned())
                    }
                    _ => SqlValue::Null,
                })
                .collect())
        })
        .expect("runs")
        .map(|row| row.expect("a row"))
        .collect()
}

/// A store with the note type, and a clock for receipt dates.
struct Store {
    db: Connection,
    note_type: Record,
    schema: Schema,
    ms: i64,
}

fn date(ms: i64) -> String {
    folio_core::model::RecordDate::from_unix_ticks(17_000_000_000_000_000 + ms * 10_000)
        .expect("in range")
        .to_string()
}

impl Store {
    fn new() -> Store {
        let db = fresh_db();
        let mut store = Store {
            db,
            note_type: BuiltinType::Type.record().clone(),
            schema: Schema::compile(&note_schema()).expect("compiles"),
            ms: 0,
        };
        let type_link = BuiltinType::Type.link();
        let note_type = store.record(
            "99999999999999999999999999999999",
            None,
            serde_json::to_value(&type_link).expect("a link"),
            json!({"name": "note", "schema": note_schema()}),
        );
        let mut note_type = note_type;
        note_type.permissions = serde_json::from_value(json!({"read": "public"})).expect("public");
        note_type.version.hash = note_type.hash_input().hash();
        let type_type = RecordType::from_content(
            BuiltinType::Type
                .record()
                .content()
                .expect("live")
                .as_value(),
        )
        .expect("the Type type compiles");
        store.store(&note_type, None, &type_type.schema, true);
        store.note_type = note_type;
        store
    }

    /// A version by the user, hashed, received after the last.
    fn record(&mut self, id: &str, parent: Option<&Record>, ty: Value, content: Value) -> Record {
        self.ms += 1;
        let received = date(self.ms);
        let mut record: Record = serde_json::from_value(json!({
            "author": {"entity": USER},
            "id": id,
            "source": "self",
            "created_at": "2026-11-21T10:00:00.0000000Z",
            "received_at": parent.and_then(|p| p.received_at).map_or(received.clone(), |d| d.to_string()),
            "version": {
                "author": {"entity": USER},
                "hash": "0".repeat(64),
                "created_at": received,
                "received_at": received
            },
            "permissions": {},
            "type": ty,
            "content": content,
        }))
        .expect("a valid record");
        record.version.parent_hash = parent.map(|p| p.version.hash);
        record.version.hash = record.hash_input().hash();
        record
    }

    fn note(&mut self, id: &str, parent: Option<&Record>, content: Value) -> Record {
        let ty = json!({
            "entity": USER,
            "record_id": self.note_type.id.to_string(),
            "version_hash": self.note_type.version.hash.to_string(),
        });
        let record = self.record(id, parent, ty, content);
        let schema = self.schema.clone();
        self.store(&record, parent, &schema, true);
        record
    }

    /// Stores a version as a write does; without `words`, as an archive
    /// import does (its words unknown).
    fn store(&self, record: &Record, parent: Option<&Record>, schema: &Schema, words: bool) {
        let validated = schema.validate(record).expect("valid");
        let replaces = match parent {
            None => Replaces::Nothing,
            Some(_) => Replaces::Unread,
        };
        let received = ReceivedRecord::new(record.clone()).expect("received");
        let tx = self.db.unchecked_transaction().expect("a transaction");
        for statement in version_statements_replacing(
            USER_ID,
            &received,
            &index_entries(&validated.links),
            words.then_some(validated.search_text.as_str()),
            replaces,
            Default::default(),
        ) {
            run(&tx, &statement);
        }
        tx.commit().expect("commits");
    }

    /// The titles a list with these parameters answers, in order.
    fn titles(&self, params: &[(&str, &str)], access: &Access) -> Vec<String> {
        let params: Vec<(String, String)> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let user: Entity = USER.parse().expect("an entity");
        let query = ListQuery::from_params(&params, &user).expect("a list query");
        let statement = list_sql(USER_ID, &query, access).statement;
        query_rows(&self.db, &statement)
            .iter()
            .map(|row| match &row[0] {
                SqlValue::Text(json) => {
                    let record = read_record(json).expect("reads back");
                    let content = record.content().expect("live").as_value().clone();
                    content["title"].as_str().unwrap_or_default().to_owned()
                }
                other => panic!("a record: {other:?}"),
            })
            .collect()
    }
}

fn owner() -> Access {
    Access::Owner {
        entity: USER.parse().expect("an entity"),
    }
}

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "cccccccccccccccccccccccccccccccc";

#[test]
fn a_search_ranks_its_matches_by_bm25() {
    let mut store = Store::new();
    store.note(
        A,
        None,
        json!({"title": "Groceries", "body": "milk, eggs and a pinned note about bread"}),
    );
    store.note(B, None, json!({"title": "Pinned thing"}));
    store.note(C, None, json!({"title": "Café plans", "label": "pinned"}));
    // BM25: the word in a record of two words, then of three (the tag is
    // text too), then of nine.
    assert_eq!(
        store.titles(&[("search", "pinned")], &owner()),
        ["Pinned thing", "Café plans", "Groceries"]
    );
    // Every word must be there; accents and case do not matter.
    assert_eq!(
        store.titles(&[("search", "PINNED cafe")], &owner()),
        ["Café plans"]
    );
    assert_eq!(
        store.titles(&[("search", "pinned bicycle")], &owner()),
        Vec::<String>::new()
    );
    // Links' parts are not text: an entity link's name matches nothing.
    store.note(
        "dddddddddddddddddddddddddddddddd",
        None,
        json!({"title": "Call", "person": {"entity": "bob.example"}}),
    );
    assert!(store.titles(&[("search", "bob")], &owner()).is_empty());
    // A ranked search is one page: its best matches, no more.
    assert_eq!(
        store.titles(&[("search", "pinned"), ("page_size", "2")], &owner()),
        ["Pinned thing", "Café plans"]
    );
}

#[test]
fn a_search_with_a_sort_pages_in_that_order_and_keeps_filters_and_permissions() {
    let mut store = Store::new();
    store.note(A, None, json!({"title": "one pinned", "label": "work"}));
    store.note(B, None, json!({"title": "two pinned", "label": "home"}));
    store.note(C, None, json!({"title": "three pinned", "label": "work"}));
    let sort = ("sort", "$['received_at']+asc");
    assert_eq!(
        store.titles(&[("search", "pinned"), sort], &owner()),
        ["one pinned", "two pinned", "three pinned"]
    );
    // Pages as any sorted list: one more row than the page says another follows.
    assert_eq!(
        store.titles(&[("search", "pinned"), sort, ("page_size", "2")], &owner()),
        ["one pinned", "two pinned", "three pinned"]
    );
    let filter = ("filter", "$['content']['label']=\"work\"");
    assert_eq!(
        store.titles(&[("search", "pinned"), sort, filter], &owner()),
        ["one pinned", "three pinned"]
    );
    // A stranger reads only public records: none here.
    assert!(
        store
            .titles(&[("search", "pinned")], &Access::Anonymous)
            .is_empty()
    );
}

#[test]
fn the_index_holds_the_latest_version_and_a_deletion_empties_it() {
    let mut store = Store::new();
    let first = store.note(A, None, json!({"title": "pinned draft"}));
    assert_eq!(
        store.titles(&[("search", "draft")], &owner()),
        ["pinned draft"]
    );
    let second = store.note(A, Some(&first), json!({"title": "final pinned version"}));
    assert!(store.titles(&[("search", "draft")], &owner()).is_empty());
    assert_eq!(
        store.titles(&[("search", "final")], &owner()),
        ["final pinned version"]
    );
    // A tombstone has no text.
    let ty = serde_json::to_value(&second.type_link).expect("a link");
    let mut tombstone = store.record(A, Some(&second), ty, json!({}));
    tombstone.body = folio_core::model::RecordBody::Tombstone(folio_core::model::NoContent {
        action: folio_core::model::DeletionAction::Delete,
        links: Vec::new(),
    });
    tombstone.version.hash = tombstone.hash_input().hash();
    let schema = store.schema.clone();
    store.store(&tombstone, Some(&second), &schema, true);
    let indexed: i64 = store
        .db
        .query_row(
            "SELECT count(*) FROM record_text WHERE record_text MATCH 'final'",
            [],
            |row| row.get(0),
        )
        .expect("counts");
    assert_eq!(indexed, 0, "the tombstone's record left the index");
}

#[test]
fn upkeep_indexes_versions_stored_unsearched() {
    let mut store = Store::new();
    // As an archive import or a store migrated from before search stores them.
    let schema = store.schema.clone();
    let ty = json!({
        "entity": USER,
        "record_id": store.note_type.id.to_string(),
        "version_hash": store.note_type.version.hash.to_string(),
    });
    let old = store.record(A, None, ty.clone(), json!({"title": "old pinned words"}));
    store.store(&old, None, &schema, false);
    let newer = store.record(A, Some(&old), ty, json!({"title": "newer pinned words"}));
    store.store(&newer, Some(&old), &schema, false);
    assert!(store.titles(&[("search", "pinned")], &owner()).is_empty());

    let rows = query_rows(&store.db, &unsearched_sql());
    // The type record was stored with its words; the note's two versions were not.
    assert_eq!(rows.len(), 2, "{rows:?}");
    let backfill = Backfill::of(&rows).expect("rows read");
    assert_eq!((backfill.searched, backfill.unreadable), (1, 0));
    let tx = store.db.unchecked_transaction().expect("a transaction");
    for statement in &backfill.statements {
        run(&tx, statement);
    }
    tx.commit().expect("commits");

    assert_eq!(
        store.titles(&[("search", "newer")], &owner()),
        ["newer pinned words"]
    );
    assert!(store.titles(&[("search", "old")], &owner()).is_empty());
    assert!(query_rows(&store.db, &unsearched_sql()).is_empty());
    // The next write over it removes the backfilled words exactly.
    store.note(A, Some(&newer), json!({"title": "latest"}));
    assert!(store.titles(&[("search", "pinned")], &owner()).is_empty());
}

#[test]
fn a_search_reads_the_full_text_index_then_each_record_by_row() {
    let mut store = Store::new();
    for i in 0..50 {
        let id = format!("{i:032x}");
        store.note(&id, None, json!({"title": format!("note {i}")}));
    }
    for params in [
        vec![("search", "note")],
        vec![("search", "note 7")],
        vec![("search", "note"), ("sort", "$['received_at']+desc")],
    ] {
        let params: Vec<(String, String)> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let user: Entity = USER.parse().expect("an entity");
        let query = ListQuery::from_params(&params, &user).expect("a query");
        let statement = list_sql(USER_ID, &query, &owner()).statement;
        let plan: Vec<String> = {
            let mut prepared = store
                .db
                .prepare(&format!("EXPLAIN QUERY PLAN {}", statement.sql))
                .expect("plans");
            prepared
                .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
                    row.get::<_, String>(3)
                })
                .expect("runs")
                .map(|row| row.expect("a row"))
                .collect()
        };
        assert!(
            plan.iter()
                .any(|step| step.starts_with("SCAN record_text VIRTUAL TABLE INDEX")),
            "{params:?}: {plan:?}"
        );
        assert!(
            plan.iter()
                .any(|step| step == "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)"),
            "{params:?}: {plan:?}"
        );
        assert!(
            !plan
                .iter()
                .any(|step| step == "SCAN r" || step.starts_with("SCAN r USING")),
            "{params:?}: {plan:?}"
        );
    }
}

#[test]
fn a_ranked_search_ranks_the_newest_matches_alone() {
    let mut store = Store::new();
    // The best match (the word alone) is the oldest; then more matches
    // than a ranked search ranks, each the word among four others.
    store.note(A, None, json!({"title": "pinned"}));
    let ranked = folio_core::query::RANKED_MATCHES as usize;
    for i in 0..ranked {
        let id = format!("{:032x}", i + 1);
        store.note(
            &id,
            None,
            json!({"title": format!("pinned one two three {i}")}),
        );
    }
    let titles = store.titles(&[("search", "pinned")], &owner());
    assert_eq!(titles.len(), 20);
    assert!(!titles.contains(&"pinned".to_owned()), "{titles:?}");
    // A sorted search lists every match, the oldest too.
    let oldest = store.titles(
        &[
            ("search", "pinned"),
            ("sort", "$['received_at']+asc"),
            ("page_size", "1"),
        ],
        &owner(),
    );
    assert_eq!(oldest[0], "pinned");
}
