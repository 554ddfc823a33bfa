//! `--emit-sql`: the SQL that `folio user add`, `folio app add` and `folio
//! type add` would run, for a database this host cannot open: the worker's
//! D1, where an operator runs it with `wrangler d1 execute DB --file FILE`.
//!
//! The same provisioning code as without the flag (`users::create_user`,
//! `users::create_app`, core's write driver) runs on a scratch database in
//! memory, migrated like any other, through a recording [`Tx`], which keeps each
//! statement a commit stored. The data directory is never opened. The
//! user's row id is [`user_row_id`] of its name, so that `app add` can name
//! the row later without reading D1.

use std::io::Write;
use std::path::Path;

use folio_core::User;
use folio_core::auth::apps::Scope;
use folio_core::model::{Entity, Record};
use folio_core::store::{
    LiteralSqlError, Statement, event_seq_sql, insert_user_with_id_sql, latest_version_sql,
    seed_statements, user_row_id,
};
use folio_core::write::PublishedType;
use rusqlite::Connection;

use crate::clock::Clock;
use crate::db;
use crate::users::{self, AddedApp, ProvisionError, UserRowId};
use crate::writer::Tx;

/// The statements `tx` committed, in the order they ran, without the read
/// of the user's event sequence that core's jobs end each commit with
/// ([`event_seq_sql`]): a read, not a write to run again.
pub fn recorded(tx: Tx<'_>, user_id: i64) -> Vec<Statement> {
    let read = event_seq_sql(user_id);
    let mut statements = tx.into_recorded();
    statements.retain(|statement| *statement != read);
    statements
}

/// The statements that create user `name` as `folio user add` does: its
/// row (id [`user_row_id`]`(name)`, with the argon2id hash of `password`),
/// its store's built-in types and its public Entity record naming
/// `base_url`.
pub async fn user_add(
    name: &str,
    entity: &Entity,
    password: &str,
    base_url: &str,
) -> Result<Vec<Statement>, ProvisionError> {
    users::check_user_name(name)?;
    let hash = users::hash_password(password)?;
    let id = user_row_id(name);
    let scratch = db::open_scratch()?;
    let mut recording = Tx::recording(&scratch);
    users::create_user(
        &mut recording,
        name,
        entity,
        &hash,
        base_url,
        UserRowId::Chosen(id),
    )?;
    Ok(recorded(recording, id))
}

/// The statements that create an app for user `user_name` at `entity`, as
/// `folio app add` does, on a database where [`user_add`]'s statements ran.
///
/// The scratch database is seeded with what the app's records link and
/// the edge store is known to hold: the user's row and its built-in types.
/// A scope can therefore name only built-in types (by name or
/// `entity+record_id`); any other Type record lives in the edge store
/// alone, and the write would refuse a link to it
/// ([`ProvisionError::NotBuiltInType`]).
pub async fn app_add(
    user_name: &str,
    entity: &Entity,
    public_key: &str,
    scope: Option<&str>,
    app_name: &str,
) -> Result<(AddedApp, Vec<Statement>), ProvisionError> {
    let (user, scratch) = scratch_store(user_name, entity)?;
    let scope = match scope {
        Some(text) => Some(built_in_scope(&scratch, &user, text)?),
        None => None,
    };
    let mut recording = Tx::recording(&scratch);
    let added = users::create_app(&mut recording, &user, public_key, scope, app_name)?;
    Ok((added, recorded(recording, user.id)))
}

/// The statements that add a Type record with `content` to user
/// `user_name` at `entity`, as `folio type add` does, on a database where
/// [`user_add`]'s statements ran.
pub async fn type_add(
    user_name: &str,
    entity: &Entity,
    content: &serde_json::Value,
) -> Result<(Record, Vec<Statement>), ProvisionError> {
    let (user, scratch) = scratch_store(user_name, entity)?;
    let mut recording = Tx::recording(&scratch);
    let record = users::create_type(&mut recording, &user, content)?;
    Ok((record, recorded(recording, user.id)))
}

/// The statements that install `published` in user `user_name`'s store at
/// `entity`, as `folio type add --published` does, on a database where
/// [`user_add`]'s statements ran.
pub async fn type_install(
    user_name: &str,
    entity: &Entity,
    published: PublishedType,
) -> Result<(Record, Vec<Statement>), ProvisionError> {
    let (user, scratch) = scratch_store(user_name, entity)?;
    let mut recording = Tx::recording(&scratch);
    let record = users::install_published_type(&mut recording, &user, published)?;
    Ok((record, recorded(recording, user.id)))
}

/// A scratch store holding what the edge store is known to hold for user
/// `user_name` at `entity`: the user's row and the built-in types.
fn scratch_store(user_name: &str, entity: &Entity) -> Result<(User, Connection), ProvisionError> {
    users::check_user_name(user_name)?;
    let user = User {
        id: user_row_id(user_name),
        name: user_name.to_owned(),
        entity: entity.clone(),
    };
    let scratch = db::open_scratch()?;
    let mut seed = vec![insert_user_with_id_sql(
        user.id,
        user_name,
        entity,
        None,
        Clock.now(),
    )];
    seed.extend(seed_statements(user.id));
    db::execute_all(&scratch, &seed)?;
    Ok((user, scratch))
}

/// Parses a scope on the scratch store, where only built-in types resolve.
fn built_in_scope(scratch: &Connection, user: &User, text: &str) -> Result<Scope, ProvisionError> {
    let scope = users::parse_scope(scratch, user, text).map_err(|error| match error {
        ProvisionError::UnknownTypeName { name, .. } => ProvisionError::NotBuiltInType(name),
        other => other,
    })?;
    for link in scope
        .read
        .iter()
        .chain(&scope.write)
        .chain(&scope.subscribe)
    {
        let statement = latest_version_sql(user.id, &link.entity, &link.record_id);
        if db::fetch(scratch, &statement)?.is_empty() {
            return Err(ProvisionError::NotBuiltInType(format!(
                "{}+{}",
                link.entity, link.record_id
            )));
        }
    }
    Ok(scope)
}

/// The file's text: a comment naming what made it, then each statement as
/// literal SQL on its own line. There is no `BEGIN` or `COMMIT`: D1 refuses
/// them in a file, and runs the file as one batch.
pub fn script(made_by: &str, statements: &[Statement]) -> Result<String, LiteralSqlError> {
    let mut text = format!(
        "-- Made by `{made_by}` (folio {}).\n\
         -- Run it once on a D1 or SQLite database with Folio's migrations, e.g.\n\
         -- `wrangler d1 execute DB --file FILE`. It holds secrets: keep the file private.\n",
        env!("CARGO_PKG_VERSION")
    );
    for statement in statements {
        text.push_str(&statement.to_literal_sql()?);
        text.push_str(";\n");
    }
    Ok(text)
}

/// Writes `text` to `path`, readable by this user only, or to stdout for `-`.
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if path == Path::new("-") {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        return stdout.flush();
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}
