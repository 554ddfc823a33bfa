//! Filters, sorts and pages evaluated in memory: the reference semantics.
//!
//! The SQL that hosts run ([`crate::store`]) must answer exactly as these
//! functions do; a differential test holds them to it. Events use them
//! directly, to decide for each committed version whether a subscriber's
//! filters match.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use crate::auth::access::Access;
use crate::model::{Record, RecordId};
use crate::schema::FoundLink;

use super::index::{IndexEntry, entries_at, index_entries, is_distinct_key, value_key};
use super::{Bound, Condition, Direction, Filter, FilterValue, ListQuery, SortProperty, SortValue};

/// The paths whose conditions read the record itself rather than its links.
pub(crate) const ID_PATH: &str = "$['id']";
pub(crate) const SOURCE_PATH: &str = "$['source']";

/// Whether a version matches any of `filters` (none: every version), given
/// the links its validation found.
pub fn filters_match(filters: &[Filter], record: &Record, links: &[FoundLink]) -> bool {
    filters.is_empty() || entries_match(filters, record, &index_entries(links))
}

/// [`filters_match`] over a version's index entries (sorted, as
/// [`index_entries`] returns them).
pub fn entries_match(filters: &[Filter], record: &Record, entries: &[IndexEntry]) -> bool {
    filters.is_empty() || filters.iter().any(|f| f.matches(record, entries))
}

impl Filter {
    /// Whether a version with these index entries matches this filter.
    pub fn matches(&self, record: &Record, entries: &[IndexEntry]) -> bool {
        match self {
            Filter::And(all) => all.iter().all(|f| f.matches(record, entries)),
            Filter::Or(any) => any.iter().any(|f| f.matches(record, entries)),
            Filter::Condition(condition) => condition.matches(record, entries),
        }
    }
}

impl Condition {
    fn matches(&self, record: &Record, entries: &[IndexEntry]) -> bool {
        match self {
            Condition::Equals { path, value } => match path.as_str() {
                ID_PATH => is_tag(value, &record.id.to_string()),
                SOURCE_PATH => is_tag(value, record.source.as_str()),
                _ => {
                    let key = value_key(value);
                    entries_at(entries, path).iter().any(|e| e.key == key)
                }
            },
            Condition::Absent { path } => match path.as_str() {
                ID_PATH | SOURCE_PATH => false,
                _ => entries_at(entries, path).is_empty(),
            },
            Condition::AnyLink(value) => {
                let key = value_key(value);
                entries.iter().any(|e| e.key == key)
            }
        }
    }
}

fn is_tag(value: &FilterValue, text: &str) -> bool {
    matches!(value, FilterValue::Tag(tag) if tag == text)
}

/// A record's value for a sort: `None` leaves it out of the list (a tag
/// sort on a record with no tag there). With several tags at the path, the
/// least one counts, in either direction.
pub fn sort_value(
    property: &SortProperty,
    record: &Record,
    entries: &[IndexEntry],
) -> Option<SortValue> {
    let date = |date: Option<_>| date.map(SortValue::Date);
    match property {
        SortProperty::ReceivedAt => date(record.received_at),
        SortProperty::CreatedAt => date(Some(record.created_at)),
        SortProperty::VersionReceivedAt => date(record.version.received_at),
        SortProperty::VersionCreatedAt => date(Some(record.version.created_at)),
        SortProperty::Tag(path) => entries_at(entries, path)
            .iter()
            .find_map(|e| e.key.strip_prefix(super::index::TAG_KEYS.0))
            .map(|tag| SortValue::Tag(tag.to_owned())),
    }
}

/// The value `distinct` compares at a path: the least tag or record key.
pub fn distinct_value<'e>(
    path: &crate::model::LinkPath,
    entries: &'e [IndexEntry],
) -> Option<&'e str> {
    entries_at(entries, path)
        .iter()
        .map(|e| e.key.as_str())
        .find(|key| is_distinct_key(key))
}

