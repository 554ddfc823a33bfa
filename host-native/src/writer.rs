//! The single writer: every write of the server goes through one task that
//! owns the one writing connection. It takes the jobs waiting at that
//! moment, runs each with core's driver inside its own savepoint of one
//! transaction (so one failure does not fail the others), commits once
//! (group commit: one fsync for the batch), and only then answers each
//! request and publishes its events. Serialising writes here also makes the
//! store's optimistic concurrency checks race-free; the schema enforces
//! them regardless.

use std::sync::Arc;

use folio_core::Resident;
use folio_core::model::RecordDate;
use folio_core::service::events::{LiveCommit, LiveVersion};
use folio_core::service::jobs::Finished;
use folio_core::store::Statement;
use folio_core::{CommitError, Decided, Effects, Job, JobOutcome, JobStep, Row, WriteJob};
use rusqlite::Connection;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::clock::Clock;
use crate::db::{self, DbError, WalRestart};
use crate::hub::Hub;
use crate::standings::Standings;

/// How many jobs one transaction takes at most.
pub const MAX_WRITES_PER_COMMIT: usize = 256;

/// Faults a test injects through `FOLIO_FAILPOINTS` (names, comma
/// separated), read once; none is set in normal use.
fn failpoint(name: &str) -> bool {
    static ARMED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    ARMED
        .get_or_init(|| {
            std::env::var("FOLIO_FAILPOINTS")
                .map(|names| names.split(',').map(str::to_owned).collect())
                .unwrap_or_default()
        })
        .iter()
        .any(|armed| armed == name)
}

/// The failpoint that makes the writer panic on its first job
/// (tests/writer_panic.rs).
const WRITER_PANIC: &str = "writer-panic";

/// The exit status of a server whose writer panicked (`EX_SOFTWARE`).
pub const WRITER_PANIC_EXIT_CODE: i32 = 70;

/// How many jobs may wait for the writer before requests are refused with 503.
pub const WRITE_QUEUE_LEN: usize = 4_096;

/// What a job came to: stored or refused, once durable; or not run.
pub type WriteResult = Result<JobOutcome, WriterError>;

/// The writer could not run or commit a job.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("database: {0}")]
    Db(#[from] DbError),
    #[error("{0}")]
    Job(String),
    #[error("the writer has stopped")]
    Stopped,
    #[error("too many writes are waiting")]
    Busy,
    /// The database's disk (or its size cap) is full: nothing was stored.
    #[error("storage full: {0}")]
    StorageFull(String),
}

impl WriterError {
    /// A database error, told apart when it says the storage is full.
    pub fn of_db(error: DbError) -> Self {
        match db::primary_code(&error) {
            Some(rusqlite::ffi::SQLITE_FULL) => WriterError::StorageFull(error.to_string()),
            _ => WriterError::Db(error),
        }
    }

    /// Whether it says the storage is full.
    fn is_storage_full(&self) -> bool {
        matches!(self, WriterError::StorageFull(_))
    }
}

/// A job waiting for the writer, and where its answer goes.
struct Submitted {
    work: Work,
    reply: oneshot::Sender<WriteResult>,
}

/// What the writer does for a job.
enum Work {
    /// Runs it whole: decides it on the store and commits.
    Run(Job),
    /// Checks what it read, stamps and commits it: decided by core
    /// through the memo, or on a read snapshot ([`on_snapshot`]).
    Commit(Box<Decided>),
}

/// Where the effects of committed jobs go: host-native's one place that
/// applies core's [`Effects`], once the group commit is durable.
pub struct Effector {
    /// The users' open event streams.
    pub hub: Arc<Hub>,
    /// Apps' standings, remembered between requests.
    pub standings: Arc<Standings>,
    /// What core keeps between requests: its memo remembers each record's
    /// latest, as stored.
    pub resident: Arc<Resident>,
    /// Wakes the outbox's delivery loop.
    pub outbox: Arc<Notify>,
}

