//! Writes as pure transitions (PROTOCOL.md §4, §5, §6): a create, update or
//! deletion request becomes, with what the host fetched, the versions to
//! store, or the reason it fails.
//!
//! What a write must fetch depends on what it fetched before (an update's
//! type is its parent's; a record's links are known only once its type is;
//! a cascade's dependants have dependants), so a write is a small state
//! machine that the host drives:
//!
//! ```text
//! let request = WriteRequest::put(key, body)?;             // parse: no IO
//! let mut write = Write::new(request, context);            // context: user, access, now, ids
//! let result = loop {
//!     match write.step() {
//!         Step::Fetch(needs) => write.supply(answer_each(&needs)),   // the host's IO
//!         Step::Done(result) => break result,              // Result<Commit, WriteError>
//!     }
//! };
//! ```
//!
//! Rounds stay few: a create asks for its type (and, with an `id`, the
//! record under it), then for its link targets. An update asks for the
//! record (and a type the body names), then for the parent's type when it
//! keeps it, then for its link targets. A deletion asks for the record, then
//! for its type and its dependants, then one round per level of cascade.
//!
//! The host stores a [`Commit`] in one transaction, checking that each
//! version still [`replaces`](NewVersion::replaces) the latest one, and
//! derives the link index and event rows from it.

mod build;
mod cascade;
mod error;
mod links;
mod needs;
mod phases;
mod published;
mod request;
mod type_add;
pub mod type_memo;

pub use error::{LinkFault, Unresolved, WriteError};
pub use needs::{BlobFacts, MAX_BLOB_LINKERS, Need, RecordKey, Supplied};
pub use phases::new_record_permissions;
pub use published::{PUBLISHED_TYPE_CREATED_AT_MS, PublishedType, PublishedTypeError};
pub use request::WriteRequest;
pub use type_add::TypeAddition;
pub use type_memo::TypeMemo;

use std::mem;
use std::sync::Arc;

pub(crate) use build::Types;
use needs::Fetched;
use phases::{Advance, Env, Phase};
use request::Operation;

use crate::auth::access::Access;
use crate::model::{Entity, ReceivedRecord, Record, RecordDate, RecordId, VersionHash};
use crate::schema::FoundLink;

/// The most records one write may store: the written one and every record
/// its deletion cascades to (PROTOCOL.md §4). More is
/// [`WriteError::CascadeTooLarge`].
pub const MAX_RECORDS_PER_WRITE: usize = 1_000;

/// What the host knows about the write besides the request.
#[derive(Debug, Clone)]
pub struct WriteContext {
    /// The entity of the user whose store is written: the author of the
    /// records it creates and of every version it writes.
    pub user: Entity,
    /// Who signed the request (the owner, or an app acting as `user`).
    pub access: Access,
    /// The request's time: the default `created_at` of the versions it
    /// writes, and the time of every check that depends on time.
    pub now: RecordDate,
    /// The scheduler's time: the versions are received then, or just after
    /// [`last_received_at`](Self::last_received_at).
    pub received_at: RecordDate,
    /// The latest `version.received_at` in the user's store, if any: every
    /// new version is received strictly after it.
    pub last_received_at: Option<RecordDate>,
    /// A fresh random record id, used when a create names none.
    pub fresh_id: RecordId,
}

/// What the host must do next.
#[derive(Debug)]
pub enum Step {
    /// Fetch these, then answer each, in this order, with [`Write::supply`].
    Fetch(Vec<Need>),
    /// The write is decided: the versions to store, or why it fails.
    Done(Result<Commit, WriteError>),
}

/// A decided write.
#[derive(Debug, Clone, PartialEq)]
pub enum Commit {
    /// Nothing to store; answer with this stored version. An idempotent
    /// replay (the request produces a version the store already holds), or
    /// a version received for a record the user deleted here, which stays
    /// deleted ([`Record::is_deleted_here_by`]).
    Replay(Box<Record>),
    /// Store these versions in one transaction, the written one first, then
    /// each tombstone its deletion cascaded to; answer with the written one.
    Store {
        /// The version the request wrote.
        written: Box<NewVersion>,
        /// The tombstones the deletion cascaded to.
        cascaded: Vec<NewVersion>,
    },
}

/// One version to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    /// The version, with its hash, `received_at` and `source` set.
    pub record: ReceivedRecord,
    /// Every link it holds (envelope, then content or `no_content`), as
    /// [`Schema::validate`](crate::schema::Schema::validate) found them: the
    /// rows of the link index.
    pub links: Vec<FoundLink>,
    /// The text search finds it by (empty for a tombstone).
    pub search_text: String,
    /// The latest version it replaces, `None` for a record's first version.
    /// The store writes it only if that is still the latest.
    pub replaces: Option<VersionHash>,
    /// For an update of a record the user authored, the entities the
    /// version it replaces concerned ([`recipients`](crate::service::federation::recipients)):
    /// each is notified of this version too, so that a reader it leaves
    /// out (unshared, no longer mentioned) learns that its access ended.
    pub former_audience: Vec<Entity>,
}

