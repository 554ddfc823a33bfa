//! What an app's grant lets it read and write (PROTOCOL.md §10).

use serde_json::{Value, json};

use reqwest::Method;

use super::discovery::{entity_record, root};
use super::{Check, CheckResult, check};
use crate::client::{Call, Response};
use crate::context::{Ctx, ids, type_filter, with_query};
use crate::expect::{self, FORBIDDEN, RECORD_NOT_FOUND, at, ensure, ensure_eq, str_at};
use crate::signer::AppKey;

pub fn checks() -> Vec<Check> {
    vec![
        check!("scopes/reads-read-grant-type", reads_read_type),
        check!("scopes/reads-write-grant-type", reads_write_type),
        check!("scopes/writes-write-grant-type", writes_write_type),
        check!("scopes/create-read-only-type-403", create_read_only_403),
        check!("scopes/create-ungranted-type-403", create_ungranted_403),
        check!("scopes/update-read-only-type-403", update_read_only_403),
        check!("scopes/update-ungranted-type-404", update_ungranted_404),
        check!("scopes/delete-ungranted-type-404", delete_ungranted_404),
        check!("scopes/leave-on-read-only-type-allowed", leave_read_only),
        check!(
            "scopes/local-delete-of-readable-record-outside-grant-403",
            local_delete_outside_grant_403
        ),
        check!(
            "scopes/own-entity-record-never-deleted",
            own_entity_record_never_deleted
        ),
        check!(
            "scopes/own-entity-record-keeps-describing-the-user",
            own_entity_record_keeps_entity
        ),
        check!("scopes/list-leaves-out-ungranted-types", list_leaves_out),
        check!("scopes/get-ungranted-type-404", get_ungranted_404),
        check!("scopes/sees-public-records-of-any-type", sees_public),
        check!("scopes/sees-entity-records", sees_entity_records),
        check!("scopes/sees-type-records", sees_type_records),
        check!("scopes/sees-own-app-record", sees_own_app_record),
        check!(
            "scopes/credentials-never-returned",
            credentials_never_returned
        ),
    ]
}

async fn read_type(ctx: &Ctx) -> Result<Value, String> {
    Ok(ctx.scoped_types().await?.read.clone())
}

async fn write_type(ctx: &Ctx) -> Result<Value, String> {
    Ok(ctx.scoped_types().await?.write.clone())
}

/// A record of `ty` written by the full app.
async fn full_record(ctx: &Ctx, ty: &Value) -> Result<String, String> {
    let record = ctx.note(ty, json!({"title": "by the full app"})).await?;
    str_at(&record, "/id").map(str::to_string)
}

async fn scoped_get(ctx: &Ctx, id: &str) -> Result<Response, String> {
    ctx.send(Call::get(ctx.record_url(id)?).signed(&ctx.scoped))
        .await
}

async fn scoped_create(ctx: &Ctx, ty: &Value) -> Result<Response, String> {
    let body = json!({"type": ty, "content": {"title": "by the scoped app"}});
    ctx.send(
        Call::post(ctx.records_url()?)
            .json(&body)
            .signed(&ctx.scoped),
    )
    .await
}

async fn scoped_put(ctx: &Ctx, id: &str) -> Result<Response, String> {
    let body = json!({"content": {"title": "changed by the scoped app"}});
    ctx.send(
        Call::put(ctx.record_url(id)?)
            .json(&body)
            .signed(&ctx.scoped),
    )
    .await
}

async fn reads_read_type(ctx: &Ctx) -> CheckResult {
    let id = full_record(ctx, &read_type(ctx).await?).await?;
    expect::status(&scoped_get(ctx, &id).await?, 200)
}

async fn reads_write_type(ctx: &Ctx) -> CheckResult {
    let id = full_record(ctx, &write_type(ctx).await?).await?;
    expect::status(&scoped_get(ctx, &id).await?, 200)
}

async fn writes_write_type(ctx: &Ctx) -> CheckResult {
    let ty = write_type(ctx).await?;
    let created = expect::json(&scoped_create(ctx, &ty).await?, 200)?;
    let id = str_at(&created, "/record/id")?;
    let updated = scoped_put(ctx, id).await?;
    expect::status(&updated, 200).map_err(|error| format!("update: {error}"))
}

async fn create_read_only_403(ctx: &Ctx) -> CheckResult {
    let response = scoped_create(ctx, &read_type(ctx).await?).await?;
    expect::problem_response(&response, FORBIDDEN).map(drop)
}

async fn create_ungranted_403(ctx: &Ctx) -> CheckResult {
    let response = scoped_create(ctx, &ctx.note_type().await?).await?;
    expect::problem_response(&response, FORBIDDEN).map(drop)
}

async fn update_read_only_403(ctx: &Ctx) -> CheckResult {
    let id = full_record(ctx, &read_type(ctx).await?).await?;
    expect::problem_response(&scoped_put(ctx, &id).await?, FORBIDDEN).map(drop)
}

async fn update_ungranted_404(ctx: &Ctx) -> CheckResult {
    let id = full_record(ctx, &ctx.note_type().await?).await?;
    expect::problem_response(&scoped_put(ctx, &id).await?, RECORD_NOT_FOUND).map(drop)
}

async fn delete_ungranted_404(ctx: &Ctx) -> CheckResult {
    let id = full_record(ctx, &ctx.note_type().await?).await?;
    let response = ctx
        .send(Call::delete(ctx.record_url(&id)?).signed(&ctx.scoped))
        .await?;
    expect::problem_response(&response, RECORD_NOT_FOUND).map(drop)
}

