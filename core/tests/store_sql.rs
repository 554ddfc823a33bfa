//! The store's SQL on a real SQLite: the schema migrates, list queries
//! answer page by page exactly as the in-memory reference does (a
//! differential test over generated records, filters, sorts and bounds),
//! `next_page` reads back as the query it continues, and the query planner
//! serves the commonest pages from indexes.
//!
//! Native only: it needs SQLite. `FOLIO_DIFFERENTIAL_FULL=1` runs the full
//! size (10,000 records, 1,000 filters); the default is sized for CI.

#![cfg(not(target_arch = "wasm32"))]

#[path = "support/sqlite.rs"]
mod sqlite;

use folio_core::auth::access::{Access, AppGrant};
use folio_core::model::{Entity, Record, RecordLink};
use folio_core::query::{
    IndexEntry, ListItem, ListQuery, decode_query_string, index_entries, next_page_query,
    next_page_start,
};
use folio_core::schema::Schema;
use folio_core::store::{
    MIGRATIONS, Replaces, SqlValue, list_sql, read_version, version_statements,
    version_statements_replacing,
};
use rusqlite::Connection;
use serde_json::{Value, json};
use sqlite::bind;

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
/// Two versions of each type: a filter on the type's version tells them apart.
const TYPE_HASHES: [&str; 2] = [
    "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
    "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
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
        // Now and then a version written by another entity than the author.
        let version_author = if cases.chance(20) {
            *cases.pick(&AUTHORS)
        } else {
            author
        };
        let type_hash = *cases.pick(&TYPE_HASHES);
        let mut record = json!({
            "author": {"entity": author},
            "id": id,
            "source": cases.pick(&SOURCES),
            "created_at": date(created),
            "received_at": date(received),
            "version": {
                "author": {"entity": version_author},
                "hash": cases.hex(64),
                "created_at": date(version_created),
                "received_at": date(version_received)
            },
            "permissions": permissions,
            "type": {"entity": "types.example", "record_id": cases.pick(&TYPE_IDS), "version_hash": type_hash},
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
    match cases.below(20) {
        0 => format!("$['author']={}", cases.pick(&AUTHORS)),
        1 => format!("$['type']=types.example+{}", cases.pick(&TYPE_IDS)),
        2 => format!(
            "$['type']=types.example+{}+{}",
            cases.pick(&TYPE_IDS),
            cases.pick(&TYPE_HASHES)
        ),
        // The envelope's other columns, and values of a kind they never hold.
        16 => format!("$['version']['author']={}", cases.pick(&AUTHORS)),
        17 => match cases.below(3) {
            0 => format!("$['type']={}", cases.pick(&AUTHORS)),
            1 => format!("$['author']={}", tag(cases)),
            _ => format!(
                "$['version']['author']=types.example+{}",
                cases.pick(&TYPE_IDS)
            ),
        },
        // A bare type, matched by the envelope's type.
        18 => match cases.below(2) {
            0 => format!("types.example+{}", cases.pick(&TYPE_IDS)),
            _ => format!(
                "types.example+{}+{}",
                cases.pick(&TYPE_IDS),
                cases.pick(&TYPE_HASHES)
            ),
        },
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
                "$['author']",
                "$['version']['author']",
                "$['type']"
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
        let path = *cases.pick(&[
            "$['content']['conversation']",
            "$['content']['title']",
            "$['type']",
            "$['author']",
        ]);
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
        every_type: false,
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

/// A migrated database holding one user with an empty store.
fn fresh_db() -> Connection {
    sqlite::migrated_store(USER_ID, USER)
}

/// A version the test stores: every one carries its receipt dates.
fn received(record: &Record) -> folio_core::model::ReceivedRecord {
    folio_core::model::ReceivedRecord::new(record.clone()).expect("a stored version is received")
}

fn open(store: &Store) -> Connection {
    let db = fresh_db();
    let tx = db.unchecked_transaction().expect("a transaction");
    for (record, entries) in &store.versions {
        for statement in version_statements(
            USER_ID,
            &received(record),
            entries,
            None,
            Default::default(),
        ) {
            run(&tx, &statement.sql, &statement.params);
        }
    }
    tx.commit().expect("commit");
    db
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

/// The plan SQLite chooses for a list query, one line per step.
fn query_plan(db: &Connection, params: &[(&str, &str)]) -> Vec<String> {
    let user: Entity = USER.parse().expect("an entity");
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let query = ListQuery::from_params(&params, &user).expect("a valid query");
    let access = Access::Owner { entity: user };
    let sql = list_sql(USER_ID, &query, &access).statement;
    let mut statement = db
        .prepare(&format!("EXPLAIN QUERY PLAN {}", sql.sql))
        .expect("the query prepares");
    let rows = statement
        .query_map(rusqlite::params_from_iter(bind(&sql.params)), |row| {
            row.get::<_, String>(3)
        })
        .expect("the plan runs");
    rows.map(|row| row.expect("a plan row")).collect()
}

/// Fails if the plan reads every row of `records` or sorts the page
/// itself: the page must come from an index range, in order.
fn assert_indexed(plan: &[String]) {
    for step in plan {
        let scans_records = step == "SCAN r" || step.starts_with("SCAN r ");
        assert!(!scans_records, "records are scanned: {plan:#?}");
        assert!(
            !step.contains("TEMP B-TREE"),
            "the page is sorted: {plan:#?}"
        );
    }
    assert!(
        plan.iter().any(|step| step.starts_with("SEARCH r USING")),
        "records are searched through an index: {plan:#?}"
    );
}

#[test]
fn the_default_list_is_an_index_range_in_order() {
    let mut cases = Cases(7);
    let db = open(&generate(&mut cases, 200));
    let plan = query_plan(&db, &[]);
    assert_indexed(&plan);
    assert!(
        plan.iter().any(|s| s.contains("records_by_received_at")),
        "{plan:#?}"
    );
}

#[test]
fn a_type_and_author_filter_is_an_index_range_in_order() {
    let mut cases = Cases(7);
    let db = open(&generate(&mut cases, 200));
    let filter = format!(
        "$['type']=types.example+{},$['author']=bob.example",
        TYPE_IDS[0]
    );
    let plan = query_plan(&db, &[("filter", &filter)]);
    assert_indexed(&plan);
    assert!(
        plan.iter().any(|s| s.contains("records_by_type ")),
        "{plan:#?}"
    );
}

fn schema_objects(db: &Connection) -> Vec<(String, String)> {
    let mut statement = db
        .prepare("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
        .expect("the catalogue");
    let rows = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("the catalogue reads");
    rows.map(|row| row.expect("a row")).collect()
}

#[test]
fn migrations_split_into_statements_build_the_same_schema() {
    let batch = fresh_db();
    let one_by_one = Connection::open_in_memory().expect("a database");
    for migration in MIGRATIONS {
        for statement in migration.statements() {
            one_by_one
                .execute_batch(&statement)
                .unwrap_or_else(|e| panic!("{e}: {statement}"));
        }
    }
    let names = |db: &Connection| -> Vec<String> {
        schema_objects(db)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    };
    assert_eq!(names(&batch), names(&one_by_one));
    assert!(names(&batch).contains(&"versions_received_at_increases".to_owned()));
    // The same definitions too, not only the same names (the split drops
    // the comment lines).
    let definitions = |db: &Connection| -> Vec<(String, String)> {
        schema_objects(db)
            .into_iter()
            .map(|(name, sql)| {
                let lines: Vec<&str> = sql
                    .lines()
                    .filter(|line| !line.trim_start().starts_with("--"))
                    .collect();
                (name, lines.join("\n"))
            })
            .collect()
    };
    assert_eq!(definitions(&batch), definitions(&one_by_one));
}

fn store_one(
    db: &Connection,
    record: &Record,
    client_id: Option<folio_core::model::ClientId>,
) -> rusqlite::Result<()> {
    store_over(db, record, client_id, None)
}

/// Stores `record`; with `parent`, as a writer that read the parent's
/// index entries does ([`version_statements_replacing`]).
fn store_over(
    db: &Connection,
    record: &Record,
    client_id: Option<folio_core::model::ClientId>,
    parent: Option<&Record>,
) -> rusqlite::Result<()> {
    let entries_of = |record| index_entries(&schema().validate(record).expect("valid").links);
    let entries = entries_of(record);
    let tx = db.unchecked_transaction()?;
    let origin = folio_core::store::WriteOrigin {
        client_id,
        app: None,
    };
    let replaced = parent.map(entries_of);
    let replaces = match (&record.version.parent_hash, replaced.as_deref()) {
        (None, _) => Replaces::Nothing,
        (Some(_), Some(entries)) => Replaces::Read(entries),
        (Some(_), None) => Replaces::Unread,
    };
    let statements =
        version_statements_replacing(USER_ID, &received(record), &entries, None, replaces, origin);
    for statement in statements {
        tx.execute(
            &statement.sql,
            rusqlite::params_from_iter(bind(&statement.params)),
        )?;
    }
    tx.commit()
}

/// A live version of record `id` by the user, with its hash computed.
fn version(id: &str, parent: Option<&Record>, content: Value, received_ms: i64) -> Record {
    let received = date(17_000_000_000_000_000 + received_ms * 10_000);
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
        "type": {"entity": "types.example", "record_id": TYPE_IDS[0], "version_hash": "c".repeat(64)},
        "content": content,
    }))
    .expect("a valid record");
    record.version.parent_hash = parent.map(|p| p.version.hash);
    record.version.hash = record.hash_input().hash();
    record
}

const ID_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const ID_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

#[test]
fn the_schema_allows_one_first_version_per_record() {
    let db = fresh_db();
    store_one(&db, &version(ID_A, None, json!({}), 1), None).expect("the first version");
    let rival = version(ID_A, None, json!({"title": "rival"}), 2);
    let error = store_one(&db, &rival, None).expect_err("a second first version");
    assert!(error.to_string().contains("UNIQUE"), "{error}");
}

#[test]
fn the_schema_allows_one_child_per_version() {
    let db = fresh_db();
    let first = version(ID_A, None, json!({}), 1);
    store_one(&db, &first, None).expect("the first version");
    store_one(
        &db,
        &version(ID_A, Some(&first), json!({"title": "one"}), 2),
        None,
    )
    .expect("a child");
    let sibling = version(ID_A, Some(&first), json!({"title": "two"}), 3);
    let error = store_one(&db, &sibling, None).expect_err("a second child of one parent");
    assert!(error.to_string().contains("UNIQUE"), "{error}");
}

#[test]
fn the_schema_refuses_a_received_at_that_does_not_increase() {
    let db = fresh_db();
    store_one(&db, &version(ID_A, None, json!({}), 5), None).expect("a version");
    let earlier = version(ID_B, None, json!({}), 4);
    let error = store_one(&db, &earlier, None).expect_err("received before the last one");
    assert!(error.to_string().contains("must increase"), "{error}");
}

#[test]
fn a_failed_write_leaves_nothing_behind() {
    let db = fresh_db();
    store_one(&db, &version(ID_A, None, json!({}), 5), None).expect("a version");
    store_one(&db, &version(ID_B, None, json!({}), 4), None).expect_err("out of order");
    let count = |table: &str| -> i64 {
        db.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .expect("a count")
    };
    assert_eq!(
        (count("versions"), count("records"), count("events")),
        (1, 1, 1)
    );
}

/// The link index's entries, `(path, key)`, in order.
fn link_index(db: &Connection) -> Vec<(String, String)> {
    db.prepare("SELECT path, key FROM link_index ORDER BY path, key")
        .expect("a query")
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .map(|row| row.expect("an entry"))
        .collect()
}

#[test]
fn an_update_replaces_the_latest_row_and_its_link_index() {
    for parent_known in [false, true] {
        an_update_replaces_the_latest_row_and_its_link_index_when(parent_known);
    }
}

fn an_update_replaces_the_latest_row_and_its_link_index_when(parent_known: bool) {
    let db = fresh_db();
    let store_one = |db: &Connection, record: &Record, client_id| {
        let parent = record.version.parent_hash.map(|hash| {
            let statement =
                folio_core::store::version_sql(USER_ID, &record.author.entity, &record.id, &hash);
            rows(db, &statement.sql, &statement.params).remove(0).0
        });
        store_over(
            db,
            record,
            client_id,
            parent.as_ref().filter(|_| parent_known),
        )
    };
    let first = version(
        ID_A,
        None,
        json!({"title": "old", "tags": ["kept", "gone"]}),
        1,
    );
    store_one(&db, &first, None).expect("the first version");
    let second = version(ID_A, Some(&first), json!({"tags": ["kept", "new"]}), 2);
    store_one(&db, &second, None).expect("an update");
    let statement = folio_core::store::latest_version_sql(
        USER_ID,
        &USER.parse().expect("an entity"),
        &ID_A.parse().expect("an id"),
    );
    let latest = rows(&db, &statement.sql, &statement.params);
    assert_eq!(latest.len(), 1);
    assert_eq!(latest[0].0, second);
    assert_eq!(latest[0].0.received_at, first.received_at);
    let keys: Vec<String> = db
        .prepare("SELECT key FROM link_index WHERE path LIKE '$[''content'']%' ORDER BY key")
        .expect("a query")
        .query_map([], |row| row.get(0))
        .expect("rows")
        .map(|row| row.expect("a key"))
        .collect();
    assert_eq!(
        keys,
        ["t:kept", "t:new"],
        "the entry kept, the one gone, the one new"
    );

    // An update that keeps every link leaves the index as it is.
    let third = version(ID_A, Some(&second), json!({"tags": ["new", "kept"]}), 3);
    store_one(&db, &third, None).expect("an update that keeps its links");
    let entries = link_index(&db);
    let keys: Vec<&str> = entries.iter().map(|(_, key)| key.as_str()).collect();
    assert_eq!(keys, ["t:kept", "t:new"]);
}

proptest::proptest! {
    /// Whether or not the writer read the parent's index entries, a chain
    /// of versions leaves the link index holding the latest version's
    /// stored entries, and only them.
    #[test]
    fn the_link_index_holds_the_latest_versions_entries_either_way(
        chain in proptest::collection::vec(
            proptest::collection::btree_set("[a-d]", 0..4), 1..6),
        parent_known in proptest::collection::vec(proptest::bool::ANY, 6),
    ) {
        let db = fresh_db();
        let mut parent: Option<Record> = None;
        for (at, tags) in chain.iter().enumerate() {
            let content = json!({"tags": tags});
            let record = version(ID_A, parent.as_ref(), content, at as i64 + 1);
            let over = parent.as_ref().filter(|_| parent_known[at]);
            store_over(&db, &record, None, over).expect("stored");
            let mut wanted: Vec<(String, String)> =
                index_entries(&schema().validate(&record).expect("valid").links)
                    .into_iter()
                    .filter(|entry| !entry.is_column())
                    .map(|entry| (entry.path, entry.key))
                    .collect();
            wanted.sort();
            proptest::prop_assert_eq!(link_index(&db), wanted);
            parent = Some(record);
        }
    }
}

#[test]
fn events_are_numbered_per_user_and_read_back_after_a_point() {
    let db = fresh_db();
    let first = version(ID_A, None, json!({}), 1);
    let client_id = "8fbf7696f25b4628bde73f46f4631d3f"
        .parse()
        .expect("a client id");
    store_one(&db, &first, Some(client_id)).expect("a version");
    // Another user's store commits between the first user's two versions.
    const OTHER_USER_ID: i64 = 2;
    db.execute(
        "INSERT INTO users (id, name, entity, created_at) VALUES (?1, 'bob', 'bob.example', 0)",
        rusqlite::params![OTHER_USER_ID],
    )
    .expect("a second user");
    let theirs = version(ID_A, None, json!({}), 3);
    let entries = index_entries(&schema().validate(&theirs).expect("valid").links);
    for statement in version_statements(
        OTHER_USER_ID,
        &received(&theirs),
        &entries,
        None,
        Default::default(),
    ) {
        run(&db, &statement.sql, &statement.params);
    }
    store_one(&db, &version(ID_B, None, json!({}), 2), None).expect("a version");
    let bounds = |user_id| -> (Option<i64>, i64) {
        let bounds = folio_core::store::event_log_bounds_sql(user_id);
        db.query_row(
            &bounds.sql,
            rusqlite::params_from_iter(bind(&bounds.params)),
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("the bounds")
    };
    assert_eq!(bounds(USER_ID), (Some(1), 2));
    assert_eq!(bounds(OTHER_USER_ID), (Some(1), 1), "numbered apart");

    use folio_core::service::events::{CatchUpStart, EventId};
    let read = |start, after| -> Vec<(i64, Option<String>, String)> {
        let statement = folio_core::store::events_sql(USER_ID, start, after, 10);
        let mut query = db.prepare(&statement.sql).expect("a query");
        query
            .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
                Ok((row.get(0)?, row.get(1)?, row.get::<_, String>(2)?))
            })
            .expect("rows")
            .map(|row| row.expect("an event"))
            .collect()
    };
    let all = read(CatchUpStart::AfterEvent(EventId::from_sequence(0)), None);
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[0].1.as_deref(),
        Some("8fbf7696f25b4628bde73f46f4631d3f")
    );
    assert_eq!(
        read(CatchUpStart::AfterEvent(EventId::from_sequence(1)), None).len(),
        1
    );
    let min = first.version.received_at.expect("set");
    assert_eq!(read(CatchUpStart::AfterReceivedAt(min), None).len(), 1);
    let chunked = read(
        CatchUpStart::AfterEvent(EventId::from_sequence(0)),
        Some(EventId::from_sequence(2)),
    );
    assert!(chunked.is_empty());
}

#[test]
fn a_linked_blob_is_no_longer_collected() {
    let db = fresh_db();
    db.execute(
        "INSERT INTO blobs (user_id, hash, size, uploaded_at, expires_at) VALUES (?1, ?2, 3, 0, 99)",
        rusqlite::params![USER_ID, BLOB],
    )
    .expect("a blob");
    let content = json!({"image": {"hash": BLOB, "type": "image/png", "name": "a.png"}});
    store_one(&db, &version(ID_A, None, content, 1), None).expect("a version");
    let expires: Option<i64> = db
        .query_row("SELECT expires_at FROM blobs", [], |row| row.get(0))
        .expect("the blob");
    assert_eq!(expires, None);
}

#[test]
fn a_new_store_holds_the_built_in_types() {
    let db = fresh_db();
    let tx = db.unchecked_transaction().expect("a transaction");
    for statement in folio_core::store::seed_statements(USER_ID) {
        run(&tx, &statement.sql, &statement.params);
    }
    tx.commit().expect("commit");
    let user: Entity = USER.parse().expect("an entity");
    let query = ListQuery::from_params(&[], &user).expect("the default list");
    let owner = Access::Owner { entity: user };
    let sql = list_sql(USER_ID, &query, &owner).statement;
    let names: Vec<String> = rows(&db, &sql.sql, &sql.params)
        .iter()
        .map(|(record, _)| {
            record.content().expect("live").as_map()["name"]
                .as_str()
                .expect("a name")
                .to_owned()
        })
        .collect();
    // Newest first (by the first version's received_at).
    assert_eq!(
        names,
        ["credentials", "app_authorization", "app", "entity", "type"]
    );
}

/// Every row of the tables a write touches, as SQLite returns them.
fn table_rows(db: &Connection) -> Vec<(&'static str, Vec<rusqlite::types::Value>)> {
    let mut all = Vec::new();
    for table in [
        "users",
        "versions",
        "records",
        "link_index",
        "events",
        "blobs",
    ] {
        let mut statement = db
            .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2, 3"))
            .expect("a table");
        let columns = statement.column_count();
        let rows = statement
            .query_map([], |row| {
                (0..columns)
                    .map(|i| row.get::<_, rusqlite::types::Value>(i))
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .expect("the rows");
        all.extend(rows.map(|row| (table, row.expect("a row"))));
    }
    all
}

#[test]
fn statements_as_literal_sql_store_what_bound_parameters_store() {
    let tricky = "it's \"quoted\" ?1 ?10 -- not a comment /* nor this */ ; Zoë 🗂 \u{2028}\n";
    let first = version(ID_A, None, json!({"title": tricky}), 1);
    let second = version(ID_A, Some(&first), json!({"title": "'"}), 2);
    let links = |record: &Record| index_entries(&schema().validate(record).expect("valid").links);
    let mut statements = Vec::new();
    for record in [&first, &second] {
        statements.extend(version_statements(
            USER_ID,
            &received(record),
            &links(record),
            None,
            Default::default(),
        ));
    }
    // The built-in types (their links' paths hold `$` and `'`), received after them.
    statements.extend(folio_core::store::seed_statements(USER_ID));
    let bound = fresh_db();
    for statement in &statements {
        run(&bound, &statement.sql, &statement.params);
    }
    let literal = fresh_db();
    let script: String = statements
        .iter()
        .map(|statement| statement.to_literal_sql().expect("renders") + ";\n")
        .collect();
    literal
        .execute_batch(&script)
        .expect("the literal SQL runs");
    let rows = table_rows(&bound);
    assert!(
        rows.len() > 20,
        "the store holds the versions and their rows"
    );
    assert_eq!(table_rows(&literal), rows);
}

#[test]
fn integer_literals_are_exact_at_any_magnitude() {
    let db = fresh_db();
    for n in [
        i64::MIN,
        i64::MIN + 1,
        -(1 << 53) - 1,
        -1,
        0,
        (1 << 53) + 1,
        17_900_000_000_000_001,
        i64::MAX,
    ] {
        let statement = folio_core::store::Statement {
            sql: "SELECT typeof(?1), ?1".to_owned(),
            params: vec![SqlValue::Integer(n)],
        };
        let sql = statement.to_literal_sql().expect("renders");
        let (kind, value): (String, i64) = db
            .query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap_or_else(|e| panic!("{e}: {sql}"));
        assert_eq!((kind.as_str(), value), ("integer", n), "{sql}");
    }
}

#[test]
fn linked_records_are_fetched_by_entity_record_and_version() {
    use folio_core::query::{IncludeLinks, LinkPlan};
    let db = fresh_db();
    let target = version(ID_B, None, json!({"title": "target"}), 1);
    store_one(&db, &target, None).expect("a target");
    let content = json!({
        "parent": {"entity": USER, "record_id": ID_B},
        "quote": {"entity": USER, "record_id": ID_B, "version_hash": target.version.hash},
        "mentions": [{"entity": "bob.example"}]
    });
    let linking = version(ID_A, None, content, 2);
    let entries = index_entries(&schema().validate(&linking).expect("valid").links);
    let include = IncludeLinks {
        entity: true,
        existential: true,
        paths: vec!["$['content']['quote']".parse().expect("a path")],
    };
    let user: Entity = USER.parse().expect("an entity");
    let plan = include.plan([entries.as_slice()], &user);
    let expected = LinkPlan {
        entities: ["bob.example".parse().expect("an entity")].into(),
        records: [(user.clone(), ID_B.parse().expect("an id"))].into(),
        versions: [(user, ID_B.parse().expect("an id"), target.version.hash)].into(),
    };
    assert_eq!(plan, expected);
    let statement = folio_core::store::linked_sql(USER_ID, &plan);
    let fetched = rows(&db, &statement.sql, &statement.params);
    // The record (latest) and the version are the same version here; no
    // Entity record of bob.example is stored.
    assert_eq!(fetched.len(), 2);
    assert!(fetched.iter().all(|(record, _)| record == &target));
}

#[test]
fn a_records_versions_are_listed_oldest_first_and_fetched_by_hash() {
    let db = fresh_db();
    let first = version(ID_A, None, json!({"title": "old"}), 1);
    let second = version(ID_A, Some(&first), json!({"title": "new"}), 2);
    store_one(&db, &first, None).expect("the first version");
    store_one(&db, &second, None).expect("an update");
    let author: Entity = USER.parse().expect("an entity");
    let id = ID_A.parse().expect("an id");
    let page = |after, size| {
        let statement = folio_core::store::versions_sql(USER_ID, &author, &id, after, size);
        rows(&db, &statement.sql, &statement.params)
            .into_iter()
            .map(|(record, _)| record)
            .collect::<Vec<_>>()
    };
    assert_eq!(page(None, 20), [first.clone(), second.clone()]);
    assert_eq!(
        page(first.version.received_at, 20),
        std::slice::from_ref(&second)
    );
    let statement = folio_core::store::version_sql(USER_ID, &author, &id, &first.version.hash);
    let found = rows(&db, &statement.sql, &statement.params);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, first);
}

/// One user's store on SQLite, written through the write transitions with
/// every need answered by the store's own SQL: core and SQL end to end.
mod writes_on_sqlite {
    use super::*;
    use folio_core::model::{RecordDate, RecordId};
    use folio_core::schema::builtin::BuiltinType;
    use folio_core::store::{
        NeedRow, NeedRows, WriteOrigin, commit_statements, last_received_at_sql, need_sql,
        seed_statements,
    };
    use folio_core::write::{
        Commit, RecordKey, Step, Write, WriteContext, WriteError, WriteRequest,
    };

    struct SqliteStore {
        db: Connection,
        now: RecordDate,
        ids: u128,
    }

    impl SqliteStore {
        fn new() -> Self {
            let db = fresh_db();
            let tx = db.unchecked_transaction().expect("a transaction");
            for statement in seed_statements(USER_ID) {
                run(&tx, &statement.sql, &statement.params);
            }
            tx.commit().expect("commit");
            let now = "2026-11-21T10:00:00Z".parse().expect("a date");
            SqliteStore { db, now, ids: 0 }
        }

        fn answer(&self, need: &folio_core::write::Need) -> folio_core::write::Supplied {
            let (statement, shape) = need_sql(USER_ID, need, self.now);
            let mut query = self.db.prepare(&statement.sql).expect("the need's query");
            let rows: Vec<NeedRow> = query
                .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
                    Ok(match shape {
                        NeedRows::Record | NeedRows::Records => NeedRow::Version {
                            record: row.get(0)?,
                            links: row.get(1)?,
                        },
                        NeedRows::Known => NeedRow::Integers(vec![row.get(0)?]),
                        NeedRows::Blob => NeedRow::Integers(vec![row.get(0)?, row.get(1)?]),
                    })
                })
                .expect("rows")
                .map(|row| row.expect("a row"))
                .collect();
            shape.answer(rows).expect("stored rows read back")
        }

        fn write(&mut self, request: WriteRequest) -> Result<Commit, WriteError> {
            self.now =
                RecordDate::from_unix_ticks(self.now.unix_ticks() + 10_000_000).expect("a date");
            self.ids += 1;
            let statement = last_received_at_sql(USER_ID);
            // Decimal text, as D1 needs it (see `last_received_at_sql`).
            let last: Option<String> = self
                .db
                .query_row(
                    &statement.sql,
                    rusqlite::params_from_iter(bind(&statement.params)),
                    |row| row.get(0),
                )
                .expect("the last received_at");
            let last: Option<i64> = last.map(|ticks| ticks.parse().expect("integer ticks"));
            let context = WriteContext {
                user: USER.parse().expect("an entity"),
                access: Access::Owner {
                    entity: USER.parse().expect("an entity"),
                },
                now: self.now,
                received_at: self.now,
                last_received_at: last.map(|t| RecordDate::from_unix_ticks(t).expect("a date")),
                fresh_id: RecordId::from_bytes(self.ids.to_be_bytes()),
            };
            let mut write = Write::new(request, context);
            let commit = loop {
                match write.step() {
                    Step::Fetch(needs) => {
                        let answers = needs.iter().map(|need| self.answer(need)).collect();
                        write.supply(answers);
                    }
                    Step::Done(result) => break result?,
                }
            };
            let tx = self.db.unchecked_transaction().expect("a transaction");
            for statement in commit_statements(USER_ID, &commit, WriteOrigin::default()) {
                run(&tx, &statement.sql, &statement.params);
            }
            tx.commit().expect("commit");
            Ok(commit)
        }

        fn post(&mut self, body: Value) -> Result<Commit, WriteError> {
            self.write(WriteRequest::post(body.to_string().as_bytes())?)
        }

        fn count(&self, sql: &str) -> i64 {
            self.db
                .query_row(sql, [], |row| row.get(0))
                .expect("a count")
        }
    }

    fn link(record: &Record) -> Value {
        json!({"entity": record.author.entity, "record_id": record.id, "version_hash": record.version.hash})
    }

    fn key(record: &Record) -> RecordKey {
        RecordKey::new(record.author.entity.clone(), record.id)
    }

    #[test]
    fn create_update_conflict_delete_and_cascade_on_sqlite() {
        let mut store = SqliteStore::new();
        let note_type = store
            .post(json!({
                "type": serde_json::to_value(BuiltinType::Type.link()).expect("a link"),
                "content": {"name": "note", "schema": {"type": "object", "properties": {
                    "content": {"type": "object", "properties": {
                        "text": {"type": "string"},
                        "parent": {"type": "record_link", "existential": true, "optional": true}
                    }}
                }}}
            }))
            .expect("a type record")
            .record()
            .clone();
        let a = store
            .post(json!({"type": link(&note_type), "content": {"text": "a"}}))
            .expect("note a")
            .record()
            .clone();
        let b = store
            .post(json!({"type": link(&note_type), "content": {
                "text": "b", "parent": {"entity": USER, "record_id": a.id}
            }}))
            .expect("note b, existential on a")
            .record()
            .clone();

        let body = json!({"content": {"text": "a2"}, "version": {"parent_hash": a.version.hash}});
        let a2 = store
            .write(WriteRequest::put(key(&a), body.to_string().as_bytes()).expect("a body"))
            .expect("an update")
            .record()
            .clone();
        assert_eq!(a2.version.parent_hash, Some(a.version.hash));

        let stale = store
            .write(WriteRequest::put(key(&a), body.to_string().as_bytes()).expect("a body"))
            .expect_err("the parent is stale");
        assert!(
            matches!(stale, WriteError::VersionConflict { .. }),
            "{stale:?}"
        );

        let deleted = store
            .write(WriteRequest::delete(key(&a), b"").expect("no body"))
            .expect("a deletion");
        let tombstones: Vec<RecordId> = deleted.versions().map(|v| v.record.id).collect();
        assert_eq!(tombstones, [a.id, b.id]);

        assert_eq!(
            store.count("SELECT COUNT(*) FROM records WHERE deleted = 1"),
            2
        );
        // Built-ins (6 versions), the type, a, b, a2, and two tombstones.
        assert_eq!(store.count("SELECT COUNT(*) FROM versions"), 12);
        assert_eq!(store.count("SELECT COUNT(*) FROM events"), 12);
    }

    #[test]
    fn a_replayed_create_stores_nothing_on_sqlite() {
        let mut store = SqliteStore::new();
        let body = json!({
            "id": "0123456789abcdef0123456789abcdef",
            "created_at": "2026-11-21T09:00:00.0000000Z",
            "type": serde_json::to_value(BuiltinType::Type.link()).expect("a link"),
            "content": {"name": "note", "schema": {"type": "object", "properties": {}}}
        });
        let first = store.post(body.clone()).expect("a create");
        let replay = store.post(body).expect("a replay");
        assert!(replay.is_replay());
        assert_eq!(replay.record(), first.record());
        assert_eq!(store.count("SELECT COUNT(*) FROM versions"), 7);
    }
}

