//! Reading a store (PROTOCOL.md §7): filters, sorts, bounds, `distinct`,
//! `sources`, access, `next_page` and `include_links`, each rule a named
//! test over the in-memory reference that the store's SQL is held to.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use folio_core::auth::access::{Access, AppGrant};
use folio_core::model::{Entity, Record};
use folio_core::query::{
    IncludeLinks, IndexEntry, ListItem, ListQuery, decode_query_string, index_entries,
    linked_records, next_page_query, next_page_start,
};
use folio_core::schema::Schema;
use serde_json::{Value, json};

const USER: &str = "alice.example";
const TYPE_ID: &str = "11111111111111111111111111111111";
const HASH: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

fn schema() -> Schema {
    Schema::compile(&json!({
        "type": "object",
        "properties": {"content": {"type": "object", "properties": {
            "title": {"type": "tag_link", "sort_property": true, "optional": true},
            "mention": {"type": "entity_link", "optional": true},
            "parent": {"type": "record_link", "existential": true, "optional": true},
            "topic": {"type": "record_link", "optional": true},
            "quote": {"type": "version_link", "optional": true},
            "image": {"type": "blob_link", "optional": true}
        }}}
    }))
    .expect("the schema compiles")
}

fn id(n: u8) -> String {
    format!("{n:032x}")
}

/// Record `n` (id `0…0n`), received at second `n`, by `author`.
fn record(n: u8, author: &str, content: Value) -> (Record, Vec<IndexEntry>) {
    record_with(n, author, content, json!({}), "self")
}

fn record_with(
    n: u8,
    author: &str,
    content: Value,
    permissions: Value,
    source: &str,
) -> (Record, Vec<IndexEntry>) {
    let at = format!("2026-11-21T10:00:{n:02}.0000000Z");
    let record: Record = serde_json::from_value(json!({
        "author": {"entity": author},
        "id": id(n),
        "source": source,
        "created_at": "2026-11-21T09:00:00.0000000Z",
        "received_at": at,
        "version": {"author": {"entity": author}, "hash": format!("{n:064x}"), "created_at": at, "received_at": at},
        "permissions": permissions,
        "type": {"entity": "types.example", "record_id": TYPE_ID, "version_hash": HASH},
        "content": content
    }))
    .expect("a valid record");
    let links = schema().validate(&record).expect("valid content").links;
    let entries = index_entries(&links);
    (record, entries)
}

fn owner() -> Access {
    Access::Owner {
        entity: USER.parse().expect("an entity"),
    }
}

fn query(params: &[(&str, &str)]) -> ListQuery {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    ListQuery::from_params(&params, &USER.parse().expect("an entity")).expect("a valid query")
}

/// The record numbers a query lists, and whether more follow.
fn list(store: &[(Record, Vec<IndexEntry>)], params: &[(&str, &str)]) -> (Vec<u8>, bool) {
    list_as(store, params, &owner())
}

fn list_as(
    store: &[(Record, Vec<IndexEntry>)],
    params: &[(&str, &str)],
    access: &Access,
) -> (Vec<u8>, bool) {
    let page = query(params).select_page(
        access,
        store
            .iter()
            .map(|(record, entries)| ListItem { record, entries }),
    );
    let numbers = page
        .records
        .iter()
        .map(|r| u8::from_str_radix(&r.id.to_string()[30..], 16).expect("a test id"))
        .collect();
    (numbers, page.more)
}

fn three() -> Vec<(Record, Vec<IndexEntry>)> {
    vec![
        record(1, USER, json!({"title": "b"})),
        record(2, USER, json!({"title": "a"})),
        record(3, USER, json!({})),
    ]
}

#[test]
fn the_default_order_is_newest_received_first() {
    assert_eq!(list(&three(), &[]), (vec![3, 2, 1], false));
}

#[test]
fn next_page_is_present_only_when_more_records_exist() {
    assert_eq!(list(&three(), &[("page_size", "2")]), (vec![3, 2], true));
    assert_eq!(
        list(&three(), &[("page_size", "3")]),
        (vec![3, 2, 1], false)
    );
}

#[test]
fn a_tag_sort_leaves_out_records_without_a_tag_there() {
    let sort = [("sort", "$['content']['title']+asc")];
    assert_eq!(list(&three(), &sort), (vec![2, 1], false));
}

