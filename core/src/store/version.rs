//! Storing one version, and reading stored versions back.

use crate::model::{ClientId, ReceivedRecord, Record, RecordBody, RecordId, VersionHash};
use crate::query::IndexEntry;

use super::{Binder, Statement};

/// What the host knows about the request that wrote a version.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOrigin {
    /// The `X-Svc-Client-Id` it carried: events skip that client.
    pub client_id: Option<ClientId>,
    /// The app whose signed request it was (`None`: the owner's own).
    pub app: Option<RecordId>,
}

/// The statements that store one new version, to run in order in the
/// write's transaction (natively) or atomic batch (D1), after those of any
/// version written before it in the same write.
///
/// The schema itself refuses a version whose parent already has a child
/// or a second first version of a record (a concurrent write won), and a
/// `version.received_at` that does not increase; each makes the
/// transaction fail with a constraint error, after which the host runs the
/// write again from its first step.
///
/// `search_text` is the version's text for search
/// ([`crate::query::record_text`]); `None` when the writer does not know it
/// (an imported archive carries none): the version is stored unsearched,
/// and upkeep's backfill ([`super::Backfill`]) indexes it later.
pub fn version_statements(
    user_id: i64,
    record: &ReceivedRecord,
    entries: &[IndexEntry],
    search_text: Option<&str>,
    origin: WriteOrigin,
) -> Vec<Statement> {
    let replaces = match record.version.parent_hash {
        None => Replaces::Nothing,
        Some(_) => Replaces::Unread,
    };
    version_statements_replacing(user_id, record, entries, search_text, replaces, origin)
}

/// What a new version replaces in the store.
#[derive(Debug, Clone, Copy)]
pub enum Replaces<'a> {
    /// Nothing: it is its record's first stored version (its first
    /// version, or, for a record received from another server, the oldest
    /// the receiver could fetch).
    Nothing,
    /// Its parent, the record's latest, whose index entries (its `links`,
    /// as stored) the writer read.
    Read(&'a [IndexEntry]),
    /// Its parent, whose index entries the store reads.
    Unread,
}

