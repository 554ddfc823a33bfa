//! Creating, reading, updating and deleting records (spec §3, §4.2–4.4,
//! PROTOCOL.md §2–§5).

use futures_util::future::join_all;
use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::{Call, Response, record_id};
use crate::context::{Ctx, ensure_listed, record_link, type_filter, version_link};
use crate::expect::{
    self, DELETED, ID_CONFLICT, INVALID_BODY, INVALID_JSON, INVALID_LINK, MISSING_PROPERTIES,
    RECORD_NOT_FOUND, SCHEMA_VIOLATION, UNSUPPORTED_MEDIA_TYPE, UPDATE_MISSING_PROPERTIES,
    VERSION_CONFLICT, at, ensure, ensure_eq, is_hex, is_record_date, str_at,
};

pub fn checks() -> Vec<Check> {
    vec![
        check!("records/create-answers-200-not-201", create_answers_200),
        check!(
            "records/create-answers-record-and-linked-records",
            create_response_shape
        ),
        check!(
            "records/create-empty-object-missing-properties",
            create_empty_object
        ),
        check!(
            "records/create-without-content-missing-properties",
            create_without_content
        ),
        check!(
            "records/create-without-type-missing-properties",
            create_without_type
        ),
        check!(
            "records/create-permissions-default-empty-object",
            create_permissions_default
        ),
        check!(
            "records/create-permissions-stored-as-given",
            create_permissions_as_given
        ),
        check!("records/create-source-self", create_source_self),
        check!(
            "records/create-dates-seven-fractional-digits",
            create_dates_format
        ),
        check!("records/create-server-id-32-hex", create_server_id),
        check!("records/create-version-hash-64-hex", create_version_hash),
        check!(
            "records/create-first-version-has-no-parent-hash",
            create_no_parent_hash
        ),
        check!(
            "records/create-received-at-equals-version-received-at",
            create_received_at
        ),
        check!(
            "records/create-server-created-at-millisecond-precision",
            create_server_created_at
        ),
        check!(
            "records/create-client-created-at-kept",
            create_client_created_at
        ),
        check!(
            "records/create-created-at-offset-normalized-to-utc",
            create_created_at_offset
        ),
        check!("records/create-author-is-user-entity", create_author),
        check!("records/create-client-chosen-id-kept", create_client_id),
        check!("records/create-idempotent-replay", create_replay),
        check!("records/create-id-conflict-409", create_id_conflict),
        check!(
            "records/create-body-author-disagreeing-invalid-body",
            create_other_author
        ),
        check!(
            "records/create-unknown-body-fields-ignored",
            create_unknown_fields
        ),
        check!("records/create-text-plain-415", create_text_plain),
        check!(
            "records/create-without-content-type-415",
            create_without_content_type
        ),
        check!("records/create-json-charset-accepted", create_json_charset),
        check!("records/create-invalid-json-400", create_invalid_json),
        check!("records/create-schema-violation", create_schema_violation),
        check!(
            "records/create-undeclared-content-key-schema-violation",
            create_undeclared_key
        ),
        check!(
            "records/create-null-for-optional-schema-violation",
            create_optional_null
        ),
        check!(
            "records/create-tag-over-100-characters-schema-violation",
            create_long_tag
        ),
        check!(
            "records/create-int-beyond-2-53-schema-violation",
            create_big_int
        ),
        check!(
            "records/create-non-nfc-string-schema-violation",
            create_non_nfc
        ),
        check!(
            "records/create-unknown-type-invalid-link",
            create_unknown_type
        ),
        check!(
            "records/create-dangling-record-link-invalid-link",
            create_dangling_link
        ),
        check!(
            "records/create-unknown-entity-invalid-link",
            create_unknown_entity
        ),
        check!(
            "records/create-wrong-version-hash-invalid-link",
            create_wrong_version
        ),
        check!(
            "records/create-resolvable-links-accepted",
            create_valid_links
        ),
        check!(
            "records/create-visible-in-list-at-once",
            create_visible_at_once
        ),
        check!("records/get-answers-record-and-linked-records", get_shape),
        check!("records/get-cache-control-no-cache", get_cache_control),
        check!("records/get-unknown-404", get_unknown),
        check!("records/accept-header-ignored", accept_ignored),
        check!("records/put-creates-new-version", put_new_version),
        check!("records/put-parent-defaults-to-latest", put_parent_default),
        check!(
            "records/put-stale-parent-version-conflict",
            put_stale_parent
        ),
        check!(
            "records/version-conflict-detail-names-latest-hash",
            conflict_detail
        ),
        check!("records/put-idempotent-replay", put_replay),
        check!(
            "records/put-keeps-id-created-at-and-received-at",
            put_keeps_record_fields
        ),
        check!(
            "records/put-permissions-default-to-parent",
            put_permissions_default
        ),
        check!("records/put-type-defaults-to-parent", put_type_default),
        check!(
            "records/put-version-created-at-kept",
            put_version_created_at
        ),
        check!(
            "records/put-without-content-missing-properties",
            put_without_content
        ),
        check!("records/put-unknown-record-404", put_unknown),
        check!("records/put-on-tombstone-410", put_on_tombstone),
        check!("records/put-body-id-disagreeing-invalid-body", put_other_id),
        check!(
            "records/version-received-at-strictly-increasing",
            received_at_increasing
        ),
        check!("records/post-with-id-and-parent-hash-updates", post_update),
        check!(
            "records/post-with-id-and-parent-hash-without-content-deletes",
            post_delete
        ),
        check!(
            "records/delete-without-body-answers-tombstone",
            delete_without_body
        ),
        check!(
            "records/delete-with-body-uses-given-version",
            delete_with_body
        ),
        check!("records/tombstone-has-no-content", tombstone_no_content),
        check!(
            "records/tombstone-links-list-content-links",
            tombstone_links
        ),
        check!(
            "records/tombstone-links-leave-out-envelope",
            tombstone_links_no_envelope
        ),
        check!("records/delete-idempotent-replay", delete_replay),
        check!("records/delete-on-tombstone-410", delete_on_tombstone),
        check!("records/delete-action-leave", delete_leave),
        check!("records/delete-action-local", delete_local),
        check!(
            "records/delete-unknown-action-invalid-body",
            delete_bad_action
        ),
        check!(
            "records/delete-stale-parent-version-conflict",
            delete_stale_parent
        ),
        check!("records/delete-unknown-record-404", delete_unknown),
        check!("records/get-tombstone-200", get_tombstone),
        check!("records/existential-cascade-deletes-dependant", cascade),
        check!(
            "records/existential-cascade-same-created-at",
            cascade_created_at
        ),
        check!("records/existential-cascade-recurses", cascade_recurses),
        check!("records/local-delete-does-not-cascade", local_no_cascade),
        check!(
            "records/concurrent-updates-same-parent-one-wins",
            concurrent_same_parent
        ),
        check!(
            "records/concurrent-updates-never-lose-an-update",
            concurrent_no_lost_update
        ),
    ]
}

