//! `folio export` and `folio import`: one user's store as a Folio archive
//! (core's `archive`, documented in docs/archive.md), to move it to
//! another server, or to the worker (`--emit-sql`).
//!
//! The export reads the store in one read transaction, so the archive is
//! the store at one moment even while the server writes. The import checks
//! the whole archive as it runs its statements in one transaction, and
//! keeps the blob bytes in temporary files until the last line is read and
//! checked: a corrupt, cut or tampered archive leaves nothing behind.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use folio_core::model::{BlobHash, RecordDate, RecordId};
use folio_core::store::archive::{
    ARCHIVE_FORMAT, ARCHIVE_TABLES, AppKey, ArchiveError, ArchiveReader, ArchiveWriter,
    BLOB_CHUNK_BYTES, BlobLine, Header, MAX_LINE_BYTES, VersionOrder, export_app_keys_sql,
    export_blobs_sql, export_user_sql, export_versions_sql,
};
use folio_core::store::{LiteralSqlError, Statement, read_version, server_key_sql};
use rusqlite::Connection;

use crate::clock::Clock;
use crate::config::DataDir;
use crate::db;
use crate::users::ProvisionError;
use crate::writer::Tx;

/// Versions read per statement while exporting.
const EXPORT_PAGE: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("no user `{0}`")]
    NoUser(String),
    #[error(
        "user `{0}` exists here already: remove it first (folio user remove) or import elsewhere"
    )]
    UserExists(String),
    #[error("entity `{0}` is another user's here")]
    EntityTaken(String),
    #[error("the blob {hash} is linked by a record but its file is missing: {}", path.display())]
    MissingBlob { hash: String, path: PathBuf },
    #[error("the archive is refused, and nothing was imported: {0}")]
    Archive(#[from] ArchiveError),
    #[error("the store holds something an archive cannot carry: {0}")]
    Stored(String),
    #[error("database: {0}")]
    Db(#[from] db::DbError),
    #[error("{0}")]
    Sql(#[from] LiteralSqlError),
    #[error("{0}")]
    Provision(#[from] ProvisionError),
    #[error(
        "the D1 export has no table `{0}`: export these tables by name, \
         wrangler d1 export DB --output FILE --table users --table versions --table blobs --table apps"
    )]
    DumpLacks(&'static str),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> TransferError + '_ {
    move |source| TransferError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What was exported or imported.
#[derive(Debug, Default)]
pub struct Moved {
    pub versions: u64,
    pub blobs: u64,
    pub app_keys: u64,
    /// Why the archive's password hash was not kept (its argon2
    /// parameters are not this server's): the user has no password until
    /// `folio user passwd`.
    pub password_hash_refused: Option<String>,
    /// The warning of an entity made a user with `--allow-foreign-entity`
    /// ([`check_entity_here`](crate::users::check_entity_here)).
    pub foreign_entity_warning: Option<String>,
}

impl Moved {
    /// What the operator must do before the user can sign in, if anything.
    pub fn password_advice(&self, user: &str) -> Option<String> {
        self.password_hash_refused.as_ref().map(|reason| {
            format!(
                "The archive's password hash was not kept: it was {reason}. \
                 User `{user}` cannot sign in until you run `folio user passwd {user}`."
            )
        })
    }
}

/// Where a blob's bytes are, by its hash.
type BlobFiles = Box<dyn Fn(&str) -> PathBuf>;

/// Where an export reads.
pub enum Source<'a> {
    /// A data directory, while its server runs or not.
    Store(&'a DataDir),
    /// The worker's store: an SQL dump of its D1 database (`wrangler d1
    /// export DB --output FILE`) and a directory holding the user's R2
    /// objects, each in a file named by its key (`wrangler r2 object get
    /// BUCKET/KEY --file DIR/KEY`).
    Worker { dump: &'a Path, objects: &'a Path },
}

/// Writes the archive of `user`'s store to `file` (written beside it and
/// renamed when whole).
pub fn export(
    from: Source<'_>,
    user: &str,
    file: &Path,
    with_credentials: bool,
) -> Result<Moved, TransferError> {
    let (conn, order, blobs): (_, _, BlobFiles) = match from {
        Source::Store(data) => {
            let root = data.blobs();
            let conn = db::open_existing(&data.database())?;
            let blobs = Box::new(move |hash: &str| crate::blobs::file_path(&root, hash));
            (conn, VersionOrder::ReceivedAt, blobs)
        }
        Source::Worker { dump, objects } => {
            let root = objects.to_owned();
            let blobs = Box::new(move |hash: &str| root.join(hash));
            (load_dump(dump)?, VersionOrder::RowId, blobs)
        }
    };
    // One read transaction: the archive is the store at one moment.
    conn.execute_batch("BEGIN")?;
    let partial = file.with_extension("partial");
    let result = (|| {
        let out = std::fs::File::create(&partial).map_err(io(&partial))?;
        let mut out = std::io::BufWriter::new(out);
        let moved = write_archive(&conn, order, &*blobs, user, with_credentials, &mut out)?;
        let out = out
            .into_inner()
            .map_err(|error| io(&partial)(error.into_error()))?;
        out.sync_all().map_err(io(&partial))?;
        std::fs::rename(&partial, file).map_err(io(file))?;
        Ok(moved)
    })();
    let _ = conn.execute_batch("ROLLBACK");
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

fn write_archive(
    conn: &Connection,
    order: VersionOrder,
    blob_file: &dyn Fn(&str) -> PathBuf,
    name: &str,
    with_credentials: bool,
    out: &mut impl Write,
) -> Result<Moved, TransferError> {
    let stored = |error: &dyn std::fmt::Display| TransferError::Stored(error.to_string());
    let users = db::query(conn, &export_user_sql(name), |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, String>(2)?,
            row.get::<_, Option<String>>(3)?,
            row.get::<_, i64>(4)?,
        ))
    })?;
    let (user_id, entity, password_hash, created_at) = users
        .into_iter()
        .next()
        .ok_or_else(|| TransferError::NoUser(name.to_owned()))?;
    let server_key = match with_credentials {
        true => db::query(conn, &server_key_sql(user_id), |row| {
            row.get::<_, String>(0)
        })?
        .into_iter()
        .next(),
        false => None,
    };
    let header = Header {
        format: ARCHIVE_FORMAT,
        user: name.to_owned(),
        entity: entity.parse().map_err(|e| stored(&e))?,
        created_at: RecordDate::from_unix_ticks(created_at).map_err(|e| stored(&e))?,
        password_hash: password_hash.filter(|_| with_credentials),
        server_key,
        exported_at: Clock.now(),
    };
    let (mut writer, line) = ArchiveWriter::start(header);
    let mut put = |bytes: &[u8]| out.write_all(bytes).map_err(io(Path::new("the archive")));
    put(&line)?;
    let mut moved = Moved::default();
    let mut after = i64::MIN;
    loop {
        let page = db::query(
            conn,
            &export_versions_sql(user_id, order, after, EXPORT_PAGE),
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, i64>(3)?,
                ))
            },
        )?;
        let Some(last) = page.last() else { break };
        after = last.3;
        for (record, links, app, _) in page {
            let (record, entries) = read_version(&record, &links).map_err(|e| stored(&e))?;
            let app = app
                .map(|id| id.parse::<RecordId>())
                .transpose()
                .map_err(|e| stored(&e))?;
            put(&writer.version(record, &entries, app))?;
            moved.versions += 1;
        }
    }
    let blobs = db::query(conn, &export_blobs_sql(user_id), |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
            row.get::<_, Option<i64>>(3)?,
        ))
    })?;
    for (hash, size, uploaded_at, expires_at) in blobs {
        let parsed: BlobHash = hash.parse().map_err(|e| stored(&e))?;
        let path = blob_file(&hash);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            // Collected since the snapshot: it expired unlinked.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && expires_at.is_some() => {
                continue;
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(TransferError::MissingBlob { hash, path });
            }
            Err(error) => return Err(io(&path)(error)),
        };
        let date = |ticks| RecordDate::from_unix_ticks(ticks).map_err(|e| stored(&e));
        put(&writer.blob(BlobLine {
            hash: parsed,
            size: u64::try_from(size).map_err(|e| stored(&e))?,
            uploaded_at: date(uploaded_at)?,
            expires_at: expires_at.map(date).transpose()?,
        }))?;
        let mut reader = BufReader::with_capacity(BLOB_CHUNK_BYTES, file);
        let mut chunk = vec![0; BLOB_CHUNK_BYTES];
        loop {
            let read = read_full(&mut reader, &mut chunk).map_err(io(&path))?;
            if read == 0 {
                break;
            }
            put(&writer.blob_data(&chunk[..read]))?;
        }
        moved.blobs += 1;
    }
    let keys = db::query(conn, &export_app_keys_sql(user_id), |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, bool>(2)?,
        ))
    })?;
    for (app_id, public_key, full_access) in keys {
        put(&writer.app_key(AppKey {
            app_id: app_id.parse().map_err(|e| stored(&e))?,
            public_key,
            full_access,
        }))?;
        moved.app_keys += 1;
    }
    put(&writer.end())?;
    Ok(moved)
}

