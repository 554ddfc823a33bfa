//! Users and server-side apps: creating them (for the CLI and a first
//! start), and finding a request's user. Every record involved is written
//! through core's write transition, as the owner.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use folio_core::auth::ServerKey;
use folio_core::auth::access::Access;
use folio_core::auth::apps::{
    Scope, ServerKeys, app_record_body, authorization_record_body, credentials_record_body,
    revocation,
};
use folio_core::model::{Entity, RecordId, RecordLink, UserName};
use folio_core::schema::builtin::BuiltinType;
use folio_core::service::discovery::{entity_record_body, entity_record_update};
use folio_core::store::{
    Statement, StoresToRemove, app_authorizations_sql, apps_sql, entity_record_sql,
    forget_server_key_sql, held_blobs_sql, insert_app_sql, insert_server_key_sql, insert_user_sql,
    insert_user_with_id_sql, latest_version_sql, read_version, remove_stores_sql, seed_statements,
    server_key_sql, set_password_sql, types_by_name_sql, users_sql,
};
use folio_core::write::{PublishedType, RecordKey, TypeAddition, WriteError, WriteRequest};
use folio_core::{CommitError, Done, Job, RecordWrite, Row, RowError, RowExt};
use rusqlite::Connection;
use serde_json::Value;

use crate::clock::Clock;
use crate::db::{self, DbError};
use crate::writer::{Tx, WriterError};

pub use folio_core::User;

/// Why provisioning failed.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("database: {0}")]
    Db(#[from] DbError),
    #[error("{0}")]
    Writer(#[from] WriterError),
    #[error("a record was refused: {0}")]
    Refused(#[from] folio_core::Refused),
    #[error("{0}")]
    Invalid(String),
    #[error("no Type record named `{name}` in {user}'s store")]
    UnknownTypeName { name: String, user: String },
    /// A scope names a type `--emit-sql` cannot link: see `emit::app_add`.
    #[error(
        "`{0}` is not a built-in type: with --emit-sql a scope can name only built-in types, \
         since the SQL is made without reading the edge store that holds any other Type record; \
         use --full-access, or let the app register and ask for consent"
    )]
    NotBuiltInType(String),
    #[error("stored data: {0}")]
    Stored(#[from] folio_core::store::StoredDataError),
    #[error("stored data: {0}")]
    Row(#[from] RowError),
    /// The entity may be another server's: see [`check_entity_here`].
    #[error(
        "{0}: a user here would shadow that entity for this server's other users (their \
         notifications and links would go to this user's store). If this server really is \
         {entity}'s, pass --allow-foreign-entity",
        entity = .1
    )]
    ForeignEntity(String, Entity),
}

/// Whether `entity` may be made a user of the server at `base_url`
/// (`folio user add`, `folio import`): its name must be the base URL's host
/// or a subdomain of it, and no store here may hold records received from
/// that entity's own server (`conn`; `None` where no store is read, as with
/// `--emit-sql`). Otherwise the operator must say so (`allow`); the answer
/// is then the warning to print.
pub fn check_entity_here(
    conn: Option<&Connection>,
    entity: &Entity,
    base_url: &str,
    allow: bool,
) -> Result<Option<String>, ProvisionError> {
    let owner = match conn {
        Some(conn) => list_users(conn)?.into_iter().find(|u| u.entity == *entity),
        None => None,
    };
    if let Some(owner) = owner {
        let host = base_url
            .split_once("://")
            .map_or(base_url, |(_, rest)| rest)
            .split([':', '/'])
            .next()
            .unwrap_or_default();
        return Err(ProvisionError::Invalid(format!(
            "{entity} is already the entity of user `{}`: each user has an entity of \
             their own, such as a subdomain of this server's host (`--entity NAME.{host}`)",
            owner.name
        )));
    }
    let received = match conn {
        Some(conn) => !db::fetch(conn, &folio_core::store::entity_received_sql(entity))?.is_empty(),
        None => false,
    };
    let why = if received {
        format!("records of {entity} were received here from its own server")
    } else if !folio_core::service::discovery::entity_under_base_url(entity, base_url) {
        format!("{entity} is neither this server's host ({base_url}) nor a subdomain of it")
    } else {
        return Ok(None);
    };
    if !allow {
        return Err(ProvisionError::ForeignEntity(why, entity.clone()));
    }
    Ok(Some(format!(
        "WARNING: {why}; making a user of {entity} anyway (--allow-foreign-entity). \
         Its Entity record will name this server: make sure https://{entity}/ leads here."
    )))
}

