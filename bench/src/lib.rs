//! `folio-load`: drives a Folio server (and PocketBase, for comparison)
//! with the workloads of bench/README.md, every Folio request signed like a
//! real app signs it, and reports throughput, latency, and the server
//! process's CPU time and peak memory.

pub mod drive;
pub mod federation;
pub mod flood;
pub mod folio;
pub mod http;
pub mod pocketbase;
pub mod procfs;
pub mod report;
pub mod sse;
pub mod text;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::drive::{Stop, Workload, drive};
use crate::folio::{Folio, Kind};
use crate::http::Endpoint;
use crate::pocketbase::PocketBase;
use crate::report::{Row, Usage};
use crate::sse::Feed;

/// Folio's SQLite durability setting (`folio serve --durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`, Folio's default.
    Full,
    /// `synchronous=NORMAL`, PocketBase's setting.
    Normal,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
        }
    }
}

/// One step of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Step {
    Create,
    Get,
    PublicGet,
    List,
    ListSorted,
    Update,
    /// Subscribers and writes at a fixed rate.
    Sse,
    /// Folio alone, not in the default steps: the API's list, 50 records
    /// a page.
    #[value(name = "list-50")]
    List50,
    /// Folio alone, not in the default steps: the console's records page
    /// of the same records, as HTML.
    ConsoleList,
    /// Folio alone, not in the default steps: the list with a condition
    /// on the type's tag as well.
    ListTagged,
    /// Folio alone, not in the default steps: a one-word search of the
    /// type's records, ranked (`search=`), for any word of the varied
    /// text's vocabulary (`--text varied`).
    Search,
    /// Folio alone, not in the default steps: the same for one of the 20
    /// commonest words, each in most records.
    SearchCommon,
}

impl Step {
    pub const ALL: [Step; 7] = [
        Step::Create,
        Step::Get,
        Step::PublicGet,
        Step::List,
        Step::ListSorted,
        Step::Update,
        Step::Sse,
    ];

    fn kind(self) -> Option<Kind> {
        Some(match self {
            Step::Create => Kind::Create,
            Step::Get => Kind::Get,
            Step::PublicGet => Kind::PublicGet,
            Step::List => Kind::List,
            Step::ListSorted => Kind::ListSorted,
            Step::Update => Kind::Update,
            Step::List50 => Kind::List50,
            Step::ConsoleList => Kind::ConsoleList,
            Step::ListTagged => Kind::ListTagged,
            Step::Search => Kind::Search,
            Step::SearchCommon => Kind::SearchCommon,
            Step::Sse => return None,
        })
    }

    pub fn name(self) -> &'static str {
        self.kind().map_or("sse", Kind::name)
    }
}

/// How hard and how long each step runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub steps: Vec<Step>,
    /// Connections, each sending one request after another.
    pub concurrency: usize,
    pub duration: Duration,
    /// Run before each measured step, unmeasured.
    pub warmup: Duration,
    /// Records in the store before the first step (created unmeasured).
    pub store: u64,
    pub subscribers: usize,
    /// Writes per second during the delivery test.
    pub sse_rate: u32,
    /// The users the delivery test spreads its streams and writes over
    /// (Folio only; each made with the CLI, with a full-access app).
    pub users: usize,
    /// The text of the records written (Folio only).
    pub text: text::Text,
}

/// The update chains, one per worker: each record's id and its latest
/// version's hash. Shared by every run of the update step (warm-up, rounds),
/// so each run picks up where the last one left its chain.
pub type Heads = Arc<[Mutex<(String, String)>]>;

/// A server the steps run against: Folio or PocketBase.
pub trait Subject {
    type Fixture;
    type Load: Workload;
    type Feed: Feed;

