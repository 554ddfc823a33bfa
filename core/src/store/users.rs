//! Users and the apps that act for them: the rows outside any record store.

use sha2::{Digest, Sha256};

use crate::model::{Entity, RecordDate, RecordId};
use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY};

use super::{Binder, DESCRIBED_ENTITY, Statement};

/// Creates a user; yields one row `(id)`. Run it, then
/// [`super::seed_statements`] for that id, in one transaction.
pub fn insert_user_sql(
    name: &str,
    entity: &Entity,
    password_hash: &str,
    created_at: RecordDate,
) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT INTO users (name, entity, password_hash, created_at) VALUES ({}, {}, {}, {}) \
         RETURNING id",
        b.bind(name),
        b.bind(entity.as_str()),
        b.bind(password_hash),
        b.bind(created_at.unix_ticks()),
    );
    b.finish(sql)
}

/// The row id of user `name` on a host where users are made without
/// reading the database: a positive integer below 2^53, from the first 8
/// bytes of SHA-256 of the name (UTF-8).
///
/// On the edge there is no data directory: `folio user add --emit-sql`
/// prints the SQL that creates a user, and `folio app add --emit-sql`, run
/// later on another machine, must name the same user's row without reading
/// D1. An id that AUTOINCREMENT (or a rowid) assigns is only known once the
/// row exists; this one is known from the name alone. Below 2^53 it is also
/// exact as a JavaScript number, which is how D1 hands integers to the
/// worker. Two names share an id with a chance of about one in 2^53 per
/// pair; the second insert then fails on the primary key, and nothing is
/// created.
///
/// The native host's own `folio user add` keeps the ids SQLite assigns.
pub fn user_row_id(name: &str) -> i64 {
    const BELOW: u64 = 1 << 53;
    let digest = Sha256::digest(name.as_bytes());
    let mut first = [0; 8];
    first.copy_from_slice(&digest[..8]);
    let id = u64::from_be_bytes(first) % (BELOW - 1) + 1;
    i64::try_from(id).expect("an id below 2^53 fits an i64")
}

/// Creates a user whose row id the caller chose (see [`user_row_id`]);
/// yields no rows. `password_hash` is NULL for a user who cannot sign in
/// to the consent page. Run [`super::seed_statements`] for that id after it,
/// in the same transaction.
pub fn insert_user_with_id_sql(
    id: i64,
    name: &str,
    entity: &Entity,
    password_hash: Option<&str>,
    created_at: RecordDate,
) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT INTO users (id, name, entity, password_hash, created_at) VALUES ({}, {}, {}, {}, {})",
        b.bind(id),
        b.bind(name),
        b.bind(entity.as_str()),
        b.bind(password_hash),
        b.bind(created_at.unix_ticks()),
    );
    b.finish(sql)
}

/// One row if any user's store holds a version authored by `entity`: this
/// server received records of that entity from its own server, so the
/// entity is served elsewhere (`docs/federation.md` §1, who serves an
/// entity). The CLI asks it before making a user of that entity here.
pub fn entity_received_sql(entity: &Entity) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT 1 FROM versions WHERE author = {} LIMIT 1",
        b.bind(entity.as_str())
    );
    b.finish(sql)
}

/// Every user, by name: rows `(id, name, entity)`.
pub fn users_sql() -> Statement {
    Binder::default().finish("SELECT id, name, entity FROM users ORDER BY name".to_owned())
}

/// One user by its `{user}` path segment: at most one row `(id, name, entity)`.
pub fn user_by_name_sql(name: &str) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT id, name, entity FROM users WHERE name = {}",
        b.bind(name)
    );
    b.finish(sql)
}

/// One row `(event_seq)`: the sequence of the user's latest event. A write
/// job's commit ends with it, to number the events it just logged.
pub fn event_seq_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!("SELECT event_seq FROM users WHERE id = {}", b.bind(user_id));
    b.finish(sql)
}