impl From<folio_core::write::WriteError> for ProvisionError {
    fn from(error: folio_core::write::WriteError) -> Self {
        ProvisionError::Refused(error.into())
    }
}

fn user_from_row(row: &rusqlite::Row<'_>) -> Result<User, DbError> {
    let entity: String = row.get(2)?;
    Ok(User {
        id: row.get(0)?,
        name: row.get(1)?,
        entity: entity.parse().map_err(|error| {
            DbError::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(error))
        })?,
    })
}

/// Every user, by name.
pub fn list_users(conn: &Connection) -> Result<Vec<User>, DbError> {
    db::query(conn, &users_sql(), user_from_row)
}

/// A fresh password: 144 random bits, URL-safe.
pub fn generate_password() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 18]>())
}

/// The argon2id hash stored for a password (argon2's default parameters:
/// 19 MiB, 2 passes, 1 lane, the OWASP recommendation).
pub fn hash_password(password: &str) -> Result<String, ProvisionError> {
    folio_core::service::consent::hash_password(password, rand::random())
        .ok_or_else(|| ProvisionError::Invalid("the password could not be hashed".to_owned()))
}

/// Sets `user`'s password and signs out every session signed in before.
pub fn set_password(conn: &Connection, user: &User, password: &str) -> Result<(), ProvisionError> {
    let hash = hash_password(password)?;
    let now_ms = Clock.now().unix_millis();
    db::execute(conn, &set_password_sql(user.id, &hash, now_ms))?;
    Ok(())
}

/// Removes `user`'s store, its apps' keys and nonces in one transaction,
/// then the blob files under `blobs` that no store holds any more; the
/// number of files removed.
pub fn remove_user(
    conn: &Connection,
    user: &User,
    blobs: &std::path::Path,
) -> Result<usize, ProvisionError> {
    let held = |conn: &Connection| -> Result<std::collections::HashSet<String>, DbError> {
        Ok(
            db::query(conn, &held_blobs_sql(), |row| row.get::<_, String>(0))?
                .into_iter()
                .collect(),
        )
    };
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let removed = (|| {
        let before = held(conn)?;
        db::execute_all(conn, &remove_stores_sql(StoresToRemove::Of(user.id)))?;
        let after = held(conn)?;
        Ok::<_, DbError>(before.difference(&after).cloned().collect::<Vec<_>>())
    })();
    let gone = match removed {
        Ok(gone) => {
            conn.execute_batch("COMMIT")?;
            gone
        }
        Err(error) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(error.into());
        }
    };
    let mut files = 0;
    for hash in gone.iter().filter(|hash| hash.len() == 64) {
        match std::fs::remove_file(crate::blobs::file_path(blobs, hash)) {
            Ok(()) => files += 1,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(ProvisionError::Invalid(format!(
                    "the blob file {hash} could not be removed: {error}"
                )));
            }
        }
    }
    Ok(files)
}

/// Runs statements through `tx` at once; answers the rows of the last one.
fn commit(tx: &mut Tx<'_>, statements: &[Statement]) -> Result<Vec<Row>, ProvisionError> {
    tx.commit(statements).map_err(|error| match error {
        CommitError::Conflict(error) | CommitError::Failed(error) => ProvisionError::Db(error),
    })
}

/// Runs an owner's write through `tx` (inside the caller's transaction).
fn owner_write(
    tx: &mut Tx<'_>,
    user: &User,
    request: WriteRequest,
) -> Result<folio_core::model::Record, ProvisionError> {
    let now = Clock.now();
    let write = RecordWrite {
        request,
        access: Access::Owner {
            entity: user.entity.clone(),
        },
        origin: Default::default(),
        fresh_id: RecordId::from_bytes(rand::random()),
        requested_at: now,
    };
    let job = Job::Writes {
        user: user.clone(),
        writes: vec![write],
    };
    match tx.run(job, now)? {
        (Ok(Done::Written(written)), _) => Ok(written.answer.record),
        (Ok(_), _) => Err(ProvisionError::Invalid(
            "a record write stored no version".into(),
        )),
        (Err(refused), _) => Err(refused.into()),
    }
}

fn post(body: &Value) -> Result<WriteRequest, ProvisionError> {
    Ok(WriteRequest::post(body.to_string().as_bytes())?)
}