    /// `folio` or `pocketbase`.
    fn name(&self) -> &'static str;
    /// How it commits, for the table.
    fn durability(&self) -> String;
    fn pid(&self) -> u32;
    fn endpoint(&self) -> &Endpoint;
    fn fixture(&self) -> impl Future<Output = Result<Self::Fixture, String>>;
    /// One record per update chain: `(id, latest version hash)`.
    fn chain_heads(
        &self,
        fixture: &Self::Fixture,
        count: usize,
    ) -> impl Future<Output = Result<Vec<(String, String)>, String>>;
    fn workload(&self, kind: Kind, fixture: &Self::Fixture, heads: Heads) -> Self::Load;
    /// The delivery test's side of the server, over `users` users.
    fn feed(
        &self,
        fixture: &Self::Fixture,
        users: usize,
    ) -> impl Future<Output = Result<Self::Feed, String>>;
}

/// A subject with what its steps need, made once and used for every round.
pub struct Prepared<S: Subject> {
    pub subject: S,
    fixture: S::Fixture,
    heads: Heads,
    /// The delivery test's feed, made once when a step needs it.
    feed: Option<Arc<S::Feed>>,
}

impl<S: Subject> Prepared<S> {
    /// The fixture records, the update chains, and a store of
    /// `options.store` records.
    pub async fn new(subject: S, options: &Options) -> Result<Self, String> {
        let fixture = subject.fixture().await?;
        let heads = subject.chain_heads(&fixture, options.concurrency).await?;
        let heads: Heads = heads.into_iter().map(Mutex::new).collect();
        let seed = Arc::new(subject.workload(Kind::Create, &fixture, heads.clone()));
        let seeded = drive(
            subject.endpoint(),
            seed,
            options.concurrency,
            Stop::Count(options.store),
        )
        .await;
        if seeded.errors > 0 {
            return Err(format!(
                "seeding {} records: {} errors, the first: {}",
                options.store,
                seeded.errors,
                seeded.first_error.unwrap_or_default()
            ));
        }
        eprintln!(
            "{}: {} records created in {:.1} s ({:.0}/s)",
            subject.name(),
            seeded.ok,
            seeded.elapsed.as_secs_f64(),
            seeded.throughput()
        );
        let feed = match options.steps.contains(&Step::Sse) {
            true => Some(Arc::new(subject.feed(&fixture, options.users).await?)),
            false => None,
        };
        Ok(Self {
            subject,
            fixture,
            heads,
            feed,
        })
    }

    /// Runs one step; its row of the table.
    pub async fn step(&self, step: Step, options: &Options) -> Row {
        let subject = &self.subject;
        let pid = subject.pid();
        let row = Row::new(
            subject.name(),
            subject.durability(),
            step.name(),
            options.concurrency,
        );
        match step.kind() {
            Some(kind) => {
                let load = Arc::new(subject.workload(kind, &self.fixture, self.heads.clone()));
                if !options.warmup.is_zero() {
                    drive(
                        subject.endpoint(),
                        load.clone(),
                        options.concurrency,
                        Stop::After(options.warmup),
                    )
                    .await;
                }
                let (measured, usage) = Usage::of(
                    pid,
                    drive(
                        subject.endpoint(),
                        load,
                        options.concurrency,
                        Stop::After(options.duration),
                    ),
                )
                .await;
                row.with_load(&measured, usage)
            }
            None => {
                let feed = self
                    .feed
                    .clone()
                    .expect("the feed is made when the steps include the delivery test");
                let (delivery, usage) = Usage::of(
                    pid,
                    sse::measure(
                        feed,
                        subject.endpoint(),
                        options.subscribers,
                        options.sse_rate,
                        options.duration,
                    ),
                )
                .await;
                row.with_delivery(&delivery, usage)
            }
        }
    }
}

