//! The filter grammar on arbitrary text, as one `filter` parameter reads
//! once percent-decoded. Parsing must be deterministic and an error must
//! point inside the text. A filter that parses must print back (in the
//! canonical form: bracket paths, JSON-quoted tags, `+` between value
//! parts) to text that parses to the same filter, and must compile to list
//! SQL that SQLite prepares and runs with its bound parameters, answering
//! exactly as core's in-memory reference does.

#![no_main]

#[path = "support/list_store.rs"]
mod list_store;

use folio_core::query::{
    Condition, Filter, FilterValue, ListQuery, MAX_FILTER_DEPTH, MAX_FILTER_LEN, parse_filter,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = parse_filter(text);
    assert_eq!(first, parse_filter(text), "parsing is deterministic");
    let filter = match first {
        Ok(filter) => filter,
        Err(error) => {
            assert!(
                error.position <= text.len() && text.is_char_boundary(error.position),
                "the error points inside the text: {error:?}"
            );
            return;
        }
    };

    let printed = print_root(&filter);
    if printed.len() <= MAX_FILTER_LEN && root_depth(&filter) <= MAX_FILTER_DEPTH {
        assert_eq!(
            parse_filter(&printed).as_ref(),
            Ok(&filter),
            "the printed filter {printed:?} reads back as the filter"
        );
    }

    let params = [
        ("page_size".to_owned(), "200".to_owned()),
        ("include_deleted".to_owned(), "true".to_owned()),
    ];
    let mut query = ListQuery::from_params(&params, &list_store::user()).expect("a plain list");
    query.filters = vec![filter];
    list_store::with_store(|store| {
        store.check_list(&query);
        query.include_deleted = false;
        store.check_list(&query);
    });
});

/// The filter as a client would write it: the top level is AND, and each
/// level of parentheses flips the operator.
fn print_root(filter: &Filter) -> String {
    match filter {
        Filter::And(items) => print_list(items, 0),
        other => print_item(other, 0),
    }
}

fn print_list(items: &[Filter], depth: usize) -> String {
    let items: Vec<String> = items.iter().map(|item| print_item(item, depth)).collect();
    items.join(",")
}

/// An item of a list at `depth`: a group in as many parentheses as it takes
/// to reach a depth of its operator (AND even, OR odd).
fn print_item(item: &Filter, depth: usize) -> String {
    let (items, odd) = match item {
        Filter::Condition(condition) => return print_condition(condition),
        Filter::And(items) => (items, false),
        Filter::Or(items) => (items, true),
    };
    let mut inner_depth = depth + 1;
    if (inner_depth % 2 == 1) != odd {
        inner_depth += 1;
    }
    let wraps = inner_depth - depth;
    format!(
        "{}{}{}",
        "(".repeat(wraps),
        print_list(items, inner_depth),
        ")".repeat(wraps)
    )
}

/// The deepest nesting of parentheses in the printed filter.
fn root_depth(filter: &Filter) -> usize {
    match filter {
        Filter::And(items) => items
            .iter()
            .map(|item| item_depth(item, 0))
            .max()
            .unwrap_or(0),
        other => item_depth(other, 0),
    }
}

/// As [`print_item`] nests: the depth of the item's deepest group.
fn item_depth(item: &Filter, depth: usize) -> usize {
    let (items, odd) = match item {
        Filter::Condition(_) => return depth,
        Filter::And(items) => (items, false),
        Filter::Or(items) => (items, true),
    };
    let mut inner_depth = depth + 1;
    if (inner_depth % 2 == 1) != odd {
        inner_depth += 1;
    }
    items
        .iter()
        .map(|item| item_depth(item, inner_depth))
        .max()
        .unwrap_or(inner_depth)
}

fn print_condition(condition: &Condition) -> String {
    match condition {
        Condition::Equals { path, value } => format!("{}={}", path.as_str(), print_value(value)),
        Condition::Absent { path } => format!("{}=", path.as_str()),
        Condition::AnyLink(value) => print_value(value),
    }
}

fn print_value(value: &FilterValue) -> String {
    match value {
        FilterValue::Entity(entity) => entity.to_string(),
        FilterValue::Record { entity, record_id } => format!("{entity}+{record_id}"),
        FilterValue::Version {
            entity,
            record_id,
            version_hash,
        } => format!("{entity}+{record_id}+{version_hash}"),
        FilterValue::Tag(tag) => serde_json::to_string(tag).expect("a string serializes"),
    }
}