/// Refuses a user name that is not core's [`UserName`]: one path segment.
pub fn check_user_name(name: &str) -> Result<(), ProvisionError> {
    name.parse::<UserName>()
        .map(drop)
        .map_err(|error| ProvisionError::Invalid(error.to_string()))
}

/// Which row id a new user gets.
#[derive(Debug, Clone, Copy)]
pub enum UserRowId {
    /// The one SQLite assigns: the native host's own users.
    Assigned,
    /// This one: a user made for the edge, whose id is
    /// [`folio_core::store::user_row_id`] of its name.
    Chosen(i64),
}

/// Creates a user with its store (the built-in types) and its public Entity record.
pub async fn add_user(
    conn: &Connection,
    name: &str,
    entity: &Entity,
    password: &str,
    base_url: &str,
) -> Result<User, ProvisionError> {
    check_user_name(name)?;
    let hash = hash_password(password)?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = create_user(
        &mut Tx::new(conn),
        name,
        entity,
        &hash,
        base_url,
        UserRowId::Assigned,
    );
    finish(conn, result)
}

/// Writes a user's row, its store's built-in types and its Entity record
/// through `tx`, inside the caller's transaction. `name` has passed
/// [`check_user_name`]; `password_hash` is [`hash_password`]'s.
pub fn create_user(
    tx: &mut Tx<'_>,
    name: &str,
    entity: &Entity,
    password_hash: &str,
    base_url: &str,
    row_id: UserRowId,
) -> Result<User, ProvisionError> {
    let now = Clock.now();
    let id = match row_id {
        UserRowId::Assigned => commit(tx, &[insert_user_sql(name, entity, password_hash, now)])?
            .first()
            .ok_or_else(|| ProvisionError::Invalid("the user was not inserted".into()))?
            .integer(0)?,
        UserRowId::Chosen(id) => {
            let row = insert_user_with_id_sql(id, name, entity, Some(password_hash), now);
            commit(tx, &[row])?;
            id
        }
    };
    commit(tx, &seed_statements(id))?;
    let key = ServerKey::from_seed(rand::random());
    let public_key = key.public_base64();
    commit(
        tx,
        &[insert_server_key_sql(id, &key.seed_base64(), &public_key)],
    )?;
    let user = User {
        id,
        name: name.to_owned(),
        entity: entity.clone(),
    };
    owner_write(
        tx,
        &user,
        post(&entity_record_body(
            entity,
            name,
            base_url,
            Some(&public_key),
        ))?
        .by_server(),
    )?;
    Ok(user)
}

/// Commits on success, rolls back on failure.
fn finish<T>(conn: &Connection, result: Result<T, ProvisionError>) -> Result<T, ProvisionError> {
    match result {
        Ok(value) => {
            conn.execute_batch("COMMIT")?;
            Ok(value)
        }
        Err(error) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(error)
        }
    }
}

/// Writes a new version of each user's Entity record whose server-kept
/// fields are not what this server publishes: endpoints that name another
/// base URL than `base_url` (PROTOCOL.md §12), `signing_keys` that are not
/// exactly the user's server key (a user from before federation gets one,
/// `docs/federation.md` §2; a key someone else added is dropped). Answers,
/// for each user whose record it rewrote, the fields that differed.
pub async fn update_entity_records(
    conn: &Connection,
    base_url: &str,
) -> Result<Vec<(User, Vec<String>)>, ProvisionError> {
    let mut updated = Vec::new();
    for user in list_users(conn)? {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = point_entity_record(conn, &mut Tx::new(conn), &user, base_url);
        let changed = finish(conn, result)?;
        if !changed.is_empty() {
            updated.push((user, changed));
        }
    }
    Ok(updated)
}

/// Gives `user` a new server key and writes a new version of their Entity
/// record that lists it alone, in one transaction: from the commit on, the
/// server signs as the user with the new key, and other servers, whose
/// copy of the record lists the old one, look the record up again when a
/// signature fails to verify (`docs/federation.md` §2). Answers the old
/// and the new public key.
pub fn rotate_server_key(
    conn: &Connection,
    user: &User,
    base_url: &str,
) -> Result<(Option<String>, String), ProvisionError> {
    let public_key = |conn: &Connection| -> Result<Option<String>, ProvisionError> {
        let rows = db::fetch(conn, &server_key_sql(user.id))?;
        Ok(match rows.first() {
            Some(row) => Some(row.text(1)?.to_owned()),
            None => None,
        })
    };
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        let old = public_key(conn)?;
        let mut tx = Tx::new(conn);
        commit(&mut tx, &[forget_server_key_sql(user.id)])?;
        point_entity_record(conn, &mut tx, user, base_url)?;
        let new = public_key(conn)?
            .ok_or_else(|| ProvisionError::Invalid("the new server key was not stored".into()))?;
        Ok((old, new))
    })();
    finish(conn, result)
}

