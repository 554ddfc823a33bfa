//! Running write jobs against a [`Transaction`]: the one driver of
//! [`Write`] both hosts use.
//!
//! A job is one record write, a group of writes that stand or fall together
//! (a consent approval, a registration), or plain statements (a blob row).
//! The driver answers each write's needs from the store, keeps what the
//! job's earlier writes decided in a pending overlay (so a later write of
//! the same job sees them before anything is committed), and commits the
//! whole job once. A commit that loses a race to a concurrent write runs
//! the job again from the start, at most [`WRITE_ATTEMPTS`] times: a replay
//! then finds what the winner stored, and a stale parent becomes a version
//! conflict (PROTOCOL.md §5).

use std::fmt;
use std::sync::Arc;

use crate::access::Access;
use crate::apps::{ServerKeys, server_public_key};
use crate::events::LiveVersion;
use crate::federation::recipients;
use crate::model::{
    ClientId, Entity, ReceivedRecord, Record, RecordDate, RecordId, RecordSource, VersionHash,
};
use crate::query::{IndexEntry, index_entries};
use crate::register::{Registration, RegistrationError, RegistrationPlan, registration_access};
use crate::store::{
    NeedRow, NeedRows, Replaces, Statement, StoredDataError, WRITE_ATTEMPTS, WriteOrigin,
    app_credentials_sql, app_key_sql, count_received_sql, event_seq_sql, last_received_at_sql,
    latest_hash_sql, need_sql, queue_notification_sql, read_links, read_record, read_version,
    version_sql, version_statements_replacing,
};
use crate::write::{
    Commit, Need, RecordKey, Step, Supplied, Write, WriteContext, WriteError, WriteRequest,
};

use super::User;
use super::memo::{MemoAt, Remembered};
use super::store::{CommitError, Fetch, RowError, RowExt, Transaction, version_row};

/// A record write: the request, who makes it, and the id a create that
/// names none takes (drawn from the request's [`Fresh`](crate::fresh::Fresh)).
#[derive(Debug, Clone)]
pub struct RecordWrite {
    pub request: WriteRequest,
    pub access: Access,
    pub origin: WriteOrigin,
    pub fresh_id: RecordId,
}

/// What one request commits, as one atomic unit: the only kinds of write
/// there are. A host runs it with [`Job::run`] and matches on none of them.
#[derive(Debug, Clone)]
pub enum Job {
    /// Record writes to `user`'s store, stored together or not at all;
    /// answered with the first.
    Writes {
        user: User,
        writes: Vec<RecordWrite>,
    },
    /// An app's registration in `user`'s store: its App record and, for a
    /// new app, its Credentials record and key row.
    Registration {
        user: User,
        registration: Box<RegistrationJob>,
    },
    /// Plain statements: a blob's row, upkeep.
    Statements(Vec<Statement>),
}

/// What a job stored.
#[derive(Debug, Clone)]
pub enum Done {
    Written(Written),
    Registered(Registered),
    /// Statements ran.
    Ran,
}

/// Why a job stored nothing: the client's doing, answered with its problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    Write(#[from] WriteError),
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

impl Job {
    /// Runs the job against `tx` at `now` (the time at which the host's
    /// scheduler runs it: every version it stores is received then, or
    /// just after the store's latest). Commits once, or not at all; a
    /// commit that loses a race runs the job again, at most
    /// [`WRITE_ATTEMPTS`] times.
    pub async fn run<T: Transaction>(
        &self,
        tx: &mut T,
        now: RecordDate,
    ) -> Result<JobOutcome, JobFailure<T::Error>> {
        Ok(match self {
            Job::Writes { user, writes } => run_writes(tx, user, writes, now)
                .await?
                .map(Done::Written)
                .map_err(Refused::from),
            Job::Registration { user, registration } => {
                run_registration(tx, user, registration, now)
                    .await?
                    .map(Done::Registered)
                    .map_err(Refused::from)
            }
            Job::Statements(statements) => {
                run_statements(tx, statements).await?;
                Ok(Done::Ran)
            }
        })
    }
}

impl Job {
    /// The row id of the user whose store the job writes, whose open event
    /// streams receive what it stores.
    pub fn user_id(&self) -> Option<i64> {
        match self {
            Job::Writes { user, .. } | Job::Registration { user, .. } => Some(user.id),
            Job::Statements(_) => None,
        }
    }
}

