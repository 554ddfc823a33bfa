//! Core's request layer end to end without a store: `service::handle`
//! driven through a host that answers every statement from memory (no
//! rows unless a test gives some), with a fixed request time and seed.
//! What is decided before any record is read: routing, `Allow`, preflights,
//! `HEAD`, the request-target, header and JSON body limits, error-type
//! pages, CORS and `Cache-Control`, unknown users, the authentication steps
//! that need no key (and the one key lookup of an unknown app), bearer
//! expiry, the rates per address, the stream caps, and the request's
//! fresh values.
//!
//! Runs natively and, included by wasm-tests, in wasm32.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[path = "service/kit.rs"]
mod kit;

use std::cell::RefCell;

use folio_core::model::{RecordDate, RecordId, UserName};
use folio_core::problem::PROBLEM_CONTENT_TYPE;
use folio_core::service::consent::PAGE_HEADERS;
use folio_core::service::fresh::Fresh;
use folio_core::service::jobs::{Job, JobOutcome};
use folio_core::service::store::Row;
use folio_core::service::{Reply, ReplyBody, User, WriteFailure};
use folio_core::store::{Statement, app_key_sql};
use kit::{
    Backend, Body, Call, Config, ENTITY, Fake, OTHER_PEER, PEER, RateKey, SEED, Signer, Stream,
    USER, header, json, millis_after, now, problem, rate_limited, text,
};
use serde_json::json;

/// A host whose store is memory: its users, and no rows for any statement.
type MemoryHost = Fake<MemoryStore>;

/// The store of [`MemoryHost`]: its users, and a count of the jobs it
/// refused to run.
struct MemoryStore {
    users: Vec<User>,
    jobs: RefCell<usize>,
}

fn user(id: i64, name: &str, entity: &str) -> User {
    User {
        id,
        name: name.to_owned(),
        entity: entity.parse().expect("an entity"),
    }
}

impl MemoryHost {
    fn new() -> Self {
        MemoryHost::with(Config::default())
    }

    fn with(config: Config) -> Self {
        let store = MemoryStore {
            users: vec![user(1, USER, ENTITY)],
            jobs: RefCell::new(0),
        };
        Fake::over(&config, store)
    }
}

impl Backend for MemoryStore {
    type Error = String;

    async fn user(&self, name: &UserName) -> Result<Option<User>, String> {
        Ok(self.users.iter().find(|u| u.name == name.as_str()).cloned())
    }

    async fn users(&self) -> Result<Vec<User>, String> {
        Ok(self.users.clone())
    }

    async fn fetch(&self, _statement: &Statement) -> Result<Vec<Row>, String> {
        Ok(Vec::new())
    }

    async fn run(&self, _job: Job) -> Result<JobOutcome, WriteFailure> {
        *self.jobs.borrow_mut() += 1;
        Err(WriteFailure::Failed(
            "the in-memory host runs no job".into(),
        ))
    }

    fn verify_password(&self, _hash: &str, _password: &str) -> bool {
        false
    }
}

/// Sends `method` of `target` and checks that it is the 405
/// `method_not_allowed` problem; answers its `Allow`.
#[track_caller]
fn allow_of_405(host: &MemoryHost, method: &str, target: &str) -> String {
    let reply = send(host, &Call::new(method, target), Body::empty());
    problem(
        &reply,
        "request/405-method-not-allowed",
        "method_not_allowed",
    );
    header(&reply, "allow").to_owned()
}

fn send(host: &MemoryHost, call: &Call, body: Body) -> Reply<Stream> {
    pollster::block_on(call.send(host, body))
}

fn get(host: &MemoryHost, target: &str) -> Reply<Stream> {
    send(host, &Call::get(target), Body::empty())
}

const RECORDS: &str = "/api/alice/records";
const EVENTS: &str = "/api/alice/events";
const RECORD: &str = "/api/alice/records/alice.example/0123456789abcdef0123456789abcdef";
const EXPOSED: &str =
    "Link, X-Svc-Credentials, X-Svc-PublicKey, Content-Range, Content-Disposition";

/// An app this store does not know.
fn stranger() -> Signer {
    Signer::new(
        RecordId::from_bytes([0xa1; 16]),
        Some(RecordId::from_bytes([0xa2; 16])),
        [7; 32],
    )
}

/// The names of an answer's headers, sorted.
fn header_names<S>(reply: &Reply<S>) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = reply.headers.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    names
}

// Routing and transport.

