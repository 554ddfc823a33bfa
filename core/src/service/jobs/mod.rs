//! Write jobs: what one request commits, and the machine a host drives to
//! commit it.
//!
//! A [`Job`] is one record write, a group of writes that stand or fall
//! together (a consent approval, a registration), or plain statements (a
//! blob row, upkeep). A host never interprets one: it starts a
//! [`WriteJob`] and answers its [`JobStep`]s, reads with rows and the
//! commit with what became of it, until the job is done. Then it applies
//! the job's [`Effects`] (open streams, the outbox, cached standings) once
//! the commit is durable.
//!
//! ```text
//! host                               core (WriteJob)
//!  start(job, at) / prepare(job) ──►
//!                                ◄── Read(statements)        rows in: supply(rows)
//!                                ◄── Decided                 (prepared) reads(), then begin(at, rows)
//!                                ◄── Commit(statements)      committed(rows) | conflicted()
//!                                ◄── Done(outcome, effects)  apply the effects once durable
//! ```
//!
//! A host that keeps a [`Resident`](crate::service::Resident) does not
//! prepare jobs: core prepares each itself and hands the host the job
//! decided ([`Jobs::commit`](crate::service::Jobs::commit)), or the job that
//! must read first ([`Jobs::decide`](crate::service::Jobs::decide)).
//!
//! Time: a write's default `created_at` is the time of the request that
//! made it ([`RecordWrite::requested_at`]); its `received_at` is the time
//! the host's scheduler commits it (`at`), or just after the store's
//! latest (PROTOCOL.md §5).

mod decide;
mod machine;
pub mod memo;
mod pending;
pub mod upkeep;

pub use machine::{Decided, Finished, JobStep, WriteJob};
pub(crate) use pending::received_bytes;

use std::fmt;

use crate::auth::access::{Access, is_type};
use crate::auth::apps::ServerKeys;
use crate::auth::register::{Registration, RegistrationError};
use crate::model::{Record, RecordDate, RecordId};
use crate::query::IndexEntry;
use crate::schema::builtin::BuiltinType;
use crate::service::User;
use crate::service::events::LiveVersion;
use crate::store::{Statement, WRITE_ATTEMPTS, WriteOrigin};
use crate::write::{WriteError, WriteRequest};

/// A record write: the request, who makes it, when, and the id a create
/// that names none takes (drawn from the request's
/// [`Fresh`](crate::service::fresh::Fresh)).
#[derive(Debug, Clone)]
pub struct RecordWrite {
    /// What the client asked for.
    pub request: WriteRequest,
    /// Who asks, and what they may do.
    pub access: Access,
    /// Where the write came from, as its events say.
    pub origin: WriteOrigin,
    /// The id of a created record that names none.
    pub fresh_id: RecordId,
    /// The time of the request: the default `created_at` of the version it
    /// writes, and of every check of the write that depends on time.
    pub requested_at: RecordDate,
}

/// What one request commits, as one atomic unit: the only kinds of write
/// there are. A host runs it as a [`WriteJob`] and matches on none of them.
#[derive(Debug, Clone)]
pub enum Job {
    /// Record writes to `user`'s store, stored together or not at all;
    /// answered with the first.
    Writes {
        /// Whose store.
        user: User,
        /// In the order they are decided; a later write sees the earlier.
        writes: Vec<RecordWrite>,
    },
    /// An app's registration in `user`'s store: its App record and, for a
    /// new app, its Credentials record and key row.
    Registration {
        /// Whose store.
        user: User,
        /// What core verified of the registration.
        registration: Box<RegistrationJob>,
    },
    /// Plain statements: a blob's row, upkeep.
    Statements(Vec<Statement>),
    /// Statements that make notifications of `user`'s outbox due sooner:
    /// the host plans its deliveries again ([`Effects::wakes_outbox`]).
    Reschedule {
        /// The row id of the user whose outbox it is.
        user: i64,
        /// The statements.
        statements: Vec<Statement>,
    },
}

impl Job {
    /// The row id of the user whose store the job writes, whose open event
    /// streams receive what it stores.
    pub fn user_id(&self) -> Option<i64> {
        match self {
            Job::Writes { user, .. } | Job::Registration { user, .. } => Some(user.id),
            Job::Reschedule { user, .. } => Some(*user),
            Job::Statements(_) => None,
        }
    }
}