/// [`version_statements`], given what the version replaces. With its
/// parent's index entries ([`Replaces::Read`]), the link index changes by
/// what differs between the two, known before the statements run, and an
/// update that keeps its links writes no link statement.
///
/// Sound whenever the version commits: the link index holds its record's
/// latest version's entries, and the one-child index lets a version
/// commit only while its parent is its record's latest.
pub fn version_statements_replacing(
    user_id: i64,
    record: &ReceivedRecord,
    entries: &[IndexEntry],
    search_text: Option<&str>,
    replaces: Replaces<'_>,
    origin: WriteOrigin,
) -> Vec<Statement> {
    let version_received_at = record.version_received_at().unix_ticks();
    let received_at = record.received_at().unix_ticks();
    let hash = record.version.hash.to_string();
    let author = record.author.entity.as_str();
    let record_id = record.id.to_string();
    let links = entries_json(entries);
    let record_json = serde_json::to_string(record.record()).expect("a record serializes");

    let mut statements = Vec::with_capacity(6);

    let first = matches!(replaces, Replaces::Nothing);

    // The version names its record's row: a new record takes the row after
    // the last (the one SQLite would give it), which its `records` row
    // then takes, below; a later version's record has its row already.
    let mut b = Binder::default();
    let user = b.bind(user_id);
    let row = match first {
        true => NEXT_RECORD_ROW.to_owned(),
        false => record_row(&mut b, &user, author, &record_id),
    };
    let sql = format!(
        "INSERT INTO versions (user_id, hash, author, record_id, parent_hash, received_at, links, \
         record, app_id, record_row, searched) \
         VALUES ({user}, {}, {}, {}, {}, {}, {}, {}, {}, {row}, {})",
        b.bind(hash.as_str()),
        b.bind(author),
        b.bind(record_id.as_str()),
        b.bind(parent_key(record.version.parent_hash.as_ref())),
        b.bind(version_received_at),
        b.bind(links.as_str()),
        b.bind(record_json),
        b.bind(origin.app.map(|app| app.to_string())),
        b.bind(search_text.map(|_| 1i64)),
    );
    statements.push(b.finish(sql));

    // A first version inserts its record's row, at the row its version
    // took (the last row is still the same one): a second first version of
    // the same record fails here, on the records' unique key (the one-child
    // index holds only versions with a parent). A later version replaces
    // the row's columns.
    let mut b = Binder::default();
    let values = [
        b.bind(user_id),
        b.bind(author),
        b.bind(record_id.as_str()),
        b.bind(record.source.as_str()),
        b.bind(record.type_link.entity.as_str()),
        b.bind(record.type_link.record_id.to_string()),
        b.bind(record.type_link.version_hash.to_string()),
        b.bind(record.created_at.unix_ticks()),
        b.bind(received_at),
        b.bind(hash.as_str()),
        b.bind(record.version.created_at.unix_ticks()),
        b.bind(version_received_at),
        b.bind(i64::from(matches!(record.body, RecordBody::Tombstone(_)))),
        b.bind(i64::from(record.permissions.is_public())),
        b.bind(record.version.author.entity.as_str()),
    ];
    const COLUMNS: &str = "user_id, author, record_id, source, type_entity, type_record_id, \
         type_hash, created_at, received_at, version_hash, version_created_at, \
         version_received_at, deleted, public, version_author";
    let values = values.join(", ");
    let sql = match first {
        true => {
            format!("INSERT INTO records (row, {COLUMNS}) VALUES ({NEXT_RECORD_ROW}, {values})")
        }
        false => format!(
            "INSERT INTO records ({COLUMNS}) VALUES ({values}) \
             ON CONFLICT (user_id, author, record_id) DO UPDATE SET source = excluded.source, \
             type_entity = excluded.type_entity, type_record_id = excluded.type_record_id, \
             type_hash = excluded.type_hash, version_hash = excluded.version_hash, \
             version_created_at = excluded.version_created_at, \
             version_received_at = excluded.version_received_at, deleted = excluded.deleted, \
             public = excluded.public, version_author = excluded.version_author"
        ),
    };
    statements.push(b.finish(sql));

    // The link index holds the latest version's entries (the envelope's
    // column paths aside); a version adds its entries the index lacks and
    // removes its parent's it no longer has. A first version's record is
    // new (one first version per record, by the records' unique key): it
    // has none to remove.
    let (removed, added) = match (record.version.parent_hash, replaces) {
        (None, _) | (_, Replaces::Nothing) => (Vec::new(), stored_difference(entries, &[])),
        // The parent's entries are known: only the difference is written.
        (Some(_), Replaces::Read(replaced)) => (
            stored_difference(replaced, entries),
            stored_difference(entries, replaced),
        ),
        // The store reads the parent's entries (from its `links`) and
        // removes those this version no longer has, by their exact keys;
        // the ones it keeps are left in place (`DO NOTHING` in the insert:
        // an entry the index holds already is passed over). Each side's
        // JSON is read once: the `NOT IN` list is built once per
        // statement, where a correlated `NOT EXISTS` read the new entries
        // again for every old one.
        (Some(parent), Replaces::Unread) => {
            let mut b = Binder::default();
            let user = b.bind(user_id);
            let row = record_row(&mut b, &user, author, &record_id);
            let sql = format!(
                "DELETE FROM link_index WHERE user_id = {user} AND (path, key, record_row) IN \
                 (SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), {row} \
                 FROM versions v, json_each(v.links) j WHERE v.record_row = {row} AND v.hash = {}) \
                 AND (path, key) NOT IN (SELECT json_extract(value, '$[0]'), \
                 json_extract(value, '$[1]') FROM json_each({}))",
                b.bind(parent.to_string()),
                b.bind(links.as_str()),
            );
            statements.push(b.finish(sql));
            (Vec::new(), stored_difference(entries, &[]))
        }
    };
    let change = |change, entries: &[&IndexEntry]| {
        link_statement(change, user_id, author, &record_id, entries)
    };
    statements.extend(change(LinkChange::Remove, &removed));
    statements.extend(change(LinkChange::Add, &added));
    statements.extend(text_statements(
        user_id,
        author,
        &record_id,
        !first,
        search_text,
    ));

    // A blob a record links is no longer collected.
    if entries.iter().any(IndexEntry::is_blob) {
        let mut b = Binder::default();
        let sql = format!(
            "UPDATE blobs SET expires_at = NULL WHERE user_id = {} AND expires_at IS NOT NULL \
             AND 'b:' || hash IN (SELECT json_extract(value, '$[1]') FROM json_each({}))",
            b.bind(user_id),
            b.bind(links.as_str()),
        );
        statements.push(b.finish(sql));
    }

    let mut b = Binder::default();
    let user = b.bind(user_id);
    statements.push(b.finish(format!(
        "UPDATE users SET event_seq = event_seq + 1 WHERE id = {user}"
    )));

    let mut b = Binder::default();
    let user = b.bind(user_id);
    let row = record_row(&mut b, &user, author, &record_id);
    let sql = format!(
        "INSERT INTO events (user_id, seq, version_hash, received_at, client_id, record_row) \
         VALUES ({user}, (SELECT event_seq FROM users WHERE id = {user}), {}, {}, {}, {row})",
        b.bind(hash.as_str()),
        b.bind(version_received_at),
        b.bind(origin.client_id.map(|id| id.to_string())),
    );
    statements.push(b.finish(sql));
    statements
}

