//! What an operator sees of federation (issue 42, item 10): Alice's
//! server delivers to Bob's, then fails to while Bob's server is down, and
//! delivers again after `folio outbox send-now`. The metrics
//! (`/metrics`), the federation health answer (`/health/federation`) and
//! `folio outbox` say so at each step, on both servers: the outbox by
//! state, the failing peers, the deliveries by outcome, and the
//! notifications received by outcome.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use folio_conformance::client::{Call, Http};
use folio_core::schema::builtin::BuiltinType;
use reqwest::Url;
use serde_json::{Value, json};
use support::tls::TestCa;
use support::{App, Server, add_app, folio, free_port, scratch};

/// How long a step may take.
const STEP: Duration = Duration::from_secs(30);

/// One side: a server, its user, an app, and its metrics listener.
struct Side {
    server: Server,
    user: &'static str,
    entity: &'static str,
    app: App,
    http: Http,
    metrics: String,
    base_url: String,
    args: Vec<String>,
}

impl Side {
    /// `folio serve` for `user` (`{user}.test`, base URL `https://{host}`)
    /// on `port`, trusting `ca`, resolving peers by `resolve`; a failed
    /// delivery waits ten minutes for its retry.
    fn start(dir: &Path, ca: &TestCa, user: &'static str, port: u16, resolve: &[String]) -> Side {
        let entity: &'static str = Box::leak(format!("{user}.test").into_boxed_str());
        let host = format!("{}.test", &user[..1]);
        let data = dir.join(user);
        std::fs::create_dir_all(&data).expect("a data directory");
        let base_url = format!("https://{host}");
        folio(
            &data,
            &[
                "user",
                "add",
                user,
                "--entity",
                entity,
                "--base-url",
                &base_url,
                "--allow-foreign-entity",
            ],
        );
        let app = add_app(&data, user, &["--full-access"]);
        let (cert, key) = ca.certificate(dir, user, &[&host, entity, "localhost"]);
        let metrics_port = free_port();
        let mut args: Vec<String> = vec![
            "--tls-cert".into(),
            cert.display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
            "--peer-ca".into(),
            ca.pem.display().to_string(),
            "--metrics-listen".into(),
            format!("127.0.0.1:{metrics_port}"),
            "--outbox-first-retry-ms".into(),
            "600000".into(),
            "--outbox-max-retry-ms".into(),
            "600000".into(),
        ];
        for rule in resolve {
            args.extend(["--peer-resolve".into(), rule.clone()]);
        }
        let extra: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Server::start_at(&data, port, &base_url, &extra, &[("RUST_LOG", "info")]);
        Side {
            server,
            user,
            entity,
            app,
            http: ca.client(),
            metrics: format!("http://127.0.0.1:{metrics_port}"),
            base_url,
            args,
        }
    }

    /// Starts the server again on its data, port and settings.
    fn restart(&mut self) {
        self.server.kill();
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.server = Server::start_at(
            &self.server.data.clone(),
            self.server.port,
            &self.base_url,
            &args,
            &[("RUST_LOG", "info")],
        );
    }

    fn url(&self, path: &str) -> Url {
        Url::parse(&format!(
            "https://localhost:{}/api/{}{path}",
            self.server.port, self.user
        ))
        .expect("a URL")
    }

    async fn create(&self, body: Value) -> Value {
        let key = self.app.key();
        let call = Call::post(self.url("/records")).json(&body).signed(&key);
        let response = self.http.send(&call).await.expect("an answer");
        assert_eq!(response.status, 200, "{}", response.excerpt());
        response.json().expect("JSON")["record"].clone()
    }

    /// Whether this side holds `record` (as its author answered it).
    async fn holds(&self, record: &Value) -> bool {
        let path = format!(
            "/records/{}/{}",
            record["author"]["entity"].as_str().expect("an author"),
            record["id"].as_str().expect("an id")
        );
        let key = self.app.key();
        let call = Call::get(self.url(&path)).signed(&key);
        let response = self.http.send(&call).await.expect("an answer");
        response.status == 200
            && response.json().expect("JSON")["record"]["version"]["hash"]
                == record["version"]["hash"]
    }