/// The worker's user object keeps nonces in its own SQLite with these
/// statements: a nonce is recorded once, and forgotten past the window.
#[test]
fn the_nonce_table_records_each_nonce_once_and_forgets_old_ones() {
    use folio_core::auth::nonce_table;
    let db = rusqlite::Connection::open_in_memory().expect("an in-memory database");
    for statement in nonce_table::CREATE {
        db.execute(statement, []).expect("the nonce table");
    }
    let record = |nonce: &str, ts: i64| {
        let written = db
            .execute(nonce_table::RECORD, rusqlite::params!["app", nonce, ts])
            .expect("a nonce");
        nonce_table::verdict(written)
    };
    assert_eq!(record("n1", 1_000), Ok(()));
    assert!(record("n1", 1_000).is_err(), "a replay");
    assert_eq!(record("n2", 2_000), Ok(()));
    db.execute(nonce_table::FORGET, [1_500])
        .expect("forgetting");
    assert_eq!(record("n1", 1_000), Ok(()), "forgotten past the window");
    assert!(record("n2", 2_000).is_err(), "still within the window");
}

/// The steps of a statement's query plan.
fn plan_of(db: &Connection, statement: &folio_core::store::Statement) -> Vec<String> {
    let mut explained = db
        .prepare(&format!("EXPLAIN QUERY PLAN {}", statement.sql))
        .unwrap_or_else(|e| panic!("{e}: {}", statement.sql));
    explained
        .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
            row.get::<_, String>(3)
        })
        .expect("the plan runs")
        .map(|row| row.expect("a plan row"))
        .collect()
}

