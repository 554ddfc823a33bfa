//! `folio`: the native host.
//!
//! The host holds sockets, TLS, files, the clock and randomness, and wires
//! them to `folio_core`, which decides everything the protocol fixes.
//!
//! - `main.rs`: the command line.
//! - `server.rs`: `folio serve`: its phases, listeners, shutdown, upkeep;
//!   `app.rs`: the state the handlers share.
//! - `api.rs`: every request, to core's service; `host.rs`: core's host
//!   (reads, writes, nonces, rate limits, event streams).
//! - `writer.rs`: the single writer and its group commit; `db.rs`: SQLite
//!   (rusqlite).
//! - `hub.rs`: live event fan-out; `blobs.rs`: blob files.
//! - `users.rs`: users and server-side apps; `emit.rs`: the SQL that
//!   creates them elsewhere (`--emit-sql`, for the worker's D1);
//!   `config.rs`: the data directory and settings; `tls.rs`: certificates;
//!   `clock.rs`: time; `logs.rs`: the log; `metrics.rs`: the metrics'
//!   counters; `metrics_listener.rs`: the listener serving them and readiness.
//! - `peers.rs`: requests to other servers (federation), under core's rules;
//!   `outbox.rs`: the delivery loop and `folio outbox`.
//! - `schema_command.rs`: `folio schema`, for people who write types.
//! - `backup.rs`: `folio backup`; `transfer.rs`: `folio export` and `import`.

mod api;
mod app;
mod backup;
mod blobs;
mod clock;
mod config;
mod connections;
mod db;
mod emit;
mod host;
mod https;
mod hub;
mod logs;
mod metrics;
mod metrics_listener;
mod outbox;
mod passwords;
mod peers;
mod schema_command;
mod server;
mod standings;
mod tls;
mod transfer;
mod users;
mod writer;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use config::{DataDir, ServeOptions};
use folio_core::model::Entity;

/// mimalloc, not the system allocator: see host-native/Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "folio",
    version,
    about = "A server for versioned, typed, signed records."
)]
struct Cli {
    /// The data directory (created on first use).
    #[arg(
        long,
        global = true,
        env = "FOLIO_DATA_DIR",
        default_value = "folio-data"
    )]
    data_dir: PathBuf,
    /// How log lines are written (stderr; the filter is `FOLIO_LOG`, else
    /// `RUST_LOG`, else `info`).
    #[arg(
        long,
        global = true,
        env = "FOLIO_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: logs::LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

