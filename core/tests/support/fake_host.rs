// A host of core's service for tests: kit's `Fake` (core's rate buckets,
// replay guard and stream caps, blobs in a map, and its log of statements
// fetched, notes, reports, rates, nonces and subscriptions) over core's own
// SQL on an in-memory SQLite (through rusqlite, as the native host runs
// it), with a fixed scheduler clock for write jobs. The store records every
// job submitted (its kind, the time it ran at, what it committed and how it
// ended) and the versions it fanned out.
//
// Included with `#[path]` by the service tests, after `kit` (the request
// builder, bodies, counters and the fake itself, which it shares with the
// in-memory fake).
// Native only: rusqlite does not build for wasm32.

#![allow(dead_code)]

use std::cell::{Cell, RefCell};

use folio_core::auth::ServerKey;
use folio_core::auth::access::Access;
use folio_core::auth::apps::{
    Scope, ServerKeys, app_record_body, authorization_record_body, credentials_record_body,
};
use folio_core::model::{Entity, Record, RecordDate, RecordId, UserName};
use folio_core::problem::{Problem, ProblemType, default_docs_url};
use folio_core::schema::builtin::BuiltinType;
use folio_core::service::consent::verify_password;
use folio_core::service::discovery::entity_content;
use folio_core::service::events::LiveVersion;
use folio_core::service::jobs::memo::Memo;
use folio_core::service::jobs::{
    Decided, Done, Effects, Finished, Job, JobOutcome, JobStep, RecordWrite, WriteJob,
};
use folio_core::service::standing::Epoch;
use folio_core::service::store::{CommitError, Row, RowExt};
use folio_core::service::{User, WriteFailure};
use folio_core::store::{
    MIGRATIONS, SqlValue, Statement, WriteOrigin, insert_app_sql, insert_server_key_sql,
    insert_user_sql, seed_statements, user_by_name_sql, users_sql,
};
use folio_core::write::WriteRequest;
use rusqlite::Connection;
use rusqlite::types::ValueRef;
use serde_json::{Value, json};

use crate::kit::{
    BASE_URL, BOOT, Backend, Config, ENTITY, Fake, PASSWORD_HASH, Prepared, SCHEDULER_NOW, Signer,
    USER, date,
};
use crate::sqlite::bind;

/// What kind of job was submitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobKind {
    /// Record writes, how many.
    Writes(usize),
    Registration,
    /// Plain statements, their SQL.
    Statements(Vec<String>),
}

/// How a submitted job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobEnd {
    /// Refused by the busy knob before it ran.
    Busy,
    /// Committed.
    Stored,
    /// Refused: the client's doing, with its problem type.
    Refused(ProblemType),
    /// The store failed.
    Failed(String),
}

/// One job the service submitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub kind: JobKind,
    /// The scheduler's time it ran at.
    pub now: RecordDate,
    /// The SQL of the statements it committed (none when it stored nothing).
    pub committed: Vec<String>,
    pub end: JobEnd,
}

impl JobRecord {
    pub fn is_writes(&self) -> bool {
        matches!(self.kind, JobKind::Writes(_))
    }
}

/// What the SQLite store saw of its own: the jobs it ran and what they
/// fanned out.
#[derive(Debug, Default)]
pub struct JobLog {
    pub jobs: Vec<JobRecord>,
    /// The live versions each committed job handed to its user's streams.
    pub published: Vec<(i64, Vec<LiveVersion>)>,
}

/// A statement failure of the fake's store.
pub type DbError = rusqlite::Error;

/// The fake host: the shared [`Fake`] over core's SQL on SQLite. One user,
/// `alice` at `alice.example`, with the built-in types and an Entity
/// record, exists from the start.
pub type FakeHost = Fake<SqlStore>;

