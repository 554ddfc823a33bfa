//! The single writer: every write of the server goes through one task that
//! owns the one writing connection. It takes the writes waiting at that
//! moment, runs each inside its own savepoint of one transaction (so one
//! failure does not fail the others), commits once (group commit: one
//! fsync for the batch), and only then answers each request and publishes
//! its events. Serialising writes here also makes the store's optimistic
//! concurrency checks race-free; the schema enforces them regardless.

use std::sync::Arc;

use folio_core::access::Access;
use folio_core::apps::{ServerKeys, server_public_key};
use folio_core::model::{RecordDate, RecordId};
use folio_core::query::{IndexEntry, index_entries};
use folio_core::register::{
    NewApp, Registration, RegistrationError, RegistrationPlan, registration_access,
};
use folio_core::store::{
    NeedRow, NeedRows, Statement, WriteOrigin, app_credentials_sql, app_key_sql, commit_statements,
    last_received_at_sql, need_sql, read_version, version_sql,
};
use folio_core::write::{
    Answer, Commit, Need, Step, Write, WriteContext, WriteError, WriteRequest,
};
use sqlx::{Row, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::clock::Clock;
use crate::db::{self, DbError};
use crate::hub::{Hub, LiveEvent};
use crate::users::User;

/// How many writes one transaction takes at most.
pub const MAX_WRITES_PER_COMMIT: usize = 256;

/// How many writes may wait for the writer before requests are refused with 503.
pub const WRITE_QUEUE_LEN: usize = 4_096;

/// A record write to run.
pub struct RecordWrite {
    pub user: User,
    pub request: WriteRequest,
    pub access: Access,
    pub origin: WriteOrigin,
}

/// A stored version, with its index entries and event sequence.
#[derive(Debug, Clone)]
pub struct Stored {
    pub record: folio_core::model::Record,
    pub entries: Vec<IndexEntry>,
}

/// What a record write came to.
pub type WriteResult = Result<Result<Stored, WriteError>, WriterError>;

/// The writer could not run or commit a write.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("database: {0}")]
    Db(#[from] DbError),
    #[error("stored data: {0}")]
    Stored(#[from] folio_core::store::StoredDataError),
    #[error("the writer has stopped")]
    Stopped,
    #[error("too many writes are waiting")]
    Busy,
}

/// An app's registration, to run in one savepoint: the key lookup, then
/// the writes core plans from it.
pub struct RegistrationJob {
    pub user: User,
    pub registration: Registration,
    /// Fresh randomness for a new app's Credentials record.
    pub credentials_id: RecordId,
    pub server_keys: ServerKeys,
}

/// A registration's App record, and the server's key for the app.
pub struct Registered {
    pub app_record: Stored,
    pub server_public_key: String,
}

pub type RegistrationResult = Result<Result<Registered, RegistrationError>, WriterError>;

enum Job {
    Record(Box<RecordWrite>, oneshot::Sender<WriteResult>),
    /// Record writes that succeed or fail together; answered with the first.
    Group(Vec<RecordWrite>, oneshot::Sender<WriteResult>),
    Registration(Box<RegistrationJob>, oneshot::Sender<RegistrationResult>),
    /// Statements to run in one savepoint (blob rows, maintenance).
    Statements(Vec<Statement>, oneshot::Sender<Result<(), WriterError>>),
}

/// A handle that sends writes to the writer task.
#[derive(Clone)]
pub struct Writer {
    jobs: mpsc::Sender<Job>,
}

impl Writer {
    /// Starts the writer on `conn`, on a thread of its own (with its own
    /// single-threaded runtime): writes never wait for request handling.
    pub fn start(
        conn: SqliteConnection,
        clock: Clock,
        hub: Arc<Hub>,
    ) -> std::io::Result<(Self, std::thread::JoinHandle<()>)> {
        let (jobs, receiver) = mpsc::channel(WRITE_QUEUE_LEN);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("folio-writer".to_owned())
            .spawn(move || runtime.block_on(run(conn, receiver, clock, hub)))?;
        Ok((Writer { jobs }, thread))
    }

    /// Runs one record write; answers once it is durable.
    pub async fn write(&self, write: RecordWrite) -> WriteResult {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .try_send(Job::Record(Box::new(write), reply))
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => WriterError::Busy,
                mpsc::error::TrySendError::Closed(_) => WriterError::Stopped,
            })?;
        answer.await.map_err(|_| WriterError::Stopped)?
    }

    /// Runs record writes atomically; answers with the first once durable.
    pub async fn write_group(&self, writes: Vec<RecordWrite>) -> WriteResult {
        let (reply, answer) = oneshot::channel();
        self.submit(Job::Group(writes, reply))?;
        answer.await.map_err(|_| WriterError::Stopped)?
    }

    /// Registers an app; answers once durable.
    pub async fn register(&self, job: RegistrationJob) -> RegistrationResult {
        let (reply, answer) = oneshot::channel();
        self.submit(Job::Registration(Box::new(job), reply))?;
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

async fn run(
    mut conn: SqliteConnection,
    mut jobs: mpsc::Receiver<Job>,
    clock: Clock,
    hub: Arc<Hub>,
) {
    let mut batch = Vec::with_capacity(MAX_WRITES_PER_COMMIT);
    while jobs.recv_many(&mut batch, MAX_WRITES_PER_COMMIT).await > 0 {
        commit_batch(&mut conn, std::mem::take(&mut batch), &clock, &hub).await;
    }
    tracing::info!("the writer stopped: no more writes");
}

/// What one job of a batch came to, before the batch commits.
enum Done {
    Record(
        oneshot::Sender<WriteResult>,
        Result<Result<Box<Written>, WriteError>, WriterError>,
    ),
    Statements(
        oneshot::Sender<Result<(), WriterError>>,
        Result<(), WriterError>,
    ),
    Registration(
        oneshot::Sender<RegistrationResult>,
        Result<Result<(Box<Written>, String), RegistrationError>, WriterError>,
    ),
}

async fn commit_batch(conn: &mut SqliteConnection, batch: Vec<Job>, clock: &Clock, hub: &Hub) {
    if let Err(error) = sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await {
        tracing::error!(%error, "could not begin a write transaction");
        for job in batch {
            fail(job, || WriterError::Db(sqlx::Error::PoolClosed));
        }
        return;
    }
    let mut done = Vec::with_capacity(batch.len());
    for job in batch {
        let savepoint = sqlx::raw_sql("SAVEPOINT w").execute(&mut *conn).await;
        let outcome = match (savepoint, job) {
            (Err(error), Job::Record(_, reply)) => Done::Record(reply, Err(error.into())),
            (Err(error), Job::Statements(_, reply)) => Done::Statements(reply, Err(error.into())),
            (Err(error), Job::Group(_, reply)) => Done::Record(reply, Err(error.into())),
            (Err(error), Job::Registration(_, reply)) => {
                Done::Registration(reply, Err(error.into()))
            }
            (Ok(_), Job::Record(write, reply)) => {
                let result = run_record_write(conn, &write, clock).await;
                Done::Record(reply, result.map(|written| written.map(Box::new)))
            }
            (Ok(_), Job::Group(writes, reply)) => {
                let result = run_group(conn, &writes, clock).await;
                Done::Record(reply, result.map(|written| written.map(Box::new)))
            }
            (Ok(_), Job::Registration(job, reply)) => {
                let result = run_registration(conn, &job, clock).await;
                Done::Registration(
                    reply,
                    result.map(|r| r.map(|(written, key)| (Box::new(written), key))),
                )
            }
            (Ok(_), Job::Statements(statements, reply)) => Done::Statements(
                reply,
                db::execute_all(conn, &statements).await.map_err(Into::into),
            ),
        };
        let keep = match &outcome {
            Done::Record(_, result) => matches!(result, Ok(Ok(_))),
            Done::Statements(_, result) => result.is_ok(),
            Done::Registration(_, result) => matches!(result, Ok(Ok(_))),
        };
        let end = if keep {
            "RELEASE w"
        } else {
            "ROLLBACK TO w; RELEASE w"
        };
        if let Err(error) = sqlx::raw_sql(end).execute(&mut *conn).await {
            tracing::error!(%error, "could not end a savepoint");
        }
        done.push(outcome);
    }
    let committed = sqlx::raw_sql("COMMIT").execute(&mut *conn).await;
    if let Err(error) = &committed {
        tracing::error!(%error, "a group commit failed");
        let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
    }
    for outcome in done {
        match outcome {
            Done::Record(reply, result) => {
                let result = match (&committed, result) {
                    (Err(_), Ok(Ok(_))) => Err(WriterError::Db(sqlx::Error::WorkerCrashed)),
                    (_, Ok(Ok(written))) => Ok(Ok(publish(hub, *written))),
                    (_, Ok(Err(write_error))) => Ok(Err(write_error)),
                    (_, Err(error)) => Err(error),
                };
                let _ = reply.send(result);
            }
            Done::Statements(reply, result) => {
                let result = match (&committed, result) {
                    (Err(_), Ok(())) => Err(WriterError::Db(sqlx::Error::WorkerCrashed)),
                    (_, result) => result,
                };
                let _ = reply.send(result);
            }
            Done::Registration(reply, result) => {
                let result = match (&committed, result) {
                    (Err(_), Ok(Ok(_))) => Err(WriterError::Db(sqlx::Error::WorkerCrashed)),
                    (_, Ok(Ok((written, server_public_key)))) => Ok(Ok(Registered {
                        app_record: publish(hub, *written),
                        server_public_key,
                    })),
                    (_, Ok(Err(error))) => Ok(Err(error)),
                    (_, Err(error)) => Err(error),
                };
                let _ = reply.send(result);
            }
        }
    }
}

/// Publishes a committed write's events; returns the version it answers with.
fn publish(hub: &Hub, written: Written) -> Stored {
    for (version, seq) in written.versions {
        hub.publish(
            written.user_id,
            Arc::new(LiveEvent {
                seq,
                record: version.record,
                entries: version.entries,
                client_id: written.client_id,
            }),
        );
    }
    written.answer
}

/// Runs writes one after the other in the job's savepoint; the first
/// refusal stops the group (the savepoint is rolled back).
async fn run_group(
    conn: &mut SqliteConnection,
    writes: &[RecordWrite],
    clock: &Clock,
) -> Result<Result<Written, WriteError>, WriterError> {
    let mut group: Option<Written> = None;
    for write in writes {
        let written = match run_record_write(conn, write, clock).await? {
            Ok(written) => written,
            Err(error) => return Ok(Err(error)),
        };
        match &mut group {
            Some(group) => group.versions.extend(written.versions),
            None => group = Some(written),
        }
    }
    Ok(group.ok_or_else(|| WriteError::InvalidBody("an empty group of writes".into())))
}

/// Runs a registration: reads the key the app id is registered with, then
/// what core plans from it.
async fn run_registration(
    conn: &mut SqliteConnection,
    job: &RegistrationJob,
    clock: &Clock,
) -> Result<Result<(Written, String), RegistrationError>, WriterError> {
    let user = &job.user;
    let registered: Option<String> =
        db::fetch(&mut *conn, &app_key_sql(user.id, &job.registration.app_id))
            .await?
            .first()
            .map(|row| row.try_get(0))
            .transpose()?;
    let plan = match job.registration.plan(
        &user.entity,
        user.id,
        registered.as_deref(),
        job.credentials_id,
        &job.server_keys,
    ) {
        Ok(plan) => plan,
        Err(error) => return Ok(Err(error)),
    };
    let write = |request: WriteRequest| RecordWrite {
        user: user.clone(),
        request,
        access: registration_access(&user.entity),
        origin: WriteOrigin::default(),
    };
    match plan {
        RegistrationPlan::New(new) => {
            let NewApp {
                app,
                credentials,
                app_row,
                server_public_key,
            } = *new;
            let written = run_group(conn, &[write(app), write(credentials)], clock).await?;
            let written = match written {
                Ok(written) => written,
                Err(error) => return Ok(Err(error.into())),
            };
            db::execute(&mut *conn, &app_row).await?;
            Ok(Ok((written, server_public_key)))
        }
        RegistrationPlan::Renewal { app } => {
            let written = match run_record_write(conn, &write(*app), clock).await? {
                Ok(written) => written,
                Err(error) => return Ok(Err(error.into())),
            };
            let statement = app_credentials_sql(user.id, &user.entity, &job.registration.app_id);
            let rows = db::fetch_versions(&mut *conn, &statement, 0).await?;
            let key = match rows.first() {
                Some((record, links)) => {
                    let (credentials, _) = read_version(record, links)?;
                    server_public_key(&credentials).map(str::to_owned)
                }
                None => None,
            };
            match key {
                Some(key) => Ok(Ok((written, key))),
                None => Err(WriterError::Db(DbError::Protocol(
                    "a registered app has no Credentials record".into(),
                ))),
            }
        }
    }
}

fn fail(job: Job, error: impl Fn() -> WriterError) {
    match job {
        Job::Record(_, reply) => drop(reply.send(Err(error()))),
        Job::Statements(_, reply) => drop(reply.send(Err(error()))),
        Job::Group(_, reply) => drop(reply.send(Err(error()))),
        Job::Registration(_, reply) => drop(reply.send(Err(error()))),
    }
}

/// A write that ran in its savepoint, waiting for the batch to commit.
pub struct Written {
    pub user_id: i64,
    /// The versions stored, each with its event sequence (none for a replay).
    pub versions: Vec<(Stored, u64)>,
    /// The version the request is answered with.
    pub answer: Stored,
    pub client_id: Option<folio_core::model::ClientId>,
}

/// Runs one write on the writer's connection, inside the batch transaction:
/// the versions it stored, each with its event sequence, the first being
/// the one the request answers with.
pub async fn run_record_write(
    conn: &mut SqliteConnection,
    job: &RecordWrite,
    clock: &Clock,
) -> Result<Result<Written, WriteError>, WriterError> {
    let user_id = job.user.id;
    let now = clock.now();
    let last: Option<i64> = db::fetch(&mut *conn, &last_received_at_sql(user_id))
        .await?
        .first()
        .map(|row| row.try_get(0))
        .transpose()?;
    let context = WriteContext {
        user: job.user.entity.clone(),
        access: job.access.clone(),
        now,
        last_received_at: last.and_then(|ticks| RecordDate::from_unix_ticks(ticks).ok()),
        fresh_id: RecordId::from_bytes(rand::random()),
    };
    let mut write = Write::new(job.request.clone(), context);
    let commit = loop {
        match write.step() {
            Step::Fetch(needs) => {
                let mut answers = Vec::with_capacity(needs.len());
                for need in &needs {
                    answers.push(answer_need(conn, user_id, need, now).await?);
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
        let rows = db::fetch_versions(&mut *conn, &statement, 0).await?;
        let (record, entries) = match rows.first() {
            Some((record, links)) => read_version(record, links)?,
            None => ((**record).clone(), Vec::new()),
        };
        return Ok(Ok(Written {
            user_id,
            versions: Vec::new(),
            answer: Stored { record, entries },
            client_id: None,
        }));
    }
    let versions: Vec<Stored> = commit
        .versions()
        .map(|version| Stored {
            record: version.record.clone(),
            entries: index_entries(&version.links),
        })
        .collect();
    db::execute_all(conn, &commit_statements(user_id, &commit, job.origin)).await?;
    let latest: i64 = sqlx::query_scalar("SELECT event_seq FROM users WHERE id = ?1")
        .bind(user_id)
        .fetch_one(&mut *conn)
        .await?;
    // The commit's events took the last sequences, one per version, in order.
    let first = latest - (versions.len() as i64 - 1);
    let answer = versions[0].clone();
    let versions = versions
        .into_iter()
        .zip(first..)
        .map(|(stored, seq)| (stored, u64::try_from(seq).unwrap_or_default()))
        .collect();
    Ok(Ok(Written {
        user_id,
        versions,
        answer,
        client_id: job.origin.client_id,
    }))
}

async fn answer_need(
    conn: &mut SqliteConnection,
    user_id: i64,
    need: &Need,
    now: RecordDate,
) -> Result<Answer, WriterError> {
    let (statement, shape) = need_sql(user_id, need, now);
    let rows = db::fetch(&mut *conn, &statement).await?;
    let rows = rows
        .iter()
        .map(|row| {
            Ok(match shape {
                NeedRows::Record | NeedRows::Records => NeedRow::Version {
                    record: row.try_get(0)?,
                    links: row.try_get(1)?,
                },
                NeedRows::Known => NeedRow::Integers(vec![row.try_get(0)?]),
                NeedRows::Blob => NeedRow::Integers(vec![row.try_get(0)?, row.try_get(1)?]),
            })
        })
        .collect::<Result<Vec<_>, DbError>>()?;
    Ok(shape.answer(rows)?)
}
