//! Record writes and reads through the service: the one job a write
//! submits and the time it runs at, ids drawn from the request's seed,
//! version conflicts, idempotent replays, a busy writer, refusals, the
//! versions a job fans out, and the store's failures.

use folio_core::problem::ProblemType;
use folio_core::service::fresh::Fresh;
use folio_core::store::entity_record_sql;
use serde_json::json;

use crate::fake_host::{FakeHost, JobEnd, JobKind};
use crate::kit::{
    BASE_URL, Body, Call, Config, ENTITY, REQUEST_NOW, SCHEDULER_NOW, SEED, USER, header, json,
    problem, text,
};
use crate::{
    RECORDS, host_with_app, link, note_type, record_path, send, sha256_hex, versions, write,
};

const CREATED_AT: &str = "2026-11-21T09:59:00.0000000Z";

#[test]
fn a_signed_create_runs_one_writes_job_stamped_with_the_schedulers_time() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let body = json!({"type": link(&note_type), "content": {"text": "hello"}});
    let reply = write(&host, "POST", RECORDS, &body, &app, "n1");
    assert_eq!(reply.status, 200, "{}", json(&reply));
    let record = &json(&reply)["record"];
    assert_eq!(
        record["version"]["received_at"],
        "2026-11-21T10:00:07.5000000Z"
    );
    assert_ne!(record["version"]["received_at"], json!(REQUEST_NOW));
    assert_eq!(record["content"], json!({"text": "hello"}));
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].kind, JobKind::Writes(1));
    assert_eq!(jobs[0].now, crate::kit::date(SCHEDULER_NOW));
    assert_eq!(jobs[0].end, JobEnd::Stored);
    assert!(
        jobs[0]
            .committed
            .iter()
            .any(|sql| sql.contains("INSERT INTO versions")),
        "{:?}",
        jobs[0].committed
    );
}

#[test]
fn a_create_without_an_id_takes_the_id_drawn_from_the_requests_seed() {
    let create = |seed: [u8; 32]| -> String {
        let (host, app) = host_with_app(Config::default());
        let note_type = note_type(&host);
        let body = Body::json(&json!({"type": link(&note_type), "content": {"text": "x"}}));
        let call = Call::post(RECORDS)
            .seed(seed)
            .json_headers(&body)
            .signed(&app, "n1", &[]);
        let reply = send(&host, &call, body);
        assert_eq!(reply.status, 200, "{}", json(&reply));
        json(&reply)["record"]["id"]
            .as_str()
            .expect("an id")
            .to_owned()
    };
    let first = create(SEED);
    assert_eq!(first, Fresh::from_seed(SEED).record_id().to_string());
    assert_eq!(create(SEED), first, "the same seed draws the same id");
    let other = create([0x01; 32]);
    assert_ne!(other, first);
    assert_eq!(other, Fresh::from_seed([0x01; 32]).record_id().to_string());
}

#[test]
fn an_update_with_a_stale_parent_is_409_version_conflict_naming_the_latest() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let id = "0123456789abcdef0123456789abcdef";
    let created = write(
        &host,
        "POST",
        RECORDS,
        &json!({"id": id, "type": link(&note_type), "content": {"text": "v1"}}),
        &app,
        "n1",
    );
    let v1 = json(&created)["record"]["version"]["hash"].clone();
    let path = record_path(ENTITY, &id.parse().expect("an id"));
    let update = |text: &str, nonce: &str| {
        let body = json!({"content": {"text": text}, "version": {"parent_hash": v1}});
        write(&host, "PUT", &path, &body, &app, nonce)
    };
    let updated = update("v2", "n2");
    assert_eq!(updated.status, 200, "{}", json(&updated));
    let v2 = json(&updated)["record"]["version"]["hash"].clone();
    assert_eq!(json(&updated)["record"]["version"]["parent_hash"], v1);
    let stale = update("v3", "n3");
    let body = problem(&stale, "record/409-version-conflict", "version_conflict");
    let detail = body["detail"].as_str().expect("a detail");
    assert!(detail.contains(v2.as_str().expect("a hash")), "{detail}");
    let ends: Vec<JobEnd> = host.jobs().into_iter().map(|job| job.end).collect();
    assert_eq!(
        ends,
        [
            JobEnd::Stored,
            JobEnd::Stored,
            JobEnd::Refused(ProblemType::VersionConflict)
        ]
    );
}

