//! A host that keeps core's [`Resident`](folio_core::service::Resident), as
//! the native host does: core finds users, standings, nonces, rates and
//! remembered versions there itself, and asks the host only for a
//! request's body and its commit (ARCHITECTURE.md, "Crossings").

use serde_json::json;

use crate::fake_host::{FakeHost, JobEnd};
use crate::kit::{Call, Config, Noted, RESIDENT_EPOCH, USER, json, problem};
use crate::{
    APP_KEY_SEED, RECORDS, app_id, authorization_id, link, note_type, record_path, send,
    signed_json, write,
};
use folio_core::service::standing::Epoch;

fn resident_host(config: Config) -> (FakeHost, crate::kit::Signer) {
    let host = FakeHost::with(config).keeping_resident();
    let app = host.add_app(app_id(), authorization_id(), APP_KEY_SEED, None);
    (host, app)
}

/// What core asked the host for since the log was last cleared, beside
/// the request itself.
fn asked(host: &FakeHost) -> (Vec<String>, Vec<String>, usize, Vec<&'static str>) {
    (
        host.user_lookups(),
        host.fetched(),
        host.bodies().read,
        host.jobs_asked(),
    )
}

#[test]
fn a_warm_signed_create_asks_the_host_only_for_its_body_and_its_commit() {
    let (host, app) = resident_host(Config::default());
    let note_type = note_type(&host);
    let body = json!({"type": link(&note_type), "content": {"text": "first"}});
    let first = write(&host, "POST", RECORDS, &body, &app, "n1");
    assert_eq!(first.status, 200, "{}", json(&first));

    host.clear_log();
    let body = json!({"type": link(&note_type), "content": {"text": "second"}});
    let second = write(&host, "POST", RECORDS, &body, &app, "n2");
    assert_eq!(second.status, 200, "{}", json(&second));
    assert_eq!(json(&second)["record"]["content"]["text"], "second");
    assert_eq!(
        asked(&host),
        (Vec::new(), Vec::new(), 1, vec!["commit"]),
        "no user, standing, type or nonce read; one body; one commit"
    );
    assert!(
        host.counters.rate_calls.borrow().is_empty(),
        "rates counted in core"
    );
    assert!(
        host.counters.nonce_calls.borrow().is_empty(),
        "nonces checked in core"
    );
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].end, JobEnd::Stored);
}

#[test]
fn a_warm_update_is_decided_on_the_memo_and_checked_by_the_writer() {
    let (host, app) = resident_host(Config::default());
    let note_type = note_type(&host);
    let id = "0123456789abcdef0123456789abcdef";
    let body = json!({"id": id, "type": link(&note_type), "content": {"text": "v1"}});
    let created = write(&host, "POST", RECORDS, &body, &app, "n1");
    assert_eq!(created.status, 200, "{}", json(&created));
    let path = record_path(crate::kit::ENTITY, &id.parse().expect("an id"));
    let update = |parent: &serde_json::Value, text: &str, nonce: &str| {
        let body = json!({"content": {"text": text}, "version": {"parent_hash": parent}});
        write(&host, "PUT", &path, &body, &app, nonce)
    };
    let v1 = json(&created)["record"]["version"]["hash"].clone();
    // A first version is not remembered as a record's latest: the first
    // update reads it; the version it stores is remembered.
    let second = update(&v1, "v2", "n2");
    assert_eq!(second.status, 200, "{}", json(&second));
    let v2 = json(&second)["record"]["version"]["hash"].clone();

    host.clear_log();
    let third = update(&v2, "v3", "n3");
    assert_eq!(third.status, 200, "{}", json(&third));
    assert_eq!(json(&third)["record"]["version"]["parent_hash"], v2);
    assert_eq!(asked(&host), (Vec::new(), Vec::new(), 1, vec!["commit"]));

    // A stale parent is decided on the memo's guess, then again on the
    // store before the conflict is answered: the conflict names the latest.
    host.clear_log();
    let stale = update(&v2, "v4", "n4");
    let body = problem(&stale, "record/409-version-conflict", "version_conflict");
    let v3 = json(&third)["record"]["version"]["hash"].clone();
    let detail = body["detail"].as_str().expect("a detail");
    assert!(detail.contains(v3.as_str().expect("a hash")), "{detail}");
    assert_eq!(host.jobs_asked(), ["decide"], "decided again on the store");
}

#[test]
fn a_nonce_used_once_is_refused_by_the_resident_guard() {
    let (host, app) = resident_host(Config::default());
    let note_type = note_type(&host);
    let body = json!({"type": link(&note_type), "content": {"text": "once"}});
    let (call, request_body) = signed_json("POST", RECORDS, &body, &app, "n1");
    let first = send(&host, &call, request_body.clone());
    assert_eq!(first.status, 200, "{}", json(&first));
    let again = send(&host, &call, request_body);
    problem(&again, "auth/401-replayed-request", "replayed_request");
    assert!(host.counters.nonce_calls.borrow().is_empty());
    assert_eq!(host.jobs().len(), 1, "the replay ran no job");
}

#[test]
fn a_write_over_its_rate_is_refused_by_the_resident_buckets_and_noted() {
    let config = Config::with_rate(|limits| &mut limits.writes_per_app, 1, 1);
    let (host, app) = resident_host(config);
    let note_type = note_type(&host);
    let body = json!({"type": link(&note_type), "content": {"text": "x"}});
    let first = write(&host, "POST", RECORDS, &body, &app, "n1");
    assert_eq!(first.status, 200, "{}", json(&first));
    let second = write(&host, "POST", RECORDS, &body, &app, "n2");
    problem(&second, "request/429-rate-limited", "rate_limited");
    assert!(host.counters.rate_calls.borrow().is_empty());
    assert!(
        (host.notes().iter())
            .any(|note| matches!(note, Noted::RateRefused(rate) if rate.starts_with("Write"))),
        "{:?}",
        host.notes()
    );
    assert_eq!(host.jobs().len(), 1, "the refused write ran no job");
}

#[test]
fn a_user_is_remembered_under_its_epoch_and_read_again_under_another() {
    let (host, app) = resident_host(Config::default());
    let target = format!("/api/{USER}/records");
    let list = |nonce: &str, epoch: Epoch| {
        let mut call = Call::get(target.as_str()).signed(&app, nonce, &[]);
        call.epoch = Some(epoch);
        send(&host, &call, crate::kit::Body::empty())
    };
    assert_eq!(list("n1", RESIDENT_EPOCH).status, 200);
    host.clear_log();
    assert_eq!(list("n2", RESIDENT_EPOCH).status, 200);
    assert!(host.user_lookups().is_empty(), "remembered");
    let moved = Epoch {
        commits: RESIDENT_EPOCH.commits + 1,
        ..RESIDENT_EPOCH
    };
    assert_eq!(list("n3", moved).status, 200);
    assert_eq!(
        host.user_lookups(),
        [USER],
        "read again: a user may be removed beside the server"
    );
}