/// A date a client gives, with all 7 digits.
const CLIENT_DATE: &str = "2024-02-19T15:20:51.3591234Z";

async fn post(ctx: &Ctx, body: &Value) -> Result<Response, String> {
    ctx.send(Call::post(ctx.records_url()?).json(body).signed(&ctx.full))
        .await
}

async fn put(ctx: &Ctx, id: &str, body: &Value) -> Result<Response, String> {
    ctx.send(Call::put(ctx.record_url(id)?).json(body).signed(&ctx.full))
        .await
}

async fn delete(ctx: &Ctx, id: &str, body: Option<&Value>) -> Result<Response, String> {
    let mut call = Call::delete(ctx.record_url(id)?);
    if let Some(body) = body {
        call = call.json(body);
    }
    ctx.send(call.signed(&ctx.full)).await
}

/// The `record` of a 200 write response.
fn written(response: &Response) -> Result<Value, String> {
    Ok(at(&expect::json(response, 200)?, "/record")?.clone())
}

/// A fresh note type and one record of it.
async fn fresh_note(ctx: &Ctx) -> Result<(Value, Value), String> {
    let ty = ctx.note_type().await?;
    let record = ctx.note(&ty, json!({"title": "first"})).await?;
    Ok((ty, record))
}

fn id_of(record: &Value) -> Result<&str, String> {
    str_at(record, "/id")
}

fn hash_of(record: &Value) -> Result<&str, String> {
    str_at(record, "/version/hash")
}

async fn create_answers_200(ctx: &Ctx) -> CheckResult {
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "t"}});
    expect::status(&post(ctx, &body).await?, 200)
}

async fn create_response_shape(ctx: &Ctx) -> CheckResult {
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "t"}});
    let created = expect::json(&post(ctx, &body).await?, 200)?;
    ensure!(created["record"].is_object(), "no record object: {created}");
    ensure!(
        created["linked_records"].is_array(),
        "no linked_records array: {created}"
    );
    Ok(())
}

async fn expect_create_problem(
    ctx: &Ctx,
    body: Value,
    problem: expect::Problem,
) -> Result<Value, String> {
    expect::problem_response(&post(ctx, &body).await?, problem)
}

async fn create_empty_object(ctx: &Ctx) -> CheckResult {
    expect_create_problem(ctx, json!({}), MISSING_PROPERTIES)
        .await
        .map(drop)
}

