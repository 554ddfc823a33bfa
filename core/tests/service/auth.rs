//! Who is asking, against the store: the statements authentication runs
//! and in which order, signatures, the authorization id they are signed
//! under, nonces and the boot fence, bearer tokens and their expiry at the
//! request's time, app registration, and the write rate per app.

use base64::Engine;
use folio_core::auth::apps::ServerKeys;
use folio_core::auth::{AuthError, ReplayError};
use folio_core::problem::ProblemType;
use folio_core::query::ListQuery;
use folio_core::schema::builtin::BuiltinType;
use folio_core::service::fresh::Fresh;
use folio_core::store::{app_authorizations_sql, app_key_sql, latest_version_sql, list_sql};
use serde_json::json;

use crate::fake_host::{JobEnd, JobKind};
use crate::kit::{
    BOOT, Body, Call, Config, ENTITY, Noted, PEER, RateKey, SEED, Signer, USER, date, header, json,
    millis_after, now, problem, rate_limited,
};
use crate::{
    APP_KEY_SEED, OTHER_KEY_SEED, RECORDS, app_id, full_access, host_with_app, id, link, note_type,
    record_path, send, signed_get, write,
};

#[test]
fn a_signed_read_fetches_the_app_key_then_its_authorization_then_the_page() {
    let (host, app) = host_with_app(Config::default());
    let call = Call::get(RECORDS).signed(&app, "n1", &[]);
    let reply = send(&host, &call, Body::empty());
    assert_eq!(reply.status, 200, "{}", json(&reply));
    let user = &host.store.user;
    let query = ListQuery::from_params(&[], &user.entity).expect("the default query");
    let fetched = host.fetched();
    assert_eq!(fetched.len(), 4, "{fetched:#?}");
    assert_eq!(
        fetched[..3],
        [
            app_key_sql(user.id, &app_id()).sql,
            app_authorizations_sql(user.id, &user.entity, &app_id()).sql,
            list_sql(user.id, &query, &full_access()).statement.sql,
        ]
    );
    assert!(
        fetched[3].contains("json_each"),
        "then the records the page links to: {}",
        fetched[3]
    );
    let nonces = host.counters.nonce_calls.borrow().clone();
    assert_eq!(nonces.len(), 1);
    assert_eq!((nonces[0].nonce.as_str(), nonces[0].now), ("n1", now()));
    assert_eq!(nonces[0].verdict, Ok(()));
    assert!(
        host.counters.rates_counted().is_empty(),
        "a signed read is not counted against the address rate"
    );
}

#[test]
fn a_signature_over_another_target_is_401_invalid_signature_and_keeps_no_nonce() {
    let (host, app) = host_with_app(Config::default());
    let signed_for = Call::get(format!("{RECORDS}?page_size=5"));
    let authorization = app.authorization(now().unix_millis(), "n1", &signed_for, &[]);
    let call = Call::get(RECORDS).header("authorization", authorization);
    let reply = send(&host, &call, Body::empty());
    problem(&reply, "auth/401-invalid-signature", "invalid_signature");
    assert!(host.counters.nonce_calls.borrow().is_empty());
    // The nonce was not spent: the same nonce, rightly signed, passes.
    let reply = signed_get(&host, RECORDS, &app, "n1");
    assert_eq!(reply.status, 200);
}

#[test]
fn a_signature_under_another_authorization_id_is_401_invalid_signature() {
    let (host, app) = host_with_app(Config::default());
    let revoked = app.authorized(id(0x99));
    let call = Call::get(RECORDS).signed(&revoked, "n1", &[]);
    let reply = send(&host, &call, Body::empty());
    problem(&reply, "auth/401-invalid-signature", "invalid_signature");
}

