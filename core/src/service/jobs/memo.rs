//! Stored versions and compiled record types, remembered between writes.
//!
//! A write reads more than the record it writes: the version of its Type
//! record, and the versions its links name. Those versions are the same
//! from one write to the next (an app writes many records of few types),
//! and a stored version never changes (the writer's check of a prepared
//! job's reads relies on that too), so reading and parsing them once is
//! enough, and compiling each type's schema once.
//!
//! A version leaves a store only with the whole store (`folio user
//! remove`), after which a new store may be given the same row id. That
//! happens beside the server, which tells it by a new [`Epoch`]: versions
//! are remembered under the epoch they were read in, and the memo starts
//! again empty when it moves. A compiled type depends on nothing but the
//! Type record's content, which its version hash fixes, so compiled types
//! are kept across epochs; they are only used for a Type record the store
//! has just supplied (never to answer whether it holds one).
//!
//! A record's latest version is remembered too, as the writer stored it
//! ([`MemoAt::remember_stored`], in commit order, once durable), so that
//! an update decided on a snapshot reads nothing. That one is a guess, not
//! a fact: another write may have come since. A job that decides on it
//! has it checked where it commits (the writer reads the record's latest
//! again, and decides the job again if it moved), and a refusal or a
//! replay decided on it is decided again on what the store holds
//! ([`WriteJob::prepare`](super::WriteJob::prepare)).
//!
//! Both memos are bounded by a weight (the stored JSON's length for a
//! version, [`weight`] of the content for a
//! type); past it, a memo starts again empty, as the standings' does.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::model::{Record, VersionHash};
use crate::query::IndexEntry;
use crate::service::events::LiveVersion;
use crate::write::type_memo::weight;
use crate::write::{RecordKey, TypeMemo};

use crate::service::standing::Epoch;

/// The most stored JSON, in bytes, the versions memo holds at once: a few
/// times that in memory once parsed.
pub const MAX_REMEMBERED_VERSION_BYTES: usize = 1 << 20;
/// The longest stored version the memo keeps: a longer one is read each time.
pub const MAX_REMEMBERED_VERSION_LEN: usize = 64 << 10;

/// What a host remembers between writes ([module docs](self)).
#[derive(Debug, Default)]
pub struct Memo {
    versions: Mutex<Versions>,
    types: Arc<TypeMemo>,
}

#[derive(Debug, Default)]
struct Versions {
    epoch: Option<Epoch>,
    weight: usize,
    /// Each version by store and hash, with its weight.
    found: HashMap<(i64, VersionHash), (Remembered, usize)>,
    /// The hash of each record's latest version the writer stored, by
    /// store and record: a guess (module docs).
    latest: HashMap<(i64, RecordKey), VersionHash>,
}

impl Versions {
    /// Empties the memo if it is not of `epoch`, or if `len` more bytes
    /// would take it past its bound.
    fn make_room(&mut self, epoch: Epoch, len: usize) {
        if self.epoch != Some(epoch) || self.weight + len > MAX_REMEMBERED_VERSION_BYTES {
            *self = Versions {
                epoch: Some(epoch),
                ..Versions::default()
            };
        }
    }

    /// Makes `hash` the guess at `key`'s latest; the guess it replaces.
    fn set_latest(&mut self, key: (i64, RecordKey), hash: VersionHash) -> Option<VersionHash> {
        let replaced = self.latest.insert(key, hash);
        if replaced.is_none() {
            self.weight += LATEST_WEIGHT;
        }
        replaced
    }

    /// Drops the guess at `key`'s latest.
    fn forget_latest(&mut self, key: &(i64, RecordKey)) {
        if self.latest.remove(key).is_some() {
            self.weight -= LATEST_WEIGHT;
        }
    }

    /// Keeps `version` of store `store`, `len` bytes long.
    fn keep(&mut self, store: i64, version: Remembered, len: usize) {
        let hash = version.record.version.hash;
        if let Entry::Vacant(entry) = self.found.entry((store, hash)) {
            entry.insert((version, len));
            self.weight += len;
        }
    }
}

/// A remembered version: its record, and its index entries as the store
/// holds them (its `links`), which a write that replaces it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Remembered {
    /// The version.
    pub record: Arc<Record>,
    /// Its index entries, sorted.
    pub entries: Arc<[IndexEntry]>,
}

impl Memo {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// The memo as seen by a job that started under `epoch`.
    pub fn at(&self, epoch: Epoch) -> MemoAt<'_> {
        MemoAt { memo: self, epoch }
    }
}

/// A [`Memo`] under one epoch: what a job reads it through.
#[derive(Debug, Clone, Copy)]
pub struct MemoAt<'m> {
    memo: &'m Memo,
    epoch: Epoch,
}

