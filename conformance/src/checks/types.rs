//! Type records, schemas and the built-in types (spec §2.4, PROTOCOL.md §6).

use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::Call;
use crate::context::Ctx;
use crate::expect::{
    self, FORBIDDEN, INVALID_SCHEMA, SCHEMA_VIOLATION, at, ensure, ensure_eq, str_at,
};

pub fn checks() -> Vec<Check> {
    vec![
        check!("types/type-record-public-by-default", public_by_default),
        check!("types/type-record-readable-unsigned", readable_unsigned),
        check!("types/type-record-non-public-schema-violation", non_public),
        check!("types/invalid-schema-400", invalid_schema),
        check!(
            "types/invalid-schema-detail-names-path",
            invalid_schema_detail
        ),
        check!(
            "types/schema-with-unknown-property-invalid",
            unknown_schema_property
        ),
        check!("types/union-of-one-schema-invalid", union_of_one),
        check!("types/recursive-ref-accepted", recursive_ref),
        check!(
            "types/content-not-in-schema-must-be-empty",
            content_not_in_schema
        ),
        check!("types/real-type-post-accepted", real_post),
        check!("types/real-type-message-accepted", real_message),
        check!("types/real-type-conversation-accepted", real_conversation),
        check!("types/real-type-file-accepted", real_file),
        check!("types/real-type-folder-accepted", real_folder),
        check!("types/real-type-task-accepted", real_task),
        check!("types/real-type-task-record-validates", real_task_record),
        check!("types/builtin-types-listed", builtins_listed),
        check!("types/builtin-types-source-resolution", builtins_source),
        check!(
            "types/builtin-types-authored-by-system-entity",
            builtins_author
        ),
        check!("types/builtin-types-public", builtins_public),
        check!("types/builtin-type-not-writable", builtin_not_writable),
    ]
}

const BUILTIN_NAMES: [&str; 5] = ["type", "entity", "app", "app_authorization", "credentials"];
const SYSTEM_ENTITY: &str = "system.folio.dev";

async fn post_type(
    ctx: &Ctx,
    content: Value,
    permissions: Option<Value>,
) -> Result<crate::client::Response, String> {
    let mut body = json!({"type": ctx.builtin_type("type").await?, "content": content});
    if let Some(permissions) = permissions {
        body["permissions"] = permissions;
    }
    ctx.send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await
}

fn schema_of(content: Value) -> Value {
    json!({"type": "object", "properties": {"content": content}})
}

async fn created_type(ctx: &Ctx) -> Result<Value, String> {
    let content =
        json!({"name": "plain", "schema": schema_of(json!({"type": "object", "properties": {}}))});
    Ok(at(
        &expect::json(&post_type(ctx, content, None).await?, 200)?,
        "/record",
    )?
    .clone())
}

async fn public_by_default(ctx: &Ctx) -> CheckResult {
    let record = created_type(ctx).await?;
    ensure_eq!(
        record["permissions"],
        json!({"read": "public"}),
        "permissions"
    );
    Ok(())
}

async fn readable_unsigned(ctx: &Ctx) -> CheckResult {
    let record = created_type(ctx).await?;
    let response = ctx
        .send(Call::get(ctx.record_url(str_at(&record, "/id")?)?))
        .await?;
    expect::status(&response, 200)
}

async fn non_public(ctx: &Ctx) -> CheckResult {
    let content = json!({"name": "private", "schema": schema_of(json!({"type": "object", "properties": {}}))});
    let response = post_type(ctx, content, Some(json!({"read": [ctx.entity_link()]}))).await?;
    expect::problem_response(&response, SCHEMA_VIOLATION).map(drop)
}

async fn expect_invalid_schema(ctx: &Ctx, content_schema: Value) -> Result<Value, String> {
    let content = json!({"name": "broken", "schema": schema_of(content_schema)});
    expect::problem_response(&post_type(ctx, content, None).await?, INVALID_SCHEMA)
}

async fn invalid_schema(ctx: &Ctx) -> CheckResult {
    expect_invalid_schema(ctx, json!({"type": "strnig"}))
        .await
        .map(drop)
}

async fn invalid_schema_detail(ctx: &Ctx) -> CheckResult {
    let bad = json!({"type": "object", "properties": {"title": {"type": "strnig"}}});
    let problem = expect_invalid_schema(ctx, bad).await?;
    let detail = problem["detail"].as_str().unwrap_or_default();
    ensure!(
        detail.contains('$') && detail.contains("title"),
        "detail {detail:?} names no JSON path to the fault"
    );
    Ok(())
}

async fn unknown_schema_property(ctx: &Ctx) -> CheckResult {
    expect_invalid_schema(ctx, json!({"type": "string", "colour": "blue"}))
        .await
        .map(drop)
}

async fn union_of_one(ctx: &Ctx) -> CheckResult {
    expect_invalid_schema(
        ctx,
        json!({"type": "union", "schemas": [{"type": "string"}]}),
    )
    .await
    .map(drop)
}