#[test]
fn a_replayed_nonce_is_refused_the_second_time_only() {
    let (host, app) = host_with_app(Config::default());
    let call = Call::get(RECORDS).signed(&app, "same", &[]);
    assert_eq!(send(&host, &call, Body::empty()).status, 200);
    let again = send(&host, &call, Body::empty());
    problem(&again, "auth/401-replayed-request", "replayed_request");
    let verdicts: Vec<_> = host
        .counters
        .nonce_calls
        .borrow()
        .iter()
        .map(|call| call.verdict.clone())
        .collect();
    assert_eq!(
        verdicts,
        [Ok(()), Err(ReplayError::Auth(AuthError::ReplayedRequest))]
    );
    let fresh = Call::get(RECORDS).signed(&app, "other", &[]);
    assert_eq!(send(&host, &fresh, Body::empty()).status, 200);
}

#[test]
fn a_request_signed_before_the_replay_guards_boot_is_401_stale() {
    let (host, app) = host_with_app(Config::default());
    // Within the window of the request's time, but before the guard began.
    let at = millis_after(date(BOOT), 100_000);
    let call =
        Call::get(RECORDS)
            .at(at)
            .signed_at(&app, date(BOOT).unix_millis() - 1, "early", &[]);
    let reply = send(&host, &call, Body::empty());
    problem(&reply, "auth/401-stale-timestamp", "stale_timestamp");
    let nonces = host.counters.nonce_calls.borrow();
    assert_eq!(
        nonces[0].verdict,
        Err(ReplayError::Auth(AuthError::StaleTimestamp))
    );
}

#[test]
fn a_bearer_token_reads_one_record_until_its_expiry_at_the_requests_time() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let note = host.owner_post(json!({"type": link(&note_type), "content": {"text": "hi"}}));
    let path = record_path(ENTITY, &note.id);
    let expires = now().unix_millis() + 60_000;
    let target = format!("{path}?bearer={}", app.bearer(expires, &path));
    let reply = send(&host, &Call::get(target.as_str()), Body::empty());
    assert_eq!(reply.status, 200, "{}", json(&reply));
    assert_eq!(json(&reply)["record"]["id"], note.id.to_string());
    assert!(
        host.counters.rates_counted().is_empty(),
        "a bearer read is not anonymous"
    );
    // A token for one record does not open another.
    let other = host.owner_post(json!({"type": link(&note_type), "content": {"text": "no"}}));
    let elsewhere = format!(
        "{}?bearer={}",
        record_path(ENTITY, &other.id),
        app.bearer(expires, &path)
    );
    let reply = send(&host, &Call::get(elsewhere), Body::empty());
    problem(&reply, "auth/401-invalid-signature", "invalid_signature");
    let late = Call::get(target.as_str()).at(millis_after(now(), 60_001));
    let reply = send(&host, &late, Body::empty());
    problem(&reply, "auth/401-stale-timestamp", "stale_timestamp");
}

#[test]
fn a_bearer_read_asks_the_store_for_the_key_and_authorization_then_the_record() {
    let (host, app) = host_with_app(Config::default());
    let note = host.owner_post(json!({
        "type": BuiltinType::Type.link(),
        "content": {"name": "x", "schema": {"type": "object", "properties": {}}}
    }));
    let path = record_path(ENTITY, &note.id);
    let token = app.bearer(now().unix_millis() + 1_000, &path);
    let reply = send(
        &host,
        &Call::get(format!("{path}?bearer={token}")),
        Body::empty(),
    );
    assert_eq!(reply.status, 200);
    let user = &host.store.user;
    assert_eq!(
        host.fetched()[..3],
        [
            app_key_sql(user.id, &app_id()).sql,
            app_authorizations_sql(user.id, &user.entity, &app_id()).sql,
            latest_version_sql(user.id, &user.entity, &note.id).sql,
        ]
    );
    assert!(
        host.counters.nonce_calls.borrow().is_empty(),
        "a token has no nonce"
    );
}

