//! The store's SQL on a real SQLite: the schema migrates, list queries
//! answer page by page exactly as the in-memory reference does (a
//! differential test over generated records, filters, sorts and bounds),
//! `next_page` reads back as the query it continues, and the query planner
//! serves the commonest pages from indexes.
//!
//! Native only: it needs SQLite. `FOLIO_DIFFERENTIAL_FULL=1` runs the full
//! size (10,000 records, 1,000 filters); the default is sized for CI.

#![cfg(not(target_arch = "wasm32"))]

use folio_core::access::{Access, AppGrant};
use folio_core::model::{Entity, Record, RecordLink};
use folio_core::query::{
    IndexEntry, ListItem, ListQuery, decode_query_string, index_entries, next_page_query,
    next_page_start,
};
use folio_core::schema::Schema;
use folio_core::store::{MIGRATIONS, SqlValue, list_sql, read_version, version_statements};
use rusqlite::Connection;
use serde_json::{Value, json};

const USER_ID: i64 = 1;
const MAX_PAGES_PER_QUERY: usize = 12;
const USER: &str = "alice.example";

/// SplitMix64: a seeded, reproducible stream for generating cases.
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

const AUTHORS: [&str; 3] = [USER, "bob.example", "carol.example"];
const TAGS: [&str; 8] = [
    "apple",
    "Zebra",
    "é",
    "a b",
    "quote\"d",
    "x",
    "apple pie",
    "日本",
];
const TYPE_IDS: [&str; 3] = [
    "11111111111111111111111111111111",
    "22222222222222222222222222222222",
    "33333333333333333333333333333333",
];
const SOURCES: [&str; 4] = ["self", "notification", "subscription", "resolution"];
const BLOB: &str = "b10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10bb10b";

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
    .expect("the test schema compiles")
}

/// A store's worth of latest versions, each with its index entries.
struct Store {
    versions: Vec<(Record, Vec<IndexEntry>)>,
    ids: Vec<(String, String)>,
    hashes: Vec<String>,
}

fn date(ticks: i64) -> String {
    folio_core::model::RecordDate::from_unix_ticks(ticks)
        .expect("in range")
        .to_string()
}

fn generate(cases: &mut Cases, count: usize) -> Store {
    let schema = schema();
    let base: i64 = 17_000_000_000_000_000; // 2023-11
    let mut store = Store {
        versions: Vec::new(),
        ids: Vec::new(),
        hashes: Vec::new(),
    };
    for i in 0..count {
        let author = *cases.pick(&AUTHORS);
        let id = cases.hex(32);
        let mut content = serde_json::Map::new();
        if cases.chance(70) {
            content.insert("title".into(), json!(cases.pick(&TAGS)));
        }
        if cases.chance(50) {
            let n = cases.below(3) + 1;
            let tags: Vec<&str> = (0..n).map(|_| *cases.pick(&TAGS)).collect();
            content.insert("tags".into(), json!(tags));
        }
        if cases.chance(40) {
            content.insert("mentions".into(), json!([{"entity": cases.pick(&AUTHORS)}]));
        }
        if !store.ids.is_empty() && cases.chance(30) {
            let (entity, record_id) = cases.pick(&store.ids).clone();
            content.insert(
                "parent".into(),
                json!({"entity": entity, "record_id": record_id}),
            );
        }
        if !store.ids.is_empty() && cases.chance(60) {
            // Few conversations, so that `distinct` has work to do.
            let (entity, record_id) = store.ids[cases.below(store.ids.len().min(12))].clone();
            content.insert(
                "conversation".into(),
                json!({"entity": entity, "record_id": record_id}),
            );
        }
        if !store.hashes.is_empty() && cases.chance(20) {
            let at = cases.below(store.hashes.len());
            let (entity, record_id) = store.ids[at].clone();
            content.insert(
                "quote".into(),
                json!({"entity": entity, "record_id": record_id, "version_hash": store.hashes[at]}),
            );
        }
        if cases.chance(15) {
            let name = *cases.pick(&["photo.jpg", "notes.txt"]);
            content.insert(
                "image".into(),
                json!({"hash": BLOB, "type": "image/jpeg", "name": name}),
            );
        }
        let permissions = match cases.below(5) {
            0 => json!({"read": "public"}),
            1 => json!({}),
            2 => json!({"read": [{"entity": USER}]}),
            3 => json!({"read": [{"entity": "bob.example"}]}),
            _ => json!({"read": [{"entity": "bob.example"}, {"entity": "carol.example"}]}),
        };
        // Few distinct dates, so that ties exercise the record id tie-breaker.
        let created = base + (cases.below(40) as i64) * 10_000_000;
        let version_created = created + (cases.below(3) as i64) * 10_000_000;
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
                "created_at": date(version_created),
                "received_at": date(version_received)
            },
            "permissions": permissions,
            "type": {"entity": "types.example", "record_id": cases.pick(&TYPE_IDS), "version_hash": "c".repeat(64)},
            "content": Value::Object(content),
        });
        let live: Record = serde_json::from_value(record.clone()).expect("a valid record");
        let validated = schema
            .validate(&live)
            .expect("generated content follows the schema");
        let record = if cases.chance(10) {
            let links: Vec<Value> = validated
                .content_links()
                .map(|found| {
                    json!({"path": found.path, "type": found.link.kind(), "link": found.link})
                })
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
        store.ids.push((author.to_owned(), id));
        store.hashes.push(record.version.hash.to_string());
        store.versions.push((record, index_entries(&links)));
    }
    store
}

