//! `folio`: the native host.
//!
//! The host holds sockets, TLS, files, the clock and randomness, and wires
//! them to `folio_core`, which decides everything the protocol fixes. For now
//! it only reports what it is; `folio serve` arrives with the native host
//! issue (#5).

use std::process::ExitCode;

const USAGE: &str = "\
usage: folio <command>

commands:
  serve         serve the API over HTTPS (not available yet: issue #5)
  version       print the version
  help          print this help";

fn main() -> ExitCode {
    let command = std::env::args().nth(1);
    match command.as_deref() {
        Some("version" | "--version" | "-V") => {
            println!("folio {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("help" | "--help" | "-h") | None => {
            println!("folio {}\n\n{USAGE}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("serve") => {
            eprintln!("folio: `serve` is not implemented yet (issue #5)");
            ExitCode::from(2)
        }
        Some(other) => {
            eprintln!("folio: unknown command `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