/// Where a record sits in a list: its sort value, then its id (and author,
/// so that the order is total even if two authors chose one id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position<'r> {
    /// The record's value of the sort property.
    pub value: SortValue,
    /// The record's id, which breaks ties between equal values.
    pub record_id: RecordId,
    /// The record's author entity, which breaks ties between equal ids.
    pub author: &'r str,
}

impl Bound {
    /// How a position compares with this bound: a bound without a record id
    /// sits level with every record of its value, so strict comparisons
    /// exclude them all.
    fn compare(&self, position: &Position<'_>) -> Ordering {
        position
            .value
            .cmp(&self.value)
            .then_with(|| match &self.record_id {
                None => Ordering::Equal,
                Some(id) => position.record_id.cmp(id),
            })
    }

    /// Whether a position lies strictly after this bound in `direction`.
    pub fn precedes(&self, position: &Position<'_>, direction: Direction) -> bool {
        let ordering = self.compare(position);
        match direction {
            Direction::Ascending => ordering == Ordering::Greater,
            Direction::Descending => ordering == Ordering::Less,
        }
    }
}

/// A stored version as a list sees it.
#[derive(Debug, Clone, Copy)]
pub struct ListItem<'r> {
    /// The version.
    pub record: &'r Record,
    /// Its index entries, sorted.
    pub entries: &'r [IndexEntry],
}

/// One page of a list, chosen in memory.
#[derive(Debug, Clone)]
pub struct PageSelection<'r> {
    /// The page's records, in list order.
    pub records: Vec<&'r Record>,
    /// More records follow this page.
    pub more: bool,
}

impl ListQuery {
    /// Whether the list may show this version at all: readable by the
    /// caller, of a requested source, live unless tombstones are asked for,
    /// and matching the filters.
    pub fn admits(&self, access: &Access, item: ListItem<'_>) -> bool {
        let record = item.record;
        access.can_read(record)
            && (self.include_deleted || !record.is_tombstone())
            && self
                .sources
                .as_ref()
                .is_none_or(|sources| sources.contains(&record.source))
            && entries_match(&self.filters, record, item.entries)
    }

    /// The page this query asks for, from every latest version in a store:
    /// the reference the SQL of [`crate::store`] is tested against.
    pub fn select_page<'r>(
        &self,
        access: &Access,
        items: impl IntoIterator<Item = ListItem<'r>>,
    ) -> PageSelection<'r> {
        let direction = self.sort.direction;
        let in_range = |position: &Position<'_>| {
            self.min
                .as_ref()
                .is_none_or(|min| min.precedes(position, Direction::Ascending))
                && self
                    .max
                    .as_ref()
                    .is_none_or(|max| max.precedes(position, Direction::Descending))
        };
        let mut candidates: Vec<(Position<'r>, ListItem<'r>)> = items
            .into_iter()
            .filter(|&item| self.admits(access, item))
            .filter_map(|item| {
                let value = sort_value(&self.sort.property, item.record, item.entries)?;
                let position = Position {
                    value,
                    record_id: item.record.id,
                    author: item.record.author.entity.as_str(),
                };
                in_range(&position).then_some((position, item))
            })
            .collect();
        candidates.sort_by(|(a, _), (b, _)| match direction {
            Direction::Ascending => a.cmp(b),
            Direction::Descending => b.cmp(a),
        });
        if let Some(path) = &self.distinct {
            let mut seen = BTreeSet::new();
            candidates.retain(|(_, item)| {
                distinct_value(path, item.entries).is_some_and(|value| seen.insert(value))
            });
        }
        let size = self.page_size as usize;
        let mut records: Vec<&'r Record> = candidates
            .into_iter()
            .filter(|(position, _)| {
                self.page_start
                    .as_ref()
                    .is_none_or(|start| start.precedes(position, direction))
            })
            .map(|(_, item)| item.record)
            .take(size + 1)
            .collect();
        let more = records.len() > size;
        records.truncate(size);
        PageSelection { records, more }
    }
}
