//! The parameters of a list request and an events request (spec §4.1, §6;
//! PROTOCOL.md §7, §8), read from decoded query parameters.

use std::fmt;

use super::filter::{Filter, FilterError, MAX_FILTERS, parse_filter};
use super::json_string_end;
use super::search::Search;
use crate::model::{Entity, LinkPath, RecordDate, RecordId, RecordSource};
use crate::problem::{Problem, ProblemType};

/// Page sizes a list accepts.
pub const PAGE_SIZES: std::ops::RangeInclusive<u32> = 1..=200;
/// The page size when none is asked for.
pub const DEFAULT_PAGE_SIZE: u32 = 20;
/// How far back an events stream may start: older `min`s are clamped, not rejected.
pub const EVENTS_LOOKBACK_MS: i64 = 20_000;

/// What a list or events request asks that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// `request/400-invalid-parameter`, naming the parameter.
    #[error("the `{name}` parameter {reason}")]
    InvalidParameter {
        /// The parameter.
        name: &'static str,
        /// What is wrong with its value.
        reason: &'static str,
    },
    /// `request/400-invalid-filter`.
    #[error("filter {index}: {error}")]
    InvalidFilter {
        /// Which `filter` parameter, from 0.
        index: usize,
        /// What is wrong with it.
        error: FilterError,
    },
}

impl From<&QueryError> for Problem {
    fn from(error: &QueryError) -> Self {
        let kind = match error {
            QueryError::InvalidParameter { .. } => ProblemType::InvalidParameter,
            QueryError::InvalidFilter { .. } => ProblemType::InvalidFilter,
        };
        Problem::new(kind).with_detail(error.to_string())
    }
}

/// What records are ordered by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortProperty {
    /// `$['received_at']`: when the record was first received.
    ReceivedAt,
    /// `$['created_at']`: the record's creation date.
    CreatedAt,
    /// `$['version.received_at']`: when the version was received.
    VersionReceivedAt,
    /// `$['version.created_at']`: when the version was created.
    VersionCreatedAt,
    /// A tag path; records with no tag there are left out.
    Tag(LinkPath),
}

/// The order of a sort: `asc` or `desc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `asc`: smallest first.
    Ascending,
    /// `desc`: largest first.
    Descending,
}

/// A `sort` parameter: a property and a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sort {
    /// What records are ordered by.
    pub property: SortProperty,
    /// In which direction.
    pub direction: Direction,
}

impl Default for Sort {
    /// `$['received_at']+desc`.
    fn default() -> Self {
        Sort {
            property: SortProperty::ReceivedAt,
            direction: Direction::Descending,
        }
    }
}

/// A value of the sort property.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortValue {
    /// A date property's value.
    Date(RecordDate),
    /// A tag property's value.
    Tag(String),
}

/// A `min`, `max` or `page_start`: a sort value, and optionally the record id
/// that breaks ties. Without one, every record with exactly that value is excluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The sort value.
    pub value: SortValue,
    /// The record id that breaks ties, if given.
    pub record_id: Option<RecordId>,
}

/// Which linked records to return beside the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeLinks {
    /// The Entity records of every entity link.
    pub entity: bool,
    /// The targets of existential record links.
    pub existential: bool,
    /// The records linked at these paths.
    pub paths: Vec<LinkPath>,
}

impl Default for IncludeLinks {
    /// `entity,existential`.
    fn default() -> Self {
        IncludeLinks {
            entity: true,
            existential: true,
            paths: Vec::new(),
        }
    }
}

/// A list request (`GET …/records`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// The order of the list.
    pub sort: Sort,
    /// `min`: the smallest sort value listed, whatever the direction.
    pub min: Option<Bound>,
    /// `max`: the largest sort value listed, whatever the direction.
    pub max: Option<Bound>,
    /// `page_start`: where the page starts, exclusive, in the sort direction.
    pub page_start: Option<Bound>,
    /// How many records a page holds: 1 to 200, default 20.
    pub page_size: u32,
    /// A tag or record-link path: the first record per value, before paging.
    pub distinct: Option<LinkPath>,
    /// Records matching any of these (none: every record).
    pub filters: Vec<Filter>,
    /// Which linked records to return beside the records.
    pub include_links: IncludeLinks,
    /// Whether tombstones are listed too.
    pub include_deleted: bool,
    /// Only records from these sources (`None`: all). Unknown values match nothing.
    pub sources: Option<Vec<RecordSource>>,
    /// `search`: only records holding these words (a Folio extension,
    /// `docs/search.md`).
    pub search: Option<Search>,
    /// Another entity whose server answers the list (`proxy_to`,
    /// `docs/federation.md` §5); `None` for this store, also when
    /// `proxy_to` names the store's own entity.
    pub proxy_to: Option<Entity>,
}

/// The `proxy_to` of a request: another entity than `user`, if it names one.
pub fn proxy_to(params: &[(String, String)], user: &Entity) -> Result<Option<Entity>, QueryError> {
    match (Params { params }).single("proxy_to")? {
        None => Ok(None),
        Some(text) if text == user.as_str() => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| invalid("proxy_to", "is not an entity")),
    }
}