impl Done {
    /// How many notifications the job queued in the outbox.
    pub fn queued_notifications(&self) -> usize {
        match self {
            Done::Written(written) => written.notifications,
            Done::Registered(registered) => registered.written.notifications,
            Done::Ran => 0,
        }
    }

    /// Whether committing this may have changed an app's standing
    /// ([`standing`](super::standing)): a registration (an app's key row),
    /// plain statements (which may touch anything), or a version of an App
    /// Authorization.
    pub fn changes_standing(&self) -> bool {
        match self {
            Done::Written(written) => written.versions.iter().any(|(stored, _)| {
                crate::access::is_type(
                    &stored.record.type_link,
                    crate::builtin::BuiltinType::AppAuthorization,
                )
            }),
            Done::Registered(_) | Done::Ran => true,
        }
    }

    /// Takes the versions the job stored out of it, as the live events the
    /// user's open streams receive, in the order they were stored. The
    /// answer to the request stays.
    pub fn take_live_versions(&mut self) -> Vec<LiveVersion> {
        let written = match self {
            Done::Written(written) => written,
            Done::Registered(registered) => &mut registered.written,
            Done::Ran => return Vec::new(),
        };
        let client_id = written.client_id;
        std::mem::take(&mut written.versions)
            .into_iter()
            .map(|(stored, seq)| LiveVersion::new(seq, stored.record, stored.entries, client_id))
            .collect()
    }
}

/// A stored version with its link-index entries.
#[derive(Debug, Clone)]
pub struct Stored {
    pub record: Record,
    pub entries: Vec<IndexEntry>,
}

/// A committed job's versions, for its answer and its events.
#[derive(Debug, Clone)]
pub struct Written {
    /// Every version stored, each with its event sequence, in order (none
    /// for a replay).
    pub versions: Vec<(Stored, u64)>,
    /// The version the request is answered with: the first write's.
    pub answer: Stored,
    /// The client that wrote, for subscribers that skip their own writes.
    pub client_id: Option<ClientId>,
    /// How many notifications the job queued in the outbox (federation):
    /// the host wakes its delivery loop when there are some.
    pub notifications: usize,
}

/// A registration's App record, and the server's key for the app.
#[derive(Debug, Clone)]
pub struct Registered {
    pub written: Written,
    pub server_public_key: String,
}

/// An app's registration, ready to run: what core verified, and the
/// randomness a new app's Credentials record needs.
#[derive(Debug, Clone)]
pub struct RegistrationJob {
    pub registration: Registration,
    pub credentials_id: RecordId,
    pub server_keys: ServerKeys,
}

/// Why a job could not run: never the client's doing. Logged, answered as
/// `server/500-internal`.
#[derive(Debug)]
pub enum JobFailure<E> {
    /// The store failed.
    Store(E),
    /// The store kept losing the race to concurrent writes.
    Contended(E),
    /// The store holds, or the host's driver returned, what cannot be read.
    Data(String),
}

impl<E: fmt::Display> fmt::Display for JobFailure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobFailure::Store(error) => write!(f, "store: {error}"),
            JobFailure::Contended(error) => {
                write!(
                    f,
                    "{WRITE_ATTEMPTS} commits lost to concurrent writes: {error}"
                )
            }
            JobFailure::Data(error) => write!(f, "stored data: {error}"),
        }
    }
}

impl<E> From<StoredDataError> for JobFailure<E> {
    fn from(error: StoredDataError) -> Self {
        JobFailure::Data(error.to_string())
    }
}

impl<E> From<RowError> for JobFailure<E> {
    fn from(error: RowError) -> Self {
        JobFailure::Data(error.to_string())
    }
}

/// What a job came to: refused (the client's doing), or written.
pub type JobResult<T, R, E> = Result<Result<T, R>, JobFailure<E>>;

/// Runs record writes as one job: all are stored, or none (the first
/// refusal refuses the job). Answers with the first write's version.
async fn run_writes<T: Transaction>(
    tx: &mut T,
    user: &User,
    writes: &[RecordWrite],
    now: RecordDate,
) -> JobResult<Written, WriteError, T::Error> {
    let mut lost = Lost::default();
    while lost.another_attempt() {
        let mut job = Pending::new(user);
        let answered = match job.writes(tx, writes, now).await? {
            Ok(answered) => answered,
            Err(error) => return Ok(Err(error)),
        };
        match job.commit(tx, answered).await? {
            Ok(written) => return Ok(Ok(written)),
            Err(conflict) => lost.record(conflict),
        }
    }
    Err(lost.failure())
}

