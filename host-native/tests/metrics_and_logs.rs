//! What an operator watches: the metrics listener answers in Prometheus's
//! text format (read back with a Prometheus parser), each metric moves when
//! its event happens, `/ready` answers, and the log in JSON mode is one
//! JSON object a line, without colour codes, with one line per request.
//! (A stream dropped for lag is driven in `host.rs`'s unit tests; the
//! conformance run checks that no line carries a secret.)

mod support;

use std::collections::HashMap;
use std::time::Duration;

use folio_conformance::client::{Auth, Call, Http, nonce, now_ms, sign_call};
use folio_conformance::context::Ctx;
use folio_conformance::signer::Layout;
use folio_conformance::sse::EventStream;
use serde_json::{Value, json};
use support::{Server, add_app, add_me, free_port, scratch};

/// One scrape: each sample's value by its name and labels
/// (`name{a="x",b="y"}`, labels sorted).
struct Scrape(HashMap<String, f64>);

impl Scrape {
    async fn take(metrics: &str) -> Scrape {
        let response = reqwest::get(format!("{metrics}/metrics"))
            .await
            .expect("the metrics listener answers");
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "Prometheus's text format: {content_type}"
        );
        let text = response.text().await.expect("a body");
        let lines = text.lines().map(|line| Ok(line.to_owned()));
        let parsed = prometheus_parse::Scrape::parse(lines).expect("Prometheus's parser reads it");
        let mut samples = HashMap::new();
        for sample in parsed.samples {
            let mut labels: Vec<_> = sample.labels.iter().collect();
            labels.sort();
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            let value = match sample.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(buckets) => {
                    // The `_count` sample: the +Inf bucket.
                    buckets.last().map_or(0.0, |bucket| bucket.count)
                }
                prometheus_parse::Value::Summary(_) => continue,
            };
            samples.insert(format!("{}{{{}}}", sample.metric, labels.join(",")), value);
        }
        Scrape(samples)
    }

    fn get(&self, key: &str) -> f64 {
        *self
            .0
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key} in {:?}", self.0.keys()))
    }
}