async fn create_without_content(ctx: &Ctx) -> CheckResult {
    let body = json!({"type": ctx.note_type().await?});
    expect_create_problem(ctx, body, MISSING_PROPERTIES)
        .await
        .map(drop)
}

async fn create_without_type(ctx: &Ctx) -> CheckResult {
    expect_create_problem(ctx, json!({"content": {"title": "t"}}), MISSING_PROPERTIES)
        .await
        .map(drop)
}

async fn create_permissions_default(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    ensure_eq!(record["permissions"], json!({}), "permissions");
    Ok(())
}

async fn create_permissions_as_given(ctx: &Ctx) -> CheckResult {
    let permissions = json!({"read": [ctx.entity_link()], "write": [ctx.entity_link()]});
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "t"}, "permissions": permissions});
    let record = written(&post(ctx, &body).await?)?;
    ensure_eq!(record["permissions"], permissions, "permissions");
    Ok(())
}

async fn create_source_self(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    ensure_eq!(record["source"], json!("self"), "source");
    Ok(())
}

async fn create_dates_format(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    for pointer in [
        "/created_at",
        "/received_at",
        "/version/created_at",
        "/version/received_at",
    ] {
        let date = str_at(&record, pointer)?;
        ensure!(
            is_record_date(date),
            "{pointer} {date:?} is not YYYY-MM-DDTHH:MM:SS.fffffffZ"
        );
    }
    Ok(())
}

async fn create_server_id(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let id = id_of(&record)?;
    ensure!(
        is_hex(id, 32),
        "id {id:?} is not 32 lowercase hex characters"
    );
    Ok(())
}

async fn create_version_hash(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let hash = hash_of(&record)?;
    ensure!(
        is_hex(hash, 64),
        "version.hash {hash:?} is not 64 lowercase hex characters"
    );
    Ok(())
}

async fn create_no_parent_hash(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    ensure!(
        record.pointer("/version/parent_hash").is_none(),
        "first version has a parent_hash: {record}"
    );
    Ok(())
}

async fn create_received_at(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    ensure_eq!(
        str_at(&record, "/received_at")?,
        str_at(&record, "/version/received_at")?,
        "received_at"
    );
    Ok(())
}

async fn create_server_created_at(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    for pointer in ["/created_at", "/version/created_at"] {
        let date = str_at(&record, pointer)?;
        ensure!(
            date.ends_with("0000Z"),
            "{pointer} {date:?} is finer than milliseconds"
        );
    }
    Ok(())
}

async fn create_client_created_at(ctx: &Ctx) -> CheckResult {
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "t"}, "created_at": CLIENT_DATE});
    let record = written(&post(ctx, &body).await?)?;
    ensure_eq!(str_at(&record, "/created_at")?, CLIENT_DATE, "created_at");
    Ok(())
}

async fn create_created_at_offset(ctx: &Ctx) -> CheckResult {
    let given = "2024-02-19T16:20:51.359123456+01:00";
    let body =
        json!({"type": ctx.note_type().await?, "content": {"title": "t"}, "created_at": given});
    let record = written(&post(ctx, &body).await?)?;
    ensure_eq!(str_at(&record, "/created_at")?, CLIENT_DATE, "created_at");
    Ok(())
}

async fn create_author(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    ensure_eq!(record["author"], ctx.entity_link(), "author");
    ensure_eq!(
        record["version"]["author"],
        ctx.entity_link(),
        "version.author"
    );
    Ok(())
}

async fn create_client_id(ctx: &Ctx) -> CheckResult {
    let id = record_id();
    let body = json!({"id": id, "type": ctx.note_type().await?, "content": {"title": "t"}});
    let record = written(&post(ctx, &body).await?)?;
    ensure_eq!(id_of(&record)?, id.as_str(), "id");
    expect::status(&ctx.get_record(&id).await?, 200)
}

async fn create_replay(ctx: &Ctx) -> CheckResult {
    let body = json!({"id": record_id(), "created_at": CLIENT_DATE, "type": ctx.note_type().await?, "content": {"title": "t"}});
    let first = written(&post(ctx, &body).await?)?;
    let second = written(&post(ctx, &body).await?).map_err(|error| format!("replay: {error}"))?;
    ensure_eq!(
        hash_of(&second)?,
        hash_of(&first)?,
        "version hash of the replay"
    );
    ensure_eq!(
        second["received_at"],
        first["received_at"],
        "received_at of the replay"
    );
    Ok(())
}

async fn create_id_conflict(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let id = record_id();
    let body =
        json!({"id": id, "created_at": CLIENT_DATE, "type": ty, "content": {"title": "one"}});
    written(&post(ctx, &body).await?)?;
    let other =
        json!({"id": id, "created_at": CLIENT_DATE, "type": ty, "content": {"title": "two"}});
    expect_create_problem(ctx, other, ID_CONFLICT)
        .await
        .map(drop)
}