/// An app's registration, ready to run: what core verified, and the
/// randomness a new app's Credentials record needs.
#[derive(Debug, Clone)]
pub struct RegistrationJob {
    /// The registration request, verified.
    pub registration: Registration,
    /// The id of a new app's Credentials record.
    pub credentials_id: RecordId,
    /// The server's keys for a new app.
    pub server_keys: ServerKeys,
    /// The time of the request.
    pub requested_at: RecordDate,
}

/// What a job stored, as its request is answered.
#[derive(Debug, Clone)]
pub enum Done {
    /// Record writes: the version the request is answered with.
    Written(Written),
    /// A registration.
    Registered(Registered),
    /// Statements ran.
    Ran,
}

/// Why a job stored nothing: the client's doing, answered with its problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    /// A record write was refused.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A registration was refused.
    #[error(transparent)]
    Registration(#[from] RegistrationError),
}

impl From<&Refused> for crate::problem::Problem {
    fn from(refused: &Refused) -> Self {
        match refused {
            Refused::Write(error) => error.into(),
            Refused::Registration(error) => error.into(),
        }
    }
}

/// A job's answer to its request: stored, or refused.
pub type JobOutcome = Result<Done, Refused>;

/// A stored version with its link-index entries.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The version, as stored.
    pub record: Record,
    /// Its link-index entries.
    pub entries: Vec<IndexEntry>,
}

/// The version a record write is answered with: the first write's (a
/// replay's is the version stored before).
#[derive(Debug, Clone)]
pub struct Written {
    /// The version, with its links.
    pub answer: Stored,
}

/// A registration's App record, and the server's key for the app.
#[derive(Debug, Clone)]
pub struct Registered {
    /// The App record's version.
    pub written: Written,
    /// The server's public key for the app (base64url).
    pub server_public_key: String,
}

/// What a committed job changes beyond its answer, as data: the host
/// applies it, in one place, once the commit is durable.
#[derive(Debug, Default)]
pub struct Effects {
    /// The row id of the user whose store the job wrote.
    pub store: Option<i64>,
    /// The versions stored, in order, as the user's open streams receive
    /// them (each with its event sequence).
    pub live: Vec<LiveVersion>,
    /// Whether the job may have queued notifications in the outbox (its
    /// versions' recipients, or their records' audiences, whose size only
    /// the commit knows): the host wakes its delivery then (federation).
    pub queues_notifications: bool,
    /// Whether the job made notifications due sooner than planned.
    pub rescheduled: bool,
    /// Whether the job may have changed an app's standing
    /// ([`standing`](crate::service::standing)): a registration (an app's
    /// key row), plain statements (which may touch anything), or a version
    /// of an App Authorization.
    pub changes_standing: bool,
    /// The records, by store, whose latest version moved after the job
    /// read it (or took it from the memo's guess): a host that remembers
    /// records' latest versions forgets these
    /// ([`MemoAt::forget_latest`](memo::MemoAt::forget_latest)).
    pub moved_latest: Vec<(i64, crate::write::RecordKey)>,
}

impl Effects {
    /// The effects of a job that stored nothing.
    pub fn none() -> Self {
        Effects::default()
    }

    /// Whether the host should plan its deliveries again: the job queued
    /// notifications, or made some due sooner.
    pub fn wakes_outbox(&self) -> bool {
        self.queues_notifications || self.rescheduled
    }

    /// Whether a version of an App Authorization is among `live`.
    fn writes_an_authorization(live: &[LiveVersion]) -> bool {
        live.iter()
            .any(|version| is_type(&version.record.type_link, BuiltinType::AppAuthorization))
    }
}

/// Why a job could not run: never the client's doing. Logged, answered as
/// `server/500-internal`. A host's own failures (a read or a commit that
/// failed) are the host's to report; these are core's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobFailure {
    /// The commit kept losing the race to concurrent writes.
    Contended,
    /// The store holds, or the host answered, what cannot be read.
    Data(String),
}

impl fmt::Display for JobFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobFailure::Contended => {
                write!(f, "{WRITE_ATTEMPTS} commits lost to concurrent writes")
            }
            JobFailure::Data(error) => write!(f, "stored data: {error}"),
        }
    }
}

impl std::error::Error for JobFailure {}

impl From<crate::store::StoredDataError> for JobFailure {
    fn from(error: crate::store::StoredDataError) -> Self {
        JobFailure::Data(error.to_string())
    }
}

impl From<crate::service::store::RowError> for JobFailure {
    fn from(error: crate::service::store::RowError) -> Self {
        JobFailure::Data(error.to_string())
    }
}
