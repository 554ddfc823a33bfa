//! Event streams through the service (PROTOCOL.md §8): who may open one,
//! the place a subscriber takes before its catch-up, the catch-up read from
//! the event log, the caps on open streams, and anonymous listeners.

use folio_core::auth::apps::Scope;
use folio_core::model::{Record, RecordLink};
use folio_core::service::events::EVENT_STREAM_CONTENT_TYPE;
use folio_core::service::{Reply, ReplyBody};
use folio_core::store::{app_authorizations_sql, app_key_sql, event_log_bounds_sql};
use serde_json::json;

use crate::fake_host::FakeHost;
use crate::kit::{Config, PEER, RateKey, Signer, Stream, header, json, problem, rate_limited};
use crate::{OTHER_KEY_SEED, app_id, get, host_with_app, id, link, note_type, signed_get, write};

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
        host.store.user.id
    )) as u64
}

/// The full-access app's host with two notes it wrote, each `(text,
/// public)`, and its log cleared after; answers the notes' ids too.
fn host_with_two_notes(
    first: (&str, bool),
    second: (&str, bool),
) -> (FakeHost, Signer, String, String) {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let first = note(&host, &app, &note_type, first.0, first.1, "w1");
    let second = note(&host, &app, &note_type, second.0, second.1, "w2");
    host.clear_log();
    (host, app, first, second)
}

#[test]
fn an_authorized_subscriber_takes_a_place_then_gets_the_catch_up_from_the_log() {
    let (host, app, a, b) = host_with_two_notes(("a", false), ("b", false));
    let reply = signed_get(&host, EVENTS, &app, "e1");
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
        [(host.store.user.id, true)]
    );
    assert_eq!(host.counters.open_streams(host.store.user.id), 1);
    let user = &host.store.user;
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
    assert_eq!(host.counters.open_streams(host.store.user.id), 0);
}

#[test]
fn the_per_user_cap_refuses_one_stream_more_with_429_and_retry_after_5() {
    let mut config = Config::default();
    config.limits.sse_connections_per_user = Some(1);
    let (host, app) = host_with_app(config);
    let first = signed_get(&host, EVENTS, &app, "e1");
    assert_eq!(first.status, 200);
    let second = signed_get(&host, EVENTS, &app, "e2");
    rate_limited(&second, "5");
    assert_eq!(
        host.counters.subscribes.borrow().as_slice(),
        [(host.store.user.id, true), (host.store.user.id, false)]
    );
    // Closing the first stream gives its place back.
    drop(first);
    let third = signed_get(&host, EVENTS, &app, "e3");
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
    let reply = signed_get(&host, EVENTS, &app, "e1");
    problem(&reply, "auth/403-forbidden", "forbidden");
    assert!(host.counters.subscribes.borrow().is_empty());
}

#[test]
fn an_anonymous_listener_is_counted_by_address_and_caught_up_on_public_records_only() {
    let (host, _app, public, private) = host_with_two_notes(("for all", true), ("for me", false));
    let reply = get(&host, EVENTS);
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
    let config = Config::with_rate(|limits| &mut limits.unauthenticated_reads_per_address, 1, 1);
    let host = FakeHost::with(config);
    assert_eq!(get(&host, EVENTS).status, 200);
    let reply = get(&host, EVENTS);
    rate_limited(&reply, "1");
    assert_eq!(host.counters.subscribes.borrow().len(), 1);
}

/// The subscriber a stream was opened with.
fn subscriber(reply: &Reply<Stream>) -> &folio_core::service::events::Subscriber {
    match &reply.body {
        ReplyBody::Stream(Stream::Events { subscriber, .. }) => subscriber,
        _ => panic!("an event stream, got status {}", reply.status),
    }
}

#[test]
fn anonymous_listeners_hold_at_most_half_of_the_users_streams() {
    let mut config = Config::default();
    config.limits.sse_connections_per_user = Some(4);
    let (host, app) = host_with_app(config);
    let first = get(&host, EVENTS);
    let second = get(&host, EVENTS);
    assert_eq!((first.status, second.status), (200, 200));
    rate_limited(&get(&host, EVENTS), "5");
    // The user's own apps still have the other half.
    let signed: Vec<_> = ["e1", "e2"]
        .iter()
        .map(|nonce| signed_get(&host, EVENTS, &app, nonce))
        .collect();
    assert!(signed.iter().all(|reply| reply.status == 200));
    rate_limited(&signed_get(&host, EVENTS, &app, "e3"), "5");
    drop(first);
    assert_eq!(get(&host, EVENTS).status, 200, "a place given back");
}

#[test]
fn a_stream_knows_the_authorization_it_was_opened_under_and_a_bearer_tokens_expiry() {
    let (host, app) = host_with_app(Config::default());
    let signed = signed_get(&host, EVENTS, &app, "e1");
    let opened = subscriber(&signed);
    assert_eq!(opened.authorization, Some(crate::authorization_id()));
    assert_eq!(opened.expires_at, None);

    let expires = crate::kit::now().unix_millis() + 60_000;
    let target = format!("{EVENTS}?bearer={}", app.bearer(expires, EVENTS));
    let by_bearer = get(&host, &target);
    let opened = subscriber(&by_bearer);
    assert_eq!(opened.authorization, Some(crate::authorization_id()));
    assert_eq!(
        opened.expires_at.map(|at| at.unix_millis()),
        Some(expires),
        "the stream ends when the token does"
    );
    assert!(get(&host, EVENTS).status == 200);
    assert_eq!(subscriber(&get(&host, EVENTS)).authorization, None);
}

#[test]
fn a_catch_up_that_would_read_more_than_max_catch_up_rows_is_too_many_events() {
    let (host, _app, _public, _private) = host_with_two_notes(("a", false), ("b", false));
    // The log repeats the last private version, so that an anonymous
    // listener finds nothing it may see in more rows than a catch-up reads.
    let copies = folio_core::service::events::MAX_CATCH_UP_ROWS;
    host.execute(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {copies}) \
         INSERT INTO events (user_id, seq, version_hash, received_at, client_id, record_row) \
         SELECT e.user_id, e.seq + n.i, e.version_hash, e.received_at, NULL, e.record_row \
         FROM n, (SELECT * FROM events ORDER BY seq DESC LIMIT 1) e"
    ));
    let reply = get(&host, EVENTS);
    problem(&reply, "events/400-too-many-events", "too_many_events");
    assert_eq!(host.counters.open_streams(host.store.user.id), 0);
}