async fn create_other_author(ctx: &Ctx) -> CheckResult {
    let body = json!({"author": {"entity": "someone-else.example"}, "type": ctx.note_type().await?, "content": {"title": "t"}});
    expect_create_problem(ctx, body, INVALID_BODY)
        .await
        .map(drop)
}

async fn create_unknown_fields(ctx: &Ctx) -> CheckResult {
    let body = json!({
        "type": ctx.note_type().await?,
        "content": {"title": "t"},
        "source": "elsewhere",
        "received_at": CLIENT_DATE,
        "version": {"author": ctx.entity_link()},
        "unknown_field": [1, 2, 3]
    });
    let record = written(&post(ctx, &body).await?)?;
    ensure_eq!(record["source"], json!("self"), "source");
    ensure!(
        record.get("unknown_field").is_none(),
        "the unknown field was stored: {record}"
    );
    Ok(())
}

async fn create_with_content_type(
    ctx: &Ctx,
    content_type: Option<&str>,
) -> Result<Response, String> {
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "t"}});
    let call = Call::post(ctx.records_url()?)
        .body(body.to_string().into_bytes(), content_type)
        .signed(&ctx.full);
    ctx.send(call).await
}

async fn create_text_plain(ctx: &Ctx) -> CheckResult {
    let response = create_with_content_type(ctx, Some("text/plain")).await?;
    expect::problem_response(&response, UNSUPPORTED_MEDIA_TYPE).map(drop)
}

async fn create_without_content_type(ctx: &Ctx) -> CheckResult {
    let response = create_with_content_type(ctx, None).await?;
    expect::problem_response(&response, UNSUPPORTED_MEDIA_TYPE).map(drop)
}

async fn create_json_charset(ctx: &Ctx) -> CheckResult {
    let response = create_with_content_type(ctx, Some("application/json; charset=utf-8")).await?;
    expect::status(&response, 200)
}

async fn create_invalid_json(ctx: &Ctx) -> CheckResult {
    let call = Call::post(ctx.records_url()?)
        .body(b"{\"type\": {".to_vec(), Some("application/json"))
        .signed(&ctx.full);
    expect::problem_response(&ctx.send(call).await?, INVALID_JSON).map(drop)
}

async fn expect_note_violation(ctx: &Ctx, content: Value) -> CheckResult {
    let body = json!({"type": ctx.note_type().await?, "content": content});
    expect_create_problem(ctx, body, SCHEMA_VIOLATION)
        .await
        .map(drop)
}

async fn create_schema_violation(ctx: &Ctx) -> CheckResult {
    expect_note_violation(ctx, json!({"title": 42})).await
}

async fn create_undeclared_key(ctx: &Ctx) -> CheckResult {
    expect_note_violation(ctx, json!({"title": "t", "undeclared": true})).await
}

async fn create_optional_null(ctx: &Ctx) -> CheckResult {
    expect_note_violation(ctx, json!({"title": "t", "count": null})).await
}

async fn create_long_tag(ctx: &Ctx) -> CheckResult {
    expect_note_violation(ctx, json!({"title": "t", "tags": ["x".repeat(101)]})).await
}

async fn create_big_int(ctx: &Ctx) -> CheckResult {
    expect_note_violation(
        ctx,
        json!({"title": "t", "count": 9_007_199_254_740_993_u64}),
    )
    .await
}

async fn create_non_nfc(ctx: &Ctx) -> CheckResult {
    // "e" followed by a combining acute accent: NFC is "é".
    expect_note_violation(ctx, json!({"title": "caf\u{0065}\u{0301}"})).await
}

/// Fails unless the answer is an invalid link whose detail names `path`.
fn ensure_invalid_link(response: &Response, path: &str) -> CheckResult {
    let problem = expect::problem_response(response, INVALID_LINK)?;
    let detail = problem["detail"].as_str().unwrap_or_default();
    ensure!(
        detail.contains(path),
        "detail {detail:?} does not name {path}"
    );
    Ok(())
}

async fn create_unknown_type(ctx: &Ctx) -> CheckResult {
    let ty =
        json!({"entity": ctx.entity(), "record_id": record_id(), "version_hash": "a".repeat(64)});
    let response = post(ctx, &json!({"type": ty, "content": {"title": "t"}})).await?;
    ensure_invalid_link(&response, "$['type']")
}

async fn create_dangling_link(ctx: &Ctx) -> CheckResult {
    let link = json!({"entity": ctx.entity(), "record_id": record_id()});
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "t", "ref": link}});
    ensure_invalid_link(&post(ctx, &body).await?, "$['content']['ref']")
}

