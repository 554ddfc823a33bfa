//! The owner's console's own reads and writes: what the overview counts,
//! the recent versions with the app that wrote each, the records of the
//! built-in types it manages, and the user's password and sessions. Lists
//! and single records go through the API's statements.

use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY};

use super::{Binder, Statement};

/// The user's `sessions_after` mark: one row `(sessions_after)`.
pub fn sessions_after_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT sessions_after FROM users WHERE id = {}",
        b.bind(user_id)
    );
    b.finish(sql)
}

/// Ends every session signed in until `now_ms` (Unix milliseconds).
pub fn sign_out_everywhere_sql(user_id: i64, now_ms: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "UPDATE users SET sessions_after = max(sessions_after, {}) WHERE id = {}",
        b.bind(now_ms),
        b.bind(user_id)
    );
    b.finish(sql)
}

/// Sets the password's argon2id `hash` and ends every session signed in
/// until `now_ms`.
pub fn set_password_sql(user_id: i64, hash: &str, now_ms: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "UPDATE users SET password_hash = {}, sessions_after = max(sessions_after, {}) \
         WHERE id = {}",
        b.bind(hash),
        b.bind(now_ms),
        b.bind(user_id)
    );
    b.finish(sql)
}

/// The records of the store by type: rows `(type_entity, type_record_id,
/// live, deleted)`, the most numerous first.
pub fn records_per_type_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT type_entity, type_record_id, SUM(deleted = 0) AS live, SUM(deleted) \
         FROM records WHERE user_id = {} GROUP BY type_record_id, type_entity \
         ORDER BY live DESC, type_record_id",
        b.bind(user_id)
    );
    b.finish(sql)
}

/// The store's totals: one row `(versions, blobs, blob_bytes)`; blobs
/// uploaded but never linked (waiting for their expiry) are left out.
pub fn store_totals_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let user = b.bind(user_id);
    let sql = format!(
        "SELECT (SELECT COUNT(*) FROM versions WHERE user_id = {user}), \
         (SELECT COUNT(*) FROM blobs WHERE user_id = {user} AND expires_at IS NULL), \
         (SELECT COALESCE(SUM(size), 0) FROM blobs WHERE user_id = {user} AND expires_at IS NULL)"
    );
    b.finish(sql)
}

/// The last `limit` versions received, latest first: rows `(app_id,
/// record, links)`, `app_id` NULL for the owner's own writes.
pub fn recent_versions_sql(user_id: i64, limit: u32) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT app_id, record, links FROM versions WHERE user_id = {} \
         ORDER BY received_at DESC LIMIT {}",
        b.bind(user_id),
        b.bind(i64::from(limit))
    );
    b.finish(sql)
}

/// The latest versions of the `limit` records of a built-in type received
/// last, tombstones included, latest received first: rows `(record, links)`.
/// With `author`, only that entity's records (the user's own apps and
/// authorizations: another's never count).
pub fn builtin_records_sql(
    user_id: i64,
    builtin: BuiltinType,
    author: Option<&crate::model::Entity>,
    limit: u32,
) -> Statement {
    let mut b = Binder::default();
    let by_author = match author {
        Some(author) => format!(" AND r.author = {}", b.bind(author.as_str())),
        None => String::new(),
    };
    let sql = format!(
        "SELECT v.record, v.links FROM records r \
         JOIN versions v ON v.record_row = r.row AND v.hash = r.version_hash \
         WHERE r.user_id = {} AND r.type_record_id = {} AND r.type_entity = {}{by_author} \
         ORDER BY r.received_at DESC LIMIT {}",
        b.bind(user_id),
        b.bind(builtin.record_id().to_string()),
        b.bind(SYSTEM_ENTITY),
        b.bind(i64::from(limit)),
    );
    b.finish(sql)
}