#[test]
fn linked_records_are_looked_up_by_key_never_by_stepping_through_the_store() {
    let db = fresh_db();
    let bob: Entity = "bob.example".parse().expect("an entity");
    let id: folio_core::model::RecordId = "0123456789abcdef0123456789abcdef".parse().unwrap();
    let hash: folio_core::model::VersionHash = "ab".repeat(32).parse().unwrap();
    let plan = folio_core::query::LinkPlan {
        records: [(bob.clone(), id)].into_iter().collect(),
        versions: [(bob, id, hash)].into_iter().collect(),
        ..Default::default()
    };
    let statement = folio_core::store::linked_sql(USER_ID, &plan);
    let steps = plan_of(&db, &statement);
    // Every part walks its JSON list and searches by key; none steps
    // through the user's records (a plan SQLite chose once the store grew).
    assert!(
        !steps.iter().any(|step| step.starts_with("SCAN r")),
        "{steps:#?}"
    );
    assert!(
        steps
            .iter()
            .filter(|step| step.starts_with("SEARCH r USING INDEX")
                && step.contains("author=? AND record_id=?"))
            .count()
            >= 2,
        "{steps:#?}"
    );
}

#[test]
fn entity_records_are_found_through_the_entity_they_describe() {
    let db = fresh_db();
    let user: Entity = USER.parse().expect("an entity");
    let bob: Entity = "bob.example".parse().expect("an entity");
    let known = folio_core::store::need_sql(
        USER_ID,
        &folio_core::write::Need::Entity(bob.clone()),
        folio_core::model::RecordDate::from_unix_ticks(0).expect("a date"),
    )
    .0;
    let plan = folio_core::query::LinkPlan {
        entities: [bob].into_iter().collect(),
        ..Default::default()
    };
    for statement in [
        known,
        folio_core::store::entity_record_sql(USER_ID, &user),
        folio_core::store::linked_sql(USER_ID, &plan),
    ] {
        let steps = plan_of(&db, &statement);
        assert!(
            steps
                .iter()
                .any(|step| step.contains("USING INDEX versions_by_described_entity")),
            "{}: {steps:#?}",
            statement.sql
        );
        assert!(
            !steps
                .iter()
                .any(|step| step == "SCAN v" || step == "SCAN r"),
            "{}: {steps:#?}",
            statement.sql
        );
    }
}

