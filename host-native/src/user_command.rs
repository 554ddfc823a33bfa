//! `folio user …`: the users of this server. `add --emit-sql` writes the
//! SQL that makes a user on the worker's D1 instead of making it here.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use folio_core::model::Entity;

use crate::commands::{CliResult, find_user, report_to};
use crate::config::DataDir;
use crate::{db, emit, standings, users};

#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user, its store and its Entity record; prints its password once.
    Add(AddUser),
    /// List the users.
    List,
    /// Set a user's password (the console's and the consent page's); every
    /// session signed in before is signed out.
    Passwd {
        name: String,
        /// Read the password from stdin instead of asking for it twice.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Remove a user: its store (every record, version and event), the
    /// blobs no other store holds, and its apps' keys. Stop `folio serve`
    /// first: a running server remembers its users until it restarts.
    Remove {
        name: String,
        /// Do not ask for the name again.
        #[arg(long)]
        yes: bool,
    },
}

// `folio user add`'s arguments.
#[derive(Args)]
pub struct AddUser {
    /// The `{user}` path segment.
    name: String,
    /// The user's entity (a domain name).
    #[arg(long)]
    entity: Entity,
    /// The base URL written into the Entity record (stored for the data
    /// directory; with --emit-sql, required: the worker's URL).
    #[arg(long)]
    base_url: Option<String>,
    /// Read the password from stdin instead of generating one.
    #[arg(long)]
    password_stdin: bool,
    /// Print one JSON object: `user`, `entity`, `password`.
    #[arg(long)]
    json: bool,
    /// Write the SQL that creates the user to FILE (`-`: stdout, and the
    /// usual output goes to stderr) instead of creating it here, for the
    /// worker: `wrangler d1 execute DB --file FILE`. The data directory
    /// is not touched. The file holds the password's hash.
    #[arg(long, value_name = "FILE", requires = "base_url")]
    emit_sql: Option<PathBuf>,
    /// Make the user although the entity may be another server's: it is
    /// not this server's host nor a subdomain of it, or records of it
    /// were received here from its own server. Prints a warning.
    #[arg(long)]
    allow_foreign_entity: bool,
}

impl UserCommand {
    /// Runs the command on the data directory at `data_dir`.
    pub async fn run(self, data_dir: &Path) -> CliResult {
        match self {
            UserCommand::Add(add) => match add.emit_sql.clone() {
                Some(file) => add_as_sql(add, &file).await,
                None => add_here(data_dir, add).await,
            },
            UserCommand::List => list(data_dir),
            UserCommand::Passwd {
                name,
                password_stdin,
            } => passwd(data_dir, &name, password_stdin),
            UserCommand::Remove { name, yes } => remove(data_dir, &name, yes),
        }
    }
}

/// `folio user add --emit-sql FILE`: the data directory is not touched.
async fn add_as_sql(add: AddUser, file: &Path) -> CliResult {
    let base_url = add
        .base_url
        .ok_or("--emit-sql needs --base-url: the worker's URL")?;
    let base_url = base_url.trim_end_matches('/').to_owned();
    if let Some(warning) =
        users::check_entity_here(None, &add.entity, &base_url, add.allow_foreign_entity)?
    {
        eprintln!("{warning}");
    }
    let password = read_password(add.password_stdin)?;
    let statements = emit::user_add(
        &add.name,
        &add.entity,
        &password,
        base_url.trim_end_matches('/'),
    )
    .await?;
    emit::write(
        file,
        &emit::script("folio user add --emit-sql", &statements)?,
    )?;
    let shown = (!add.password_stdin).then_some(password.as_str());
    let done = "Wrote the SQL that creates";
    print_user(
        &mut report_to(file),
        add.json,
        done,
        &add.name,
        &add.entity,
        shown,
    )
}