#[test]
fn an_unknown_path_is_request_404_problem_json_with_cors_and_no_cache() {
    let host = MemoryHost::new();
    let reply = get(&host, "/nowhere");
    let body = problem(&reply, "request/404-not-found", "not_found");
    assert_eq!(body["title"], "Nothing is served at this address");
    assert_eq!(body["detail"], "no endpoint at /nowhere");
    assert_eq!(header(&reply, "access-control-allow-origin"), "*");
    assert_eq!(header(&reply, "access-control-expose-headers"), EXPOSED);
    assert_eq!(header(&reply, "cache-control"), "no-cache");
    assert!(host.user_lookups().is_empty());
    assert!(host.fetched().is_empty());
}

#[test]
fn a_problem_body_has_exactly_type_status_title_code_and_detail() {
    let host = MemoryHost::new();
    let reply = get(&host, "/nowhere");
    assert_eq!(reply.header("content-type"), Some(PROBLEM_CONTENT_TYPE));
    assert_eq!(
        json(&reply),
        json!({
            "type": "https://alice.example/docs/error-types/request/404-not-found",
            "status": 404,
            "title": "Nothing is served at this address",
            "code": "not_found",
            "detail": "no endpoint at /nowhere"
        })
    );
}

#[test]
fn problem_types_are_urls_under_the_configured_docs_url() {
    let mut host = MemoryHost::new();
    host.settings.docs_url = "https://docs.example/folio".into();
    let reply = get(&host, "/nowhere");
    assert_eq!(
        json(&reply)["type"],
        "https://docs.example/folio/error-types/request/404-not-found"
    );
}

#[test]
fn a_method_an_endpoint_does_not_answer_is_405_with_its_allow_list() {
    let host = MemoryHost::new();
    assert_eq!(
        allow_of_405(&host, "PUT", RECORDS),
        "HEAD, GET, POST, OPTIONS"
    );
    assert_eq!(
        allow_of_405(&host, "GET", "/api/alice/blobs"),
        "POST, OPTIONS"
    );
    assert!(
        host.user_lookups().is_empty(),
        "refused before its user is looked up"
    );
    assert_eq!(host.bodies().discarded, 2, "the unread bodies are drained");
}

#[test]
fn an_unknown_method_is_405_with_the_allow_list() {
    let host = MemoryHost::new();
    assert_eq!(
        allow_of_405(&host, "PATCH", RECORD),
        "HEAD, GET, PUT, DELETE, OPTIONS"
    );
}

#[test]
fn a_preflight_is_204_with_exactly_the_four_cors_headers_on_any_path() {
    let host = MemoryHost::new();
    for target in [RECORDS, "/nowhere", "/api/bob/events"] {
        let reply = send(&host, &Call::new("OPTIONS", target), Body::empty());
        assert_eq!(reply.status, 204, "{target}");
        assert!(matches!(reply.body, ReplyBody::Empty));
        assert_eq!(
            header(&reply, "access-control-allow-headers"),
            "Authorization,Content-Type,X-Svc-Client-Id,Last-Event-Id,X-Svc-PublicKey"
        );
        assert_eq!(
            header(&reply, "access-control-allow-methods"),
            "HEAD,GET,POST,PUT,DELETE,OPTIONS"
        );
        assert_eq!(header(&reply, "access-control-allow-origin"), "*");
        assert_eq!(header(&reply, "access-control-max-age"), "43200");
        assert_eq!(
            header_names(&reply),
            [
                "access-control-allow-headers",
                "access-control-allow-methods",
                "access-control-allow-origin",
                "access-control-max-age",
                "cache-control",
            ]
        );
    }
    assert!(host.user_lookups().is_empty());
}

#[test]
fn head_answers_the_headers_of_get_without_a_body() {
    let host = MemoryHost::new();
    let got = get(&host, "/api/alice/server");
    let head = send(
        &host,
        &Call::new("HEAD", "/api/alice/server"),
        Body::empty(),
    );
    assert_eq!(got.status, 200);
    assert_eq!(json(&got)["software"], "folio");
    assert_eq!(head.status, 200);
    assert_eq!(head.headers, got.headers);
    assert!(matches!(head.body, ReplyBody::Empty));
    let missing = send(&host, &Call::new("HEAD", "/nowhere"), Body::empty());
    assert_eq!(missing.status, 404);
    assert_eq!(header(&missing, "content-type"), PROBLEM_CONTENT_TYPE);
    assert!(matches!(missing.body, ReplyBody::Empty));
}

