//! folio-load against this build of `folio serve`: every step of the load
//! tool (create, signed and public GET, both lists, update chains, live
//! delivery) for a second each on a small store, with every answer the
//! expected one and every event delivered. It checks that the server stays
//! correct under concurrent signed load, not how fast it is: no assertion
//! depends on throughput or latency, so a slow machine only makes it slower.

use std::path::Path;
use std::time::Duration;

use folio_load::{Durability, Options, Step};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_load_step_answers_without_errors_and_delivers_every_event() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("load-smoke");
    let _ = std::fs::remove_dir_all(&dir);
    let options = Options {
        // Every default step, and the search step over varied text.
        steps: Step::ALL.into_iter().chain([Step::Search]).collect(),
        concurrency: 4,
        duration: Duration::from_secs(1),
        warmup: Duration::ZERO,
        store: 200,
        subscribers: 20,
        sse_rate: 20,
        // The delivery test spread over two users, as `--users` does.
        users: 2,
        text: folio_load::text::Text::Varied,
    };
    let rows = folio_load::run_folio(
        Path::new(env!("CARGO_BIN_EXE_folio")),
        &dir,
        Durability::Full,
        &options,
    )
    .await
    .unwrap_or_else(|error| panic!("folio-load could not run: {error}"));

    assert_eq!(rows.len(), options.steps.len(), "one row per step");
    for (row, step) in rows.iter().zip(&options.steps) {
        assert_eq!(row.workload, step.name());
        assert_eq!(
            row.errors,
            0,
            "{}: {} errors, the first: {}",
            row.workload,
            row.errors,
            row.first_error.as_deref().unwrap_or("none")
        );
        assert!(
            row.ok > 0,
            "{}: no request answered as expected",
            row.workload
        );
    }

    let sse = (rows.iter())
        .find(|row| row.workload == "sse")
        .expect("the sse row");
    assert_eq!(
        sse.subscribers,
        Some(options.subscribers),
        "every subscriber connects"
    );
    let writes = sse.writes.expect("the sse row counts its writes");
    assert!(writes > 0, "no write of the delivery test was answered");
    assert_eq!(sse.missed, Some(0), "events missed");
    // Half the subscribers follow each user, and each write goes to one.
    assert_eq!(sse.users, Some(2));
    assert_eq!(
        sse.ok,
        writes * options.subscribers as u64 / 2,
        "each subscriber gets each of its user's writes once"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
