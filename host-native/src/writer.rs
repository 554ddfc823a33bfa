//! The single writer: every write of the server goes through one task that
//! owns the one writing connection. It takes the jobs waiting at that
//! moment, runs each with core's driver inside its own savepoint of one
//! transaction (so one failure does not fail the others), commits once
//! (group commit: one fsync for the batch), and only then answers each
//! request and publishes its events. Serialising writes here also makes the
//! store's optimistic concurrency checks race-free; the schema enforces
//! them regardless.

use std::sync::Arc;

use folio_core::events::LiveVersion;
use folio_core::model::RecordId;
use folio_core::register::RegistrationError;
use folio_core::service::User;
use folio_core::service::store::{CommitError, Fetch, Row, Transaction};
use folio_core::service::writes::{
    JobClock, JobFailure, RecordWrite, Registered, RegistrationJob, Written, run_registration,
    run_statements, run_writes,
};
use folio_core::store::Statement;
use folio_core::write::WriteError;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::clock::Clock;
use crate::db::{self, DbError, WalRestart};
use crate::hub::Hub;

/// How many jobs one transaction takes at most.
pub const MAX_WRITES_PER_COMMIT: usize = 256;

/// How many jobs may wait for the writer before requests are refused with 503.
pub const WRITE_QUEUE_LEN: usize = 4_096;

/// What a job of record writes came to.
pub type WriteResult = Result<Result<Written, WriteError>, WriterError>;

/// What a registration came to.
pub type RegistrationResult = Result<Result<Registered, RegistrationError>, WriterError>;

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
}

impl From<JobFailure<DbError>> for WriterError {
    fn from(failure: JobFailure<DbError>) -> Self {
        match failure {
            JobFailure::Store(error) => WriterError::Db(error),
            other => WriterError::Job(other.to_string()),
        }
    }
}

enum Job {
    /// Record writes that succeed or fail together; answered with the first.
    Writes(User, Vec<RecordWrite>, oneshot::Sender<WriteResult>),
    Registration(
        User,
        Box<RegistrationJob>,
        oneshot::Sender<RegistrationResult>,
    ),
    /// Statements to run in one savepoint (blob rows, maintenance).
    Statements(Vec<Statement>, oneshot::Sender<Result<(), WriterError>>),
}

/// A handle that sends jobs to the writer task.
#[derive(Clone)]
pub struct Writer {
    jobs: mpsc::Sender<Job>,
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
    ) -> std::io::Result<(Self, std::thread::JoinHandle<()>)> {
        let (jobs, receiver) = mpsc::channel(WRITE_QUEUE_LEN);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("folio-writer".to_owned())
            .spawn(move || runtime.block_on(run(conn, receiver, clock, hub, wal_restart)))?;
        Ok((Writer { jobs }, thread))
    }

    /// Runs record writes atomically; answers with the first once durable.
    pub async fn write(&self, user: User, writes: Vec<RecordWrite>) -> WriteResult {
        let (reply, answer) = oneshot::channel();
        self.submit(Job::Writes(user, writes, reply))?;
        answer.await.map_err(|_| WriterError::Stopped)?
    }

    /// Registers an app; answers once durable.
    pub async fn register(&self, user: User, job: RegistrationJob) -> RegistrationResult {
        let (reply, answer) = oneshot::channel();
        self.submit(Job::Registration(user, Box::new(job), reply))?;
        answer.await.map_err(|_| WriterError::Stopped)?
    }

    fn submit(&self, job: Job) -> Result<(), WriterError> {
        self.jobs.try_send(job).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => WriterError::Busy,
            mpsc::error::TrySendError::Closed(_) => WriterError::Stopped,
        })
    }

    /// Runs statements atomically, in their own savepoint of the next commit.
    pub async fn execute(&self, statements: Vec<Statement>) -> Result<(), WriterError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Statements(statements, reply))
            .await
            .map_err(|_| WriterError::Stopped)?;
        answer.await.map_err(|_| WriterError::Stopped)?
    }
}

impl JobClock for Clock {
    fn now(&self) -> folio_core::model::RecordDate {
        Clock::now(self)
    }

    fn fresh_id(&self) -> RecordId {
        RecordId::from_bytes(rand::random())
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
        let failed = |error: DbError| match db::is_constraint(&error) {
            true => CommitError::Conflict(error),
            false => CommitError::Failed(error),
        };
        conn.execute_batch("SAVEPOINT job_commit")
            .map_err(CommitError::Failed)?;
        let result = match statements.split_last() {
            None => Ok(Vec::new()),
            Some((last, rest)) => db::execute_all(conn, rest).and_then(|()| db::fetch(conn, last)),
        };
        let end = match result {
            Ok(_) => "RELEASE job_commit",
            Err(_) => "ROLLBACK TO job_commit; RELEASE job_commit",
        };
        conn.execute_batch(end).map_err(CommitError::Failed)?;
        result.map_err(failed)
    }
}

