//! The archive of one user's store, to move it between servers and hosts
//! (`folio export`, `folio import`): Folio archive format 1, documented in
//! `docs/archive.md`.
//!
//! An archive is UTF-8 JSON Lines. Each line is one object with one key
//! naming what it holds, in this order:
//!
//! 1. `header`: the format, the user (name, entity, creation date, and the
//!    password's hash only when exported with credentials);
//! 2. `version`: every version of every record of the store, built-in
//!    types included, in received order: the record as served (receipt
//!    dates included), its link index entries and the app that wrote it;
//! 3. `blob`, each followed by its `blob_data` lines: the blobs the store
//!    holds, their bytes in base64, at most [`BLOB_CHUNK_BYTES`] a line;
//! 4. `app_key`: the apps' keys the server verifies signatures with;
//! 5. `end`: the counts, and the SHA-256 of every byte before that line.
//!
//! Reading checks everything it can before anything is kept: the last
//! line's SHA-256 covers every other byte, every version hash is computed
//! again from its record, versions come in strictly increasing receipt
//! order, and every blob's bytes have its size and hash. The host runs the
//! statements of an archive in one transaction and keeps the blob bytes
//! aside until [`ArchiveReader::line`] has read the `end` line: a corrupt
//! or tampered archive imports nothing.
//!
//! Sans-IO like the rest of core: the host reads the store with the
//! statements below and writes the lines [`ArchiveWriter`] makes; it feeds
//! the lines of a file to [`ArchiveReader`] and runs what it answers.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::auth::ServerKey;
use crate::model::{BlobHash, Entity, ReceivedRecord, Record, RecordDate, RecordId, UserName};
use crate::query::IndexEntry;
use crate::service::consent::{PasswordHashError, check_password_hash};
use crate::store::{
    Binder, Statement, WriteOrigin, insert_app_sql, insert_server_key_sql, insert_user_with_id_sql,
    user_row_id, version_statements,
};

/// The tables an archive of a store is written from. A D1 database holding
/// the search index (an FTS5 table) cannot be exported whole (`wrangler d1
/// export` refuses virtual tables), so an export for `folio export
/// --from-d1` names these: `--table users --table versions --table blobs
/// --table apps`. The search index is built again where the archive goes.
pub const ARCHIVE_TABLES: [&str; 4] = ["users", "versions", "blobs", "apps"];

/// The format this module writes and reads.
pub const ARCHIVE_FORMAT: u32 = 1;

/// The most blob bytes one `blob_data` line carries (before base64).
pub const BLOB_CHUNK_BYTES: usize = 1 << 20;

/// The longest line a reader accepts: a record is at most the JSON body
/// limit, a blob chunk [`BLOB_CHUNK_BYTES`] in base64.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// One line of an archive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Line {
    /// The first line: who the archive is of.
    Header(Header),
    /// One version of a record, in received order.
    Version(Box<VersionLine>),
    /// A blob the store holds; its `blob_data` lines follow.
    Blob(BlobLine),
    /// Some of the bytes of the blob before it.
    BlobData(BlobData),
    /// One app's key.
    AppKey(AppKey),
    /// The last line: the counts and the checksum.
    End(End),
}

/// Who the archive is of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// The archive format, [`ARCHIVE_FORMAT`]; a reader refuses any other.
    pub format: u32,
    /// The user's name on the exporting server; the importing server must be able to serve it.
    pub user: String,
    /// The user's entity.
    pub entity: Entity,
    /// When the user was created on the exporting server.
    pub created_at: RecordDate,
    /// The argon2id hash of the user's password, only in an archive made
    /// with credentials; without it the imported user cannot sign in until
    /// `folio user passwd`. A hash whose parameters are not the importing
    /// server's ([`check_password_hash`]) is not kept either: they would
    /// set the cost of every sign-in ([`ArchiveReader::password_hash_refused`]).
    pub password_hash: Option<String>,
    /// The seed of the user's server key (federation), only in an archive
    /// made with credentials: the user keeps the key other servers know
    /// them by. Without it the new server makes a new key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_key: Option<String>,
    /// When the archive was made.
    pub exported_at: RecordDate,
}

