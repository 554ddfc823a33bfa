//! The single writer: every write of the server goes through one task that
//! owns the one writing connection. It takes the jobs waiting at that
//! moment, runs each with core's driver inside its own savepoint of one
//! transaction (so one failure does not fail the others), commits once
//! (group commit: one fsync for the batch), and only then answers each
//! request and publishes its events. Serialising writes here also makes the
//! store's optimistic concurrency checks race-free; the schema enforces
//! them regardless.

use std::sync::Arc;

use folio_core::events::{LiveCommit, LiveVersion};
use folio_core::store::Statement;
use folio_core::{CommitError, Fetch, Job, JobFailure, JobOutcome, Prepared, Row, Transaction};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

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

impl From<JobFailure<DbError>> for WriterError {
    fn from(failure: JobFailure<DbError>) -> Self {
        match failure {
            JobFailure::Store(error) => WriterError::of_db(error),
            other => WriterError::Job(other.to_string()),
        }
    }
}

impl WriterError {
    /// A database error, told apart when it says the storage is full.
    fn of_db(error: DbError) -> Self {
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
    /// Checks what it read, stamps and commits it: decided on a read
    /// snapshot by the request (see `App::run` in `host.rs`).
    Commit(Box<Prepared>),
}

impl Work {
    fn user_id(&self) -> Option<i64> {
        match self {
            Work::Run(job) => job.user_id(),
            Work::Commit(prepared) => Some(prepared.user_id()),
        }
    }
}

/// A handle that sends jobs to the writer task.
#[derive(Clone)]
pub struct Writer {
    jobs: mpsc::Sender<Submitted>,
}

impl Writer {
    /// Starts the writer on `conn`, on a thread of its own (with its own
    /// single-threaded runtime): writes never wait for request handling,
    /// and the writer's statements run on the thread that owns the
    /// connection, one after another, without a hop between threads.
    pub fn start(
        conn: Connection,
        clock: Clock,
        hub: Arc<Hub>,
        wal_restart: WalRestart,
        standings: Arc<Standings>,
    ) -> std::io::Result<(Self, std::thread::JoinHandle<()>)> {
        let (jobs, receiver) = mpsc::channel(WRITE_QUEUE_LEN);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("folio-writer".to_owned())
            .spawn(move || {
                let writer = std::panic::AssertUnwindSafe(|| {
                    runtime.block_on(run(conn, receiver, clock, hub, wal_restart, standings));
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
    pub async fn commit(&self, prepared: Box<Prepared>) -> WriteResult {
        self.submit(Work::Commit(prepared)).await
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

/// The writer's connection inside a job's savepoint, as core's driver
/// reads and commits through it. Its futures never wait: each statement
/// runs on the spot.
pub struct Savepoint<'c>(pub &'c Connection);

impl Fetch for Savepoint<'_> {
    type Error = DbError;

    async fn fetch(&mut self, statement: &Statement) -> Result<Vec<Row>, DbError> {
        db::fetch(self.0, statement)
    }
}

impl Transaction for Savepoint<'_> {
    async fn commit(&mut self, statements: &[Statement]) -> Result<Vec<Row>, CommitError<DbError>> {
        let conn = self.0;
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
        result.map_err(failed)
    }
}

async fn run(
    conn: Connection,
    mut jobs: mpsc::Receiver<Submitted>,
    clock: Clock,
    hub: Arc<Hub>,
    wal_restart: WalRestart,
    standings: Arc<Standings>,
) {
    let mut batch = Vec::with_capacity(MAX_WRITES_PER_COMMIT);
    while jobs.recv_many(&mut batch, MAX_WRITES_PER_COMMIT).await > 0 {
        let batch = std::mem::take(&mut batch);
        commit_batch(&conn, batch, &clock, &hub, &standings).await;
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
    user_id: Option<i64>,
    result: WriteResult,
    reply: oneshot::Sender<WriteResult>,
}

async fn commit_batch(
    conn: &Connection,
    batch: Vec<Submitted>,
    clock: &Clock,
    hub: &Hub,
    standings: &Standings,
) {
    let mut pending = batch.into_iter().peekable();
    while pending.peek().is_some() {
        commit_some(conn, &mut pending, clock, hub, standings).await;
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
async fn commit_some(
    conn: &Connection,
    pending: &mut impl Iterator<Item = Submitted>,
    clock: &Clock,
    hub: &Hub,
    standings: &Standings,
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
        let user_id = work.user_id();
        let result = match db::control(conn, "SAVEPOINT w") {
            Ok(()) => {
                let result = match work {
                    Work::Run(job) => job.run(&mut Savepoint(conn), now).await,
                    Work::Commit(prepared) => prepared.commit(&mut Savepoint(conn), now).await,
                }
                .map_err(WriterError::from);
                let ended = match result {
                    Ok(Ok(_)) => db::control(conn, "RELEASE w"),
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
        ran.push(Ran {
            user_id,
            result,
            reply,
        });
        if conn.is_autocommit() {
            tracing::error!(
                "SQLite rolled back a group commit's transaction; its writes are refused"
            );
            let full = ran
                .last()
                .is_some_and(|job| matches!(&job.result, Err(e) if e.is_storage_full()));
            let why = "the transaction was rolled back; nothing was stored";
            answer(ran, Err(Lost { full, why }), hub);
            return;
        }
    }
    let committed = db::control(conn, "COMMIT");
    crate::metrics::METRICS.commit(ran.len(), started.elapsed());
    if let Err(error) = &committed {
        tracing::error!(%error, "a group commit failed");
        let _ = conn.execute_batch("ROLLBACK");
    }
    let changes_standing =
        |job: &Ran| matches!(&job.result, Ok(Ok(done)) if done.changes_standing());
    if committed.is_ok() && ran.iter().any(changes_standing) {
        standings.changed();
    }
    let stored = committed.map_err(|error| Lost {
        full: db::primary_code(&error) == Some(rusqlite::ffi::SQLITE_FULL),
        why: "the group commit failed; nothing was stored",
    });
    answer(ran, stored, hub);
}

/// Why a transaction's jobs were not stored.
#[derive(Debug, Clone, Copy)]
struct Lost {
    /// Because the storage is full.
    full: bool,
    why: &'static str,
}

/// Answers the jobs of one transaction, `stored` or not, and publishes the
/// versions of those stored. A job that was refused keeps its answer
/// either way; one that would have stored something fails with why it was
/// [`Lost`].
///
/// Each user's versions go to the hub as one [`LiveCommit`], before any
/// job is answered: a group commit of many writes to one user (the queue
/// that builds up behind a slow fsync) takes one place in each stream's
/// queue, instead of overflowing it and ending every stream of that user
/// at once.
fn answer(ran: Vec<Ran>, stored: Result<(), Lost>, hub: &Hub) {
    let mut live: Vec<(i64, Vec<LiveVersion>)> = Vec::new();
    let mut replies = Vec::with_capacity(ran.len());
    for Ran {
        user_id,
        result,
        reply,
    } in ran
    {
        let result = match (stored, result) {
            (Err(lost), Ok(Ok(_))) if lost.full => {
                Err(WriterError::StorageFull(lost.why.to_owned()))
            }
            (Err(lost), Ok(Ok(_))) => Err(WriterError::Job(lost.why.to_owned())),
            (Ok(()), Ok(Ok(mut done))) => {
                if let Some(user_id) = user_id {
                    let versions = done.take_live_versions();
                    match live.iter_mut().find(|(user, _)| *user == user_id) {
                        Some((_, same_user)) => same_user.extend(versions),
                        None => live.push((user_id, versions)),
                    }
                }
                Ok(Ok(done))
            }
            (_, other) => other,
        };
        replies.push((reply, result));
    }
    for (user_id, versions) in live {
        if !versions.is_empty() {
            hub.publish(user_id, LiveCommit::from(versions));
        }
    }
    for (reply, result) in replies {
        let _ = reply.send(result);
    }
}

#[cfg(test)]
mod tests {
    use folio_core::Done;
    use folio_core::events::StreamCaps;

    use super::*;

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
        let hub = Hub::new(StreamCaps {
            per_server: None,
            per_user: None,
        });
        let (first, first_answer) = submitted(statement("INSERT INTO t VALUES (1)"));
        let (rollback, rollback_answer) = submitted(statement("ROLLBACK"));
        let (after, after_answer) = submitted(statement("INSERT INTO t VALUES (3)"));
        let (last, last_answer) = submitted(statement("INSERT INTO t VALUES (4)"));
        commit_batch(
            &conn,
            vec![first, rollback, after, last],
            &Clock,
            &hub,
            &Standings::for_tests(),
        )
        .await;

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
        use folio_core::builtin::BuiltinType;
        use folio_core::service::writes::{Stored, Written};

        let hub = Arc::new(Hub::new(StreamCaps {
            per_server: None,
            per_user: None,
        }));
        let mut alice = hub.subscribe(1, false).expect("no caps");
        let mut bob = hub.subscribe(2, false).expect("no caps");
        let written = |seqs: &[u64]| {
            let stored = Stored {
                record: BuiltinType::Entity.record().clone(),
                entries: Vec::new(),
            };
            Done::Written(Written {
                versions: seqs.iter().map(|&seq| (stored.clone(), seq)).collect(),
                answer: stored,
                client_id: None,
                notifications: 0,
            })
        };
        let mut answers = Vec::new();
        let ran = [(1, &[1, 2][..]), (2, &[3]), (1, &[4])]
            .into_iter()
            .map(|(user_id, seqs)| {
                let (reply, answer) = oneshot::channel();
                answers.push(answer);
                Ran {
                    user_id: Some(user_id),
                    result: Ok(Ok(written(seqs))),
                    reply,
                }
            })
            .collect();
        answer(ran, Ok(()), &hub);

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
        let hub = Hub::new(StreamCaps {
            per_server: None,
            per_user: None,
        });
        let (first, first_answer) = submitted(statement("INSERT INTO t VALUES (1)"));
        let (orphan, orphan_answer) = submitted(statement("INSERT INTO child VALUES (7)"));
        let (last, last_answer) = submitted(statement("INSERT INTO t VALUES (3)"));
        commit_batch(
            &conn,
            vec![first, orphan, last],
            &Clock,
            &hub,
            &Standings::for_tests(),
        )
        .await;

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