async fn create_unknown_entity(ctx: &Ctx) -> CheckResult {
    let entity = format!("unknown-{}.example", &record_id()[..8]);
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "t", "person": {"entity": entity}}});
    ensure_invalid_link(&post(ctx, &body).await?, "$['content']['person']")
}

async fn create_wrong_version(ctx: &Ctx) -> CheckResult {
    let (ty, target) = fresh_note(ctx).await?;
    let mut link = version_link(&target)?;
    link["version_hash"] = json!("b".repeat(64));
    let body = json!({"type": ty, "content": {"title": "t", "pinned": link}});
    ensure_invalid_link(&post(ctx, &body).await?, "$['content']['pinned']")
}

async fn create_valid_links(ctx: &Ctx) -> CheckResult {
    let (ty, target) = fresh_note(ctx).await?;
    let content = json!({
        "title": "links",
        "ref": record_link(&target)?,
        "pinned": version_link(&target)?,
        "person": ctx.entity_link(),
        "tags": ["one", "two"],
        "label": "first"
    });
    let record = ctx.note(&ty, content.clone()).await?;
    ensure_eq!(record["content"], content, "content");
    Ok(())
}

async fn create_visible_at_once(ctx: &Ctx) -> CheckResult {
    let (ty, record) = fresh_note(ctx).await?;
    let page = ctx.list(&[("filter", &type_filter(&ty)?)]).await?;
    ensure_listed(&page, id_of(&record)?)
}

async fn get_shape(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let got = expect::json(&ctx.get_record(id_of(&record)?).await?, 200)?;
    ensure_eq!(got["record"], record, "record");
    ensure!(
        got["linked_records"].is_array(),
        "no linked_records array: {got}"
    );
    Ok(())
}

async fn get_cache_control(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let response = ctx.get_record(id_of(&record)?).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("cache-control"),
        Some("no-cache"),
        "Cache-Control"
    );
    Ok(())
}

async fn get_unknown(ctx: &Ctx) -> CheckResult {
    let response = ctx.get_record(&record_id()).await?;
    expect::problem_response(&response, RECORD_NOT_FOUND).map(drop)
}

async fn accept_ignored(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let call = Call::get(ctx.record_url(id_of(&record)?)?)
        .header("accept", "text/html")
        .signed(&ctx.full);
    let response = ctx.send(call).await?;
    expect::json(&response, 200)?;
    let content_type = response.header("content-type").unwrap_or_default();
    ensure!(
        content_type.starts_with("application/json"),
        "Content-Type {content_type:?}"
    );
    Ok(())
}

async fn put_new_version(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let updated = written(
        &put(
            ctx,
            id_of(&record)?,
            &json!({"content": {"title": "second"}}),
        )
        .await?,
    )?;
    ensure!(
        hash_of(&updated)? != hash_of(&record)?,
        "the new version has the old hash"
    );
    ensure_eq!(
        str_at(&updated, "/version/parent_hash")?,
        hash_of(&record)?,
        "version.parent_hash"
    );
    ensure_eq!(updated["content"], json!({"title": "second"}), "content");
    Ok(())
}

async fn put_parent_default(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let id = id_of(&record)?;
    let second = written(&put(ctx, id, &json!({"content": {"title": "2"}})).await?)?;
    let third = written(&put(ctx, id, &json!({"content": {"title": "3"}})).await?)?;
    ensure_eq!(
        str_at(&third, "/version/parent_hash")?,
        hash_of(&second)?,
        "version.parent_hash"
    );
    Ok(())
}

/// A record with two versions; returns it and its first version's hash.
async fn updated_note(ctx: &Ctx) -> Result<(Value, String), String> {
    let (_, record) = fresh_note(ctx).await?;
    let first = hash_of(&record)?.to_string();
    let updated = written(&put(ctx, id_of(&record)?, &json!({"content": {"title": "2"}})).await?)?;
    Ok((updated, first))
}

async fn put_stale_parent(ctx: &Ctx) -> CheckResult {
    let (record, first) = updated_note(ctx).await?;
    let body = json!({"content": {"title": "3"}, "version": {"parent_hash": first}});
    expect::problem_response(&put(ctx, id_of(&record)?, &body).await?, VERSION_CONFLICT).map(drop)
}

async fn conflict_detail(ctx: &Ctx) -> CheckResult {
    let (record, first) = updated_note(ctx).await?;
    let body = json!({"content": {"title": "3"}, "version": {"parent_hash": first}});
    let problem =
        expect::problem_response(&put(ctx, id_of(&record)?, &body).await?, VERSION_CONFLICT)?;
    let detail = problem["detail"].as_str().unwrap_or_default();
    ensure!(
        detail.contains(hash_of(&record)?),
        "detail {detail:?} does not name the latest hash"
    );
    Ok(())
}