/// Asserts that `key` moved up between two scrapes, saying what should have moved it.
fn moved(before: &Scrape, after: &Scrape, key: &str, why: &str) {
    let (was, is) = (before.0.get(key).copied().unwrap_or(0.0), after.get(key));
    assert!(is > was, "{key} did not move after {why}: {was} -> {is}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_moves_with_its_event_and_the_json_log_parses() {
    let data = scratch("metrics-and-logs");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let app = add_app(&data, "me", &["--full-access"]);
    let busy = add_app(&data, "me", &["--full-access"]);
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}");
    let server = tokio::task::block_in_place(|| {
        Server::start_with_env(
            &data,
            port,
            &[
                "--metrics-listen",
                &format!("127.0.0.1:{metrics_port}"),
                "--log-format",
                "json",
                "--read-rate",
                "1/1",
                "--json-body-limit",
                "4096",
                "--sse-per-user",
                "1",
                "--write-rate",
                "5/5",
                "--target-limit",
                "2048",
                "--header-limit",
                "8192",
                "--max-connections-per-address",
                "32",
            ],
            &[("FOLIO_LOG", "info")],
        )
    });
    let ctx = Ctx::new(&app.target(&server)).expect("a client");
    let once = ctx.http.without_retries();

    let ready = reqwest::get(format!("{metrics}/ready"))
        .await
        .expect("/ready answers");
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.text().await.unwrap(), "ready\n");

    let start = Scrape::take(&metrics).await;
    for limit in [
        "read_rate",
        "write_rate",
        "body_size",
        "event_streams",
        "connections",
    ] {
        assert_eq!(
            start.get(&format!("folio_refused_total{{limit=\"{limit}\"}}")),
            0.0
        );
    }
    // Federation's metrics are there from the start, at 0 (a test with
    // two servers, `federation_watch.rs`, moves them).
    for state in ["pending", "retrying", "failed"] {
        for metric in [
            "folio_outbox_notifications",
            "folio_outbox_oldest_age_seconds",
        ] {
            assert_eq!(start.get(&format!("{metric}{{state=\"{state}\"}}")), 0.0);
        }
    }
    assert_eq!(start.get("folio_outbox_failing_peers{}"), 0.0);
    for outcome in ["delivered", "retried", "failed"] {
        assert_eq!(
            start.get(&format!("folio_deliveries_total{{outcome=\"{outcome}\"}}")),
            0.0
        );
    }
    for outcome in [
        "accepted",
        "refused",
        "quota_exceeded",
        "rate_limited",
        "failed",
    ] {
        assert_eq!(
            start.get(&format!(
                "folio_notifications_received_total{{outcome=\"{outcome}\"}}"
            )),
            0.0
        );
    }
    let health = reqwest::get(format!("{metrics}/health/federation"))
        .await
        .expect("/health/federation answers");
    assert_eq!(health.status(), 200);
    let health: Value = health.json().await.expect("JSON");
    assert_eq!(health["failing_peers"], 0, "{health}");

    // A write: a request of its route, a group commit, the store's sizes.
    let ty = ctx.note_type().await.expect("a type");
    let listed = once
        .send(&Call::get(ctx.records_url().unwrap()).signed(&ctx.full))
        .await
        .expect("a list");
    assert_eq!(listed.status, 200);
    let request_id = listed.header_text("x-request-id").expect("a request id");
    // An event stream, open while a record is written: it is counted open,
    // and the record's event counted sent.
    let stream = once
        .open(&Call::get(ctx.events_url().unwrap()).signed(&ctx.full))
        .await
        .expect("an event stream");
    assert_eq!(stream.status(), 200);
    let mut stream = EventStream::new(stream);
    let opened = Scrape::take(&metrics).await;
    assert_eq!(opened.get("folio_event_streams_open{}"), 1.0);
    let record = ctx
        .note(&ty, json!({"title": "hello"}))
        .await
        .expect("a record");
    let id = record["id"].as_str().expect("an id").to_owned();
    // The stream catches up on the type first.
    loop {
        let event = stream
            .next_record(Duration::from_secs(10))
            .await
            .expect("the stream goes on")
            .expect("the record's event");
        if event.record_id() == id {
            break;
        }
    }
    // A second stream is over `--sse-per-user 1`.
    let second = once
        .send(&Call::get(ctx.events_url().unwrap()).signed(&ctx.full))
        .await
        .expect("an answer");
    assert_eq!(second.status, 429);
    let written = Scrape::take(&metrics).await;
    moved(
        &start,
        &written,
        "folio_requests_total{route=\"records.create\",status=\"200\"}",
        "a create",
    );
    moved(
        &start,
        &written,
        "folio_request_duration_seconds{route=\"records.create\"}",
        "a create",
    );
    moved(&start, &written, "folio_commit_batch_writes{}", "a create");
    moved(
        &start,
        &written,
        "folio_commit_duration_seconds{}",
        "a create",
    );
    moved(
        &start,
        &written,
        "folio_events_sent_total{}",
        "an event sent",
    );
    moved(
        &start,
        &written,
        "folio_refused_total{limit=\"event_streams\"}",
        "a stream over the cap",
    );
    assert!(written.get("folio_database_bytes{}") > 0.0);
    assert!(
        written.get("folio_wal_bytes{}") > 0.0,
        "the WAL holds the writes"
    );
    drop(stream);

    // A replayed request.
    let mut call = Call::get(ctx.record_url(&id).unwrap());
    let (key, layout) = (app.key(), Layout::WithAlgorithmLine);
    call.auth = Auth::Header(sign_call(&call, &key, &[], layout, now_ms(), &nonce()));
    assert_eq!(once.send(&call).await.expect("an answer").status, 200);
    let replayed = once.send(&call).await.expect("an answer");
    assert_eq!(replayed.json().unwrap()["code"], "replayed_request");
    // Unsigned reads over `--read-rate 1/1`.
    let anonymous = Http::new(&app.target(&server)).unwrap().without_retries();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let call = Call::get(ctx.records_url().unwrap());
        statuses.push(anonymous.send(&call).await.expect("an answer").status);
    }
    assert!(statuses.contains(&429), "over the read rate: {statuses:?}");
    // A body over `--json-body-limit 4096`.
    let big = json!({"type": ty, "content": {"title": "x".repeat(8_000)}});
    let call = Call::post(ctx.records_url().unwrap())
        .json(&big)
        .signed(&ctx.full);
    assert_eq!(once.send(&call).await.expect("an answer").status, 413);
    // A blob upload.
    ctx.upload_blob(&[7u8; 3_000], "application/octet-stream")
        .await
        .expect("an upload");
    // Writes over `--write-rate 5/5`, by an app of their own.
    let busy_ctx = Ctx::new(&busy.target(&server)).expect("a client");
    let busy_once = busy_ctx.http.without_retries();
    let mut statuses = Vec::new();
    for n in 0..8 {
        let body = json!({"type": ty, "content": {"title": format!("busy {n}")}});
        let call = Call::post(ctx.records_url().unwrap())
            .json(&body)
            .signed(&busy_ctx.full);
        statuses.push(busy_once.send(&call).await.expect("an answer").status);
    }
    assert!(statuses.contains(&429), "over the write rate: {statuses:?}");
    // A request target over `--target-limit 2048`, and headers over `--header-limit 8192`.
    let long = format!(
        "{}?filter={}",
        ctx.records_url().unwrap(),
        "x".repeat(3_000)
    );
    let call = Call::get(long.parse().unwrap()).signed(&ctx.full);
    assert_eq!(once.send(&call).await.expect("an answer").status, 414);
    let call = Call::get(ctx.records_url().unwrap())
        .header("x-padding", &"x".repeat(10_000))
        .signed(&ctx.full);
    assert_eq!(once.send(&call).await.expect("an answer").status, 431);
    // Connections over `--max-connections-per-address 32`: closed at once.
    let held: Vec<_> = (0..40)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(held);
    let refused = Scrape::take(&metrics).await;
    moved(
        &written,
        &refused,
        "folio_replayed_requests_total{}",
        "a replay",
    );
    moved(
        &written,
        &refused,
        "folio_refused_total{limit=\"read_rate\"}",
        "reads over the rate",
    );
    moved(
        &written,
        &refused,
        "folio_refused_total{limit=\"body_size\"}",
        "a body over the limit",
    );
    moved(&written, &refused, "folio_blob_bytes{}", "a blob upload");
    moved(
        &written,
        &refused,
        "folio_refused_total{limit=\"write_rate\"}",
        "writes over the rate",
    );
    moved(
        &written,
        &refused,
        "folio_refused_total{limit=\"target_size\"}",
        "a long target",
    );
    moved(
        &written,
        &refused,
        "folio_refused_total{limit=\"header_size\"}",
        "large headers",
    );
    moved(
        &written,
        &refused,
        "folio_refused_total{limit=\"connections\"}",
        "connections over the cap",
    );
    moved(
        &written,
        &refused,
        "folio_requests_total{route=\"record.get\",status=\"401\"}",
        "a replay",
    );

    // The log: JSON lines without escape codes, one per request, the list's among them.
    let lines = server.log_lines();
    assert!(!lines.is_empty());
    let mut requests = Vec::new();
    for line in &lines {
        assert!(!line.contains('\u{1b}'), "an escape code: {line}");
        let object: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        for field in ["timestamp", "level", "target", "message"] {
            assert!(object.get(field).is_some(), "no {field}: {line}");
        }
        if object["target"] == "folio::request" {
            requests.push(object);
        }
    }
    let list = requests
        .iter()
        .find(|line| line["request_id"] == request_id.as_str())
        .unwrap_or_else(|| panic!("no line for request {request_id}"));
    assert_eq!(list["route"], "records.list");
    assert_eq!(list["method"], "GET");
    assert_eq!(list["status"], 200);
    assert!(
        list["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{list}"
    );
    assert!(
        requests
            .iter()
            .any(|line| line["status"] == 429 && line["problem"] == "rate_limited"),
        "the refused reads are logged with their problem"
    );
}