impl Effector {
    /// Applies the effects of a group commit's stored jobs, given in the
    /// order they were stored. Each user's versions go to the hub as one
    /// [`LiveCommit`]: a group commit of many writes to one user (the queue
    /// that builds up behind a slow fsync) takes one place in each
    /// stream's queue, instead of overflowing it and ending every stream
    /// of that user at once.
    pub fn apply(&self, effects: Vec<Effects>) {
        let mut live: Vec<(i64, Vec<LiveVersion>)> = Vec::new();
        let mut moved = Vec::new();
        let (mut standings, mut outbox) = (false, false);
        for mut effects in effects {
            standings |= effects.changes_standing;
            outbox |= effects.wakes_outbox();
            moved.append(&mut effects.moved_latest);
            let Some(store) = effects.store else {
                continue;
            };
            match live.iter_mut().find(|(user, _)| *user == store) {
                Some((_, same_user)) => same_user.extend(effects.live),
                None => live.push((store, effects.live)),
            }
        }
        if standings {
            self.standings.changed();
        }
        let memo = (self.standings.epoch()).map(|epoch| self.resident.memo.at(epoch));
        if let Some(memo) = memo {
            memo.forget_latest(&moved);
        }
        for (user_id, versions) in live {
            if versions.is_empty() {
                continue;
            }
            if let Some(memo) = memo {
                memo.remember_stored(user_id, &versions);
            }
            self.hub.publish(user_id, LiveCommit::from(versions));
        }
        if outbox {
            self.outbox.notify_one();
        }
    }
}

/// A handle that sends jobs to the writer task.
#[derive(Clone)]
pub struct Writer {
    jobs: mpsc::Sender<Submitted>,
}

impl Writer {
    /// Starts the writer on `conn`, on a thread of its own: writes never
    /// wait for request handling, and the writer's statements run on the
    /// thread that owns the connection, one after another, without a hop
    /// between threads. The thread has no async runtime: it blocks on its
    /// queue, and drives each job's steps on the spot.
    pub fn start(
        conn: Connection,
        clock: Clock,
        effector: Effector,
        wal_restart: WalRestart,
    ) -> std::io::Result<(Self, std::thread::JoinHandle<()>)> {
        let (jobs, receiver) = mpsc::channel(WRITE_QUEUE_LEN);
        let thread = std::thread::Builder::new()
            .name("folio-writer".to_owned())
            .spawn(move || {
                let writer = std::panic::AssertUnwindSafe(|| {
                    run(conn, receiver, clock, effector, wal_restart);
                });
                if std::panic::catch_unwind(writer).is_err() {
                    // What was in the failed transaction was never
                    // acknowledged; the waiting requests would wait for
                    // good, or each be refused while the server looked
                    // alive. Exit for a supervisor to restart the server.
                    tracing::error!("the writer panicked; exiting so that the server restarts");
                    std::process::exit(WRITER_PANIC_EXIT_CODE);
                }
            })?;
        Ok((Writer { jobs }, thread))
    }

    /// Runs a job in the next group commit; answers once it is durable.
    /// Refused at once (busy) when [`WRITE_QUEUE_LEN`] jobs are waiting.
    pub async fn run(&self, job: Job) -> WriteResult {
        self.submit(Work::Run(job)).await
    }

    /// Commits a prepared job in the next group commit, as [`Writer::run`].
    pub async fn commit(&self, decided: Decided) -> WriteResult {
        self.submit(Work::Commit(Box::new(decided))).await
    }

    async fn submit(&self, work: Work) -> WriteResult {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .try_send(Submitted { work, reply })
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => WriterError::Busy,
                mpsc::error::TrySendError::Closed(_) => WriterError::Stopped,
            })?;
        answer.await.map_err(|_| WriterError::Stopped)?
    }

    /// Runs a job in the next group commit, waiting for room in the queue
    /// rather than refusing (the server's own jobs: upkeep).
    pub async fn run_when_ready(&self, job: Job) -> WriteResult {
        let (reply, answer) = oneshot::channel();
        let work = Work::Run(job);
        self.jobs
            .send(Submitted { work, reply })
            .await
            .map_err(|_| WriterError::Stopped)?;
        answer.await.map_err(|_| WriterError::Stopped)?
    }
}

/// A connection inside the caller's transaction, as a job runs on it: its
/// reads on the spot, each commit in a savepoint of its own. It may keep
/// the statements of each commit that succeeded (`--emit-sql`, imports).
pub struct Tx<'c> {
    conn: &'c Connection,
    /// The statements committed so far, in the order they ran, when kept.
    recorded: Option<Vec<Statement>>,
}