/// Runs a registration: reads the key the app id is registered with, then
/// stores what [`Registration::plan`] makes of it.
async fn run_registration<T: Transaction>(
    tx: &mut T,
    user: &User,
    job: &RegistrationJob,
    now: RecordDate,
) -> JobResult<Registered, RegistrationError, T::Error> {
    let registration = &job.registration;
    // Both records name their ids: the App record the app's, the
    // Credentials record the job's.
    let write = |request: WriteRequest, fresh_id: RecordId| RecordWrite {
        request,
        access: registration_access(&user.entity),
        origin: WriteOrigin::default(),
        fresh_id,
    };
    let mut lost = Lost::default();
    while lost.another_attempt() {
        let key_rows = tx
            .fetch(&app_key_sql(user.id, &registration.app_id))
            .await
            .map_err(JobFailure::Store)?;
        let registered = match key_rows.first() {
            Some(row) => Some(row.text(0)?.to_owned()),
            None => None,
        };
        let plan = registration.plan(
            &user.entity,
            user.id,
            registered.as_deref(),
            job.credentials_id,
            &job.server_keys,
        );
        let mut pending = Pending::new(user);
        let (answered, server_public_key) = match plan {
            Err(error) => return Ok(Err(error)),
            Ok(RegistrationPlan::New(new)) => {
                let new = *new;
                let writes = [
                    write(new.app, registration.app_id),
                    write(new.credentials, job.credentials_id),
                ];
                let answered = match pending.writes(tx, &writes, now).await? {
                    Ok(answered) => answered,
                    Err(error) => return Ok(Err(error.into())),
                };
                pending.extra.push(new.app_row);
                (answered, new.server_public_key)
            }
            Ok(RegistrationPlan::Renewal { app }) => {
                let answered = match pending
                    .writes(tx, &[write(*app, registration.app_id)], now)
                    .await?
                {
                    Ok(answered) => answered,
                    Err(error) => return Ok(Err(error.into())),
                };
                let statement = app_credentials_sql(user.id, &user.entity, &registration.app_id);
                let rows = tx.fetch(&statement).await.map_err(JobFailure::Store)?;
                let key = match rows.first() {
                    Some(row) => {
                        let (record, links) = version_row(row)?;
                        server_public_key(&read_version(&record, &links)?.0).map(str::to_owned)
                    }
                    None => None,
                };
                let key = key.ok_or_else(|| {
                    JobFailure::Data("a registered app has no Credentials record".into())
                })?;
                (answered, key)
            }
        };
        match pending.commit(tx, answered).await? {
            Ok(written) => {
                return Ok(Ok(Registered {
                    written,
                    server_public_key,
                }));
            }
            Err(conflict) => lost.record(conflict),
        }
    }
    Err(lost.failure())
}

/// Runs statements as one job (a blob's row, maintenance).
async fn run_statements<T: Transaction>(
    tx: &mut T,
    statements: &[Statement],
) -> Result<(), JobFailure<T::Error>> {
    let mut lost = Lost::default();
    while lost.another_attempt() {
        match tx.commit(statements).await {
            Ok(_) => return Ok(()),
            Err(CommitError::Conflict(error)) => lost.record(error),
            Err(CommitError::Failed(error)) => return Err(JobFailure::Store(error)),
        }
    }
    Err(lost.failure())
}

/// The commits a job lost to concurrent writes.
struct Lost<E> {
    attempts: usize,
    last: Option<E>,
}

impl<E> Default for Lost<E> {
    fn default() -> Self {
        Lost {
            attempts: 0,
            last: None,
        }
    }
}

impl<E> Lost<E> {
    /// Whether the job may run (again): at most [`WRITE_ATTEMPTS`] times.
    fn another_attempt(&mut self) -> bool {
        self.attempts += 1;
        self.attempts <= WRITE_ATTEMPTS
    }

    fn record(&mut self, conflict: E) {
        self.last = Some(conflict);
    }

    fn failure(self) -> JobFailure<E> {
        match self.last {
            Some(error) => JobFailure::Contended(error),
            None => JobFailure::Data("no write attempt ran".into()),
        }
    }
}