/// Writes a new version of `user`'s Entity record through `tx` if its
/// server-kept fields are not what a server at `base_url` publishes,
/// reading it on `conn` (inside the caller's transaction); the top-level
/// fields it changed (none: nothing written).
pub fn point_entity_record(
    conn: &Connection,
    tx: &mut Tx<'_>,
    user: &User,
    base_url: &str,
) -> Result<Vec<String>, ProvisionError> {
    let rows = db::fetch_versions(conn, &entity_record_sql(user.id, &user.entity), 0)?;
    let Some((record, links)) = rows.first() else {
        return Ok(Vec::new());
    };
    let (record, _) =
        read_version(record, links).map_err(|e| ProvisionError::Invalid(e.to_string()))?;
    let key = ServerKey::from_seed(rand::random());
    commit(
        tx,
        &[insert_server_key_sql(
            user.id,
            &key.seed_base64(),
            &key.public_base64(),
        )],
    )?;
    let keys = db::fetch(conn, &server_key_sql(user.id))?;
    let public_key = match keys.first() {
        Some(row) => row.text(1)?.to_owned(),
        None => {
            return Err(ProvisionError::Invalid(
                "the server key was not stored".into(),
            ));
        }
    };
    let Some(update) = entity_record_update(
        &record,
        &user.entity,
        &user.name,
        base_url,
        Some(&public_key),
    ) else {
        return Ok(Vec::new());
    };
    let request =
        WriteRequest::put(RecordKey::of(&record), update.body.to_string().as_bytes())?.by_server();
    owner_write(tx, user, request)?;
    Ok(update.changed)
}

/// What `folio app add` created.
#[derive(Debug, Clone)]
pub struct AddedApp {
    pub app_id: RecordId,
    pub authorization_id: RecordId,
}

/// Parses `read=TYPE,...;write=TYPE,...;subscribe=TYPE,...`; a TYPE is
/// `entity+record_id` or the name of a Type record in the user's store.
pub fn parse_scope(conn: &Connection, user: &User, text: &str) -> Result<Scope, ProvisionError> {
    let mut scope = Scope::default();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (kind, types) = part.split_once('=').ok_or_else(|| {
            ProvisionError::Invalid(format!(
                "`{part}` is not `read=…`, `write=…` or `subscribe=…`"
            ))
        })?;
        let list = match kind.trim() {
            "read" => &mut scope.read,
            "write" => &mut scope.write,
            "subscribe" => &mut scope.subscribe,
            other => {
                return Err(ProvisionError::Invalid(format!(
                    "`{other}` is not read, write or subscribe"
                )));
            }
        };
        for name in types.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            list.push(resolve_type(conn, user, name)?);
        }
    }
    Ok(scope)
}

fn resolve_type(conn: &Connection, user: &User, name: &str) -> Result<RecordLink, ProvisionError> {
    if let Some((entity, id)) = name.split_once('+') {
        let invalid = || ProvisionError::Invalid(format!("`{name}` is not `entity+record_id`"));
        return Ok(RecordLink {
            entity: entity.parse().map_err(|_| invalid())?,
            original_entity: None,
            record_id: id.parse().map_err(|_| invalid())?,
        });
    }
    let rows = db::fetch(conn, &types_by_name_sql(user.id, name))?;
    let row = match rows.as_slice() {
        [] => {
            return Err(ProvisionError::UnknownTypeName {
                name: name.to_owned(),
                user: user.name.clone(),
            });
        }
        [only] => only,
        several => {
            let mut named = Vec::with_capacity(several.len());
            for row in several {
                named.push(format!("{}+{}", row.text(0)?, row.text(1)?));
            }
            return Err(ProvisionError::Invalid(format!(
                "`{name}` names {} types in {}'s store ({}): name the one meant as \
                 ENTITY+RECORD_ID (the console's Types page shows each one's fields)",
                several.len(),
                user.name,
                named.join(", ")
            )));
        }
    };
    let (entity, id) = (row.text(0)?, row.text(1)?);
    let bad = || ProvisionError::Invalid("a stored Type record has a malformed id".into());
    Ok(RecordLink {
        entity: entity.parse().map_err(|_| bad())?,
        original_entity: None,
        record_id: id.parse().map_err(|_| bad())?,
    })
}

