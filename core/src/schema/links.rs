//! What validation finds besides a verdict: the links a record holds, and
//! the checks only the store can run on them.

use std::collections::BTreeSet;

use super::tree::RecordTypeRef;
use crate::model::{BlobHash, Entity, Link, LinkPath, RecordLink, VersionLink};

/// A link a record holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FoundLink {
    /// Where: `[*]` stands for each array index and map key.
    pub path: LinkPath,
    /// The link.
    pub link: Link,
    /// In `content` (as opposed to the envelope: author, type, permissions).
    /// Only content links go into a tombstone's `links`.
    pub in_content: bool,
    /// An existential record link: the record is deleted with its target.
    pub existential: bool,
}

/// What only the store can check, asked all at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreChecks {
    /// Every linked entity must be known to the server.
    pub entities: BTreeSet<Entity>,
    /// Every linked record must exist and be readable by the writer.
    pub records: Vec<RecordCheck>,
    /// Every linked version must exist.
    pub versions: Vec<VersionCheck>,
    /// Every linked blob must be available to the writer.
    pub blobs: Vec<BlobCheck>,
}

/// A record link the store must resolve: the record must exist and the writer must be able to read
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordCheck {
    /// Where the link sits.
    pub path: LinkPath,
    /// The link.
    pub link: RecordLink,
    /// When set, the linked record's type must be one of these.
    pub record_types: Option<Vec<RecordTypeRef>>,
}

/// A version link the store must resolve: the version must exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionCheck {
    /// Where the link sits.
    pub path: LinkPath,
    /// The link.
    pub link: VersionLink,
    /// When set, the linked version's type must be one of these.
    pub record_types: Option<Vec<RecordTypeRef>>,
}

/// A blob link the store must resolve: the blob must be available to the writer (PROTOCOL.md §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobCheck {
    /// Where the link sits.
    pub path: LinkPath,
    /// The blob's SHA-256.
    pub hash: BlobHash,
    /// The size the link states, which must be the blob's.
    pub size: Option<u64>,
    /// The schema's limit, to check against the blob's real size when the link states none.
    pub max_size: Option<u64>,
}

/// A record that passed validation: its links, and what the store must confirm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validated {
    /// Every link, envelope first, then content in document order, each once.
    pub links: Vec<FoundLink>,
    /// What only the store can check about the links.
    pub checks: StoreChecks,
    /// The text of its content's strings and tags, as search finds it
    /// ([`crate::query::record_text`]).
    pub search_text: String,
}

impl Validated {
    /// The content links, as a tombstone records them.
    pub fn content_links(&self) -> impl Iterator<Item = &FoundLink> {
        self.links.iter().filter(|link| link.in_content)
    }
}