/// `folio user add`, in the data directory.
async fn add_here(data_dir: &Path, add: AddUser) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let mut settings = data.settings()?;
    if let Some(base_url) = &add.base_url {
        settings.base_url = base_url.trim_end_matches('/').to_owned();
    }
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    if let Some(warning) = users::check_entity_here(
        Some(&conn),
        &add.entity,
        &settings.base_url,
        add.allow_foreign_entity,
    )? {
        eprintln!("{warning}");
    }
    if add.base_url.is_some() {
        data.save_settings(&settings)?;
    }
    let password = read_password(add.password_stdin)?;
    let user =
        users::add_user(&conn, &add.name, &add.entity, &password, &settings.base_url).await?;
    standings::note_outside_change(&data)?;
    let shown = (!add.password_stdin).then_some(password.as_str());
    let out = &mut std::io::stdout();
    print_user(out, add.json, "Created", &user.name, &user.entity, shown)
}

/// `folio user list`.
fn list(data_dir: &Path) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    for user in users::list_users(&conn)? {
        println!("{}\t{}", user.name, user.entity);
    }
    Ok(())
}

/// `folio user passwd`.
fn passwd(data_dir: &Path, name: &str, password_stdin: bool) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    let found = find_user(&conn, name, None)?;
    let password = read_new_password(password_stdin)?;
    users::set_password(&conn, &found, &password)?;
    println!("Changed the password of `{name}`; the sessions signed in before are signed out.");
    Ok(())
}

/// `folio user remove`: asks for the name again unless `yes`.
fn remove(data_dir: &Path, name: &str, yes: bool) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    let found = find_user(&conn, name, None)?;
    if !yes {
        eprint!(
            "This deletes every record, version and blob of `{name}` and its apps' keys.\n\
             Type the user's name to confirm: "
        );
        let mut typed = String::new();
        std::io::stdin().read_line(&mut typed)?;
        if typed.trim_end_matches(['\r', '\n']) != name {
            return Err("the name typed differs; nothing was removed".into());
        }
    }
    let files = users::remove_user(&conn, &found, &data.blobs())?;
    standings::note_outside_change(&data)?;
    println!("Removed user `{name}` and {files} blob file(s) no other user holds.");
    Ok(())
}

/// `folio key rotate --user NAME`.
pub fn rotate_key(data_dir: &Path, name: &str) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let settings = data.settings()?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    let found = find_user(&conn, name, None)?;
    let (old, new) = users::rotate_server_key(&conn, &found, &settings.base_url)?;
    standings::note_outside_change(&data)?;
    println!(
        "Rotated the server key of `{name}` ({}): {} -> {new}.\n\
         Its Entity record lists the new key alone; other servers look it up again at the first \
         request it signs (at most once a minute each), and a notification they refuse meanwhile \
         is sent again.",
        found.entity,
        old.as_deref().unwrap_or("none"),
    );
    Ok(())
}

/// The password of `folio user add`: stdin without its final line break,
/// or a fresh one.
fn read_password(from_stdin: bool) -> Result<String, Box<dyn std::error::Error>> {
    let password = if from_stdin {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text.trim_end_matches(['\r', '\n']).to_owned()
    } else {
        users::generate_password()
    };
    if password.is_empty() {
        return Err("the password is empty".into());
    }
    Ok(password)
}

/// A new password: from stdin, or typed twice at the terminal; it must
/// follow the console's rules.
fn read_new_password(from_stdin: bool) -> Result<String, Box<dyn std::error::Error>> {
    let (password, again) = if from_stdin {
        let password = read_password(true)?;
        (password.clone(), password)
    } else {
        let ask = |prompt: &str| {
            rpassword::prompt_password(prompt).map_err(|error| {
                format!("cannot read a password from the terminal ({error}); use --password-stdin")
            })
        };
        (ask("New password: ")?, ask("Again: ")?)
    };
    folio_core::service::console::check_new_password(
        &password,
        &again,
        folio_core::service::console::MIN_PASSWORD_CHARS,
    )?;
    Ok(password)
}

/// What `folio user add` prints, after `done` (what it did) unless `json`;
/// `password` only when it was generated.
fn print_user(
    out: &mut dyn Write,
    json: bool,
    done: &str,
    name: &str,
    entity: &Entity,
    password: Option<&str>,
) -> CliResult {
    if json {
        let object = serde_json::json!({"user": name, "entity": entity, "password": password});
        writeln!(out, "{object}")?;
    } else {
        writeln!(out, "{done} user `{name}` at entity `{entity}`.")?;
        if let Some(password) = password {
            writeln!(out, "Password (shown once): {password}")?;
        }
    }
    Ok(())
}
