//! `folio`: the native host.
//!
//! The host holds sockets, TLS, files, the clock and randomness, and wires
//! them to `folio_core`, which decides everything the protocol fixes.
//!
//! - `main.rs`: the command line.
//! - `schema_command.rs`: `folio schema`, which checks record types and
//!   records for the people who write them.
//!
//! `folio serve` arrives with the native host issue (#5).

mod schema_command;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "folio",
    version,
    about = "A server for versioned, typed, signed records."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API over HTTPS (not available yet: issue #5).
    Serve,
    /// Check record types, and records against them.
    #[command(subcommand)]
    Schema(schema_command::SchemaCommand),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve => {
            eprintln!("folio: `serve` is not implemented yet (issue #5)");
            ExitCode::from(2)
        }
        Command::Schema(command) => command.run(),
    }
}
