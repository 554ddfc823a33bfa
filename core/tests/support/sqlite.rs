//! Core's statement values as rusqlite binds them, and an empty migrated
//! store, for the tests that run
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

/// A database in memory with every migration applied and one user,
/// `alice` at `entity`, whose row id is `user_id`: an empty store.
// The service tests bind statements here and keep stores of their own.
#[allow(dead_code)]
pub fn migrated_store(user_id: i64, entity: &str) -> rusqlite::Connection {
    let db = rusqlite::Connection::open_in_memory().expect("an in-memory database");
    db.execute_batch("PRAGMA foreign_keys = ON;")
        .expect("foreign keys");
    for migration in folio_core::store::MIGRATIONS {
        db.execute_batch(migration.sql).expect("the migration runs");
    }
    db.execute(
        "INSERT INTO users (id, name, entity, created_at) VALUES (?1, 'alice', ?2, 0)",
        rusqlite::params![user_id, entity],
    )
    .expect("a user");
    db
}
