//! `folio app …`: apps acting for a user. `add --emit-sql` writes the SQL
//! that makes an app on the worker's D1 instead of making it here.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use folio_core::model::Entity;

use crate::commands::{CliResult, find_user, report_to};
use crate::config::DataDir;
use crate::{db, emit, standings, users};

#[derive(Subcommand)]
pub enum AppCommand {
    /// Create an app with its authorization, for server-side clients and tests.
    Add(AddApp),
    /// List a user's apps and their live authorizations.
    List {
        #[arg(long)]
        user: String,
        /// Print one JSON array of `{app_id, name, authorization_ids, full_access}`.
        #[arg(long)]
        json: bool,
    },
    /// Revoke an app at once: ID is an App Authorization record's id, or an
    /// app id (all of its authorizations).
    Revoke {
        id: folio_core::model::RecordId,
        /// The user whose store holds it (default: every user's store).
        #[arg(long)]
        user: Option<String>,
    },
}

// `folio app add`'s arguments.
#[derive(Args)]
pub struct AddApp {
    #[arg(long)]
    user: String,
    /// The user's entity: required with --emit-sql (the records name
    /// it); otherwise, if given, it must be the user's.
    #[arg(long)]
    entity: Option<Entity>,
    /// The app's Ed25519 public key, standard base64.
    #[arg(long)]
    public_key: String,
    /// `read=TYPE,...;write=TYPE,...;subscribe=TYPE,...` (TYPE: a type name or
    /// `entity+record_id`). With --emit-sql only built-in types can be named:
    /// other Type records are in the edge store, which the CLI does not read.
    #[arg(
        long,
        conflicts_with = "full_access",
        required_unless_present = "full_access"
    )]
    scope: Option<String>,
    /// Read, write and subscribe on every type.
    #[arg(long)]
    full_access: bool,
    /// The app's name.
    #[arg(long, default_value = "Server-side app")]
    name: String,
    /// Print one JSON object: `app_id`, `authorization_id`, `entity`.
    #[arg(long)]
    json: bool,
    /// Write the SQL that creates the app to FILE (`-`: stdout, and the
    /// usual output goes to stderr) instead of creating it here, for a
    /// user made by `folio user add --emit-sql`. The data directory is
    /// not touched. The file holds the server's private key for the app.
    #[arg(long, value_name = "FILE", requires = "entity")]
    emit_sql: Option<PathBuf>,
}

impl AppCommand {
    /// Runs the command on the data directory at `data_dir`.
    pub async fn run(self, data_dir: &Path) -> CliResult {
        match self {
            AppCommand::Add(add) => match add.emit_sql.clone() {
                Some(file) => add_as_sql(add, &file).await,
                None => add_here(data_dir, add).await,
            },
            AppCommand::List { user, json } => list(data_dir, &user, json),
            AppCommand::Revoke { id, user } => revoke(data_dir, &id, user.as_deref()).await,
        }
    }
}

/// `folio app add --emit-sql FILE`: the data directory is not touched.
async fn add_as_sql(add: AddApp, file: &Path) -> CliResult {
    let entity = add
        .entity
        .ok_or("--emit-sql needs --entity: the user's entity")?;
    let (added, statements) = emit::app_add(
        &add.user,
        &entity,
        &add.public_key,
        add.scope.as_deref(),
        &add.name,
    )
    .await?;
    emit::write(
        file,
        &emit::script("folio app add --emit-sql", &statements)?,
    )?;
    print_app(&mut report_to(file), add.json, &added, &entity)
}

/// `folio app add`, in the data directory.
async fn add_here(data_dir: &Path, add: AddApp) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    let found = find_user(&conn, &add.user, add.entity)?;
    let scope = match add.scope {
        Some(text) => Some(users::parse_scope(&conn, &found, &text)?),
        None => None,
    };
    let added = users::add_app(&conn, &found, &add.public_key, scope, &add.name).await?;
    standings::note_outside_change(&data)?;
    print_app(&mut std::io::stdout(), add.json, &added, &found.entity)
}

/// `folio app list`.
fn list(data_dir: &Path, user: &str, json: bool) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    let found = users::list_users(&conn)?
        .into_iter()
        .find(|u| u.name == user)
        .ok_or_else(|| format!("no user `{user}`"))?;
    let apps = users::list_apps(&conn, &found)?;
    if json {
        println!("{}", serde_json::to_string(&apps)?);
        return Ok(());
    }
    for app in apps {
        let authorizations: Vec<String> = app
            .authorization_ids
            .iter()
            .map(ToString::to_string)
            .collect();
        println!(
            "{}\t{}\t{}{}",
            app.app_id,
            app.name.as_deref().unwrap_or("-"),
            if authorizations.is_empty() {
                "not authorized".to_owned()
            } else {
                authorizations.join(",")
            },
            if app.full_access { "\tfull access" } else { "" },
        );
    }
    Ok(())
}

/// `folio app revoke`: in `user`'s store, else in every user's.
async fn revoke(
    data_dir: &Path,
    id: &folio_core::model::RecordId,
    user: Option<&str>,
) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    let mut revoked = 0;
    for found in users::list_users(&conn)? {
        if user.is_none_or(|name| name == found.name) {
            revoked += users::revoke(&conn, &found, id).await?;
        }
    }
    if revoked == 0 {
        return Err(format!("no live authorization `{id}`, nor an app with one").into());
    }
    standings::note_outside_change(&data)?;
    println!("revoked {revoked} authorization(s)");
    Ok(())
}

/// What `folio app add` prints.
fn print_app(
    out: &mut dyn Write,
    json: bool,
    added: &users::AddedApp,
    entity: &Entity,
) -> CliResult {
    if json {
        let object = serde_json::json!({
            "app_id": added.app_id,
            "authorization_id": added.authorization_id,
            "entity": entity,
        });
        writeln!(out, "{object}")?;
    } else {
        writeln!(out, "app id: {}", added.app_id)?;
        writeln!(out, "authorization id: {}", added.authorization_id)?;
    }
    Ok(())
}
