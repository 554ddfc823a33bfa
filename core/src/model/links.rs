//! The five link kinds (spec §2.3) and the JSON paths that locate them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{BlobHash, Entity, FileName, MediaType, RecordDate, RecordId, Tag, VersionHash};

/// A link to an entity: `{"entity"}`.
///
/// `original_entity` and `version_created_at` are kept when a stored record
/// carries them (records that came from elsewhere); Folio never adds them to
/// the links it creates.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityLink {
    /// The entity linked.
    pub entity: Entity,
    /// The entity the link first named, kept as a stored record carries it; Folio never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_entity: Option<Entity>,
    /// The linked entity's `version_created_at`, kept as a stored record carries it; Folio never
    /// sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_created_at: Option<RecordDate>,
}

impl EntityLink {
    /// A link to `entity`, without the optional fields.
    pub fn new(entity: Entity) -> Self {
        Self {
            entity,
            original_entity: None,
            version_created_at: None,
        }
    }
}

/// A link to the latest version of a record: `{"entity", "record_id"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordLink {
    /// The author entity of the record.
    pub entity: Entity,
    /// The entity the link first named, kept as a stored record carries it; Folio never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_entity: Option<Entity>,
    /// The record's id.
    pub record_id: RecordId,
}

/// A link to one exact version of a record: `{"entity", "record_id", "version_hash"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionLink {
    /// The author entity of the record.
    pub entity: Entity,
    /// The entity the link first named, kept as a stored record carries it; Folio never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_entity: Option<Entity>,
    /// The record's id.
    pub record_id: RecordId,
    /// The hash of the version linked.
    pub version_hash: VersionHash,
}

/// A link to a blob inside content: `{"hash", "type", "name", "size"}`
/// (PROTOCOL.md §4). `size` is optional on input; when present it must equal
/// the blob's size, which only the store can tell.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobLink {
    /// The blob's SHA-256.
    pub hash: BlobHash,
    /// The blob's media type, as the writer gives it.
    #[serde(rename = "type")]
    pub media_type: MediaType,
    /// The file name the blob is downloaded under.
    pub name: FileName,
    /// The blob's size in bytes; when given, it must be the blob's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// The kind of a link, with the names `no_content.links[].type` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// A link to an entity.
    Entity,
    /// A link to the latest version of a record.
    Record,
    /// A link to one version of a record.
    Version,
    /// A tag.
    Tag,
    /// A link to a blob.
    Blob,
}

/// A link of any kind. It serializes as the link value alone; its kind
/// travels beside it where the wire needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Link {
    /// A link to an entity.
    Entity(EntityLink),
    /// A link to the latest version of a record.
    Record(RecordLink),
    /// A link to one version of a record.
    Version(VersionLink),
    /// A tag.
    Tag(Tag),
    /// A link to a blob.
    Blob(BlobLink),
}

impl Link {
    /// The link's kind.
    pub fn kind(&self) -> LinkKind {
        match self {
            Link::Entity(_) => LinkKind::Entity,
            Link::Record(_) => LinkKind::Record,
            Link::Version(_) => LinkKind::Version,
            Link::Tag(_) => LinkKind::Tag,
            Link::Blob(_) => LinkKind::Blob,
        }
    }

    /// Reads a link of a known kind from its JSON value.
    pub fn from_value(kind: LinkKind, value: serde_json::Value) -> serde_json::Result<Self> {
        Ok(match kind {
            LinkKind::Entity => Link::Entity(serde_json::from_value(value)?),
            LinkKind::Record => Link::Record(serde_json::from_value(value)?),
            LinkKind::Version => Link::Version(serde_json::from_value(value)?),
            LinkKind::Tag => Link::Tag(serde_json::from_value(value)?),
            LinkKind::Blob => Link::Blob(serde_json::from_value(value)?),
        })
    }
}

/// Where a link sits in a record, in bracket form: `$['content']['mentions'][*]['entity']`,
/// with `[*]` for each array level (PROTOCOL.md §4).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct LinkPath(String);

/// Why a text is not a [`LinkPath`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a link path is `$` followed by segments `['name']` or `[*]`")]
pub struct LinkPathError;

impl LinkPath {
    /// The path in bracket form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A path the schema walk built itself, from `$`, `['name']` with names
    /// that hold no `'`, and `[*]`: valid by construction.
    pub(crate) fn from_walk(path: String) -> Self {
        debug_assert!(path.parse::<LinkPath>().is_ok(), "{path}");
        Self(path)
    }
}

impl FromStr for LinkPath {
    type Err = LinkPathError;

    fn from_str(text: &str) -> Result<Self, LinkPathError> {
        let mut rest = text.strip_prefix('$').ok_or(LinkPathError)?;
        if rest.is_empty() {
            return Err(LinkPathError);
        }
        while !rest.is_empty() {
            rest = if let Some(after) = rest.strip_prefix("[*]") {
                after
            } else {
                let inner = rest.strip_prefix("['").ok_or(LinkPathError)?;
                let end = inner
                    .find("']")
                    .filter(|&end| end > 0)
                    .ok_or(LinkPathError)?;
                if inner[..end].contains('\'') {
                    return Err(LinkPathError);
                }
                &inner[end + 2..]
            };
        }
        Ok(Self(text.to_owned()))
    }
}

impl fmt::Display for LinkPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LinkPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LinkPath({})", self.0)
    }
}

impl<'de> Deserialize<'de> for LinkPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::deserialize_from_str(deserializer)
    }
}