/// An events request (`GET …/events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsQuery {
    /// Exclusive lower bound on `version.received_at`, clamped to 20 s ago.
    pub min: RecordDate,
    /// Versions matching any of these (none: every version).
    pub filters: Vec<Filter>,
    /// Whether tombstones are sent too.
    pub include_deleted: bool,
}

/// The parameters as decoded, with helpers that name the parameter in errors.
struct Params<'p> {
    params: &'p [(String, String)],
}

impl<'p> Params<'p> {
    /// The value of a single-valued parameter; given twice is an error.
    fn single(&self, name: &'static str) -> Result<Option<&'p str>, QueryError> {
        let mut values = self
            .params
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(invalid(name, "is given more than once"));
        }
        Ok(first)
    }

    /// Every `filter`, at most [`MAX_FILTERS`] of them.
    fn filters(&self) -> Result<Vec<Filter>, QueryError> {
        let texts = self.params.iter().filter(|(name, _)| name == "filter");
        if texts.clone().count() > MAX_FILTERS {
            return Err(invalid("filter", "is given more than 16 times"));
        }
        texts
            .enumerate()
            .map(|(index, (_, text))| {
                parse_filter(text).map_err(|error| QueryError::InvalidFilter { index, error })
            })
            .collect()
    }

    /// `page_size`: 1 to 200, default 20.
    fn page_size(&self) -> Result<u32, QueryError> {
        match self.single("page_size")? {
            None => Ok(DEFAULT_PAGE_SIZE),
            Some(text) => text
                .parse()
                .ok()
                .filter(|size| {
                    text.bytes().all(|b| b.is_ascii_digit()) && PAGE_SIZES.contains(size)
                })
                .ok_or_else(|| invalid("page_size", "is not a number from 1 to 200")),
        }
    }

    fn include_deleted(&self) -> Result<bool, QueryError> {
        match self.single("include_deleted")? {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(_) => Err(invalid("include_deleted", "is neither true nor false")),
        }
    }
}

fn invalid(name: &'static str, reason: &'static str) -> QueryError {
    QueryError::InvalidParameter { name, reason }
}

impl ListQuery {
    /// Reads a list request's parameters. `user` is the store's own entity:
    /// `proxy_to` naming it is ignored (see [`proxy_to`]). Unknown
    /// parameters are ignored.
    pub fn from_params(params: &[(String, String)], user: &Entity) -> Result<Self, QueryError> {
        let params = Params { params };
        let sort = match params.single("sort")? {
            None => Sort::default(),
            Some(text) => parse_sort(text)
                .ok_or_else(|| invalid("sort", "is not `<path>+asc` or `<path>+desc`"))?,
        };
        let bound = |name| -> Result<Option<Bound>, QueryError> {
            params
                .single(name)?
                .map(|text| {
                    parse_bound(text, &sort.property)
                        .ok_or_else(|| invalid(name, "is not a quoted sort value"))
                })
                .transpose()
        };
        let (min, max, page_start) = (bound("min")?, bound("max")?, bound("page_start")?);
        let page_size = params.page_size()?;
        let distinct = params
            .single("distinct")?
            .map(|text| {
                text.parse()
                    .map_err(|_| invalid("distinct", "is not a path"))
            })
            .transpose()?;
        let include_links = params
            .single("include_links")?
            .map(parse_include_links)
            .unwrap_or_default();
        let sources = params.single("sources")?.map(|text| {
            text.split(',')
                .filter_map(|name| name.parse().ok())
                .collect()
        });
        let proxy_to = proxy_to(params.params, user)?;
        let search = params
            .single("search")?
            .map(|text| {
                let ranked = params.single("sort")?.is_none();
                Search::parse(text, ranked).map_err(|error| invalid("search", error.reason()))
            })
            .transpose()?;
        if search.is_some() && distinct.is_some() {
            return Err(invalid("search", "cannot be combined with `distinct`"));
        }
        if search.as_ref().is_some_and(|s| s.ranked) && page_start.is_some() {
            return Err(invalid(
                "page_start",
                "does not apply to a ranked search, which is one page (give a `sort` to page)",
            ));
        }
        Ok(ListQuery {
            sort,
            min,
            max,
            page_start,
            page_size,
            distinct,
            filters: params.filters()?,
            include_links,
            include_deleted: params.include_deleted()?,
            sources,
            search,
            proxy_to,
        })
    }
}

/// A record versions request (`GET …/{record_id}/versions`, PROTOCOL.md §7):
/// every version, oldest first, paged by `page_size` and `page_start` (the
/// quoted `version.received_at` the previous page ended with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionsQuery {
    /// How many versions a page holds: 1 to 200, default 20.
    pub page_size: u32,
    /// The previous page's last `version.received_at`.
    pub after: Option<RecordDate>,
    /// Which linked records to return beside the versions.
    pub include_links: IncludeLinks,
}