/// A `wrangler d1 export` dump in a database in memory, its tables only.
///
/// Its integers past 2^53 are rounded (the dump writes them through a
/// JavaScript number): dates' ticks, where several versions may share one
/// rounded `received_at`. So its indexes, which would refuse that, and its
/// triggers are left out, and versions are read in row order; what the
/// archive carries of each version is its record JSON, which is exact.
fn load_dump(dump: &Path) -> Result<Connection, TransferError> {
    let sql = std::fs::read_to_string(dump).map_err(io(dump))?;
    let conn = Connection::open_in_memory()?;
    conn.pragma_update(None, "foreign_keys", false)?;
    let mut batch = rusqlite::Batch::new(&conn, &sql);
    while let Some(mut statement) = batch.next()? {
        let text = statement.expanded_sql().unwrap_or_default();
        let head = text.trim_start().to_ascii_uppercase();
        if head.starts_with("CREATE INDEX")
            || head.starts_with("CREATE UNIQUE INDEX")
            || head.starts_with("CREATE TRIGGER")
        {
            continue;
        }
        statement.raw_execute()?;
    }
    for table in ARCHIVE_TABLES {
        let present: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)",
            [table],
            |row| row.get(0),
        )?;
        if !present {
            return Err(TransferError::DumpLacks(table));
        }
    }
    Ok(conn)
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Where an import goes.
pub enum Destination<'a> {
    /// Into this data directory's store, in one transaction.
    Store(&'a DataDir),
    /// Into an SQL script for D1 (`wrangler d1 execute DB --file SQL`) and
    /// a directory of blob files named by hash, each the R2 object of that
    /// key (`wrangler r2 object put BUCKET/HASH --file DIR/HASH`), for a
    /// worker serving at `base_url`.
    Worker {
        sql: &'a Path,
        blobs: &'a Path,
        base_url: &'a str,
    },
}

