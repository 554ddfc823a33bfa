//! The storage design both hosts share: the SQL schema (as migrations) and
//! the text of every query, with its parameters. The native host runs them
//! on SQLite through rusqlite, the worker on D1; neither writes SQL of its own.
//!
//! No value from a request is ever spliced into SQL text: values are bound
//! as parameters. D1 allows at most 100 bound parameters per statement, so
//! a query with many values (filters, grants) binds them as one JSON array
//! and reads each with `json_extract`, which SQLite treats as a constant
//! and can use for index lookups.

pub mod archive;

mod console;
mod list;
mod literal;
mod migrations;
mod outbox;
mod read;
mod search;
mod users;
mod version;
mod write;

pub use console::{
    builtin_records_sql, recent_versions_sql, records_per_type_sql, sessions_after_sql,
    set_password_sql, sign_out_everywhere_sql, store_totals_sql,
};
pub use list::{ListSql, list_sql};
pub use literal::LiteralSqlError;
pub use migrations::{MIGRATIONS, Migration};
pub use outbox::{
    OUTBOX_COLUMNS, audience_statements, bring_forward_sql, count_received_sql, delivered_sql,
    due_notifications_sql, failed_attempt_sql, forget_server_key_sql, insert_server_key_sql,
    knows_entity_sql, next_due_sql, outbox_sql, outbox_summary_sql, queue_notification_sql,
    received_usage_sql, retry_failed_sql, send_now_sql, server_key_sql, user_outbox_sql,
    waiting_for_sql,
};
pub use read::{
    event_log_bounds_sql, events_sql, latest_hash_sql, latest_version_sql, linked_sql,
    prune_events_sql, seed_statements, version_sql, versions_sql,
};
pub use search::{Backfill, SEARCH_BACKFILL_BATCH, unsearched_sql};
pub use users::entity_received_sql;
pub use users::{
    StoresToRemove, app_authorizations_sql, app_credentials_sql, app_key_sql, apps_sql,
    blob_held_sql, blob_size_sql, delete_blob_sql, entity_record_sql, event_seq_sql,
    expired_blobs_sql, fetched_blob_sql, held_blobs_sql, insert_app_sql, insert_user_sql,
    insert_user_with_id_sql, password_hash_sql, prune_nonces_sql, remember_nonce_sql,
    remembered_nonces_sql, remove_stores_sql, stored_blob_bytes_sql, types_by_name_sql,
    upload_blob_sql, user_by_name_sql, user_row_id, users_sql,
};
pub use version::{
    Replaces, StoredDataError, WriteOrigin, entries_json, read_links, read_record, read_version,
    stored_json, version_statements, version_statements_replacing,
};
pub use write::{
    NeedRow, NeedRows, WRITE_ATTEMPTS, commit_statements, last_received_at_sql, need_sql,
};

/// A value bound to a statement parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// SQL `NULL`.
    Null,
    /// An integer.
    Integer(i64),
    /// A text.
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(value: i64) -> Self {
        SqlValue::Integer(value)
    }
}

impl From<String> for SqlValue {
    fn from(value: String) -> Self {
        SqlValue::Text(value)
    }
}

impl From<&str> for SqlValue {
    fn from(value: &str) -> Self {
        SqlValue::Text(value.to_owned())
    }
}

impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(value: Option<T>) -> Self {
        value.map_or(SqlValue::Null, Into::into)
    }
}

/// A statement with its parameters, numbered `?1`, `?2`, … in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// The values of `?1`, `?2`, …, in order.
    pub params: Vec<SqlValue>,
}

/// Numbers parameters as a statement's text is built.
#[derive(Debug, Default)]
pub(crate) struct Binder {
    params: Vec<SqlValue>,
}

/// The largest integer a JavaScript number holds exactly (2^53 - 1).
const MAX_EXACT_JS_INTEGER: i64 = (1 << 53) - 1;

/// The entity a version's content names, as `versions_by_described_entity`
/// (migration 3) indexes it: a query must write it exactly so, and name the
/// index (`INDEXED BY`: without statistics SQLite would rather read every
/// Entity record of the store through `records`). `v` is the `versions` row.
const DESCRIBED_ENTITY: &str = "json_extract(v.record, '$.content.entity')";

