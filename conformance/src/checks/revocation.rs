//! Revocation, and the records an app may never write (PROTOCOL.md §10):
//! deleting an App Authorization revokes its app at once; no grant lets an
//! app write App Authorization or Credentials records, or an App record
//! other than its own.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Check, CheckResult, Needs, check};
use crate::apps::{NewApp, ScopeItem, authorize, register, scope_type};
use crate::client::{Call, Response, record_id};
use crate::context::Ctx;
use crate::expect::{self, FORBIDDEN, UNKNOWN_APP, ensure_eq};
use crate::signer::AppKey;
use crate::sse::EventStream;

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "revocation/deleting-authorization-revokes-at-once",
            deleting_revokes,
            Needs::Password
        ),
        check!(
            "revocation/deleting-authorization-ends-its-event-streams",
            revoking_ends_streams,
            Needs::Password
        ),
        check!(
            "revocation/app-cannot-write-authorization-records",
            cannot_write_authorizations,
            Needs::Password
        ),
        check!(
            "revocation/app-cannot-write-credentials-records",
            cannot_write_credentials,
            Needs::Password
        ),
        check!(
            "revocation/app-cannot-write-another-apps-app-record",
            cannot_write_other_app,
            Needs::Password
        ),
        check!(
            "revocation/app-can-write-its-own-app-record",
            can_write_own_app,
            Needs::Password
        ),
    ]
}

/// An app authorized with `write` (hence read) on the built-in type `name`,
/// and read on a fresh type; returns it with its key.
async fn granted_builtin(ctx: &Ctx, name: &str) -> Result<(NewApp, AppKey), String> {
    let (ty, _) = scope_type(ctx, "conformance_revocation").await?;
    let scope = [
        ScopeItem::of("read", &ty)?,
        ScopeItem::of("write", &ctx.builtin_type(name).await?)?,
    ];
    let app = NewApp::fresh();
    let key = authorize(ctx, &app, &scope, &scope).await?;
    Ok((app, key))
}

/// A cheap signed request that answers 200 while `key` is authorized.
async fn probe(ctx: &Ctx, key: &AppKey) -> Result<Response, String> {
    ctx.send(Call::get(ctx.records_url()?).signed(key)).await
}

async fn ensure_still_authorized(ctx: &Ctx, key: &AppKey) -> CheckResult {
    expect::status(&probe(ctx, key).await?, 200)
        .map_err(|error| format!("the app's own authorization afterwards: {error}"))
}

/// An event stream opened under an authorization ends when it is deleted:
/// a revoked app hears nothing more.
async fn revoking_ends_streams(ctx: &Ctx) -> CheckResult {
    let (ty, _) = scope_type(ctx, "conformance_revoked_stream").await?;
    let scope = [
        ScopeItem::of("read", &ty)?,
        ScopeItem::of("subscribe", &ty)?,
    ];
    let app = NewApp::fresh();
    let key = authorize(ctx, &app, &scope, &scope).await?;
    let response = ctx
        .http
        .open(&Call::get(ctx.events_url()?).signed(&key))
        .await?;
    ensure_eq!(response.status().as_u16(), 200, "events status");
    let mut stream = EventStream::new(response);
    let delete = Call::delete(ctx.record_url(&key.authorization_id)?).signed(&ctx.full);
    expect::status(&ctx.send(delete).await?, 200)
        .map_err(|error| format!("the full app deleting the authorization: {error}"))?;
    let deadline = Instant::now() + STREAM_END_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match stream.next_event(left).await {
            // Heartbeats, and no record: nothing of the type was written.
            Ok(Some(event)) if !event.is_record() => {}
            Ok(Some(event)) => {
                return Err(format!("a revoked app's stream sent {}", event.data));
            }
            Ok(None) => {
                return Err(format!(
                    "the stream was still open {} s after its authorization was deleted",
                    STREAM_END_WAIT.as_secs()
                ));
            }
            Err(_) => return Ok(()),
        }
    }
}

/// How long a revoked app's stream may take to end.
const STREAM_END_WAIT: Duration = Duration::from_secs(10);

async fn deleting_revokes(ctx: &Ctx) -> CheckResult {
    let (ty, _) = scope_type(ctx, "conformance_revoked").await?;
    let scope = [ScopeItem::of("read", &ty)?];
    let app = NewApp::fresh();
    let key = authorize(ctx, &app, &scope, &scope).await?;
    expect::status(&probe(ctx, &key).await?, 200)
        .map_err(|error| format!("before revocation: {error}"))?;
    let delete = Call::delete(ctx.record_url(&key.authorization_id)?).signed(&ctx.full);
    expect::status(&ctx.send(delete).await?, 200)
        .map_err(|error| format!("the full app deleting the authorization: {error}"))?;
    expect::problem_response(&probe(ctx, &key).await?, UNKNOWN_APP)
        .map_err(|error| format!("the first request after revocation: {error}"))?;
    let own = Call::get(ctx.record_url(app.id())?).signed(&key);
    expect::problem_response(&ctx.send(own).await?, UNKNOWN_APP)
        .map_err(|error| format!("reading its own App record after revocation: {error}"))?;
    Ok(())
}

