//! `include_links` and `linked_records` (spec §4.0.8, PROTOCOL.md §7).

use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::{Call, record_id};
use crate::context::{Ctx, record_link, version_link, with_query};
use crate::expect::{self, at, ensure, ensure_eq, str_at};

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "links/default-includes-existential-targets",
            default_existential
        ),
        check!("links/existential-special-value", existential_value),
        check!(
            "links/entity-special-value-includes-entity-records",
            entity_value
        ),
        check!("links/own-entity-record-never-included", own_entity_never),
        check!("links/path-includes-record-link-target", path_record_link),
        check!(
            "links/record-link-target-is-latest-version",
            record_link_latest
        ),
        check!(
            "links/version-link-target-is-that-version",
            version_link_exact
        ),
        check!("links/empty-include-links-includes-none", empty_none),
        check!(
            "links/unknown-special-value-ignored",
            unknown_special_ignored
        ),
        check!("links/list-fills-linked-records", list_linked),
        check!("links/linked-records-deduplicated", deduplicated),
        check!("links/put-takes-include-links-from-query", put_query),
        check!("links/put-takes-include-links-from-body", put_body),
    ]
}

const REF: &str = "$['content']['ref']";

/// GET of one record with these `include_links` (none: the parameter is absent).
async fn get_linked(
    ctx: &Ctx,
    id: &str,
    include_links: Option<&str>,
) -> Result<Vec<Value>, String> {
    let mut url = ctx.record_url(id)?;
    if let Some(value) = include_links {
        url = with_query(url, &[("include_links", value)]);
    }
    let got = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
    Ok(expect::array_at(&got, "/linked_records")?.clone())
}

fn linked_ids(linked: &[Value]) -> Vec<&str> {
    linked
        .iter()
        .filter_map(|record| record["id"].as_str())
        .collect()
}

fn ensure_linked(linked: &[Value], record: &Value) -> CheckResult {
    let id = str_at(record, "/id")?;
    ensure!(
        linked_ids(linked).contains(&id),
        "linked_records {:?} lacks {id}",
        linked_ids(linked)
    );
    Ok(())
}

/// A target and a record linking it from `field`; returns (type, target, linker).
async fn linked_pair(ctx: &Ctx, field: &str) -> Result<(Value, Value, Value), String> {
    let ty = ctx.note_type().await?;
    let target = ctx.note(&ty, json!({"title": "target"})).await?;
    let link = if field == "pinned" {
        version_link(&target)?
    } else {
        record_link(&target)?
    };
    let linker = ctx
        .note(&ty, json!({"title": "linker", field: link}))
        .await?;
    Ok((ty, target, linker))
}

async fn default_existential(ctx: &Ctx) -> CheckResult {
    let (_, parent, child) = linked_pair(ctx, "parent").await?;
    ensure_linked(
        &get_linked(ctx, str_at(&child, "/id")?, None).await?,
        &parent,
    )
}

async fn existential_value(ctx: &Ctx) -> CheckResult {
    let (_, parent, child) = linked_pair(ctx, "parent").await?;
    ensure_linked(
        &get_linked(ctx, str_at(&child, "/id")?, Some("existential")).await?,
        &parent,
    )
}

/// An Entity record for a new entity, which makes that entity known here.
async fn friend_entity(ctx: &Ctx) -> Result<Value, String> {
    let name = format!("friend-{}.example", &record_id()[..10]);
    ctx.known_entity(&name, "Friend").await
}

async fn entity_value(ctx: &Ctx) -> CheckResult {
    let friend = friend_entity(ctx).await?;
    let person = json!({"entity": str_at(&friend, "/content/entity")?});
    let record = ctx
        .note(
            &ctx.note_type().await?,
            json!({"title": "t", "person": person}),
        )
        .await?;
    ensure_linked(
        &get_linked(ctx, str_at(&record, "/id")?, Some("entity")).await?,
        &friend,
    )
}

async fn own_entity_never(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .note(
            &ctx.note_type().await?,
            json!({"title": "t", "person": ctx.entity_link()}),
        )
        .await?;
    let linked = get_linked(ctx, str_at(&record, "/id")?, Some("entity")).await?;
    for linked in &linked {
        ensure!(
            linked.pointer("/content/entity").and_then(Value::as_str) != Some(ctx.entity()),
            "the user's own Entity record is in linked_records"
        );
    }
    Ok(())
}

async fn path_record_link(ctx: &Ctx) -> CheckResult {
    let (_, target, linker) = linked_pair(ctx, "ref").await?;
    ensure_linked(
        &get_linked(ctx, str_at(&linker, "/id")?, Some(REF)).await?,
        &target,
    )
}

