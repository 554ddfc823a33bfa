//! `folio backup DIR`: a consistent copy of a data directory, taken while
//! `folio serve` runs and writes.
//!
//! The database is copied with `VACUUM INTO`, one read transaction: in WAL
//! mode the writer goes on meanwhile, and the copy is the store as of that
//! transaction's start, whole. Then the blob files the copy's rows name
//! (content-addressed files are written before the row that names them
//! commits, and a named file is only removed once it expired unlinked:
//! such a row is dropped from the copy), then the settings, the session
//! key and the TLS certificate. Blob files never change once written, so
//! on the data directory's filesystem they are hard-linked, not copied.
//! Everything is written under a hidden directory beside DIR, checked
//! (`PRAGMA integrity_check`), made durable with one flush of its
//! filesystem, and renamed to DIR at the end: DIR is a whole backup or
//! nothing. (A flush per file made the server's own commits wait behind
//! hundreds of journal commits: writes stalled for the whole backup.)
//! `folio serve --data-dir DIR` starts on it as it is.

use std::path::{Path, PathBuf};

use folio_core::store::{
    StoresToRemove, blob_held_sql, delete_blob_sql, held_blobs_sql, remove_stores_sql,
};
use rusqlite::Connection;

use crate::config::DataDir;
use crate::db;
use crate::users::list_users;

