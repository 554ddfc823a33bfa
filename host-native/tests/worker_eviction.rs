//! The edge host's objects evicted in the middle of an event stream and
//! of writes (issue 40): `wrangler dev` (workerd, local D1) is killed and
//! started again on the same local state while an app watches the user's
//! records and another keeps writing. The stream ends, every write that
//! was acknowledged is stored (read back with its version hash), and the
//! stream resumed from the last event it read catches up with every one
//! of them. The other fault paths of the edge (a D1 statement failing
//! inside a job's batch, R2 failing during an upload or a read) are the
//! conformance suite's `faults/*` checks, which e2e/worker-conformance.mjs
//! runs against the worker through e2e/worker-fault.mjs.

mod support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use folio_conformance::client::Call;
use folio_conformance::context::Ctx;
use folio_conformance::sse::EventStream;
use folio_conformance::{AppCredentials, Target};
use serde_json::{Value, json};
use support::{WRANGLER_ENV, folio, free_port, key_pair, repo_root, run_tool, scratch};

/// How long an event or a restarted wrangler may take.
const WAIT: Duration = Duration::from_secs(60);
/// The pause between two writes: about 40 writes in the test's 4 s of
/// writing, well below the 100 events a resumed stream catches up on (past
/// them it is closed with `too_many_events`, as PROTOCOL.md says), which an
/// unpaced writer passed on a quiet machine.
const WRITE_PACE: Duration = Duration::from_millis(100);

/// `wrangler dev`, killed (with its workerd) when dropped: every object
/// goes with it, mid-request.
struct Wrangler(std::process::Child);

impl Drop for Wrangler {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = self.0.wait();
    }
}

/// `wrangler dev` on `port` over the local state in `state`.
fn start_wrangler(wrangler: &Path, state: &Path, port: u16, log: &Path) -> Wrangler {
    use std::os::unix::process::CommandExt;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("wrangler.log");
    let child = std::process::Command::new(wrangler)
        .args(["dev", "--env", "dev", "--ip", "127.0.0.1"])
        .args(["--port", &port.to_string()])
        .args(["--persist-to", &state.display().to_string()])
        .args(["--var", &format!("FOLIO_BASE_URL:http://localhost:{port}")])
        .current_dir(repo_root())
        .envs(WRANGLER_ENV.iter().copied())
        .stdout(log.try_clone().expect("a log"))
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("wrangler dev starts");
    Wrangler(child)
}