impl VersionsQuery {
    /// Reads a versions request's parameters; unknown ones are ignored.
    pub fn from_params(params: &[(String, String)]) -> Result<Self, QueryError> {
        let include_links = IncludeLinks::from_request(params, None);
        let params = Params { params };
        let after = match params.single("page_start")? {
            None => None,
            Some(text) => match parse_bound(text, &SortProperty::VersionReceivedAt) {
                Some(Bound {
                    value: SortValue::Date(date),
                    ..
                }) => Some(date),
                _ => return Err(invalid("page_start", "is not a quoted date")),
            },
        };
        Ok(VersionsQuery {
            page_size: params.page_size()?,
            after,
            include_links,
        })
    }
}

impl EventsQuery {
    /// Reads an events request's parameters. A `min` older than 20 s before
    /// `now` is clamped to that, as is a missing one: reconnecting clients
    /// resend their first URL. `include_links` and `page_size` are accepted
    /// and ignored, whatever their value.
    pub fn from_params(params: &[(String, String)], now: RecordDate) -> Result<Self, QueryError> {
        let params = Params { params };
        // A stream matches versions as they come, by their links alone: a
        // `search` it ignored would send what the client did not ask for.
        if params.single("search")?.is_some() {
            return Err(invalid(
                "search",
                "applies to lists, not to event streams (filter the stream, search the list)",
            ));
        }
        let earliest = now.saturating_sub_millis(EVENTS_LOOKBACK_MS);
        let min = match params.single("min")? {
            None => earliest,
            Some(text) => match parse_bound(text, &SortProperty::VersionReceivedAt) {
                Some(Bound {
                    value: SortValue::Date(date),
                    record_id: None,
                }) => date.max(earliest),
                _ => return Err(invalid("min", "is not a quoted date")),
            },
        };
        Ok(EventsQuery {
            min,
            filters: params.filters()?,
            include_deleted: params.include_deleted()?,
        })
    }
}

/// `<property>+<direction>`, with a space accepted for the `+`.
fn parse_sort(text: &str) -> Option<Sort> {
    let split = text.rfind(['+', ' '])?;
    let (path, direction) = (&text[..split], &text[split + 1..]);
    let direction = match direction {
        "asc" => Direction::Ascending,
        "desc" => Direction::Descending,
        _ => return None,
    };
    let property = match path {
        "$['received_at']" => SortProperty::ReceivedAt,
        "$['created_at']" => SortProperty::CreatedAt,
        "$['version.received_at']" | "$['version']['received_at']" => {
            SortProperty::VersionReceivedAt
        }
        "$['version.created_at']" | "$['version']['created_at']" => SortProperty::VersionCreatedAt,
        _ => SortProperty::Tag(path.parse().ok()?),
    };
    Some(Sort {
        property,
        direction,
    })
}

/// A JSON-quoted value (a date for date sorts), optionally followed by
/// `+<record_id>` or ` <record_id>`.
fn parse_bound(text: &str, property: &SortProperty) -> Option<Bound> {
    let close = json_string_end(text)?;
    let value: String = serde_json::from_str(&text[..=close]).ok()?;
    let record_id = match &text[close + 1..] {
        "" => None,
        rest => Some(rest.strip_prefix(['+', ' '])?.parse().ok()?),
    };
    let value = match property {
        SortProperty::Tag(_) => SortValue::Tag(value),
        _ => SortValue::Date(value.parse().ok()?),
    };
    Some(Bound { value, record_id })
}

impl IncludeLinks {
    /// The `include_links` of a single-record read or a write: the query
    /// string's value, else `body` (a write body's list), else the default.
    pub fn from_request(params: &[(String, String)], body: Option<&[String]>) -> Self {
        match params.iter().find(|(name, _)| name == "include_links") {
            Some((_, text)) => parse_include_links(text),
            None => match body {
                Some(items) => parse_include_links(&items.join(",")),
                None => IncludeLinks::default(),
            },
        }
    }
}

/// `entity`, `existential` and paths, comma-separated; `""` asks for none.
/// Unknown special values (such as `standing`) are ignored.
fn parse_include_links(text: &str) -> IncludeLinks {
    let mut include = IncludeLinks {
        entity: false,
        existential: false,
        paths: Vec::new(),
    };
    for item in text.split(',').filter(|item| !item.is_empty()) {
        match item {
            "entity" => include.entity = true,
            "existential" => include.existential = true,
            path => include.paths.extend(path.parse::<LinkPath>().ok()),
        }
    }
    include
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Ascending => "asc",
            Direction::Descending => "desc",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_max_filters_filters_are_read() {
        let user: Entity = "alice.example".parse().expect("an entity");
        let params = |n: usize| -> Vec<(String, String)> {
            (0..n)
                .map(|i| ("filter".to_owned(), format!("$['n']=\"{i}\"")))
                .collect()
        };
        let query = ListQuery::from_params(&params(MAX_FILTERS), &user).expect("the most filters");
        assert_eq!(query.filters.len(), MAX_FILTERS);
        let refused = ListQuery::from_params(&params(MAX_FILTERS + 1), &user);
        let Err(QueryError::InvalidParameter { name, reason }) = refused else {
            panic!("one filter too many was read: {refused:?}");
        };
        assert_eq!(name, "filter");
        assert!(reason.contains(&MAX_FILTERS.to_string()), "{reason}");
    }
}