/// Why a backup failed; nothing is left at the destination.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0} exists: a backup goes to a new directory")]
    Exists(PathBuf),
    #[error("no database in {0}: is it a data directory?")]
    NoDatabase(PathBuf),
    #[error("no user `{0}`")]
    NoUser(String),
    #[error("the blob {0} is linked by a record but its file is missing from the data directory")]
    MissingBlob(String),
    #[error("the copy fails SQLite's integrity check: {0}")]
    Integrity(String),
    #[error("database: {0}")]
    Db(#[from] db::DbError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a backup holds.
#[derive(Debug)]
pub struct Backup {
    pub users: usize,
    pub blobs: usize,
    pub blob_bytes: u64,
}

/// The files a data directory holds besides its database and blobs, as
/// paths relative to it; each is copied when present.
const SIDE_FILES: &[&str] = &[
    "settings.json",
    "session.key",
    "tls/cert.pem",
    "tls/key.pem",
];

/// Copies `data` to the new directory `to`: every user's store, or only
/// `user`'s.
pub fn backup(data: &DataDir, to: &Path, user: Option<&str>) -> Result<Backup, BackupError> {
    if to.exists() {
        return Err(BackupError::Exists(to.to_owned()));
    }
    if !data.database().exists() {
        return Err(BackupError::NoDatabase(data.root().to_owned()));
    }
    let name = to
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backup".to_owned());
    let partial = to.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let result = copy_into(data, &partial, user).and_then(|backup| {
        let io = |source| BackupError::Io {
            path: to.to_owned(),
            source,
        };
        std::fs::rename(&partial, to).map_err(io)?;
        sync_dir(
            to.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        )?;
        Ok(backup)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    result
}

fn copy_into(data: &DataDir, dir: &Path, user: Option<&str>) -> Result<Backup, BackupError> {
    let copy = DataDir::open(dir).map_err(|source| BackupError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let database = copy.database();
    {
        let source = db::open_existing(&data.database())?;
        source.execute("VACUUM INTO ?1", [database.to_string_lossy()])?;
    }
    let conn = Connection::open(&database)?;
    if let Some(name) = user {
        keep_only(&conn, name)?;
    }
    let (blobs, blob_bytes) = copy_blobs(&conn, &data.blobs(), &copy.blobs())?;
    let check: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
    if check != "ok" {
        return Err(BackupError::Integrity(check));
    }
    let users = list_users(&conn)?.len();
    drop(conn);
    for side in SIDE_FILES {
        let from = data.root().join(side);
        if from.exists() {
            copy_file(&from, &dir.join(side))?;
        }
    }
    flush(dir)?;
    Ok(Backup {
        users,
        blobs,
        blob_bytes,
    })
}

/// Deletes every store but `name`'s from the copy, and compacts it.
fn keep_only(conn: &Connection, name: &str) -> Result<(), BackupError> {
    let user_id = list_users(conn)?
        .into_iter()
        .find(|user| user.name == name)
        .ok_or_else(|| BackupError::NoUser(name.to_owned()))?
        .id;
    conn.execute_batch("BEGIN")?;
    db::execute_all(conn, &remove_stores_sql(StoresToRemove::AllBut(user_id)))?;
    conn.execute_batch("COMMIT; VACUUM")?;
    Ok(())
}

/// Copies the blob files the copy's rows name; a row whose file was
/// collected since the snapshot (it expired unlinked) leaves the copy.
fn copy_blobs(conn: &Connection, from: &Path, to: &Path) -> Result<(usize, u64), BackupError> {
    let path = crate::blobs::file_path;
    let (mut count, mut bytes) = (0, 0);
    let held = db::query(conn, &held_blobs_sql(), |row| row.get::<_, String>(0))?;
    for hash in &held {
        let hash = hash.as_str();
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BackupError::Integrity(format!("a blob row names `{hash}`")));
        }
        let source = path(from, hash);
        if !source.exists() {
            for user in list_users(conn)? {
                db::execute(conn, &delete_blob_sql(user.id, hash))?;
            }
            let still_held = db::query(conn, &blob_held_sql(hash), |row| row.get::<_, bool>(0))?;
            if still_held.first() == Some(&true) {
                return Err(BackupError::MissingBlob(hash.to_owned()));
            }
            continue;
        }
        let target = path(to, hash);
        let io = |source| BackupError::Io {
            path: target.clone(),
            source,
        };
        std::fs::create_dir_all(target.parent().expect("a blob path has a parent")).map_err(io)?;
        bytes += match std::fs::hard_link(&source, &target) {
            Ok(()) => std::fs::metadata(&target).map_err(io)?.len(),
            // Another filesystem, or one without hard links.
            Err(_) => copy_file(&source, &target)?,
        };
        count += 1;
    }
    Ok((count, bytes))
}

/// Copies a file, permissions included; its length.
fn copy_file(from: &Path, to: &Path) -> Result<u64, BackupError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|source| BackupError::Io {
            path: parent.to_owned(),
            source,
        })?;
    }
    std::fs::copy(from, to).map_err(|source| BackupError::Io {
        path: from.to_owned(),
        source,
    })
}

/// Makes everything written under `dir` durable: one `syncfs` of its
/// filesystem on Linux, else a sync of each file and directory.
fn flush(dir: &Path) -> Result<(), BackupError> {
    #[cfg(target_os = "linux")]
    {
        let root = std::fs::File::open(dir).map_err(|source| BackupError::Io {
            path: dir.to_owned(),
            source,
        })?;
        rustix::fs::syncfs(&root).map_err(|errno| BackupError::Io {
            path: dir.to_owned(),
            source: errno.into(),
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        for entry in std::fs::read_dir(dir).map_err(|source| BackupError::Io {
            path: dir.to_owned(),
            source,
        })? {
            let path = entry
                .map_err(|source| BackupError::Io {
                    path: dir.to_owned(),
                    source,
                })?
                .path();
            if path.is_dir() {
                flush(&path)?;
            } else {
                sync_file(&path)?;
            }
        }
        sync_dir(dir)
    }
}

fn sync_file(path: &Path) -> Result<(), BackupError> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|source| BackupError::Io {
            path: path.to_owned(),
            source,
        })
}

/// Makes a directory's entries durable (a no-op where directories cannot be opened).
fn sync_dir(path: &Path) -> Result<(), BackupError> {
    #[cfg(unix)]
    {
        sync_file(path)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}