/// One version, as the store holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionLine {
    /// The record as served, receipt dates included.
    pub record: Record,
    /// The link index entries, `[path, key]`.
    pub links: Vec<(String, String)>,
    /// The app whose request wrote it; `None` for the owner's own writes.
    pub app: Option<RecordId>,
}

/// A blob the store holds; its bytes follow in `blob_data` lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobLine {
    /// The blob's SHA-256.
    pub hash: BlobHash,
    /// The blob's size in bytes.
    pub size: u64,
    /// When the blob was uploaded.
    pub uploaded_at: RecordDate,
    /// When an unlinked blob is collected; `None` once a record links it.
    pub expires_at: Option<RecordDate>,
}

/// The next bytes of the blob before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobData {
    /// The bytes, in standard base64 with padding.
    pub base64: String,
}

/// An app's key, as the server keeps it to check signatures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppKey {
    /// The app's record id.
    pub app_id: RecordId,
    /// The app's Ed25519 public key, base64.
    pub public_key: String,
    /// Whether the app was created on the server itself and may use every type, whatever its
    /// authorization grants.
    pub full_access: bool,
}

/// The last line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct End {
    /// How many `version` lines the archive holds.
    pub versions: u64,
    /// How many `blob` lines the archive holds.
    pub blobs: u64,
    /// How many `app_key` lines the archive holds.
    pub app_keys: u64,
    /// SHA-256 (hex) of every byte of the archive before this line.
    pub sha256: String,
}

/// Why an archive is refused; nothing of it is kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// A line that is not JSON of one of the archive's lines, or whose content is not of its form.
    #[error("line {line}: not an archive line: {reason}")]
    Malformed {
        /// The line's number, from 1.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A line longer than [`MAX_LINE_BYTES`].
    #[error("line {line}: longer than {MAX_LINE_BYTES} bytes")]
    TooLong {
        /// The line's number, from 1.
        line: u64,
    },
    /// A line in the wrong part of the archive.
    #[error("line {line}: a {found} line where {expected} was expected")]
    OutOfOrder {
        /// The line's number, from 1.
        line: u64,
        /// The kind of line found.
        found: &'static str,
        /// The kind of line the archive needed there.
        expected: &'static str,
    },
    /// The header names a format this server does not read.
    #[error("format {0} is not one this server reads (it reads {ARCHIVE_FORMAT})")]
    Format(u32),
    /// The header's user name is not a valid [`UserName`].
    #[error("the user name `{0}` is not one a server can serve")]
    UserName(String),
    /// A version whose hash, computed again from its record, is not the one it carries.
    #[error("line {line}: version {claimed} hashes to {computed}: the record was changed")]
    VersionHash {
        /// The line's number, from 1.
        line: u64,
        /// The hash the version carries.
        claimed: String,
        /// The hash its record computes to.
        computed: String,
    },
    /// A version without `received_at` or `version.received_at`.
    #[error("line {line}: the version lacks its receipt dates")]
    NotReceived {
        /// The line's number, from 1.
        line: u64,
    },
    /// A version received no later than the one before it.
    #[error("line {line}: versions are not in increasing received order")]
    ReceivedOrder {
        /// The line's number, from 1.
        line: u64,
    },
    /// A blob whose bytes are not base64 or do not match its line's size and hash.
    #[error("blob {hash}: {reason}")]
    Blob {
        /// The blob's hash, as its line gives it.
        hash: String,
        /// What is wrong with its bytes.
        reason: String,
    },
    /// The end line's count of some kind of line is not the number read.
    #[error("the end line counts {claimed} {what}, the archive holds {found}")]
    Count {
        /// Which kind of line: versions, blobs or app keys.
        what: &'static str,
        /// The count the end line gives.
        claimed: u64,
        /// The number of lines of that kind read.
        found: u64,
    },
    /// The SHA-256 of the bytes before the end line is not the one the end line gives.
    #[error("the archive's bytes do not match its SHA-256: it was changed or cut")]
    Checksum,
    /// The archive ended before its end line.
    #[error("the archive ends before its end line: it was cut")]
    Truncated,
    /// A line after the end line.
    #[error("line {line}: after the end line")]
    AfterEnd {
        /// The line's number, from 1.
        line: u64,
    },
}

