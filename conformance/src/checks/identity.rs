//! The user's server identity (issue 40): the fields of the user's own
//! Entity record that say who the entity is, which keys sign for it and
//! where its server is are the server's to keep. An app with every right
//! may change the record's `profile`, nothing else, and no request signed
//! as a server for an entity this server hosts is ever accepted.

use serde_json::{Value, json};
use url::Url;

use super::discovery::entity_record;
use super::{Check, CheckResult, check};
use crate::client::{Call, Response, nonce, now_ms};
use crate::context::Ctx;
use crate::expect::{self, FORBIDDEN, UNKNOWN_SERVER, ensure, ensure_eq, str_at};
use crate::server_signature::ServerKey;

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "identity/signing-keys-kept-by-the-server",
            signing_keys_kept
        ),
        check!("identity/servers-kept-by-the-server", servers_kept),
        check!("identity/entity-record-stays-public", stays_public),
        check!(
            "identity/second-entity-record-refused",
            second_entity_record_refused
        ),
        check!("identity/profile-changes", profile_changes),
        check!(
            "identity/server-signature-for-a-hosted-entity-refused",
            hosted_entity_signature_refused
        ),
    ]
}

/// The full app PUTs the user's Entity record with `edit` made to it.
async fn put_entity_record(
    ctx: &Ctx,
    edit: impl FnOnce(&mut Value),
) -> Result<(Value, Response), String> {
    let record = entity_record(ctx).await?;
    let mut body = json!({
        "content": record["content"].clone(),
        "permissions": record["permissions"].clone(),
        "version": {"parent_hash": str_at(&record, "/version/hash")?},
    });
    edit(&mut body);
    let url = ctx.record_url(str_at(&record, "/id")?)?;
    let response = ctx
        .send(Call::put(url).json(&body).signed(&ctx.full))
        .await?;
    Ok((record, response))
}

/// `edit` is refused with `auth/403-forbidden` naming `field`, and the
/// record discovery serves is the one before.
async fn refused(ctx: &Ctx, field: &str, edit: impl FnOnce(&mut Value)) -> CheckResult {
    let (before, response) = put_entity_record(ctx, edit).await?;
    let problem = expect::problem_response(&response, FORBIDDEN)?;
    let detail = problem["detail"].as_str().unwrap_or_default();
    ensure!(
        detail.contains(&format!("`{field}`")),
        "the 403's detail does not name `{field}`: {detail:?}"
    );
    let after = entity_record(ctx).await?;
    ensure_eq!(
        str_at(&after, "/version/hash")?,
        str_at(&before, "/version/hash")?,
        "the Entity record discovery serves"
    );
    Ok(())
}

/// The app adds a key of its own: were it stored, the app could sign as
/// the user's server.
async fn signing_keys_kept(ctx: &Ctx) -> CheckResult {
    let key = ServerKey::generate(ctx.entity());
    refused(ctx, "signing_keys", |body| {
        let added = json!({"algorithm": "ed25519", "public_key": key.public_key()});
        match body["content"]["signing_keys"].as_array_mut() {
            Some(keys) => keys.push(added),
            None => body["content"]["signing_keys"] = json!([added]),
        }
    })
    .await
}

/// The app points the user's notifications elsewhere.
async fn servers_kept(ctx: &Ctx) -> CheckResult {
    refused(ctx, "servers", |body| {
        body["content"]["servers"][0]["endpoints"]["new_notification"] =
            json!("https://attacker.example/notifications");
    })
    .await
}

/// The app makes the record discovery serves private.
async fn stays_public(ctx: &Ctx) -> CheckResult {
    let entity = ctx.entity_link();
    refused(ctx, "permissions", |body| {
        body["permissions"] = json!({"read": [entity]});
    })
    .await
}

/// A second Entity record describing the user, with the app's key.
async fn second_entity_record_refused(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    let key = ServerKey::generate(ctx.entity());
    let mut content = record["content"].clone();
    content["signing_keys"] = json!([{"algorithm": "ed25519", "public_key": key.public_key()}]);
    let body = json!({
        "type": record["type"].clone(),
        "permissions": {"read": "public"},
        "content": content,
    });
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await?;
    expect::problem_response(&response, FORBIDDEN).map(drop)
}

/// What the app may change: the profile. The name is put back after.
async fn profile_changes(ctx: &Ctx) -> CheckResult {
    let (before, response) = put_entity_record(ctx, |body| {
        body["content"]["profile"]["name"] = json!("Renamed by an app");
    })
    .await?;
    let renamed = expect::json(&response, 200)?;
    ensure_eq!(
        renamed.pointer("/record/content/profile/name"),
        Some(&json!("Renamed by an app")),
        "the new profile name"
    );
    ensure_eq!(
        renamed.pointer("/record/content/signing_keys"),
        before.pointer("/content/signing_keys"),
        "signing_keys"
    );
    let (_, restored) = put_entity_record(ctx, |body| {
        body["content"]["profile"] = before["content"]["profile"].clone();
    })
    .await?;
    expect::json(&restored, 200).map(drop)
}

/// The takeover the review found, end to end: an app adds its key to the
/// user's Entity record (refused), then signs as the user's server to read
/// the user's records. Refused whatever the record lists.
async fn hosted_entity_signature_refused(ctx: &Ctx) -> CheckResult {
    let key = ServerKey::generate(ctx.entity());
    let (_, added) = put_entity_record(ctx, |body| {
        let added = json!({"algorithm": "ed25519", "public_key": key.public_key()});
        match body["content"]["signing_keys"].as_array_mut() {
            Some(keys) => keys.push(added),
            None => body["content"]["signing_keys"] = json!([added]),
        }
    })
    .await?;
    ensure!(
        added.status != 200,
        "the app added its own key to the user's signing_keys (200)"
    );
    let url: Url = ctx.records_url()?;
    let authorization = key.authorization("GET", &url, &[], now_ms(), &nonce());
    let response = ctx
        .http
        .without_retries()
        .send(&Call::get(url).authorization(authorization))
        .await?;
    expect::problem_response(&response, UNKNOWN_SERVER).map(drop)
}