/// Fails if a step reads a whole table: every step must search an index
/// (scans of a JSON array, of the distinct paths, of the entries found by
/// key and of a subquery's rows are of what the statement already found;
/// FTS5 shows a lookup of one rowid as a "scan" of index `0:=`).
fn assert_searched(what: &str, steps: &[String]) {
    for step in steps {
        let scan = step.starts_with("SCAN ")
            && step != "SCAN record_text VIRTUAL TABLE INDEX 0:="
            && !step.starts_with("SCAN j")
            && !step.starts_with("SCAN json_each")
            && !step.starts_with("SCAN kept VIRTUAL TABLE")
            && !step.starts_with("SCAN walk")
            && !step.starts_with("SCAN keyed")
            && step != "SCAN k"
            && !step.contains("CONSTANT ROW");
        assert!(!scan, "{what} scans a table: {steps:?}");
    }
}

#[test]
fn lookups_by_key_alone_updates_and_event_reads_search_indexes() {
    let mut cases = Cases(11);
    let store = generate(&mut cases, 300);
    let db = open(&store);
    let (record, entries) = &store.versions[7];
    let now = folio_core::model::RecordDate::from_unix_ticks(17_100_000_000_000_000).unwrap();

    // A bare filter value: the link index by path, then by key.
    let plan = query_plan(&db, &[("filter", "bob.example")]);
    assert_searched("a bare value", &plan);
    assert!(
        plan.iter()
            .any(|s| s.contains("link_index USING PRIMARY KEY (user_id=? AND path=? AND key=?)")),
        "{plan:#?}"
    );
    let mut statements = vec![
        (
            "an existential cascade",
            folio_core::store::need_sql(
                USER_ID,
                &folio_core::write::Need::Dependants(folio_core::write::RecordKey {
                    entity: record.author.entity.clone(),
                    record_id: record.id,
                }),
                now,
            )
            .0,
        ),
        ("pruning events", folio_core::store::prune_events_sql(now)),
        (
            "a catch-up from a date",
            folio_core::store::events_sql(
                USER_ID,
                folio_core::service::events::CatchUpStart::AfterReceivedAt(now),
                None,
                100,
            ),
        ),
    ];
    // A create: the new record's row follows the last.
    let mut create = record.clone();
    create.id = "cccccccccccccccccccccccccccccccc".parse().expect("an id");
    create.version.parent_hash = None;
    for statement in version_statements(
        USER_ID,
        &received(&create),
        entries,
        None,
        Default::default(),
    ) {
        statements.push(("a create", statement));
    }
    // A record's history: one range of its versions, in receipt order.
    let history =
        folio_core::store::versions_sql(USER_ID, &record.author.entity, &record.id, Some(now), 20);
    let steps = plan_of(&db, &history);
    assert!(
        steps.iter().any(|s| s
            .contains("versions USING INDEX versions_by_record (record_row=? AND received_at>?)")),
        "{steps:#?}"
    );
    assert!(
        !steps.iter().any(|s| s.contains("TEMP B-TREE")),
        "{steps:#?}"
    );
    statements.push(("a record's history", history));
    // An update: its predecessor's entries are removed by their keys, not
    // by a search of the user's whole link index, whether the store reads
    // them or the writer knows them (here one more than the update keeps).
    let mut update = record.clone();
    update.version.parent_hash = Some(record.version.hash);
    let mut replaced = entries.to_vec();
    replaced.push(IndexEntry {
        path: "$['content']['tags'][*]".into(),
        key: "t:gone".into(),
    });
    let origin = Default::default();
    for update in [
        version_statements(USER_ID, &received(&update), entries, None, origin),
        version_statements_replacing(
            USER_ID,
            &received(&update),
            entries,
            None,
            Replaces::Read(&replaced),
            origin,
        ),
    ] {
        let mut deletes = 0;
        for statement in update {
            if statement.sql.starts_with("DELETE FROM link_index") {
                deletes += 1;
                let steps = plan_of(&db, &statement);
                assert!(
                    steps.iter().any(|s| s.contains(
                        "link_index USING PRIMARY KEY (user_id=? AND path=? AND key=? AND record_row=?)"
                    )),
                    "{steps:#?}"
                );
            }
            statements.push(("an update", statement));
        }
        assert_eq!(deletes, 1, "one removal of the entries the update drops");
    }
    // A version by its hash, through its record's row: the record's latest
    // (a get, a list page), an exact version, an event's, a linked one.
    let mut linked = folio_core::query::LinkPlan::default();
    linked
        .records
        .insert((record.author.entity.clone(), record.id));
    linked
        .versions
        .insert((record.author.entity.clone(), record.id, record.version.hash));
    let by_hash = [
        (
            "a record's latest version",
            folio_core::store::latest_version_sql(USER_ID, &record.author.entity, &record.id),
        ),
        (
            "a version by its hash",
            folio_core::store::version_sql(
                USER_ID,
                &record.author.entity,
                &record.id,
                &record.version.hash,
            ),
        ),
        (
            "the events after one",
            folio_core::store::events_sql(
                USER_ID,
                folio_core::service::events::CatchUpStart::AfterEvent(
                    folio_core::service::events::EventId::from_sequence(3),
                ),
                None,
                100,
            ),
        ),
        (
            "linked records and versions",
            folio_core::store::linked_sql(USER_ID, &linked),
        ),
    ];
    for (what, statement) in by_hash {
        let steps = plan_of(&db, &statement);
        assert!(
            steps.iter().any(
                |s| s.contains("USING INDEX versions_by_record_hash (record_row=? AND hash=?)")
            ),
            "{what}: {steps:#?}"
        );
        statements.push((what, statement));
    }
    for (what, statement) in &statements {
        let mut steps = plan_of(&db, statement);
        // Pruning visits each user once, and only its expired events.
        if *what == "pruning events" {
            assert!(steps.contains(&"SCAN u".to_owned()), "{steps:?}");
            steps.retain(|step| step != "SCAN u");
        }
        assert_searched(what, &steps);
    }
}