/// Waits until the user's store answers.
async fn ready(ctx: &Ctx, log: &Path) {
    let deadline = Instant::now() + WAIT;
    let url = ctx.api("/server").expect("a URL");
    loop {
        if let Ok(response) = ctx.http.send(&Call::get(url.clone())).await
            && response.status == 200
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "wrangler dev did not answer in {WAIT:?}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The id and version hash of each write the worker acknowledged.
type Acknowledged = Arc<Mutex<Vec<(String, String)>>>;

/// Writes notes of type `ty` one after another until `stop`, keeping what
/// was acknowledged in `acknowledged`.
async fn keep_writing(
    target: Target,
    ty: Value,
    stop: Arc<AtomicBool>,
    acknowledged: Acknowledged,
) {
    let ctx = Ctx::new(&target).expect("a client");
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let body = json!({"type": ty, "content": {"title": format!("write {n}")}});
        let call = Call::post(ctx.records_url().expect("a URL"))
            .json(&body)
            .signed(&ctx.full);
        match ctx.http.without_retries().send(&call).await {
            Ok(response) if response.status == 200 => {
                tokio::time::sleep(WRITE_PACE).await;
                let created: Value = serde_json::from_slice(&response.body).expect("JSON");
                let record = &created["record"];
                acknowledged.lock().unwrap().push((
                    record["id"].as_str().expect("an id").to_owned(),
                    record["version"]["hash"]
                        .as_str()
                        .expect("a hash")
                        .to_owned(),
                ));
            }
            // Refused or cut off while the objects were gone: not
            // acknowledged, so nothing is owed.
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the built worker and wrangler: scripts/test runs it with --ignored"]
async fn objects_evicted_mid_stream_lose_no_acknowledged_write() {
    let wrangler = repo_root().join("node_modules/.bin/wrangler");
    assert!(
        wrangler.exists(),
        "{} is missing: run `npm ci`",
        wrangler.display()
    );
    let built = repo_root().join("host-worker/build/index.js");
    assert!(
        built.exists(),
        "{} is missing: build the worker first",
        built.display()
    );
    let dir = scratch("worker-eviction");
    let state = dir.join("wrangler-state");
    let state_arg = state.display().to_string();
    let log = dir.join("wrangler.log");
    let port = free_port();
    let base_url = format!("http://localhost:{port}");

    // The user `me` and a full-access app, from the CLI's SQL.
    let d1 = |args: &[&str]| {
        let mut all = vec!["d1"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--local", "--env", "dev", "--persist-to", &state_arg]);
        run_tool(&wrangler, &all, &repo_root())
    };
    d1(&["migrations", "apply", "DB"]);
    let cli = dir.join("cli");
    let user_sql = dir.join("me.sql").display().to_string();
    folio(
        &cli,
        &[
            "user",
            "add",
            "me",
            "--entity",
            "localhost",
            "--base-url",
            &base_url,
            "--json",
            "--emit-sql",
            &user_sql,
        ],
    );
    d1(&["execute", "DB", "--file", &user_sql]);
    let (private_key, public_key) = key_pair();
    let app_sql = dir.join("app.sql").display().to_string();
    let added: Value = serde_json::from_str(&folio(
        &cli,
        &[
            "app",
            "add",
            "--user",
            "me",
            "--entity",
            "localhost",
            "--public-key",
            &public_key,
            "--full-access",
            "--json",
            "--emit-sql",
            &app_sql,
        ],
    ))
    .expect("folio app add --json");
    d1(&["execute", "DB", "--file", &app_sql]);
    let target = Target::one_app(
        base_url,
        "me",
        "localhost",
        None,
        AppCredentials {
            app_id: added["app_id"].as_str().expect("app_id").to_owned(),
            authorization_id: added["authorization_id"]
                .as_str()
                .expect("authorization_id")
                .to_owned(),
            private_key,
        },
    );
    let ctx = Ctx::new(&target).expect("a client");

    let first_wrangler = start_wrangler(&wrangler, &state, port, &log);
    ready(&ctx, &log).await;
    let ty = ctx.note_type().await.expect("a note type");
    let events = Call::get(ctx.events_url().unwrap()).signed(&ctx.full);
    let mut stream = EventStream::new(ctx.http.open(&events).await.expect("a stream"));
    let first = ctx
        .note(&ty, json!({"title": "before"}))
        .await
        .expect("a first note");
    let first_id = first["id"].as_str().unwrap();
    let heard = stream
        .records_until(first_id, WAIT)
        .await
        .expect("the stream hears the first note");
    let resume_from = heard
        .last()
        .and_then(|event| event.event.id.clone())
        .expect("the event has an id");

    // Writes go on while every object is killed and wrangler starts again.
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Acknowledged::default();
    let writer = tokio::spawn(keep_writing(
        target.clone(),
        ty.clone(),
        Arc::clone(&stop),
        Arc::clone(&acknowledged),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(first_wrangler);
    let before_the_kill = acknowledged.lock().unwrap().len();
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            if stream.next_event(WAIT).await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived its object");
    let _second_wrangler = start_wrangler(&wrangler, &state, port, &log);
    ready(&ctx, &log).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("the writer");
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        before_the_kill > 0 && acknowledged.len() > before_the_kill,
        "writes must be acknowledged both before the kill and after the restart: \
         {before_the_kill} before, {} in all",
        acknowledged.len()
    );

    // Every acknowledged write is stored as acknowledged.
    for (id, hash) in &acknowledged {
        let response = ctx.get_record(id).await.expect("a read");
        assert_eq!(response.status, 200, "acknowledged {id} is not stored");
        let read: Value = serde_json::from_slice(&response.body).expect("JSON");
        assert_eq!(
            read["record"]["version"]["hash"].as_str(),
            Some(hash.as_str()),
            "acknowledged {id} is stored with another version"
        );
    }
    // The stream resumed after its last event hears every one of them.
    let resumed = Call::get(ctx.events_url().unwrap())
        .signed(&ctx.full)
        .header("last-event-id", &resume_from);
    let mut stream = EventStream::new(ctx.http.open(&resumed).await.expect("a stream"));
    let (last, _) = acknowledged.last().unwrap();
    let caught_up: Vec<String> = stream
        .records_until(last, WAIT)
        .await
        .expect("the resumed stream catches up")
        .iter()
        .map(|event| event.record_id().to_owned())
        .collect();
    for (id, _) in &acknowledged {
        assert!(
            caught_up.contains(id),
            "the resumed stream missed acknowledged {id}: {caught_up:?}"
        );
    }
}
