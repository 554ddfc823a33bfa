//! Who may read a record (PROTOCOL.md §4, §10, §11).

use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::Call;
use crate::context::{Ctx, ids, with_query};
use crate::expect::{self, RECORD_NOT_FOUND, ensure, ensure_eq, str_at};

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "permissions/private-record-anonymous-get-404",
            private_get_404
        ),
        check!(
            "permissions/private-record-absent-from-anonymous-list",
            private_not_listed
        ),
        check!(
            "permissions/private-versions-anonymous-404",
            private_versions_404
        ),
        check!(
            "permissions/public-record-anonymous-get-200",
            public_get_200
        ),
        check!("permissions/public-record-in-anonymous-list", public_listed),
        check!("permissions/app-record-private", app_record_private),
        check!("permissions/own-app-record-readable", own_app_record),
    ]
}

async fn anonymous_list(ctx: &Ctx, id: &str) -> Result<Vec<String>, String> {
    let filter = format!("$['id']=\"{id}\"");
    let url = with_query(ctx.records_url()?, &[("filter", &filter)]);
    ids(&expect::json(&ctx.send(Call::get(url)).await?, 200)?)
}

async fn private_note(ctx: &Ctx) -> Result<Value, String> {
    ctx.note(&ctx.note_type().await?, json!({"title": "private"}))
        .await
}

async fn public_note(ctx: &Ctx) -> Result<Value, String> {
    ctx.public_note(&ctx.note_type().await?, json!({"title": "public"}))
        .await
}

async fn private_get_404(ctx: &Ctx) -> CheckResult {
    let record = private_note(ctx).await?;
    let response = ctx
        .send(Call::get(ctx.record_url(str_at(&record, "/id")?)?))
        .await?;
    expect::problem_response(&response, RECORD_NOT_FOUND).map(drop)
}

async fn private_not_listed(ctx: &Ctx) -> CheckResult {
    let record = private_note(ctx).await?;
    let listed = anonymous_list(ctx, str_at(&record, "/id")?).await?;
    ensure!(
        listed.is_empty(),
        "the private record is listed anonymously"
    );
    Ok(())
}

async fn private_versions_404(ctx: &Ctx) -> CheckResult {
    let record = private_note(ctx).await?;
    let url = ctx.record_url_with(str_at(&record, "/id")?, &["versions"])?;
    expect::problem_response(&ctx.send(Call::get(url)).await?, RECORD_NOT_FOUND).map(drop)
}

async fn public_get_200(ctx: &Ctx) -> CheckResult {
    let record = public_note(ctx).await?;
    let response = ctx
        .send(Call::get(ctx.record_url(str_at(&record, "/id")?)?))
        .await?;
    ensure_eq!(expect::json(&response, 200)?["record"], record, "record");
    Ok(())
}

async fn public_listed(ctx: &Ctx) -> CheckResult {
    let record = public_note(ctx).await?;
    let id = str_at(&record, "/id")?;
    ensure_eq!(
        anonymous_list(ctx, id).await?,
        vec![id.to_string()],
        "records"
    );
    Ok(())
}

async fn app_record_private(ctx: &Ctx) -> CheckResult {
    let response = ctx
        .send(Call::get(ctx.record_url(&ctx.full.app_id)?))
        .await?;
    expect::problem_response(&response, RECORD_NOT_FOUND).map(drop)
}

async fn own_app_record(ctx: &Ctx) -> CheckResult {
    let response = ctx.get_record(&ctx.full.app_id).await?;
    let got = expect::json(&response, 200)?;
    ensure_eq!(got["record"]["id"], json!(ctx.full.app_id), "id");
    Ok(())
}
