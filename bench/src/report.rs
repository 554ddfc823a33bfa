//! The table and the JSON: one row per server, step and round, and the
//! Folio/PocketBase ratios of a comparison.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::drive::Measured;
use crate::procfs;
use crate::sse::Delivery;

/// The server process's share of one step.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub cpu: Duration,
    pub peak_rss: u64,
}

/// How often the RSS is sampled when the kernel does not let the peak be reset.
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(50);

impl Usage {
    /// Runs `work` and measures what process `pid` used meanwhile.
    pub async fn of<T>(pid: u32, work: impl Future<Output = T>) -> (T, Usage) {
        let exact_peak = procfs::reset_peak(pid);
        let before = procfs::sample(pid).unwrap_or_default();
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let sampler = tokio::spawn(async move {
            let mut peak = 0;
            loop {
                peak = peak.max(procfs::sample(pid).map(|s| s.rss).unwrap_or(0));
                tokio::select! {
                    _ = stopped.changed() => return peak,
                    _ = tokio::time::sleep(RSS_SAMPLE_EVERY) => {}
                }
            }
        });
        let output = work.await;
        let after = procfs::sample(pid).unwrap_or_default();
        let _ = stop.send(true);
        let sampled = sampler.await.unwrap_or(0);
        let peak_rss = if exact_peak {
            after.peak_rss.max(sampled)
        } else {
            sampled
        };
        (
            output,
            Usage {
                cpu: after.cpu.saturating_sub(before.cpu),
                peak_rss,
            },
        )
    }
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub server: String,
    pub durability: String,
    pub workload: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// Connections sending requests (for `sse`, the connections the writer
    /// opened).
    pub concurrency: usize,
    /// Requests answered as expected (deliveries, for `sse`).
    pub ok: u64,
    pub errors: u64,
    pub seconds: f64,
    /// Answers a second (for `sse`, writes answered a second: the rate the
    /// writer achieved, from the first write to the last answer).
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub server_cpu_seconds: f64,
    pub server_peak_rss_mib: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribers: Option<usize>,
    /// The users the delivery test's subscribers and writes were spread over.
    pub users: Option<usize>,
    /// Writes due during the delivery test (`seconds` times the rate asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes_due: Option<u64>,
    /// Writes answered `200` during the delivery test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// The connection flood held open during the step ([`crate::flood`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood: Option<String>,
}

impl Row {
    pub fn new(server: &str, durability: String, workload: &str, concurrency: usize) -> Self {
        Self {
            server: server.to_owned(),
            durability,
            workload: workload.to_owned(),
            round: None,
            concurrency,
            ok: 0,
            errors: 0,
            seconds: 0.0,
            per_second: 0.0,
            p50_ms: 0.0,
            p99_ms: 0.0,
            max_ms: 0.0,
            server_cpu_seconds: 0.0,
            server_peak_rss_mib: 0.0,
            subscribers: None,
            users: None,
            writes_due: None,
            writes: None,
            missed: None,
            first_error: None,
            flood: None,
        }
    }

    pub fn with_load(mut self, measured: &Measured, usage: Usage) -> Self {
        self.ok = measured.ok;
        self.errors = measured.errors;
        self.seconds = measured.elapsed.as_secs_f64();
        self.per_second = measured.throughput();
        self.first_error = measured.first_error.clone();
        self.latencies(&measured.latency);
        self.usage(usage)
    }

    pub fn with_delivery(mut self, delivery: &Delivery, usage: Usage) -> Self {
        self.concurrency = delivery.writer_connections;
        self.ok = delivery.delivered;
        self.errors = delivery.write_errors + delivery.connect_errors as u64;
        self.seconds = delivery.elapsed.as_secs_f64();
        self.per_second = delivery.writes as f64 / self.seconds.max(f64::EPSILON);
        self.subscribers = Some(delivery.subscribers);
        self.users = Some(delivery.users);
        self.writes_due = Some(delivery.writes_due);
        self.writes = Some(delivery.writes);
        self.missed = Some(delivery.missed);
        self.first_error = delivery.first_error.clone();
        self.latencies(&delivery.latency);
        self.usage(usage)
    }

    fn latencies(&mut self, latency: &Histogram<u64>) {
        let ms = |micros: u64| micros as f64 / 1000.0;
        if !latency.is_empty() {
            self.p50_ms = ms(latency.value_at_quantile(0.50));
            self.p99_ms = ms(latency.value_at_quantile(0.99));
            self.max_ms = ms(latency.max());
        }
    }