/// Creates a server-side app: its App, Credentials and App Authorization
/// records and its key row, in one transaction. `scope` `None` is full access.
pub async fn add_app(
    conn: &Connection,
    user: &User,
    public_key: &str,
    scope: Option<Scope>,
    name: &str,
) -> Result<AddedApp, ProvisionError> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = create_app(&mut Tx::new(conn), user, public_key, scope, name);
    finish(conn, result)
}

/// Writes an app's App, Credentials and App Authorization records and its
/// key row through `tx`, inside the caller's transaction. The app's ids and
/// the server's key pair for it are drawn here.
pub fn create_app(
    tx: &mut Tx<'_>,
    user: &User,
    public_key: &str,
    scope: Option<Scope>,
    name: &str,
) -> Result<AddedApp, ProvisionError> {
    folio_core::auth::AppKey::from_base64(public_key).map_err(|_| {
        ProvisionError::Invalid("the public key is not a base64 Ed25519 key".into())
    })?;
    let full_access = scope.is_none();
    let scope = scope.unwrap_or_default();
    let app_id = RecordId::from_bytes(rand::random());
    let authorization_id = RecordId::from_bytes(rand::random());
    let credentials_id = RecordId::from_bytes(rand::random());
    let server = ServerKeys::from_seed(rand::random());
    owner_write(
        tx,
        user,
        post(&app_record_body(&app_id, name, "about:blank", &scope))?,
    )?;
    owner_write(
        tx,
        user,
        post(&credentials_record_body(
            &credentials_id,
            &user.entity,
            &app_id,
            public_key,
            &server,
        ))?,
    )?;
    owner_write(
        tx,
        user,
        post(&authorization_record_body(
            &authorization_id,
            &user.entity,
            &app_id,
            &scope,
        ))?,
    )?;
    commit(
        tx,
        &[insert_app_sql(user.id, &app_id, public_key, full_access)],
    )?;
    Ok(AddedApp {
        app_id,
        authorization_id,
    })
}

/// What `folio type add` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeAdded {
    /// A new Type record.
    New,
    /// Nothing: the user's type of that name has this content.
    Unchanged,
    /// A new version of the user's type of that name.
    NewVersion,
}

/// Adds a Type record to `user`'s store, written as the owner, as core's
/// [`TypeAddition`] decides: the same content again changes nothing,
/// changed content is a new version of the user's type of that name, and
/// a name several of the user's types share is refused, naming them.
pub async fn add_type(
    conn: &Connection,
    user: &User,
    content: &Value,
) -> Result<(folio_core::model::Record, TypeAdded), ProvisionError> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = add_type_in(&mut Tx::new(conn), conn, user, content);
    finish(conn, result)
}

fn add_type_in(
    tx: &mut Tx<'_>,
    conn: &Connection,
    user: &User,
    content: &Value,
) -> Result<(folio_core::model::Record, TypeAdded), ProvisionError> {
    let name = content
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut same_name = Vec::new();
    for row in db::fetch(conn, &types_by_name_sql(user.id, name))? {
        let (author, id) = (row.text(0)?, row.text(1)?);
        if author != user.entity.as_str() {
            continue;
        }
        let id: RecordId = id.parse().map_err(|_| {
            ProvisionError::Invalid("a stored Type record has a malformed id".into())
        })?;
        same_name.extend(records(
            conn,
            &latest_version_sql(user.id, &user.entity, &id),
        )?);
    }
    let addition = TypeAddition::decide(&same_name, content);
    let added = match addition {
        TypeAddition::Same(record) => return Ok((record.clone(), TypeAdded::Unchanged)),
        TypeAddition::Ambiguous(several) => {
            let ids: Vec<String> = several
                .iter()
                .map(|record| format!("{}+{}", record.author.entity, record.id))
                .collect();
            return Err(ProvisionError::Invalid(format!(
                "{}'s store holds {} types named `{name}` ({}): delete the ones not meant in \
                 the console, or give the new one another name",
                user.name,
                several.len(),
                ids.join(", ")
            )));
        }
        TypeAddition::New => TypeAdded::New,
        TypeAddition::NewVersion(_) => TypeAdded::NewVersion,
    };
    let request = addition
        .request(content)
        .ok_or_else(|| ProvisionError::Invalid("no write for this type".into()))??;
    Ok((owner_write(tx, user, request)?, added))
}