/// D1 refuses a statement over 100,000 bytes (`SQLITE_TOOBIG`). The largest
/// filters a request may send (16 parameters of 32 conditions), of bare
/// values of every kind, build a statement inside it, which SQLite runs.
#[test]
fn the_largest_filters_stay_inside_d1s_statement_size() {
    const D1_MAX_STATEMENT_BYTES: usize = 100_000;
    let mut cases = Cases(3);
    let db = open(&generate(&mut cases, 50));
    let hash = "c".repeat(64);
    for value in [
        "\"x\"".to_owned(),
        "bob.example".to_owned(),
        format!("types.example+{}", TYPE_IDS[0]),
        format!("types.example+{}+{hash}", TYPE_IDS[0]),
    ] {
        let filter = vec![value.as_str(); folio_core::query::MAX_FILTER_CONDITIONS].join(",");
        let params: Vec<(&str, &str)> = vec![("filter", filter.as_str()); 16];
        let user: Entity = USER.parse().expect("an entity");
        let params: Vec<(String, String)> = params
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let query = ListQuery::from_params(&params, &user).expect("the largest valid filters");
        let sql = list_sql(USER_ID, &query, &Access::Owner { entity: user }).statement;
        assert!(
            sql.sql.len() < D1_MAX_STATEMENT_BYTES,
            "{value}: {} bytes",
            sql.sql.len()
        );
        rows(&db, &sql.sql, &sql.params);
    }
}