/// The common tables a lookup by key alone reads ([`rows_with_key`]):
/// `key_paths`, the distinct paths of user `user`'s link index, each found
/// by one seek past the last, and `keyed`, the entries under those paths
/// whose key is in `keys` (an SQL list: `(?3)`, or a subquery), each a seek.
/// A statement starts with them once, however many lookups it makes, and
/// `keyed` is made once: the largest filters (512 bare values) stay small
/// enough for D1, which refuses a statement over 100 KB and runs it in
/// little memory.
fn key_paths_cte(user: &str, keys: &str) -> String {
    format!(
        "WITH RECURSIVE walk (path) AS (\
         SELECT (SELECT path FROM link_index WHERE user_id = {user} ORDER BY path LIMIT 1) \
         UNION ALL SELECT (SELECT l.path FROM link_index l \
         WHERE l.user_id = {user} AND l.path > walk.path ORDER BY l.path LIMIT 1) \
         FROM walk WHERE walk.path IS NOT NULL), \
         key_paths (path) AS (SELECT path FROM walk WHERE path IS NOT NULL), \
         keyed (record_row, key) AS MATERIALIZED (SELECT record_row, key FROM link_index \
         WHERE user_id = {user} AND path IN key_paths AND key IN {keys}) "
    )
}

/// The rows of the records whose link index has `key` at any path: a
/// subquery, `key` being an SQL expression (a placeholder), for a
/// statement that starts with [`key_paths_cte`] with `key` among its keys.
fn rows_with_key(key: &str) -> String {
    format!("SELECT record_row FROM keyed WHERE key = {key}")
}

impl Binder {
    /// Binds a value; returns its placeholder.
    ///
    /// D1 passes bound values through JavaScript numbers, which are exact
    /// only up to 2^53; dates are 100 ns ticks (about 1.8e16 today). So a
    /// larger integer is bound as its decimal text and cast back in SQL,
    /// which is exact on both hosts and still a constant an index can use.
    pub(crate) fn bind(&mut self, value: impl Into<SqlValue>) -> String {
        match value.into() {
            SqlValue::Integer(n)
                if !(-MAX_EXACT_JS_INTEGER..=MAX_EXACT_JS_INTEGER).contains(&n) =>
            {
                self.params.push(SqlValue::Text(n.to_string()));
                format!("CAST(?{} AS INTEGER)", self.params.len())
            }
            value => {
                self.params.push(value);
                format!("?{}", self.params.len())
            }
        }
    }

    pub(crate) fn finish(self, sql: String) -> Statement {
        Statement {
            sql,
            params: self.params,
        }
    }
}

/// Values gathered while building one statement and bound as a single JSON
/// array parameter (D1's limit on bound parameters, see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ValueList {
    values: Vec<serde_json::Value>,
}

impl ValueList {
    /// The SQL expression reading this value back from the array bound at
    /// `placeholder`. The expression holds only an index the code chose.
    pub(crate) fn push(
        &mut self,
        placeholder: &str,
        value: impl Into<serde_json::Value>,
    ) -> String {
        self.values.push(value.into());
        format!("json_extract({placeholder},'$[{}]')", self.values.len() - 1)
    }

    pub(crate) fn into_param(self) -> SqlValue {
        SqlValue::Text(serde_json::Value::Array(self.values).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_beyond_javascript_numbers_bind_as_text_cast_back() {
        let mut b = Binder::default();
        assert_eq!(b.bind(5), "?1");
        assert_eq!(b.bind(17_900_000_000_000_000), "CAST(?2 AS INTEGER)");
        assert_eq!(b.bind(-(1 << 53)), "CAST(?3 AS INTEGER)");
        assert_eq!(b.bind((1 << 53) - 1), "?4");
        let statement = b.finish(String::new());
        assert_eq!(statement.params[0], SqlValue::Integer(5));
        assert_eq!(
            statement.params[1],
            SqlValue::Text("17900000000000000".into())
        );
        assert_eq!(
            statement.params[2],
            SqlValue::Text("-9007199254740992".into())
        );
    }
}
