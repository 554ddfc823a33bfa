//! SQLite through rusqlite: opening the database, applying core's migrations,
//! and running core's statements. The SQL text always comes from
//! `folio_core::store`; this module only binds values and reads rows.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use folio_core::Row;
use folio_core::service::respond::VersionRow;
use folio_core::store::{MIGRATIONS, Migration, SqlValue, Statement};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, params_from_iter};
use tokio::sync::Semaphore;

/// A database failure: always `server/500-internal` to the client, logged in full.
pub type DbError = rusqlite::Error;

/// How hard a commit waits for the disk (PROTOCOL: acknowledged writes survive a power loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`: every commit is on disk before it is acknowledged.
    Full,
    /// `synchronous=NORMAL`: survives a process crash; a power loss may lose
    /// the last commits.
    Normal,
}

/// How long a connection waits for another one's lock (the CLI beside a running server).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Prepared statements kept per connection: core's statement texts are a
/// few dozen shapes, so each is prepared once per connection.
const STATEMENT_CACHE: usize = 256;

/// Opens the database at `path` with the settings every connection shares.
fn open(path: &Path, durability: Durability, read_only: bool) -> Result<Connection, DbError> {
    let access = match read_only {
        true => OpenFlags::SQLITE_OPEN_READ_ONLY,
        false => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    };
    // Each connection is used by one thread at a time (the writer's, or a
    // reader lent out under a lock): SQLite's own mutexes are not needed.
    let conn = Connection::open_with_flags(path, access | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    if !read_only {
        conn.pragma_update(None, "journal_mode", "wal")?;
    }
    let synchronous = match durability {
        Durability::Full => "full",
        Durability::Normal => "normal",
    };
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    // Savepoints journal the pages they change: in memory, not in a
    // temporary file written page by page (one savepoint per job of a batch).
    conn.pragma_update(None, "temp_store", "memory")?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// The one connection that writes, with the schema migrated.
pub fn open_writer(path: &Path, durability: Durability) -> Result<Connection, DbError> {
    let conn = open(path, durability, false)?;
    migrate(&conn)?;
    Ok(conn)
}

/// A connection to an existing database, as it is (not migrated): for
/// reading it beside a running server (`folio backup`).
pub fn open_existing(path: &Path) -> Result<Connection, DbError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

/// How often the checkpointer copies committed pages from the WAL into the
/// database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// The checkpoint both the checkpointer and the writer run: it copies what
/// no reader still needs and never waits for a lock.
const PASSIVE_CHECKPOINT: &str = "PRAGMA wal_checkpoint(PASSIVE)";

/// How many frames the WAL may hold before the writer restarts it.
///
/// Under a steady stream of commits the checkpointer never finds the WAL
/// wholly copied at the moment a write begins, and only then does SQLite
/// start the WAL again from its first frame: left alone, the WAL grows for
/// as long as the writes go on (3.3 GB after a minute of creates, each
/// commit's frames appended to fresh pages of the file). Past this length
/// the checkpointer asks the writer to checkpoint between two batches,
/// which leaves nothing to copy when the next batch begins, so that batch
/// writes from the start of the WAL.
///
/// That checkpoint ends in an fsync of the database file on the writer's
/// thread, which no commit can pass: at 8,192 frames (32 MiB) it came
/// twice a second under creates, and the writer spent 8% of its time in
/// it. At 32,768 frames (128 MiB of 4 KiB pages, the largest the WAL file
/// grows to) it comes a quarter as often.
pub const WAL_RESTART_FRAMES: i64 = 32_768;

/// How many frames the checkpointer may leave for the writer's checkpoint
/// before a restart (4 MiB of 4 KiB pages).
///
/// The writer's checkpoint copies what the checkpointer has not, and no
/// commit passes it: with a quarter second of frames left (the
/// checkpointer's interval), it took 25 to 250 ms under creates on a store
/// of 150,000 (`folio_wal_restart_duration_seconds`). So before it asks,
/// the checkpointer copies again what came while it copied, until this
/// little is left.
const WAL_RESTART_LEFT_FRAMES: i64 = 1_024;

/// The most passes of [`WAL_RESTART_LEFT_FRAMES`]'s catch-up: if the
/// writes outpace the copies, the writer's checkpoint copies the rest.
const WAL_RESTART_CATCH_UP_PASSES: usize = 8;

/// How many copied frames the checkpointer lets wait in the OS's cache
/// before it flushes the database file itself (16 MiB of 4 KiB pages).
///
/// SQLite flushes the database file only at the end of a checkpoint that
/// copied the whole WAL, and under steady writes only the writer's, before
/// a restart, gets there: its `fsync` then wrote out everything the
/// checkpointer had copied since the last restart, up to 128 MiB, while no
/// commit could pass (25 to 250 ms on a store of 150,000). Flushed as it
/// goes, on the checkpointer's thread, it leaves the writer's little to do.
const WAL_FLUSH_FRAMES: i64 = 4_096;

/// Copies committed pages from the WAL into the database file, on a thread
/// of its own. SQLite's automatic checkpoint would run inside the writer's
/// commit that crosses 1,000 pages, and at FULL wait there for the
/// database file's fsync, with every queued write behind it; a passive
/// checkpoint beside the writer takes no lock the writer or a reader waits
/// for. Stops (after a last checkpoint) when it is dropped.
pub struct Checkpointer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Set by the checkpointer when the WAL is past [`WAL_RESTART_FRAMES`];
/// taken by the writer, which then restarts the WAL ([`restart_wal`]).
#[derive(Clone, Default)]
pub struct WalRestart(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl WalRestart {
    fn ask(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a restart was asked for since the last call.
    pub fn take(&self) -> bool {
        self.0.swap(false, std::sync::atomic::Ordering::Relaxed)
    }
}

/// A passive checkpoint on the writer's connection, outside a transaction:
/// the checkpointer has copied most of the WAL already, and once this
/// copies the rest (what no reader still needs), the writer's next
/// transaction starts the WAL again from its first frame.
pub fn restart_wal(writer: &Connection) {
    if let Err(error) = writer.query_row(PASSIVE_CHECKPOINT, [], |_| Ok(())) {
        tracing::warn!(%error, "a WAL checkpoint before restarting the WAL failed");
    }
}

impl Checkpointer {
    /// The checkpointer's connection; takes the checkpoints off `writer`.
    pub fn connect(
        path: &Path,
        durability: Durability,
        writer: &Connection,
    ) -> Result<Connection, DbError> {
        let conn = open(path, durability, false)?;
        writer.pragma_update(None, "wal_autocheckpoint", 0)?;
        Ok(conn)
    }

    /// Starts the thread on [`Checkpointer::connect`]'s connection; it asks
    /// `restart` of the writer when the WAL has grown too long.
    pub fn start(conn: Connection, restart: WalRestart) -> std::io::Result<Self> {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let database = match conn.path() {
            Some(path) if !path.is_empty() => Some(std::fs::File::open(path)?),
            _ => None,
        };
        let thread = std::thread::Builder::new()
            .name("folio-checkpoint".to_owned())
            .spawn(move || {
                let mut flushed = Flushed::default();
                loop {
                    let last = !matches!(
                        stopped.recv_timeout(CHECKPOINT_EVERY),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    );
                    match passive_checkpoint(&conn) {
                        Ok((frames, _)) if frames > WAL_RESTART_FRAMES => {
                            catch_up(&conn);
                            flushed.flush(database.as_ref(), i64::MAX);
                            restart.ask();
                        }
                        Ok((_, copied)) => flushed.flush_past(database.as_ref(), copied),
                        Err(error) => tracing::warn!(%error, "a WAL checkpoint failed"),
                    }
                    if last {
                        return;
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// How far into the WAL the checkpointer's copies are flushed to disk.
#[derive(Default)]
struct Flushed {
    /// Frames of the WAL (counted from its start) whose copies are flushed.
    frames: i64,
}

impl Flushed {
    /// Flushes the database file if more than [`WAL_FLUSH_FRAMES`] copied
    /// frames wait. `copied` counts from the WAL's start, so it falls back
    /// when the WAL restarts.
    fn flush_past(&mut self, database: Option<&std::fs::File>, copied: i64) {
        if copied < self.frames {
            self.frames = 0;
        }
        if copied - self.frames > WAL_FLUSH_FRAMES {
            self.flush(database, copied);
        }
    }

    /// Flushes the database file, its copies up to frame `copied` included.
    fn flush(&mut self, database: Option<&std::fs::File>, copied: i64) {
        let Some(file) = database else { return };
        match file.sync_data() {
            Ok(()) => self.frames = copied,
            Err(error) => tracing::warn!(%error, "flushing the database file failed"),
        }
    }
}

/// A passive checkpoint: the frames in the WAL, and how many of them are
/// copied into the database file.
fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    // (busy, frames in the WAL, frames copied)
    conn.query_row(PASSIVE_CHECKPOINT, [], |row| Ok((row.get(1)?, row.get(2)?)))
}

/// Copies what came while the last checkpoint ran, again, until at most
/// [`WAL_RESTART_LEFT_FRAMES`] are left for the writer's checkpoint.
fn catch_up(conn: &Connection) {
    for _ in 0..WAL_RESTART_CATCH_UP_PASSES {
        match passive_checkpoint(conn) {
            Ok((frames, copied)) if frames - copied > WAL_RESTART_LEFT_FRAMES => {}
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, "a WAL checkpoint failed");
                return;
            }
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The read-only connections, each lent to one query at a time.
///
/// A query runs on the thread that asks for it, to the end: a read of the
/// store takes microseconds, less than handing it to another thread and
/// waking up for the answer (what an async driver's worker thread costs,
/// twice per statement).
pub struct Readers {
    idle: Mutex<Vec<Reader>>,
    /// One permit per idle connection.
    available: Semaphore,
    budget: Duration,
}

/// The longest a read of the store may run before SQLite stops it: the
/// list and catch-up queries are index ranges that take micro- to
/// milliseconds, so only a pathological one reaches this, and it then
/// holds a reader and a core for no longer.
pub const READ_TIME_BUDGET: Duration = Duration::from_secs(2);

/// How many SQLite virtual-machine steps run between two looks at a read's
/// deadline (each look reads the clock: tens of nanoseconds).
const STEPS_PER_DEADLINE_CHECK: i32 = 10_000;

/// A read connection and the deadline its progress handler enforces.
struct Reader {
    conn: Connection,
    /// Nanoseconds after [`clock_base`]; `u64::MAX` while idle.
    deadline: Arc<AtomicU64>,
}

/// The instant read deadlines count from.
fn clock_base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn nanos_since_base(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(clock_base()).as_nanos()).unwrap_or(u64::MAX)
}

impl Reader {
    fn open(path: &Path) -> Result<Self, DbError> {
        let conn = open(path, Durability::Normal, true)?;
        let deadline = Arc::new(AtomicU64::new(u64::MAX));
        let watched = Arc::clone(&deadline);
        // Returning true interrupts the statement (SQLITE_INTERRUPT).
        conn.progress_handler(
            STEPS_PER_DEADLINE_CHECK,
            Some(move || nanos_since_base(Instant::now()) > watched.load(Ordering::Relaxed)),
        );
        Ok(Self { conn, deadline })
    }
}

impl Readers {
    /// Opens `size` read-only connections (at least one), each read on them
    /// stopped after `budget`.
    pub fn open(path: &Path, size: u32, budget: Duration) -> Result<Self, DbError> {
        let idle = (0..size.max(1))
            .map(|_| Reader::open(path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            available: Semaphore::new(idle.len()),
            idle: Mutex::new(idle),
            budget,
        })
    }

    /// Runs `read` on an idle connection, waiting for one if all are lent;
    /// SQLite stops it (`SQLITE_INTERRUPT`) once it runs past the budget.
    pub async fn with<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        // The semaphore is never closed, so acquiring only waits.
        let _permit = self.available.acquire().await;
        let reader = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        // A permit always finds a connection: one permit per idle connection.
        let reader = reader.ok_or(rusqlite::Error::InvalidQuery)?;
        let deadline = nanos_since_base(Instant::now() + self.budget);
        reader.deadline.store(deadline, Ordering::Relaxed);
        let result = read(&reader.conn);
        reader.deadline.store(u64::MAX, Ordering::Relaxed);
        if let Err(error) = &result
            && primary_code(error) == Some(rusqlite::ffi::SQLITE_INTERRUPT)
        {
            tracing::warn!(
                budget_ms = self.budget.as_millis(),
                "a read ran past its time budget and was stopped"
            );
        }
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(reader);
        result
    }

    /// Runs a query on an idle connection; its rows as core reads them.
    pub async fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, DbError> {
        self.with(|conn| fetch(conn, statement)).await
    }
}

/// A migrated database in memory, gone with its one connection: a scratch
/// store that runs writes whose statements are kept elsewhere (`--emit-sql`).
pub fn open_scratch() -> Result<Connection, DbError> {
    let conn = Connection::open_in_memory()?;
    conn.pragma_update(None, "foreign_keys", true)?;
    apply_migrations(&conn)?;
    Ok(conn)
}

/// Applies every migration above the database's `user_version`, and logs each.
/// A new database is one line, at its schema version; an older one, a line
/// for each migration applied.
fn migrate(conn: &Connection) -> Result<(), DbError> {
    let applied = apply_migrations(conn)?;
    match applied.as_slice() {
        [first, .., last] | [first @ last] if first.version == 1 => {
            tracing::info!(schema = last.version, "created the database");
        }
        upgrades => {
            for migration in upgrades {
                tracing::info!(
                    version = migration.version,
                    name = migration.name,
                    "migrated the database"
                );
            }
        }
    }
    Ok(())
}

/// Applies every migration above the database's `user_version`, each in
/// one transaction with its new version; returns those it applied.
fn apply_migrations(conn: &Connection) -> Result<Vec<&'static Migration>, DbError> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| i64::from(m.version) > current) {
        let mut sql = String::from("BEGIN IMMEDIATE;\n");
        sql.push_str(migration.sql);
        sql.push_str(&format!(
            "\nPRAGMA user_version = {};\nCOMMIT;",
            migration.version
        ));
        if let Err(error) = conn.execute_batch(&sql) {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(error);
        }
        applied.push(migration);
    }
    Ok(applied)
}

/// A statement's parameters as SQLite binds them.
fn params(statement: &Statement) -> impl Iterator<Item = ToSqlOutput<'_>> {
    statement.params.iter().map(|value| {
        ToSqlOutput::Borrowed(match value {
            SqlValue::Null => ValueRef::Null,
            SqlValue::Integer(n) => ValueRef::Integer(*n),
            SqlValue::Text(text) => ValueRef::Text(text.as_bytes()),
        })
    })
}

/// Runs a statement of fixed text that binds nothing and returns no rows
/// (`BEGIN`, `SAVEPOINT`, `RELEASE`, `COMMIT`): the writer runs several
/// for every job, so each is parsed once per connection, not every time.
pub fn control(conn: &Connection, sql: &'static str) -> Result<(), DbError> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Runs a statement that returns no rows; how many rows it changed.
pub fn execute(conn: &Connection, statement: &Statement) -> Result<usize, DbError> {
    conn.prepare_cached(&statement.sql)?
        .execute(params_from_iter(params(statement)))
}

/// Runs a query and maps each row.
pub fn query<T>(
    conn: &Connection,
    statement: &Statement,
    mut map: impl FnMut(&rusqlite::Row<'_>) -> Result<T, DbError>,
) -> Result<Vec<T>, DbError> {
    let mut prepared = conn.prepare_cached(&statement.sql)?;
    let mut rows = prepared.query(params_from_iter(params(statement)))?;
    let mut mapped = Vec::new();
    while let Some(row) = rows.next()? {
        mapped.push(map(row)?);
    }
    Ok(mapped)
}

/// Runs a query and returns its rows as core reads them.
pub fn fetch(conn: &Connection, statement: &Statement) -> Result<Vec<Row>, DbError> {
    query(conn, statement, row_values)
}

/// Runs a query whose rows are `(record, links)` versions (after `skip` leading columns).
pub fn fetch_versions(
    conn: &Connection,
    statement: &Statement,
    skip: usize,
) -> Result<Vec<VersionRow>, DbError> {
    query(conn, statement, |row| {
        Ok((row.get(skip)?, row.get(skip + 1)?))
    })
}

/// A row's values, by the type each value has (SQLite types values, not columns).
fn row_values(row: &rusqlite::Row<'_>) -> Result<Row, DbError> {
    (0..row.as_ref().column_count())
        .map(|column| {
            Ok(match row.get_ref(column)? {
                ValueRef::Null => SqlValue::Null,
                ValueRef::Integer(n) => SqlValue::Integer(n),
                ValueRef::Text(_) => SqlValue::Text(row.get(column)?),
                other => {
                    return Err(rusqlite::Error::InvalidColumnType(
                        column,
                        row.as_ref()
                            .column_name(column)
                            .map_or_else(|_| String::new(), str::to_owned),
                        other.data_type(),
                    ));
                }
            })
        })
        .collect()
}

/// SQLite's primary result code of a failed statement, if it has one.
pub fn primary_code(error: &DbError) -> Option<i32> {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => Some(failure.extended_code & 0xff),
        _ => None,
    }
}

/// Runs statements in order on one connection (inside the caller's transaction).
pub fn execute_all(conn: &Connection, statements: &[Statement]) -> Result<(), DbError> {
    for statement in statements {
        execute(conn, statement)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checkpointer flushes the database file once more than
    /// [`WAL_FLUSH_FRAMES`] copied frames wait, and counts again from the
    /// start when the WAL restarts.
    #[test]
    fn copies_are_flushed_past_the_threshold_and_counted_afresh_after_a_restart() {
        let path = std::env::temp_dir().join(format!("folio-flushed-{}", std::process::id()));
        std::fs::write(&path, b"pages").expect("a file");
        let file = std::fs::File::open(&path).expect("opened");
        let mut flushed = Flushed::default();
        flushed.flush_past(Some(&file), WAL_FLUSH_FRAMES);
        assert_eq!(flushed.frames, 0, "not past the threshold");
        flushed.flush_past(Some(&file), WAL_FLUSH_FRAMES + 1);
        assert_eq!(flushed.frames, WAL_FLUSH_FRAMES + 1, "flushed");
        flushed.flush_past(Some(&file), 2 * WAL_FLUSH_FRAMES);
        assert_eq!(flushed.frames, WAL_FLUSH_FRAMES + 1, "not yet again");
        flushed.flush(Some(&file), i64::MAX);
        flushed.flush_past(Some(&file), 10);
        assert_eq!(flushed.frames, 0, "the WAL restarted");
        flushed.flush_past(Some(&file), WAL_FLUSH_FRAMES + 1);
        assert_eq!(
            flushed.frames,
            WAL_FLUSH_FRAMES + 1,
            "counted from the start"
        );
        std::fs::remove_file(&path).expect("removed");
    }

    /// `folio user remove` and `folio backup --user` delete every row of a
    /// store: every table with a `user_id` column is in
    /// [`remove_stores_sql`](folio_core::store::remove_stores_sql), or a
    /// removal leaves rows behind, or fails on a foreign key.
    #[test]
    fn removing_a_store_empties_every_table_that_holds_users_rows() {
        let dir = std::env::temp_dir().join(format!("folio-remove-all-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let conn = open_writer(&dir.join("folio.db"), Durability::Normal).expect("a store");
        let mut tables = conn
            .prepare(
                "SELECT m.name FROM sqlite_schema m, pragma_table_info(m.name) c \
                 WHERE m.type = 'table' AND c.name = 'user_id' ORDER BY m.name",
            )
            .expect("a query");
        let tables: Vec<String> = tables
            .query_map([], |row| row.get(0))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("names");
        let removal =
            folio_core::store::remove_stores_sql(folio_core::store::StoresToRemove::Of(1));
        let missing: Vec<&String> = tables
            .iter()
            .filter(|table| {
                !removal
                    .iter()
                    .any(|s| s.sql.starts_with(&format!("DELETE FROM {table} ")))
            })
            .collect();
        assert!(missing.is_empty(), "not emptied on removal: {missing:?}");
        std::fs::remove_dir_all(&dir).expect("removed");
    }

    /// A read that would run for hours: a count to a trillion.
    const RUNAWAY: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n \
                           WHERE i < 1000000000000) SELECT count(*) FROM n";

    #[tokio::test]
    async fn a_read_past_its_budget_is_stopped_and_the_connection_serves_the_next() {
        let dir = std::env::temp_dir().join(format!("folio-read-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("folio.db");
        drop(open_writer(&path, Durability::Normal).expect("a migrated store"));
        let readers = Readers::open(&path, 1, Duration::from_millis(100)).expect("a reader");

        let started = Instant::now();
        let runaway = Statement {
            sql: RUNAWAY.to_owned(),
            params: Vec::new(),
        };
        let error = readers.fetch(&runaway).await.expect_err("stopped");
        assert_eq!(primary_code(&error), Some(rusqlite::ffi::SQLITE_INTERRUPT));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "stopped after {:?}",
            started.elapsed()
        );
        // The same connection (the only one) answers a quick read in full.
        let quick = Statement {
            sql: "SELECT count(*) FROM users".to_owned(),
            params: Vec::new(),
        };
        assert_eq!(readers.fetch(&quick).await.expect("rows").len(), 1);
        std::fs::remove_dir_all(&dir).expect("removed");
    }
}
