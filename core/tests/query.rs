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
    endpoint: String,
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

mod list_and_events {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use folio_core::model::{Entity, RecordDate, RecordSource};
    use folio_core::problem::{Problem, ProblemType};
    use folio_core::query::{
        Bound, DEFAULT_PAGE_SIZE, Direction, EventsQuery, IncludeLinks, ListQuery, QueryError,
        Sort, SortProperty, SortValue, decode_query_string,
    };

    use super::QueryCase;

    fn alice() -> Entity {
        "alice.baq.run".parse().unwrap()
    }

    fn list(query: &str) -> Result<ListQuery, QueryError> {
        ListQuery::from_params(&decode_query_string(query).unwrap(), &alice())
    }

    fn invalid(query: &str) -> &'static str {
        match list(query) {
            Err(QueryError::InvalidParameter { name, .. }) => name,
            other => panic!("{query}: {other:?}"),
        }
    }

    fn date(text: &str) -> RecordDate {
        text.parse().unwrap()
    }

    #[test]
    fn every_query_string_vector_reads_as_its_endpoint() {
        let cases: Vec<QueryCase> =
            serde_json::from_str(&shared_file!("vectors/query-strings.json")).unwrap();
        let now = date("2024-03-05T16:50:30Z");
        for case in &cases {
            let params = decode_query_string(&case.query_string).unwrap();
            // proxy_to names the store's own entity in the vectors.
            let user = params
                .iter()
                .find(|(n, _)| n == "proxy_to")
                .map_or(alice(), |(_, v)| v.parse().unwrap());
            match case.endpoint.as_str() {
                "records" => drop(
                    ListQuery::from_params(&params, &user)
                        .unwrap_or_else(|e| panic!("{}: {e}", case.name)),
                ),
                "events" => drop(
                    EventsQuery::from_params(&params, now)
                        .unwrap_or_else(|e| panic!("{}: {e}", case.name)),
                ),
                // A single-record read takes only `include_links` (and
                // `proxy_to`): every path it names is read as a path.
                "record" => {
                    let include = IncludeLinks::from_request(&params, None);
                    let paths = params
                        .iter()
                        .filter(|(n, _)| n == "include_links")
                        .flat_map(|(_, v)| v.split(','))
                        .filter(|item| item.starts_with('$'))
                        .count();
                    assert_eq!(include.paths.len(), paths, "{}", case.name);
                }
                other => panic!("{}: unknown endpoint {other}", case.name),
            }
        }
    }

    #[test]
    fn a_list_has_the_specs_defaults() {
        let query = list("").unwrap();
        assert_eq!(
            query.sort,
            Sort {
                property: SortProperty::ReceivedAt,
                direction: Direction::Descending
            }
        );
        assert_eq!(query.page_size, DEFAULT_PAGE_SIZE);
        assert_eq!(DEFAULT_PAGE_SIZE, 20, "PROTOCOL.md §13");
        assert!(
            query.include_links.entity
                && query.include_links.existential
                && query.include_links.paths.is_empty()
        );
        assert!(!query.include_deleted && query.filters.is_empty() && query.sources.is_none());
    }

    #[test]
    fn sorts_name_a_date_or_a_tag_path_and_a_direction() {
        let sort = |q: &str| list(q).unwrap().sort;
        assert_eq!(
            sort("?sort=%24%5B%27created_at%27%5D%2Basc").property,
            SortProperty::CreatedAt
        );
        assert_eq!(
            sort("?sort=$['version.received_at'] desc").property,
            SortProperty::VersionReceivedAt
        );
        assert_eq!(
            sort("?sort=$['version']['created_at']+asc").direction,
            Direction::Ascending
        );
        assert!(matches!(
            sort("?sort=$['content']['name']+asc").property,
            SortProperty::Tag(_)
        ));
        for bad in [
            "?sort=$['received_at']",
            "?sort=$['received_at']+up",
            "?sort=received_at+asc",
            "?sort=",
        ] {
            assert_eq!(invalid(bad), "sort", "{bad}");
        }
    }

    #[test]
    fn bounds_are_quoted_values_with_an_optional_record_id() {
        let query = list("?min=%222024-02-19T15%3A20%3A51.359Z%22&max=%222024-03-01T00:00:00Z%22%2B867deccbe7ac4adca4efc07fbe08af87&page_start=%222024-02-25T10:00:00Z%22%20867deccbe7ac4adca4efc07fbe08af87").unwrap();
        assert_eq!(
            query.min,
            Some(Bound {
                value: SortValue::Date(date("2024-02-19T15:20:51.359Z")),
                record_id: None
            })
        );
        assert_eq!(
            query.max.unwrap().record_id.unwrap().to_string(),
            "867deccbe7ac4adca4efc07fbe08af87"
        );
        assert!(
            query.page_start.unwrap().record_id.is_some(),
            "a space stands for `+`"
        );
        let tag = list("?sort=$['content']['name']+asc&min=%22b%22").unwrap();
        assert_eq!(tag.min.unwrap().value, SortValue::Tag("b".into()));
        for bad in [
            "?min=2024-02-19T15:20:51Z",
            "?min=%22yesterday%22",
            "?max=%222024-02-19T15:20:51Z%22+XYZ",
            "?page_start=%22open",
        ] {
            assert!(
                ["min", "max", "page_start"].contains(&invalid(bad)),
                "{bad}"
            );
        }
    }

    #[test]
    fn page_sizes_run_from_1_to_200_and_are_never_clamped() {
        assert_eq!(list("?page_size=1").unwrap().page_size, 1);
        assert_eq!(list("?page_size=200").unwrap().page_size, 200);
        for bad in [
            "?page_size=0",
            "?page_size=201",
            "?page_size=abc",
            "?page_size=%2B20",
            "?page_size=-1",
        ] {
            assert_eq!(invalid(bad), "page_size", "{bad}");
        }
    }

    #[test]
    fn include_links_sources_and_include_deleted() {
        let none = list("?include_links=").unwrap().include_links;
        assert!(!none.entity && !none.existential && none.paths.is_empty());
        let some = list("?include_links=entity,standing,$['content']['parent']")
            .unwrap()
            .include_links;
        assert!(
            some.entity && !some.existential && some.paths.len() == 1,
            "unknown special values are ignored"
        );
        assert_eq!(
            list("?sources=self,nowhere").unwrap().sources,
            Some(vec![RecordSource::Own])
        );
        assert_eq!(
            list("?sources=nowhere").unwrap().sources,
            Some(vec![]),
            "unknown sources match nothing"
        );
        assert!(list("?include_deleted=true").unwrap().include_deleted);
        assert_eq!(invalid("?include_deleted=yes"), "include_deleted");
        assert_eq!(invalid("?distinct=content"), "distinct");
    }

    #[test]
    fn repeated_filters_are_alternatives_and_other_repeats_are_refused() {
        assert_eq!(
            list("?filter=a.example&filter=b.example")
                .unwrap()
                .filters
                .len(),
            2
        );
        assert_eq!(invalid("?page_size=5&page_size=6"), "page_size");
        let error = list("?filter=a.example&filter=a,,b").unwrap_err();
        assert!(
            matches!(&error, QueryError::InvalidFilter { index: 1, .. }),
            "{error:?}"
        );
        assert_eq!(Problem::from(&error).kind, ProblemType::InvalidFilter);
        assert_eq!(
            Problem::from(&list("?page_size=0").unwrap_err()).kind,
            ProblemType::InvalidParameter
        );
    }

    #[test]
    fn proxy_to_names_another_entity_or_is_ignored() {
        assert_eq!(list("?proxy_to=alice.baq.run").unwrap().proxy_to, None);
        assert_eq!(
            list("?proxy_to=cyril.baq.run").unwrap().proxy_to,
            Some("cyril.baq.run".parse().unwrap())
        );
        assert_eq!(invalid("?proxy_to=Not%20an%20entity"), "proxy_to");
    }

    #[test]
    fn events_clamp_min_to_twenty_seconds_ago() {
        let now = date("2024-03-05T16:50:30Z");
        let events = |q: &str| EventsQuery::from_params(&decode_query_string(q).unwrap(), now);
        let earliest = date("2024-03-05T16:50:10Z");
        assert_eq!(events("").unwrap().min, earliest);
        assert_eq!(
            events("?min=%222024-03-05T16:50:20.485Z%22").unwrap().min,
            date("2024-03-05T16:50:20.485Z")
        );
        assert_eq!(
            events("?min=%222020-01-01T00:00:00Z%22").unwrap().min,
            earliest,
            "clamped, not rejected"
        );
        assert!(
            events("?page_size=5000&include_links=whatever").is_ok(),
            "accepted and ignored"
        );
        assert!(events("?min=yesterday").is_err());
    }
}