fn line_name(line: &Line) -> &'static str {
    match line {
        Line::Header(_) => "header",
        Line::Version(_) => "version",
        Line::Blob(_) => "blob",
        Line::BlobData(_) => "blob_data",
        Line::AppKey(_) => "app_key",
        Line::End(_) => "end",
    }
}

/// Makes an archive's lines, keeping the counts and the running SHA-256.
pub struct ArchiveWriter {
    sha256: Sha256,
    versions: u64,
    blobs: u64,
    app_keys: u64,
}

impl ArchiveWriter {
    /// The writer and the header line.
    pub fn start(header: Header) -> (Self, Vec<u8>) {
        let mut writer = ArchiveWriter {
            sha256: Sha256::new(),
            versions: 0,
            blobs: 0,
            app_keys: 0,
        };
        let line = writer.line(&Line::Header(header));
        (writer, line)
    }

    fn line(&mut self, line: &Line) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(line).expect("an archive line serializes");
        bytes.push(b'\n');
        self.sha256.update(&bytes);
        bytes
    }

    /// A version's line, from its stored record and link index entries.
    pub fn version(
        &mut self,
        record: Record,
        entries: &[IndexEntry],
        app: Option<RecordId>,
    ) -> Vec<u8> {
        self.versions += 1;
        let links = entries
            .iter()
            .map(|entry| (entry.path.clone(), entry.key.clone()))
            .collect();
        self.line(&Line::Version(Box::new(VersionLine { record, links, app })))
    }

    /// A blob's line; its bytes follow with [`ArchiveWriter::blob_data`].
    pub fn blob(&mut self, blob: BlobLine) -> Vec<u8> {
        self.blobs += 1;
        self.line(&Line::Blob(blob))
    }

    /// The lines of some of the blob's bytes, [`BLOB_CHUNK_BYTES`] a line.
    pub fn blob_data(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in bytes.chunks(BLOB_CHUNK_BYTES) {
            let line = self.line(&Line::BlobData(BlobData {
                base64: STANDARD.encode(chunk),
            }));
            out.extend_from_slice(&line);
        }
        out
    }

    /// An app key's line.
    pub fn app_key(&mut self, key: AppKey) -> Vec<u8> {
        self.app_keys += 1;
        self.line(&Line::AppKey(key))
    }

    /// The end line, which closes the archive.
    pub fn end(self) -> Vec<u8> {
        let end = Line::End(End {
            versions: self.versions,
            blobs: self.blobs,
            app_keys: self.app_keys,
            sha256: hex::encode(self.sha256.finalize()),
        });
        let mut bytes = serde_json::to_vec(&end).expect("an archive line serializes");
        bytes.push(b'\n');
        bytes
    }
}

/// Where the reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Header,
    Versions,
    Blobs,
    AppKeys,
    Done,
}

/// A blob whose bytes are being read.
struct OpenBlob {
    hash: BlobHash,
    size: u64,
    read: u64,
    sha256: Sha256,
}

/// What to do with one line of an archive being imported.
#[derive(Debug, Default)]
pub struct Step {
    /// Statements to run, in order, in the import's one transaction.
    pub statements: Vec<Statement>,
    /// Bytes to append to the blob with this hash (kept aside until the
    /// archive is read whole).
    pub blob_bytes: Option<(BlobHash, Vec<u8>)>,
    /// A blob whose bytes are all read and checked.
    pub blob_done: Option<BlobHash>,
    /// The archive was read whole and checked: commit.
    pub finished: bool,
}

/// Reads an archive line by line, checking it, and answers the
/// statements that import it as a new user (row id [`user_row_id`] of its
/// name, on every host, as `--emit-sql` needs).
pub struct ArchiveReader {
    part: Part,
    line: u64,
    sha256: Sha256,
    user_id: i64,
    header: Option<Header>,
    last_received: Option<RecordDate>,
    versions: u64,
    blobs: u64,
    app_keys: u64,
    blob: Option<OpenBlob>,
    password_hash_refused: Option<PasswordHashError>,
}

