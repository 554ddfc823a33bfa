//! The SQL of a write: what answers each [`Need`] of a
//! [`Write`](crate::write::Write), and what stores its [`Commit`].
//!
//! A host runs a write like this: read [`last_received_at_sql`], drive the
//! write, answering each need with [`need_sql`] and [`NeedRows::answer`],
//! then run [`commit_statements`] in one transaction (an atomic batch on
//! D1). If that transaction fails on a constraint (another write to the
//! same record, or to the same store with a later `received_at`, committed
//! in between), it runs the whole write again from the start, at most
//! [`WRITE_ATTEMPTS`] times; a replay then finds what the other write
//! stored, and a stale parent becomes a version conflict.

use std::sync::Arc;

use crate::model::RecordDate;
use crate::query::{blob_key, existential_key, index_entries};
use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY};
use crate::service::blob::UNLINKED_BLOB_LIFETIME_MS;
use crate::write::{BlobFacts, Commit, MAX_BLOB_LINKERS, MAX_RECORDS_PER_WRITE, Need, Supplied};

use super::read::{latest_version_sql, version_sql};
use super::{
    Binder, DESCRIBED_ENTITY, Statement, StoredDataError, WriteOrigin, key_paths_cte, read_record,
    rows_with_key, version_statements,
};

/// The most dependants of one record a cascade reads: one more than a
/// write may delete, which is enough to refuse it
/// ([`WriteError::CascadeTooLarge`](crate::write::WriteError::CascadeTooLarge))
/// without loading every record that links a popular one.
const DEPENDANTS_READ: usize = MAX_RECORDS_PER_WRITE + 1;

/// How many times a host runs one write whose commit lost a race.
pub const WRITE_ATTEMPTS: usize = 3;

/// One row `(MAX(version.received_at) or NULL)`: the user's latest
/// `version.received_at`, for [`crate::write::WriteContext::last_received_at`],
/// as decimal text: D1 would read the integer through a JavaScript number,
/// which cannot hold 100 ns ticks exactly.
pub fn last_received_at_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT CAST(MAX(received_at) AS TEXT) FROM versions WHERE user_id = {}",
        b.bind(user_id)
    );
    b.finish(sql)
}

/// The statement that fetches one need, and the shape of its rows.
pub fn need_sql(user_id: i64, need: &Need, now: RecordDate) -> (Statement, NeedRows) {
    match need {
        Need::Latest(key) => (
            latest_version_sql(user_id, &key.entity, &key.record_id),
            NeedRows::Record,
        ),
        Need::Version { record, hash } => (
            version_sql(user_id, &record.entity, &record.record_id, hash),
            NeedRows::Record,
        ),
        Need::Entity(entity) => {
            let mut b = Binder::default();
            let user = b.bind(user_id);
            let entity = b.bind(entity.as_str());
            let sql = format!(
                "SELECT EXISTS (SELECT 1 FROM users WHERE entity = {entity}) \
                 OR EXISTS (SELECT 1 FROM versions v \
                 INDEXED BY versions_by_described_entity JOIN records r \
                 ON r.user_id = v.user_id AND r.author = v.author \
                 AND r.record_id = v.record_id AND r.version_hash = v.hash \
                 WHERE v.user_id = {user} AND {DESCRIBED_ENTITY} = {entity} \
                 AND r.type_record_id = {} AND r.type_entity = {} AND r.deleted = 0)",
                b.bind(BuiltinType::Entity.record_id().to_string()),
                b.bind(SYSTEM_ENTITY),
            );
            (b.finish(sql), NeedRows::Known)
        }
        Need::Blob(hash) => {
            // `uploaded_at` is the last upload of these bytes, whoever made it.
            let mut b = Binder::default();
            let since = now.saturating_sub_millis(UNLINKED_BLOB_LIFETIME_MS);
            let sql = format!(
                "SELECT size, uploaded_at > {} FROM blobs WHERE user_id = {} AND hash = {}",
                b.bind(since.unix_ticks()),
                b.bind(user_id),
                b.bind(hash.to_string()),
            );
            (b.finish(sql), NeedRows::Blob)
        }
        Need::BlobLinkers(hash) => (
            live_linking_sql(
                user_id,
                blob_key(hash),
                "ORDER BY r.public DESC",
                MAX_BLOB_LINKERS,
            ),
            NeedRows::Records,
        ),
        Need::Dependants(key) => (
            live_linking_sql(
                user_id,
                existential_key(&key.entity, &key.record_id),
                "",
                DEPENDANTS_READ,
            ),
            NeedRows::Records,
        ),
    }
}