/// The store of [`FakeHost`]: an in-memory SQLite database, and a fixed
/// scheduler clock for write jobs.
pub struct SqlStore {
    db: Connection,
    pub log: RefCell<JobLog>,
    /// The time write jobs run at.
    scheduler_now: Cell<RecordDate>,
    /// The time provisioning writes run at (before any request).
    provision_now: Cell<RecordDate>,
    /// Knob: the writer refuses every job as busy.
    busy: Cell<bool>,
    /// Knob: every `Store::fetch` fails.
    failing_store: Cell<bool>,
    pub user: User,
    /// The user's Entity record, as provisioned.
    pub entity_record: Option<Record>,
    /// Versions and types remembered between prepared jobs, as the
    /// native host keeps them.
    memo: Memo,
    /// How many statements prepared jobs have read.
    prepared_reads: Cell<usize>,
}

/// Core's `seed_statements` for user `id`, made once per thread and user
/// id: a pure function of the id, and slow enough in a debug build (tens
/// of milliseconds) to dominate a test that makes many fakes.
fn seeds(id: i64) -> Vec<Statement> {
    thread_local! {
        static SEEDS: RefCell<std::collections::HashMap<i64, Vec<Statement>>> =
            RefCell::default();
    }
    SEEDS.with(|seeds| {
        (seeds.borrow_mut().entry(id))
            .or_insert_with(|| seed_statements(id))
            .clone()
    })
}

/// Runs `statement`, answering its rows as core reads them.
fn query(db: &Connection, statement: &Statement) -> Result<Vec<Row>, DbError> {
    let mut prepared = db.prepare_cached(&statement.sql)?;
    let columns = prepared.column_count();
    let rows = prepared.query_map(rusqlite::params_from_iter(bind(&statement.params)), |row| {
        (0..columns)
            .map(|i| {
                Ok(match row.get_ref(i)? {
                    ValueRef::Null => SqlValue::Null,
                    ValueRef::Integer(n) => SqlValue::Integer(n),
                    ValueRef::Text(text) => {
                        SqlValue::Text(String::from_utf8_lossy(text).into_owned())
                    }
                    other => panic!("core selects no {other:?}"),
                })
            })
            .collect()
    })?;
    rows.collect()
}

/// A write job's transaction: the fake's connection inside a savepoint
/// for each commit, as the native writer runs it.
struct Tx<'h> {
    db: &'h Connection,
    committed: &'h RefCell<Vec<String>>,
}

impl Tx<'_> {
    fn commit(&mut self, statements: &[Statement]) -> Result<Vec<Row>, CommitError<DbError>> {
        let failed = |error: DbError| {
            let code = match &error {
                rusqlite::Error::SqliteFailure(failure, _) => Some(failure.extended_code & 0xff),
                _ => None,
            };
            let message = error.to_string();
            CommitError::classify(error, code, &message)
        };
        self.db
            .execute_batch("SAVEPOINT job_commit")
            .map_err(CommitError::Failed)?;
        let mut rows = Ok(Vec::new());
        for statement in statements {
            rows = query(self.db, statement);
            if rows.is_err() {
                break;
            }
        }
        let end = match rows {
            Ok(_) => "RELEASE job_commit",
            Err(_) => "ROLLBACK TO job_commit; RELEASE job_commit",
        };
        self.db.execute_batch(end).map_err(CommitError::Failed)?;
        let rows = rows.map_err(failed)?;
        self.committed
            .borrow_mut()
            .extend(statements.iter().map(|s| s.sql.clone()));
        Ok(rows)
    }

    /// Drives `job` as the native host does, its reads and commits on the
    /// spot: to its end, or (a prepared job) until it is decided (`None`).
    fn drive(&mut self, job: &mut WriteJob<'_>) -> Result<Option<Finished>, String> {
        self.drive_counting(job, &Cell::new(0))
    }

    /// [`drive`](Self::drive), adding to `reads` each statement read.
    fn drive_counting(
        &mut self,
        job: &mut WriteJob<'_>,
        reads: &Cell<usize>,
    ) -> Result<Option<Finished>, String> {
        loop {
            match job.step() {
                JobStep::Read(statements) => {
                    reads.set(reads.get() + statements.len());
                    let rows = (statements.iter())
                        .map(|statement| query(self.db, statement))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|error| format!("store: {error}"))?;
                    job.supply(rows);
                }
                JobStep::Commit(statements) => match self.commit(statements) {
                    Ok(rows) => job.committed(rows),
                    Err(CommitError::Conflict(_)) => job.conflicted(),
                    Err(CommitError::Failed(error)) => return Err(format!("store: {error}")),
                },
                JobStep::Decided => return Ok(None),
                JobStep::Done(finished) => return Ok(Some(*finished)),
                JobStep::Failed(failure) => return Err(failure.to_string()),
            }
        }
    }

    /// Commits a job decided on a snapshot at `at`, as the native writer
    /// does: reads what it was decided on, then begins it with the rows.
    fn commit_decided(&mut self, decided: Decided, at: RecordDate) -> Result<Finished, String> {
        let rows = (decided.reads().iter())
            .map(|statement| query(self.db, statement))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| format!("store: {error}"))?;
        self.drive(&mut decided.begin(at, rows))?
            .ok_or_else(|| "a decided job was decided again".to_owned())
    }

    /// Runs `job` whole at `at`.
    fn run(&mut self, job: Job, at: RecordDate) -> Result<Finished, String> {
        self.drive(&mut WriteJob::start(job, at))?
            .ok_or_else(|| "a whole job was decided".to_owned())
    }
}