impl Commit {
    /// The record to answer with.
    pub fn record(&self) -> &Record {
        match self {
            Commit::Replay(record) => record,
            Commit::Store { written, .. } => &written.record,
        }
    }

    /// Whether this is a replay, with nothing to store.
    pub fn is_replay(&self) -> bool {
        matches!(self, Commit::Replay(_))
    }

    /// The versions to store, in order (none for a replay).
    pub fn versions(&self) -> impl Iterator<Item = &NewVersion> {
        let (written, cascaded) = match self {
            Commit::Replay(_) => (None, &[][..]),
            Commit::Store { written, cascaded } => (Some(&**written), &cascaded[..]),
        };
        written.into_iter().chain(cascaded)
    }

    /// [`versions`](Self::versions), taken.
    pub fn into_versions(self) -> impl Iterator<Item = NewVersion> {
        let (written, cascaded) = match self {
            Commit::Replay(_) => (None, Vec::new()),
            Commit::Store { written, cascaded } => (Some(*written), cascaded),
        };
        written.into_iter().chain(cascaded)
    }
}

/// One write request on its way to a [`Commit`].
///
/// Calling contract: call [`step`](Self::step); when it answers
/// [`Step::Fetch`], call [`supply`](Self::supply) once with one answer per
/// need, in order, then `step` again; stop at [`Step::Done`]. Calling `step`
/// again before supplying returns the same needs. Answers of the wrong
/// number or kind, or for a record other than the one asked, a `supply`
/// with nothing asked, and a `step` after `Done` all end the write with
/// [`WriteError::HostContract`].
#[derive(Debug)]
pub struct Write {
    env: Env,
    types: Types,
    phase: Phase,
    /// The needs of the last [`Step::Fetch`], until they are supplied.
    asked: Vec<Need>,
}

impl Write {
    /// Starts a write. It reads nothing yet: the first [`step`](Self::step) says what to fetch.
    pub fn new(request: WriteRequest, context: WriteContext) -> Self {
        let key = match &request.operation {
            Operation::Create(create) => {
                RecordKey::new(context.user.clone(), create.id.unwrap_or(context.fresh_id))
            }
            Operation::Receive(receive) => {
                RecordKey::new(receive.record.author.entity.clone(), receive.record.id)
            }
            Operation::Update(target, _) | Operation::Delete(target, _) => RecordKey::new(
                target
                    .entity
                    .clone()
                    .unwrap_or_else(|| context.user.clone()),
                target.record_id,
            ),
        };
        Self {
            env: Env {
                operation: request.operation,
                context,
                key,
                fetched: Fetched::default(),
                by_server: request.by_server,
            },
            types: Types::default(),
            phase: Phase::Start,
            asked: Vec::new(),
        }
    }

    /// The write, compiling the types it reads through `memo` (see
    /// [`type_memo`]): a type compiled by an earlier write is
    /// not compiled again.
    pub fn remembering(mut self, memo: Arc<TypeMemo>) -> Self {
        self.types = Types::remembering(memo);
        self
    }

    /// The record this write addresses: for a create, the user's entity and
    /// the id it gets (the body's, else the context's fresh id).
    pub fn record_key(&self) -> &RecordKey {
        &self.env.key
    }

    /// Advances the write as far as the answers so far allow.
    pub fn step(&mut self) -> Step {
        if !self.asked.is_empty() {
            return Step::Fetch(self.asked.clone());
        }
        loop {
            let phase = mem::replace(&mut self.phase, Phase::Spent);
            match self.env.advance(&mut self.types, phase) {
                Advance::Next(next) => self.phase = next,
                Advance::Ask(phase, needs) => {
                    self.phase = phase;
                    self.asked.clone_from(&needs);
                    return Step::Fetch(needs);
                }
                Advance::Done(result) => return Step::Done(result),
            }
        }
    }

    /// Answers the needs of the last [`Step::Fetch`], one answer per need in
    /// the same order (see [`Need`] for which answer each takes).
    pub fn supply(&mut self, answers: Vec<Supplied>) {
        let asked = mem::take(&mut self.asked);
        if asked.is_empty() {
            self.phase = Phase::Failed(WriteError::HostContract("supply with nothing asked"));
        } else if asked.len() != answers.len() {
            self.phase = Phase::Failed(WriteError::HostContract("not one answer per need"));
        } else if asked.iter().zip(&answers).any(|(n, a)| !n.accepts(a)) {
            self.phase = Phase::Failed(WriteError::HostContract("an answer of the wrong kind"));
        } else {
            for (need, answer) in asked.into_iter().zip(answers) {
                self.env.fetched.insert(need, answer);
            }
        }
    }
}
