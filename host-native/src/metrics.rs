//! The process's metrics, in Prometheus's text format.
//!
//! The counters live for the process ([`METRICS`]): the code that sees an
//! event counts it where it happens (the request handler, the writer, the
//! hub, the rate limits, the connection caps). The sizes of the database,
//! its WAL and the blobs are read when the metrics are scraped, by the
//! listener that serves them (`metrics_listener.rs`). This module knows
//! nothing of the server: everything may count here without a circle.

use std::sync::LazyLock;
use std::time::Duration;

use folio_core::problem::ProblemType;
use folio_core::service::{
    DeliveryReport, NotificationOutcome, NotificationReceipt, OutboxState, OutboxSummary,
};
use folio_core::{Rate, Reply};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Every metric of the process.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The limits whose refusals [`Metrics::refused`] counts, each a label
/// value of `folio_refused_total` (present from the start, at 0).
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// `--read-rate`: unsigned reads per address.
    ReadRate,
    /// `--write-rate`: writes per app.
    WriteRate,
    /// `--registration-rate`: app registrations per address.
    RegistrationRate,
    /// `--sign-in-rate`: sign-in attempts per address.
    SignInRate,
    /// `--sse-per-user` and `--sse-per-server`: open event streams.
    EventStreams,
    /// `--json-body-limit` and `--blob-limit`.
    BodySize,
    /// `--target-limit`.
    TargetSize,
    /// `--header-limit`.
    HeaderSize,
    /// The events a stream may catch up on.
    CatchUp,
    /// `--max-connections` and `--max-connections-per-address`.
    Connections,
    /// `--handshakes-per-second`.
    HandshakePace,
    /// `--notification-rate`: notifications per other entity's server.
    NotificationRate,
}

impl Limit {
    const ALL: [Limit; 12] = [
        Limit::ReadRate,
        Limit::WriteRate,
        Limit::RegistrationRate,
        Limit::SignInRate,
        Limit::EventStreams,
        Limit::BodySize,
        Limit::TargetSize,
        Limit::HeaderSize,
        Limit::CatchUp,
        Limit::Connections,
        Limit::HandshakePace,
        Limit::NotificationRate,
    ];

    fn label(self) -> &'static str {
        match self {
            Limit::ReadRate => "read_rate",
            Limit::WriteRate => "write_rate",
            Limit::RegistrationRate => "registration_rate",
            Limit::SignInRate => "sign_in_rate",
            Limit::EventStreams => "event_streams",
            Limit::BodySize => "body_size",
            Limit::TargetSize => "target_size",
            Limit::HeaderSize => "header_size",
            Limit::CatchUp => "catch_up",
            Limit::Connections => "connections",
            Limit::HandshakePace => "handshake_pace",
            Limit::NotificationRate => "notification_rate",
        }
    }

    /// The limit a rate refusal hit.
    pub fn of_rate(rate: &Rate<'_>) -> Limit {
        match rate {
            Rate::AnonymousRead(_) => Limit::ReadRate,
            // Refused discoveries are unsigned requests refused, as reads are.
            Rate::UnverifiedDiscovery(_) | Rate::AnyUnverifiedDiscovery => Limit::ReadRate,
            Rate::Write(_) => Limit::WriteRate,
            Rate::Registration(_) => Limit::RegistrationRate,
            Rate::SignIn(_) | Rate::AccountSignIn(_) | Rate::AccountSignedIn(_) => {
                Limit::SignInRate
            }
            // A refused rediscovery answers nothing: the signature fails as it is.
            Rate::Notification { .. } | Rate::Rediscovery(_) => Limit::NotificationRate,
        }
    }

    /// The limit a problem answered by core reports, for those the host
    /// does not count where they happen.
    fn of_problem(kind: ProblemType) -> Option<Limit> {
        match kind {
            ProblemType::BodyTooLarge => Some(Limit::BodySize),
            ProblemType::UriTooLong => Some(Limit::TargetSize),
            ProblemType::HeadersTooLarge => Some(Limit::HeaderSize),
            ProblemType::TooManyEvents => Some(Limit::CatchUp),
            _ => None,
        }
    }
}

/// The request durations' buckets, in seconds: 0.5 ms to 10 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Writes per group commit: 1 to the writer's most.
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    request_seconds: HistogramVec,
    commit_writes: Histogram,
    commit_seconds: Histogram,
    wal_restart_seconds: Histogram,
    streams_open: IntGauge,
    events_sent: IntCounter,
    streams_lagged: IntCounter,
    refused: IntCounterVec,
    replays: IntCounter,
    database_bytes: IntGauge,
    wal_bytes: IntGauge,
    blob_bytes: IntGauge,
    outbox_notifications: IntGaugeVec,
    outbox_oldest_seconds: IntGaugeVec,
    outbox_failing_peers: IntGauge,
    deliveries: IntCounterVec,
    notifications_received: IntCounterVec,
    received_versions: IntCounterVec,
}

