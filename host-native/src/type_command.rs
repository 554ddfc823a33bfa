//! `folio type …`: record types in a user's store. `add --published`
//! installs a type another entity publishes under its published id (core's
//! `PublishedType`); `add --emit-sql` writes the SQL that adds a type on the
//! worker's D1 instead.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use folio_core::model::{Entity, RecordId};
use folio_core::write::PublishedType;

use crate::commands::{CliResult, find_user, report_to};
use crate::config::DataDir;
use crate::users::TypeAdded;
use crate::{db, emit, users};

#[derive(Subcommand)]
pub enum TypeCommand {
    /// Add a Type record to a user's store, as the user: what an app's
    /// scope and records then name (an app can ask for a type only once it
    /// exists). With --published, install a type another entity publishes,
    /// under its published id. Prints its version link.
    Add(AddType),
}

// `folio type add`'s arguments.
#[derive(Args)]
pub struct AddType {
    #[arg(long)]
    user: String,
    /// The user's entity: required with --emit-sql; otherwise, if given,
    /// it must be the user's.
    #[arg(long)]
    entity: Option<Entity>,
    /// The Type record's content as JSON: `name`, `schema`, … (see
    /// `folio schema check`).
    file: PathBuf,
    /// Install the type as the record ENTITY publishes under RECORD_ID
    /// (`ENTITY/RECORD_ID`, or `ENTITY+RECORD_ID`), stored as a resolution
    /// from ENTITY would store it, so that records whose type names that
    /// entity and id are accepted (e.g. the real apps' types,
    /// `types.baq.dev/153b3cb3a2f0494e950599de1cc13ef3` for `message`). The
    /// same file always makes the same version; adding it again changes
    /// nothing. See docs/apps.md, "Shared record types".
    #[arg(long, value_name = "ENTITY/RECORD_ID", value_parser = parse_published)]
    published: Option<(Entity, RecordId)>,
    /// Print one JSON object: the version link (`entity`, `record_id`,
    /// `version_hash`) and `name`.
    #[arg(long)]
    json: bool,
    /// Write the SQL that adds the type to FILE (`-`: stdout) instead,
    /// for the worker: `wrangler d1 execute DB --file FILE`.
    #[arg(long, value_name = "FILE", requires = "entity")]
    emit_sql: Option<PathBuf>,
}

impl TypeCommand {
    /// Runs the command on the data directory at `data_dir`.
    pub async fn run(self, data_dir: &Path) -> CliResult {
        match self {
            TypeCommand::Add(add) => match (&add.entity, &add.emit_sql) {
                (Some(entity), Some(out)) => add_as_sql(&add, entity, out).await,
                _ => add_here(data_dir, add).await,
            },
        }
    }
}

/// `ENTITY/RECORD_ID` (or `ENTITY+RECORD_ID`), as `--published` takes it.
fn parse_published(text: &str) -> Result<(Entity, RecordId), String> {
    let (entity, id) = text
        .split_once(['/', '+'])
        .ok_or_else(|| format!("`{text}` is not ENTITY/RECORD_ID"))?;
    let entity = entity
        .parse()
        .map_err(|e| format!("`{entity}` is not an entity: {e}"))?;
    let id = id
        .parse()
        .map_err(|e| format!("`{id}` is not a record id: {e}"))?;
    Ok((entity, id))
}

impl AddType {
    /// The published type to install, with `--published`.
    fn published(&self, content: serde_json::Value) -> Result<Option<PublishedType>, String> {
        let Some((publisher, id)) = &self.published else {
            return Ok(None);
        };
        PublishedType::new(publisher, *id, content)
            .map(Some)
            .map_err(|e| format!("{}: {e}", self.file.display()))
    }
}

/// `folio type add --emit-sql OUT`: the data directory is not touched.
async fn add_as_sql(add: &AddType, entity: &Entity, out: &Path) -> CliResult {
    let content = read_type_content(&add.file)?;
    let (record, statements) = match add.published(content.clone())? {
        Some(published) => emit::type_install(&add.user, entity, published).await?,
        None => emit::type_add(&add.user, entity, &content).await?,
    };
    emit::write(
        out,
        &emit::script("folio type add --emit-sql", &statements)?,
    )?;
    print_type(&mut report_to(out), add.json, &record)
}

/// `folio type add`, in the data directory.
async fn add_here(data_dir: &Path, add: AddType) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let content = read_type_content(&add.file)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    let found = find_user(&conn, &add.user, add.entity.clone())?;
    let (record, added) = match add.published(content.clone())? {
        Some(published) => (
            users::install_type(&conn, &found, published).await?,
            TypeAdded::New,
        ),
        None => users::add_type(&conn, &found, &content).await?,
    };
    match added {
        TypeAdded::New => {}
        TypeAdded::Unchanged => eprintln!("{}'s store already holds this type", found.name),
        TypeAdded::NewVersion => eprintln!(
            "the type's content changed: a new version of {}+{}; records keep the version \
             they were written under",
            record.author.entity, record.id
        ),
    }
    print_type(&mut std::io::stdout(), add.json, &record)
}

/// A Type record's content from a file.
fn read_type_content(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let content: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    if !content.is_object() {
        return Err(format!(
            "{}: a Type record's content is an object",
            path.display()
        ));
    }
    Ok(content)
}

/// What `folio type add` prints: the new type's name and version link.
fn print_type(out: &mut dyn Write, json: bool, record: &folio_core::model::Record) -> CliResult {
    let name = record
        .content()
        .and_then(|content| content.as_map().get("name").and_then(|n| n.as_str()))
        .unwrap_or_default()
        .to_owned();
    let (entity, id, hash) = (&record.author.entity, &record.id, &record.version.hash);
    if json {
        let object = serde_json::json!({
            "entity": entity, "record_id": id, "version_hash": hash, "name": name,
        });
        writeln!(out, "{object}")?;
    } else {
        writeln!(out, "type `{name}`: {entity}+{id} (version {hash})")?;
    }
    Ok(())
}