    /// Each sample of `/metrics` whose name starts with `folio_outbox`,
    /// `folio_deliveries` or `folio_notif`, by `name{labels}`.
    async fn scrape(&self) -> HashMap<String, f64> {
        let text = reqwest::get(format!("{}/metrics", self.metrics))
            .await
            .expect("/metrics answers")
            .text()
            .await
            .expect("a body");
        let lines = text.lines().map(|line| Ok(line.to_owned()));
        let parsed = prometheus_parse::Scrape::parse(lines).expect("Prometheus's parser reads it");
        let mut samples = HashMap::new();
        for sample in parsed.samples {
            if !["folio_outbox", "folio_deliveries", "folio_notif"]
                .iter()
                .any(|prefix| sample.metric.starts_with(prefix))
            {
                continue;
            }
            let labels: Vec<String> = sample
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let value = match sample.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => continue,
            };
            samples.insert(format!("{}{{{}}}", sample.metric, labels.join(",")), value);
        }
        samples
    }

    async fn health(&self) -> Value {
        let response = reqwest::get(format!("{}/health/federation", self.metrics))
            .await
            .expect("/health/federation answers");
        assert_eq!(response.status(), 200);
        response.json().await.expect("JSON")
    }

    async fn ready(&self) -> u16 {
        reqwest::get(format!("{}/ready", self.metrics))
            .await
            .expect("/ready answers")
            .status()
            .as_u16()
    }

    /// Waits until `check` holds of a scrape; the last scrape.
    async fn wait_for_metrics(
        &self,
        what: &str,
        check: impl Fn(&HashMap<String, f64>) -> bool,
    ) -> HashMap<String, f64> {
        let deadline = Instant::now() + STEP;
        loop {
            let samples = self.scrape().await;
            if check(&samples) {
                return samples;
            }
            assert!(
                Instant::now() < deadline,
                "{}: never {what}: {samples:#?}\nits log:\n{}",
                self.entity,
                self.server.log_lines().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn sample(samples: &HashMap<String, f64>, key: &str) -> f64 {
    *samples
        .get(key)
        .unwrap_or_else(|| panic!("no sample {key} in {samples:#?}"))
}

/// A record type with no rules, published by `side`: its version link.
async fn publish_type(side: &Side) -> Value {
    let record = side
        .create(json!({
            "type": serde_json::to_value(BuiltinType::Type.link()).expect("a link"),
            "content": {"name": "note", "schema": {"type": "object", "properties": {
                "content": {"type": "object", "properties": {"text": {"type": "string"}}},
            }}},
        }))
        .await;
    json!({
        "entity": record["author"]["entity"],
        "record_id": record["id"],
        "version_hash": record["version"]["hash"],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_and_notifications_show_in_metrics_health_and_the_cli() {
    let dir = scratch("federation-watch");
    let ca = TestCa::new(&dir);
    let (port_a, port_b) = (free_port(), free_port());
    let resolve = [
        format!("alice.test=127.0.0.1:{port_a}"),
        format!("a.test=127.0.0.1:{port_a}"),
        format!("bob.test=127.0.0.1:{port_b}"),
        format!("b.test=127.0.0.1:{port_b}"),
    ];
    let (alice, mut bob) = tokio::task::block_in_place(|| {
        (
            Side::start(&dir, &ca, "alice", port_a, &resolve),
            Side::start(&dir, &ca, "bob", port_b, &resolve),
        )
    });
    let note_type = publish_type(&alice).await;
    let note = |text: &str| {
        json!({
            "type": note_type,
            "permissions": {"read": [{"entity": alice.entity}, {"entity": bob.entity}]},
            "content": {"text": text},
        })
    };

    // Delivered at once: counted by both sides, nothing left waiting.
    let first = alice.create(note("first")).await;
    alice
        .wait_for_metrics("a delivery", |s| {
            sample(s, "folio_deliveries_total{outcome=\"delivered\"}") >= 1.0
        })
        .await;
    assert!(bob.holds(&first).await);
    let received = bob.scrape().await;
    assert_eq!(
        sample(
            &received,
            "folio_notifications_received_total{outcome=\"accepted\"}"
        ),
        1.0
    );
    assert!(
        sample(
            &received,
            "folio_notified_versions_total{outcome=\"stored\"}"
        ) >= 1.0
    );
    assert_eq!(
        sample(
            &received,
            "folio_notifications_received_total{outcome=\"refused\"}"
        ),
        0.0
    );
    let health = alice.health().await;
    assert_eq!(health["failing_peers"], 0, "{health}");
    assert_eq!(health["outbox"]["pending"]["notifications"], 0, "{health}");

    // Bob's server is down: the delivery fails and waits ten minutes.
    bob.server.kill();
    let missed = alice.create(note("while you were away")).await;
    let failing = alice
        .wait_for_metrics("a failing peer", |s| {
            sample(s, "folio_outbox_failing_peers{}") == 1.0
        })
        .await;
    assert_eq!(
        sample(&failing, "folio_outbox_notifications{state=\"retrying\"}"),
        1.0
    );
    assert_eq!(
        sample(&failing, "folio_outbox_notifications{state=\"failed\"}"),
        0.0
    );
    assert!(sample(&failing, "folio_deliveries_total{outcome=\"retried\"}") >= 1.0);
    let health = alice.health().await;
    assert_eq!(health["failing_peers"], 1, "{health}");
    assert_eq!(health["outbox"]["retrying"]["notifications"], 1, "{health}");
    assert_eq!(health["outbox"]["retrying"]["recipients"], 1, "{health}");
    assert_eq!(alice.ready().await, 200, "a peer down is not unreadiness");
    // A second later, the oldest waiting notification is a second old.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let older = alice.scrape().await;
    assert!(
        sample(
            &older,
            "folio_outbox_oldest_age_seconds{state=\"retrying\"}"
        ) >= 1.0
    );

    let data = alice.server.data.clone();
    let list = folio(&data, &["outbox"]);
    let mut lines = list.lines();
    assert_eq!(
        lines.next(),
        Some("STATE\tUSER\tRECORD -> RECIPIENT\tDUE\tATTEMPTS\tLAST ERROR"),
        "{list}"
    );
    let row: Vec<&str> = lines.next().expect("a row").split('\t').collect();
    assert_eq!(row[0], "retrying", "{list}");
    assert_eq!(row[1], "alice", "{list}");
    assert_eq!(
        row[2],
        format!("{} -> bob.test", missed["id"].as_str().unwrap()),
        "{list}"
    );
    assert_eq!(row[4], "1", "{list}");
    assert!(row[5].starts_with("bob.test: "), "{list}");

    // Back up: nothing is sent before the retry, ten minutes away, until
    // the operator says to send now.
    tokio::task::block_in_place(|| bob.restart());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!bob.holds(&missed).await, "sent before its retry");
    let other = folio(&data, &["outbox", "send-now", "--recipient", "carol.test"]);
    assert!(other.starts_with("0 notification(s)"), "{other}");
    let sent = folio(&data, &["outbox", "send-now", "--recipient", "bob.test"]);
    assert!(sent.starts_with("1 notification(s) are due now"), "{sent}");
    let asked = Instant::now();
    let deadline = asked + STEP;
    while !bob.holds(&missed).await {
        assert!(Instant::now() < deadline, "send-now sent nothing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Within the delivery loop's idle wake (5 s), not its old 30 s.
    assert!(
        asked.elapsed() < Duration::from_secs(12),
        "sent {:?} after send-now",
        asked.elapsed()
    );
    let settled = alice
        .wait_for_metrics("no failing peer", |s| {
            sample(s, "folio_outbox_failing_peers{}") == 0.0
        })
        .await;
    assert_eq!(
        sample(&settled, "folio_outbox_notifications{state=\"retrying\"}"),
        0.0
    );
    assert!(sample(&settled, "folio_deliveries_total{outcome=\"delivered\"}") >= 2.0);
    assert_eq!(
        folio(&data, &["outbox"]).trim(),
        "The outbox is empty: every notification was delivered."
    );
}
