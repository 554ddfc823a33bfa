//! The link index: every value a record holds at a path, as `(path, key)`
//! entries. Filters, tag sorts, `distinct` and existential cascades all read
//! it, in memory ([`super::eval`]) and in SQL (the `link_index` table), from
//! the same entries, so both answer alike.
//!
//! A key is a one-letter kind, `:`, and the value, so that one text column
//! holds every kind and a filter value is one equality:
//!
//! | link | keys |
//! |---|---|
//! | entity | `e:<entity>` |
//! | record | `r:<entity> <record_id>`, and `x:<entity> <record_id>` when existential |
//! | version | `v:<entity> <record_id> <hash>` and `r:<entity> <record_id>` (a record value matches a version link's record part) |
//! | tag | `t:<tag>` |
//! | blob | `b:<hash>`, and tags `t:<type>` at `<path>['type']` and `t:<name>` at `<path>['name']` |
//!
//! Tag keys sort as their tags do (the prefix is constant, and SQLite's
//! BINARY collation compares UTF-8 bytes as Rust's `str` does), so a tag
//! sort can order by key.

use crate::model::{BlobHash, Entity, Link, LinkPath, RecordId, VersionHash};
use crate::schema::FoundLink;

use super::FilterValue;

/// One entry of the link index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexEntry {
    /// The link's path in the version, in bracket form.
    pub path: String,
    /// What the link points to, with its kind's prefix: `e:`, `r:`, `v:`, `x:`, `b:` or `t:`.
    pub key: String,
}

/// The envelope's author, version author and type: every record has one
/// entry at each (the type's two: `r:` and `v:`), and the store keeps them
/// as columns of `records`, not in the `link_index` table. In memory they
/// are entries like any other.
pub const AUTHOR_PATH: &str = "$['author']";
/// The path of the version author's entry, a column of `records`.
pub const VERSION_AUTHOR_PATH: &str = "$['version']['author']";
/// The path of the type's entries, columns of `records`.
pub const TYPE_PATH: &str = "$['type']";
pub(crate) const COLUMN_PATHS: [&str; 3] = [AUTHOR_PATH, VERSION_AUTHOR_PATH, TYPE_PATH];

/// The first key of each kind, and the first after it: `kind:` ≤ key < `kind;`.
pub(crate) const TAG_KEYS: (&str, &str) = ("t:", "t;");
pub(crate) const RECORD_KEYS: (&str, &str) = ("r:", "r;");
pub(crate) const BLOB_KEYS: (&str, &str) = ("b:", "b;");

impl IndexEntry {
    /// Whether the entry is a blob's (`b:<hash>`).
    pub fn is_blob(&self) -> bool {
        self.key.starts_with(BLOB_KEYS.0)
    }

    /// Whether the store keeps this entry as a column of `records` rather
    /// than in the link index (see [`AUTHOR_PATH`]).
    pub fn is_column(&self) -> bool {
        COLUMN_PATHS.contains(&self.path.as_str())
    }
}

/// The index entries of one version, sorted and each once, from the links
/// its validation found (envelope and content; a tombstone's `no_content`).
pub fn index_entries(links: &[FoundLink]) -> Vec<IndexEntry> {
    let mut entries = Vec::with_capacity(links.len() * 2);
    for found in links {
        let path = found.path.as_str();
        let mut add = |path: &str, key: String| {
            entries.push(IndexEntry {
                path: path.to_owned(),
                key,
            })
        };
        match &found.link {
            Link::Entity(link) => add(path, entity_key(&link.entity)),
            Link::Record(link) => {
                add(path, record_key(&link.entity, &link.record_id));
                if found.existential {
                    add(path, existential_key(&link.entity, &link.record_id));
                }
            }
            Link::Version(link) => {
                add(path, record_key(&link.entity, &link.record_id));
                add(
                    path,
                    version_key(&link.entity, &link.record_id, &link.version_hash),
                );
            }
            Link::Tag(tag) => add(path, tag_key(tag.as_str())),
            Link::Blob(blob) => {
                add(path, blob_key(&blob.hash));
                add(
                    &format!("{path}['type']"),
                    tag_key(blob.media_type.as_str()),
                );
                add(&format!("{path}['name']"), tag_key(blob.name.as_str()));
            }
        }
    }
    entries.sort_unstable();
    entries.dedup();
    entries
}

/// The key a filter value matches.
pub fn value_key(value: &FilterValue) -> String {
    match value {
        FilterValue::Entity(entity) => entity_key(entity),
        FilterValue::Record { entity, record_id } => record_key(entity, record_id),
        FilterValue::Version {
            entity,
            record_id,
            version_hash,
        } => version_key(entity, record_id, version_hash),
        FilterValue::Tag(tag) => tag_key(tag),
    }
}

/// The key of an entity link to `entity`: `e:{entity}`.
pub fn entity_key(entity: &Entity) -> String {
    format!("e:{entity}")
}

/// The key of a record link (and of a version link) to this record: `r:{entity} {record_id}`.
pub fn record_key(entity: &Entity, record_id: &RecordId) -> String {
    format!("r:{entity} {record_id}")
}

/// The key of a version link to this version: `v:{entity} {record_id} {hash}`.
pub fn version_key(entity: &Entity, record_id: &RecordId, hash: &VersionHash) -> String {
    format!("v:{entity} {record_id} {hash}")
}

/// The key of a blob link to this blob.
pub fn blob_key(hash: &BlobHash) -> String {
    format!("{}{hash}", BLOB_KEYS.0)
}

/// The key of an existential record link to this record: what a cascade looks up.
pub fn existential_key(entity: &Entity, record_id: &RecordId) -> String {
    format!("x:{entity} {record_id}")
}

/// The key of a tag: `t:{tag}`.
pub fn tag_key(tag: &str) -> String {
    format!("t:{tag}")
}

/// The entity of an `e:` key.
pub(crate) fn parse_entity_key(key: &str) -> Option<Entity> {
    key.strip_prefix("e:")?.parse().ok()
}

/// The record of an `r:` key, or of an `x:` key with `prefix` `"x:"`.
pub(crate) fn parse_record_key(key: &str, prefix: &str) -> Option<(Entity, RecordId)> {
    let (entity, id) = key.strip_prefix(prefix)?.split_once(' ')?;
    Some((entity.parse().ok()?, id.parse().ok()?))
}

/// The version of a `v:` key.
pub(crate) fn parse_version_key(key: &str) -> Option<(Entity, RecordId, VersionHash)> {
    let (entity, rest) = key.strip_prefix("v:")?.split_once(' ')?;
    let (id, hash) = rest.split_once(' ')?;
    Some((entity.parse().ok()?, id.parse().ok()?, hash.parse().ok()?))
}

/// Whether a key is a tag's or a record's: the values `distinct` compares.
pub(crate) fn is_distinct_key(key: &str) -> bool {
    key.starts_with(TAG_KEYS.0) || key.starts_with(RECORD_KEYS.0)
}

/// The entries at one path, as a sorted slice of the record's entries.
pub(crate) fn entries_at<'e>(entries: &'e [IndexEntry], path: &LinkPath) -> &'e [IndexEntry] {
    let path = path.as_str();
    let start = entries.partition_point(|entry| entry.path.as_str() < path);
    let len = entries[start..].partition_point(|entry| entry.path == path);
    &entries[start..start + len]
}