async fn put_replay(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let id = id_of(&record)?;
    let body = json!({"content": {"title": "2"}, "version": {"parent_hash": hash_of(&record)?, "created_at": CLIENT_DATE}});
    let first = written(&put(ctx, id, &body).await?)?;
    let replay =
        written(&put(ctx, id, &body).await?).map_err(|error| format!("replay: {error}"))?;
    ensure_eq!(
        hash_of(&replay)?,
        hash_of(&first)?,
        "version hash of the replay"
    );
    Ok(())
}

async fn put_keeps_record_fields(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let updated = written(&put(ctx, id_of(&record)?, &json!({"content": {"title": "2"}})).await?)?;
    for field in ["id", "created_at", "received_at", "author", "source"] {
        ensure_eq!(updated[field], record[field], field);
    }
    ensure!(
        updated["version"]["received_at"] != record["received_at"],
        "version.received_at did not change"
    );
    Ok(())
}

async fn put_permissions_default(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .public_note(&ctx.note_type().await?, json!({"title": "1"}))
        .await?;
    let updated = written(&put(ctx, id_of(&record)?, &json!({"content": {"title": "2"}})).await?)?;
    ensure_eq!(
        updated["permissions"],
        json!({"read": "public"}),
        "permissions"
    );
    Ok(())
}

async fn put_type_default(ctx: &Ctx) -> CheckResult {
    let (ty, record) = fresh_note(ctx).await?;
    let updated = written(&put(ctx, id_of(&record)?, &json!({"content": {"title": "2"}})).await?)?;
    ensure_eq!(updated["type"], ty, "type");
    Ok(())
}

async fn put_version_created_at(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"content": {"title": "2"}, "version": {"created_at": CLIENT_DATE}});
    let updated = written(&put(ctx, id_of(&record)?, &body).await?)?;
    ensure_eq!(
        str_at(&updated, "/version/created_at")?,
        CLIENT_DATE,
        "version.created_at"
    );
    Ok(())
}

async fn put_without_content(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let response = put(
        ctx,
        id_of(&record)?,
        &json!({"version": {"parent_hash": hash_of(&record)?}}),
    )
    .await?;
    expect::problem_response(&response, UPDATE_MISSING_PROPERTIES).map(drop)
}

async fn put_unknown(ctx: &Ctx) -> CheckResult {
    let response = put(ctx, &record_id(), &json!({"content": {"title": "t"}})).await?;
    expect::problem_response(&response, RECORD_NOT_FOUND).map(drop)
}

/// A fresh record deleted with the default action; returns the tombstone.
async fn tombstone(ctx: &Ctx) -> Result<Value, String> {
    let (_, record) = fresh_note(ctx).await?;
    written(&delete(ctx, id_of(&record)?, None).await?)
}

async fn put_on_tombstone(ctx: &Ctx) -> CheckResult {
    let tombstone = tombstone(ctx).await?;
    let response = put(
        ctx,
        id_of(&tombstone)?,
        &json!({"content": {"title": "back"}}),
    )
    .await?;
    expect::problem_response(&response, DELETED).map(drop)
}

async fn put_other_id(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"id": record_id(), "content": {"title": "2"}});
    expect::problem_response(&put(ctx, id_of(&record)?, &body).await?, INVALID_BODY).map(drop)
}

async fn received_at_increasing(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let mut previous = str_at(&record, "/version/received_at")?.to_string();
    for title in ["2", "3", "4"] {
        let updated =
            written(&put(ctx, id_of(&record)?, &json!({"content": {"title": title}})).await?)?;
        let received = str_at(&updated, "/version/received_at")?.to_string();
        // Same-width UTC dates compare as text.
        ensure!(
            received > previous,
            "version.received_at {received} is not after {previous}"
        );
        previous = received;
    }
    Ok(())
}

async fn post_update(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"id": id_of(&record)?, "version": {"parent_hash": hash_of(&record)?}, "content": {"title": "by post"}});
    let updated = written(&post(ctx, &body).await?)?;
    ensure_eq!(updated["content"], json!({"title": "by post"}), "content");
    ensure_eq!(
        str_at(&updated, "/version/parent_hash")?,
        hash_of(&record)?,
        "version.parent_hash"
    );
    Ok(())
}

async fn post_delete(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"id": id_of(&record)?, "version": {"parent_hash": hash_of(&record)?}});
    let deleted = written(&post(ctx, &body).await?)?;
    ensure_eq!(
        deleted.pointer("/no_content/action"),
        Some(&json!("delete")),
        "no_content.action"
    );
    Ok(())
}

async fn delete_without_body(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let deleted = written(&delete(ctx, id_of(&record)?, None).await?)?;
    ensure_eq!(
        deleted.pointer("/no_content/action"),
        Some(&json!("delete")),
        "no_content.action"
    );
    ensure_eq!(
        str_at(&deleted, "/version/parent_hash")?,
        hash_of(&record)?,
        "version.parent_hash"
    );
    Ok(())
}

