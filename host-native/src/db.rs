//! SQLite through sqlx: opening the database, applying core's migrations,
//! and running core's statements. The SQL text always comes from
//! `folio_core::store`; this module only binds values and reads rows.

use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use folio_core::respond::VersionRow;
use folio_core::service::store::Row;
use folio_core::store::{MIGRATIONS, Migration, SqlValue, Statement};
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqliteRow, SqliteSynchronous,
};
use sqlx::{Arguments, ConnectOptions, Row as _, SqliteConnection};
use tokio::sync::Semaphore;

/// A database failure: always `server/500-internal` to the client, logged in full.
pub type DbError = sqlx::Error;

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

fn options(path: &Path, durability: Durability) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(match durability {
            Durability::Full => SqliteSynchronous::Full,
            Durability::Normal => SqliteSynchronous::Normal,
        })
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT)
        // Savepoints journal the pages they change; in memory, not in a
        // temporary file written page by page (one per job of a batch).
        .pragma("temp_store", "memory")
        .statement_cache_capacity(256)
}

/// The one connection that writes, with the schema migrated.
pub async fn open_writer(path: &Path, durability: Durability) -> Result<SqliteConnection, DbError> {
    let mut conn = options(path, durability).connect().await?;
    migrate(&mut conn).await?;
    Ok(conn)
}

/// The read-only connections, each lent to one query at a time.
///
/// Not sqlx's pool: it pings a connection's worker thread when it lends
/// the connection and again when it takes it back, so each query cost
/// three round trips between threads instead of one. A read-only
/// connection outside a transaction needs neither check: a query dropped
/// half-way resets its statement, and SQLite reports a broken connection
/// on the next query.
pub struct Readers {
    idle: Mutex<Vec<SqliteConnection>>,
    /// One permit per idle connection.
    available: Semaphore,
}

impl Readers {
    /// Opens `size` read-only connections.
    pub async fn open(path: &Path, size: u32) -> Result<Self, DbError> {
        let options = options(path, Durability::Normal).read_only(true);
        let mut idle = Vec::new();
        for _ in 0..size.max(1) {
            idle.push(options.connect().await?);
        }
        Ok(Self {
            available: Semaphore::new(idle.len()),
            idle: Mutex::new(idle),
        })
    }

    /// Waits for an idle connection.
    async fn lease(&self) -> Lease<'_> {
        // The semaphore is never closed, so acquiring only waits.
        let permit = self.available.acquire().await.ok();
        let conn = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        Lease {
            readers: self,
            conn,
            _permit: permit,
        }
    }
}

/// A connection lent out; it goes back when the lease drops, even if the
/// query's future was dropped half-way.
struct Lease<'a> {
    readers: &'a Readers,
    conn: Option<SqliteConnection>,
    _permit: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl Lease<'_> {
    fn conn(&mut self) -> Result<&mut SqliteConnection, DbError> {
        // A permit always finds a connection: one permit per idle connection.
        self.conn.as_mut().ok_or(sqlx::Error::PoolClosed)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.readers
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(conn);
        }
    }
}

/// A migrated database in memory, gone with its one connection: a scratch
/// store that runs writes whose statements are kept elsewhere (`--emit-sql`).
pub async fn open_scratch() -> Result<SqliteConnection, DbError> {
    let mut conn = SqliteConnectOptions::from_str("sqlite::memory:")?
        .foreign_keys(true)
        .connect()
        .await?;
    apply_migrations(&mut conn).await?;
    Ok(conn)
}

/// Applies every migration above the database's `user_version`, and logs each.
async fn migrate(conn: &mut SqliteConnection) -> Result<(), DbError> {
    for migration in apply_migrations(conn).await? {
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "migrated the database"
        );
    }
    Ok(())
}

/// Applies every migration above the database's `user_version`, each in
/// one transaction with its new version; returns those it applied.
async fn apply_migrations(conn: &mut SqliteConnection) -> Result<Vec<&'static Migration>, DbError> {
    let current: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *conn)
        .await?;
    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| i64::from(m.version) > current) {
        let mut sql = String::from("BEGIN IMMEDIATE;\n");
        sql.push_str(migration.sql);
        sql.push_str(&format!(
            "\nPRAGMA user_version = {};\nCOMMIT;",
            migration.version
        ));
        if let Err(error) = sqlx::raw_sql(&sql).execute(&mut *conn).await {
            let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
            return Err(error);
        }
        applied.push(migration);
    }
    Ok(applied)
}