#[test]
fn server_info_reports_the_limits_in_force() {
    let mut config = Config::default();
    config.limits.json_body_bytes = Some(1234);
    config.limits.writes_per_app = None;
    let host = MemoryHost::with(config);
    let info = json(&get(&host, "/api/alice/server"));
    assert_eq!(info["version"], "0.0.0-test");
    assert_eq!(info["limits"]["json_body_bytes"], 1234);
    assert_eq!(info["limits"]["writes_per_app"], serde_json::Value::Null);
    assert_eq!(info["limits"]["sse_connections_per_user"], 64);
}

#[test]
fn a_request_target_over_the_limit_is_414_before_routing() {
    let mut config = Config::default();
    config.limits.request_target_bytes = Some(64);
    let host = MemoryHost::with(config);
    let long = format!("/{}", "a".repeat(64));
    let reply = get(&host, &long);
    let body = problem(&reply, "request/414-uri-too-long", "uri_too_long");
    assert_eq!(
        body["detail"],
        "the request target is 65 bytes; this server takes at most 64"
    );
    let at_limit = format!("/{}", "a".repeat(63));
    problem(&get(&host, &at_limit), "request/404-not-found", "not_found");
    // Before the preflight too.
    let reply = send(&host, &Call::new("OPTIONS", long), Body::empty());
    assert_eq!(reply.status, 414);
}

#[test]
fn a_header_section_over_the_limit_is_431_before_routing() {
    let mut config = Config::default();
    config.limits.request_header_bytes = Some(100);
    let host = MemoryHost::with(config);
    // 5 + 91 + 4 = 100 bytes: at the limit.
    let call = Call::get("/nowhere").header("x-pad", "p".repeat(91));
    problem(
        &send(&host, &call, Body::empty()),
        "request/404-not-found",
        "not_found",
    );
    let call = Call::get(RECORDS).header("x-pad", "p".repeat(92));
    let reply = send(&host, &call, Body::empty());
    let body = problem(&reply, "request/431-headers-too-large", "headers_too_large");
    assert_eq!(
        body["detail"],
        "the request headers are 101 bytes; this server takes at most 100"
    );
    assert!(host.user_lookups().is_empty());
}

#[test]
fn an_error_type_page_is_html_with_cors_and_no_cache() {
    let host = MemoryHost::new();
    let reply = get(&host, "/docs/error-types/auth/401-replayed-request");
    assert_eq!(reply.status, 200);
    assert_eq!(header(&reply, "content-type"), "text/html; charset=utf-8");
    assert!(text(&reply).contains("The request was already received"));
    assert_eq!(header(&reply, "access-control-allow-origin"), "*");
    assert_eq!(header(&reply, "cache-control"), "no-cache");
    let reply = get(&host, "/docs/error-types/request/999-nothing");
    problem(&reply, "request/404-not-found", "not_found");
}

#[test]
fn an_unknown_user_is_request_404_after_one_lookup_and_no_statement() {
    let host = MemoryHost::new();
    let reply = get(&host, "/api/bob/records");
    let body = problem(&reply, "request/404-not-found", "not_found");
    assert_eq!(body["detail"], "no user `bob` here");
    assert_eq!(host.user_lookups().as_slice(), ["bob"]);
    assert!(host.fetched().is_empty());
    assert!(host.counters.rates_counted().is_empty());
}

#[test]
fn the_consent_page_of_an_unknown_user_is_an_html_404_page_not_problem_json() {
    let host = MemoryHost::new();
    let reply = get(&host, "/bob/auth/0123456789abcdef0123456789abcdef");
    assert_eq!(reply.status, 404);
    for (name, value) in PAGE_HEADERS {
        assert_eq!(header(&reply, name), value, "{name}");
    }
    assert!(text(&reply).contains("No such app"));
}

#[test]
fn an_unsigned_notification_is_unauthenticated() {
    let host = MemoryHost::new();
    let call = Call::post("/api/alice/notifications").header("content-type", "application/json");
    let reply = send(&host, &call, Body::of("{\"versions\": []}"));
    problem(
        &reply,
        "auth/401-missing-authorization",
        "missing_authorization",
    );
}

#[test]
fn discovery_on_a_host_that_names_none_of_several_users_is_404() {
    let mut host = MemoryHost::new();
    host.store.users.push(user(2, "bob", "bob.example"));
    let mut call = Call::new("HEAD", "/");
    call.host = "elsewhere.example".into();
    let reply = send(&host, &call, Body::empty());
    assert_eq!(reply.status, 404);
    assert!(host.fetched().is_empty());
}