/// One job's decided writes, not yet committed.
#[derive(Debug)]
struct Pending<'u> {
    user: &'u User,
    /// What the job's writes store, in order: the overlay later writes of
    /// the job read through.
    versions: Vec<PendingVersion>,
    /// Statements that follow the versions' (a registration's key row).
    extra: Vec<Statement>,
    last_received_at: Option<RecordDate>,
    /// The client of the job's first write, for its events.
    client_id: Option<ClientId>,
    /// What the job read from the store, with what it found: the read set
    /// a prepared job's commit checks ([`Prepared`]).
    reads: Vec<Read>,
    /// The index entries, as stored, of the latest versions the job read,
    /// by hash: what a version written over one of them replaces.
    read_entries: Vec<(VersionHash, Arc<[IndexEntry]>)>,
    /// Versions and types remembered between jobs, when the host keeps them.
    memo: Option<MemoAt<'u>>,
    /// Whether the commit stamps `received_at` afresh ([`restamp`], a
    /// prepared job's): then the store's latest is not read to decide.
    stamped_at_commit: bool,
}

/// A version a job stores, as decided.
#[derive(Debug, Clone)]
struct PendingVersion {
    record: ReceivedRecord,
    entries: Vec<IndexEntry>,
    /// The parent's index entries, when the job read them: then the link
    /// index changes by the difference alone
    /// ([`version_statements_replacing`]).
    replaced: Option<Arc<[IndexEntry]>>,
    /// Its record's first stored version: it replaces nothing.
    first: bool,
    origin: WriteOrigin,
    /// The entities to notify of it (federation): queued in the outbox in
    /// the same commit.
    recipients: Vec<Entity>,
    /// A version another server notified: the source it came with and its
    /// size as stored, counted in the user's received usage in the same
    /// commit (the quotas of `Limits::received_from_*`).
    received: Option<(RecordSource, u64)>,
}

/// A job's first answer: a replay's stored version, or the first version
/// the job stores.
enum Answered {
    Replay(Box<Stored>),
    Stored,
}

impl<'u> Pending<'u> {
    fn new(user: &'u User) -> Self {
        Pending {
            user,
            versions: Vec::new(),
            extra: Vec::new(),
            last_received_at: None,
            client_id: None,
            reads: Vec::new(),
            read_entries: Vec::new(),
            memo: None,
            stamped_at_commit: false,
        }
    }

    /// Reads versions and compiles types through `memo`.
    fn remembering(mut self, memo: Option<MemoAt<'u>>) -> Self {
        self.memo = memo;
        self
    }

    /// Decides each write in turn; the first refusal ends the job.
    async fn writes<T: Fetch>(
        &mut self,
        tx: &mut T,
        writes: &[RecordWrite],
        now: RecordDate,
    ) -> Result<Result<Answered, WriteError>, JobFailure<T::Error>> {
        let mut first = None;
        self.client_id = writes.first().and_then(|write| write.origin.client_id);
        for write in writes {
            let answered = match self.write(tx, write, now).await? {
                Ok(answered) => answered,
                Err(error) => return Ok(Err(error)),
            };
            first.get_or_insert(answered);
        }
        first
            .map(Ok)
            .ok_or_else(|| JobFailure::Data("a job without writes".into()))
    }

    async fn write<T: Fetch>(
        &mut self,
        tx: &mut T,
        job: &RecordWrite,
        now: RecordDate,
    ) -> Result<Result<Answered, WriteError>, JobFailure<T::Error>> {
        let user_id = self.user.id;
        // A prepared job's versions are stamped again by its commit, after
        // the store's latest then: reading it now would decide nothing.
        let stored_last = match self.stamped_at_commit {
            true => None,
            false => stored_last_received_at(tx, user_id).await?,
        };
        let context = WriteContext {
            user: self.user.entity.clone(),
            access: job.access.clone(),
            now,
            last_received_at: stored_last.max(self.last_received_at),
            fresh_id: job.fresh_id,
        };
        let mut write = Write::new(job.request.clone(), context);
        if let Some(memo) = self.memo {
            write = write.remembering(memo.types().clone());
        }
        let commit = loop {
            match write.step() {
                Step::Fetch(needs) => {
                    let mut answers = Vec::with_capacity(needs.len());
                    for need in &needs {
                        answers.push(self.answer(tx, need, now).await?);
                    }
                    write.supply(answers);
                }
                Step::Done(Ok(commit)) => break commit,
                Step::Done(Err(error)) => return Ok(Err(error)),
            }
        };
        if let Commit::Replay(record) = &commit {
            // Nothing to store; answer with the stored version and its links.
            let statement = version_sql(
                user_id,
                &record.author.entity,
                &record.id,
                &record.version.hash,
            );
            let rows = tx.fetch(&statement).await.map_err(JobFailure::Store)?;
            let (record, entries) = match rows.first() {
                Some(row) => {
                    let (record, links) = version_row(row)?;
                    read_version(&record, &links)?
                }
                None => ((**record).clone(), Vec::new()),
            };
            return Ok(Ok(Answered::Replay(Box::new(Stored { record, entries }))));
        }
        for version in commit.into_versions() {
            let received_at = version.record.version_received_at();
            self.last_received_at = self.last_received_at.max(Some(received_at));
            let replaced =
                (version.record.version.parent_hash).and_then(|parent| self.entries_of(&parent));
            let recipients = recipients(&self.user.entity, version.record.record(), &version.links);
            let received = job
                .request
                .received_source()
                .filter(|source| source.is_notification())
                .map(|source| (source, received_bytes(version.record.record())));
            self.versions.push(PendingVersion {
                received,
                entries: index_entries(&version.links),
                replaced,
                first: version.replaces.is_none(),
                record: version.record,
                origin: job.origin,
                recipients,
            });
        }
        Ok(Ok(Answered::Stored))
    }