#[test]
fn a_replayed_create_answers_the_stored_version_and_stores_nothing_new() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let body = json!({
        "id": "0123456789abcdef0123456789abcdef",
        "created_at": CREATED_AT,
        "type": link(&note_type),
        "content": {"text": "once"}
    });
    let first = write(&host, "POST", RECORDS, &body, &app, "n1");
    assert_eq!(first.status, 200, "{}", json(&first));
    let stored = versions(&host);
    let events = host.count("SELECT COUNT(*) FROM events");
    let again = write(&host, "POST", RECORDS, &body, &app, "n2");
    assert_eq!(again.status, 200, "{}", json(&again));
    assert_eq!(json(&again)["record"], json(&first)["record"]);
    assert_eq!(versions(&host), stored);
    assert_eq!(host.count("SELECT COUNT(*) FROM events"), events);
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1].end, JobEnd::Stored);
    assert!(jobs[1].committed.is_empty(), "{:?}", jobs[1].committed);
    let published = &host.store.log.borrow().published;
    assert_eq!(published[1].1.len(), 0, "a replay fans nothing out");
}

#[test]
fn a_busy_writer_answers_503_with_retry_after_1_and_stores_nothing() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let before = versions(&host);
    host.set_busy(true);
    let body = json!({"type": link(&note_type), "content": {"text": "x"}});
    let reply = write(&host, "POST", RECORDS, &body, &app, "n1");
    problem(&reply, "server/503-unavailable", "unavailable");
    assert_eq!(header(&reply, "retry-after"), "1");
    assert_eq!(versions(&host), before);
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].end, JobEnd::Busy);
    assert!(host.reports().is_empty(), "busy is not a failure to log");
}

#[test]
fn a_write_the_schema_refuses_runs_one_job_stores_nothing_and_submits_no_other() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let before = versions(&host);
    let body = json!({"type": link(&note_type), "content": {"text": 42}});
    let reply = write(&host, "POST", RECORDS, &body, &app, "n1");
    problem(&reply, "record/400-schema-violation", "schema_violation");
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].end, JobEnd::Refused(ProblemType::SchemaViolation));
    assert!(jobs[0].committed.is_empty());
    assert_eq!(versions(&host), before);
    assert!(host.store.log.borrow().published.is_empty());
}

#[test]
fn the_fan_out_carries_each_stored_version_with_its_event_sequence_and_client() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let client = "8fbf7696f25b4628bde73f46f4631d3f";
    let mut answers = Vec::new();
    for (text, nonce) in [("a", "n1"), ("b", "n2")] {
        let body = Body::json(&json!({"type": link(&note_type), "content": {"text": text}}));
        let call = Call::post(RECORDS)
            .seed(crate::seed_of(nonce))
            .json_headers(&body)
            .header("x-svc-client-id", client)
            .signed(&app, nonce, &[]);
        let reply = send(&host, &call, body);
        assert_eq!(reply.status, 200, "{}", json(&reply));
        answers.push(json(&reply)["record"].clone());
    }
    let latest = host.count(&format!(
        "SELECT MAX(seq) FROM events WHERE user_id = {}",
        host.store.user.id
    ));
    let log = host.store.log.borrow();
    assert_eq!(log.published.len(), 2);
    for (i, (user_id, live)) in log.published.iter().enumerate() {
        assert_eq!(*user_id, host.store.user.id);
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].seq, (latest - 1 + i as i64) as u64);
        assert_eq!(
            live[0].record.version.hash.to_string(),
            answers[i]["version"]["hash"]
        );
        assert_eq!(
            live[0].written_by.map(|c| c.to_string()),
            Some(client.to_owned())
        );
        assert!(
            live[0]
                .frame()
                .starts_with(&format!("id: {}\nevent: record\n", live[0].seq))
        );
    }
}