async fn leave_read_only(ctx: &Ctx) -> CheckResult {
    let id = full_record(ctx, &read_type(ctx).await?).await?;
    let body = json!({"no_content": {"action": "leave"}});
    let call = Call::delete(ctx.record_url(&id)?)
        .json(&body)
        .signed(&ctx.scoped);
    let left = expect::json(&ctx.send(call).await?, 200)?;
    ensure_eq!(
        left.pointer("/record/no_content/action"),
        Some(&json!("leave")),
        "no_content.action"
    );
    Ok(())
}

/// `DELETE` of a record with a `no_content.action`, signed by `app`.
async fn delete_with(ctx: &Ctx, app: &AppKey, id: &str, action: &str) -> Result<Response, String> {
    let body = json!({"no_content": {"action": action}});
    ctx.send(Call::delete(ctx.record_url(id)?).json(&body).signed(app))
        .await
}

/// `local` and `leave` need the app's read grant for the record's type
/// (PROTOCOL.md §5): that every app may read public records does not make
/// them its to delete.
async fn local_delete_outside_grant_403(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .public_note(&ctx.note_type().await?, json!({"title": "public"}))
        .await?;
    let id = str_at(&record, "/id")?;
    for action in ["local", "leave"] {
        let response = delete_with(ctx, &ctx.scoped, id, action).await?;
        expect::problem_response(&response, FORBIDDEN).map_err(|e| format!("{action}: {e}"))?;
    }
    let kept = expect::json(&ctx.get_record(id).await?, 200)?;
    ensure!(
        kept.pointer("/record/content").is_some(),
        "the record was deleted: {}",
        expect::brief(&kept)
    );
    Ok(())
}

/// Discovery serves the user's own Entity record: no app deletes it, with
/// any action, whatever its grant.
async fn own_entity_record_never_deleted(ctx: &Ctx) -> CheckResult {
    let entity_record = entity_record(ctx).await?;
    let id = str_at(&entity_record, "/id")?;
    for (app, name) in [(&ctx.scoped, "scoped"), (&ctx.full, "full")] {
        for action in ["local", "leave", "delete"] {
            let response = delete_with(ctx, app, id, action).await?;
            expect::problem_response(&response, FORBIDDEN)
                .map_err(|e| format!("the {name} app's `{action}`: {e}"))?;
        }
    }
    expect::status(&root(ctx, Method::HEAD).await?, 204).map_err(|e| format!("HEAD /: {e}"))
}

/// An update of the user's own Entity record may change the profile, not
/// make the record describe someone else.
async fn own_entity_record_keeps_entity(ctx: &Ctx) -> CheckResult {
    let entity_record = entity_record(ctx).await?;
    let id = str_at(&entity_record, "/id")?;
    let mut content = at(&entity_record, "/content")?.clone();
    content["entity"] = json!("someone-else.example");
    let call = Call::put(ctx.record_url(id)?)
        .json(&json!({"content": content}))
        .signed(&ctx.full);
    expect::problem_response(&ctx.send(call).await?, FORBIDDEN)?;
    expect::status(&root(ctx, Method::HEAD).await?, 204).map_err(|e| format!("HEAD /: {e}"))
}

async fn list_leaves_out(ctx: &Ctx) -> CheckResult {
    let granted = full_record(ctx, &read_type(ctx).await?).await?;
    let other = full_record(ctx, &ctx.note_type().await?).await?;
    let one = format!("$['id']=\"{granted}\"");
    let two = format!("$['id']=\"{other}\"");
    let url = with_query(ctx.records_url()?, &[("filter", &one), ("filter", &two)]);
    let page = expect::json(&ctx.send(Call::get(url).signed(&ctx.scoped)).await?, 200)?;
    ensure_eq!(ids(&page)?, vec![granted], "records the scoped app lists");
    Ok(())
}

async fn get_ungranted_404(ctx: &Ctx) -> CheckResult {
    let id = full_record(ctx, &ctx.note_type().await?).await?;
    expect::problem_response(&scoped_get(ctx, &id).await?, RECORD_NOT_FOUND).map(drop)
}

async fn sees_public(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .public_note(&ctx.note_type().await?, json!({"title": "public"}))
        .await?;
    expect::status(&scoped_get(ctx, str_at(&record, "/id")?).await?, 200)
}

async fn sees_entity_records(ctx: &Ctx) -> CheckResult {
    let filter = type_filter(&ctx.builtin_type("entity").await?)?;
    let everything = ids(&ctx
        .list(&[("filter", &filter), ("page_size", "200")])
        .await?)?;
    ensure!(
        !everything.is_empty(),
        "the full app lists no Entity record"
    );
    let url = with_query(
        ctx.records_url()?,
        &[("filter", &filter), ("page_size", "200")],
    );
    let scoped = ids(&expect::json(
        &ctx.send(Call::get(url).signed(&ctx.scoped)).await?,
        200,
    )?)?;
    ensure_eq!(scoped, everything, "Entity records the scoped app lists");
    Ok(())
}

async fn sees_type_records(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    expect::status(&scoped_get(ctx, str_at(&ty, "/record_id")?).await?, 200)
}

async fn sees_own_app_record(ctx: &Ctx) -> CheckResult {
    expect::status(&scoped_get(ctx, &ctx.scoped.app_id).await?, 200)
}

async fn credentials_never_returned(ctx: &Ctx) -> CheckResult {
    let filter = type_filter(&ctx.builtin_type("credentials").await?)?;
    let listed = ids(&ctx
        .list(&[("filter", &filter), ("include_deleted", "true")])
        .await?)?;
    ensure!(listed.is_empty(), "Credentials records listed: {listed:?}");
    Ok(())
}
