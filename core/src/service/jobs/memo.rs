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
//! Both memos are bounded by a weight (the stored JSON's length for a
//! version, [`weight`] of the content for a
//! type); past it, a memo starts again empty, as the standings' does.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, PoisonError};

use crate::model::{Record, VersionHash};
use crate::query::IndexEntry;
use crate::write::type_memo::weight;
use crate::write::{RecordKey, TypeMemo};

use crate::service::jobs::{Done, JobOutcome};
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
    found: HashMap<(i64, VersionHash), Remembered>,
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
    /// The version `hash` of `record` in store `store`, if remembered
    /// under this epoch.
    pub fn version(
        &self,
        store: i64,
        record: &RecordKey,
        hash: &VersionHash,
    ) -> Option<Remembered> {
        let versions = self
            .memo
            .versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if versions.epoch != Some(self.epoch) {
            return None;
        }
        versions
            .found
            .get(&(store, *hash))
            .filter(|found| {
                found.record.id == record.record_id && found.record.author.entity == record.entity
            })
            .cloned()
    }

    /// Remembers `version`, read from store `store` under this epoch, whose
    /// stored JSON is `len` bytes long.
    pub fn remember_version(&self, store: i64, version: &Remembered, len: usize) {
        if len > MAX_REMEMBERED_VERSION_LEN {
            return;
        }
        let mut versions = self
            .memo
            .versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if versions.epoch != Some(self.epoch)
            || versions.weight + len > MAX_REMEMBERED_VERSION_BYTES
        {
            *versions = Versions {
                epoch: Some(self.epoch),
                ..Versions::default()
            };
        }
        let hash = version.record.version.hash;
        if let Entry::Vacant(entry) = versions.found.entry((store, hash)) {
            entry.insert(version.clone());
            versions.weight += len;
        }
    }

    /// The compiled types, for [`Write::remembering`](crate::write::Write::remembering).
    pub fn types(&self) -> &Arc<TypeMemo> {
        &self.memo.types
    }

    /// Remembers the version a committed job answered with, as the store
    /// now holds it (its stored JSON is that version serialized), so that
    /// the next write of the same record finds it. Only a record's later
    /// versions: a record updated once is likely to be updated again, most
    /// new records are not (a flood of creates would only empty the memo).
    /// A job that stored nothing, or was refused, leaves the memo as it is.
    pub fn remember_outcome(&self, store: i64, outcome: &JobOutcome) {
        let written = match outcome {
            Ok(Done::Written(written)) => written,
            Ok(Done::Registered(registered)) => &registered.written,
            Ok(Done::Ran) | Err(_) => return,
        };
        let record = &written.answer.record;
        if record.version.parent_hash.is_none() {
            return;
        }
        let len = ENVELOPE_LEN
            + record
                .content()
                .map_or(0, |content| weight(content.as_value()));
        let version = Remembered {
            record: Arc::new(record.clone()),
            entries: written.answer.entries.as_slice().into(),
        };
        self.remember_version(store, &version, len);
    }
}

/// About the length of a stored version's JSON beside its content (ids,
/// hashes, dates, links of the envelope), for [`MemoAt::remember_outcome`],
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
