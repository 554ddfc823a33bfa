//! Core's statement values as rusqlite binds them, for the tests that run
//! core's SQL on a real SQLite.

use folio_core::store::SqlValue;

/// `params` in rusqlite's terms, in order.
pub fn bind(params: &[SqlValue]) -> Vec<rusqlite::types::Value> {
    params
        .iter()
        .map(|p| match p {
            SqlValue::Null => rusqlite::types::Value::Null,
            SqlValue::Integer(i) => rusqlite::types::Value::Integer(*i),
            SqlValue::Text(t) => rusqlite::types::Value::Text(t.clone()),
        })
        .collect()
}