/// What deciding a job on a snapshot came to, as the native host's
/// request threads see it.
#[derive(Debug)]
pub enum Preparation {
    /// Answered without the writer: refused, or a replay.
    Answered(Box<JobOutcome>),
    /// Decided: the writer commits it ([`FakeHost::commit_prepared`]).
    Decided(Box<Decided>),
}

/// The epoch [`FakeHost::owner_prepare`] reads its memo under.
pub const FIRST_EPOCH: Epoch = Epoch {
    commits: 0,
    outside: [0; 3],
};

impl FakeHost {
    /// A fake with PROTOCOL.md §13's limits and rates.
    pub fn new() -> Self {
        FakeHost::with(Config::default())
    }

    pub fn with(config: Config) -> Self {
        FakeHost::serving(config, USER, ENTITY, BASE_URL, None)
    }

    /// A fake whose one user is `name` at `entity`, on a server at
    /// `base_url`, as `folio user add` makes one: with `server_key` (its
    /// row, and its public key in the user's Entity record) when given.
    pub fn serving(
        config: Config,
        name: &str,
        entity: &str,
        base_url: &str,
        server_key: Option<&ServerKey>,
    ) -> Self {
        let db = Connection::open_in_memory().expect("an in-memory database");
        db.execute_batch("PRAGMA foreign_keys = ON;")
            .expect("foreign keys");
        for migration in MIGRATIONS {
            db.execute_batch(migration.sql).expect("a migration");
        }
        let entity: Entity = entity.parse().expect("an entity");
        let provision_now = date(BOOT);
        let rows = query(
            &db,
            &insert_user_sql(name, &entity, PASSWORD_HASH, provision_now),
        )
        .expect("a user");
        let id = rows[0].integer(0).expect("the user's id");
        for statement in seeds(id) {
            query(&db, &statement).expect("a built-in type");
        }
        if let Some(key) = server_key {
            let statement = insert_server_key_sql(id, &key.seed_base64(), &key.public_base64());
            query(&db, &statement).expect("a server key");
        }
        let store = SqlStore {
            db,
            log: RefCell::default(),
            scheduler_now: Cell::new(date(SCHEDULER_NOW)),
            provision_now: Cell::new(provision_now),
            prepared_reads: Cell::new(0),
            busy: Cell::new(false),
            failing_store: Cell::new(false),
            user: User {
                id,
                name: name.to_owned(),
                entity,
            },
            entity_record: None,
            memo: Memo::new(),
        };
        let mut host = Fake::over(&config, store);
        host.settings.base_url = base_url.to_owned();
        host.settings.docs_url = default_docs_url(base_url);
        let user = &host.store.user;
        let public_key = server_key.map(ServerKey::public_base64);
        let content = entity_content(
            &user.entity,
            name,
            &host.settings.base_url,
            Some(name),
            public_key.as_deref(),
        );
        host.store.entity_record = Some(host.server_post(json!({
            "type": BuiltinType::Entity.link(),
            "permissions": {"read": "public"},
            "content": content,
        })));
        host
    }

