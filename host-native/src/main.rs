//! `folio`: the native host.
//!
//! The host holds sockets, TLS, files, the clock and randomness, and wires
//! them to `folio_core`, which decides everything the protocol fixes.
//!
//! - `main.rs`: the command line: it parses a command and runs it; the
//!   commands of `user`, `app`, `type` and `schema` are in
//!   `user_command.rs`, `app_command.rs`, `type_command.rs` and
//!   `schema_command.rs`; `commands.rs` holds what they share.
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
mod app_command;
mod backup;
mod blobs;
mod clock;
mod commands;
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
mod type_command;
mod upkeep;
mod user_command;
mod users;
mod writer;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use app_command::AppCommand;
use clap::{Parser, Subcommand};
use commands::CliResult;
use config::{DataDir, ServeOptions};
use type_command::TypeCommand;
use user_command::UserCommand;

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
    /// Make the notifications waiting for a retry due now (a running
    /// server sends them within 5 seconds); failed ones stay failed (see
    /// `retry`).
    SendNow {
        /// Only those for this entity.
        #[arg(long, value_name = "ENTITY")]
        recipient: Option<String>,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Give a user a new server key (the key this server signs requests to
    /// other servers with as the user) and list it alone in their Entity
    /// record; other servers pick it up by themselves (docs/federation.md §2).
    Rotate {
        /// Whose key.
        #[arg(long)]
        user: String,
    },
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
    /// The server keys this server signs with for its users.
    #[command(subcommand)]
    Key(KeyCommand),
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

/// Runs `command` on the data directory at `data_dir`.
async fn run(data_dir: PathBuf, command: Command) -> CliResult {
    match command {
        Command::Serve(options) => serve(&data_dir, *options).await,
        Command::User(command) => command.run(&data_dir).await,
        Command::App(command) => command.run(&data_dir).await,
        Command::Type(command) => command.run(&data_dir).await,
        Command::Outbox { command } => outbox(&data_dir, command),
        Command::Key(KeyCommand::Rotate { user }) => user_command::rotate_key(&data_dir, &user),
        Command::Export {
            user,
            file,
            with_credentials,
            from_d1,
            r2_dir,
        } => export(
            &data_dir,
            &user,
            &file,
            with_credentials,
            from_d1.zip(r2_dir),
        ),
        Command::Import {
            file,
            emit_sql: Some(sql),
            blobs_dir: Some(blobs),
            base_url,
            allow_foreign_entity,
        } => import_as_sql(&file, &sql, &blobs, base_url, allow_foreign_entity).await,
        Command::Import {
            file,
            allow_foreign_entity,
            ..
        } => import(&data_dir, &file, allow_foreign_entity).await,
        Command::Backup { dir, user } => backup(&data_dir, &dir, user.as_deref()),
        Command::Schema(_) => unreachable!("`main` runs it without a runtime"),
    }
}

/// `folio serve`.
async fn serve(data_dir: &Path, options: ServeOptions) -> CliResult {
    let data = DataDir::open(data_dir)?;
    server::serve(data, options).await?;
    Ok(())
}

/// `folio outbox`: lists the notifications unless told to retry them.
fn outbox(data_dir: &Path, command: Option<OutboxCommand>) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let conn = db::open_writer(&data.database(), db::Durability::Full)?;
    match command.unwrap_or(OutboxCommand::List { json: false }) {
        OutboxCommand::List { json } => outbox::list(&conn, json)?,
        OutboxCommand::Retry => {
            let retried = outbox::retry_failed(&conn, clock::Clock.now())?;
            println!("{retried} failed notification(s) are due again.");
        }
        OutboxCommand::SendNow { recipient } => {
            let recipient = recipient
                .map(|entity| {
                    entity
                        .parse::<folio_core::model::Entity>()
                        .map_err(|error| format!("--recipient {entity}: {error}"))
                })
                .transpose()?;
            let due = outbox::send_now(&conn, clock::Clock.now(), recipient.as_ref())?;
            println!(
                "{due} notification(s) are due now; a running server sends them within {} seconds.",
                outbox::IDLE_WAKE.as_secs()
            );
        }
    }
    Ok(())
}

/// `folio export`: from the data directory, or from the worker's D1 dump
/// and R2 objects (`worker`).
fn export(
    data_dir: &Path,
    user: &str,
    file: &Path,
    with_credentials: bool,
    worker: Option<(PathBuf, PathBuf)>,
) -> CliResult {
    let data;
    let from = match &worker {
        Some((dump, objects)) => transfer::Source::Worker { dump, objects },
        None => {
            data = DataDir::existing(data_dir)?;
            transfer::Source::Store(&data)
        }
    };
    let moved = transfer::export(from, user, file, with_credentials)?;
    println!(
        "Exported user `{user}`: {} versions, {} blob(s), {} app key(s), to {}.",
        moved.versions,
        moved.blobs,
        moved.app_keys,
        file.display()
    );
    Ok(())
}

/// `folio import --emit-sql SQL --blobs-dir BLOBS`: the data directory is
/// not touched.
async fn import_as_sql(
    file: &Path,
    sql: &Path,
    blobs: &Path,
    base_url: Option<String>,
    allow_foreign_entity: bool,
) -> CliResult {
    let base_url = base_url
        .as_deref()
        .ok_or("--emit-sql needs --base-url: the worker's URL")?;
    let to = transfer::Destination::Worker {
        sql,
        blobs,
        base_url,
    };
    let (user, moved) = transfer::import(file, to, allow_foreign_entity).await?;
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
    print_import_advice(&user, &moved);
    Ok(())
}

/// `folio import`, into the data directory.
async fn import(data_dir: &Path, file: &Path, allow_foreign_entity: bool) -> CliResult {
    let data = DataDir::open(data_dir)?;
    let to = transfer::Destination::Store(&data);
    let (user, moved) = transfer::import(file, to, allow_foreign_entity).await?;
    standings::note_outside_change(&data)?;
    println!(
        "Imported user `{user}`: {} versions, {} blob(s), {} app key(s).",
        moved.versions, moved.blobs, moved.app_keys
    );
    print_import_advice(&user, &moved);
    Ok(())
}

/// What an import leaves the operator to know: that the entity may be
/// another server's, and what the user needs before signing in.
fn print_import_advice(user: &str, moved: &transfer::Moved) {
    for advice in moved
        .foreign_entity_warning
        .iter()
        .chain(&moved.password_advice(user))
    {
        eprintln!("{advice}");
    }
}

/// `folio backup`.
fn backup(data_dir: &Path, dir: &Path, user: Option<&str>) -> CliResult {
    let data = DataDir::existing(data_dir)?;
    let done = backup::backup(&data, dir, user)?;
    println!(
        "Backed up {} user(s) and {} blob(s) ({} bytes) to {}.",
        done.users,
        done.blobs,
        done.blob_bytes,
        dir.display()
    );
    Ok(())
}
