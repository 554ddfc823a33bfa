//! A record's versions (PROTOCOL.md §7, extension listed in the Entity record).

use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::{Call, record_id};
use crate::context::{Ctx, with_query};
use crate::expect::{self, RECORD_NOT_FOUND, at, ensure, ensure_eq, str_at};

pub fn checks() -> Vec<Check> {
    vec![
        check!("versions/list-oldest-first", list_oldest_first),
        check!("versions/list-shape", list_shape),
        check!("versions/list-pages-with-next-page", list_pages),
        check!("versions/list-includes-tombstone", list_includes_tombstone),
        check!("versions/get-one-version", get_one),
        check!("versions/unknown-hash-404", unknown_hash),
        check!("versions/unknown-record-404", unknown_record),
        check!(
            "versions/each-version-under-its-own-permissions",
            each_version_own_permissions
        ),
    ]
}

/// A record with three versions; returns its id and their hashes, oldest first.
async fn three_versions(ctx: &Ctx) -> Result<(String, Vec<String>), String> {
    let record = ctx
        .note(&ctx.note_type().await?, json!({"title": "v1"}))
        .await?;
    let id = str_at(&record, "/id")?.to_string();
    let mut hashes = vec![str_at(&record, "/version/hash")?.to_string()];
    for title in ["v2", "v3"] {
        let call = Call::put(ctx.record_url(&id)?)
            .json(&json!({"content": {"title": title}}))
            .signed(&ctx.full);
        let updated = expect::json(&ctx.send(call).await?, 200)?;
        hashes.push(str_at(&updated, "/record/version/hash")?.to_string());
    }
    Ok((id, hashes))
}

async fn versions_page(ctx: &Ctx, id: &str, parameters: &[(&str, &str)]) -> Result<Value, String> {
    let url = with_query(ctx.record_url_with(id, &["versions"])?, parameters);
    expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)
}

fn hashes(page: &Value) -> Result<Vec<String>, String> {
    expect::array_at(page, "/records")?
        .iter()
        .map(|record| str_at(record, "/version/hash").map(str::to_string))
        .collect()
}

async fn list_oldest_first(ctx: &Ctx) -> CheckResult {
    let (id, expected) = three_versions(ctx).await?;
    ensure_eq!(
        hashes(&versions_page(ctx, &id, &[]).await?)?,
        expected,
        "versions"
    );
    Ok(())
}

async fn list_shape(ctx: &Ctx) -> CheckResult {
    let (id, _) = three_versions(ctx).await?;
    let page = versions_page(ctx, &id, &[("page_size", "5")]).await?;
    ensure!(
        page["linked_records"].is_array(),
        "no linked_records array: {}",
        expect::brief(&page)
    );
    ensure_eq!(page["page_size"], json!(5), "page_size");
    ensure!(
        page.get("next_page").is_none(),
        "next_page on the only page"
    );
    Ok(())
}

async fn list_pages(ctx: &Ctx) -> CheckResult {
    let (id, expected) = three_versions(ctx).await?;
    let base = ctx.record_url_with(&id, &["versions"])?;
    let mut page = versions_page(ctx, &id, &[("page_size", "1")]).await?;
    let mut all = hashes(&page)?;
    while let Some(next) = page["next_page"].as_str() {
        ensure!(all.len() < 10, "next_page never ends");
        let url = url::Url::parse(&format!("{base}{next}"))
            .map_err(|error| format!("versions URL + next_page: {error}"))?;
        page = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
        all.extend(hashes(&page)?);
    }
    ensure_eq!(all, expected, "versions over pages of 1");
    Ok(())
}

async fn list_includes_tombstone(ctx: &Ctx) -> CheckResult {
    let (id, _) = three_versions(ctx).await?;
    let deleted = expect::json(
        &ctx.send(Call::delete(ctx.record_url(&id)?).signed(&ctx.full))
            .await?,
        200,
    )?;
    let page = versions_page(ctx, &id, &[]).await?;
    let records = expect::array_at(&page, "/records")?;
    ensure_eq!(records.len(), 4, "versions");
    ensure_eq!(
        records.last().map(|last| &last["version"]["hash"]),
        Some(&deleted["record"]["version"]["hash"]),
        "last version"
    );
    Ok(())
}

async fn get_one(ctx: &Ctx) -> CheckResult {
    let (id, hashes) = three_versions(ctx).await?;
    let url = ctx.record_url_with(&id, &["versions", &hashes[0]])?;
    let got = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
    let record = at(&got, "/record")?;
    ensure_eq!(
        str_at(record, "/version/hash")?,
        hashes[0].as_str(),
        "version.hash"
    );
    ensure_eq!(record["content"], json!({"title": "v1"}), "content");
    ensure!(got["linked_records"].is_array(), "no linked_records array");
    Ok(())
}

async fn unknown_hash(ctx: &Ctx) -> CheckResult {
    let (id, _) = three_versions(ctx).await?;
    let url = ctx.record_url_with(&id, &["versions", &"c".repeat(64)])?;
    expect::problem_response(
        &ctx.send(Call::get(url).signed(&ctx.full)).await?,
        RECORD_NOT_FOUND,
    )
    .map(drop)
}

async fn unknown_record(ctx: &Ctx) -> CheckResult {
    let url = ctx.record_url_with(&record_id(), &["versions"])?;
    expect::problem_response(
        &ctx.send(Call::get(url).signed(&ctx.full)).await?,
        RECORD_NOT_FOUND,
    )
    .map(drop)
}

/// A record written private and then made public: its list of versions
/// shows an anonymous reader the public version only, as reading the
/// private one by its hash answers not found.
async fn each_version_own_permissions(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .note(&ctx.note_type().await?, json!({"title": "private draft"}))
        .await?;
    let id = str_at(&record, "/id")?;
    let private = str_at(&record, "/version/hash")?;
    let body = json!({"content": {"title": "published"}, "permissions": {"read": "public"}});
    let call = Call::put(ctx.record_url(id)?).json(&body).signed(&ctx.full);
    let published = expect::json(&ctx.send(call).await?, 200)?;
    let public = str_at(&published, "/record/version/hash")?;

    let url = ctx.record_url_with(id, &["versions"])?;
    let anonymous = expect::json(&ctx.send(Call::get(url)).await?, 200)?;
    ensure_eq!(
        hashes(&anonymous)?,
        vec![public.to_string()],
        "versions anyone sees"
    );
    let owner = versions_page(ctx, id, &[]).await?;
    ensure_eq!(
        hashes(&owner)?,
        vec![private.to_string(), public.to_string()],
        "versions the owner sees"
    );
    let one = ctx.record_url_with(id, &["versions", private])?;
    expect::problem_response(&ctx.send(Call::get(one)).await?, RECORD_NOT_FOUND).map(drop)
}