// Bodies.

#[test]
fn a_json_body_over_the_limit_by_content_length_is_413_and_never_read() {
    let mut config = Config::default();
    config.limits.json_body_bytes = Some(16);
    let host = MemoryHost::with(config);
    let body = Body::of("x".repeat(32));
    let call = Call::post(RECORDS).json_headers(&body);
    let reply = send(&host, &call, body);
    let problem_body = problem(&reply, "request/413-body-too-large", "body_too_large");
    assert_eq!(
        problem_body["detail"],
        "the body is at least 32 bytes; this server takes at most 16"
    );
    assert_eq!((host.bodies().read, host.bodies().discarded), (0, 1));
    assert!(host.counters.nonce_calls.borrow().is_empty());
}

#[test]
fn a_json_body_read_past_the_limit_without_content_length_is_413() {
    let mut config = Config::default();
    config.limits.json_body_bytes = Some(16);
    let host = MemoryHost::with(config);
    let body = Body {
        chunks: vec![b"{\"a\":".to_vec(), vec![b' '; 12]],
        broken: false,
    };
    let call = Call::post(RECORDS).header("content-type", "application/json");
    let reply = send(&host, &call, body);
    problem(&reply, "request/413-body-too-large", "body_too_large");
    assert_eq!(host.bodies().read, 1);
}

#[test]
fn a_json_body_that_ends_early_is_400_invalid_body() {
    let host = MemoryHost::new();
    let body = Body {
        chunks: vec![b"{\"type\":".to_vec()],
        broken: true,
    };
    let call = Call::post(RECORDS).header("content-type", "application/json");
    let reply = send(&host, &call, body);
    let body = problem(&reply, "request/400-invalid-body", "invalid_body");
    assert_eq!(body["detail"], "the body ended early");
}

#[test]
fn a_json_body_of_another_media_type_is_415_before_authentication() {
    let host = MemoryHost::new();
    let body = Body::of("{}");
    let call = Call::new("PUT", RECORD)
        .header("content-type", "text/plain")
        .header("authorization", "SVC nonsense");
    let reply = send(&host, &call, body);
    problem(
        &reply,
        "request/415-unsupported-media-type",
        "unsupported_media_type",
    );
}

// Authentication, in order.

#[test]
fn a_malformed_authorization_is_401_before_any_statement() {
    let host = MemoryHost::new();
    for value in ["SVC nonsense", "Bearer abc", "SVC id=\"1\""] {
        let call = Call::get(RECORDS).header("authorization", value);
        let reply = send(&host, &call, Body::empty());
        problem(
            &reply,
            "auth/401-malformed-authorization",
            "malformed_authorization",
        );
    }
    assert!(host.fetched().is_empty());
    assert!(host.counters.nonce_calls.borrow().is_empty());
    assert_eq!(
        host.counters.rate_keys(),
        [RateKey::AnonymousRead(Some(PEER)); 3],
        "a request whose credentials fail counts as an unauthenticated one"
    );
}

#[test]
fn a_timestamp_outside_the_window_of_the_requests_time_is_401_stale_before_any_statement() {
    let host = MemoryHost::new();
    let app = stranger();
    let ts = now().unix_millis() - 300_001;
    let call = Call::get(RECORDS).signed_at(&app, ts, "n1", &[]);
    let reply = send(&host, &call, Body::empty());
    problem(&reply, "auth/401-stale-timestamp", "stale_timestamp");
    assert!(host.fetched().is_empty());
    // The same header on a request that arrived 1 ms later in the window's
    // terms (its own time), is fresh: only the request's time counts.
    let on_time = Call {
        now: millis_after(now(), -1),
        ..call.clone()
    };
    let reply = send(&host, &on_time, Body::empty());
    problem(&reply, "auth/401-unknown-app", "unknown_app");
    // And at the window's edge, 300 s exactly, still fresh.
    let edge = Call::get(RECORDS).signed_at(&app, now().unix_millis() + 300_000, "n2", &[]);
    let reply = send(&host, &edge, Body::empty());
    problem(&reply, "auth/401-unknown-app", "unknown_app");
}