#[test]
fn a_signed_body_digest_that_is_not_the_bodys_is_401_invalid_signature_and_no_job() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let body = Body::json(&json!({"type": link(&note_type), "content": {"text": "x"}}));
    let call = Call::post(RECORDS)
        .json_headers(&body)
        .header("x-svc-content-sha256", sha256_hex(b"another body"))
        .signed(&app, "n1", &["x-svc-content-sha256"]);
    let reply = send(&host, &call, body);
    problem(&reply, "auth/401-invalid-signature", "invalid_signature");
    assert!(host.jobs().is_empty());
    // The right digest, signed, passes.
    let body = Body::json(&json!({"type": link(&note_type), "content": {"text": "x"}}));
    let digest = sha256_hex(&body.chunks[0]);
    let call = Call::post(RECORDS)
        .json_headers(&body)
        .header("x-svc-content-sha256", digest)
        .signed(&app, "n2", &["x-svc-content-sha256"]);
    assert_eq!(send(&host, &call, body).status, 200);
}

#[test]
fn a_record_outside_a_scoped_apps_grant_is_404_record_not_found() {
    let host = FakeHost::new();
    let note_type = note_type(&host);
    let scope = folio_core::auth::apps::Scope::default();
    let app = host.add_app(
        crate::id(0xd1),
        crate::id(0xd2),
        crate::APP_KEY_SEED,
        Some(scope),
    );
    let note = host.owner_post(json!({"type": link(&note_type), "content": {"text": "private"}}));
    let call = Call::get(record_path(ENTITY, &note.id)).signed(&app, "n1", &[]);
    let reply = send(&host, &call, Body::empty());
    problem(&reply, "record/404-not-found", "record_not_found");
    // Its Type record is always readable.
    let call = Call::get(record_path(ENTITY, &note_type.id)).signed(&app, "n2", &[]);
    assert_eq!(send(&host, &call, Body::empty()).status, 200);
}

#[test]
fn discovery_answers_204_with_a_link_to_the_entity_record() {
    let host = FakeHost::new();
    let call = Call::new("HEAD", "/");
    let reply = send(&host, &call, Body::empty());
    assert_eq!(reply.status, 204);
    assert!(text(&reply).is_empty());
    let entity = host.fetched();
    assert_eq!(
        entity,
        [entity_record_sql(host.store.user.id, &host.store.user.entity).sql]
    );
    let entity_record = host.store.entity_record.as_ref().expect("an Entity record");
    let link = header(&reply, "link");
    assert!(
        link.starts_with(&format!(
            "<{BASE_URL}/api/{USER}/records/{ENTITY}/{}>",
            entity_record.id
        )),
        "{link}"
    );
    assert!(
        link.ends_with(">; rel=\"https://folio.dev/rels/entity-record\""),
        "{link}"
    );
}