/// A user's password hash: at most one row `(password_hash)`, NULL when none is set.
pub fn password_hash_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT password_hash FROM users WHERE id = {}",
        b.bind(user_id)
    );
    b.finish(sql)
}

/// Registers an app's key for a user's store.
pub fn insert_app_sql(
    user_id: i64,
    app_id: &RecordId,
    public_key: &str,
    full_access: bool,
) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT INTO apps (user_id, app_id, public_key, full_access) VALUES ({}, {}, {}, {})",
        b.bind(user_id),
        b.bind(app_id.to_string()),
        b.bind(public_key),
        b.bind(i64::from(full_access)),
    );
    b.finish(sql)
}

/// An app's key: at most one row `(public_key, full_access)`.
pub fn app_key_sql(user_id: i64, app_id: &RecordId) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT public_key, full_access FROM apps WHERE user_id = {} AND app_id = {}",
        b.bind(user_id),
        b.bind(app_id.to_string()),
    );
    b.finish(sql)
}

/// The live Type records of a store whose content `name` is `name`, latest
/// first: rows `(author, record_id)`.
pub fn types_by_name_sql(user_id: i64, name: &str) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT r.author, r.record_id FROM records r \
         JOIN versions v ON v.record_row = r.row AND v.hash = r.version_hash \
         WHERE r.user_id = {} AND r.type_record_id = {} AND r.type_entity = {} \
         AND r.deleted = 0 AND json_extract(v.record, '$.content.name') = {} \
         ORDER BY r.received_at DESC",
        b.bind(user_id),
        b.bind(BuiltinType::Type.record_id().to_string()),
        b.bind(SYSTEM_ENTITY),
        b.bind(name),
    );
    b.finish(sql)
}

/// The user's own live Entity record (authored by the user and describing
/// them, [`crate::auth::access::is_own_entity_record`]; the oldest, should there
/// be several): at most one row `(record, links)`.
pub fn entity_record_sql(user_id: i64, entity: &Entity) -> Statement {
    let mut b = Binder::default();
    let entity = b.bind(entity.as_str());
    let sql = format!(
        "SELECT v.record, v.links FROM versions v INDEXED BY versions_by_described_entity \
         JOIN records r \
         ON r.user_id = v.user_id AND r.author = v.author \
         AND r.record_id = v.record_id AND r.version_hash = v.hash \
         WHERE v.user_id = {} AND {DESCRIBED_ENTITY} = {entity} AND v.author = {entity} \
         AND r.type_record_id = {} AND r.type_entity = {} AND r.deleted = 0 \
         ORDER BY r.received_at LIMIT 1",
        b.bind(user_id),
        b.bind(BuiltinType::Entity.record_id().to_string()),
        b.bind(SYSTEM_ENTITY),
    );
    b.finish(sql)
}

/// Records that `app` used `nonce` in a request dated `ts_ms`, for a host
/// whose replay guard must find it again after a restart
/// ([`ReplayGuard`](crate::auth::ReplayGuard)).
pub fn remember_nonce_sql(app: &RecordId, nonce: &str, ts_ms: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT OR IGNORE INTO nonces (app_id, nonce, ts) VALUES ({}, {}, {})",
        b.bind(app.to_string()),
        b.bind(nonce),
        b.bind(ts_ms),
    );
    b.finish(sql)
}

/// The nonces recorded by [`remember_nonce_sql`] that are dated at or after
/// `cutoff_ms`: rows `(app_id, nonce, ts)`.
pub fn remembered_nonces_sql(cutoff_ms: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT app_id, nonce, ts FROM nonces WHERE ts >= {}",
        b.bind(cutoff_ms)
    );
    b.finish(sql)
}

/// Removes nonces recorded before `cutoff` (milliseconds), for hosts that
/// keep them in the `nonces` table.
pub fn prune_nonces_sql(cutoff_ms: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!("DELETE FROM nonces WHERE ts < {}", b.bind(cutoff_ms));
    b.finish(sql)
}