    fn usage(mut self, usage: Usage) -> Self {
        self.server_cpu_seconds = usage.cpu.as_secs_f64();
        self.server_peak_rss_mib = usage.peak_rss as f64 / (1024.0 * 1024.0);
        self
    }
}

pub fn header() -> String {
    format!(
        "{:<10} {:<16} {:<11} {:>5} {:>5} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8}  {}",
        "server",
        "durability",
        "workload",
        "round",
        "conc",
        "per_s",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "errors",
        "cpu_s",
        "rss_mib",
        "notes"
    )
}

pub fn line(row: &Row) -> String {
    let mut notes = String::new();
    if let (Some(subscribers), Some(missed)) = (row.subscribers, row.missed) {
        let over = match row.users {
            Some(users) if users > 1 => format!(" over {users} users"),
            _ => String::new(),
        };
        notes = format!(
            "{subscribers} subscribers{over}, {} of {} writes answered, {} delivered, {missed} missed",
            row.writes.unwrap_or(0),
            row.writes_due.unwrap_or(0),
            row.ok
        );
    }
    if let Some(flood) = &row.flood {
        notes = flood.clone();
    }
    if let Some(error) = &row.first_error {
        if !notes.is_empty() {
            notes.push_str("; ");
        }
        notes.push_str("first error: ");
        notes.extend(error.chars().take(160));
    }
    format!(
        "{:<10} {:<16} {:<11} {:>5} {:>5} {:>9.0} {:>8.2} {:>8.2} {:>8.2} {:>7} {:>7.1} {:>8.1}  {}",
        row.server,
        row.durability,
        row.workload,
        row.round.map_or("-".to_owned(), |round| round.to_string()),
        row.concurrency,
        row.per_second,
        row.p50_ms,
        row.p99_ms,
        row.max_ms,
        row.errors,
        row.server_cpu_seconds,
        row.server_peak_rss_mib,
        notes
    )
}

/// Prints a row as it is measured (the header before the first).
pub fn print_row(row: &Row) {
    static HEADER: std::sync::Once = std::sync::Once::new();
    HEADER.call_once(|| println!("{}", header()));
    println!("{}", line(row));
}

/// Folio's throughput over PocketBase's, per workload, over the rounds (for
/// `sse`, PocketBase's p99 delay over Folio's: above 1 means Folio is faster).
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub workload: String,
    pub rounds: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut by_workload: BTreeMap<(usize, &str), Vec<f64>> = BTreeMap::new();
    let order = |workload: &str| {
        crate::Step::ALL
            .iter()
            .position(|step| step.name() == workload)
            .unwrap_or(usize::MAX)
    };
    for folio in rows.iter().filter(|row| row.server == "folio") {
        let Some(pocketbase) = rows.iter().find(|row| {
            row.server == "pocketbase" && row.workload == folio.workload && row.round == folio.round
        }) else {
            continue;
        };
        // For `sse` too, the writes a second each server took with the same
        // subscribers: PocketBase sends its events before it answers a
        // write, so its delays are 0 and a ratio of delays means nothing.
        let ratio = folio.per_second / pocketbase.per_second.max(f64::EPSILON);
        by_workload
            .entry((order(&folio.workload), folio.workload.as_str()))
            .or_default()
            .push(ratio);
    }
    by_workload
        .into_iter()
        .map(|((_, workload), mut values)| {
            values.sort_by(f64::total_cmp);
            Ratio {
                workload: workload.to_owned(),
                rounds: values.len(),
                min: values[0],
                median: median(&values),
                max: values[values.len() - 1],
            }
        })
        .collect()
}

fn median(sorted: &[f64]) -> f64 {
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

pub fn print_ratios(ratios: &[Ratio]) {
    println!(
        "\nFolio / PocketBase (throughput; sse: writes a second taken with the same subscribers)"
    );
    println!(
        "{:<11} {:>6} {:>8} {:>8} {:>8}",
        "workload", "rounds", "min", "median", "max"
    );
    for ratio in ratios {
        println!(
            "{:<11} {:>6} {:>8.2} {:>8.2} {:>8.2}",
            ratio.workload, ratio.rounds, ratio.min, ratio.median, ratio.max
        );
    }
}
