//! Record permissions (PROTOCOL.md §4).

use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Entity, EntityLink};

/// A record's permissions, exactly as its version carries them: defaults are a
/// reading rule and are never written in. A missing `read` or `write` means
/// the author alone; a missing `notify` means everyone in `read`; `{}` is
/// private to the author.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Who may read: `"public"` or a list of entities; `None` means the author alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadPermission>,
    /// Who may update or delete, besides the author; a subset of `read`. `None` means the author
    /// alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<EntityLink>>,
    /// Who is notified of new versions; a subset of `read`. `None` means everyone in `read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Vec<EntityLink>>,
}

impl Permissions {
    /// `{"read": "public"}`: what a Type record gets when it names none.
    pub fn public() -> Self {
        Self {
            read: Some(ReadPermission::Public),
            ..Self::default()
        }
    }

    /// `read` is `"public"`: everyone may read.
    pub fn is_public(&self) -> bool {
        matches!(self.read, Some(ReadPermission::Public))
    }
}

/// One of the three permissions a record grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Reading the record.
    Read,
    /// Writing new versions of the record, tombstones included.
    Write,
    /// Being notified of its new versions.
    Notify,
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Notify => "notify",
        })
    }
}

impl Permissions {
    /// Whether `entity` holds `permission` on a record that `author` wrote
    /// with these permissions. The author holds every permission; `"public"`
    /// gives everyone read and, with `notify` absent, notify.
    pub fn grants(&self, author: &Entity, entity: &Entity, permission: Permission) -> bool {
        let lists = |links: &[EntityLink]| links.iter().any(|link| &link.entity == entity);
        let reads = match &self.read {
            Some(ReadPermission::Public) => true,
            Some(ReadPermission::Entities(links)) => lists(links),
            None => false,
        };
        entity == author
            || match permission {
                Permission::Read => reads,
                Permission::Write => self.write.as_deref().is_some_and(lists),
                Permission::Notify => self.notify.as_deref().map_or(reads, lists),
            }
    }
}

/// Who may read: everyone, or the listed entities (besides the author).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadPermission {
    /// Anyone may read the record: `"public"`.
    Public,
    /// The author and these entities may read the record.
    Entities(Vec<EntityLink>),
}

const PUBLIC: &str = "public";

impl Serialize for ReadPermission {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ReadPermission::Public => serializer.serialize_str(PUBLIC),
            ReadPermission::Entities(links) => links.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ReadPermission {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ReadVisitor;

        impl<'de> Visitor<'de> for ReadVisitor {
            type Value = ReadPermission;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"public\" or an array of entity links")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<ReadPermission, E> {
                if text == PUBLIC {
                    Ok(ReadPermission::Public)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(text), &self))
                }
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ReadPermission, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(ReadPermission::Entities)
            }
        }

        deserializer.deserialize_any(ReadVisitor)
    }
}