/// What stepping a job on a connection came to.
pub enum Driven {
    /// The job is over: its answer and its effects, to apply once durable.
    Done(Box<Finished>),
    /// A prepared job is decided: the writer begins it.
    Decided,
}

impl<'c> Tx<'c> {
    pub fn new(conn: &'c Connection) -> Self {
        Tx {
            conn,
            recorded: None,
        }
    }

    /// A transaction that keeps the statements of every commit.
    pub fn recording(conn: &'c Connection) -> Self {
        Tx {
            conn,
            recorded: Some(Vec::new()),
        }
    }

    /// The statements committed so far, in the order they ran.
    pub fn into_recorded(self) -> Vec<Statement> {
        self.recorded.unwrap_or_default()
    }

    /// The rows of a read.
    pub fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, DbError> {
        db::fetch(self.conn, statement)
    }

    /// Runs `statements` atomically (a savepoint of their own) and answers
    /// the rows of the last one.
    pub fn commit(&mut self, statements: &[Statement]) -> Result<Vec<Row>, CommitError<DbError>> {
        let conn = self.conn;
        let failed = |error: DbError| {
            let (code, message) = (db::primary_code(&error), error.to_string());
            CommitError::classify(error, code, &message)
        };
        db::control(conn, "SAVEPOINT job_commit").map_err(CommitError::Failed)?;
        let result = match statements.split_last() {
            None => Ok(Vec::new()),
            Some((last, rest)) => db::execute_all(conn, rest).and_then(|()| db::fetch(conn, last)),
        };
        match result {
            Ok(_) => db::control(conn, "RELEASE job_commit"),
            Err(_) => conn.execute_batch("ROLLBACK TO job_commit; RELEASE job_commit"),
        }
        .map_err(CommitError::Failed)?;
        let rows = result.map_err(failed)?;
        if let Some(recorded) = &mut self.recorded {
            recorded.extend_from_slice(statements);
        }
        Ok(rows)
    }

    /// Drives `job` on this connection until it is done, or decided (a
    /// prepared job, on a snapshot).
    pub fn drive(&mut self, job: &mut WriteJob<'_>) -> Result<Driven, WriterError> {
        loop {
            match job.step() {
                JobStep::Read(statements) => {
                    let rows = statements
                        .iter()
                        .map(|statement| self.fetch(statement))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(WriterError::of_db)?;
                    job.supply(rows);
                }
                JobStep::Commit(statements) => match self.commit(statements) {
                    Ok(rows) => job.committed(rows),
                    Err(CommitError::Conflict(_)) => job.conflicted(),
                    Err(CommitError::Failed(error)) => return Err(WriterError::of_db(error)),
                },
                JobStep::Decided => return Ok(Driven::Decided),
                JobStep::Done(finished) => return Ok(Driven::Done(finished)),
                JobStep::Failed(failure) => return Err(WriterError::Job(failure.to_string())),
            }
        }
    }

    /// Commits a job decided on a snapshot at `at`, inside the caller's
    /// transaction: reads what it was decided on, then begins it with
    /// the rows ([`Decided::begin`]).
    pub fn commit_decided(
        &mut self,
        decided: Decided,
        at: RecordDate,
    ) -> Result<(JobOutcome, Effects), WriterError> {
        let rows = (decided.reads().iter())
            .map(|statement| self.fetch(statement))
            .collect::<Result<Vec<_>, _>>()
            .map_err(WriterError::of_db)?;
        match self.drive(&mut decided.begin(at, rows))? {
            Driven::Done(finished) => Ok((finished.outcome, finished.effects)),
            Driven::Decided => Err(WriterError::Job("decided twice".into())),
        }
    }

    /// Runs `job` whole at `at`, inside the caller's transaction.
    pub fn run(&mut self, job: Job, at: RecordDate) -> Result<(JobOutcome, Effects), WriterError> {
        match self.drive(&mut WriteJob::start(job, at))? {
            Driven::Done(finished) => Ok((finished.outcome, finished.effects)),
            Driven::Decided => Err(WriterError::Job("a whole job stepped to decided".into())),
        }
    }
}