#[test]
fn a_recipient_backs_off_as_a_whole_and_its_notifications_go_together() {
    use folio_core::store::{
        due_notifications_sql, failed_attempt_sql, next_due_sql, queue_notification_sql,
    };
    let db = fresh_db();
    let run = |statement: &folio_core::store::Statement| {
        db.execute(
            &statement.sql,
            rusqlite::params_from_iter(bind(&statement.params)),
        )
        .expect(&statement.sql);
    };
    let due = |now: i64| -> Vec<i64> {
        let statement = due_notifications_sql(now, 100, Some(USER_ID), &[]);
        let mut query = db.prepare(&statement.sql).expect("a query");
        query
            .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
                row.get(0)
            })
            .expect("rows")
            .map(Result::unwrap)
            .collect()
    };
    let next = || -> Option<i64> {
        let statement = next_due_sql(Some(USER_ID), &[]);
        db.query_row(
            &statement.sql,
            rusqlite::params_from_iter(bind(&statement.params)),
            |row| row.get(0),
        )
        .expect("a row")
    };
    let bob: Entity = "bob.example".parse().unwrap();
    let carol: Entity = "carol.example".parse().unwrap();
    let id: folio_core::model::RecordId = "0123456789abcdef0123456789abcdef".parse().unwrap();
    let hash = |n: u8| -> folio_core::model::VersionHash {
        format!("{n:02x}").repeat(32).parse().unwrap()
    };
    run(&queue_notification_sql(USER_ID, &bob, &id, &hash(1), 1_000));
    run(&queue_notification_sql(
        USER_ID,
        &carol,
        &id,
        &hash(1),
        1_000,
    ));
    assert_eq!(due(1_000).len(), 2);
    // Bob's failed: retried at 31,000. A later notification to Bob waits
    // with it; Carol's does not.
    run(&failed_attempt_sql(
        1,
        0,
        Some(31_000),
        1_000,
        "unreachable",
    ));
    run(&queue_notification_sql(USER_ID, &bob, &id, &hash(2), 2_000));
    run(&queue_notification_sql(
        USER_ID,
        &carol,
        &id,
        &hash(2),
        2_000,
    ));
    assert_eq!(due(2_000), [2, 4], "Carol's, not Bob's");
    run(&folio_core::store::delivered_sql(2));
    run(&folio_core::store::delivered_sql(4));
    assert_eq!(next(), Some(31_000), "Bob's together, at his retry");
    // In the order they came due; a round sends them oldest first.
    assert_eq!(due(31_000), [3, 1]);
}