    /// The index entries of version `hash`, if the job wrote or read it:
    /// a version the job wrote is its record's latest in the job's
    /// transaction, and one it read was checked to be still the latest.
    fn entries_of(&self, hash: &VersionHash) -> Option<Arc<[IndexEntry]>> {
        let written = self.versions.iter().rev();
        match written
            .map(|pending| (pending.record.version.hash, &pending.entries))
            .find(|(written, _)| written == hash)
        {
            Some((_, entries)) => Some(entries.as_slice().into()),
            None => (self.read_entries.iter())
                .find(|(read, _)| read == hash)
                .map(|(_, entries)| Arc::clone(entries)),
        }
    }

    /// A need's answer: from the job's own writes when they decide it,
    /// else from the store.
    async fn answer<T: Fetch>(
        &mut self,
        tx: &mut T,
        need: &Need,
        now: RecordDate,
    ) -> Result<Supplied, JobFailure<T::Error>> {
        let pending = |pick: &dyn Fn(&Record) -> bool| {
            self.versions
                .iter()
                .rev()
                .find(|pending| pick(pending.record.record()))
                .map(|pending| Supplied::Record(Some(Arc::new(pending.record.record().clone()))))
        };
        let overlay = match need {
            Need::Latest(key) => {
                pending(&|r| r.id == key.record_id && r.author.entity == key.entity)
            }
            Need::Version { record, hash } => pending(&|r| {
                r.id == record.record_id
                    && r.author.entity == record.entity
                    && r.version.hash == *hash
            }),
            _ => None,
        };
        if let Some(answer) = overlay {
            return Ok(answer);
        }
        let Fetched { answer, entries } =
            fetch_need(tx, self.user.id, need, now, self.memo).await?;
        if let (Need::Latest(_), Supplied::Record(Some(found)), Some(entries)) =
            (need, &answer, entries)
        {
            self.read_entries.push((found.version.hash, entries));
        }
        self.reads.extend(Read::of(need, &answer));
        Ok(match (need, answer) {
            // A dependant this job already changed is seen as changed, and
            // one it already deleted is no dependant any more.
            (Need::Dependants(_), Supplied::Records(records)) => Supplied::Records(
                records
                    .into_iter()
                    .filter_map(|record| {
                        let latest = self
                            .versions
                            .iter()
                            .rev()
                            .map(|pending| pending.record.record())
                            .find(|stored| {
                                stored.id == record.id
                                    && stored.author.entity == record.author.entity
                            })
                            .map_or(record, |stored| stored.clone());
                        (!latest.is_tombstone()).then_some(latest)
                    })
                    .collect(),
            ),
            (_, answer) => answer,
        })
    }