async fn delete_with_body(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"version": {"parent_hash": hash_of(&record)?, "created_at": CLIENT_DATE}});
    let deleted = written(&delete(ctx, id_of(&record)?, Some(&body)).await?)?;
    ensure_eq!(
        str_at(&deleted, "/version/created_at")?,
        CLIENT_DATE,
        "version.created_at"
    );
    ensure_eq!(
        str_at(&deleted, "/version/parent_hash")?,
        hash_of(&record)?,
        "version.parent_hash"
    );
    Ok(())
}

async fn tombstone_no_content(ctx: &Ctx) -> CheckResult {
    let tombstone = tombstone(ctx).await?;
    ensure!(
        tombstone.get("content").is_none(),
        "the tombstone has content: {tombstone}"
    );
    ensure!(
        tombstone["no_content"]["links"].is_array(),
        "no no_content.links array: {tombstone}"
    );
    Ok(())
}

/// A record with an entity, a record, a version and a tag link, deleted.
async fn tombstone_with_links(ctx: &Ctx) -> Result<(Value, Value), String> {
    let (ty, target) = fresh_note(ctx).await?;
    let content = json!({
        "title": "links",
        "person": ctx.entity_link(),
        "ref": record_link(&target)?,
        "pinned": version_link(&target)?,
        "tags": ["alpha"]
    });
    let record = ctx.note(&ty, content).await?;
    let tombstone = written(&delete(ctx, id_of(&record)?, None).await?)?;
    Ok((target, tombstone))
}

async fn tombstone_links(ctx: &Ctx) -> CheckResult {
    let (target, tombstone) = tombstone_with_links(ctx).await?;
    let links = expect::array_at(&tombstone, "/no_content/links")?;
    let expected = [
        json!({"path": "$['content']['person']", "type": "entity", "link": ctx.entity_link()}),
        json!({"path": "$['content']['ref']", "type": "record", "link": record_link(&target)?}),
        json!({"path": "$['content']['pinned']", "type": "version", "link": version_link(&target)?}),
        json!({"path": "$['content']['tags'][*]", "type": "tag", "link": "alpha"}),
    ];
    for link in &expected {
        ensure!(
            links.contains(link),
            "no_content.links lacks {link}: {}",
            expect::brief(&json!(links))
        );
    }
    Ok(())
}

async fn tombstone_links_no_envelope(ctx: &Ctx) -> CheckResult {
    let (_, tombstone) = tombstone_with_links(ctx).await?;
    for link in expect::array_at(&tombstone, "/no_content/links")? {
        let path = str_at(link, "/path")?;
        ensure!(
            path.starts_with("$['content']"),
            "no_content.links has an envelope link {link}"
        );
    }
    Ok(())
}

async fn delete_replay(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"version": {"parent_hash": hash_of(&record)?, "created_at": CLIENT_DATE}});
    let first = written(&delete(ctx, id_of(&record)?, Some(&body)).await?)?;
    let replay = written(&delete(ctx, id_of(&record)?, Some(&body)).await?)
        .map_err(|error| format!("replay: {error}"))?;
    ensure_eq!(
        hash_of(&replay)?,
        hash_of(&first)?,
        "version hash of the replay"
    );
    Ok(())
}

async fn delete_on_tombstone(ctx: &Ctx) -> CheckResult {
    let tombstone = tombstone(ctx).await?;
    expect::problem_response(&delete(ctx, id_of(&tombstone)?, None).await?, DELETED).map(drop)
}

async fn delete_with_action(ctx: &Ctx, action: &str) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"no_content": {"action": action}});
    let deleted = written(&delete(ctx, id_of(&record)?, Some(&body)).await?)?;
    ensure_eq!(
        deleted.pointer("/no_content/action"),
        Some(&json!(action)),
        "no_content.action"
    );
    Ok(())
}

async fn delete_leave(ctx: &Ctx) -> CheckResult {
    delete_with_action(ctx, "leave").await
}

async fn delete_local(ctx: &Ctx) -> CheckResult {
    delete_with_action(ctx, "local").await
}

async fn delete_bad_action(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let body = json!({"no_content": {"action": "shred"}});
    expect::problem_response(
        &delete(ctx, id_of(&record)?, Some(&body)).await?,
        INVALID_BODY,
    )
    .map(drop)
}

async fn delete_stale_parent(ctx: &Ctx) -> CheckResult {
    let (record, first) = updated_note(ctx).await?;
    let body = json!({"version": {"parent_hash": first}});
    expect::problem_response(
        &delete(ctx, id_of(&record)?, Some(&body)).await?,
        VERSION_CONFLICT,
    )
    .map(drop)
}

