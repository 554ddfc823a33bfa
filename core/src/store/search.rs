//! The search index's backfill: the words of versions stored without them
//! (before migration 11, or imported from an archive), found by upkeep
//! ([`crate::service::UpkeepRound`]) a batch at a time on both hosts.
//!
//! A version stored unsearched has `versions.words` NULL. The record's
//! latest gets its words from its schema, in `versions.words` and in
//! `record_words`; any other gets `[]` and never counts again.

use std::sync::Arc;

use crate::model::Record;
use crate::query::{Word, words_json};
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
         WHERE v.words IS NULL LIMIT {}",
        b.bind(SEARCH_BACKFILL_BATCH)
    );
    b.finish(sql)
}

/// What a backfill batch read and what it writes.
#[derive(Debug, Default)]
pub struct Backfill {
    /// The statements that store the batch's words, in one transaction.
    pub statements: Vec<Statement>,
    /// Latest versions given their words.
    pub searched: usize,
    /// Latest versions whose words could not be found (a stored record
    /// or type that does not read back, or no longer validates): stored
    /// with none, and counted.
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
            let words = match (row.optional_text(3)?, row.optional_text(4)?) {
                (Some(record), type_record) => match words_of(&mut types, record, type_record) {
                    Some(words) => {
                        backfill.searched += 1;
                        Some(words)
                    }
                    None => {
                        backfill.unreadable += 1;
                        Some(Vec::new())
                    }
                },
                // Not its record's latest: it has no words to index.
                (None, _) => None,
            };
            backfill.statements.extend(searched_statements(
                user_id,
                record_row,
                hash,
                words.as_deref(),
            ));
        }
        Ok(backfill)
    }
}

/// The words of a stored latest version, from its type's schema.
fn words_of(types: &mut Types, record: &str, type_record: Option<&str>) -> Option<Vec<Word>> {
    let record: Record = read_record(record).ok()?;
    let type_record: Option<Arc<Record>> = match type_record {
        Some(json) => Some(Arc::new(read_record(json).ok()?)),
        None => None,
    };
    let record_type = types.get(&record.type_link, type_record.as_deref()).ok()?;
    Some(record_type.schema.validate(&record).ok()?.words)
}

/// A version's words stored: `[]` for one that is not its record's latest
/// (`None`); a latest's also added to `record_words`, if it is still the
/// latest when the batch commits (a write in between indexed its own).
fn searched_statements(
    user_id: i64,
    record_row: i64,
    hash: &str,
    words: Option<&[Word]>,
) -> Vec<Statement> {
    let json = words_json(words.unwrap_or_default());
    let mut statements = Vec::with_capacity(2);
    let mut b = Binder::default();
    let sql = format!(
        "UPDATE versions SET words = {} WHERE record_row = {} AND hash = {} AND words IS NULL",
        b.bind(json.as_str()),
        b.bind(record_row),
        b.bind(hash),
    );
    statements.push(b.finish(sql));
    if words.is_some_and(|words| !words.is_empty()) {
        let mut b = Binder::default();
        let user = b.bind(user_id);
        let row = b.bind(record_row);
        let sql = format!(
            "INSERT INTO record_words (user_id, word, record_row, weight) \
             SELECT {user}, json_extract(value, '$[0]'), {row}, json_extract(value, '$[1]') \
             FROM json_each({}) WHERE EXISTS (SELECT 1 FROM records \
             WHERE row = {row} AND version_hash = {}) \
             ON CONFLICT DO UPDATE SET weight = excluded.weight",
            b.bind(json),
            b.bind(hash),
        );
        statements.push(b.finish(sql));
    }
    statements
}