/// Drives a prepared `job` on a read snapshot of `conn`, a reader's
/// connection, until it is decided (or answered: a refusal, a replay).
pub fn on_snapshot(conn: &Connection, job: &mut WriteJob<'_>) -> Result<Driven, WriterError> {
    // Prepared once per connection, as the writer's are: parsing the text
    // again was 6% of preparing a write.
    db::control(conn, "BEGIN").map_err(WriterError::of_db)?;
    let driven = Tx::new(conn).drive(job);
    db::control(conn, "COMMIT").map_err(WriterError::of_db)?;
    driven
}

fn run(
    conn: Connection,
    mut jobs: mpsc::Receiver<Submitted>,
    clock: Clock,
    effector: Effector,
    wal_restart: WalRestart,
) {
    let mut batch = Vec::with_capacity(MAX_WRITES_PER_COMMIT);
    while jobs.blocking_recv_many(&mut batch, MAX_WRITES_PER_COMMIT) > 0 {
        let batch = std::mem::take(&mut batch);
        commit_batch(&conn, batch, &clock, &effector);
        if wal_restart.take() {
            let started = std::time::Instant::now();
            db::restart_wal(&conn);
            crate::metrics::METRICS.wal_restart(started.elapsed());
        }
    }
    tracing::info!("the writer stopped: no more writes");
}

/// One job of a batch, run in its savepoint, before the batch commits.
struct Ran {
    result: Result<(JobOutcome, Effects), WriterError>,
    reply: oneshot::Sender<WriteResult>,
}

fn commit_batch(conn: &Connection, batch: Vec<Submitted>, clock: &Clock, effector: &Effector) {
    let mut pending = batch.into_iter().peekable();
    while pending.peek().is_some() {
        commit_some(conn, &mut pending, clock, effector);
    }
}

/// Runs jobs from `pending` in one transaction and commits them, until the
/// jobs run out or SQLite rolls the transaction back by itself (a full
/// disk, an I/O error: it may undo a whole transaction, not just the
/// failed statement). Then nothing of the transaction is stored: its jobs
/// are answered so, and the rest start a transaction of their own.
/// Without this, the next job's `SAVEPOINT` would open a transaction of
/// its own that its `RELEASE` commits, and the final `COMMIT` would fail:
/// stored writes would be answered as failed.
fn commit_some(
    conn: &Connection,
    pending: &mut impl Iterator<Item = Submitted>,
    clock: &Clock,
    effector: &Effector,
) {
    if let Err(error) = db::control(conn, "BEGIN IMMEDIATE") {
        tracing::error!(%error, "could not begin a write transaction");
        for Submitted { reply, .. } in pending {
            let failed = WriterError::Job(format!("beginning a transaction: {error}"));
            let _ = reply.send(Err(failed));
        }
        return;
    }
    let started = std::time::Instant::now();
    // The batch's one time: each job's versions are received then, or
    // just after the latest its store holds.
    let now = clock.now();
    let mut ran = Vec::with_capacity(MAX_WRITES_PER_COMMIT);
    for Submitted { work, reply } in pending.by_ref() {
        if failpoint(WRITER_PANIC) {
            panic!("the {WRITER_PANIC} failpoint (FOLIO_FAILPOINTS)");
        }
        let result = match db::control(conn, "SAVEPOINT w") {
            Ok(()) => {
                let mut tx = Tx::new(conn);
                let result = match work {
                    Work::Run(job) => tx.run(job, now),
                    Work::Commit(decided) => tx.commit_decided(*decided, now),
                };
                let ended = match result {
                    Ok((Ok(_), _)) => db::control(conn, "RELEASE w"),
                    _ => conn.execute_batch("ROLLBACK TO w; RELEASE w"),
                };
                if let Err(error) = ended {
                    tracing::error!(%error, "could not end a savepoint");
                }
                result
            }
            Err(error) => {
                tracing::error!(%error, "could not open a savepoint");
                Err(WriterError::Job(format!("opening a savepoint: {error}")))
            }
        };
        ran.push(Ran { result, reply });
        if conn.is_autocommit() {
            tracing::error!(
                "SQLite rolled back a group commit's transaction; its writes are refused"
            );
            let full = ran
                .last()
                .is_some_and(|job| matches!(&job.result, Err(e) if e.is_storage_full()));
            let why = "the transaction was rolled back; nothing was stored";
            answer(ran, Err(Lost { full, why }), effector);
            return;
        }
    }
    let committed = db::control(conn, "COMMIT");
    crate::metrics::METRICS.commit(ran.len(), started.elapsed());
    if let Err(error) = &committed {
        tracing::error!(%error, "a group commit failed");
        let _ = conn.execute_batch("ROLLBACK");
    }
    let stored = committed.map_err(|error| Lost {
        full: db::primary_code(&error) == Some(rusqlite::ffi::SQLITE_FULL),
        why: "the group commit failed; nothing was stored",
    });
    answer(ran, stored, effector);
}