#[test]
fn ties_are_ordered_by_record_id_in_the_sort_direction() {
    let store = vec![
        record(2, USER, json!({"title": "same"})),
        record(1, USER, json!({"title": "same"})),
        record(3, USER, json!({"title": "same"})),
    ];
    let asc = [("sort", "$['content']['title']+asc")];
    let desc = [("sort", "$['content']['title']+desc")];
    assert_eq!(list(&store, &asc).0, [1, 2, 3]);
    assert_eq!(list(&store, &desc).0, [3, 2, 1]);
}

#[test]
fn min_and_max_bound_the_value_whatever_the_direction() {
    let min = ("min", "\"2026-11-21T10:00:01.0000000Z\"");
    let max = ("max", "\"2026-11-21T10:00:03.0000000Z\"");
    assert_eq!(list(&three(), &[min, max]).0, [2]);
    let asc = ("sort", "$['received_at']+asc");
    assert_eq!(list(&three(), &[asc, min, max]).0, [2]);
}

#[test]
fn a_bound_without_a_record_id_excludes_that_whole_value() {
    let store = vec![
        record(1, USER, json!({"title": "a"})),
        record(2, USER, json!({"title": "b"})),
        record(3, USER, json!({"title": "b"})),
        record(4, USER, json!({"title": "c"})),
    ];
    let sort = ("sort", "$['content']['title']+asc");
    assert_eq!(list(&store, &[sort, ("min", "\"b\"")]).0, [4]);
    let with_id = format!("\"b\"+{}", id(2));
    assert_eq!(list(&store, &[sort, ("min", &with_id)]).0, [3, 4]);
    assert_eq!(list(&store, &[sort, ("max", "\"b\"")]).0, [1]);
}

#[test]
fn page_start_is_an_exclusive_start_in_the_sort_direction() {
    let start = format!("\"2026-11-21T10:00:02.0000000Z\"+{}", id(2));
    assert_eq!(list(&three(), &[("page_start", &start)]).0, [1]);
    let asc = ("sort", "$['received_at']+asc");
    assert_eq!(list(&three(), &[asc, ("page_start", &start)]).0, [3]);
}

#[test]
fn next_page_holds_every_parameter_with_the_new_page_start_percent_encoded() {
    let store = three();
    let params = [
        ("page_size", "2"),
        ("filter", "$['author']=alice.example"),
        ("page_start", "\"2026-11-21T10:00:09.0000000Z\""),
    ];
    let query = query(&params);
    let (last, entries) = &store[1];
    let start = next_page_start(&query.sort, last, entries).expect("a sort value");
    let owned: Vec<(String, String)> = params
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let next = next_page_query(&owned, &start);
    assert_eq!(
        next,
        format!(
            "?page_size=2&filter=%24%5B%27author%27%5D%3Dalice.example\
             &page_start=%222026-11-21T10%3A00%3A02.0000000Z%22%2B{}",
            id(2)
        )
    );
    let decoded = decode_query_string(&next[1..]).expect("it decodes");
    assert_eq!(list(&store, &[]).0[2..], [1]);
    let decoded: Vec<(&str, &str)> = decoded
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(list(&store, &decoded), (vec![1], false));
}

#[test]
fn distinct_keeps_the_first_record_per_value_before_paging() {
    let topic = |n: u8| json!({"topic": {"entity": USER, "record_id": id(n)}});
    let store = vec![
        record(1, USER, topic(9)),
        record(2, USER, topic(8)),
        record(3, USER, topic(9)),
        record(4, USER, topic(8)),
        record(5, USER, json!({})),
    ];
    let distinct = ("distinct", "$['content']['topic']");
    assert_eq!(list(&store, &[distinct]).0, [4, 3]);
    let first_page = list(&store, &[distinct, ("page_size", "1")]);
    assert_eq!(first_page, (vec![4], true));
    // The next page starts after record 4: record 2 shares its value and
    // never comes back.
    let start = format!("\"2026-11-21T10:00:04.0000000Z\"+{}", id(4));
    assert_eq!(
        list(&store, &[distinct, ("page_start", &start)]),
        (vec![3], false)
    );
}

#[test]
fn distinct_compares_record_links_by_entity_and_record_id() {
    let topic = |entity: &str| json!({"topic": {"entity": entity, "record_id": id(9)}});
    let store = vec![
        record(1, USER, topic(USER)),
        record(2, USER, topic("bob.example")),
    ];
    let distinct = ("distinct", "$['content']['topic']");
    assert_eq!(list(&store, &[distinct]).0, [2, 1]);
}

