//! Creating, reading, updating and deleting records (spec §3, §4.2–4.4,
//! PROTOCOL.md §2–§5).

use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::{Call, Response, record_id};
use crate::context::{Ctx, ensure_listed, record_link, type_filter, version_link};
use crate::expect::{
    self, ID_CONFLICT, INVALID_BODY, INVALID_JSON, INVALID_LINK, MISSING_PROPERTIES,
    RECORD_NOT_FOUND, SCHEMA_VIOLATION, UNSUPPORTED_MEDIA_TYPE, at, ensure, ensure_eq, is_hex,
    is_record_date, str_at,
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
    ]
}

/// A date a client gives, with all 7 digits.
pub(super) const CLIENT_DATE: &str = "2024-02-19T15:20:51.3591234Z";

pub(super) async fn post(ctx: &Ctx, body: &Value) -> Result<Response, String> {
    ctx.send(Call::post(ctx.records_url()?).json(body).signed(&ctx.full))
        .await
}

pub(super) async fn put(ctx: &Ctx, id: &str, body: &Value) -> Result<Response, String> {
    ctx.send(Call::put(ctx.record_url(id)?).json(body).signed(&ctx.full))
        .await
}

pub(super) async fn delete(ctx: &Ctx, id: &str, body: Option<&Value>) -> Result<Response, String> {
    let mut call = Call::delete(ctx.record_url(id)?);
    if let Some(body) = body {
        call = call.json(body);
    }
    ctx.send(call.signed(&ctx.full)).await
}

/// The `record` of a 200 write response.
pub(super) fn written(response: &Response) -> Result<Value, String> {
    Ok(at(&expect::json(response, 200)?, "/record")?.clone())
}

/// A fresh note type and one record of it.
pub(super) async fn fresh_note(ctx: &Ctx) -> Result<(Value, Value), String> {
    let ty = ctx.note_type().await?;
    let record = ctx.note(&ty, json!({"title": "first"})).await?;
    Ok((ty, record))
}

pub(super) fn id_of(record: &Value) -> Result<&str, String> {
    str_at(record, "/id")
}

pub(super) fn hash_of(record: &Value) -> Result<&str, String> {
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

/// A link to an entity whose name resolves to nothing is
/// `record/400-invalid-link` (not `503 link_unreachable`: the name does
/// not exist, which is not a server that cannot be reached now).
async fn create_unknown_entity(ctx: &Ctx) -> CheckResult {
    ctx.network_up().await?;
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