#[test]
fn deliveries_in_flight_are_left_out_and_an_attempt_counts_once() {
    use folio_core::store::{
        due_notifications_sql, failed_attempt_sql, next_due_sql, queue_notification_sql,
    };
    let db = fresh_db();
    let run = |statement: &folio_core::store::Statement| {
        db.execute(
            &statement.sql,
            rusqlite::params_from_iter(bind(&statement.params)),
        )
        .expect(&statement.sql);
    };
    let bob: Entity = "bob.example".parse().unwrap();
    let carol: Entity = "carol.example".parse().unwrap();
    let due = |now: i64, in_flight: &[(i64, Entity)]| -> Vec<i64> {
        let statement = due_notifications_sql(now, 100, None, in_flight);
        let mut query = db.prepare(&statement.sql).expect("a query");
        query
            .query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
                row.get(0)
            })
            .expect("rows")
            .map(Result::unwrap)
            .collect()
    };
    let next = |in_flight: &[(i64, Entity)]| -> Option<i64> {
        let statement = next_due_sql(None, in_flight);
        db.query_row(
            &statement.sql,
            rusqlite::params_from_iter(bind(&statement.params)),
            |row| row.get(0),
        )
        .expect("a row")
    };
    let id: folio_core::model::RecordId = "0123456789abcdef0123456789abcdef".parse().unwrap();
    let hash: folio_core::model::VersionHash = "ab".repeat(32).parse().unwrap();
    run(&queue_notification_sql(USER_ID, &bob, &id, &hash, 1_000));
    run(&queue_notification_sql(USER_ID, &carol, &id, &hash, 2_000));
    assert_eq!(due(5_000, &[]), [1, 2]);
    // Bob's delivery is in flight: only Carol's is due, and next is hers.
    let bobs = [(USER_ID, bob.clone())];
    assert_eq!(due(5_000, &bobs), [2]);
    assert_eq!(next(&bobs), Some(2_000));
    // Another user's delivery to Bob is another delivery.
    assert_eq!(due(5_000, &[(USER_ID + 1, bob.clone())]), [1, 2]);
    let both = [(USER_ID, bob.clone()), (USER_ID, carol.clone())];
    assert_eq!(due(5_000, &both), Vec::<i64>::new());
    assert_eq!(next(&both), None);
    // The first attempt recorded twice (a deadline that passed while it
    // was recorded) counts once.
    run(&failed_attempt_sql(1, 0, Some(40_000), 5_000, "slow"));
    run(&failed_attempt_sql(1, 0, Some(90_000), 6_000, "timed out"));
    let (attempts, due_at): (i64, i64) = db
        .query_row(
            "SELECT attempts, due_at FROM outbox WHERE id = 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!((attempts, due_at), (1, 40_000));
}