/// One random filter, as a client would write it.
fn filter_text(cases: &mut Cases, store: &Store, depth: usize) -> String {
    let n = cases.below(3) + 1;
    let items: Vec<String> = (0..n)
        .map(|_| {
            if depth < 2 && cases.chance(25) {
                format!("({})", filter_text(cases, store, depth + 1))
            } else {
                condition_text(cases, store)
            }
        })
        .collect();
    items.join(",")
}

fn condition_text(cases: &mut Cases, store: &Store) -> String {
    let tag = |cases: &mut Cases| serde_json::to_string(cases.pick(&TAGS)).expect("a string");
    let (entity, id) = cases.pick(&store.ids).clone();
    match cases.below(16) {
        0 => format!("$['author']={}", cases.pick(&AUTHORS)),
        1 => format!("$['type']=types.example+{}", cases.pick(&TYPE_IDS)),
        2 => format!(
            "$['type']=types.example+{}+{}",
            cases.pick(&TYPE_IDS),
            "c".repeat(64)
        ),
        3 => format!("$['content']['title']={}", tag(cases)),
        4 => format!("$['content']['tags'][*]={}", tag(cases)),
        5 => format!("$['content']['mentions'][*]={}", cases.pick(&AUTHORS)),
        6 => format!("$['content']['parent']={entity}+{id}"),
        7 => format!("$['content']['conversation']={entity}+{id}"),
        8 => {
            let at = cases.below(store.ids.len());
            let (entity, id) = &store.ids[at];
            let hash = &store.hashes[at];
            match cases.below(2) {
                0 => format!("$['content']['quote']={entity}+{id}+{hash}"),
                _ => format!("$['content']['quote']={entity}+{id}"),
            }
        }
        9 => format!(
            "{}=",
            cases.pick(&[
                "$['content']['title']",
                "$['content']['parent']",
                "$['content']['image']",
                "$['content']['tags'][*]",
                "$['author']"
            ])
        ),
        10 => cases.pick(&AUTHORS).to_string(),
        11 => tag(cases),
        12 => format!("$['id']=\"{id}\""),
        13 => format!("$['source']=\"{}\"", cases.pick(&SOURCES)),
        14 => format!(
            "$['content']['image']['name']={}",
            cases.pick(&["\"photo.jpg\"", "\"notes.txt\""])
        ),
        _ => format!("$['permissions']['read'][*]={}", cases.pick(&AUTHORS)),
    }
}

/// The parameters of one random list request.
fn list_params(cases: &mut Cases, store: &Store) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let mut add = |name: &str, value: String| params.push((name.to_owned(), value));
    let sort = *cases.pick(&[
        "$['received_at']",
        "$['created_at']",
        "$['version']['received_at']",
        "$['version.created_at']",
        "$['content']['title']",
    ]);
    let tag_sort = sort == "$['content']['title']";
    add("sort", format!("{sort}+{}", cases.pick(&["asc", "desc"])));
    let bound = |cases: &mut Cases| {
        let (record, _) = &cases_pick_version(cases, store);
        let value = if tag_sort {
            serde_json::to_string(cases.pick(&TAGS)).expect("a string")
        } else {
            format!("\"{}\"", record.created_at)
        };
        match cases.chance(50) {
            true => format!("{value}+{}", record.id),
            false => value,
        }
    };
    if cases.chance(20) {
        let min = bound(cases);
        add("min", min);
    }
    if cases.chance(20) {
        let max = bound(cases);
        add("max", max);
    }
    add(
        "page_size",
        cases.pick(&["2", "7", "25", "200"]).to_string(),
    );
    if cases.chance(20) {
        let path = *cases.pick(&["$['content']['conversation']", "$['content']['title']"]);
        add("distinct", path.to_owned());
    }
    if cases.chance(20) {
        add("sources", "self,notification,unknown".to_owned());
    }
    for _ in 0..cases.below(3) {
        let filter = filter_text(cases, store, 0);
        add("filter", filter);
    }
    if cases.chance(30) {
        add("include_deleted", "true".to_owned());
    }
    params
}

