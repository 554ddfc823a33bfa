//! `folio schema check` and `folio schema validate`: the core's type and
//! record checks, for people writing types. Everything here is decided by
//! `folio_core`; this module reads files and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use folio_core::model::Permissions;
use folio_core::model::Record;
use folio_core::schema::builtin::BuiltinType;
use folio_core::schema::{RecordType, Validated, provisional_record};
use serde_json::{Value, json};

/// The author of a partial record given to `validate`, which has no envelope.
const PLACEHOLDER_AUTHOR: &str = "author.invalid";

#[derive(Subcommand)]
pub enum SchemaCommand {
    /// Check a Type record: its content (`name`, `schema`, …) or the whole record.
    ///
    /// Prints every fault with its JSON path and exits 1, or exits 0.
    Check {
        /// The Type record, or its content, as JSON.
        type_file: PathBuf,
        /// Replaces `{var:NAME}` in the type file, e.g. `--var entity=types.example`.
        #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
        vars: Vec<(String, String)>,
    },
    /// Validate a record against a type: everything the schema alone decides.
    ///
    /// The record is a whole record, or a partial one holding `content` and
    /// optionally `permissions` (its author is then `author.invalid`). What
    /// only a store can check (that link targets exist, linked records'
    /// types, blob sizes) is listed with `--links`, not failed.
    Validate {
        /// The Type record, or its content, as JSON.
        type_file: PathBuf,
        /// The record, whole or partial, as JSON.
        record_file: PathBuf,
        /// Print the record's links and the store checks as JSON lines.
        #[arg(long)]
        links: bool,
        /// Replaces `{var:NAME}` in the type file, e.g. `--var entity=types.example`.
        #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
        vars: Vec<(String, String)>,
    },
    /// Print TypeScript declarations for a type's records, for apps using
    /// the JavaScript SDK (`folio-client`): `<Name>Content` and `<Name>`.
    Typescript {
        /// The Type record, or its content, as JSON.
        type_file: PathBuf,
        /// Replaces `{var:NAME}` in the type file, e.g. `--var entity=types.example`.
        #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
        vars: Vec<(String, String)>,
    },
}

impl SchemaCommand {
    pub fn run(self) -> ExitCode {
        let outcome = match self {
            SchemaCommand::Check { type_file, vars } => check(&type_file, &vars),
            SchemaCommand::Validate {
                type_file,
                record_file,
                links,
                vars,
            } => validate(&type_file, &record_file, links, &vars),
            SchemaCommand::Typescript { type_file, vars } => typescript(&type_file, &vars),
        };
        match outcome {
            Ok(faults) if faults.is_empty() => ExitCode::SUCCESS,
            Ok(faults) => {
                for fault in faults {
                    println!("{fault}");
                }
                ExitCode::FAILURE
            }
            Err(error) => {
                eprintln!("folio schema: {error}");
                ExitCode::from(2)
            }
        }
    }
}