async fn run(
    conn: Connection,
    mut jobs: mpsc::Receiver<Job>,
    clock: Clock,
    hub: Arc<Hub>,
    wal_restart: WalRestart,
) {
    let mut batch = Vec::with_capacity(MAX_WRITES_PER_COMMIT);
    while jobs.recv_many(&mut batch, MAX_WRITES_PER_COMMIT).await > 0 {
        commit_batch(&conn, std::mem::take(&mut batch), &clock, &hub).await;
        if wal_restart.take() {
            db::restart_wal(&conn);
        }
    }
    tracing::info!("the writer stopped: no more writes");
}

/// What one job of a batch came to, before the batch commits.
enum Done {
    Writes(
        oneshot::Sender<WriteResult>,
        i64,
        Result<Result<Written, WriteError>, WriterError>,
    ),
    Registration(
        oneshot::Sender<RegistrationResult>,
        i64,
        Result<Result<Registered, RegistrationError>, WriterError>,
    ),
    Statements(
        oneshot::Sender<Result<(), WriterError>>,
        Result<(), WriterError>,
    ),
}

impl Done {
    /// Whether the job's savepoint is kept.
    fn keep(&self) -> bool {
        match self {
            Done::Writes(_, _, result) => matches!(result, Ok(Ok(_))),
            Done::Registration(_, _, result) => matches!(result, Ok(Ok(_))),
            Done::Statements(_, result) => result.is_ok(),
        }
    }
}

async fn run_job(conn: &Connection, job: Job, clock: &Clock) -> Done {
    let mut tx = Savepoint(conn);
    match job {
        Job::Writes(user, writes, reply) => {
            let result = run_writes(&mut tx, &user, &writes, clock).await;
            Done::Writes(reply, user.id, result.map_err(Into::into))
        }
        Job::Registration(user, job, reply) => {
            let result = run_registration(&mut tx, &user, &job, clock).await;
            Done::Registration(reply, user.id, result.map_err(Into::into))
        }
        Job::Statements(statements, reply) => {
            let result = run_statements(&mut tx, &statements).await;
            Done::Statements(reply, result.map_err(Into::into))
        }
    }
}

async fn commit_batch(conn: &Connection, batch: Vec<Job>, clock: &Clock, hub: &Hub) {
    if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
        tracing::error!(%error, "could not begin a write transaction");
        let message = error.to_string();
        for job in batch {
            fail(job, || {
                WriterError::Job(format!("beginning a transaction: {message}"))
            });
        }
        return;
    }
    let mut done = Vec::with_capacity(batch.len());
    for job in batch {
        if let Err(error) = conn.execute_batch("SAVEPOINT w") {
            tracing::error!(%error, "could not open a savepoint");
            fail(job, || {
                WriterError::Job(format!("opening a savepoint: {error}"))
            });
            continue;
        }
        let outcome = run_job(conn, job, clock).await;
        let end = match outcome.keep() {
            true => "RELEASE w",
            false => "ROLLBACK TO w; RELEASE w",
        };
        if let Err(error) = conn.execute_batch(end) {
            tracing::error!(%error, "could not end a savepoint");
        }
        done.push(outcome);
    }
    let committed = conn.execute_batch("COMMIT");
    if let Err(error) = &committed {
        tracing::error!(%error, "a group commit failed");
        let _ = conn.execute_batch("ROLLBACK");
    }
    let lost = || WriterError::Job("the group commit failed; nothing was stored".to_owned());
    for outcome in done {
        match outcome {
            Done::Writes(reply, user_id, result) => {
                let result = match (&committed, result) {
                    (Err(_), Ok(Ok(_))) => Err(lost()),
                    (_, Ok(Ok(written))) => Ok(Ok(publish(hub, user_id, written))),
                    (_, other) => other,
                };
                let _ = reply.send(result);
            }
            Done::Registration(reply, user_id, result) => {
                let result = match (&committed, result) {
                    (Err(_), Ok(Ok(_))) => Err(lost()),
                    (_, Ok(Ok(registered))) => Ok(Ok(Registered {
                        written: publish(hub, user_id, registered.written),
                        server_public_key: registered.server_public_key,
                    })),
                    (_, other) => other,
                };
                let _ = reply.send(result);
            }
            Done::Statements(reply, result) => {
                let result = match (&committed, result) {
                    (Err(_), Ok(())) => Err(lost()),
                    (_, result) => result,
                };
                let _ = reply.send(result);
            }
        }
    }
}

/// Publishes a committed job's events (they move to the hub); answers
/// the job.
fn publish(hub: &Hub, user_id: i64, mut written: Written) -> Written {
    for (version, seq) in std::mem::take(&mut written.versions) {
        hub.publish(
            user_id,
            Arc::new(LiveVersion::new(
                seq,
                version.record,
                version.entries,
                written.client_id,
            )),
        );
    }
    written
}

fn fail(job: Job, error: impl Fn() -> WriterError) {
    match job {
        Job::Writes(_, _, reply) => drop(reply.send(Err(error()))),
        Job::Registration(_, _, reply) => drop(reply.send(Err(error()))),
        Job::Statements(_, reply) => drop(reply.send(Err(error()))),
    }
}