/// Imports the archive in `file` as a new user; the user's name and what
/// was imported. The user's Entity record is pointed at the destination's
/// base URL (a new version, as `folio serve` writes when its URL changes).
///
/// The archive's entity must be one this server may serve
/// ([`check_entity_here`](crate::users::check_entity_here)), or
/// `allow_foreign_entity`.
pub async fn import(
    file: &Path,
    to: Destination<'_>,
    allow_foreign_entity: bool,
) -> Result<(String, Moved), TransferError> {
    let input = std::fs::File::open(file).map_err(io(file))?;
    let mut input = BufReader::new(input);
    let mut reader = ArchiveReader::new();
    // The worker's statements run on a scratch store too: the same checks
    // (constraints, order) as an import here, and what the Entity record's
    // update reads.
    let (conn, blob_root, base_url) = match &to {
        Destination::Store(data) => {
            let base_url = data.settings().map_err(io(data.root()))?.base_url;
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            (conn, data.blobs().join("tmp"), base_url)
        }
        Destination::Worker {
            blobs, base_url, ..
        } => {
            std::fs::create_dir_all(blobs).map_err(io(blobs))?;
            let base_url = base_url.trim_end_matches('/').to_owned();
            (db::open_scratch()?, blobs.to_path_buf(), base_url)
        }
    };
    let mut pending = PendingBlobs::new(blob_root);
    let mut statements: Vec<Statement> = Vec::new();
    let mut began = false;
    let mut foreign_entity_warning = None;
    let result = async {
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = (&mut input)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(io(file))?;
            if read == 0 {
                break;
            }
            let step = reader.line(&line)?;
            if !began {
                check_free(&conn, &reader)?;
                if let Some(header) = reader.header() {
                    // The scratch store of a worker import holds nothing
                    // received: only the name is checked there.
                    let store = matches!(to, Destination::Store(_)).then_some(&conn);
                    foreign_entity_warning = crate::users::check_entity_here(
                        store,
                        &header.entity,
                        &base_url,
                        allow_foreign_entity,
                    )?;
                }
                conn.execute_batch("BEGIN IMMEDIATE")?;
                began = true;
            }
            db::execute_all(&conn, &step.statements)?;
            statements.extend(step.statements);
            if let Some((hash, bytes)) = step.blob_bytes {
                pending.append(hash, &bytes)?;
            }
            // An empty blob has no bytes to append: its file is made here.
            if let Some(hash) = step.blob_done {
                pending.append(hash, &[])?;
            }
            if step.finished {
                break;
            }
        }
        reader.finish()?;
        let name = reader
            .header()
            .map(|header| header.user.clone())
            .unwrap_or_default();
        let user = crate::users::list_users(&conn)?
            .into_iter()
            .find(|user| user.name == name)
            .ok_or_else(|| TransferError::NoUser(name.clone()))?;
        match &to {
            Destination::Store(data) => {
                crate::users::point_entity_record(&conn, &mut Tx::new(&conn), &user, &base_url)?;
                pending.place(|hash| crate::blobs::file_path(&data.blobs(), hash))?;
                conn.execute_batch("COMMIT")?;
            }
            Destination::Worker { sql, blobs, .. } => {
                let mut recording = Tx::recording(&conn);
                crate::users::point_entity_record(&conn, &mut recording, &user, &base_url)?;
                statements.extend(crate::emit::recorded(recording, user.id));
                pending.place(|hash| blobs.join(hash))?;
                let made_by = "folio import --emit-sql";
                crate::emit::write(sql, &crate::emit::script(made_by, &statements)?)
                    .map_err(io(sql))?;
            }
        }
        Ok(name)
    }
    .await;
    match result {
        Ok(user) => {
            let (versions, blobs, app_keys) = reader.counts();
            let moved = Moved {
                versions,
                blobs,
                app_keys,
                password_hash_refused: reader.password_hash_refused().map(ToString::to_string),
                foreign_entity_warning,
            };
            Ok((user, moved))
        }
        Err(error) => {
            if began {
                let _ = conn.execute_batch("ROLLBACK");
            }
            pending.discard();
            Err(error)
        }
    }
}