#[test]
fn an_app_the_store_does_not_know_is_401_unknown_app_after_one_key_lookup() {
    let host = MemoryHost::new();
    let app = stranger();
    let call = Call::get(RECORDS).signed(&app, "n1", &[]);
    let reply = send(&host, &call, Body::empty());
    let body = problem(&reply, "auth/401-unknown-app", "unknown_app");
    assert_eq!(body["detail"], "no app is registered under this id");
    assert_eq!(host.fetched(), [app_key_sql(1, &app.app_id).sql]);
    assert!(host.counters.nonce_calls.borrow().is_empty());
}

#[test]
fn a_bearer_token_on_a_write_is_ignored_so_the_write_is_401_missing_authorization() {
    let host = MemoryHost::new();
    let token = stranger().bearer(now().unix_millis() + 60_000, RECORD);
    let body = Body::of("{\"content\":{}}");
    let call = Call::new("PUT", format!("{RECORD}?bearer={token}")).json_headers(&body);
    let reply = send(&host, &call, body);
    problem(
        &reply,
        "auth/401-missing-authorization",
        "missing_authorization",
    );
    assert!(host.fetched().is_empty());
    assert_eq!(*host.store.jobs.borrow(), 0);
}

#[test]
fn a_bearer_tokens_expiry_is_measured_at_the_requests_time() {
    let host = MemoryHost::new();
    let expires = now().unix_millis() - 1;
    let target = format!("{RECORD}?bearer={}", stranger().bearer(expires, RECORD));
    let earlier = Call::get(target.as_str()).at(millis_after(now(), -1_000));
    let reply = send(&host, &earlier, Body::empty());
    problem(&reply, "auth/401-unknown-app", "unknown_app");
    let fetched = host.fetched().len();
    let reply = send(&host, &Call::get(target.as_str()), Body::empty());
    problem(&reply, "auth/401-stale-timestamp", "stale_timestamp");
    assert_eq!(
        host.fetched().len(),
        fetched,
        "an expired token reads nothing"
    );
    // More than 90 days ahead is refused like an expired one.
    let far = now().unix_millis() + 90 * 24 * 3600 * 1000 + 1;
    let target = format!("{RECORD}?bearer={}", stranger().bearer(far, RECORD));
    let reply = send(&host, &Call::get(target), Body::empty());
    problem(&reply, "auth/401-stale-timestamp", "stale_timestamp");
}

// Rates.

#[test]
fn anonymous_reads_are_counted_per_address_and_refused_with_429_and_retry_after() {
    let config = Config::with_rate(|limits| &mut limits.unauthenticated_reads_per_address, 1, 2);
    let host = MemoryHost::with(config);
    assert_eq!(get(&host, RECORDS).status, 200);
    assert_eq!(get(&host, RECORD).status, 404, "no such record");
    let reply = get(&host, RECORDS);
    let body = rate_limited(&reply, "1");
    assert_eq!(
        body["detail"],
        "too many unauthenticated requests from this address"
    );
    assert_eq!(host.fetched().len(), 2, "the refused read ran no statement");
    let other = Call::get(RECORDS).from(Some(OTHER_PEER));
    assert_eq!(send(&host, &other, Body::empty()).status, 200);
    let keys: Vec<RateKey> = host.counters.rate_keys();
    assert_eq!(
        keys,
        [
            RateKey::AnonymousRead(Some(PEER)),
            RateKey::AnonymousRead(Some(PEER)),
            RateKey::AnonymousRead(Some(PEER)),
            RateKey::AnonymousRead(Some(OTHER_PEER)),
        ]
    );
}

#[test]
fn the_anonymous_read_bucket_refills_by_the_requests_clock() {
    let config = Config::with_rate(|limits| &mut limits.unauthenticated_reads_per_address, 1, 1);
    let host = MemoryHost::with(config);
    assert_eq!(get(&host, RECORDS).status, 200);
    assert_eq!(get(&host, RECORDS).status, 429);
    let later = Call::get(RECORDS).at(millis_after(now(), 999));
    assert_eq!(send(&host, &later, Body::empty()).status, 429);
    let later = Call::get(RECORDS).at(millis_after(now(), 1_000));
    assert_eq!(send(&host, &later, Body::empty()).status, 200);
    let times: Vec<RecordDate> = host.counters.rate_times();
    assert_eq!(
        times,
        [
            now(),
            now(),
            millis_after(now(), 999),
            millis_after(now(), 1_000)
        ]
    );
}