    /// Commits the job: `Ok(Err(conflict))` when a concurrent write won.
    async fn commit<T: Transaction>(
        self,
        tx: &mut T,
        answered: Answered,
    ) -> Result<Result<Written, T::Error>, JobFailure<T::Error>> {
        let answer = match answered {
            Answered::Replay(stored) if self.versions.is_empty() && self.extra.is_empty() => {
                return Ok(Ok(Written {
                    versions: Vec::new(),
                    answer: *stored,
                    client_id: None,
                    notifications: 0,
                }));
            }
            Answered::Replay(stored) => *stored,
            Answered::Stored => self
                .versions
                .first()
                .map(PendingVersion::to_stored)
                .ok_or_else(|| JobFailure::Data("a stored write without versions".into()))?,
        };
        let mut statements: Vec<Statement> = self
            .versions
            .iter()
            .flat_map(|version| {
                let replaces = match (version.first, version.replaced.as_deref()) {
                    (true, _) => Replaces::Nothing,
                    (false, Some(entries)) => Replaces::Read(entries),
                    (false, None) => Replaces::Unread,
                };
                version_statements_replacing(
                    self.user.id,
                    &version.record,
                    &version.entries,
                    replaces,
                    version.origin,
                )
            })
            .collect();
        let notifications = statements.len();
        statements.extend(self.versions.iter().flat_map(|version| {
            let record = version.record.record();
            let queued_at = version.record.version_received_at().unix_millis();
            version.recipients.iter().map(move |recipient| {
                queue_notification_sql(
                    self.user.id,
                    recipient,
                    &record.id,
                    &record.version.hash,
                    queued_at,
                )
            })
        }));
        let notifications = statements.len() - notifications;
        statements.extend(self.versions.iter().filter_map(|version| {
            let (source, bytes) = version.received?;
            Some(count_received_sql(self.user.id, source, bytes))
        }));
        statements.extend(self.extra);
        statements.push(event_seq_sql(self.user.id));
        let rows = match tx.commit(&statements).await {
            Ok(rows) => rows,
            Err(CommitError::Conflict(error)) => return Ok(Err(error)),
            Err(CommitError::Failed(error)) => return Err(JobFailure::Store(error)),
        };
        let latest = match rows.first() {
            Some(row) => row.integer(0)?,
            None => return Err(JobFailure::Data("a user without an event sequence".into())),
        };
        // The job's events took the last sequences, one per version, in order.
        let count = i64::try_from(self.versions.len()).unwrap_or(i64::MAX);
        let first = latest.saturating_sub(count - 1);
        let versions = self
            .versions
            .into_iter()
            .zip(first..)
            .map(|(version, seq)| (version.stored(), u64::try_from(seq).unwrap_or_default()))
            .collect();
        Ok(Ok(Written {
            versions,
            answer,
            client_id: self.client_id,
            notifications,
        }))
    }
}

/// The size a received version counts for against the quotas: its JSON,
/// as served and stored.
pub fn received_bytes(record: &Record) -> u64 {
    serde_json::to_vec(record).map_or(u64::MAX, |json| json.len() as u64)
}

impl PendingVersion {
    /// The version as stored, copied: the answer, while the version itself
    /// goes on to its event.
    fn to_stored(&self) -> Stored {
        Stored {
            record: self.record.record().clone(),
            entries: self.entries.clone(),
        }
    }

    fn stored(self) -> Stored {
        Stored {
            record: self.record.into_record(),
            entries: self.entries,
        }
    }
}

/// The latest `version.received_at` in the user's store, if any.
async fn stored_last_received_at<T: Fetch>(
    tx: &mut T,
    user_id: i64,
) -> Result<Option<RecordDate>, JobFailure<T::Error>> {
    let rows = tx
        .fetch(&last_received_at_sql(user_id))
        .await
        .map_err(JobFailure::Store)?;
    let ticks = match rows.first() {
        Some(row) => row.optional_integer(0)?,
        None => None,
    };
    Ok(ticks.and_then(|ticks| RecordDate::from_unix_ticks(ticks).ok()))
}

/// The hash of `record`'s latest version, if the store holds the record.
async fn latest_hash<T: Fetch>(
    tx: &mut T,
    user_id: i64,
    record: &RecordKey,
) -> Result<Option<VersionHash>, JobFailure<T::Error>> {
    let statement = latest_hash_sql(user_id, &record.entity, &record.record_id);
    let rows = tx.fetch(&statement).await.map_err(JobFailure::Store)?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let hash = row.text(0)?.parse().map_err(|_| RowError {
        column: 0,
        expected: "a version hash",
    })?;
    Ok(Some(hash))
}

/// A need's answer, with the index entries of the version it found, when
/// the store gave them (for [`Need::Latest`]).
struct Fetched {
    answer: Supplied,
    entries: Option<Arc<[IndexEntry]>>,
}

impl From<Supplied> for Fetched {
    fn from(answer: Supplied) -> Self {
        Fetched {
            answer,
            entries: None,
        }
    }
}