async fn recursive_ref(ctx: &Ctx) -> CheckResult {
    let schema = json!({
        "type": "object",
        "definitions": {"node": {"type": "object", "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"type": "ref", "ref": "node"}}
        }}},
        "properties": {"content": {"type": "ref", "ref": "node"}}
    });
    let ty = ctx.new_type(schema).await?;
    let content = json!({"label": "root", "children": [{"label": "leaf", "children": []}]});
    ctx.note(&ty, content).await.map(drop)
}

async fn content_not_in_schema(ctx: &Ctx) -> CheckResult {
    let ty = ctx
        .new_type(json!({"type": "object", "properties": {}}))
        .await?;
    ctx.note(&ty, json!({}))
        .await
        .map_err(|error| format!("empty content: {error}"))?;
    let body = json!({"type": ty, "content": {"anything": 1}});
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await?;
    expect::problem_response(&response, SCHEMA_VIOLATION).map(drop)
}

fn real_type(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|error| format!("real type file: {error}"))
}

macro_rules! real_type_text {
    ($file:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/real-types/",
            $file
        ))
    };
}

async fn accept_real_type(ctx: &Ctx, text: &str) -> Result<Value, String> {
    let response = post_type(ctx, real_type(text)?, None).await?;
    let record = at(&expect::json(&response, 200)?, "/record")?.clone();
    crate::context::version_link(&record)
}

async fn real_post(ctx: &Ctx) -> CheckResult {
    accept_real_type(ctx, real_type_text!("post.json"))
        .await
        .map(drop)
}

async fn real_message(ctx: &Ctx) -> CheckResult {
    accept_real_type(ctx, real_type_text!("message.json"))
        .await
        .map(drop)
}

async fn real_conversation(ctx: &Ctx) -> CheckResult {
    accept_real_type(ctx, real_type_text!("conversation.json"))
        .await
        .map(drop)
}

async fn real_file(ctx: &Ctx) -> CheckResult {
    accept_real_type(ctx, real_type_text!("file.json"))
        .await
        .map(drop)
}

async fn real_folder(ctx: &Ctx) -> CheckResult {
    accept_real_type(ctx, real_type_text!("folder.json"))
        .await
        .map(drop)
}

async fn real_task(ctx: &Ctx) -> CheckResult {
    accept_real_type(ctx, real_type_text!("task.json"))
        .await
        .map(drop)
}

async fn real_task_record(ctx: &Ctx) -> CheckResult {
    let ty = accept_real_type(ctx, real_type_text!("task.json")).await?;
    ctx.note(&ty, json!({"title": "Buy milk", "completed": false}))
        .await
        .map(drop)
}

async fn builtins_listed(ctx: &Ctx) -> CheckResult {
    let builtins = ctx.builtins().await?;
    for name in BUILTIN_NAMES {
        ensure!(
            builtins.by_name.contains_key(name),
            "no built-in type named {name:?}"
        );
    }
    Ok(())
}

async fn each_builtin(ctx: &Ctx, check: impl Fn(&str, &Value) -> CheckResult) -> CheckResult {
    let builtins = ctx.builtins().await?;
    for name in BUILTIN_NAMES {
        let record = builtins
            .by_name
            .get(name)
            .ok_or_else(|| format!("no built-in type {name:?}"))?;
        check(name, record)?;
    }
    Ok(())
}

async fn builtins_source(ctx: &Ctx) -> CheckResult {
    each_builtin(ctx, |name, record| {
        ensure_eq!(
            record["source"],
            json!("resolution"),
            format!("source of {name}")
        );
        Ok(())
    })
    .await
}

async fn builtins_author(ctx: &Ctx) -> CheckResult {
    each_builtin(ctx, |name, record| {
        ensure_eq!(
            record["author"],
            json!({"entity": SYSTEM_ENTITY}),
            format!("author of {name}")
        );
        Ok(())
    })
    .await
}

async fn builtins_public(ctx: &Ctx) -> CheckResult {
    each_builtin(ctx, |name, record| {
        ensure_eq!(
            record["permissions"],
            json!({"read": "public"}),
            format!("permissions of {name}")
        );
        Ok(())
    })
    .await
}

async fn builtin_not_writable(ctx: &Ctx) -> CheckResult {
    let builtins = ctx.builtins().await?;
    let app_type = builtins
        .by_name
        .get("app")
        .ok_or("no built-in type named \"app\"")?;
    let url = ctx.record_url_at(SYSTEM_ENTITY, str_at(app_type, "/id")?)?;
    let body = json!({"content": app_type["content"].clone(), "version": {"parent_hash": str_at(app_type, "/version/hash")?}});
    let response = ctx
        .send(Call::put(url).json(&body).signed(&ctx.full))
        .await?;
    expect::problem_response(&response, FORBIDDEN).map(drop)
}
