//! Existential cascades (PROTOCOL.md §4): deleting a record with action
//! `delete` deletes every live record of the store with an existential link
//! to it, recursively.
//!
//! A cascade writes only the user's own versions. It deletes the user's
//! own records (action `delete`, announced like any deletion) and deletes
//! another entity's for this store only (action `local`): it never writes
//! a version of a record another entity authored into that record's
//! chain, where the author's next version would fork from it. A deletion
//! received from another server cascades the same way, leaving out that
//! server's own records: their author deletes them and sends each
//! tombstone (`docs/federation.md` §4).

use std::collections::HashSet;
use std::mem;

use super::build::{self, Stamp, Types};
use super::error::WriteError;
use super::needs::RecordKey;
use super::phases::{Advance, Env, Phase, fail};
use super::{Commit, MAX_RECORDS_PER_WRITE, NewVersion};
use crate::model::{DeletionAction, Entity, EntityLink, Record, RecordDate};

impl Env {
    pub(super) fn cascade(&self, types: &mut Types, mut cascade: Box<Cascade>) -> Advance {
        loop {
            let mut ask = self.ask();
            for dependant in &cascade.pending {
                ask.linked_version(&dependant.type_link);
                ask.dependants(&RecordKey::of(dependant));
            }
            for key in &cascade.expand {
                ask.dependants(key);
            }
            if ask.has_missing() {
                return Advance::Ask(Phase::Cascade(cascade), ask.into_missing());
            }
            for dependant in mem::take(&mut cascade.pending) {
                let type_record = ask.linked_version(&dependant.type_link).flatten();
                let stamp = cascade.next_stamp(self.context.received_at);
                let action = match dependant.author.entity == self.context.user {
                    true => DeletionAction::Delete,
                    false => DeletionAction::Local,
                };
                match stored_tombstone(types, &dependant, type_record, &stamp, action) {
                    Ok(tombstone) => cascade.cascaded.push(tombstone),
                    Err(error) => return fail(error),
                }
                cascade.expand.push(RecordKey::of(&dependant));
            }
            for key in mem::take(&mut cascade.expand) {
                for dependant in ask.dependants(&key).unwrap_or_default() {
                    let left_to_author = cascade.left_to.as_ref() == Some(&dependant.author.entity);
                    if dependant.is_tombstone()
                        || left_to_author
                        || !cascade.seen.insert(RecordKey::of(dependant))
                    {
                        continue;
                    }
                    if cascade.seen.len() > MAX_RECORDS_PER_WRITE {
                        return fail(WriteError::CascadeTooLarge);
                    }
                    cascade.pending.push(dependant.clone());
                }
            }
            if cascade.pending.is_empty() {
                let Cascade {
                    written, cascaded, ..
                } = *cascade;
                let written = Box::new(written);
                return Advance::Done(Ok(Commit::Store { written, cascaded }));
            }
        }
    }
}

/// The tombstone of a stored live version. That version was validated when
/// it was stored and versions never change, so a failure here means the
/// store is inconsistent.
pub(super) fn stored_tombstone(
    types: &mut Types,
    live: &Record,
    type_record: Option<&Record>,
    stamp: &Stamp,
    action: DeletionAction,
) -> Result<NewVersion, WriteError> {
    let unusable = |reason: String| WriteError::StoredRecordUnusable {
        record: RecordKey::of(live),
        reason,
    };
    let record_type = types.get(&live.type_link, type_record).map_err(unusable)?;
    build::tombstone(live, record_type, stamp, action).map_err(|v| unusable(v.to_string()))
}

/// A deletion's cascade to the records that depend on it (PROTOCOL.md §4):
/// each level is read in one round, breadth first.
#[derive(Debug)]
pub(super) struct Cascade {
    written: NewVersion,
    cascaded: Vec<NewVersion>,
    /// The user, who writes every tombstone of the cascade.
    by: EntityLink,
    /// For a deletion received from another server, its author: the
    /// records it authored are left to it.
    left_to: Option<Entity>,
    /// Every record deleted or to delete, the written one included: each
    /// once, however many links lead to it.
    seen: HashSet<RecordKey>,
    /// Deleted records whose dependants are still to read.
    expand: Vec<RecordKey>,
    /// Dependants found, to delete once their types are read.
    pending: Vec<Record>,
}

impl Cascade {
    /// The cascade of the deletion `written` of the record `key`, in
    /// `user`'s store: the user's own deletion, or one `received` from
    /// another server (whose records are then left to its entity).
    pub(super) fn new(written: NewVersion, key: RecordKey, user: &Entity, received: bool) -> Self {
        let left_to = received.then(|| written.record.author.entity.clone());
        Cascade {
            written,
            cascaded: Vec::new(),
            by: EntityLink::new(user.clone()),
            left_to,
            seen: HashSet::from([key.clone()]),
            expand: vec![key],
            pending: Vec::new(),
        }
    }

    /// A cascaded tombstone shares the deletion's `version.created_at` and
    /// is received just after the version before it.
    fn next_stamp(&self, received_at: RecordDate) -> Stamp {
        let previous = self.cascaded.last().unwrap_or(&self.written);
        Stamp {
            author: self.by.clone(),
            created_at: self.written.record.version.created_at,
            received_at: RecordDate::received_after(
                received_at,
                previous.record.version.received_at,
            ),
        }
    }
}
