//! Updating and deleting records: new versions, optimistic concurrency,
//! tombstones, deletion actions and existential cascades (spec §3, §4.3–4.4,
//! PROTOCOL.md §5).

use futures_util::future::join_all;
use serde_json::{Value, json};

use super::records::{CLIENT_DATE, delete, fresh_note, hash_of, id_of, post, put, written};
use super::{Check, CheckResult, check};
use crate::client::{Call, record_id};
use crate::context::{Ctx, record_link, version_link};
use crate::expect::{
    self, DELETED, INVALID_BODY, RECORD_NOT_FOUND, UPDATE_MISSING_PROPERTIES, VERSION_CONFLICT, at,
    ensure, ensure_eq, str_at,
};

pub fn checks() -> Vec<Check> {
    vec![
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
