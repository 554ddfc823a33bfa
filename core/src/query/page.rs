//! Answering a read: `next_page`, and `include_links` from planning the
//! fetch of linked records to choosing which of them to return.

use std::collections::{BTreeMap, BTreeSet};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;

use crate::auth::access::{Access, described_entity};
use crate::model::{Entity, Record, RecordId, VersionHash};

use super::eval::sort_value;
use super::index::{IndexEntry, entries_at, parse_entity_key, parse_record_key, parse_version_key};
use super::{Bound, IncludeLinks, Sort, SortValue};

/// Everything but RFC 3986's unreserved characters is percent-encoded, so a
/// `next_page` holds quotes as `%22` and `+` as `%2B`, as the vectors do.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The `page_start` of the page after one that ends with this record: its
/// sort value and its id. `None` if the record has no value for the sort
/// (it could not have been listed).
pub fn next_page_start(sort: &Sort, last: &Record, entries: &[IndexEntry]) -> Option<Bound> {
    Some(Bound {
        value: sort_value(&sort.property, last, entries)?,
        record_id: Some(last.id),
    })
}

impl Bound {
    /// The bound as a parameter value: a JSON-quoted value, then `+` and
    /// the record id when there is one.
    pub fn to_param(&self) -> String {
        let mut text = match &self.value {
            SortValue::Date(date) => format!("\"{date}\""),
            SortValue::Tag(tag) => serde_json::to_string(tag).expect("strings serialize"),
        };
        if let Some(id) = &self.record_id {
            text.push('+');
            text.push_str(&id.to_string());
        }
        text
    }
}

/// The `next_page` query string (`?…`): every parameter of the request, in
/// its order and percent-encoded, with `page_start` set to `start` (in
/// place of the old one, or last when the request had none).
pub fn next_page_query(params: &[(String, String)], start: &Bound) -> String {
    let start = start.to_param();
    let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(params.len() + 1);
    let mut replaced = false;
    for (name, value) in params {
        if name == "page_start" {
            if !replaced {
                pairs.push(("page_start", &start));
                replaced = true;
            }
        } else {
            pairs.push((name, value));
        }
    }
    if !replaced {
        pairs.push(("page_start", &start));
    }
    let mut query = String::from("?");
    for (i, (name, value)) in pairs.into_iter().enumerate() {
        if i > 0 {
            query.push('&');
        }
        query.extend(utf8_percent_encode(name, QUERY_VALUE));
        query.push('=');
        query.extend(utf8_percent_encode(value, QUERY_VALUE));
    }
    query
}

/// The records `include_links` asks for, by how the host finds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPlan {
    /// The Entity record of each of these entities.
    pub entities: BTreeSet<Entity>,
    /// The latest version of each of these records (author, id).
    pub records: BTreeSet<(Entity, RecordId)>,
    /// Each of these exact versions (author, id, hash).
    pub versions: BTreeSet<(Entity, RecordId, VersionHash)>,
}

impl LinkPlan {
    /// Whether the plan asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty() && self.records.is_empty() && self.versions.is_empty()
    }
}

impl IncludeLinks {
    /// What to fetch for the links of these versions (each with its index
    /// entries). `user` is the store's own entity, whose Entity record is
    /// never returned, so it is never fetched.
    pub fn plan<'r>(
        &self,
        versions: impl IntoIterator<Item = &'r [IndexEntry]>,
        user: &Entity,
    ) -> LinkPlan {
        let mut plan = LinkPlan::default();
        for entries in versions {
            for entry in entries {
                let key = entry.key.as_str();
                if self.entity
                    && let Some(entity) = parse_entity_key(key)
                    && &entity != user
                {
                    plan.entities.insert(entity);
                }
                if self.existential
                    && let Some(record) = parse_record_key(key, "x:")
                {
                    plan.records.insert(record);
                }
            }
            for path in &self.paths {
                let at = entries_at(entries, path);
                let versions: Vec<_> = at
                    .iter()
                    .filter_map(|e| parse_version_key(&e.key))
                    .collect();
                // A version link also has a record key; fetch the version alone.
                for entry in at {
                    if let Some((entity, id)) = parse_record_key(&entry.key, "r:")
                        && !versions.iter().any(|(e, i, _)| (e, i) == (&entity, &id))
                    {
                        plan.records.insert((entity, id));
                    }
                }
                plan.versions.extend(versions);
            }
        }
        plan
    }
}

/// The `linked_records` of a response, from what the host fetched for a
/// [`LinkPlan`]: each version once, in a stable order, leaving out what the
/// caller may not read and the user's own Entity record (missing targets
/// were simply not found).
pub fn linked_records(fetched: Vec<Record>, user: &Entity, access: &Access) -> Vec<Record> {
    let mut unique = BTreeMap::new();
    for record in fetched {
        let own_entity = described_entity(&record) == Some(user.as_str());
        if !own_entity && access.can_read(&record) {
            unique.entry(record.version.hash).or_insert(record);
        }
    }
    unique.into_values().collect()
}

/// A list response: `{records, linked_records, page_size, next_page?}`.
/// Its records are [`Record`]s, or anything that serializes as one (a
/// stored version's JSON, served as it is).
#[derive(Debug, Clone, Serialize)]
pub struct ListResponse<R = Record> {
    /// The page's records, in list order.
    pub records: Vec<R>,
    /// The records the request's `include_links` asked for, each once.
    pub linked_records: Vec<Record>,
    /// The page size the request asked for (or the default).
    pub page_size: u32,
    /// The query string of the next page, only when more records follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page: Option<String>,
}

/// A single-record response (a read or a write): `{record, linked_records}`.
#[derive(Debug, Clone, Serialize)]
pub struct RecordResponse<R = Record> {
    /// The record.
    pub record: R,
    /// The records the request's `include_links` asked for, each once.
    pub linked_records: Vec<Record>,
}
