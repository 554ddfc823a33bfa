//! `folio-conformance --target target.json`: runs the suite and prints one
//! line per check, then the totals; exits 1 when any check failed.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use folio_conformance::{Exclusion, Outcome, RunOptions, Target};

/// Checks a Folio server against the record service protocol.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// JSON file describing the server and the apps to use.
    #[arg(long, required_unless_present_any = ["list", "write_hostile_peer"])]
    target: Option<PathBuf>,
    /// Run only the checks whose name contains this text.
    #[arg(long)]
    only: Option<String>,
    /// Do not run this check: `NAME` or `NAME=REASON` (repeatable).
    #[arg(long = "exclude", value_name = "NAME[=REASON]")]
    excludes: Vec<String>,
    /// Print the check names and exit.
    #[arg(long)]
    list: bool,
    /// Only create the scoped app's two Type records with the full app, then
    /// exit: a server whose grants must name existing types needs them before
    /// the scoped app is authorized (`scoped_app` may hold placeholders).
    #[arg(long)]
    prepare_scoped_types: bool,
    /// Only authorize a scoped app through registration and the consent
    /// page (creating its two types first; needs `password`), print its
    /// credentials as JSON, then exit.
    #[arg(long)]
    authorize_scoped_app: bool,
    /// Only write a hostile peer's test CA, certificate and key to DIR,
    /// for entities under `peer.test` on two free ports of loopback (its
    /// TLS listener and its plain-HTTP relay), print its `hostile_peer`
    /// configuration as JSON, then exit. A harness puts it in the target
    /// and points the server at the relay (the edge in development).
    #[arg(long, value_name = "DIR")]
    write_hostile_peer: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list {
        for name in folio_conformance::check_names() {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    if let Some(dir) = cli.write_hostile_peer {
        return match write_hostile_peer(&dir) {
            Ok(config) => {
                println!("{config}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("{error}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(path) = cli.target else {
        eprintln!("--target is required");
        return ExitCode::from(2);
    };
    let target = match read_target(&path) {
        Ok(target) => target,
        Err(error) => {
            eprintln!("{}: {error}", path.display());
            return ExitCode::from(2);
        }
    };
    if cli.prepare_scoped_types {
        let mut target = target;
        target.scoped_app.app = target.full_app.clone();
        return match folio_conformance::prepare_scoped_types(&target).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{error}");
                ExitCode::FAILURE
            }
        };
    }
    if cli.authorize_scoped_app {
        return match folio_conformance::authorize_scoped_app(&target).await {
            Ok(app) => {
                println!("{}", serde_json::to_string(&app).unwrap_or_default());
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("{error}");
                ExitCode::FAILURE
            }
        };
    }
    let options = RunOptions {
        name_filter: cli.only,
        excludes: cli
            .excludes
            .iter()
            .map(|text| parse_exclusion(text))
            .collect(),
        // The target's fault_hook, if it has one.
        faults: None,
    };
    let report = folio_conformance::run(&target, &options).await;
    for check in &report.checks {
        match &check.outcome {
            Outcome::Passed => println!("ok {}", check.name),
            Outcome::Failed(reason) => println!("FAIL {}: {reason}", check.name),
            Outcome::Excluded(reason) => println!("excluded {}: {reason}", check.name),
        }
    }
    println!(
        "HTTP/2 on the main client: {}",
        if report.http2 { "yes" } else { "no" }
    );
    println!("{} passed, {} failed", report.passed(), report.failed());
    if report.excluded() > 0 {
        println!("{} excluded", report.excluded());
    }
    if report.failed() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn read_target(path: &PathBuf) -> Result<Target, String> {
    let text = std::fs::read_to_string(path).map_err(|error| error.to_string())?;
    serde_json::from_str(&text).map_err(|error| error.to_string())
}

fn parse_exclusion(text: &str) -> Exclusion {
    match text.split_once('=') {
        Some((name, reason)) => Exclusion {
            name: name.to_string(),
            reason: reason.to_string(),
        },
        None => Exclusion {
            name: text.to_string(),
            reason: "excluded with --exclude".to_string(),
        },
    }
}

/// The hostile peer's credentials in `dir` and its configuration, as JSON.
fn write_hostile_peer(dir: &std::path::Path) -> Result<String, String> {
    let free_port = || -> Result<std::net::SocketAddr, String> {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|error| format!("a free port: {error}"))
    };
    let (config, ca) = folio_conformance::hostile_tls::write_credentials(
        dir,
        "peer.test",
        free_port()?,
        Some(free_port()?),
    )?;
    let mut json = serde_json::to_value(&config).map_err(|error| error.to_string())?;
    json["ca"] = ca.into();
    Ok(json.to_string())
}