/// The latest versions of at most `limit` live records whose latest version
/// has the link-index `key`, in `order` (an `ORDER BY` over `r`, or none):
/// rows `(record, links)`. The records are read from the entries
/// (`CROSS JOIN` fixes that order), not the entries looked up for every
/// record of the store.
fn live_linking_sql(user_id: i64, key: String, order: &str, limit: usize) -> Statement {
    let mut b = Binder::default();
    let user = b.bind(user_id);
    let key = b.bind(key);
    let sql = format!(
        "{}SELECT v.record, v.links FROM (SELECT DISTINCT record_row FROM ({})) k \
         CROSS JOIN records r ON r.row = k.record_row \
         JOIN versions v ON v.record_row = r.row AND v.hash = r.version_hash \
         WHERE r.user_id = {user} AND r.deleted = 0 {order} LIMIT {limit}",
        key_paths_cte(&user, &format!("({key})")),
        rows_with_key(&key),
    );
    b.finish(sql)
}

/// The rows a need's statement yields, and how they become its [`Supplied`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeedRows {
    /// `(record, links)` rows, at most one.
    Record,
    /// `(record, links)` rows.
    Records,
    /// One row of one integer, 0 or 1.
    Known,
    /// At most one row `(size, uploaded)`, integers.
    Blob,
}

/// One row of a need's answer, as the host's driver read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeedRow {
    /// A `(record, links)` row.
    Version {
        /// The version's JSON.
        record: String,
        /// Its index entries, as JSON.
        links: String,
    },
    /// A row of integers.
    Integers(Vec<i64>),
}

impl NeedRows {
    /// The answer these rows give.
    pub fn answer(self, rows: Vec<NeedRow>) -> Result<Supplied, StoredDataError> {
        let versions = || -> Result<Vec<_>, StoredDataError> {
            rows.iter()
                .filter_map(|row| match row {
                    NeedRow::Version { record, .. } => Some(read_record(record)),
                    NeedRow::Integers(_) => None,
                })
                .collect()
        };
        let integers = |at: usize| match rows.first() {
            Some(NeedRow::Integers(values)) => values.get(at).copied(),
            _ => None,
        };
        Ok(match self {
            NeedRows::Record => Supplied::Record(versions()?.into_iter().next().map(Arc::new)),
            NeedRows::Records => Supplied::Records(versions()?),
            NeedRows::Known => Supplied::Known(integers(0).is_some_and(|known| known != 0)),
            NeedRows::Blob => Supplied::Blob(match (integers(0), integers(1)) {
                (Some(size), Some(uploaded)) => Some(BlobFacts {
                    size: u64::try_from(size).unwrap_or_default(),
                    uploaded: uploaded != 0,
                }),
                _ => None,
            }),
        })
    }
}

/// The statements that store a commit, every version in order, to run in
/// one transaction. A replay stores nothing.
pub fn commit_statements(user_id: i64, commit: &Commit, origin: WriteOrigin) -> Vec<Statement> {
    commit
        .versions()
        .flat_map(|version| {
            version_statements(
                user_id,
                &version.record,
                &index_entries(&version.links),
                Some(&version.search_text),
                origin,
            )
        })
        .collect()
}