/// The console's apps are the user's own App records: another entity's,
/// stored before such versions were refused, are not listed.
#[test]
fn builtin_records_by_author_are_the_users_own() {
    use folio_core::schema::builtin::BuiltinType;
    use folio_core::store::builtin_records_sql;
    let db = fresh_db();
    let app = |id: &str, author: &str, received_ms: i64| -> Record {
        let mut record = version(id, None, json!({}), received_ms);
        record.author.entity = author.parse().unwrap();
        record.version.author.entity = author.parse().unwrap();
        record.type_link = BuiltinType::App.link();
        record.version.hash = record.hash_input().hash();
        record
    };
    store_one(&db, &app(ID_A, USER, 1), None).expect("the user's app");
    store_one(&db, &app(ID_B, "mallory.example", 2), None).expect("a stranger's app");
    let listed = |author: Option<&Entity>| -> Vec<String> {
        let sql = builtin_records_sql(USER_ID, BuiltinType::App, author, 1_000);
        rows(&db, &sql.sql, &sql.params)
            .iter()
            .map(|(record, _)| record.author.entity.to_string())
            .collect()
    };
    assert_eq!(listed(None), ["mallory.example", USER]);
    let user: Entity = USER.parse().unwrap();
    assert_eq!(listed(Some(&user)), [USER]);
}