impl MemoAt<'_> {
    /// The memo's versions, locked.
    fn lock(&self) -> MutexGuard<'_, Versions> {
        self.memo
            .versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The memo's versions, locked, if they are of this epoch.
    fn of_epoch(&self) -> Option<MutexGuard<'_, Versions>> {
        Some(self.lock()).filter(|versions| versions.epoch == Some(self.epoch))
    }

    /// The version `hash` of `record` in store `store`, if remembered
    /// under this epoch.
    pub fn version(
        &self,
        store: i64,
        record: &RecordKey,
        hash: &VersionHash,
    ) -> Option<Remembered> {
        let versions = self.of_epoch()?;
        versions
            .found
            .get(&(store, *hash))
            .map(|(found, _)| found)
            .filter(|found| {
                found.record.id == record.record_id && found.record.author.entity == record.entity
            })
            .cloned()
    }

    /// The latest version of `record` in store `store` that the writer
    /// stored under this epoch, if remembered: a guess ([module docs](self)).
    pub fn latest(&self, store: i64, record: &RecordKey) -> Option<Remembered> {
        let versions = self.of_epoch()?;
        let hash = versions.latest.get(&(store, record.clone()))?;
        versions
            .found
            .get(&(store, *hash))
            .map(|(found, _)| found.clone())
    }

    /// Remembers `version`, read from store `store` under this epoch, whose
    /// stored JSON is `len` bytes long.
    pub fn remember_version(&self, store: i64, version: &Remembered, len: usize) {
        if len > MAX_REMEMBERED_VERSION_LEN {
            return;
        }
        let mut versions = self.lock();
        versions.make_room(self.epoch, len);
        versions.keep(store, version.clone(), len);
    }

    /// The compiled types, for [`Write::remembering`](crate::write::Write::remembering).
    pub fn types(&self) -> &Arc<TypeMemo> {
        &self.memo.types
    }

    /// Remembers the versions a commit stored in store `store`, in the
    /// order stored, once the commit is durable: each is its record's
    /// latest now, and the version it replaced, if remembered as the
    /// latest, is forgotten. Only a record's later versions: a record
    /// updated once is likely to be updated again, most new records are
    /// not (a flood of creates would only empty the memo).
    pub fn remember_stored(&self, store: i64, stored: &[LiveVersion]) {
        let mut versions = self.lock();
        for version in stored {
            let record = &version.record;
            let Some(parent) = record.version.parent_hash else {
                continue;
            };
            let key = (
                store,
                RecordKey::new(record.author.entity.clone(), record.id),
            );
            let len = ENVELOPE_LEN
                + record
                    .content()
                    .map_or(0, |content| weight(content.as_value()));
            if len > MAX_REMEMBERED_VERSION_LEN {
                // Read each time: no guess may name the version it replaced.
                if versions.epoch == Some(self.epoch) {
                    versions.forget_latest(&key);
                }
                continue;
            }
            versions.make_room(self.epoch, len + LATEST_WEIGHT);
            if versions.set_latest(key, record.version.hash) == Some(parent)
                && let Some((_, parent_len)) = versions.found.remove(&(store, parent))
            {
                versions.weight -= parent_len;
            }
            let remembered = Remembered {
                record: Arc::new(record.clone()),
                entries: version.entries.as_slice().into(),
            };
            versions.keep(store, remembered, len);
        }
    }

    /// Forgets the guesses at the latest versions of `moved`, records by
    /// store found to have moved since ([`Effects::moved_latest`](super::Effects::moved_latest)).
    pub fn forget_latest(&self, moved: &[(i64, RecordKey)]) {
        if moved.is_empty() {
            return;
        }
        let mut versions = self.lock();
        if versions.epoch == Some(self.epoch) {
            for key in moved {
                versions.forget_latest(key);
            }
        }
    }

    /// Notes that a read found `hash` to be the latest version of `record`
    /// in store `store`, unless the memo has a guess already: a snapshot
    /// may be older than what the writer remembered since.
    pub fn observe_latest(&self, store: i64, record: &RecordKey, hash: VersionHash) {
        let mut versions = self.lock();
        let key = (store, record.clone());
        if versions.epoch == Some(self.epoch) && versions.latest.contains_key(&key) {
            return;
        }
        versions.make_room(self.epoch, LATEST_WEIGHT);
        versions.set_latest(key, hash);
    }
}

/// What remembering a record's latest hash weighs, against
/// [`MAX_REMEMBERED_VERSION_BYTES`]: about its key's and hash's length.
const LATEST_WEIGHT: usize = 128;

/// About the length of a stored version's JSON beside its content (ids,
/// hashes, dates, links of the envelope), for [`MemoAt::remember_stored`],
/// which has the version but not its stored JSON.
const ENVELOPE_LEN: usize = 600;

#[cfg(test)]
mod tests {
    use super::*;

    fn record(text: &str) -> Remembered {
        Remembered {
            record: Arc::new(serde_json::from_str(text).expect("a record")),
            entries: Arc::new([IndexEntry {
                path: "$['content']['person']".into(),
                key: "e:alice.example".into(),
            }]),
        }
    }