#[test]
fn an_entity_value_matches_entity_links() {
    let store = vec![
        record(1, USER, json!({"mention": {"entity": "bob.example"}})),
        record(
            2,
            USER,
            json!({"topic": {"entity": "bob.example", "record_id": id(9)}}),
        ),
    ];
    let filter = ("filter", "$['content']['mention']=bob.example");
    assert_eq!(list(&store, &[filter]).0, [1]);
    assert_eq!(list(&store, &[("filter", "bob.example")]).0, [1]);
}

#[test]
fn a_record_value_matches_record_links_and_the_record_part_of_version_links() {
    let store = vec![
        record(
            1,
            USER,
            json!({"topic": {"entity": USER, "record_id": id(9)}}),
        ),
        record(
            2,
            USER,
            json!({"quote": {"entity": USER, "record_id": id(9), "version_hash": HASH}}),
        ),
    ];
    let value = format!("{USER}+{}", id(9));
    assert_eq!(list(&store, &[("filter", &value)]).0, [2, 1]);
    let version = format!("$['content']['quote']={USER}+{}+{HASH}", id(9));
    assert_eq!(list(&store, &[("filter", &version)]).0, [2]);
    let versions_only = format!("{USER}+{}+{HASH}", id(9));
    assert_eq!(list(&store, &[("filter", &versions_only)]).0, [2]);
}

#[test]
fn a_path_with_no_value_matches_records_without_a_link_there() {
    let filter = ("filter", "$['content']['title']=");
    assert_eq!(list(&three(), &[filter]).0, [3]);
}

#[test]
fn blob_type_and_name_are_indexed_as_tags() {
    let image = json!({"image": {"hash": "b".repeat(64), "type": "image/png", "name": "cat.png"}});
    let store = vec![record(1, USER, image), record(2, USER, json!({}))];
    let by_name = ("filter", "$['content']['image']['name']=\"cat.png\"");
    let by_type = ("filter", "$['content']['image']['type']=\"image/png\"");
    assert_eq!(list(&store, &[by_name]).0, [1]);
    assert_eq!(list(&store, &[by_type]).0, [1]);
}

#[test]
fn id_and_source_take_quoted_strings() {
    let store = vec![
        record_with(1, USER, json!({}), json!({}), "self"),
        record_with(2, USER, json!({}), json!({}), "notification"),
    ];
    let by_id = format!("$['id']=\"{}\"", id(1));
    assert_eq!(list(&store, &[("filter", &by_id)]).0, [1]);
    let by_source = ("filter", "$['source']=\"notification\"");
    assert_eq!(list(&store, &[by_source]).0, [2]);
}

#[test]
fn filters_combine_with_and_and_repeated_filters_with_or() {
    let store = vec![
        record(1, USER, json!({"title": "a"})),
        record_with(
            2,
            "bob.example",
            json!({"title": "a"}),
            json!({"read": "public"}),
            "self",
        ),
        record_with(
            3,
            "bob.example",
            json!({"title": "b"}),
            json!({"read": "public"}),
            "self",
        ),
    ];
    let and = (
        "filter",
        "$['author']=bob.example,$['content']['title']=\"a\"",
    );
    assert_eq!(list(&store, &[and]).0, [2]);
    let or = [
        ("filter", "$['content']['title']=\"b\""),
        ("filter", "$['author']=alice.example"),
    ];
    assert_eq!(list(&store, &or).0, [3, 1]);
    let nested = (
        "filter",
        "$['author']=bob.example,($['content']['title']=\"a\",$['content']['title']=\"b\")",
    );
    assert_eq!(list(&store, &[nested]).0, [3, 2]);
}

#[test]
fn sources_filter_on_source_and_unknown_values_match_nothing() {
    let store = vec![
        record_with(1, USER, json!({}), json!({}), "self"),
        record_with(2, USER, json!({}), json!({}), "subscription"),
    ];
    assert_eq!(list(&store, &[("sources", "subscription")]).0, [2]);
    assert_eq!(
        list(&store, &[("sources", "elsewhere")]).0,
        Vec::<u8>::new()
    );
    assert_eq!(list(&store, &[]).0, [2, 1]);
}

