//! The search index's backfill: versions stored without being indexed
//! (before migration 11, or imported from an archive), found by upkeep
//! ([`crate::service::UpkeepRound`]) a batch at a time on both hosts.
//!
//! A version stored unsearched has `versions.searched` NULL. The record's
//! latest has its text found from its schema and indexed in `record_text`;
//! every one is marked searched and never read again.

use std::sync::Arc;

use crate::model::Record;
use crate::service::store::{Row, RowError, RowExt};
use crate::write::Types;

use super::{Binder, Statement, read_record};

/// How many unsearched versions one backfill batch reads.
pub const SEARCH_BACKFILL_BATCH: i64 = 200;

/// Up to [`SEARCH_BACKFILL_BATCH`] unsearched versions, through the partial
/// index that holds only them: rows `(user_id, record_row, hash, record,
/// type record)`, the last two NULL unless the version is its record's
/// latest.
pub fn unsearched_sql() -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT v.user_id, v.record_row, v.hash, \
         CASE WHEN r.version_hash = v.hash THEN v.record END, \
         CASE WHEN r.version_hash = v.hash THEN (SELECT t.record FROM records tr \
         JOIN versions t ON t.record_row = tr.row AND t.hash = r.type_hash \
         WHERE tr.user_id = r.user_id AND tr.author = r.type_entity \
         AND tr.record_id = r.type_record_id) END \
         FROM versions v INDEXED BY versions_unsearched \
         LEFT JOIN records r ON r.row = v.record_row \
         WHERE v.searched IS NULL LIMIT {}",
        b.bind(SEARCH_BACKFILL_BATCH)
    );
    b.finish(sql)
}

/// What a backfill batch read and what it writes.
#[derive(Debug, Default)]
pub struct Backfill {
    /// The statements that store the batch's words, in one transaction.
    pub statements: Vec<Statement>,
    /// Latest versions indexed.
    pub searched: usize,
    /// Latest versions whose text could not be found (a stored record or
    /// type that does not read back, or no longer validates): marked with
    /// none, and counted.
    pub unreadable: usize,
}

impl Backfill {
    /// The statements for the rows of [`unsearched_sql`].
    pub fn of(rows: &[Row]) -> Result<Backfill, RowError> {
        let mut types = Types::default();
        let mut backfill = Backfill::default();
        for row in rows {
            let user_id = row.integer(0)?;
            let record_row = row.integer(1)?;
            let hash = row.text(2)?;
            let text = match (row.optional_text(3)?, row.optional_text(4)?) {
                (Some(record), type_record) => match text_of(&mut types, record, type_record) {
                    Some(text) => {
                        backfill.searched += 1;
                        Some(text)
                    }
                    None => {
                        backfill.unreadable += 1;
                        None
                    }
                },
                // Not its record's latest: nothing to index.
                (None, _) => None,
            };
            backfill.statements.extend(searched_statements(
                user_id,
                record_row,
                hash,
                text.as_deref(),
            ));
        }
        Ok(backfill)
    }
}

/// The search text of a stored latest version, from its type's schema.
fn text_of(types: &mut Types, record: &str, type_record: Option<&str>) -> Option<String> {
    let record: Record = read_record(record).ok()?;
    let type_record: Option<Arc<Record>> = match type_record {
        Some(json) => Some(Arc::new(read_record(json).ok()?)),
        None => None,
    };
    let record_type = types.get(&record.type_link, type_record.as_deref()).ok()?;
    Some(record_type.schema.validate(&record).ok()?.search_text)
}

/// A version marked searched; a latest's text indexed too, if it is still
/// the latest when the batch commits (a write in between indexed its own).
fn searched_statements(
    user_id: i64,
    record_row: i64,
    hash: &str,
    text: Option<&str>,
) -> Vec<Statement> {
    let mut statements = Vec::with_capacity(3);
    let mut b = Binder::default();
    let sql = format!(
        "UPDATE versions SET searched = 1 WHERE record_row = {} AND hash = {} \
         AND searched IS NULL",
        b.bind(record_row),
        b.bind(hash),
    );
    statements.push(b.finish(sql));
    if let Some(text) = text.filter(|text| !text.is_empty()) {
        let latest = |b: &mut Binder| {
            format!(
                "EXISTS (SELECT 1 FROM records WHERE row = {} AND user_id = {} \
                 AND version_hash = {})",
                b.bind(record_row),
                b.bind(user_id),
                b.bind(hash),
            )
        };
        // A row the index may hold already (an import over a store) goes
        // first: FTS5 keeps one row per rowid.
        let mut b = Binder::default();
        let sql = format!(
            "DELETE FROM record_text WHERE rowid = {} AND {}",
            b.bind(record_row),
            latest(&mut b)
        );
        statements.push(b.finish(sql));
        let mut b = Binder::default();
        let sql = format!(
            "INSERT INTO record_text (rowid, words) SELECT {}, {} WHERE {}",
            b.bind(record_row),
            b.bind(text),
            latest(&mut b)
        );
        statements.push(b.finish(sql));
    }
    statements
}