    pub fn set_busy(&self, busy: bool) {
        self.store.busy.set(busy);
    }

    pub fn set_failing_store(&self, failing: bool) {
        self.store.failing_store.set(failing);
    }

    pub fn set_scheduler_now(&self, now: RecordDate) {
        self.store.scheduler_now.set(now);
    }

    pub fn scheduler_now(&self) -> RecordDate {
        self.store.scheduler_now.get()
    }

    /// Sets the time the owner's jobs ([`owner_job`](Self::owner_job),
    /// provisioning) run at from now on.
    pub fn set_provision_now(&self, now: RecordDate) {
        self.store.provision_now.set(now);
    }

    /// Runs the owner's `requests` as one job now, outside the log (as
    /// the console and the consent page do): its outcome.
    pub fn owner_job(&self, requests: Vec<WriteRequest>) -> JobOutcome {
        self.owner_job_finished(requests).outcome
    }

    /// [`owner_job`](Self::owner_job), with the job's effects.
    pub fn owner_job_finished(&self, requests: Vec<WriteRequest>) -> Finished {
        let job = self.owner_writes(requests, 0xdd);
        let now = self.store.provision_now.get();
        let committed = RefCell::default();
        let mut tx = Tx {
            db: &self.store.db,
            committed: &committed,
        };
        tx.run(job, now).expect("the job runs")
    }

    /// Decides the owner's writes on the store as it is now, as the native
    /// host does on a read snapshot, without committing (core's
    /// [`Job::prepare`]); `fresh` tells apart the ids of creates.
    pub fn owner_prepare(&self, requests: Vec<WriteRequest>, fresh: u8) -> Preparation {
        self.owner_prepare_in(requests, fresh, FIRST_EPOCH)
            .expect("the job is prepared")
    }

    /// [`owner_prepare`](Self::owner_prepare) through the host's memo under
    /// `epoch` (the native host's), or why it could not be prepared.
    pub fn owner_prepare_in(
        &self,
        requests: Vec<WriteRequest>,
        fresh: u8,
        epoch: Epoch,
    ) -> Result<Preparation, String> {
        let job = self.owner_writes(requests, fresh);
        let committed = RefCell::default();
        let mut tx = Tx {
            db: &self.store.db,
            committed: &committed,
        };
        let mut job = WriteJob::prepare(job, Some(self.store.memo.at(epoch)));
        Ok(
            match tx.drive_counting(&mut job, &self.store.prepared_reads)? {
                Some(finished) => Preparation::Answered(Box::new(finished.outcome)),
                None => Preparation::Decided(Box::new(job.decided())),
            },
        )
    }

    /// The host's memo of versions and types.
    pub fn memo(&self) -> &Memo {
        &self.store.memo
    }

    /// How many statements prepared jobs have read so far.
    pub fn prepared_reads(&self) -> usize {
        self.store.prepared_reads.get()
    }

    /// Commits a prepared job at `now`, as the native writer does, and
    /// tells the memo what it stored and which guesses were wrong, as the
    /// native host does.
    pub fn commit_prepared(&self, prepared: Box<Decided>, now: RecordDate) -> JobOutcome {
        let committed = RefCell::default();
        let mut tx = Tx {
            db: &self.store.db,
            committed: &committed,
        };
        let store = prepared.user_id().expect("a record write's store");
        let finished = tx.commit_decided(*prepared, now).expect("the commit runs");
        let memo = self.store.memo.at(FIRST_EPOCH);
        memo.forget_latest(&finished.effects.moved_latest);
        memo.remember_stored(store, &finished.effects.live);
        finished.outcome
    }