    const VERSION: &str = r#"{
        "author": {"entity": "alice.example"},
        "id": "6a1f9c2e4b7d4e0f8a3c5b1d2e4f6a8b",
        "source": "self",
        "type": {"entity": "types.example", "record_id": "0b2c4d6e8f0a4c1e9d3b5a7c9e1f3a5b", "version_hash": "1111111111111111111111111111111111111111111111111111111111111111"},
        "created_at": "2026-11-27T00:00:00.000Z",
        "received_at": "2026-11-27T00:00:00.000Z",
        "version": {
            "author": {"entity": "alice.example"},
            "hash": "2222222222222222222222222222222222222222222222222222222222222222",
            "created_at": "2026-11-27T00:00:00.000Z",
            "received_at": "2026-11-27T00:00:00.000Z"
        },
        "permissions": {},
        "content": {"title": "a"}
    }"#;

    fn epoch(commits: u64) -> Epoch {
        Epoch {
            commits,
            outside: [0; 3],
        }
    }

    fn key(version: &Remembered) -> RecordKey {
        RecordKey::new(version.record.author.entity.clone(), version.record.id)
    }

    #[test]
    fn a_version_is_found_in_its_store_under_its_epoch_for_its_record_only() {
        let memo = Memo::new();
        let version = record(VERSION);
        let hash = version.record.version.hash;
        let at = memo.at(epoch(1));
        assert!(at.version(7, &key(&version), &hash).is_none());
        at.remember_version(7, &version, 500);
        let found = at.version(7, &key(&version), &hash).expect("remembered");
        assert_eq!(found, version);
        assert!(
            at.version(8, &key(&version), &hash).is_none(),
            "another store"
        );
        let other = RecordKey::new(
            version.record.author.entity.clone(),
            crate::model::RecordId::from_bytes([9; 16]),
        );
        assert!(at.version(7, &other, &hash).is_none(), "another record");
        assert!(
            memo.at(epoch(2))
                .version(7, &key(&version), &hash)
                .is_none(),
            "another epoch"
        );
    }

    /// `version` as a commit stored it, its parent `parent`.
    fn stored(version: &Remembered, parent: Option<VersionHash>) -> LiveVersion {
        let mut record = Record::clone(&version.record);
        record.version.parent_hash = parent;
        LiveVersion::new(1, record, version.entries.to_vec(), None)
    }

    #[test]
    fn a_stored_update_is_its_records_latest_and_forgets_the_latest_it_replaced() {
        let memo = Memo::new();
        let at = memo.at(epoch(1));
        let first = record(VERSION);
        let record_key = key(&first);
        let mut second = Record::clone(&first.record);
        second.version.hash = VersionHash::from_bytes([3; 32]);
        let second = Remembered {
            record: Arc::new(second),
            entries: first.entries.clone(),
        };
        let parent = VersionHash::from_bytes([1; 32]);
        at.remember_stored(7, &[stored(&first, None)]);
        assert!(
            at.latest(7, &record_key).is_none(),
            "a first version is not kept"
        );

        at.remember_stored(7, &[stored(&first, Some(parent))]);
        let latest = at.latest(7, &record_key).expect("the latest");
        assert_eq!(latest.record.version.hash, first.record.version.hash);
        assert!(at.latest(8, &record_key).is_none(), "another store");
        assert!(
            memo.at(epoch(2)).latest(7, &record_key).is_none(),
            "another epoch"
        );

        at.remember_stored(7, &[stored(&second, Some(first.record.version.hash))]);
        let latest = at.latest(7, &record_key).expect("the latest");
        assert_eq!(latest.record.version.hash, second.record.version.hash);
        assert!(
            at.version(7, &record_key, &first.record.version.hash)
                .is_none(),
            "the replaced latest is forgotten"
        );
    }

    #[test]
    fn a_new_epoch_or_a_full_memo_starts_again_empty() {
        let memo = Memo::new();
        let version = record(VERSION);
        let hash = version.record.version.hash;
        memo.at(epoch(1)).remember_version(7, &version, 500);
        let mut other = Record::clone(&record(VERSION).record);
        other.id = crate::model::RecordId::from_bytes([3; 16]);
        let other = Remembered {
            record: Arc::new(other),
            entries: version.entries.clone(),
        };
        memo.at(epoch(2)).remember_version(7, &other, 500);
        assert!(
            memo.at(epoch(2))
                .version(7, &key(&version), &hash)
                .is_none(),
            "forgotten"
        );

        let memo = Memo::new();
        let at = memo.at(epoch(1));
        at.remember_version(7, &version, MAX_REMEMBERED_VERSION_LEN + 1);
        assert!(
            at.version(7, &key(&version), &hash).is_none(),
            "too long to keep"
        );
        let per = MAX_REMEMBERED_VERSION_LEN;
        for store in 0..(MAX_REMEMBERED_VERSION_BYTES / per) as i64 {
            at.remember_version(store, &version, per);
        }
        assert!(
            at.version(0, &key(&version), &hash).is_some(),
            "at the bound"
        );
        at.remember_version(1_000, &version, per);
        assert!(
            at.version(0, &key(&version), &hash).is_none(),
            "past it, emptied"
        );
        assert!(at.version(1_000, &key(&version), &hash).is_some());
    }
}