/// Writes a Type record through `tx`, inside the caller's transaction.
pub fn create_type(
    tx: &mut Tx<'_>,
    user: &User,
    content: &Value,
) -> Result<folio_core::model::Record, ProvisionError> {
    let body = serde_json::json!({"type": BuiltinType::Type.link(), "content": content});
    owner_write(tx, user, post(&body)?)
}

/// Installs a Type record another entity publishes in `user`'s store, as a
/// resolution from its publisher would store it (core's [`PublishedType`]).
/// The same version again stores nothing.
pub async fn install_type(
    conn: &Connection,
    user: &User,
    published: PublishedType,
) -> Result<folio_core::model::Record, ProvisionError> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = install_published_type(&mut Tx::new(conn), user, published);
    finish(conn, result)
}

/// Writes a published Type record through `tx`, inside the caller's
/// transaction: the stored version, or the one already stored.
pub fn install_published_type(
    tx: &mut Tx<'_>,
    user: &User,
    published: PublishedType,
) -> Result<folio_core::model::Record, ProvisionError> {
    let key = format!(
        "{}+{}",
        published.record().author.entity,
        published.record().id
    );
    let hash = published.record().version.hash;
    owner_write(tx, user, published.install()).map_err(|error| match error {
        ProvisionError::Refused(folio_core::Refused::Write(WriteError::VersionConflict {
            latest,
        })) => ProvisionError::Invalid(format!(
            "{}'s store holds another version of {key} ({latest}), not this one ({hash}): \
             a published type is installed once, and other content is another type",
            user.name
        )),
        other => other,
    })
}

/// One app of a user's store, as `folio app list` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ListedApp {
    pub app_id: RecordId,
    pub name: Option<String>,
    /// The live App Authorization records of the app, latest first.
    pub authorization_ids: Vec<RecordId>,
    pub full_access: bool,
}

/// The apps of a user's store, with their live authorizations.
pub fn list_apps(conn: &Connection, user: &User) -> Result<Vec<ListedApp>, ProvisionError> {
    let mut apps = Vec::new();
    for row in db::fetch(conn, &apps_sql(user.id))? {
        let app_id = row.text(0)?;
        let full_access = row.integer(2)?;
        let app_id: RecordId = app_id.parse().map_err(|_| {
            ProvisionError::Invalid(format!("a stored app id `{app_id}` is not an id"))
        })?;
        let name = records(conn, &latest_version_sql(user.id, &user.entity, &app_id))?
            .first()
            .and_then(|app| {
                app.content()?
                    .as_map()
                    .get("name")?
                    .as_str()
                    .map(str::to_owned)
            });
        let authorization_ids = records(
            conn,
            &app_authorizations_sql(user.id, &user.entity, &app_id),
        )?
        .iter()
        .map(|record| record.id)
        .collect();
        apps.push(ListedApp {
            app_id,
            name,
            authorization_ids,
            full_access: full_access != 0,
        });
    }
    Ok(apps)
}

/// Revokes an app at once: deletes the App Authorization record `id`, or
/// every live one of the app whose id is `id`. Returns how many it deleted.
pub async fn revoke(
    conn: &Connection,
    user: &User,
    id: &RecordId,
) -> Result<usize, ProvisionError> {
    let authorizations = records(conn, &app_authorizations_sql(user.id, &user.entity, id))?;
    let latest = records(conn, &latest_version_sql(user.id, &user.entity, id))?;
    let authorizations = revocation(id, &authorizations, latest.first());
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (authorizations.iter()).try_for_each(|authorization| {
        let target = RecordKey::new(user.entity.clone(), *authorization);
        let request = WriteRequest::delete(target, b"")?;
        owner_write(&mut Tx::new(conn), user, request).map(drop)
    });
    finish(conn, result.map(|()| authorizations.len()))
}