/// Blobs of a store that expired unlinked before `now`: rows `(user_id,
/// hash)`; delete their rows with [`delete_blob_sql`] and then their files.
pub fn expired_blobs_sql(now: RecordDate) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT user_id, hash FROM blobs WHERE expires_at IS NOT NULL AND expires_at <= {}",
        b.bind(now.unix_ticks())
    );
    b.finish(sql)
}

/// Forgets one expired blob, unless a record linked it meanwhile.
pub fn delete_blob_sql(user_id: i64, hash: &str) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "DELETE FROM blobs WHERE user_id = {} AND hash = {} AND expires_at IS NOT NULL",
        b.bind(user_id),
        b.bind(hash),
    );
    b.finish(sql)
}

/// Every blob hash some store holds: rows `(hash)`, each once.
pub fn held_blobs_sql() -> Statement {
    Binder::default().finish("SELECT DISTINCT hash FROM blobs".to_owned())
}

/// The bytes of every blob file the stores hold (a file shared by
/// several stores counted once): one row `(bytes)`.
pub fn stored_blob_bytes_sql() -> Statement {
    Binder::default().finish(
        "SELECT COALESCE(SUM(size), 0) FROM (SELECT MAX(size) AS size FROM blobs GROUP BY hash)"
            .to_owned(),
    )
}

/// Whether any store still holds a blob with this hash: one row `(0 or 1)`.
/// Blob files are shared by content; a file goes when no store holds it.
pub fn blob_held_sql(hash: &str) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM blobs WHERE hash = {})",
        b.bind(hash)
    );
    b.finish(sql)
}

/// Records an upload: a new blob expires at `expires_at` unless a record
/// links it; uploading a blob the store already holds keeps the later expiry
/// (or none, once linked).
pub fn upload_blob_sql(
    user_id: i64,
    hash: &str,
    size: u64,
    uploaded_at: RecordDate,
    expires_at: RecordDate,
) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT INTO blobs (user_id, hash, size, uploaded_at, expires_at) \
         VALUES ({}, {}, {}, {}, {}) \
         ON CONFLICT (user_id, hash) DO UPDATE SET uploaded_at = excluded.uploaded_at, \
         expires_at = CASE WHEN blobs.expires_at IS NULL THEN NULL \
         ELSE MAX(blobs.expires_at, excluded.expires_at) END",
        b.bind(user_id),
        b.bind(hash),
        b.bind(i64::try_from(size).unwrap_or(i64::MAX)),
        b.bind(uploaded_at.unix_ticks()),
        b.bind(expires_at.unix_ticks()),
    );
    b.finish(sql)
}

/// Records a blob read from another server for a record the store holds
/// that links it: linked already, so it never expires.
pub fn fetched_blob_sql(user_id: i64, hash: &str, size: u64, fetched_at: RecordDate) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "INSERT INTO blobs (user_id, hash, size, uploaded_at, expires_at) \
         VALUES ({}, {}, {}, {}, NULL) \
         ON CONFLICT (user_id, hash) DO UPDATE SET expires_at = NULL",
        b.bind(user_id),
        b.bind(hash),
        b.bind(i64::try_from(size).unwrap_or(i64::MAX)),
        b.bind(fetched_at.unix_ticks()),
    );
    b.finish(sql)
}

/// A blob's stored size, if the store holds it: at most one row `(size)`.
pub fn blob_size_sql(user_id: i64, hash: &str) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT size FROM blobs WHERE user_id = {} AND hash = {}",
        b.bind(user_id),
        b.bind(hash),
    );
    b.finish(sql)
}

/// The live App Authorization records of a store that authorize `app`,
/// latest first: rows `(record, links)`. The first one's id is the
/// authorization id the app's signatures carry.
pub fn app_authorizations_sql(user_id: i64, user: &Entity, app: &RecordId) -> Statement {
    records_of_app_sql(user_id, user, app, BuiltinType::AppAuthorization)
}

/// The live Credentials records of `app`, latest first: rows `(record, links)`.
pub fn app_credentials_sql(user_id: i64, user: &Entity, app: &RecordId) -> Statement {
    records_of_app_sql(user_id, user, app, BuiltinType::Credentials)
}