/// Why a transaction's jobs were not stored.
#[derive(Debug, Clone, Copy)]
struct Lost {
    /// Because the storage is full.
    full: bool,
    why: &'static str,
}

/// Answers the jobs of one transaction, `stored` or not, after applying
/// the effects of those stored ([`Effector::apply`]), in the order they
/// were stored. A job that was refused keeps its answer either way; one
/// that would have stored something fails with why it was [`Lost`].
fn answer(ran: Vec<Ran>, stored: Result<(), Lost>, effector: &Effector) {
    let mut effects = Vec::with_capacity(ran.len());
    let mut replies = Vec::with_capacity(ran.len());
    for Ran { result, reply } in ran {
        let result = match (stored, result) {
            (Err(lost), Ok((Ok(_), _))) if lost.full => {
                Err(WriterError::StorageFull(lost.why.to_owned()))
            }
            (Err(lost), Ok((Ok(_), _))) => Err(WriterError::Job(lost.why.to_owned())),
            (Ok(()), Ok((outcome, stored))) => {
                effects.push(stored);
                Ok(outcome)
            }
            (Err(_), Ok((outcome, _))) => Ok(outcome),
            (_, Err(error)) => Err(error),
        };
        replies.push((reply, result));
    }
    effector.apply(effects);
    for (reply, result) in replies {
        let _ = reply.send(result);
    }
}

#[cfg(test)]
mod tests {
    use folio_core::Done;
    use folio_core::service::events::StreamCaps;

    use super::*;

    fn effector(hub: Arc<Hub>) -> Effector {
        Effector {
            hub,
            standings: Arc::new(Standings::for_tests()),
            resident: Arc::new(Resident::new(
                folio_core::auth::ReplayGuard::new(RecordDate::EPOCH),
                folio_core::RateLimits::new(&folio_core::service::limits::Limits::default()),
            )),
            outbox: Arc::new(Notify::new()),
        }
    }

    fn statement(sql: &str) -> Job {
        Job::Statements(vec![Statement {
            sql: sql.to_owned(),
            params: Vec::new(),
        }])
    }

    fn submitted(job: Job) -> (Submitted, oneshot::Receiver<WriteResult>) {
        let (reply, answer) = oneshot::channel();
        (
            Submitted {
                work: Work::Run(job),
                reply,
            },
            answer,
        )
    }

    fn stored(conn: &Connection) -> Vec<i64> {
        let mut query = conn.prepare("SELECT x FROM t ORDER BY x").expect("a query");
        query
            .query_map([], |row| row.get(0))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("integers")
    }

    /// SQLite may roll back a whole transaction on a full disk or an I/O
    /// error (a job's `ROLLBACK` stands in for it here). The jobs of that
    /// transaction are answered as not stored, and each job after it is
    /// answered as what became of it: never stored and answered failed.
    #[tokio::test]
    async fn a_transaction_sqlite_rolled_back_answers_its_jobs_as_not_stored() {
        let conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch("CREATE TABLE t (x INTEGER)")
            .expect("a table");
        let hub = Arc::new(Hub::new(StreamCaps {
            per_server: None,
            per_user: None,
        }));
        let (first, first_answer) = submitted(statement("INSERT INTO t VALUES (1)"));
        let (rollback, rollback_answer) = submitted(statement("ROLLBACK"));
        let (after, after_answer) = submitted(statement("INSERT INTO t VALUES (3)"));
        let (last, last_answer) = submitted(statement("INSERT INTO t VALUES (4)"));
        commit_batch(
            &conn,
            vec![first, rollback, after, last],
            &Clock,
            &effector(hub),
        );

        assert!(conn.is_autocommit(), "no transaction is left open");
        assert_eq!(stored(&conn), [3, 4]);
        let first = first_answer.await.expect("an answer");
        assert!(
            matches!(&first, Err(WriterError::Job(reason)) if reason.contains("rolled back")),
            "{first:?}"
        );
        assert!(rollback_answer.await.expect("an answer").is_err());
        assert!(matches!(after_answer.await, Ok(Ok(Ok(Done::Ran)))));
        assert!(matches!(last_answer.await, Ok(Ok(Ok(Done::Ran)))));
    }