/// A need's answer from the store. Through `memo`, a version is read and
/// parsed once: an exact version is answered from it when it remembers it
/// (a stored version never changes), and a record's latest version when it
/// remembers the version the record's row names; a version read is then
/// remembered.
async fn fetch_need<T: Fetch>(
    tx: &mut T,
    user_id: i64,
    need: &Need,
    now: RecordDate,
    memo: Option<MemoAt<'_>>,
) -> Result<Fetched, JobFailure<T::Error>> {
    let Some(memo) = memo else {
        return fetch_need_rows(tx, user_id, need, now).await;
    };
    let (record, hash) = match need {
        Need::Version { record, hash } => (record, *hash),
        Need::Latest(record) => match latest_hash(tx, user_id, record).await? {
            Some(hash) => (record, hash),
            None => return Ok(Supplied::Record(None).into()),
        },
        _ => return fetch_need_rows(tx, user_id, need, now).await,
    };
    let found = match memo.version(user_id, record, &hash) {
        Some(found) => found,
        None => {
            let statement = version_sql(user_id, &record.entity, &record.record_id, &hash);
            let rows = tx.fetch(&statement).await.map_err(JobFailure::Store)?;
            let Some(row) = rows.first() else {
                return Ok(Supplied::Record(None).into());
            };
            let (text, links) = (row.text(0)?, row.text(1)?);
            let found = Remembered {
                record: Arc::new(read_record(text)?),
                entries: read_links(links)?.into(),
            };
            memo.remember_version(user_id, &found, text.len() + links.len());
            found
        }
    };
    Ok(Fetched {
        answer: Supplied::Record(Some(found.record)),
        entries: Some(found.entries),
    })
}

/// A need's answer from the rows its statement reads.
async fn fetch_need_rows<T: Fetch>(
    tx: &mut T,
    user_id: i64,
    need: &Need,
    now: RecordDate,
) -> Result<Fetched, JobFailure<T::Error>> {
    let (statement, shape) = need_sql(user_id, need, now);
    let rows = tx.fetch(&statement).await.map_err(JobFailure::Store)?;
    let rows = rows
        .iter()
        .map(|row| {
            Ok(match shape {
                NeedRows::Record | NeedRows::Records => {
                    let (record, links) = version_row(row)?;
                    NeedRow::Version { record, links }
                }
                NeedRows::Known => NeedRow::Integers(vec![row.integer(0)?]),
                NeedRows::Blob => NeedRow::Integers(vec![row.integer(0)?, row.integer(1)?]),
            })
        })
        .collect::<Result<Vec<_>, RowError>>()?;
    let entries = match (need, rows.first()) {
        (Need::Latest(_), Some(NeedRow::Version { links, .. })) => Some(read_links(links)?.into()),
        _ => None,
    };
    Ok(Fetched {
        answer: shape.answer(rows)?,
        entries,
    })
}

/// A job decided on a read snapshot of the store, away from the writer:
/// every write's transition (parsing, its type, validation, link checks,
/// the version hash) already ran. The writer only checks that what the
/// job read is still what the store holds, stamps `received_at`, and
/// commits ([`Prepared::commit`]).
#[derive(Debug)]
pub struct Prepared {
    job: Job,
    user: User,
    versions: Vec<PendingVersion>,
    extra: Vec<Statement>,
    client_id: Option<ClientId>,
    reads: Vec<Read>,
    answered: PreparedAnswer,
}

/// One read of a prepared job, as its commit checks it again. A stored
/// version never changes, so one found is not kept.
#[derive(Debug)]
enum Read {
    /// A record's latest version, by its hash (`None`: no such record).
    Latest(RecordKey, Option<VersionHash>),
    /// Any other need, with its whole answer.
    Answer(Need, Supplied),
}

impl Read {
    /// The read to check again for `need`, answered `answer`, if any.
    fn of(need: &Need, answer: &Supplied) -> Option<Read> {
        match (need, answer) {
            (Need::Version { .. }, Supplied::Record(Some(_))) => None,
            (Need::Latest(key), Supplied::Record(found)) => Some(Read::Latest(
                key.clone(),
                found.as_ref().map(|record| record.version.hash),
            )),
            (need, answer) => Some(Read::Answer(need.clone(), answer.clone())),
        }
    }
}

#[derive(Debug)]
enum PreparedAnswer {
    Replay(Box<Stored>),
    Stored,
}

/// What preparing a job came to.
#[derive(Debug)]
pub enum Preparation {
    /// Answered without the writer: refused on the snapshot (as if the
    /// request had come at that moment), or a replay of what is stored.
    Answered(Box<JobOutcome>),
    /// Decided: the writer commits it.
    Decided(Box<Prepared>),
    /// A job the writer runs whole (registrations, plain statements).
    Whole(Job),
}