#[test]
fn registrations_are_counted_per_address_before_their_body_is_read() {
    let config = Config::with_rate(|limits| &mut limits.registrations_per_address, 1, 1);
    let host = MemoryHost::with(config);
    let app = stranger();
    let register = || {
        let body = Body::of("{}");
        let call = Call::post(RECORDS).json_headers(&body).header(
            "x-svc-publickey",
            format!("algorithm=\"ed25519\" public_key=\"{}\"", app.public_key()),
        );
        send(&host, &call, body)
    };
    // The first passes the rate and is refused for want of a signature.
    problem(
        &register(),
        "auth/401-missing-authorization",
        "missing_authorization",
    );
    assert_eq!(host.bodies().read, 1);
    let reply = register();
    rate_limited(&reply, "1");
    assert_eq!(
        (host.bodies().read, host.bodies().discarded),
        (1, 1),
        "the refused registration's body is drained, not read"
    );
    let keys: Vec<RateKey> = host.counters.rate_keys();
    assert_eq!(keys, [RateKey::Registration(Some(PEER)); 2]);
}

// Event streams.

#[test]
fn the_per_user_stream_cap_refuses_one_more_with_429_and_retry_after_5() {
    // Unauthenticated streams may hold half of it: one.
    let mut config = Config::default();
    config.limits.sse_connections_per_user = Some(2);
    let host = MemoryHost::with(config);
    let first = get(&host, EVENTS);
    assert_eq!(first.status, 200);
    assert!(matches!(
        first.body,
        ReplyBody::Stream(Stream::Events { .. })
    ));
    let second = get(&host, EVENTS);
    let body = rate_limited(&second, "5");
    assert_eq!(
        body["detail"],
        "too many event streams are open; retry later"
    );
    assert_eq!(host.counters.open_streams(1), 1);
    drop(first);
    assert_eq!(get(&host, EVENTS).status, 200);
}

#[test]
fn the_per_server_stream_cap_counts_every_users_streams() {
    // Unauthenticated streams may hold half of it: one.
    let mut config = Config::default();
    config.limits.sse_connections_per_server = Some(2);
    let mut host = MemoryHost::with(config);
    host.store.users.push(user(2, "bob", "bob.example"));
    let alice = get(&host, EVENTS);
    assert_eq!(alice.status, 200);
    let bob = get(&host, "/api/bob/events");
    rate_limited(&bob, "5");
    assert_eq!(
        host.counters.subscribes.borrow().as_slice(),
        [(1, true), (2, false)]
    );
}

#[test]
fn an_anonymous_events_request_is_counted_against_its_address_before_taking_a_place() {
    let config = Config::with_rate(|limits| &mut limits.unauthenticated_reads_per_address, 1, 1);
    let host = MemoryHost::with(config);
    let open = get(&host, EVENTS);
    assert_eq!(open.status, 200);
    assert_eq!(header(&open, "content-type"), "text/event-stream");
    let refused = get(&host, EVENTS);
    problem(&refused, "request/429-rate-limited", "rate_limited");
    assert_eq!(host.counters.subscribes.borrow().len(), 1);
}

#[test]
fn a_head_of_events_answers_the_streams_headers_and_keeps_no_place() {
    let host = MemoryHost::new();
    let reply = send(&host, &Call::new("HEAD", EVENTS), Body::empty());
    assert_eq!(reply.status, 200);
    assert_eq!(header(&reply, "content-type"), "text/event-stream");
    assert!(matches!(reply.body, ReplyBody::Empty));
    // It subscribed like a GET; the stream was dropped with the body.
    assert_eq!(host.counters.subscribes.borrow().as_slice(), [(1, true)]);
    assert_eq!(host.counters.open_streams(1), 0);
}

#[test]
fn an_events_request_with_a_bad_min_is_400_and_takes_no_place() {
    let host = MemoryHost::new();
    let reply = get(&host, &format!("{EVENTS}?min=yesterday"));
    problem(&reply, "request/400-invalid-parameter", "invalid_parameter");
    assert!(host.counters.subscribes.borrow().is_empty());
}

// Fresh values.

#[test]
fn fresh_draws_repeat_for_a_seed_and_differ_between_draws_and_seeds() {
    let fresh = Fresh::from_seed(SEED);
    let (a, b) = (fresh.record_id(), fresh.record_id());
    assert_ne!(a, b);
    let again = Fresh::from_seed(SEED);
    assert_eq!((again.record_id(), again.record_id()), (a, b));
    assert_ne!(Fresh::from_seed([0; 32]).record_id(), a);
}