/// The App record a registration sends.
fn app_record(id: &str) -> serde_json::Value {
    json!({
        "id": id,
        "type": BuiltinType::App.link(),
        "content": {
            "name": "Sketch",
            "uris": {"redirect": "https://sketch.example/back{?authorization_id}"},
            "scope_request": {"read": [], "write": [], "subscribe": []}
        }
    })
}

/// A registration of `app`'s key under its id, signed with it.
fn registration(app: &Signer, nonce: &str) -> (Call, Body) {
    let body = Body::json(&app_record(&app.app_id.to_string()));
    let offered = format!("algorithm=\"ed25519\" public_key=\"{}\"", app.public_key());
    let call = Call::post(RECORDS)
        .json_headers(&body)
        .header("x-svc-publickey", offered)
        .signed(app, nonce, &["x-svc-publickey"]);
    (call, body)
}

#[test]
fn a_registration_stores_its_records_in_one_job_and_answers_the_key_drawn_from_the_seed() {
    let host = crate::FakeHost::new();
    let newcomer = Signer::new(id(0xb1), None, OTHER_KEY_SEED);
    let (call, body) = registration(&newcomer, "r1");
    let reply = send(&host, &call, body);
    assert_eq!(reply.status, 200, "{}", json(&reply));
    assert_eq!(json(&reply)["record"]["id"], newcomer.app_id.to_string());
    let fresh = Fresh::from_seed(SEED);
    let _credentials_id = fresh.record_id();
    let server = ServerKeys::from_seed(fresh.bytes());
    assert_eq!(
        header(&reply, "x-svc-publickey"),
        format!("algorithm=\"ed25519\" public_key=\"{}\"", server.public_key)
    );
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].kind, JobKind::Registration);
    assert_eq!(jobs[0].end, JobEnd::Stored);
    assert_eq!(
        host.notes(),
        [Noted::Registered {
            user: USER.into(),
            app: newcomer.app_id
        }]
    );
    let rates = host.counters.rates_counted();
    assert_eq!(rates.len(), 1);
    assert_eq!(rates[0].key, RateKey::Registration(Some(PEER)));
    // Registered, not authorized: its signed requests name no app yet.
    let reply = signed_get(&host, RECORDS, &newcomer, "r2");
    problem(&reply, "auth/401-unknown-app", "unknown_app");
}

#[test]
fn registering_a_known_id_with_another_key_is_409_id_conflict_and_stores_nothing() {
    let host = crate::FakeHost::new();
    let first = Signer::new(id(0xb1), None, OTHER_KEY_SEED);
    let (call, body) = registration(&first, "r1");
    assert_eq!(send(&host, &call, body).status, 200);
    let before = crate::versions(&host);
    let impostor = Signer::new(id(0xb1), None, APP_KEY_SEED);
    let (call, body) = registration(&impostor, "r2");
    let reply = send(&host, &call, body);
    problem(&reply, "record/409-id-conflict", "id_conflict");
    assert_eq!(crate::versions(&host), before);
    assert_eq!(host.jobs()[1].end, JobEnd::Refused(ProblemType::IdConflict));
}

#[test]
fn the_write_rate_is_counted_per_app_and_answers_429_with_retry_after_and_no_job() {
    let config = Config::with_rate(|limits| &mut limits.writes_per_app, 1, 1);
    let (host, app) = host_with_app(config);
    let other = host.add_app(id(0xc1), id(0xc2), OTHER_KEY_SEED, None);
    let note_type = note_type(&host);
    let body = json!({"type": link(&note_type), "content": {"text": "a"}});
    assert_eq!(write(&host, "POST", RECORDS, &body, &app, "w1").status, 200);
    let reply = write(&host, "POST", RECORDS, &body, &app, "w2");
    rate_limited(&reply, "1");
    assert_eq!(host.jobs().len(), 1, "a refused write submits no job");
    assert_eq!(
        write(&host, "POST", RECORDS, &body, &other, "w3").status,
        200,
        "another app has its own bucket"
    );
    let keys: Vec<RateKey> = host.counters.rate_keys();
    assert_eq!(
        keys,
        [
            RateKey::Write(app_id()),
            RateKey::Write(app_id()),
            RateKey::Write(id(0xc1))
        ]
    );
    // A second later (by the request's clock) the app may write again.
    let body = Body::json(&body);
    let later = Call::post(RECORDS)
        .at(millis_after(now(), 1_000))
        .json_headers(&body)
        .signed(&app, "w4", &[]);
    assert_eq!(send(&host, &later, body).status, 200);
}

