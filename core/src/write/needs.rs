//! What a write asks the host to fetch, the answers it expects, and the
//! answers it gives itself (the built-in types, the always-known entities).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::model::{BlobHash, Entity, Record, RecordId, VersionHash, VersionLink};
use crate::schema::builtin::{SYSTEM_ENTITY, builtin_records};

/// A record in the user's store, named by its author and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordKey {
    /// The record's author entity.
    pub entity: Entity,
    /// The record's id.
    pub record_id: RecordId,
}

impl RecordKey {
    /// The key of `entity`'s record `record_id`.
    pub fn new(entity: Entity, record_id: RecordId) -> Self {
        Self { entity, record_id }
    }

    /// The record a version belongs to.
    pub fn of(record: &Record) -> Self {
        Self::new(record.author.entity.clone(), record.id)
    }

    pub(super) fn is_builtin(&self) -> bool {
        self.entity.as_str() == SYSTEM_ENTITY
    }
}

impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.entity, self.record_id)
    }
}

/// One thing the host must fetch from the user's store before the write can
/// go on. Each is answered by the [`Supplied`] variant its doc names; the host
/// decides nothing but the facts asked for.
///
/// The core never asks about the built-in types (it holds them) nor about
/// `system.folio.dev` and the user's own entity (always known).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Need {
    /// The latest version of this record, live or tombstone, whoever can
    /// read it: [`Supplied::Record`], `None` when the store has no such record.
    Latest(RecordKey),
    /// This exact version of this record: [`Supplied::Record`], `None` when
    /// the store has no such version.
    Version {
        /// The record.
        record: RecordKey,
        /// The version's hash.
        hash: VersionHash,
    },
    /// Whether this server knows the entity: a local user, or an entity
    /// that a live Entity record in this store describes
    /// ([`crate::auth::access::described_entity`]): [`Supplied::Known`].
    Entity(Entity),
    /// What the store knows of this blob: [`Supplied::Blob`], `None` when it
    /// has never seen it.
    Blob(BlobHash),
    /// The live records of this store whose latest version links this blob,
    /// at most [`MAX_BLOB_LINKERS`], public ones first: [`Supplied::Records`].
    /// Asked only for a blob not uploaded within the hour: linking it then
    /// needs a record the writer can read that links it (PROTOCOL.md §4).
    BlobLinkers(BlobHash),
    /// The live records of this store whose latest version holds an
    /// existential record link to this record (the link index's
    /// `existential` flag, from [`FoundLink::existential`](crate::schema::FoundLink)):
    /// [`Supplied::Records`], their latest versions, in any order; at most
    /// one more than [`MAX_RECORDS_PER_WRITE`](super::MAX_RECORDS_PER_WRITE)
    /// of them is enough.
    Dependants(RecordKey),
}

/// The host's answer to one [`Need`].
#[derive(Debug, Clone, PartialEq)]
pub enum Supplied {
    /// For [`Need::Latest`] and [`Need::Version`] (shared: a record is large
    /// beside the other answers, and the host's memo may hold the same one).
    Record(Option<Arc<Record>>),
    /// For [`Need::Entity`].
    Known(bool),
    /// For [`Need::Blob`].
    Blob(Option<BlobFacts>),
    /// For [`Need::Dependants`] and [`Need::BlobLinkers`].
    Records(Vec<Record>),
}

/// What the store knows of a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFacts {
    /// Its size in bytes.
    pub size: u64,
    /// Whether it was uploaded to this user's store within the last hour
    /// ([`UNLINKED_BLOB_LIFETIME_MS`](crate::service::blob::UNLINKED_BLOB_LIFETIME_MS)),
    /// which lets any writer link it (PROTOCOL.md §4, §9). Otherwise a
    /// record the writer can read must link it already ([`Need::BlobLinkers`]).
    pub uploaded: bool,
}

/// The most linking records [`Need::BlobLinkers`] reads. A blob that more
/// records link, none of the first readable by the writer, is refused as
/// unavailable: a false refusal the writer cures by uploading it again.
pub const MAX_BLOB_LINKERS: usize = 64;

impl Need {
    /// Whether `answer` is of the kind this need expects and, for a record,
    /// is the record asked for. A host that answers something else breaks
    /// the calling contract.
    pub(super) fn accepts(&self, answer: &Supplied) -> bool {
        match (self, answer) {
            (Need::Latest(key), Supplied::Record(record)) => {
                record.as_deref().is_none_or(|r| RecordKey::of(r) == *key)
            }
            (Need::Version { record: key, hash }, Supplied::Record(record)) => record
                .as_deref()
                .is_none_or(|r| RecordKey::of(r) == *key && r.version.hash == *hash),
            (Need::Entity(_), Supplied::Known(_))
            | (Need::Blob(_), Supplied::Blob(_))
            | (Need::Dependants(_) | Need::BlobLinkers(_), Supplied::Records(_)) => true,
            _ => false,
        }
    }
}