/// Refuses an archive whose user's name or entity is taken here, before
/// anything is written.
fn check_free(conn: &Connection, reader: &ArchiveReader) -> Result<(), TransferError> {
    let Some(header) = reader.header() else {
        return Ok(());
    };
    let users = crate::users::list_users(conn)?;
    if users.iter().any(|user| user.name == header.user) {
        return Err(TransferError::UserExists(header.user.clone()));
    }
    if users.iter().any(|user| user.entity == header.entity) {
        return Err(TransferError::EntityTaken(header.entity.to_string()));
    }
    Ok(())
}

/// Blob bytes kept in temporary files until the archive is read whole.
struct PendingBlobs {
    dir: PathBuf,
    files: BTreeMap<String, PathBuf>,
}

impl PendingBlobs {
    fn new(dir: PathBuf) -> Self {
        PendingBlobs {
            dir,
            files: BTreeMap::new(),
        }
    }

    fn append(&mut self, hash: BlobHash, bytes: &[u8]) -> Result<(), TransferError> {
        let hash = hash.to_string();
        let path = match self.files.get(&hash) {
            Some(path) => path.clone(),
            None => {
                let path = self
                    .dir
                    .join(format!(".import-{}-{hash}", std::process::id()));
                let _ = std::fs::remove_file(&path);
                self.files.insert(hash, path.clone());
                path
            }
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        file.write_all(bytes).map_err(io(&path))
    }

    /// Syncs each file and moves it to `target(hash)`.
    fn place(&mut self, target: impl Fn(&str) -> PathBuf) -> Result<(), TransferError> {
        for (hash, path) in std::mem::take(&mut self.files) {
            std::fs::File::open(&path)
                .and_then(|file| file.sync_all())
                .map_err(io(&path))?;
            let to = target(&hash);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::rename(&path, &to).map_err(io(&to))?;
        }
        Ok(())
    }

    fn discard(&mut self) {
        for path in std::mem::take(&mut self.files).into_values() {
            let _ = std::fs::remove_file(path);
        }
    }
}