#[test]
fn the_timestamp_window_is_measured_at_the_requests_time_not_the_schedulers() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    // 300 s before the request: in the window. The scheduler runs the job
    // 7.5 s later, where the same timestamp would be stale.
    let ts = now().unix_millis() - 300_000;
    assert!(host.scheduler_now().unix_millis() - ts > 300_000);
    let body = Body::json(&json!({"type": link(&note_type), "content": {"text": "late"}}));
    let call = Call::post(RECORDS)
        .json_headers(&body)
        .signed_at(&app, ts, "t1", &[]);
    let reply = send(&host, &call, body);
    assert_eq!(reply.status, 200, "{}", json(&reply));
    let body = Body::json(&json!({"type": link(&note_type), "content": {"text": "later"}}));
    let call = Call::post(RECORDS)
        .json_headers(&body)
        .signed_at(&app, ts - 1, "t2", &[]);
    let reply = send(&host, &call, body);
    problem(&reply, "auth/401-stale-timestamp", "stale_timestamp");
    assert_eq!(host.jobs().len(), 1);
}

/// A server `Authorization` as `entity`'s server would send it, well formed
/// but signed by nobody: what anyone can send.
fn unverified_server_authorization(entity: &str, nonce: &str) -> String {
    let signature = base64::engine::general_purpose::STANDARD.encode([0u8; 64]);
    format!(
        "SVC entity=\"{entity}\" algorithm=\"ed25519\" ts=\"{}\" nonce=\"{nonce}\" \
         headers=\"\" signature=\"{signature}\"",
        now().unix_millis()
    )
}

#[test]
fn unverified_server_requests_naming_new_entities_cause_few_discoveries() {
    use folio_core::service::{
        UNVERIFIED_DISCOVERIES_PER_ADDRESS_PER_MINUTE as PER_ADDRESS,
        UNVERIFIED_DISCOVERIES_PER_MINUTE as PER_SERVER,
    };
    let host = crate::fake_host::FakeHost::new();
    let mut named = 0;
    let mut ask = |from: std::net::IpAddr| {
        named += 1;
        let entity = format!("e{named}.example");
        let call = Call::get(RECORDS)
            .header(
                "authorization",
                unverified_server_authorization(&entity, &format!("n{named}")),
            )
            .from(Some(from));
        let reply = send(&host, &call, Body::empty());
        (reply.status, host.peer_requests().len())
    };
    let attacker: std::net::IpAddr = [203, 0, 113, 7].into();
    // Twenty requests from one address, each naming an entity the store
    // does not know: the first few are discovered (the fake reaches no
    // server: one request each), the rest send nothing.
    let mut sent = 0;
    for _ in 0..20 {
        (_, sent) = ask(attacker);
    }
    assert_eq!(sent, PER_ADDRESS as usize);
    let (status, after) = ask(attacker);
    assert_eq!((status, after), (429, sent), "the 21st sends nothing out");
    // Many addresses together: the server's budget.
    let mut last: u8 = 0;
    while sent < PER_SERVER as usize {
        last += 1;
        (_, sent) = ask([198, 51, 100, last].into());
    }
    assert_eq!(sent, PER_SERVER as usize);
    let (status, after) = ask([192, 0, 2, 99].into());
    assert_eq!((status, after), (429, sent), "past the server's budget");
    assert!(
        host.peer_requests()
            .iter()
            .all(|url| url.starts_with("https://e")),
        "{:?}",
        host.peer_requests()
    );
}