fn arguments(statement: &Statement) -> SqliteArguments<'static> {
    let mut args = SqliteArguments::default();
    for value in &statement.params {
        // Adding a value to SQLite arguments cannot fail for these types.
        let added = match value {
            SqlValue::Null => args.add(None::<i64>),
            SqlValue::Integer(n) => args.add(*n),
            SqlValue::Text(text) => args.add(text.clone()),
        };
        debug_assert!(added.is_ok());
    }
    args
}

/// Where a statement runs: the writer's connection, or a reader.
pub enum On<'a> {
    Conn(&'a mut SqliteConnection),
    Readers(&'a Readers),
}

impl<'a> From<&'a mut SqliteConnection> for On<'a> {
    fn from(conn: &'a mut SqliteConnection) -> Self {
        On::Conn(conn)
    }
}

impl<'a> From<&'a Readers> for On<'a> {
    fn from(readers: &'a Readers) -> Self {
        On::Readers(readers)
    }
}

/// Runs a statement that returns no rows.
pub async fn execute<'a>(on: impl Into<On<'a>>, statement: &Statement) -> Result<u64, DbError> {
    let query = sqlx::query_with(&statement.sql, arguments(statement));
    let done = match on.into() {
        On::Conn(conn) => query.execute(conn).await?,
        On::Readers(readers) => query.execute(readers.lease().await.conn()?).await?,
    };
    Ok(done.rows_affected())
}

/// Runs a query and returns its rows.
pub async fn fetch<'a>(
    on: impl Into<On<'a>>,
    statement: &Statement,
) -> Result<Vec<SqliteRow>, DbError> {
    let query = sqlx::query_with(&statement.sql, arguments(statement));
    match on.into() {
        On::Conn(conn) => query.fetch_all(conn).await,
        On::Readers(readers) => query.fetch_all(readers.lease().await.conn()?).await,
    }
}

/// Runs a query whose rows are `(record, links)` versions (after `skip` leading columns).
pub async fn fetch_versions<'a>(
    on: impl Into<On<'a>>,
    statement: &Statement,
    skip: usize,
) -> Result<Vec<VersionRow>, DbError> {
    fetch(on, statement)
        .await?
        .iter()
        .map(|row| Ok((row.try_get(skip)?, row.try_get(skip + 1)?)))
        .collect()
}

/// Runs a query and returns its rows as core reads them.
pub async fn fetch_rows<'a>(
    on: impl Into<On<'a>>,
    statement: &Statement,
) -> Result<Vec<Row>, DbError> {
    fetch(on, statement).await?.iter().map(row_values).collect()
}

/// A row's values, by the type each value has (SQLite types values, not columns).
fn row_values(row: &SqliteRow) -> Result<Row, DbError> {
    use sqlx::{TypeInfo, ValueRef};
    (0..row.len())
        .map(|column| {
            let raw = row.try_get_raw(column)?;
            if raw.is_null() {
                return Ok(SqlValue::Null);
            }
            Ok(match raw.type_info().name() {
                "INTEGER" => SqlValue::Integer(row.try_get(column)?),
                _ => SqlValue::Text(row.try_get(column)?),
            })
        })
        .collect()
}

/// Whether a statement failed on a constraint (SQLite's primary result
/// code 19: a unique index, a foreign key, a check, or a trigger's abort).
pub fn is_constraint(error: &DbError) -> bool {
    const SQLITE_CONSTRAINT: i32 = 19;
    match error {
        sqlx::Error::Database(database) => database
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .is_some_and(|code| code & 0xff == SQLITE_CONSTRAINT),
        _ => false,
    }
}

/// Runs statements in order on one connection (inside the caller's transaction).
pub async fn execute_all(
    conn: &mut SqliteConnection,
    statements: &[Statement],
) -> Result<(), DbError> {
    for statement in statements {
        execute(&mut *conn, statement).await?;
    }
    Ok(())
}