    /// The stored JSON of version `hash`, as the store holds it.
    pub fn stored_version(&self, hash: &str) -> String {
        self.store
            .db
            .query_row(
                "SELECT record FROM versions WHERE hash = ?1",
                [hash],
                |row| row.get(0),
            )
            .expect("a stored version")
    }

    /// A stored version's `links` column: its index entries, as JSON.
    pub fn stored_links(&self, hash: &str) -> String {
        self.store
            .db
            .query_row(
                "SELECT links FROM versions WHERE hash = ?1",
                [hash],
                |row| row.get(0),
            )
            .expect("a stored version")
    }

    /// The owner's writes as one job; the `n`th create without an id takes
    /// the id `[fresh, n, 1, 2, …]`.
    fn owner_writes(&self, requests: Vec<WriteRequest>, fresh: u8) -> Job {
        let user = &self.store.user;
        let writes = requests
            .into_iter()
            .enumerate()
            .map(|(n, request)| RecordWrite {
                request,
                access: Access::Owner {
                    entity: user.entity.clone(),
                },
                origin: WriteOrigin::default(),
                fresh_id: RecordId::from_bytes([
                    fresh, n as u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                ]),
                requested_at: self.store.provision_now.get(),
            })
            .collect();
        Job::Writes {
            user: user.clone(),
            writes,
        }
    }

    /// Runs a job now, outside the log: provisioning, as the CLI writes.
    fn provision(&self, job: &Job) -> Done {
        let provision_now = &self.store.provision_now;
        let now = provision_now.get();
        provision_now.set(RecordDate::from_unix_millis(now.unix_millis() + 1_000).expect("a date"));
        let committed = RefCell::default();
        let mut tx = Tx {
            db: &self.store.db,
            committed: &committed,
        };
        match tx.run(job.clone(), now).map(|finished| finished.outcome) {
            Ok(Ok(done)) => done,
            Ok(Err(refused)) => panic!("provisioning was refused: {refused}"),
            Err(failure) => panic!("provisioning failed: {failure}"),
        }
    }

    /// Writes a record as the owner, outside the log.
    pub fn owner_post(&self, body: Value) -> Record {
        self.owner_create(WriteRequest::post(body.to_string().as_bytes()).expect("a create body"))
    }

    /// Creates a record as the user's server itself does (the user's own
    /// Entity record: [`WriteRequest::by_server`]), outside the log.
    pub fn server_post(&self, body: Value) -> Record {
        let request = WriteRequest::post(body.to_string().as_bytes()).expect("a create body");
        self.owner_create(request.by_server())
    }

    fn owner_create(&self, request: WriteRequest) -> Record {
        let user = &self.store.user;
        let write = RecordWrite {
            request,
            access: Access::Owner {
                entity: user.entity.clone(),
            },
            origin: WriteOrigin::default(),
            fresh_id: RecordId::from_bytes(
                (0xee00_0000_0000_0000_0000_0000_0000_0000
                    + self.store.provision_now.get().unix_ticks() as u128)
                    .to_be_bytes(),
            ),
            requested_at: self.store.provision_now.get(),
        };
        let job = Job::Writes {
            user: user.clone(),
            writes: vec![write],
        };
        match self.provision(&job) {
            Done::Written(written) => written.answer.record,
            other => panic!("an owner write stored {other:?}"),
        }
    }

    /// Provisions an app as `folio app add` does: its App, Credentials and
    /// App Authorization records and its key row, outside the log. `scope`
    /// `None` is full access. Answers its signer, authorized.
    pub fn add_app(
        &self,
        app_id: RecordId,
        authorization_id: RecordId,
        key_seed: [u8; 32],
        scope: Option<Scope>,
    ) -> Signer {
        let signer = Signer::new(app_id, Some(authorization_id), key_seed);
        let full_access = scope.is_none();
        let scope = scope.unwrap_or_default();
        let entity = self.store.user.entity.clone();
        self.owner_post(app_record_body(
            &app_id,
            "Notes",
            "https://notes.example/done{?authorization_id}",
            &scope,
        ));
        let mut credentials_id = *app_id.as_bytes();
        credentials_id[0] ^= 0xff;
        self.owner_post(credentials_record_body(
            &RecordId::from_bytes(credentials_id),
            &entity,
            &app_id,
            &signer.public_key(),
            &ServerKeys::from_seed([0x5f; 32]),
        ));
        self.owner_post(authorization_record_body(
            &authorization_id,
            &entity,
            &app_id,
            &scope,
        ));
        self.provision(&Job::Statements(vec![insert_app_sql(
            self.store.user.id,
            &app_id,
            &signer.public_key(),
            full_access,
        )]));
        signer
    }