/// The label values of `folio_deliveries_total`: what a delivery did to
/// each notification ([`DeliveryReport`]).
const DELIVERY_OUTCOMES: [&str; 3] = ["delivered", "retried", "failed"];

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        fn register<M: prometheus::core::Collector + Clone + 'static>(
            registry: &Registry,
            metric: prometheus::Result<M>,
        ) -> M {
            let metric = metric.expect("a valid metric definition");
            registry
                .register(Box::new(metric.clone()))
                .expect("each metric is registered once");
            metric
        }
        let counter = |name: &str, help: &str| register(&registry, IntCounter::new(name, help));
        let gauge = |name: &str, help: &str| register(&registry, IntGauge::new(name, help));
        let metrics = Metrics {
            requests: register(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "folio_requests_total",
                        "Requests answered, by route and status.",
                    ),
                    &["route", "status"],
                ),
            ),
            request_seconds: register(
                &registry,
                HistogramVec::new(
                    HistogramOpts::new(
                        "folio_request_duration_seconds",
                        "Time to the answer's head, by route.",
                    )
                    .buckets(LATENCY_BUCKETS.to_vec()),
                    &["route"],
                ),
            ),
            commit_writes: register(
                &registry,
                Histogram::with_opts(
                    HistogramOpts::new("folio_commit_batch_writes", "Write jobs per group commit.")
                        .buckets(BATCH_BUCKETS.to_vec()),
                ),
            ),
            commit_seconds: register(
                &registry,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "folio_commit_duration_seconds",
                        "Time of one group commit, its jobs and the commit itself.",
                    )
                    .buckets(LATENCY_BUCKETS.to_vec()),
                ),
            ),
            wal_restart_seconds: register(
                &registry,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "folio_wal_restart_duration_seconds",
                        "Time the writer spent restarting the WAL (its last checkpoint), \
                         between group commits.",
                    )
                    .buckets(LATENCY_BUCKETS.to_vec()),
                ),
            ),
            streams_open: gauge("folio_event_streams_open", "Event streams open now."),
            events_sent: counter(
                "folio_events_sent_total",
                "Events sent on event streams, catch-up and live.",
            ),
            streams_lagged: counter(
                "folio_event_streams_lagged_total",
                "Event streams ended because they fell too far behind.",
            ),
            refused: register(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "folio_refused_total",
                        "Requests and connections refused, by limit.",
                    ),
                    &["limit"],
                ),
            ),
            replays: counter(
                "folio_replayed_requests_total",
                "Signed requests refused as replays of one already received.",
            ),
            database_bytes: gauge("folio_database_bytes", "Size of the database file."),
            wal_bytes: gauge("folio_wal_bytes", "Size of the database's write-ahead log."),
            blob_bytes: gauge("folio_blob_bytes", "Bytes of the blobs stored."),
            outbox_notifications: register(
                &registry,
                IntGaugeVec::new(
                    Opts::new(
                        "folio_outbox_notifications",
                        "Notifications in the outbox, by state (pending, retrying, failed).",
                    ),
                    &["state"],
                ),
            ),
            outbox_oldest_seconds: register(
                &registry,
                IntGaugeVec::new(
                    Opts::new(
                        "folio_outbox_oldest_age_seconds",
                        "Age of the oldest notification in the outbox, by state; 0 when none.",
                    ),
                    &["state"],
                ),
            ),
            outbox_failing_peers: gauge(
                "folio_outbox_failing_peers",
                "Recipients whose latest delivery failed and who wait for a retry.",
            ),
            deliveries: register(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "folio_deliveries_total",
                        "Notifications the outbox sent, by outcome (delivered, retried, failed).",
                    ),
                    &["outcome"],
                ),
            ),
            notifications_received: register(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "folio_notifications_received_total",
                        "Notifications other servers sent, by outcome (accepted, refused, \
                         quota_exceeded, rate_limited, failed).",
                    ),
                    &["outcome"],
                ),
            ),
            received_versions: register(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "folio_notified_versions_total",
                        "Versions in the notifications other servers sent: stored, or the \
                         problem code each was refused with.",
                    ),
                    &["outcome"],
                ),
            ),
            registry,
        };
        for limit in Limit::ALL {
            metrics.refused.with_label_values(&[limit.label()]);
        }
        for state in OutboxState::ALL {
            metrics
                .outbox_notifications
                .with_label_values(&[state.label()]);
            metrics
                .outbox_oldest_seconds
                .with_label_values(&[state.label()]);
        }
        for outcome in DELIVERY_OUTCOMES {
            metrics.deliveries.with_label_values(&[outcome]);
        }
        for outcome in NotificationOutcome::ALL {
            metrics
                .notifications_received
                .with_label_values(&[outcome.label()]);
        }
        metrics.received_versions.with_label_values(&["stored"]);
        metrics
    }

    /// An answered request: its route, status, duration, and the limit or
    /// replay it was refused for.
    pub fn request<S>(&self, reply: &Reply<S>, took: Duration) {
        let status = reply.status.to_string();
        self.requests
            .with_label_values(&[reply.route, status.as_str()])
            .inc();
        self.request_seconds
            .with_label_values(&[reply.route])
            .observe(took.as_secs_f64());
        match reply.problem {
            Some(ProblemType::ReplayedRequest) => self.replays.inc(),
            Some(kind) => {
                if let Some(limit) = Limit::of_problem(kind) {
                    self.refused(limit);
                }
            }
            None => {}
        }
        if let Some(receipt) = &reply.notification {
            self.notification_received(receipt);
        }
    }

    /// A notification another server sent, and what it did.
    fn notification_received(&self, receipt: &NotificationReceipt) {
        self.notifications_received
            .with_label_values(&[receipt.outcome.label()])
            .inc();
        if receipt.stored > 0 {
            self.received_versions
                .with_label_values(&["stored"])
                .inc_by(u64::try_from(receipt.stored).unwrap_or(u64::MAX));
        }
        for code in &receipt.refused {
            self.received_versions.with_label_values(&[code]).inc();
        }
    }

    /// What one delivery of the outbox did.
    pub fn delivery(&self, report: &DeliveryReport) {
        for (outcome, count) in
            DELIVERY_OUTCOMES
                .into_iter()
                .zip([report.delivered, report.retried, report.failed])
        {
            if count > 0 {
                self.deliveries
                    .with_label_values(&[outcome])
                    .inc_by(u64::try_from(count).unwrap_or(u64::MAX));
            }
        }
    }

    /// A request or connection refused by `limit`.
    pub fn refused(&self, limit: Limit) {
        self.refused.with_label_values(&[limit.label()]).inc();
    }

    /// A group commit of `writes` jobs that took `took`.
    pub fn commit(&self, writes: usize, took: Duration) {
        self.commit_writes.observe(writes as f64);
        self.commit_seconds.observe(took.as_secs_f64());
    }

    /// A restart of the WAL by the writer that took `took`: no write
    /// commits meanwhile.
    pub fn wal_restart(&self, took: Duration) {
        self.wal_restart_seconds.observe(took.as_secs_f64());
    }

    pub fn stream_opened(&self) {
        self.streams_open.inc();
    }

    pub fn stream_closed(&self) {
        self.streams_open.dec();
    }

    pub fn events_sent(&self, count: usize) {
        self.events_sent
            .inc_by(u64::try_from(count).unwrap_or(u64::MAX));
    }

    pub fn stream_lagged(&self) {
        self.streams_lagged.inc();
    }

    #[cfg(test)]
    pub fn streams_lagged(&self) -> u64 {
        self.streams_lagged.get()
    }

    /// The text exposition, with the store's sizes and the outbox as of
    /// now (the outbox's gauges keep their last values when it could not
    /// be read).
    pub fn render(&self, sizes: StoreSizes, outbox: Option<&OutboxSummary>) -> String {
        self.database_bytes.set(sizes.database);
        self.wal_bytes.set(sizes.wal);
        self.blob_bytes.set(sizes.blobs);
        if let Some(outbox) = outbox {
            let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
            for state in OutboxState::ALL {
                let count = outbox.of(state);
                self.outbox_notifications
                    .with_label_values(&[state.label()])
                    .set(gauge(count.notifications));
                self.outbox_oldest_seconds
                    .with_label_values(&[state.label()])
                    .set(gauge(count.oldest_age_ms / 1000));
            }
            self.outbox_failing_peers.set(gauge(outbox.failing_peers()));
        }
        let mut text = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut text)
            .expect("the text encoder writes to memory");
        String::from_utf8(text).expect("the text format is UTF-8")
    }
}

/// The store's sizes in bytes.
pub struct StoreSizes {
    pub database: i64,
    pub wal: i64,
    pub blobs: i64,
}