/// The statements that keep the search index (`record_text`) at the
/// record's latest version: the row of a record that had one goes, and the
/// version's text, if it has any, comes in its place. Text unknown
/// (`None`) adds nothing: the version waits for the backfill.
fn text_statements(
    user_id: i64,
    author: &str,
    record_id: &str,
    replaces: bool,
    search_text: Option<&str>,
) -> Vec<Statement> {
    let mut statements = Vec::with_capacity(2);
    if replaces {
        let mut b = Binder::default();
        let user = b.bind(user_id);
        let row = record_row(&mut b, &user, author, record_id);
        statements.push(b.finish(format!("DELETE FROM record_text WHERE rowid = {row}")));
    }
    if let Some(text) = search_text.filter(|text| !text.is_empty()) {
        statements.push(index_text_sql(user_id, author, record_id, text));
    }
    statements
}

/// Indexes `text` as the search text of a record's row.
fn index_text_sql(user_id: i64, author: &str, record_id: &str, text: &str) -> Statement {
    let mut b = Binder::default();
    let user = b.bind(user_id);
    let row = record_row(&mut b, &user, author, record_id);
    let sql = format!(
        "INSERT INTO record_text (rowid, words) VALUES ({row}, {})",
        b.bind(text)
    );
    b.finish(sql)
}

/// The row a new record takes: the one after the last, as SQLite itself
/// numbers rows (`records.row` is the rowid, never given by hand otherwise).
const NEXT_RECORD_ROW: &str = "(SELECT IFNULL(MAX(row), 0) + 1 FROM records)";

/// The `records` row of one record, as a subquery; `user` is the user id's
/// placeholder, already bound in `b`.
fn record_row(b: &mut Binder, user: &str, author: &str, record_id: &str) -> String {
    format!(
        "(SELECT row FROM records WHERE user_id = {user} AND author = {} AND record_id = {})",
        b.bind(author),
        b.bind(record_id),
    )
}

/// The stored entries (not the envelope's column paths) of `entries` that
/// `other` does not have.
fn stored_difference<'e>(entries: &'e [IndexEntry], other: &[IndexEntry]) -> Vec<&'e IndexEntry> {
    let mut other: Vec<&IndexEntry> = other.iter().collect();
    other.sort_unstable();
    entries
        .iter()
        .filter(|entry| !entry.is_column() && other.binary_search(entry).is_err())
        .collect()
}