/// The user's live records of a built-in type that link `app` at
/// `$['content']['app']`, latest first.
fn records_of_app_sql(
    user_id: i64,
    user: &Entity,
    app: &RecordId,
    builtin: BuiltinType,
) -> Statement {
    let mut b = Binder::default();
    let user_param = b.bind(user_id);
    let sql = format!(
        "SELECT v.record, v.links FROM records r \
         JOIN versions v ON v.record_row = r.row AND v.hash = r.version_hash \
         WHERE r.user_id = {user_param} AND r.type_record_id = {} AND r.type_entity = {} \
         AND r.author = {} AND r.deleted = 0 AND r.row IN (SELECT record_row FROM link_index \
         WHERE user_id = {user_param} AND path = {} AND key = {}) \
         ORDER BY r.received_at DESC",
        b.bind(builtin.record_id().to_string()),
        b.bind(SYSTEM_ENTITY),
        b.bind(user.as_str()),
        b.bind(APP_LINK_PATH),
        b.bind(crate::query::record_key(user, app)),
    );
    b.finish(sql)
}

/// The apps of a store, by id: rows `(app_id, public_key, full_access)`.
pub fn apps_sql(user_id: i64) -> Statement {
    let mut b = Binder::default();
    let sql = format!(
        "SELECT app_id, public_key, full_access FROM apps WHERE user_id = {} ORDER BY app_id",
        b.bind(user_id),
    );
    b.finish(sql)
}

/// Where an App Authorization record links its app.
const APP_LINK_PATH: &str = "$['content']['app']";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_row_ids_are_positive_below_2_pow_53_and_fixed_by_the_name() {
        for name in ["", "me", "alice", "Zoë", "a/b"] {
            let id = user_row_id(name);
            assert!((1..1 << 53).contains(&id), "{name}: {id}");
            assert_eq!(user_row_id(name), id);
        }
        assert_ne!(user_row_id("alice"), user_row_id("bob"));
        // SHA-256("me") begins 2744ccd10c7533bd: that modulo 2^53 - 1, plus 1
        // (worked out apart from this code, with Python).
        assert_eq!(user_row_id("me"), 1_351_098_136_081_656);
        assert_eq!(user_row_id("alice"), 6_762_861_930_873_358);
    }
}

/// Which stores [`remove_stores_sql`] deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoresToRemove {
    /// One user's store (`folio user remove`).
    Of(i64),
    /// Every store but one user's (`folio backup --user`).
    AllBut(i64),
}

/// Deletes whole stores: every row of theirs in every table, their apps'
/// keys and nonces, and their users' rows, dependants first. Blob files
/// are the host's to remove: those no remaining store holds
/// ([`held_blobs_sql`]). Run the statements in one transaction.
pub fn remove_stores_sql(stores: StoresToRemove) -> Vec<Statement> {
    let (compare, user_id) = match stores {
        StoresToRemove::Of(user_id) => ("=", user_id),
        StoresToRemove::AllBut(user_id) => ("<>", user_id),
    };
    // Each statement binds the user's id once, as `?1`.
    let statement = |sql: &dyn Fn(&str) -> String| {
        let mut b = Binder::default();
        let user = b.bind(user_id);
        b.finish(sql(&user))
    };
    let mut statements = vec![statement(&|user| {
        format!(
            "DELETE FROM nonces WHERE app_id IN \
             (SELECT app_id FROM apps WHERE user_id {compare} {user})"
        )
    })];
    // Children before the rows they reference.
    for table in [
        "outbox",
        "audiences",
        "received_usage",
        "server_keys",
        "link_index",
        "records",
        "versions",
        "events",
        "blobs",
        "apps",
    ] {
        statements.push(statement(&|user| {
            format!("DELETE FROM {table} WHERE user_id {compare} {user}")
        }));
    }
    statements.push(statement(&|user| {
        format!("DELETE FROM users WHERE id {compare} {user}")
    }));
    statements
}