#[test]
fn tombstones_are_listed_only_with_include_deleted() {
    let (mut deleted, entries) = record(1, USER, json!({}));
    deleted.body = folio_core::model::RecordBody::Tombstone(folio_core::model::NoContent {
        action: folio_core::model::DeletionAction::Delete,
        links: Vec::new(),
    });
    let store = vec![(deleted, entries), record(2, USER, json!({}))];
    assert_eq!(list(&store, &[]).0, [2]);
    assert_eq!(list(&store, &[("include_deleted", "true")]).0, [2, 1]);
}

#[test]
fn lists_leave_out_what_the_caller_may_not_read() {
    let store = vec![
        record_with(1, "bob.example", json!({}), json!({}), "self"),
        record_with(
            2,
            "bob.example",
            json!({}),
            json!({"read": [{"entity": USER}]}),
            "self",
        ),
        record_with(
            3,
            "bob.example",
            json!({}),
            json!({"read": "public"}),
            "self",
        ),
        record(4, USER, json!({})),
    ];
    assert_eq!(list(&store, &[]).0, [4, 3, 2]);
    assert_eq!(list_as(&store, &[], &Access::Anonymous).0, [3]);
    let app = Access::App {
        entity: USER.parse().expect("an entity"),
        grant: AppGrant::default(),
    };
    // An app without a grant for the type sees public records only.
    assert_eq!(list_as(&store, &[], &app).0, [3]);
}

fn include(params: &str) -> IncludeLinks {
    let query = query(&[("include_links", params)]);
    query.include_links
}

#[test]
fn include_links_plans_entities_existential_targets_and_paths() {
    let user: Entity = USER.parse().expect("an entity");
    let (_, entries) = record(
        1,
        USER,
        json!({
            "mention": {"entity": "bob.example"},
            "parent": {"entity": USER, "record_id": id(7)},
            "topic": {"entity": USER, "record_id": id(8)},
            "quote": {"entity": USER, "record_id": id(9), "version_hash": HASH}
        }),
    );
    let plan = include("entity,existential").plan([entries.as_slice()], &user);
    let entities: Vec<&str> = plan.entities.iter().map(Entity::as_str).collect();
    // The user's own entity (the author) is never fetched.
    assert_eq!(entities, ["bob.example"]);
    let records: Vec<String> = plan.records.iter().map(|(_, id)| id.to_string()).collect();
    assert_eq!(records, [id(7)]);
    assert!(plan.versions.is_empty());

    let plan =
        include("$['content']['topic'],$['content']['quote']").plan([entries.as_slice()], &user);
    assert!(plan.entities.is_empty());
    let records: Vec<String> = plan.records.iter().map(|(_, id)| id.to_string()).collect();
    assert_eq!(records, [id(8)]);
    let versions: Vec<String> = plan
        .versions
        .iter()
        .map(|(_, id, _)| id.to_string())
        .collect();
    assert_eq!(versions, [id(9)]);

    assert!(include("").plan([entries.as_slice()], &user).is_empty());
    assert!(
        include("standing")
            .plan([entries.as_slice()], &user)
            .is_empty()
    );
}

#[test]
fn linked_records_are_deduplicated_readable_and_never_the_users_entity_record() {
    use folio_core::model::{Content, RecordBody};
    use folio_core::schema::builtin::BuiltinType;
    let user: Entity = USER.parse().expect("an entity");
    let (public, _) = record_with(
        1,
        "bob.example",
        json!({}),
        json!({"read": "public"}),
        "self",
    );
    let (private, _) = record_with(2, "bob.example", json!({}), json!({}), "self");
    let entity_record = |n, describes: &str| {
        let (mut record, _) = record_with(n, USER, json!({}), json!({"read": "public"}), "self");
        record.type_link = BuiltinType::Entity.link();
        let content = Content::try_from(json!({"entity": describes})).expect("an object");
        record.body = RecordBody::Live(content);
        record
    };
    // The user keeps an Entity record of a friend: it is linked; the one
    // describing the user is not.
    let own_entity = entity_record(3, USER);
    let friend = entity_record(4, "friend.example");
    let fetched = vec![
        public.clone(),
        private,
        own_entity,
        friend.clone(),
        public.clone(),
    ];
    let linked = linked_records(fetched, &user, &owner());
    let mut expected = vec![public, friend];
    expected.sort_by_key(|record| record.version.hash);
    assert_eq!(linked, expected);
}