/// `folio outbox …`.
#[derive(Subcommand)]
enum OutboxCommand {
    /// List pending and failed notifications (the default).
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Make every failed notification due again, with another day of retries.
    Retry,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API over HTTPS (the default command).
    Serve(Box<ServeOptions>),
    /// Users of this server.
    #[command(subcommand)]
    User(UserCommand),
    /// Apps acting for a user.
    #[command(subcommand)]
    App(AppCommand),
    /// Record types in a user's store.
    #[command(subcommand)]
    Type(TypeCommand),
    /// Check record types, and records against them.
    #[command(subcommand)]
    Schema(schema_command::SchemaCommand),
    /// Notifications to other entities' servers, pending and failed
    /// (docs/federation.md §4).
    Outbox {
        #[command(subcommand)]
        command: Option<OutboxCommand>,
    },
    /// Write one user's store to FILE as a Folio archive (docs/archive.md):
    /// every version of every record in received order, the blobs, the
    /// apps' keys; the password's hash only with --with-credentials.
    Export {
        #[arg(long)]
        user: String,
        file: PathBuf,
        /// Include the password's hash (the archive then signs in as the user).
        #[arg(long)]
        with_credentials: bool,
        /// Export from the worker's store instead: this SQL dump of its D1
        /// database (`wrangler d1 export DB --output FILE`); the data
        /// directory is not read.
        #[arg(long, value_name = "FILE", requires = "r2_dir")]
        from_d1: Option<PathBuf>,
        /// With --from-d1: the user's R2 objects, each in a file named by
        /// its key (`wrangler r2 object get BUCKET/KEY --file DIR/KEY`).
        #[arg(long, value_name = "DIR", requires = "from_d1")]
        r2_dir: Option<PathBuf>,
    },
    /// Import a Folio archive as a new user of this data directory, checking
    /// every byte first; or, with --emit-sql, prepare it for the worker.
    Import {
        file: PathBuf,
        /// Write the D1 statements to this file instead (`wrangler d1 execute
        /// DB --file OUT.sql`); the data directory is not touched.
        #[arg(long, value_name = "OUT.sql", requires = "blobs_dir")]
        emit_sql: Option<PathBuf>,
        /// With --emit-sql: where the blobs go, one file per R2 object, named
        /// by its key (`wrangler r2 object put BUCKET/KEY --file DIR/KEY`).
        #[arg(long, value_name = "DIR", requires = "emit_sql")]
        blobs_dir: Option<PathBuf>,
        /// With --emit-sql: the worker's URL, which the user's Entity record
        /// is pointed at.
        #[arg(long, requires = "emit_sql")]
        base_url: Option<String>,
        /// Make the user although the entity may be another server's: it is
        /// not this server's host nor a subdomain of it, or records of it
        /// were received here from its own server. Prints a warning.
        #[arg(long)]
        allow_foreign_entity: bool,
    },
    /// Copy the data directory (database, blobs, settings, keys) to DIR, a
    /// new directory, while the server runs; `folio serve --data-dir DIR`
    /// starts on the copy as it is.
    Backup {
        /// The new directory.
        dir: PathBuf,
        /// Copy only this user's store.
        #[arg(long)]
        user: Option<String>,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user, its store and its Entity record; prints its password once.
    Add {
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
    },
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

#[derive(Subcommand)]
enum TypeCommand {
    /// Add a Type record to a user's store, as the user: what an app's
    /// scope and records then name (an app can ask for a type only once it
    /// exists). Prints its version link.
    Add {
        #[arg(long)]
        user: String,
        /// The user's entity: required with --emit-sql; otherwise, if given,
        /// it must be the user's.
        #[arg(long)]
        entity: Option<Entity>,
        /// The Type record's content as JSON: `name`, `schema`, … (see
        /// `folio schema check`).
        file: PathBuf,
        /// Print one JSON object: the version link (`entity`, `record_id`,
        /// `version_hash`) and `name`.
        #[arg(long)]
        json: bool,
        /// Write the SQL that adds the type to FILE (`-`: stdout) instead,
        /// for the worker: `wrangler d1 execute DB --file FILE`.
        #[arg(long, value_name = "FILE", requires = "entity")]
        emit_sql: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum AppCommand {
    /// Create an app with its authorization, for server-side clients and tests.
    Add {
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
    },
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    logs::init(cli.log_format);
    let command = cli.command.unwrap_or_else(|| {
        let Cli {
            command: Some(serve @ Command::Serve(_)),
            ..
        } = Cli::parse_from(["folio", "serve"])
        else {
            unreachable!("`folio serve` parses to the serve command")
        };
        serve
    });
    if let Command::Schema(command) = command {
        return command.run();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("folio: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.data_dir, command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("folio: {error}");
            ExitCode::FAILURE
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

async fn run(data_dir: PathBuf, command: Command) -> CliResult {
    let command = match command {
        Command::User(UserCommand::Add {
            name,
            entity,
            base_url,
            password_stdin,
            json,
            emit_sql: Some(file),
            allow_foreign_entity,
        }) => {
            let base_url = base_url.ok_or("--emit-sql needs --base-url: the worker's URL")?;
            let base_url = base_url.trim_end_matches('/').to_owned();
            if let Some(warning) =
                users::check_entity_here(None, &entity, &base_url, allow_foreign_entity)?
            {
                eprintln!("{warning}");
            }
            let password = read_password(password_stdin)?;
            let statements =
                emit::user_add(&name, &entity, &password, base_url.trim_end_matches('/')).await?;
            emit::write(
                &file,
                &emit::script("folio user add --emit-sql", &statements)?,
            )?;
            let shown = (!password_stdin).then_some(password.as_str());
            let done = "Wrote the SQL that creates";
            return print_user(&mut report_to(&file), json, done, &name, &entity, shown);
        }
        Command::App(AppCommand::Add {
            user,
            entity,
            public_key,
            scope,
            full_access: _,
            name,
            json,
            emit_sql: Some(file),
        }) => {
            let entity = entity.ok_or("--emit-sql needs --entity: the user's entity")?;
            let (added, statements) =
                emit::app_add(&user, &entity, &public_key, scope.as_deref(), &name).await?;
            emit::write(
                &file,
                &emit::script("folio app add --emit-sql", &statements)?,
            )?;
            return print_app(&mut report_to(&file), json, &added, &entity);
        }
        Command::Type(TypeCommand::Add {
            user,
            entity: Some(entity),
            file,
            json,
            emit_sql: Some(out),
        }) => {
            let content = read_type_content(&file)?;
            let (record, statements) = emit::type_add(&user, &entity, &content).await?;
            emit::write(
                &out,
                &emit::script("folio type add --emit-sql", &statements)?,
            )?;
            return print_type(&mut report_to(&out), json, &record);
        }
        other => other,
    };
    if let Command::Import {
        file,
        emit_sql: Some(sql),
        blobs_dir: Some(blobs),
        base_url,
        allow_foreign_entity,
    } = &command
    {
        let base_url = base_url
            .as_deref()
            .ok_or("--emit-sql needs --base-url: the worker's URL")?;
        let to = transfer::Destination::Worker {
            sql,
            blobs,
            base_url,
        };
        let (user, moved) = transfer::import(file, to, *allow_foreign_entity).await?;
        println!(
            "Wrote the SQL that imports user `{user}` ({} versions, {} app keys) to {}, \
             and its {} blob(s) to {}.\n\
             Then: wrangler d1 execute DB --file {}\n\
             and for each file in {}: wrangler r2 object put BUCKET/<file name> --file <file>",
            moved.versions,
            moved.app_keys,
            sql.display(),
            moved.blobs,
            blobs.display(),
            sql.display(),
            blobs.display(),
        );
        for advice in moved
            .foreign_entity_warning
            .iter()
            .chain(&moved.password_advice(&user))
        {
            eprintln!("{advice}");
        }
        return Ok(());
    }
    if let Command::Export {
        user,
        file,
        with_credentials,
        from_d1,
        r2_dir,
    } = &command
    {
        let data;
        let from = match (from_d1, r2_dir) {
            (Some(dump), Some(objects)) => transfer::Source::Worker { dump, objects },
            _ => {
                data = DataDir::existing(&data_dir)?;
                transfer::Source::Store(&data)
            }
        };
        let moved = transfer::export(from, user, file, *with_credentials)?;
        println!(
            "Exported user `{user}`: {} versions, {} blob(s), {} app key(s), to {}.",
            moved.versions,
            moved.blobs,
            moved.app_keys,
            file.display()
        );
        return Ok(());
    }
    if let Command::Backup { dir, user } = &command {
        let data = DataDir::existing(&data_dir)?;
        let done = backup::backup(&data, dir, user.as_deref())?;
        println!(
            "Backed up {} user(s) and {} blob(s) ({} bytes) to {}.",
            done.users,
            done.blobs,
            done.blob_bytes,
            dir.display()
        );
        return Ok(());
    }
    let data = DataDir::open(&data_dir)?;
    match command {
        Command::Serve(options) => server::serve(data, *options).await?,
        Command::User(UserCommand::Add {
            name,
            entity,
            base_url,
            password_stdin,
            json,
            emit_sql: _,
            allow_foreign_entity,
        }) => {
            let mut settings = data.settings()?;
            if let Some(base_url) = &base_url {
                settings.base_url = base_url.trim_end_matches('/').to_owned();
            }
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            if let Some(warning) = users::check_entity_here(
                Some(&conn),
                &entity,
                &settings.base_url,
                allow_foreign_entity,
            )? {
                eprintln!("{warning}");
            }
            if base_url.is_some() {
                data.save_settings(&settings)?;
            }
            let password = read_password(password_stdin)?;
            let user =
                users::add_user(&conn, &name, &entity, &password, &settings.base_url).await?;
            standings::note_outside_change(&data)?;
            let shown = (!password_stdin).then_some(password.as_str());
            let out = &mut std::io::stdout();
            print_user(out, json, "Created", &user.name, &user.entity, shown)?;
        }
        Command::Outbox { command } => {
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            match command.unwrap_or(OutboxCommand::List { json: false }) {
                OutboxCommand::List { json } => outbox::list(&conn, json)?,
                OutboxCommand::Retry => {
                    let retried = outbox::retry_failed(&conn, clock::Clock.now())?;
                    println!("{retried} failed notification(s) are due again.");
                }
            }
        }
        Command::User(UserCommand::List) => {
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            for user in users::list_users(&conn)? {
                println!("{}\t{}", user.name, user.entity);
            }
        }
        Command::App(AppCommand::Add {
            user,
            entity,
            public_key,
            scope,
            full_access: _,
            name,
            json,
            emit_sql: _,
        }) => {
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            let found = find_user(&conn, &user, entity)?;
            let scope = match scope {
                Some(text) => Some(users::parse_scope(&conn, &found, &text)?),
                None => None,
            };
            let added = users::add_app(&conn, &found, &public_key, scope, &name).await?;
            standings::note_outside_change(&data)?;
            print_app(&mut std::io::stdout(), json, &added, &found.entity)?;
        }
        Command::Type(TypeCommand::Add {
            user,
            entity,
            file,
            json,
            emit_sql: _,
        }) => {
            let content = read_type_content(&file)?;
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            let found = find_user(&conn, &user, entity)?;
            let record = users::add_type(&conn, &found, &content).await?;
            print_type(&mut std::io::stdout(), json, &record)?;
        }
        Command::App(AppCommand::List { user, json }) => {
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            let found = users::list_users(&conn)?
                .into_iter()
                .find(|u| u.name == user)
                .ok_or_else(|| format!("no user `{user}`"))?;
            let apps = users::list_apps(&conn, &found)?;
            if json {
                println!("{}", serde_json::to_string(&apps)?);
            } else {
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
            }
        }
        Command::App(AppCommand::Revoke { id, user }) => {
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            let mut revoked = 0;
            for found in users::list_users(&conn)? {
                if user.as_ref().is_none_or(|name| *name == found.name) {
                    revoked += users::revoke(&conn, &found, &id).await?;
                }
            }
            if revoked == 0 {
                return Err(format!("no live authorization `{id}`, nor an app with one").into());
            }
            standings::note_outside_change(&data)?;
            println!("revoked {revoked} authorization(s)");
        }
        Command::User(UserCommand::Passwd {
            name,
            password_stdin,
        }) => {
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            let found = find_user(&conn, &name, None)?;
            let password = read_new_password(password_stdin)?;
            users::set_password(&conn, &found, &password)?;
            println!(
                "Changed the password of `{name}`; the sessions signed in before are signed out."
            );
        }
        Command::User(UserCommand::Remove { name, yes }) => {
            let conn = db::open_writer(&data.database(), db::Durability::Full)?;
            let found = find_user(&conn, &name, None)?;
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
        }
        Command::Import {
            file,
            allow_foreign_entity,
            ..
        } => {
            let to = transfer::Destination::Store(&data);
            let (user, moved) = transfer::import(&file, to, allow_foreign_entity).await?;
            standings::note_outside_change(&data)?;
            println!(
                "Imported user `{user}`: {} versions, {} blob(s), {} app key(s).",
                moved.versions, moved.blobs, moved.app_keys
            );
            for advice in moved
                .foreign_entity_warning
                .iter()
                .chain(&moved.password_advice(&user))
            {
                eprintln!("{advice}");
            }
        }
        Command::Schema(_) | Command::Backup { .. } | Command::Export { .. } => {
            unreachable!("handled before")
        }
    }
    Ok(())
}

/// Where a command that wrote SQL to `file` reports: stderr when the SQL
/// went to stdout, so that stdout holds SQL alone.
fn report_to(file: &Path) -> Box<dyn Write> {
    if file == Path::new("-") {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    }
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
    folio_core::console::check_new_password(
        &password,
        &again,
        folio_core::console::MIN_PASSWORD_CHARS,
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

/// What `folio app add` prints.
/// The user named `name`; when `entity` is given, it must be the user's.
fn find_user(
    conn: &rusqlite::Connection,
    name: &str,
    entity: Option<Entity>,
) -> Result<users::User, String> {
    let found = users::list_users(conn)
        .map_err(|error| error.to_string())?
        .into_iter()
        .find(|u| u.name == name)
        .ok_or_else(|| format!("no user `{name}`"))?;
    if let Some(entity) = entity.filter(|entity| *entity != found.entity) {
        let at = &found.entity;
        return Err(format!("user `{name}` is at entity `{at}`, not `{entity}`"));
    }
    Ok(found)
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