/// The linked record with `id`.
fn find<'a>(linked: &'a [Value], id: &str) -> Result<&'a Value, String> {
    linked
        .iter()
        .find(|record| record["id"] == id)
        .ok_or_else(|| format!("linked_records lacks {id}"))
}

async fn record_link_latest(ctx: &Ctx) -> CheckResult {
    let (_, target, linker) = linked_pair(ctx, "ref").await?;
    let target_id = str_at(&target, "/id")?;
    let update = Call::put(ctx.record_url(target_id)?)
        .json(&json!({"content": {"title": "updated"}}))
        .signed(&ctx.full);
    let updated = at(&expect::json(&ctx.send(update).await?, 200)?, "/record")?.clone();
    let linked = get_linked(ctx, str_at(&linker, "/id")?, Some(REF)).await?;
    ensure_eq!(
        find(&linked, target_id)?["version"]["hash"],
        updated["version"]["hash"],
        "linked version"
    );
    Ok(())
}

async fn version_link_exact(ctx: &Ctx) -> CheckResult {
    let (_, target, linker) = linked_pair(ctx, "pinned").await?;
    let target_id = str_at(&target, "/id")?;
    let update = Call::put(ctx.record_url(target_id)?)
        .json(&json!({"content": {"title": "updated"}}))
        .signed(&ctx.full);
    expect::status(&ctx.send(update).await?, 200)?;
    let linked = get_linked(ctx, str_at(&linker, "/id")?, Some("$['content']['pinned']")).await?;
    ensure_eq!(
        find(&linked, target_id)?["version"]["hash"],
        target["version"]["hash"],
        "linked version"
    );
    Ok(())
}

async fn empty_none(ctx: &Ctx) -> CheckResult {
    let (_, _, child) = linked_pair(ctx, "parent").await?;
    let linked = get_linked(ctx, str_at(&child, "/id")?, Some("")).await?;
    ensure!(
        linked.is_empty(),
        "linked_records is not empty: {:?}",
        linked_ids(&linked)
    );
    Ok(())
}

async fn unknown_special_ignored(ctx: &Ctx) -> CheckResult {
    let (_, target, linker) = linked_pair(ctx, "ref").await?;
    let linked = get_linked(
        ctx,
        str_at(&linker, "/id")?,
        Some(&format!("standing,{REF}")),
    )
    .await?;
    ensure_linked(&linked, &target)
}

async fn list_with_links(ctx: &Ctx, ty: &Value) -> Result<Vec<Value>, String> {
    let filter = crate::context::type_filter(ty)?;
    let page = ctx
        .list(&[("filter", &filter), ("include_links", REF)])
        .await?;
    Ok(expect::array_at(&page, "/linked_records")?.clone())
}

async fn list_linked(ctx: &Ctx) -> CheckResult {
    let (ty, target, _) = linked_pair(ctx, "ref").await?;
    ensure_linked(&list_with_links(ctx, &ty).await?, &target)
}

async fn deduplicated(ctx: &Ctx) -> CheckResult {
    let (ty, target, _) = linked_pair(ctx, "ref").await?;
    ctx.note(
        &ty,
        json!({"title": "second linker", "ref": record_link(&target)?}),
    )
    .await?;
    let linked = list_with_links(ctx, &ty).await?;
    let id = str_at(&target, "/id")?;
    let count = linked_ids(&linked)
        .iter()
        .filter(|linked| **linked == id)
        .count();
    ensure_eq!(count, 1, "times the target is in linked_records");
    Ok(())
}

async fn put_linked(ctx: &Ctx, url: url::Url, body: Value) -> Result<Vec<Value>, String> {
    let response = ctx
        .send(Call::put(url).json(&body).signed(&ctx.full))
        .await?;
    Ok(expect::array_at(&expect::json(&response, 200)?, "/linked_records")?.clone())
}

async fn put_query(ctx: &Ctx) -> CheckResult {
    let (_, target, linker) = linked_pair(ctx, "ref").await?;
    let url = with_query(
        ctx.record_url(str_at(&linker, "/id")?)?,
        &[("include_links", REF)],
    );
    let body = json!({"content": {"title": "again", "ref": record_link(&target)?}});
    ensure_linked(&put_linked(ctx, url, body).await?, &target)
}

async fn put_body(ctx: &Ctx) -> CheckResult {
    let (_, target, linker) = linked_pair(ctx, "ref").await?;
    let url = ctx.record_url(str_at(&linker, "/id")?)?;
    let body = json!({"content": {"title": "again", "ref": record_link(&target)?}, "include_links": [REF]});
    ensure_linked(&put_linked(ctx, url, body).await?, &target)
}