/// Starts Folio at `durability` and runs every step of `options` once.
pub async fn run_folio(
    binary: &Path,
    dir: &Path,
    durability: Durability,
    options: &Options,
) -> Result<Vec<Row>, String> {
    let mut folio = Folio::start(binary, dir, durability, &[], options.users).await?;
    folio.text = options.text;
    let prepared = Prepared::new(folio, options).await?;
    let mut rows = Vec::new();
    for &step in &options.steps {
        rows.push(prepared.step(step, options).await);
        report::print_row(rows.last().expect("just pushed"));
    }
    prepared.subject.stop().await;
    Ok(rows)
}

/// Signed GETs against Folio at `durability`: alone, then with `idle` idle
/// connections held open, then with `slowloris` slowloris connections
/// (each flood stopped before the next). `extra` goes to `folio serve`.
pub async fn flood(
    binary: &Path,
    dir: &Path,
    durability: Durability,
    options: &Options,
    floods: &[(flood::Kind, usize)],
    extra: &[String],
) -> Result<Vec<Row>, String> {
    let folio = Folio::start(binary, dir, durability, extra, 1).await?;
    let prepared = Prepared::new(folio, options).await?;
    let mut rows = vec![prepared.step(Step::Get, options).await];
    report::print_row(&rows[0]);
    for &(kind, count) in floods.iter().filter(|(_, count)| *count > 0) {
        let flood = flood::Flood::start(
            prepared.subject.endpoint(),
            kind,
            count,
            Duration::from_secs(120),
        )
        .await;
        eprintln!("folio-load: {}", flood.summary());
        let mut row = prepared.step(Step::Get, options).await;
        row.workload = match kind {
            flood::Kind::Idle => "get+idle".to_owned(),
            flood::Kind::Slowloris => "get+slow".to_owned(),
        };
        row.flood = Some(flood.summary());
        report::print_row(&row);
        rows.push(row);
        flood.stop().await;
    }
    // The server still answers once the floods are gone.
    let mut after = prepared.step(Step::Get, options).await;
    after.workload = "get+after".to_owned();
    report::print_row(&after);
    rows.push(after);
    prepared.subject.stop().await;
    Ok(rows)
}

/// Starts PocketBase and runs every step of `options` once.
pub async fn run_pocketbase(
    binary: &Path,
    dir: &Path,
    options: &Options,
) -> Result<Vec<Row>, String> {
    let pocketbase = PocketBase::start(binary, dir).await?;
    let prepared = Prepared::new(pocketbase, options).await?;
    let mut rows = Vec::new();
    for &step in &options.steps {
        rows.push(prepared.step(step, options).await);
        report::print_row(rows.last().expect("just pushed"));
    }
    prepared.subject.stop().await;
    Ok(rows)
}

/// Folio at `durability` and PocketBase, both started once and seeded, then
/// `rounds` rounds of every step, alternating which server goes first.
pub async fn compare(
    folio_binary: &Path,
    pocketbase_binary: &Path,
    dir: &Path,
    durability: Durability,
    rounds: usize,
    options: &Options,
) -> Result<Vec<Row>, String> {
    let folio = Prepared::new(
        Folio::start(folio_binary, dir, durability, &[], options.users).await?,
        options,
    )
    .await?;
    let pocketbase =
        Prepared::new(PocketBase::start(pocketbase_binary, dir).await?, options).await?;
    let mut rows = Vec::new();
    for round in 0..rounds {
        for &step in &options.steps {
            let (first, second) = if round % 2 == 0 {
                (
                    folio.step(step, options).await,
                    pocketbase.step(step, options).await,
                )
            } else {
                let second = pocketbase.step(step, options).await;
                (folio.step(step, options).await, second)
            };
            for mut row in [first, second] {
                row.round = Some(round + 1);
                report::print_row(&row);
                rows.push(row);
            }
        }
    }
    folio.subject.stop().await;
    pocketbase.subject.stop().await;
    Ok(rows)
}

/// A port nobody listens on right now.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("finding a free port: {error}"))
}

/// `folio` beside this executable (both are built into the same target
/// directory), else on `PATH`.
pub fn default_folio() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("folio")))
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from("folio"))
}
