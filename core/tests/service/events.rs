//! Event streams through the service (PROTOCOL.md §8): who may open one,
//! the place a subscriber takes before its catch-up, the catch-up read from
//! the event log, the caps on open streams, and anonymous listeners.

use folio_core::apps::Scope;
use folio_core::events::EVENT_STREAM_CONTENT_TYPE;
use folio_core::limits::RateLimit;
use folio_core::model::{Record, RecordLink};
use folio_core::service::{Reply, ReplyBody};
use folio_core::store::{app_authorizations_sql, app_key_sql, event_log_bounds_sql};
use serde_json::json;

use crate::fake_host::FakeHost;
use crate::kit::{Body, Call, Config, PEER, RateKey, Signer, Stream, header, json, problem};
use crate::{OTHER_KEY_SEED, app_id, host_with_app, id, link, note_type, send, write};

const EVENTS: &str = "/api/alice/events";

/// The catch-up frames and last sequence of an event stream.
fn catch_up(reply: &Reply<Stream>) -> (&[String], u64) {
    match &reply.body {
        ReplyBody::Stream(Stream::Events {
            catch_up, last_seq, ..
        }) => (catch_up, *last_seq),
        _ => panic!("an event stream, got status {}", reply.status),
    }
}

/// Writes a note of `note_type` by `app`, public or not; answers its id.
fn note(
    host: &FakeHost,
    app: &Signer,
    note_type: &Record,
    text: &str,
    public: bool,
    nonce: &str,
) -> String {
    let mut body = json!({"type": link(note_type), "content": {"text": text}});
    if public {
        body["permissions"] = json!({"read": "public"});
    }
    let reply = write(host, "POST", crate::RECORDS, &body, app, nonce);
    assert_eq!(reply.status, 200, "{}", json(&reply));
    json(&reply)["record"]["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

/// The seq of the user's latest event.
fn latest_seq(host: &FakeHost) -> u64 {
    host.count(&format!(
        "SELECT event_seq FROM users WHERE id = {}",
        host.user.id
    )) as u64
}

#[test]
fn an_authorized_subscriber_takes_a_place_then_gets_the_catch_up_from_the_log() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let a = note(&host, &app, &note_type, "a", false, "w1");
    let b = note(&host, &app, &note_type, "b", false, "w2");
    host.clear_log();
    let call = Call::get(EVENTS).signed(&app, "e1", &[]);
    let reply = send(&host, &call, Body::empty());
    assert_eq!(reply.status, 200);
    assert_eq!(header(&reply, "content-type"), EVENT_STREAM_CONTENT_TYPE);
    let (frames, last_seq) = catch_up(&reply);
    let latest = latest_seq(&host);
    assert_eq!(last_seq, latest);
    assert_eq!(frames.len(), 2, "{frames:#?}");
    assert!(
        frames[0].starts_with(&format!("id: {}\nevent: record\n", latest - 1)),
        "{}",
        frames[0]
    );
    assert!(frames[0].contains(&a) && frames[1].contains(&b));
    assert_eq!(
        host.counters.subscribes.borrow().as_slice(),
        [(host.user.id, true)]
    );
    assert_eq!(host.counters.open_streams(host.user.id), 1);
    let user = &host.user;
    let fetched = host.fetched();
    assert_eq!(
        fetched[..3],
        [
            app_key_sql(user.id, &app_id()).sql,
            app_authorizations_sql(user.id, &user.entity, &app_id()).sql,
            event_log_bounds_sql(user.id).sql,
        ]
    );
    assert_eq!(fetched.len(), 4, "then one chunk of the log: {fetched:#?}");
    drop(reply);
    assert_eq!(host.counters.open_streams(host.user.id), 0);
}

#[test]
fn the_per_user_cap_refuses_one_stream_more_with_429_and_retry_after_5() {
    let mut config = Config::default();
    config.limits.sse_connections_per_user = Some(1);
    let (host, app) = host_with_app(config);
    let first = send(
        &host,
        &Call::get(EVENTS).signed(&app, "e1", &[]),
        Body::empty(),
    );
    assert_eq!(first.status, 200);
    let second = send(
        &host,
        &Call::get(EVENTS).signed(&app, "e2", &[]),
        Body::empty(),
    );
    problem(&second, "request/429-rate-limited", "rate_limited");
    assert_eq!(header(&second, "retry-after"), "5");
    assert_eq!(
        host.counters.subscribes.borrow().as_slice(),
        [(host.user.id, true), (host.user.id, false)]
    );
    // Closing the first stream gives its place back.
    drop(first);
    let third = send(
        &host,
        &Call::get(EVENTS).signed(&app, "e3", &[]),
        Body::empty(),
    );
    assert_eq!(third.status, 200);
}

#[test]
fn an_app_without_a_subscribe_grant_is_403_forbidden_and_takes_no_place() {
    let host = FakeHost::new();
    let note_type = note_type(&host);
    let scope = Scope {
        read: vec![RecordLink {
            entity: note_type.author.entity.clone(),
            original_entity: None,
            record_id: note_type.id,
        }],
        ..Scope::default()
    };
    let app = host.add_app(id(0xd1), id(0xd2), OTHER_KEY_SEED, Some(scope));
    let reply = send(
        &host,
        &Call::get(EVENTS).signed(&app, "e1", &[]),
        Body::empty(),
    );
    problem(&reply, "auth/403-forbidden", "forbidden");
    assert!(host.counters.subscribes.borrow().is_empty());
}

#[test]
fn an_anonymous_listener_is_counted_by_address_and_caught_up_on_public_records_only() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let public = note(&host, &app, &note_type, "for all", true, "w1");
    let private = note(&host, &app, &note_type, "for me", false, "w2");
    host.clear_log();
    let reply = send(&host, &Call::get(EVENTS), Body::empty());
    assert_eq!(reply.status, 200);
    let (frames, _) = catch_up(&reply);
    assert_eq!(frames.len(), 1, "{frames:#?}");
    assert!(frames[0].contains(&public));
    assert!(!frames.iter().any(|frame| frame.contains(&private)));
    let rates = host.counters.rates_counted();
    assert_eq!(rates.len(), 1);
    assert_eq!(rates[0].key, RateKey::AnonymousRead(Some(PEER)));
}

#[test]
fn an_anonymous_listener_over_the_address_rate_is_429_before_taking_a_place() {
    let mut config = Config::default();
    config.limits.unauthenticated_reads_per_address = Some(RateLimit {
        per_second: 1,
        burst: 1,
    });
    let host = FakeHost::with(config);
    assert_eq!(send(&host, &Call::get(EVENTS), Body::empty()).status, 200);
    let reply = send(&host, &Call::get(EVENTS), Body::empty());
    problem(&reply, "request/429-rate-limited", "rate_limited");
    assert_eq!(header(&reply, "retry-after"), "1");
    assert_eq!(host.counters.subscribes.borrow().len(), 1);
}