    /// Adds a user `name` at `entity` with the built-in types and an Entity
    /// record whose server is at `base_url`, outside the log: as `folio
    /// user add` makes one for this server's base URL, or as an archive of
    /// another server's user may bring one.
    pub fn add_user(&self, name: &str, entity: &str, base_url: &str) -> User {
        let entity: Entity = entity.parse().expect("an entity");
        let now = self.store.provision_now.get();
        let rows = query(
            &self.store.db,
            &insert_user_sql(name, &entity, PASSWORD_HASH, now),
        )
        .expect("a user");
        let id = rows[0].integer(0).expect("the user's id");
        for statement in seeds(id) {
            query(&self.store.db, &statement).expect("a built-in type");
        }
        let user = User {
            id,
            name: name.to_owned(),
            entity: entity.clone(),
        };
        let body = json!({
            "type": BuiltinType::Entity.link(),
            "permissions": {"read": "public"},
            "content": entity_content(&entity, name, base_url, Some(name), None),
        });
        let mut fresh_id = [0xe1; 16];
        fresh_id[..name.len().min(16)].copy_from_slice(&name.as_bytes()[..name.len().min(16)]);
        let write = RecordWrite {
            // The server creates a user's Entity record, as `folio user add` does.
            request: WriteRequest::post(body.to_string().as_bytes())
                .expect("a create body")
                .by_server(),
            access: Access::Owner { entity },
            origin: WriteOrigin::default(),
            fresh_id: RecordId::from_bytes(fresh_id),
            requested_at: self.store.provision_now.get(),
        };
        self.provision(&Job::Writes {
            user: user.clone(),
            writes: vec![write],
        });
        user
    }

    /// Runs a statement on the store, outside the log (a test's setup).
    pub fn execute(&self, sql: &str) {
        self.store
            .db
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("{e}: {sql}"));
    }

    /// The text in the first column of each row `sql` selects, outside
    /// the log.
    pub fn texts(&self, sql: &str) -> Vec<String> {
        let statement = Statement {
            sql: sql.to_owned(),
            params: Vec::new(),
        };
        let rows = query(&self.store.db, &statement).unwrap_or_else(|e| panic!("{e}: {sql}"));
        (rows.iter())
            .map(|row| row.text(0).expect("a text column").to_owned())
            .collect()
    }

    /// A count from the store, outside the log.
    pub fn count(&self, sql: &str) -> i64 {
        self.store
            .db
            .query_row(sql, [], |row| row.get(0))
            .unwrap_or_else(|e| panic!("{e}: {sql}"))
    }

    pub fn jobs(&self) -> Vec<JobRecord> {
        self.store.log.borrow().jobs.clone()
    }
}

impl Default for FakeHost {
    fn default() -> Self {
        FakeHost::new()
    }
}

fn job_kind(job: &Job) -> JobKind {
    match job {
        Job::Writes { writes, .. } => JobKind::Writes(writes.len()),
        Job::Registration { .. } => JobKind::Registration,
        Job::Statements(statements) | Job::Reschedule { statements, .. } => {
            JobKind::Statements(statements.iter().map(|s| s.sql.clone()).collect())
        }
    }
}