fn parse_var(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once('=').ok_or("expected NAME=VALUE")?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(format!("`{name}` is not a variable name (a-z and _)"));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// Reads a JSON file, with `{var:NAME}` placeholders replaced first.
fn read_json(path: &Path, vars: &[(String, String)]) -> Result<Value, String> {
    let mut text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (name, value) in vars {
        text = text.replace(&format!("{{var:{name}}}"), value);
    }
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

/// A Type record file holds the record, or only its content.
fn type_record(file: Value) -> Result<Record, Vec<String>> {
    if file.get("schema").is_some() {
        // An envelope like the Type type's own: public, typed by the Type type.
        let mut record =
            serde_json::to_value(BuiltinType::Type.record()).map_err(|e| vec![e.to_string()])?;
        record["content"] = file;
        return serde_json::from_value(record).map_err(|e| vec![format!("$['content']: {e}")]);
    }
    serde_json::from_value(file)
        .map_err(|e| vec![format!("$: not a Type record or its content: {e}")])
}

/// The faults of a Type record, as the core finds them.
fn type_faults(record: &Record) -> Vec<String> {
    RecordType::record_faults(record)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn check(type_file: &Path, vars: &[(String, String)]) -> Result<Vec<String>, String> {
    let record = match type_record(read_json(type_file, vars)?) {
        Ok(record) => record,
        Err(faults) => return Ok(faults),
    };
    let faults = type_faults(&record);
    if faults.is_empty() {
        let name = record
            .content()
            .and_then(|c| c.as_map()["name"].as_str().map(str::to_owned));
        eprintln!("ok: the type `{}` is valid", name.unwrap_or_default());
    }
    Ok(faults)
}

/// Prints the type's TypeScript; a type with faults prints them instead.
fn typescript(type_file: &Path, vars: &[(String, String)]) -> Result<Vec<String>, String> {
    let record = match type_record(read_json(type_file, vars)?) {
        Ok(record) => record,
        Err(faults) => return Ok(faults),
    };
    let content = record.content().ok_or("$: a deleted Type record")?;
    match RecordType::from_content(content.as_value()) {
        Ok(record_type) => {
            print!("{}", record_type.typescript());
            Ok(Vec::new())
        }
        Err(fault) => Ok(vec![fault.to_string()]),
    }
}

/// A record file holds a whole record, or `content` and optionally `permissions`.
fn record(file: Value) -> Result<Record, String> {
    let is_whole = ["author", "id", "version"]
        .iter()
        .any(|key| file.get(key).is_some());
    if is_whole {
        return serde_json::from_value(file).map_err(|e| format!("$: not a record: {e}"));
    }
    let content = match file.get("content") {
        Some(Value::Object(content)) => content.clone(),
        Some(_) => return Err("$['content']: not an object".into()),
        None => return Err("$: a partial record needs `content`".into()),
    };
    let permissions = match file.get("permissions") {
        Some(permissions) => serde_json::from_value(permissions.clone())
            .map_err(|e| format!("$['permissions']: {e}"))?,
        None => Permissions::default(),
    };
    let author = PLACEHOLDER_AUTHOR.parse().map_err(|e| format!("{e}"))?;
    // The partial record's type is never read by its own schema's rules.
    let type_link = BuiltinType::Type.record().type_link.clone();
    Ok(provisional_record(author, type_link, permissions, content))
}

fn validate(
    type_file: &Path,
    record_file: &Path,
    links: bool,
    vars: &[(String, String)],
) -> Result<Vec<String>, String> {
    let type_record = match type_record(read_json(type_file, vars)?) {
        Ok(record) => record,
        Err(faults) => return Ok(faults),
    };
    let faults = type_faults(&type_record);
    if !faults.is_empty() {
        return Ok(faults
            .into_iter()
            .map(|fault| format!("type: {fault}"))
            .collect());
    }
    let content = type_record
        .content()
        .map(|c| c.as_value().clone())
        .unwrap_or_default();
    let record_type = RecordType::from_content(&content).map_err(|e| e.to_string())?;
    let record = match record(read_json(record_file, &[])?) {
        Ok(record) => record,
        Err(fault) => return Ok(vec![fault]),
    };
    match record_type.schema.validate(&record) {
        Ok(validated) => {
            if links {
                print_links(&validated);
            }
            Ok(Vec::new())
        }
        Err(violation) => Ok(vec![violation.to_string()]),
    }
}

fn print_links(validated: &Validated) {
    for link in &validated.links {
        let line = json!({
            "path": link.path, "type": link.link.kind(), "link": link.link,
            "in_content": link.in_content, "existential": link.existential
        });
        println!("{line}");
    }
    let checks = &validated.checks;
    let lines = checks
        .entities
        .iter()
        .map(|entity| json!({"check": "entity_known", "entity": entity}))
        .chain(checks.records.iter().map(|c| {
            json!({"check": "record_readable", "path": c.path, "link": c.link, "record_types": c.record_types})
        }))
        .chain(checks.versions.iter().map(|c| {
            json!({"check": "version_exists", "path": c.path, "link": c.link, "record_types": c.record_types})
        }))
        .chain(checks.blobs.iter().map(|c| {
            json!({"check": "blob_available", "path": c.path, "hash": c.hash, "size": c.size, "max_size": c.max_size})
        }));
    for line in lines {
        println!("{line}");
    }
}