async fn delete_unknown(ctx: &Ctx) -> CheckResult {
    expect::problem_response(&delete(ctx, &record_id(), None).await?, RECORD_NOT_FOUND).map(drop)
}

async fn get_tombstone(ctx: &Ctx) -> CheckResult {
    let tombstone = tombstone(ctx).await?;
    let got = expect::json(&ctx.get_record(id_of(&tombstone)?).await?, 200)?;
    ensure_eq!(got["record"], tombstone, "record");
    Ok(())
}

/// A parent and a child whose `parent` existentially links it.
async fn parent_and_child(ctx: &Ctx) -> Result<(Value, Value), String> {
    let (ty, parent) = fresh_note(ctx).await?;
    let child = ctx
        .note(
            &ty,
            json!({"title": "child", "parent": record_link(&parent)?}),
        )
        .await?;
    Ok((parent, child))
}

async fn latest(ctx: &Ctx, id: &str) -> Result<Value, String> {
    Ok(at(&expect::json(&ctx.get_record(id).await?, 200)?, "/record")?.clone())
}

async fn cascade(ctx: &Ctx) -> CheckResult {
    let (parent, child) = parent_and_child(ctx).await?;
    written(&delete(ctx, id_of(&parent)?, None).await?)?;
    let child = latest(ctx, id_of(&child)?).await?;
    ensure_eq!(
        child.pointer("/no_content/action"),
        Some(&json!("delete")),
        "child's no_content.action"
    );
    Ok(())
}

async fn cascade_created_at(ctx: &Ctx) -> CheckResult {
    let (parent, child) = parent_and_child(ctx).await?;
    let body = json!({"version": {"created_at": CLIENT_DATE}});
    written(&delete(ctx, id_of(&parent)?, Some(&body)).await?)?;
    let child = latest(ctx, id_of(&child)?).await?;
    ensure_eq!(
        str_at(&child, "/version/created_at")?,
        CLIENT_DATE,
        "child's version.created_at"
    );
    Ok(())
}

async fn cascade_recurses(ctx: &Ctx) -> CheckResult {
    let (parent, child) = parent_and_child(ctx).await?;
    let ty = &child["type"];
    let grandchild = ctx
        .note(
            ty,
            json!({"title": "grandchild", "parent": record_link(&child)?}),
        )
        .await?;
    written(&delete(ctx, id_of(&parent)?, None).await?)?;
    let grandchild = latest(ctx, id_of(&grandchild)?).await?;
    ensure!(
        grandchild.get("no_content").is_some(),
        "the grandchild is still live: {grandchild}"
    );
    Ok(())
}

async fn local_no_cascade(ctx: &Ctx) -> CheckResult {
    let (parent, child) = parent_and_child(ctx).await?;
    let body = json!({"no_content": {"action": "local"}});
    written(&delete(ctx, id_of(&parent)?, Some(&body)).await?)?;
    let child = latest(ctx, id_of(&child)?).await?;
    ensure!(
        child.get("content").is_some(),
        "the child was deleted: {child}"
    );
    Ok(())
}

async fn concurrent_same_parent(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let (id, parent) = (id_of(&record)?, hash_of(&record)?);
    let bodies: Vec<Value> = (0..8)
        .map(|n| json!({"content": {"title": format!("racer {n}")}, "version": {"parent_hash": parent}}))
        .collect();
    let responses = join_all(bodies.iter().map(|body| put(ctx, id, body))).await;
    let mut won = 0;
    for response in responses {
        let response = response?;
        match response.status {
            200 => won += 1,
            _ => expect::problem_response(&response, VERSION_CONFLICT).map(drop)?,
        }
    }
    ensure_eq!(won, 1, "updates that succeeded");
    Ok(())
}

async fn concurrent_no_lost_update(ctx: &Ctx) -> CheckResult {
    let (_, record) = fresh_note(ctx).await?;
    let id = id_of(&record)?;
    let bodies: Vec<Value> = (0..8)
        .map(|n| json!({"content": {"title": format!("writer {n}")}}))
        .collect();
    let responses = join_all(bodies.iter().map(|body| put(ctx, id, body))).await;
    for response in responses {
        written(&response?)?;
    }
    let url = crate::context::with_query(
        ctx.record_url_with(id, &["versions"])?,
        &[("page_size", "200")],
    );
    let page = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
    let versions = expect::array_at(&page, "/records")?;
    ensure_eq!(versions.len(), 9, "number of versions");
    for pair in versions.windows(2) {
        ensure_eq!(
            str_at(&pair[1], "/version/parent_hash")?,
            hash_of(&pair[0])?,
            "chain of parent hashes"
        );
    }
    Ok(())
}