impl Default for ArchiveReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ArchiveReader {
    /// A reader that expects the header line next.
    pub fn new() -> Self {
        ArchiveReader {
            part: Part::Header,
            line: 0,
            sha256: Sha256::new(),
            user_id: 0,
            header: None,
            last_received: None,
            versions: 0,
            blobs: 0,
            app_keys: 0,
            blob: None,
            password_hash_refused: None,
        }
    }

    /// Why the header's password hash was not kept (its parameters are not
    /// this server's), once the header is read: the user is imported
    /// without a password, and the operator sets one (`folio user passwd`).
    pub fn password_hash_refused(&self) -> Option<&PasswordHashError> {
        self.password_hash_refused.as_ref()
    }

    /// The archive's header, once read (its user name is a valid one).
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// The versions, blobs and app keys read so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.versions, self.blobs, self.app_keys)
    }

    /// The user's row id in the importing store.
    pub fn user_id(&self) -> i64 {
        self.user_id
    }

    /// Reads the next line (with its line break, if it has one).
    pub fn line(&mut self, bytes: &[u8]) -> Result<Step, ArchiveError> {
        self.line += 1;
        let line = self.line;
        if bytes.len() > MAX_LINE_BYTES {
            return Err(ArchiveError::TooLong { line });
        }
        if self.part == Part::Done {
            return Err(ArchiveError::AfterEnd { line });
        }
        let text = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let parsed: Line =
            serde_json::from_slice(text).map_err(|error| ArchiveError::Malformed {
                line,
                reason: error.to_string(),
            })?;
        if !matches!(parsed, Line::End(_)) {
            self.sha256.update(bytes);
        }
        let order = |expected| ArchiveError::OutOfOrder {
            line,
            found: line_name(&parsed),
            expected,
        };
        let mut step = Step::default();
        // A blob's bytes end where the next line is not more of them.
        if !matches!(parsed, Line::BlobData(_)) {
            step.blob_done = self.close_blob()?;
        }
        match (self.part, &parsed) {
            (Part::Header, Line::Header(header)) => {
                if header.format != ARCHIVE_FORMAT {
                    return Err(ArchiveError::Format(header.format));
                }
                let name: UserName = header
                    .user
                    .parse()
                    .map_err(|_| ArchiveError::UserName(header.user.clone()))?;
                self.user_id = user_row_id(name.as_str());
                self.header = Some(header.clone());
                let password_hash = match header.password_hash.as_deref().map(check_password_hash) {
                    Some(Err(refused)) => {
                        self.password_hash_refused = Some(refused);
                        None
                    }
                    _ => header.password_hash.as_deref(),
                };
                step.statements.push(insert_user_with_id_sql(
                    self.user_id,
                    &header.user,
                    &header.entity,
                    password_hash,
                    header.created_at,
                ));
                if let Some(seed) = &header.server_key {
                    let key = ServerKey::from_base64(seed).ok_or(ArchiveError::Malformed {
                        line,
                        reason: "the server key is not a base64 Ed25519 seed".into(),
                    })?;
                    step.statements.push(insert_server_key_sql(
                        self.user_id,
                        seed,
                        &key.public_base64(),
                    ));
                }
                self.part = Part::Versions;
            }
            (Part::Header, _) => return Err(order("the header")),
            (Part::Versions, Line::Version(version)) => {
                step.statements = self.version(line, version)?;
            }
            (Part::Versions | Part::Blobs, Line::Blob(blob)) => {
                self.part = Part::Blobs;
                self.blobs += 1;
                self.blob = Some(OpenBlob {
                    hash: blob.hash,
                    size: blob.size,
                    read: 0,
                    sha256: Sha256::new(),
                });
                step.statements.push(insert_blob_sql(self.user_id, blob));
            }
            (Part::Blobs, Line::BlobData(data)) => {
                let Some(open) = self.blob.as_mut() else {
                    return Err(order("a blob line before its bytes"));
                };
                let bytes = STANDARD
                    .decode(&data.base64)
                    .map_err(|error| ArchiveError::Blob {
                        hash: open.hash.to_string(),
                        reason: format!("its bytes are not base64: {error}"),
                    })?;
                open.read += bytes.len() as u64;
                if open.read > open.size {
                    return Err(ArchiveError::Blob {
                        hash: open.hash.to_string(),
                        reason: format!("more bytes than its size, {}", open.size),
                    });
                }
                open.sha256.update(&bytes);
                step.blob_bytes = Some((open.hash, bytes));
            }
            (Part::Versions | Part::Blobs | Part::AppKeys, Line::AppKey(key)) => {
                self.part = Part::AppKeys;
                self.app_keys += 1;
                step.statements.push(insert_app_sql(
                    self.user_id,
                    &key.app_id,
                    &key.public_key,
                    key.full_access,
                ));
            }
            (Part::Versions | Part::Blobs | Part::AppKeys, Line::End(end)) => {
                self.check_end(end)?;
                self.part = Part::Done;
                step.finished = true;
            }
            (Part::Versions, _) => return Err(order("a version, blob, app key or the end")),
            (Part::Blobs, _) => return Err(order("a blob, its bytes, an app key or the end")),
            (Part::AppKeys, _) => return Err(order("an app key or the end")),
            (Part::Done, _) => unreachable!("refused above"),
        }
        Ok(step)
    }

    /// The statements of one version, once its hash and order are checked.
    fn version(
        &mut self,
        line: u64,
        version: &VersionLine,
    ) -> Result<Vec<Statement>, ArchiveError> {
        let record = &version.record;
        let computed = record.hash_input().hash();
        if computed != record.version.hash {
            return Err(ArchiveError::VersionHash {
                line,
                claimed: record.version.hash.to_string(),
                computed: computed.to_string(),
            });
        }
        let received =
            ReceivedRecord::new(record.clone()).ok_or(ArchiveError::NotReceived { line })?;
        let at = received.version_received_at();
        if self.last_received.is_some_and(|last| at <= last) {
            return Err(ArchiveError::ReceivedOrder { line });
        }
        self.last_received = Some(at);
        self.versions += 1;
        let mut entries: Vec<IndexEntry> = version
            .links
            .iter()
            .map(|(path, key)| IndexEntry {
                path: path.clone(),
                key: key.clone(),
            })
            .collect();
        entries.sort_unstable();
        let origin = WriteOrigin {
            client_id: None,
            app: version.app,
        };
        Ok(version_statements(
            self.user_id,
            &received,
            &entries,
            // An archive's words are not trusted: the backfill finds them.
            None,
            origin,
        ))
    }

    /// Checks the blob whose bytes were being read, if any: its size and
    /// hash. Answers its hash.
    fn close_blob(&mut self) -> Result<Option<BlobHash>, ArchiveError> {
        let Some(open) = self.blob.take() else {
            return Ok(None);
        };
        let fault = |reason: String| ArchiveError::Blob {
            hash: open.hash.to_string(),
            reason,
        };
        if open.read != open.size {
            return Err(fault(format!(
                "{} bytes, not its size {}",
                open.read, open.size
            )));
        }
        let computed = hex::encode(open.sha256.clone().finalize());
        if computed != open.hash.to_string() {
            return Err(fault(format!("its bytes hash to {computed}")));
        }
        Ok(Some(open.hash))
    }

    fn check_end(&self, end: &End) -> Result<(), ArchiveError> {
        let counts = [
            ("versions", end.versions, self.versions),
            ("blobs", end.blobs, self.blobs),
            ("app keys", end.app_keys, self.app_keys),
        ];
        for (what, claimed, found) in counts {
            if claimed != found {
                return Err(ArchiveError::Count {
                    what,
                    claimed,
                    found,
                });
            }
        }
        if hex::encode(self.sha256.clone().finalize()) != end.sha256 {
            return Err(ArchiveError::Checksum);
        }
        Ok(())
    }

    /// Whether the end line was read: an archive that stops before it was cut.
    pub fn finish(&self) -> Result<(), ArchiveError> {
        match self.part {
            Part::Done => Ok(()),
            _ => Err(ArchiveError::Truncated),
        }
    }
}