fn cases_pick_version<'s>(cases: &mut Cases, store: &'s Store) -> &'s (Record, Vec<IndexEntry>) {
    cases.pick(&store.versions)
}

fn accesses() -> Vec<Access> {
    let user: Entity = USER.parse().expect("an entity");
    let grant = AppGrant {
        app_record: None,
        read: vec![RecordLink {
            entity: "types.example".parse().expect("an entity"),
            original_entity: None,
            record_id: TYPE_IDS[0].parse().expect("an id"),
        }],
        write: vec![RecordLink {
            entity: "types.example".parse().expect("an entity"),
            original_entity: None,
            record_id: TYPE_IDS[1].parse().expect("an id"),
        }],
        subscribe: Vec::new(),
    };
    vec![
        Access::Owner {
            entity: user.clone(),
        },
        Access::App {
            entity: user,
            grant,
        },
        Access::Anonymous,
    ]
}

fn open(store: &Store) -> Connection {
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
    let tx = db.unchecked_transaction().expect("a transaction");
    for (record, entries) in &store.versions {
        for statement in version_statements(USER_ID, record, entries, Default::default()) {
            run(&tx, &statement.sql, &statement.params);
        }
    }
    tx.commit().expect("commit");
    db
}

fn bind(params: &[SqlValue]) -> Vec<rusqlite::types::Value> {
    params
        .iter()
        .map(|p| match p {
            SqlValue::Null => rusqlite::types::Value::Null,
            SqlValue::Integer(i) => rusqlite::types::Value::Integer(*i),
            SqlValue::Text(t) => rusqlite::types::Value::Text(t.clone()),
        })
        .collect()
}

fn run(db: &Connection, sql: &str, params: &[SqlValue]) {
    db.execute(sql, rusqlite::params_from_iter(bind(params)))
        .unwrap_or_else(|e| panic!("{e}: {sql}"));
}

fn rows(db: &Connection, sql: &str, params: &[SqlValue]) -> Vec<(Record, Vec<IndexEntry>)> {
    let mut statement = db
        .prepare_cached(sql)
        .unwrap_or_else(|e| panic!("{e}: {sql}"));
    let rows = statement
        .query_map(rusqlite::params_from_iter(bind(params)), |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .expect("the query runs");
    rows.map(|row| {
        let (record, links) = row.expect("a row");
        read_version(&record, &links).expect("a stored version reads back")
    })
    .collect()
}

#[test]
fn list_sql_answers_as_the_in_memory_reference_page_by_page() {
    let full = std::env::var_os("FOLIO_DIFFERENTIAL_FULL").is_some();
    let (records, queries) = if full { (10_000, 1_000) } else { (2_000, 300) };
    let mut cases = Cases(0x5EED);
    let store = generate(&mut cases, records);
    let db = open(&store);
    let user: Entity = USER.parse().expect("an entity");
    let accesses = accesses();
    let (mut pages, mut listed) = (0usize, 0usize);
    for n in 0..queries {
        let mut params = list_params(&mut cases, &store);
        let access = &accesses[n % accesses.len()];
        // The first pages of each query: enough to cross ties and bounds
        // without paging one record at a time through the whole store.
        for page in 0..MAX_PAGES_PER_QUERY {
            let query = ListQuery::from_params(&params, &user)
                .unwrap_or_else(|e| panic!("{e}: {params:?}"));
            let expected = query.select_page(
                access,
                store
                    .versions
                    .iter()
                    .map(|(record, entries)| ListItem { record, entries }),
            );
            let sql = list_sql(USER_ID, &query, access).statement;
            let mut got = rows(&db, &sql.sql, &sql.params);
            let more = got.len() > query.page_size as usize;
            got.truncate(query.page_size as usize);
            let got_hashes: Vec<_> = got.iter().map(|(r, _)| r.version.hash).collect();
            let expected_hashes: Vec<_> = expected.records.iter().map(|r| r.version.hash).collect();
            assert_eq!(
                got_hashes, expected_hashes,
                "query {n}, page {page}, {access:?}: {params:?}\n{}",
                sql.sql
            );
            assert_eq!(more, expected.more, "query {n}, page {page}: {params:?}");
            pages += 1;
            listed += got.len();
            let Some((last, entries)) = got.last().filter(|_| more) else {
                break;
            };
            let start = next_page_start(&query.sort, last, entries)
                .expect("a listed record has a sort value");
            let next = next_page_query(&params, &start);
            params = decode_query_string(next.strip_prefix('?').expect("a query string"))
                .expect("next_page decodes");
        }
    }
    eprintln!("{records} records, {queries} queries: {pages} pages, {listed} records listed");
    assert!(listed > queries, "the generated queries list records");
}