impl SqlStore {
    /// Runs a job of `kind` for store `user_id` with `run` in a
    /// transaction at the scheduler's time, and logs it: its answer and
    /// effects.
    fn job(
        &self,
        kind: JobKind,
        user_id: Option<i64>,
        run: impl FnOnce(&mut Tx<'_>) -> Result<Finished, String>,
    ) -> Result<(JobOutcome, Effects), WriteFailure> {
        if self.busy.get() {
            self.record_job(kind, Vec::new(), JobEnd::Busy);
            return Err(WriteFailure::Busy);
        }
        let committed = RefCell::default();
        let mut tx = Tx {
            db: &self.db,
            committed: &committed,
        };
        let outcome = run(&mut tx);
        let committed = committed.into_inner();
        match outcome.map(|finished| (finished.outcome, finished.effects)) {
            Ok((Ok(done), effects)) => {
                if let Some(user_id) = user_id {
                    let live = (effects.live.iter())
                        .map(|v| {
                            let entries = v.entries.clone();
                            LiveVersion::new(v.seq, v.record.clone(), entries, v.written_by)
                        })
                        .collect();
                    self.log.borrow_mut().published.push((user_id, live));
                }
                self.record_job(kind, committed, JobEnd::Stored);
                Ok((Ok(done), effects))
            }
            Ok((Err(refused), effects)) => {
                let problem = Problem::from(&refused).kind;
                self.record_job(kind, committed, JobEnd::Refused(problem));
                Ok((Err(refused), effects))
            }
            Err(failure) => {
                self.record_job(kind, committed, JobEnd::Failed(failure.clone()));
                Err(WriteFailure::Failed(failure))
            }
        }
    }

    fn record_job(&self, kind: JobKind, committed: Vec<String>, end: JobEnd) {
        self.log.borrow_mut().jobs.push(JobRecord {
            kind,
            now: self.scheduler_now.get(),
            committed,
            end,
        });
    }
}

impl Backend for SqlStore {
    type Error = DbError;

    async fn user(&self, name: &UserName) -> Result<Option<User>, DbError> {
        let rows = query(&self.db, &user_by_name_sql(name.as_str()))?;
        Ok(rows.first().map(|row| user_of(row)))
    }

    async fn users(&self) -> Result<Vec<User>, DbError> {
        Ok(query(&self.db, &users_sql())?
            .iter()
            .map(|row| user_of(row))
            .collect())
    }

    async fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, DbError> {
        if self.failing_store.get() {
            return Err(rusqlite::Error::InvalidQuery);
        }
        query(&self.db, statement)
    }

    async fn run(&self, job: Job) -> Result<JobOutcome, WriteFailure> {
        let kind = job_kind(&job);
        let user_id = job.user_id();
        let now = self.scheduler_now.get();
        self.job(kind, user_id, |tx| tx.run(job, now))
            .map(|(outcome, _)| outcome)
    }

    async fn commit(&self, decided: Decided) -> Result<(JobOutcome, Effects), WriteFailure> {
        let kind = job_kind(decided.job());
        let user_id = decided.user_id();
        let now = self.scheduler_now.get();
        self.job(kind, user_id, |tx| tx.commit_decided(decided, now))
    }

    async fn decide(&self, mut job: WriteJob<'_>) -> Result<Prepared, WriteFailure> {
        let committed = RefCell::default();
        let mut tx = Tx {
            db: &self.db,
            committed: &committed,
        };
        match tx.drive_counting(&mut job, &self.prepared_reads) {
            Ok(Some(finished)) => Ok(Prepared::Answered(finished.outcome)),
            Ok(None) => Ok(Prepared::Decided(job.decided())),
            Err(failure) => Err(WriteFailure::Failed(failure)),
        }
    }

    fn verify_password(&self, hash: &str, password: &str) -> bool {
        verify_password(hash, password)
    }

    fn clear_log(&self) {
        *self.log.borrow_mut() = JobLog::default();
    }
}

fn user_of(row: &[SqlValue]) -> User {
    User {
        id: row.integer(0).expect("an id"),
        name: row.text(1).expect("a name").to_owned(),
        entity: row.text(2).expect("an entity").parse().expect("an entity"),
    }
}