#[test]
fn a_browser_at_the_root_gets_a_styled_page_whose_form_leads_to_a_console() {
    let host = FakeHost::new();
    let page = send(
        &host,
        &Call::get("/").header("accept", "text/html"),
        Body::empty(),
    );
    assert_eq!(page.status, 200);
    let html = text(&page);
    assert!(
        html.contains(r#"<link rel="stylesheet" href="/console.css">"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<form method="get" action="/console">"#),
        "{html}"
    );
    assert!(
        !html.contains(&format!("/{USER}/")),
        "names no user: {html}"
    );

    let sheet = send(&host, &Call::get("/console.css"), Body::empty());
    assert_eq!(sheet.status, 200);
    assert_eq!(header(&sheet, "content-type"), "text/css; charset=utf-8");
    assert!(
        sheet.header("access-control-allow-origin").is_none(),
        "a page's, not the API's"
    );

    let to = |query: &str| {
        let reply = send(&host, &Call::get(format!("/console{query}")), Body::empty());
        assert_eq!(reply.status, 303, "{query}");
        header(&reply, "location").to_owned()
    };
    assert_eq!(to("?user=alice"), "/alice/console");
    assert_eq!(
        to("?user=%20alice%20"),
        "/alice/console",
        "spaces typed around it"
    );
    assert_eq!(
        to("?user=+alice+"),
        "/alice/console",
        "as a form sends them"
    );
    assert_eq!(to("?user=a%2Bb"), "/a%2Bb/console");
    assert_eq!(to("?user=a%2Fb"), "/", "no user can be named so");
    assert_eq!(to(""), "/");
}

#[test]
fn a_failing_store_is_500_internal_with_no_detail_and_is_reported() {
    let (host, app) = host_with_app(Config::default());
    host.set_failing_store(true);
    let call = Call::get(RECORDS).signed(&app, "n1", &[]);
    let reply = send(&host, &call, Body::empty());
    let body = problem(&reply, "server/500-internal", "internal");
    assert!(body.get("detail").is_none(), "{body}");
    assert_eq!(host.reports().len(), 1);
    assert_eq!(header(&reply, "cache-control"), "no-cache");
}

#[test]
fn a_retry_after_503_must_be_signed_anew_since_its_nonce_was_spent() {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let body = json!({"type": link(&note_type), "content": {"text": "x"}});
    let (call, request_body) = crate::signed_json("POST", RECORDS, &body, &app, "n1");
    host.set_busy(true);
    assert_eq!(send(&host, &call, request_body.clone()).status, 503);
    host.set_busy(false);
    let again = send(&host, &call, request_body);
    problem(&again, "auth/401-replayed-request", "replayed_request");
    assert_eq!(host.jobs().len(), 1, "the replay submitted no job");
    assert_eq!(write(&host, "POST", RECORDS, &body, &app, "n2").status, 200);
}

/// A job of several writes sees its own earlier writes when a deletion
/// cascades: deleting a record and then the record it links existentially
/// (the console forgetting an app after revoking it) deletes both, and the
/// cascade does not stumble on the tombstone the job already wrote.
#[test]
fn a_job_deleting_a_dependant_then_its_target_deletes_both() {
    use folio_core::model::RecordBody;
    use folio_core::write::{RecordKey, WriteRequest};
    let host = FakeHost::new();
    let note_type = host.owner_post(json!({
        "type": folio_core::schema::builtin::BuiltinType::Type.link(),
        "content": {"name": "nested", "schema": {"type": "object", "properties": {
            "content": {"type": "object", "properties": {
                "text": {"type": "string"},
                "parent": {"type": "record_link", "existential": true, "optional": true}
            }}
        }}}
    }));
    let target = host.owner_post(json!({"type": link(&note_type), "content": {"text": "target"}}));
    let dependant = host.owner_post(json!({
        "type": link(&note_type),
        "content": {"text": "dependant", "parent": {"entity": ENTITY, "record_id": target.id.to_string()}},
    }));
    let delete = |record: &folio_core::model::Record| {
        WriteRequest::delete(RecordKey::new(record.author.entity.clone(), record.id), b"")
            .expect("an empty deletion body parses")
    };
    let finished = host.owner_job_finished(vec![delete(&dependant), delete(&target)]);
    assert!(finished.outcome.is_ok(), "both deletions are stored");
    let deleted: Vec<_> = (finished.effects.live.iter())
        .map(|stored| {
            (
                stored.record.id,
                matches!(stored.record.body, RecordBody::Tombstone(_)),
            )
        })
        .collect();
    assert_eq!(deleted, vec![(dependant.id, true), (target.id, true)]);
}

/// Two writes decided on the same snapshot, as the native host prepares
/// them on request threads: the writer commits the first; the second's
/// parent is no longer the latest, so it is decided again at its commit and
/// refused as a version conflict, and nothing of it is stored. A create
/// prepared before both commits after them, received after them: the
/// writer stamps `received_at`, in commit order.
#[test]
fn writes_prepared_on_one_snapshot_commit_in_order_and_a_stale_one_is_decided_again() {
    use crate::fake_host::Preparation;
    use folio_core::Refused;
    use folio_core::model::RecordDate;
    use folio_core::write::{RecordKey, WriteError, WriteRequest};
    let host = FakeHost::new();
    let note_type = memo_type(&host, json!({"text": {"type": "string"}}));
    let note = host.owner_post(json!({"type": link(&note_type), "content": {"text": "first"}}));
    let update = |text: &str| {
        let body =
            json!({"content": {"text": text}, "version": {"parent_hash": note.version.hash}});
        WriteRequest::put(
            RecordKey::new(note.author.entity.clone(), note.id),
            body.to_string().as_bytes(),
        )
        .expect("an update body")
    };
    let create = WriteRequest::post(
        json!({"type": link(&note_type), "content": {"text": "new"}})
            .to_string()
            .as_bytes(),
    )
    .expect("a create body");
    let decided = |preparation: Preparation| match preparation {
        Preparation::Decided(prepared) => prepared,
        other => panic!("a decided job: {other:?}"),
    };
    let early_create = decided(host.owner_prepare(vec![create], 1));
    let first = decided(host.owner_prepare(vec![update("second")], 2));
    let rival = decided(host.owner_prepare(vec![update("rival")], 3));

    let later = |ms: i64| {
        RecordDate::from_unix_ticks(note.version.received_at.unwrap().unix_ticks() + ms * 10_000)
            .expect("a date")
    };
    let stored = |outcome: folio_core::JobOutcome| match outcome {
        Ok(folio_core::Done::Written(written)) => written.answer.record,
        other => panic!("a stored write: {other:?}"),
    };
    let second = stored(host.commit_prepared(first, later(5)));
    assert_eq!(second.version.parent_hash, Some(note.version.hash));
    match host.commit_prepared(rival, later(5)) {
        Err(Refused::Write(WriteError::VersionConflict { .. })) => {}
        other => panic!("the rival is a version conflict: {other:?}"),
    }
    // Committed at the same clock reading, the create is still received after.
    let created = stored(host.commit_prepared(early_create, later(5)));
    assert!(created.version.received_at > second.version.received_at);
    assert_eq!(created.received_at, created.version.received_at);
    assert_eq!(
        second.version.received_at,
        Some(later(5)),
        "received when the writer committed it"
    );
    assert_eq!(
        second.received_at, note.received_at,
        "an update keeps the record's"
    );
    let latest = host.owner_job(vec![update("stale again")]);
    assert!(
        latest.is_err(),
        "the first update's parent is no longer the latest"
    );
}

/// What a prepared write read is checked when it commits, not only what
/// the schema enforces: a create that links a record deleted after it was
/// prepared is decided again, and refused for its link.
#[test]
fn a_prepared_write_whose_link_was_deleted_meanwhile_is_decided_again() {
    use crate::fake_host::Preparation;
    use folio_core::Refused;
    use folio_core::write::{RecordKey, WriteError, WriteRequest};
    let host = FakeHost::new();
    let note_type = memo_type(
        &host,
        json!({
            "text": {"type": "string"},
            "see": {"type": "record_link", "optional": true}
        }),
    );
    let target = host.owner_post(json!({"type": link(&note_type), "content": {"text": "target"}}));
    let create = WriteRequest::post(
        json!({"type": link(&note_type), "content": {"text": "linking",
            "see": {"entity": ENTITY, "record_id": target.id.to_string()}}})
        .to_string()
        .as_bytes(),
    )
    .expect("a create body");
    let Preparation::Decided(prepared) = host.owner_prepare(vec![create], 1) else {
        panic!("a decided create")
    };
    let delete = WriteRequest::delete(RecordKey::new(target.author.entity.clone(), target.id), b"")
        .expect("a deletion");
    host.owner_job(vec![delete]).expect("the target is deleted");
    let now = target.version.received_at.expect("received");
    match host.commit_prepared(prepared, now) {
        Err(Refused::Write(WriteError::InvalidLink { .. })) => {}
        other => panic!("refused for its link: {other:?}"),
    }
}

/// The versions a prepared write reads (its Type record's, those its links
/// name) are read once: a later write under the same epoch is decided from
/// the host's memo without reading them again, and a new epoch (a store
/// removed beside the server) reads them afresh.
#[test]
fn the_versions_a_prepared_write_reads_are_remembered_until_the_epoch_moves() {
    use crate::fake_host::Preparation;
    use folio_core::service::standing::Epoch;
    use folio_core::write::{RecordKey, WriteRequest};
    let host = FakeHost::new();
    let note_type = memo_type(&host, json!({"text": {"type": "string"}}));
    let create = |text: &str| {
        WriteRequest::post(
            json!({"type": link(&note_type), "content": {"text": text}})
                .to_string()
                .as_bytes(),
        )
        .expect("a create body")
    };
    let type_key = RecordKey::new(note_type.author.entity.clone(), note_type.id);
    let epoch = crate::fake_host::FIRST_EPOCH;
    let remembered = |epoch| {
        host.memo()
            .at(epoch)
            .version(host.store.user.id, &type_key, &note_type.version.hash)
    };
    assert!(remembered(epoch).is_none());
    let first = host.owner_prepare_in(vec![create("one")], 1, epoch);
    assert!(matches!(first, Ok(Preparation::Decided(_))), "{first:?}");
    assert_eq!(
        remembered(epoch).map(|found| found.record).as_deref(),
        Some(&note_type),
        "the Type record's version, as stored"
    );

    // Unreadable in the store now: a write that read it would fail.
    host.execute(&format!(
        "UPDATE versions SET record = '{{\"not\": \"a record\"}}' WHERE hash = '{}'",
        note_type.version.hash
    ));
    let second = host.owner_prepare_in(vec![create("two")], 2, epoch);
    assert!(
        matches!(second, Ok(Preparation::Decided(_))),
        "decided from the memo: {second:?}"
    );
    let moved = Epoch {
        commits: epoch.commits + 1,
        ..epoch
    };
    let third = host.owner_prepare_in(vec![create("three")], 3, moved);
    assert!(
        third
            .as_ref()
            .is_err_and(|failure| failure.contains("stored data")),
        "read again under a new epoch: {third:?}"
    );
    assert!(remembered(moved).is_none());
}

/// A version a prepared write stored is remembered as the store holds it,
/// and the next write of the same record takes its latest version from
/// the memo: it is decided without reading the store (the writer checks
/// that guess where it commits).
#[test]
fn a_committed_version_is_remembered_as_stored_and_the_next_update_reads_it_from_the_memo() {
    use crate::fake_host::Preparation;
    use folio_core::Done;
    use folio_core::model::{Record, RecordDate};
    use folio_core::write::{RecordKey, WriteRequest};
    let host = FakeHost::new();
    let note_type = memo_type(
        &host,
        json!({
            "text": {"type": "string"},
            "n": {"type": "number", "optional": true}
        }),
    );
    let note = host.owner_post(json!({"type": link(&note_type), "content": {"text": "first"}}));
    let key = RecordKey::new(note.author.entity.clone(), note.id);
    let update = |parent: &Record, text: &str| {
        let body = json!({"content": {"text": text, "n": 1.5e300},
            "version": {"parent_hash": parent.version.hash}});
        WriteRequest::put(key.clone(), body.to_string().as_bytes()).expect("an update body")
    };
    let commit = |preparation: Result<Preparation, String>, ms: i64| {
        let Ok(Preparation::Decided(prepared)) = preparation else {
            panic!("a decided job: {preparation:?}")
        };
        let at = RecordDate::from_unix_ticks(
            note.version.received_at.expect("received").unix_ticks() + ms * 10_000,
        )
        .expect("a date");
        match host.commit_prepared(prepared, at) {
            Ok(Done::Written(written)) => written.answer.record,
            other => panic!("a stored write: {other:?}"),
        }
    };
    let epoch = crate::fake_host::FIRST_EPOCH;
    let second = commit(
        host.owner_prepare_in(vec![update(&note, "second")], 1, epoch),
        5,
    );
    let remembered = host
        .memo()
        .at(epoch)
        .version(host.store.user.id, &key, &second.version.hash)
        .expect("the committed version is remembered");
    let stored: Record =
        serde_json::from_str(&host.stored_version(&second.version.hash.to_string()))
            .expect("a stored record");
    assert_eq!(
        *remembered.record, stored,
        "remembered as the store holds it"
    );
    let links = host.stored_links(&second.version.hash.to_string());
    assert_eq!(
        *remembered.entries,
        *folio_core::store::read_links(&links).expect("stored links"),
        "with its index entries as the store holds them"
    );

    // The stored JSON can no longer be read: the next update does not read it.
    host.execute(&format!(
        "UPDATE versions SET record = '{{\"not\": \"a record\"}}' WHERE hash = '{}'",
        second.version.hash
    ));
    let reads = host.prepared_reads();
    let third = commit(
        host.owner_prepare_in(vec![update(&second, "third")], 2, epoch),
        10,
    );
    assert_eq!(third.version.parent_hash, Some(second.version.hash));
    assert_eq!(host.prepared_reads(), reads, "decided without a read");
}

/// The memo's latest version of a record is a guess: a version stored
/// since without the memo hearing of it (as a write from beside the
/// server would) leaves it stale. An update of the true latest, refused on
/// the guess, is decided again on the store before anything is answered,
/// and stored; an update decided on the stale guess is decided again
/// where it commits, refused for its stale parent, and the guess is
/// forgotten.
#[test]
fn an_update_decided_on_a_stale_guess_at_the_latest_is_decided_again_before_its_answer() {
    use crate::fake_host::Preparation;
    use folio_core::model::{Record, RecordDate};
    use folio_core::write::{RecordKey, WriteError, WriteRequest};
    use folio_core::{Done, Refused};
    let host = FakeHost::new();
    let note_type = memo_type(&host, json!({"text": {"type": "string"}}));
    let note = host.owner_post(json!({"type": link(&note_type), "content": {"text": "first"}}));
    let key = RecordKey::new(note.author.entity.clone(), note.id);
    let update = |parent: &Record, text: &str| {
        let body =
            json!({"content": {"text": text}, "version": {"parent_hash": parent.version.hash}});
        WriteRequest::put(key.clone(), body.to_string().as_bytes()).expect("an update body")
    };
    let at = |ms: i64| {
        RecordDate::from_unix_ticks(
            note.version.received_at.expect("received").unix_ticks() + ms * 10_000,
        )
        .expect("a date")
    };
    let epoch = crate::fake_host::FIRST_EPOCH;
    let prepare = |request, fresh| match host.owner_prepare_in(vec![request], fresh, epoch) {
        Ok(Preparation::Decided(prepared)) => prepared,
        other => panic!("a decided job: {other:?}"),
    };
    let stored = |outcome: folio_core::JobOutcome| match outcome {
        Ok(Done::Written(written)) => written.answer.record,
        other => panic!("a stored write: {other:?}"),
    };
    let second = stored(host.commit_prepared(prepare(update(&note, "second"), 1), at(5)));
    let remembered = |record: &Record| {
        host.memo()
            .at(epoch)
            .latest(host.store.user.id, &key)
            .is_some_and(|found| found.record.version.hash == record.version.hash)
    };
    assert!(remembered(&second), "the memo's latest is the second");

    // Stored beside the memo: its guess is now stale.
    host.set_provision_now(at(10));
    let third = stored(host.owner_job(vec![update(&second, "third")]));
    assert!(remembered(&second), "still the second");

    // Refused on the guess (its parent is not the second), so decided
    // again on the store, before any answer: stored.
    let reads = host.prepared_reads();
    let fourth = stored(host.commit_prepared(prepare(update(&third, "fourth"), 2), at(15)));
    assert_eq!(fourth.version.parent_hash, Some(third.version.hash));
    assert!(host.prepared_reads() > reads, "the store was read");
    assert!(remembered(&fourth), "the writer's latest");

    // Stale again; decided on the guess, refused where it commits, and
    // the wrong guess is forgotten.
    host.set_provision_now(at(20));
    let fifth = stored(host.owner_job(vec![update(&fourth, "fifth")]));
    let stale = prepare(update(&fourth, "stale"), 3);
    match host.commit_prepared(stale, at(25)) {
        Err(Refused::Write(WriteError::VersionConflict { latest })) => {
            assert_eq!(latest, fifth.version.hash, "naming the true latest");
        }
        other => panic!("a version conflict: {other:?}"),
    }
    assert!(
        host.memo()
            .at(epoch)
            .latest(host.store.user.id, &key)
            .is_none(),
        "the wrong guess is forgotten"
    );
    let sixth = stored(host.commit_prepared(prepare(update(&fifth, "sixth"), 4), at(30)));
    assert_eq!(sixth.version.parent_hash, Some(fifth.version.hash));
}

/// A Type record named `memo` whose content has `properties`.
fn memo_type(host: &FakeHost, properties: serde_json::Value) -> folio_core::model::Record {
    host.owner_post(json!({
        "type": folio_core::schema::builtin::BuiltinType::Type.link(),
        "content": {"name": "memo", "schema": {"type": "object", "properties": {
            "content": {"type": "object", "properties": properties}
        }}}
    }))
}