impl Job {
    /// Decides a job on `snapshot`, a consistent read of the store, at
    /// `now` ([`Preparation`]), reading versions and compiling types
    /// through `memo` when the host keeps one. Record writes are decided
    /// here; the other jobs are left to the writer.
    pub async fn prepare<F: Fetch>(
        self,
        snapshot: &mut F,
        now: RecordDate,
        memo: Option<MemoAt<'_>>,
    ) -> Result<Preparation, JobFailure<F::Error>> {
        let Job::Writes { user, writes } = &self else {
            return Ok(Preparation::Whole(self));
        };
        let mut pending = Pending {
            stamped_at_commit: true,
            ..Pending::new(user).remembering(memo)
        };
        let answered = match pending.writes(snapshot, writes, now).await? {
            Ok(answered) => answered,
            Err(error) => {
                return Ok(Preparation::Answered(Box::new(Err(Refused::Write(error)))));
            }
        };
        let answered = match answered {
            // A replay stores nothing: its version is stored for good.
            Answered::Replay(stored) if pending.versions.is_empty() => {
                return Ok(Preparation::Answered(Box::new(Ok(Done::Written(
                    Written {
                        versions: Vec::new(),
                        answer: *stored,
                        client_id: None,
                        notifications: 0,
                    },
                )))));
            }
            Answered::Replay(stored) => PreparedAnswer::Replay(stored),
            Answered::Stored => PreparedAnswer::Stored,
        };
        let Pending {
            versions,
            extra,
            client_id,
            reads,
            ..
        } = pending;
        let user = user.clone();
        Ok(Preparation::Decided(Box::new(Prepared {
            job: self,
            user,
            versions,
            extra,
            client_id,
            reads,
            answered,
        })))
    }
}

impl Prepared {
    /// The user whose store the job writes.
    pub fn user_id(&self) -> i64 {
        self.user.id
    }

    /// Commits the job in the writer's transaction `tx` at `now`: if every
    /// read still holds, its versions are received at `now` (or just after
    /// the store's latest) and stored; if one changed since the snapshot,
    /// the job runs whole here instead ([`Job::run`]), which decides it
    /// again on what the store holds now.
    pub async fn commit<T: Transaction>(
        self,
        tx: &mut T,
        now: RecordDate,
    ) -> Result<JobOutcome, JobFailure<T::Error>> {
        if !self.reads_hold(tx, now).await? {
            return self.job.run(tx, now).await;
        }
        let last = stored_last_received_at(tx, self.user.id).await?;
        let Prepared {
            job,
            user,
            mut versions,
            extra,
            client_id,
            answered,
            ..
        } = self;
        restamp(&mut versions, last, now);
        let pending = Pending {
            user: &user,
            versions,
            extra,
            last_received_at: None,
            client_id,
            reads: Vec::new(),
            read_entries: Vec::new(),
            memo: None,
            stamped_at_commit: true,
        };
        let answered = match answered {
            PreparedAnswer::Replay(stored) => Answered::Replay(stored),
            PreparedAnswer::Stored => Answered::Stored,
        };
        match pending.commit(tx, answered).await? {
            Ok(written) => Ok(Ok(Done::Written(written))),
            // The schema refused it: a write the checks did not see won.
            Err(_) => job.run(tx, now).await,
        }
    }

    /// Whether everything the job read is still what the store holds.
    async fn reads_hold<T: Fetch>(
        &self,
        tx: &mut T,
        now: RecordDate,
    ) -> Result<bool, JobFailure<T::Error>> {
        for read in &self.reads {
            let holds = match read {
                Read::Latest(key, hash) => latest_hash(tx, self.user.id, key).await? == *hash,
                Read::Answer(need, found) => {
                    fetch_need(tx, self.user.id, need, now, None).await?.answer == *found
                }
            };
            if !holds {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Receives a job's versions, in order, at `now` or just after the
/// previous one (the first just after `last`, the store's latest). A record
/// whose `received_at` one of them set (its first version) takes that
/// version's new date.
fn restamp(versions: &mut [PendingVersion], last: Option<RecordDate>, now: RecordDate) {
    let mut previous = last;
    let mut moved: Vec<(RecordDate, RecordDate)> = Vec::with_capacity(versions.len());
    for version in versions {
        let at = RecordDate::received_after(now, previous);
        let old = version.record.version_received_at();
        moved.push((old, at));
        let first = moved
            .iter()
            .find(|(old, _)| *old == version.record.received_at())
            .map(|(_, new)| *new);
        version.record.restamp(at, first);
        previous = Some(at);
    }
}