/// Everything the host has answered so far, for the rest of the write.
#[derive(Debug, Default)]
pub(super) struct Fetched(HashMap<Need, Supplied>);

impl Fetched {
    pub(super) fn insert(&mut self, need: Need, answer: Supplied) {
        self.0.insert(need, answer);
    }
}

/// Reads answers from [`Fetched`] (or from the core's own knowledge), and
/// notes every need that has no answer yet, so that one round asks for all
/// of them at once.
pub(super) struct Asker<'a> {
    fetched: &'a Fetched,
    user: &'a Entity,
    missing: Vec<Need>,
    /// The same needs as `missing`, to ask each once however often it is read.
    asked: HashSet<Need>,
}

impl<'a> Asker<'a> {
    pub(super) fn new(fetched: &'a Fetched, user: &'a Entity) -> Self {
        Self {
            fetched,
            user,
            missing: Vec::new(),
            asked: HashSet::new(),
        }
    }

    /// The needs that have no answer yet, each once, in the order first asked.
    pub(super) fn into_missing(self) -> Vec<Need> {
        self.missing
    }

    pub(super) fn has_missing(&self) -> bool {
        !self.missing.is_empty()
    }

    fn answer(&mut self, need: Need) -> Option<&'a Supplied> {
        let answer = self.fetched.0.get(&need);
        if answer.is_none() && self.asked.insert(need.clone()) {
            self.missing.push(need);
        }
        answer
    }

    /// The latest version of a record: `None` while unanswered.
    pub(super) fn latest(&mut self, key: &RecordKey) -> Option<Option<&'a Record>> {
        if key.is_builtin() {
            let latest = builtin_records()
                .iter()
                .rev()
                .find(|r| r.id == key.record_id);
            return Some(latest);
        }
        match self.answer(Need::Latest(key.clone()))? {
            Supplied::Record(record) => Some(record.as_deref()),
            _ => Some(None),
        }
    }

    /// One version of a record: `None` while unanswered.
    pub(super) fn version(
        &mut self,
        key: &RecordKey,
        hash: &VersionHash,
    ) -> Option<Option<&'a Record>> {
        if key.is_builtin() {
            let version = builtin_records()
                .iter()
                .find(|r| r.id == key.record_id && r.version.hash == *hash);
            return Some(version);
        }
        let need = Need::Version {
            record: key.clone(),
            hash: *hash,
        };
        match self.answer(need)? {
            Supplied::Record(record) => Some(record.as_deref()),
            _ => Some(None),
        }
    }

    /// The version a version link names: `None` while unanswered.
    pub(super) fn linked_version(&mut self, link: &VersionLink) -> Option<Option<&'a Record>> {
        let key = RecordKey::new(link.entity.clone(), link.record_id);
        self.version(&key, &link.version_hash)
    }

    /// Whether an entity is known: `None` while unanswered.
    pub(super) fn entity_known(&mut self, entity: &Entity) -> Option<bool> {
        if entity.as_str() == SYSTEM_ENTITY || entity == self.user {
            return Some(true);
        }
        match self.answer(Need::Entity(entity.clone()))? {
            Supplied::Known(known) => Some(*known),
            _ => Some(false),
        }
    }

    /// What the store knows of a blob: `None` while unanswered.
    pub(super) fn blob(&mut self, hash: &BlobHash) -> Option<Option<BlobFacts>> {
        match self.answer(Need::Blob(*hash))? {
            Supplied::Blob(facts) => Some(*facts),
            _ => Some(None),
        }
    }

    /// The live records that link a blob: `None` while unanswered.
    pub(super) fn blob_linkers(&mut self, hash: &BlobHash) -> Option<&'a [Record]> {
        match self.answer(Need::BlobLinkers(*hash))? {
            Supplied::Records(records) => Some(records),
            _ => Some(&[]),
        }
    }

    /// The live records with an existential link to this one: `None` while unanswered.
    pub(super) fn dependants(&mut self, key: &RecordKey) -> Option<&'a [Record]> {
        match self.answer(Need::Dependants(key.clone()))? {
            Supplied::Records(records) => Some(records),
            _ => Some(&[]),
        }
    }
}
