//! The query-string decoder on arbitrary text (the part after `?`, then
//! whatever follows a NUL byte as a tag for a `page_start`), and the three
//! readers of its parameters: a list, a record's versions and an events
//! request. Each must be deterministic and keep the limits it documents.
//! Decoding is invertible: the pairs, percent-encoded again, decode to the
//! same pairs. A list request that reads must survive its own `next_page`
//! (the same query with only `page_start` changed), and its SQL must run on
//! SQLite and answer as core's in-memory reference does.

#![no_main]

#[path = "support/list_store.rs"]
mod list_store;

use folio_core::model::{RecordDate, RecordId};
use folio_core::query::{
    Bound, EVENTS_LOOKBACK_MS, EventsQuery, IncludeLinks, ListQuery, MAX_FILTERS, PAGE_SIZES,
    SortProperty, SortValue, VersionsQuery, decode_query_string, next_page_query,
};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let Ok(query) = std::str::from_utf8(parts.next().unwrap_or_default()) else {
        return;
    };
    let tag = String::from_utf8_lossy(parts.next().unwrap_or(b"x")).into_owned();

    let decoded = decode_query_string(query);
    assert_eq!(
        decoded,
        decode_query_string(query),
        "decoding is deterministic"
    );
    let Ok(params) = decoded else { return };
    let encoded: Vec<String> = params
        .iter()
        .map(|(name, value)| {
            format!(
                "{}={}",
                utf8_percent_encode(name, NON_ALPHANUMERIC),
                utf8_percent_encode(value, NON_ALPHANUMERIC)
            )
        })
        .collect();
    let again = decode_query_string(&format!("?{}", encoded.join("&")));
    assert_eq!(
        again.as_ref(),
        Ok(&params),
        "re-encoded pairs decode to the same pairs"
    );

    let now = RecordDate::from_unix_millis(1_795_000_000_000).expect("a date");
    let events = EventsQuery::from_params(&params, now);
    assert_eq!(
        events,
        EventsQuery::from_params(&params, now),
        "events: deterministic"
    );
    if let Ok(events) = &events {
        assert!(
            events.min >= now.saturating_sub_millis(EVENTS_LOOKBACK_MS),
            "min is clamped"
        );
        assert!(events.filters.len() <= MAX_FILTERS);
    }
    let versions = VersionsQuery::from_params(&params);
    assert_eq!(
        versions,
        VersionsQuery::from_params(&params),
        "versions: deterministic"
    );
    if let Ok(versions) = &versions {
        assert!(PAGE_SIZES.contains(&versions.page_size));
    }
    let links = IncludeLinks::from_request(&params, None);
    assert_eq!(
        links,
        IncludeLinks::from_request(&params, None),
        "include_links: deterministic"
    );

    let user = list_store::user();
    let list = ListQuery::from_params(&params, &user);
    assert_eq!(
        list,
        ListQuery::from_params(&params, &user),
        "list: deterministic"
    );
    let Ok(list) = list else { return };
    assert!(PAGE_SIZES.contains(&list.page_size));
    assert!(list.filters.len() <= MAX_FILTERS);

    // A ranked search is one page: no next page to read back.
    if list.search.as_ref().is_some_and(|search| search.ranked) {
        list_store::with_store(|store| store.check_list(&list));
        return;
    }

    // The next page: the same request, `page_start` set to a value of the sort.
    let value = match list.sort.property {
        SortProperty::Tag(_) => SortValue::Tag(tag),
        _ => SortValue::Date(now),
    };
    let record_id: RecordId = "0123456789abcdef0123456789abcdef".parse().expect("an id");
    for record_id in [None, Some(record_id)] {
        let start = Bound {
            value: value.clone(),
            record_id,
        };
        let next = next_page_query(&params, &start);
        let next_params = decode_query_string(&next)
            .unwrap_or_else(|e| panic!("next_page {next:?} decodes: {e}"));
        let expected = ListQuery {
            page_start: Some(start),
            ..list.clone()
        };
        assert_eq!(
            ListQuery::from_params(&next_params, &user),
            Ok(expected),
            "next_page {next:?} reads as the same list from the new start"
        );
    }

    list_store::with_store(|store| store.check_list(&list));
});
