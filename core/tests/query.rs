//! Query strings and filters: `../shared/vectors/query-strings.json` and
//! `filters.json`, the limits, and where errors point.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");

use folio_core::problem::{Problem, ProblemType};
use folio_core::query::{
    Condition, Filter, FilterFault, FilterValue, MAX_FILTER_CONDITIONS, MAX_FILTER_LEN,
    decode_query_string, parse_filter,
};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct FilterCase {
    name: String,
    filter: String,
    ok: bool,
    tree: Option<Value>,
}

/// The neutral tree form of `vectors/README.md` §3.
fn tree(filter: &Filter) -> Value {
    match filter {
        Filter::And(items) => json!({"and": items.iter().map(tree).collect::<Vec<_>>()}),
        Filter::Or(items) => json!({"or": items.iter().map(tree).collect::<Vec<_>>()}),
        Filter::Condition(Condition::Equals { path, value }) => {
            json!({"path": path, "value": value_tree(value)})
        }
        Filter::Condition(Condition::Absent { path }) => json!({"path": path, "empty": true}),
        Filter::Condition(Condition::AnyLink(value)) => json!({"any_link": value_tree(value)}),
    }
}

fn value_tree(value: &FilterValue) -> Value {
    match value {
        FilterValue::Entity(entity) => json!({"kind": "entity", "entity": entity}),
        FilterValue::Record { entity, record_id } => {
            json!({"kind": "record", "entity": entity, "record_id": record_id})
        }
        FilterValue::Version {
            entity,
            record_id,
            version_hash,
        } => {
            json!({"kind": "version", "entity": entity, "record_id": record_id, "version_hash": version_hash})
        }
        FilterValue::Tag(tag) => json!({"kind": "tag", "tag": tag}),
    }
}

#[test]
fn every_filter_vector_parses_to_its_tree_or_fails() {
    let cases: Vec<FilterCase> =
        serde_json::from_str(&shared_file!("vectors/filters.json")).unwrap();
    let mut wrong = Vec::new();
    for case in &cases {
        match (parse_filter(&case.filter), case.ok) {
            (Ok(filter), true) if Some(&tree(&filter)) == case.tree.as_ref() => {}
            (Err(_), false) => {}
            (result, _) => wrong.push(format!("{}: {:?}", case.name, result.map(|f| tree(&f)))),
        }
    }
    assert!(wrong.is_empty(), "filter vectors that disagree: {wrong:#?}");
    assert!(cases.iter().any(|c| c.ok) && cases.iter().any(|c| !c.ok));
}

#[derive(Deserialize)]
struct QueryCase {
    name: String,
    query_string: String,
    params: Vec<(String, String)>,
}

#[test]
fn every_query_string_vector_decodes_to_its_parameters() {
    let cases: Vec<QueryCase> =
        serde_json::from_str(&shared_file!("vectors/query-strings.json")).unwrap();
    assert!(!cases.is_empty());
    for case in &cases {
        let params = decode_query_string(&case.query_string)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(params, case.params, "{}", case.name);
        // Every filter in these strings follows the grammar.
        for (_, filter) in params.iter().filter(|(name, _)| name == "filter") {
            assert!(parse_filter(filter).is_ok(), "{}: {filter}", case.name);
        }
    }
}

#[test]
fn query_strings_that_are_not_utf8_are_invalid_parameters() {
    let error = decode_query_string("?filter=%FF").unwrap_err();
    assert_eq!(error.name, "filter");
    assert_eq!(Problem::from(&error).kind, ProblemType::InvalidParameter);
    assert_eq!(
        decode_query_string("?a&b=&&c=1+2").unwrap(),
        [
            ("a".into(), "".into()),
            ("b".into(), "".into()),
            ("c".into(), "1+2".into())
        ]
    );
    assert!(decode_query_string("").unwrap().is_empty());
}

#[test]
fn filters_have_limits() {
    let long = format!("\"{}\"", "a".repeat(MAX_FILTER_LEN - 1));
    assert_eq!(parse_filter(&long).unwrap_err().fault, FilterFault::TooLong);
    let many = vec!["a.example"; MAX_FILTER_CONDITIONS].join(",");
    assert!(parse_filter(&many).is_ok());
    let too_many = vec!["a.example"; MAX_FILTER_CONDITIONS + 1].join(",");
    assert_eq!(
        parse_filter(&too_many).unwrap_err().fault,
        FilterFault::TooManyConditions
    );
}

#[test]
fn filter_errors_point_at_their_position() {
    let cases = [
        (
            "alice.example,,bob.example",
            14,
            FilterFault::EmptyCondition,
        ),
        ("\"hello\"world", 7, FilterFault::UnexpectedText),
        ("$['author']", 11, FilterFault::PathWithoutEquals),
        ("$['author'=x.example", 1, FilterFault::UnterminatedBracket),
        (
            "x.example+0123456789ABCDEF0123456789abcdef",
            10,
            FilterFault::InvalidRecordId,
        ),
        ("Alice", 0, FilterFault::InvalidEntity),
        ("(a.example", 10, FilterFault::UnbalancedParenthesis),
        ("a.example)", 9, FilterFault::UnbalancedParenthesis),
        ("\"open", 0, FilterFault::UnterminatedQuote),
        ("$['it's']=x.example", 0, FilterFault::InvalidPath),
    ];
    for (filter, position, fault) in cases {
        let error = parse_filter(filter).unwrap_err();
        assert_eq!((error.position, error.fault), (position, fault), "{filter}");
    }
    let problem = Problem::from(&parse_filter("a,,b").unwrap_err());
    assert_eq!(
        (problem.kind, problem.detail.as_deref()),
        (
            ProblemType::InvalidFilter,
            Some("at byte 2: a condition is missing")
        )
    );
}

#[test]
fn one_element_groups_are_their_member() {
    assert_eq!(
        parse_filter("a.example,(b.example)").unwrap(),
        parse_filter("a.example,b.example").unwrap()
    );
    assert_eq!(
        parse_filter("((a.example))").unwrap(),
        parse_filter("a.example").unwrap()
    );
}