/// Stores a blob's row as the archive has it.
fn insert_blob_sql(user_id: i64, blob: &BlobLine) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT INTO blobs (user_id, hash, size, uploaded_at, expires_at) VALUES ({}, {}, {}, {}, {})",
        b.bind(user_id),
        b.bind(blob.hash.to_string()),
        b.bind(i64::try_from(blob.size).unwrap_or(i64::MAX)),
        b.bind(blob.uploaded_at.unix_ticks()),
        b.bind(blob.expires_at.map(RecordDate::unix_ticks)),
    );
    b.finish(sql)
}

/// The user an export is of: at most one row `(id, name, entity,
/// password_hash, created_at)`.
pub fn export_user_sql(name: &str) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT id, name, entity, password_hash, created_at FROM users WHERE name = {}",
        b.bind(name)
    );
    b.finish(sql)
}

/// How [`export_versions_sql`] walks a store's versions in received order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionOrder {
    /// By `received_at`, on its index: a store as this schema keeps it.
    ReceivedAt,
    /// By row id: versions are only ever appended, in received order. For
    /// a copy whose `received_at` column cannot be trusted, such as a
    /// `wrangler d1 export` dump, which writes integers through a
    /// JavaScript number and rounds those past 2^53 (every date's ticks).
    RowId,
}