/// A change of the link index for one record.
#[derive(Debug, Clone, Copy)]
enum LinkChange {
    /// Adds entries; one the index holds already is passed over (the
    /// index is a set).
    Add,
    /// Removes entries by their exact keys.
    Remove,
}

/// The statement that makes `change` with `entries` for the record, if
/// there are any.
fn link_statement(
    change: LinkChange,
    user_id: i64,
    author: &str,
    record_id: &str,
    entries: &[&IndexEntry],
) -> Option<Statement> {
    if entries.is_empty() {
        return None;
    }
    let mut b = Binder::default();
    let user = b.bind(user_id);
    let row = record_row(&mut b, &user, author, record_id);
    let entries = b.bind(pairs_json(entries.iter().copied()));
    let sql = match change {
        LinkChange::Add => format!(
            "INSERT INTO link_index (user_id, path, key, record_row) \
             SELECT {user}, json_extract(value, '$[0]'), json_extract(value, '$[1]'), {row} \
             FROM json_each({entries}) WHERE true ON CONFLICT DO NOTHING"
        ),
        LinkChange::Remove => format!(
            "DELETE FROM link_index WHERE user_id = {user} AND (path, key, record_row) IN \
             (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), {row} \
             FROM json_each({entries}))"
        ),
    };
    Some(b.finish(sql))
}

/// `versions.parent_hash`: the parent, or `''` for a first version.
fn parent_key(parent: Option<&VersionHash>) -> String {
    parent.map(VersionHash::to_string).unwrap_or_default()
}

/// Index entries as stored in `versions.links`: `[[path, key], …]`.
pub fn entries_json(entries: &[IndexEntry]) -> String {
    pairs_json(entries.iter())
}

/// `[[path, key], …]` of some entries.
fn pairs_json<'e>(entries: impl IntoIterator<Item = &'e IndexEntry>) -> String {
    let pairs: Vec<[&str; 2]> = entries
        .into_iter()
        .map(|e| [e.path.as_str(), e.key.as_str()])
        .collect();
    serde_json::to_string(&pairs).expect("strings serialize")
}

/// A stored row that does not read back: the database was changed behind
/// Folio's back, or by a version of Folio that wrote another format.
#[derive(Debug, thiserror::Error)]
#[error("a stored {what} does not read back: {source}")]
pub struct StoredDataError {
    what: &'static str,
    source: serde_json::Error,
}

/// A stored version's record, from its record JSON.
pub fn read_record(record: &str) -> Result<Record, StoredDataError> {
    serde_json::from_str(record).map_err(|source| StoredDataError {
        what: "record",
        source,
    })
}

/// A stored version's record JSON as it is, checked to be JSON (not read
/// into a [`Record`]), to be served as the store holds it.
pub fn stored_json(record: &str) -> Result<&serde_json::value::RawValue, StoredDataError> {
    serde_json::from_str(record).map_err(|source| StoredDataError {
        what: "record",
        source,
    })
}

/// A stored version's `links` column: its index entries, sorted.
pub fn read_links(links: &str) -> Result<Vec<IndexEntry>, StoredDataError> {
    let pairs: Vec<(String, String)> =
        serde_json::from_str(links).map_err(|source| StoredDataError {
            what: "link index",
            source,
        })?;
    let mut entries: Vec<IndexEntry> = pairs
        .into_iter()
        .map(|(path, key)| IndexEntry { path, key })
        .collect();
    entries.sort_unstable();
    Ok(entries)
}

/// A stored version: its record JSON and its `links` column.
pub fn read_version(
    record: &str,
    links: &str,
) -> Result<(Record, Vec<IndexEntry>), StoredDataError> {
    Ok((read_record(record)?, read_links(links)?))
}