async fn cannot_write_authorizations(ctx: &Ctx) -> CheckResult {
    let (app, key) = granted_builtin(ctx, "app_authorization").await?;
    let (wanted, _) = scope_type(ctx, "conformance_wanted").await?;
    let wider = json!({
        "app": {"entity": ctx.entity(), "record_id": app.id()},
        "scope_grant": {"read": [{"entity": ctx.entity(), "record_id": wanted["record_id"]}],
                        "write": [{"entity": ctx.entity(), "record_id": wanted["record_id"]}]}
    });
    let create = json!({"type": ctx.builtin_type("app_authorization").await?, "content": wider});
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&create).signed(&key))
        .await?;
    expect::problem_response(&response, FORBIDDEN)
        .map_err(|error| format!("creating an App Authorization: {error}"))?;
    let update = Call::put(ctx.record_url(&key.authorization_id)?)
        .json(&json!({"content": wider}))
        .signed(&key);
    expect::problem_response(&ctx.send(update).await?, FORBIDDEN)
        .map_err(|error| format!("widening its own App Authorization: {error}"))?;
    let delete = Call::delete(ctx.record_url(&key.authorization_id)?).signed(&key);
    expect::problem_response(&ctx.send(delete).await?, FORBIDDEN)
        .map_err(|error| format!("deleting its own App Authorization: {error}"))?;
    ensure_still_authorized(ctx, &key).await
}

async fn cannot_write_credentials(ctx: &Ctx) -> CheckResult {
    let (app, key) = granted_builtin(ctx, "credentials").await?;
    let other = AppKey::generate(app.id());
    let body = json!({
        "type": ctx.builtin_type("credentials").await?,
        "content": {
            "app": {"entity": ctx.entity(), "record_id": app.id()},
            "algorithm": "ed25519",
            "app_public_key": other.public_key(),
            "server_public_key": other.public_key(),
            "server_private_key": other.public_key(),
        }
    });
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&body).signed(&key))
        .await?;
    expect::problem_response(&response, FORBIDDEN)
        .map_err(|error| format!("creating a Credentials record: {error}"))?;
    ensure_still_authorized(ctx, &key).await
}

/// An App record's content with a new description.
fn redescribed(record: &Value, description: &str) -> Value {
    let mut content = record["content"].clone();
    content["description"] = json!(description);
    json!({"content": content})
}

async fn cannot_write_other_app(ctx: &Ctx) -> CheckResult {
    let (_, key) = granted_builtin(ctx, "app").await?;
    let other = NewApp::fresh();
    let registered = register(ctx, &other, &[]).await?;
    let update = Call::put(ctx.record_url(other.id())?)
        .json(&redescribed(&registered.record, "Changed by another app."))
        .signed(&key);
    expect::problem_response(&ctx.send(update).await?, FORBIDDEN)
        .map_err(|error| format!("updating another app's App record: {error}"))?;
    let stored = expect::json(&ctx.get_record(other.id()).await?, 200)?;
    ensure_eq!(
        stored.pointer("/record/version/hash"),
        registered.record.pointer("/version/hash"),
        "the other app's App record afterwards"
    );
    let mut body = other.body(ctx, &[]).await?;
    body["id"] = json!(record_id());
    let create = Call::post(ctx.records_url()?).json(&body).signed(&key);
    expect::problem_response(&ctx.send(create).await?, FORBIDDEN)
        .map_err(|error| format!("creating an App record of its own making: {error}"))?;
    Ok(())
}

async fn can_write_own_app(ctx: &Ctx) -> CheckResult {
    let (app, key) = granted_builtin(ctx, "app").await?;
    let current = expect::json(&ctx.get_record(app.id()).await?, 200)?;
    let record = expect::at(&current, "/record")?;
    let update = Call::put(ctx.record_url(app.id())?)
        .json(&redescribed(record, "Changed by the app itself."))
        .signed(&key);
    let updated = expect::json(&ctx.send(update).await?, 200)
        .map_err(|error| format!("updating its own App record: {error}"))?;
    ensure_eq!(
        updated.pointer("/record/content/description"),
        Some(&json!("Changed by the app itself.")),
        "its App record's description"
    );
    Ok(())
}