fn records(
    conn: &Connection,
    statement: &folio_core::store::Statement,
) -> Result<Vec<folio_core::model::Record>, ProvisionError> {
    db::fetch_versions(conn, statement, 0)?
        .iter()
        .map(|(record, links)| Ok(read_version(record, links)?.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The public keys `user`'s Entity record lists, as stored now.
    fn published_keys(conn: &Connection, user: &User) -> Vec<String> {
        let rows = db::fetch_versions(conn, &entity_record_sql(user.id, &user.entity), 0).unwrap();
        let (record, links) = rows.first().expect("an Entity record");
        let (record, _) = read_version(record, links).unwrap();
        record.content().expect("live").as_value()["signing_keys"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|key| key["public_key"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// A key an app added before the server kept its fields (issue 40) is
    /// dropped at the next start, and the rewrite says why.
    #[tokio::test]
    async fn a_start_puts_back_the_users_signing_keys() {
        let conn = db::open_scratch().unwrap();
        let entity: Entity = "bob.example".parse().unwrap();
        let base_url = "https://bob.example";
        let user = add_user(&conn, "bob", &entity, "a password long enough", base_url)
            .await
            .unwrap();
        let server_key = published_keys(&conn, &user);
        assert_eq!(server_key.len(), 1, "the server key is published");
        assert!(
            update_entity_records(&conn, base_url)
                .await
                .unwrap()
                .is_empty()
        );

        // What a takeover left in the store: the app's key beside the server's.
        let rows = db::fetch_versions(&conn, &entity_record_sql(user.id, &entity), 0).unwrap();
        let (record, links) = rows.first().unwrap();
        let (record, _) = read_version(record, links).unwrap();
        let mut content = record.content().unwrap().as_value().clone();
        content["signing_keys"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"algorithm": "ed25519", "public_key": "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik="}));
        let body = serde_json::json!({"content": content, "version": {"parent_hash": record.version.hash}});
        let forged = WriteRequest::put(RecordKey::of(&record), body.to_string().as_bytes())
            .unwrap()
            .by_server();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let written = owner_write(&mut Tx::new(&conn), &user, forged);
        finish(&conn, written).unwrap();
        assert_eq!(published_keys(&conn, &user).len(), 2);

        let updated = update_entity_records(&conn, base_url).await.unwrap();
        assert_eq!(updated.len(), 1);
        assert_eq!(updated[0].0.name, "bob");
        assert_eq!(updated[0].1, ["signing_keys"]);
        assert_eq!(published_keys(&conn, &user), server_key);
    }

    /// `folio type add` twice is one type; a changed schema is a new
    /// version of it; a name two types share (as stores from before hold)
    /// is refused by `type add` and by `--scope`, naming both.
    #[tokio::test]
    async fn a_type_added_again_is_the_same_type_and_a_shared_name_is_refused() {
        let conn = db::open_scratch().unwrap();
        let entity: Entity = "bob.example".parse().unwrap();
        let user = add_user(
            &conn,
            "bob",
            &entity,
            "a password long enough",
            "https://bob.example",
        )
        .await
        .unwrap();
        let note = |max: u64| {
            serde_json::json!({"name": "note", "schema": {"type": "object", "properties": {
                "content": {"type": "object", "properties": {
                    "title": {"type": "string", "max_length": max}}}}}})
        };
        let (first, added) = add_type(&conn, &user, &note(100)).await.unwrap();
        assert_eq!(added, TypeAdded::New);
        let (again, added) = add_type(&conn, &user, &note(100)).await.unwrap();
        assert_eq!(added, TypeAdded::Unchanged);
        assert_eq!(again.version.hash, first.version.hash);
        let (changed, added) = add_type(&conn, &user, &note(200)).await.unwrap();
        assert_eq!(added, TypeAdded::NewVersion);
        assert_eq!(changed.id, first.id, "the same Type record");
        assert_eq!(changed.version.parent_hash, Some(first.version.hash));
        assert!(resolve_type(&conn, &user, "note").is_ok());

        // A second `note`, written as every `type add` wrote before.
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let other = create_type(&mut Tx::new(&conn), &user, &note(300));
        let other = finish(&conn, other).unwrap();
        let both = [
            format!("bob.example+{}", first.id),
            format!("bob.example+{}", other.id),
        ];
        for refused in [
            resolve_type(&conn, &user, "note").unwrap_err().to_string(),
            add_type(&conn, &user, &note(400))
                .await
                .unwrap_err()
                .to_string(),
        ] {
            assert!(refused.contains("2 types"), "{refused}");
            for id in &both {
                assert!(refused.contains(id.as_str()), "{refused}");
            }
        }
        // Either may still be named by its id.
        assert!(resolve_type(&conn, &user, &both[1]).is_ok());
    }
}