    /// A group commit's versions reach each user's streams as one commit
    /// per user, in the order they were stored, so that however many
    /// writes to one user a commit holds, they take one place in each
    /// stream's queue.
    #[tokio::test]
    async fn a_group_commit_publishes_one_commit_per_user_in_order() {
        use folio_core::schema::builtin::BuiltinType;
        use folio_core::service::jobs::{Stored, Written};

        let hub = Arc::new(Hub::new(StreamCaps {
            per_server: None,
            per_user: None,
        }));
        let mut alice = hub.subscribe(1, false).expect("no caps");
        let mut bob = hub.subscribe(2, false).expect("no caps");
        let record = BuiltinType::Entity.record();
        let written = |user_id: i64, seqs: &[u64]| {
            let answer = Stored {
                record: record.clone(),
                entries: Vec::new(),
            };
            let effects = Effects {
                store: Some(user_id),
                live: (seqs.iter())
                    .map(|&seq| LiveVersion::new(seq, record.clone(), Vec::new(), None))
                    .collect(),
                ..Effects::none()
            };
            (Ok(Done::Written(Written { answer })), effects)
        };
        let mut answers = Vec::new();
        let ran = [(1, &[1, 2][..]), (2, &[3]), (1, &[4])]
            .into_iter()
            .map(|(user_id, seqs)| {
                let (reply, answer) = oneshot::channel();
                answers.push(answer);
                Ran {
                    result: Ok(written(user_id, seqs)),
                    reply,
                }
            })
            .collect();
        answer(ran, Ok(()), &effector(Arc::clone(&hub)));

        let seqs = |commit: LiveCommit| commit.iter().map(|v| v.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(alice.receiver.try_recv().expect("a commit")),
            [1, 2, 4]
        );
        assert!(alice.receiver.try_recv().is_err(), "one commit for alice");
        assert_eq!(seqs(bob.receiver.try_recv().expect("a commit")), [3]);
        assert!(bob.receiver.try_recv().is_err(), "one commit for bob");
        for answer in answers {
            assert!(matches!(answer.await, Ok(Ok(Ok(Done::Written(_))))));
        }
    }

    /// A COMMIT that fails (a deferred constraint here; a failed fsync or
    /// write in production) fails every job of the group, and none is
    /// stored or acknowledged.
    #[tokio::test]
    async fn a_failed_commit_fails_the_whole_group_and_stores_none_of_it() {
        let conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; CREATE TABLE t (x INTEGER); \
             CREATE TABLE parent (id INTEGER PRIMARY KEY); \
             CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .expect("tables");
        let hub = Arc::new(Hub::new(StreamCaps {
            per_server: None,
            per_user: None,
        }));
        let (first, first_answer) = submitted(statement("INSERT INTO t VALUES (1)"));
        let (orphan, orphan_answer) = submitted(statement("INSERT INTO child VALUES (7)"));
        let (last, last_answer) = submitted(statement("INSERT INTO t VALUES (3)"));
        commit_batch(&conn, vec![first, orphan, last], &Clock, &effector(hub));

        assert!(conn.is_autocommit(), "no transaction is left open");
        assert!(stored(&conn).is_empty(), "nothing of the group is stored");
        for answer in [first_answer, orphan_answer, last_answer] {
            let answer = answer.await.expect("an answer");
            assert!(
                matches!(&answer, Err(WriterError::Job(why)) if why.contains("commit failed")),
                "{answer:?}"
            );
        }
    }
}