/// The next `limit` versions of a store after `after` (the last row's
/// fourth column), in received order: rows `(record, links, app_id, key)`.
pub fn export_versions_sql(user_id: i64, order: VersionOrder, after: i64, limit: u32) -> Statement {
    let key = match order {
        VersionOrder::ReceivedAt => "received_at",
        VersionOrder::RowId => "rowid",
    };
    let mut b = Binder::default();
    let sql = format!(
        "SELECT record, links, app_id, {key} FROM versions \
         WHERE user_id = {} AND {key} > {} ORDER BY {key} LIMIT {}",
        b.bind(user_id),
        b.bind(after),
        b.bind(i64::from(limit)),
    );
    b.finish(sql)
}

/// A store's blobs: rows `(hash, size, uploaded_at, expires_at)`.
pub fn export_blobs_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT hash, size, uploaded_at, expires_at FROM blobs WHERE user_id = {} ORDER BY hash",
        b.bind(user_id)
    );
    b.finish(sql)
}

/// A store's app keys: rows `(app_id, public_key, full_access)`.
pub fn export_app_keys_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT app_id, public_key, full_access FROM apps WHERE user_id = {} ORDER BY app_id",
        b.bind(user_id)
    );
    b.finish(sql)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::builtin::builtin_records;

    const BLOB: &[u8] = b"the bytes of a blob";

    /// An archive of the built-in records, a blob and an app key.
    fn archive() -> Vec<u8> {
        archive_with(None)
    }

    /// [`archive`] with `password_hash` in its header.
    fn archive_with(password_hash: Option<String>) -> Vec<u8> {
        let header = Header {
            format: ARCHIVE_FORMAT,
            user: "me".to_owned(),
            entity: "localhost".parse().unwrap(),
            created_at: RecordDate::from_unix_ticks(1).unwrap(),
            password_hash,
            server_key: None,
            exported_at: RecordDate::from_unix_ticks(2).unwrap(),
        };
        let (mut writer, mut out) = ArchiveWriter::start(header);
        for record in builtin_records() {
            out.extend(writer.version(record.clone(), &[], None));
        }
        let hash = BlobHash::from_bytes(Sha256::digest(BLOB).into());
        out.extend(writer.blob(BlobLine {
            hash,
            size: BLOB.len() as u64,
            uploaded_at: RecordDate::from_unix_ticks(3).unwrap(),
            expires_at: None,
        }));
        out.extend(writer.blob_data(BLOB));
        out.extend(writer.app_key(AppKey {
            app_id: RecordId::from_bytes([7; 16]),
            public_key: "key".to_owned(),
            full_access: true,
        }));
        out.extend(writer.end());
        out
    }

    fn read(bytes: &[u8]) -> Result<(Vec<Statement>, Vec<u8>), ArchiveError> {
        let mut reader = ArchiveReader::new();
        let (mut statements, mut blob) = (Vec::new(), Vec::new());
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            let step = reader.line(line)?;
            statements.extend(step.statements);
            if let Some((_, bytes)) = step.blob_bytes {
                blob.extend(bytes);
            }
        }
        reader.finish()?;
        Ok((statements, blob))
    }

    #[test]
    fn an_archive_reads_back_into_the_statements_that_import_it() {
        let (statements, blob) = read(&archive()).expect("the archive reads");
        assert_eq!(blob, BLOB);
        let versions = statements
            .iter()
            .filter(|s| s.sql.starts_with("INSERT INTO versions"))
            .count();
        assert_eq!(versions, builtin_records().len());
        assert!(statements[0].sql.starts_with("INSERT INTO users"));
        assert!(
            statements
                .iter()
                .any(|s| s.sql.starts_with("INSERT INTO blobs"))
        );
        assert!(
            statements
                .iter()
                .any(|s| s.sql.starts_with("INSERT INTO apps"))
        );
    }

    #[test]
    fn a_password_hash_is_kept_only_with_the_servers_parameters() {
        let users_row = |archive: Vec<u8>| {
            let mut reader = ArchiveReader::new();
            let line = archive.split_inclusive(|&b| b == b'\n').next().unwrap();
            let step = reader.line(line).expect("the header reads");
            let refused = reader.password_hash_refused().cloned();
            (step.statements[0].params[3].clone(), refused)
        };
        let on_policy = crate::service::consent::hash_password("correct horse", [1; 16]).unwrap();
        assert_eq!(
            users_row(archive_with(Some(on_policy.clone()))),
            (crate::store::SqlValue::Text(on_policy), None)
        );
        // m=256 MiB, t=8: every sign-in would cost 3 s and 273 MiB.
        let costly = "$argon2id$v=19$m=262144,t=8,p=1$AwMDAwMDAwMDAwMDAwMDAw$\
                      AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let (kept, refused) = users_row(archive_with(Some(costly.to_owned())));
        assert_eq!(kept, crate::store::SqlValue::Null, "the hash is not kept");
        assert!(
            matches!(
                refused,
                Some(PasswordHashError::Parameters {
                    memory_kib: 262_144,
                    ..
                })
            ),
            "{refused:?}"
        );
        // The rest of the archive imports as before.
        assert!(read(&archive_with(Some(costly.to_owned()))).is_ok());
    }

    #[test]
    fn every_changed_byte_is_refused() {
        let original = archive();
        // Every byte but line breaks (a changed one there splits or joins
        // lines: refused as well, just not as one line).
        for at in (0..original.len()).step_by(11) {
            let mut changed = original.clone();
            changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
            assert!(
                read(&changed).is_err(),
                "a change at byte {at} was accepted"
            );
        }
    }

    #[test]
    fn a_cut_archive_is_refused() {
        let original = archive();
        let cut = &original[..original.len() - 40];
        let cut = &cut[..=cut.iter().rposition(|&b| b == b'\n').unwrap()];
        assert_eq!(read(cut).err(), Some(ArchiveError::Truncated));
    }

    #[test]
    fn a_version_whose_record_changed_is_refused_by_its_hash() {
        let mut reader = ArchiveReader::new();
        let text = String::from_utf8(archive()).unwrap();
        let mut lines = text.lines();
        reader.line(lines.next().unwrap().as_bytes()).unwrap();
        let mut version: Line = serde_json::from_str(lines.next().unwrap()).unwrap();
        let Line::Version(v) = &mut version else {
            panic!("a version line")
        };
        v.record.created_at = RecordDate::from_unix_ticks(10_000_000).unwrap();
        let line = serde_json::to_vec(&version).unwrap();
        assert!(matches!(
            reader.line(&line),
            Err(ArchiveError::VersionHash { .. })
        ));
    }
}
