//! Reading list and events requests (spec §4.1, §6; PROTOCOL.md §7, §8):
//! the query string, the filter grammar and the parameters; the link index
//! every filter reads; filters, sorts and pages evaluated in memory (the
//! reference the store's SQL is held to); and the answer: `next_page` and
//! `include_links`.

mod eval;
mod filter;
mod filterable;
mod index;
mod page;
mod params;
mod query_string;
mod search;

pub(crate) use eval::{ID_PATH, SOURCE_PATH};
pub use eval::{
    ListItem, PageSelection, Position, distinct_value, entries_match, filters_match, sort_value,
};
pub use filter::{
    Condition, Filter, FilterError, FilterFault, FilterValue, MAX_FILTER_CONDITIONS,
    MAX_FILTER_DEPTH, MAX_FILTER_LEN, MAX_FILTERS, condition_paths, parse_filter, position_of,
};
pub use filterable::{KnownType, MAX_NAMED_TYPES, NamedType, Unfilterable, UnfilterableReason};
pub use index::{
    AUTHOR_PATH, IndexEntry, TYPE_PATH, VERSION_AUTHOR_PATH, blob_key, entity_key, existential_key,
    index_entries, record_key, tag_key, value_key, version_key,
};
pub use page::{
    LinkPlan, ListResponse, RecordResponse, linked_records, next_page_query, next_page_start,
};
pub use params::{
    Bound, DEFAULT_PAGE_SIZE, Direction, EVENTS_LOOKBACK_MS, EventsQuery, IncludeLinks, ListQuery,
    PAGE_SIZES, QueryError, Sort, SortProperty, SortValue, VersionsQuery, proxy_to,
};
pub use query_string::{QueryStringError, decode_query_string};
pub use search::{
    MAX_INDEXED_WORDS, MAX_SEARCH_BYTES, MAX_SEARCH_WORDS, MAX_WORD_BYTES, RANKED_MATCHES, Search,
    SearchError, record_text, words,
};

/// The index of the quote that ends the JSON string literal `text` starts
/// with (escapes skipped), as filters' tags and list bounds are written.
fn json_string_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut at = 1;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => return Some(at),
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
    None
}
