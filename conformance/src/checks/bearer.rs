//! Bearer tokens: `?bearer=` grants GET of one resource until its expiry
//! (spec §5.3, PROTOCOL.md §10).

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use url::Url;

use super::{Check, CheckResult, check};
use crate::client::{Call, host_and_port, now_ms, path_and_query, record_id};
use crate::context::{BlobRecord, Ctx, with_query};
use crate::expect::{
    self, INVALID_SIGNATURE, MISSING_AUTHORIZATION, STALE_TIMESTAMP, UNKNOWN_APP, ensure,
};
use crate::signer::{AppKey, BearerToken, SVC};
use crate::sse::EventStream;

pub fn checks() -> Vec<Check> {
    vec![
        check!("auth/bearer-standard-base64-grants-get", bearer_standard),
        check!("auth/bearer-url-safe-unpadded-grants-get", bearer_url_safe),
        check!("auth/bearer-grants-record-get", bearer_record_get),
        check!("auth/bearer-signs-remaining-query", bearer_with_query),
        check!("auth/bearer-path-only-signature-accepted", bearer_path_only),
        check!("auth/bearer-expired-stale-timestamp", bearer_expired),
        check!(
            "auth/bearer-other-path-invalid-signature",
            bearer_other_path
        ),
        check!("auth/bearer-over-90-days-rejected", bearer_too_long),
        check!("auth/bearer-unknown-app-401", bearer_unknown_app),
        check!("auth/bearer-ignored-on-non-get", bearer_ignored_on_post),
        check!(
            "auth/bearer-event-stream-ends-at-expiry",
            bearer_stream_ends_at_expiry
        ),
    ]
}

/// A token for `signed_url` (without `bearer`), expiring `lifetime_ms` from now.
fn bearer(key: &AppKey, signed_url: &Url, lifetime_ms: i64) -> BearerToken {
    let (host, port) = host_and_port(signed_url);
    key.bearer_token(
        SVC,
        now_ms() + lifetime_ms,
        path_and_query(signed_url),
        &host,
        port,
    )
}

fn with_bearer(url: &Url, token: &str) -> Url {
    with_query(url.clone(), &[("bearer", token)])
}

async fn private_blob(ctx: &Ctx) -> Result<(BlobRecord, Url), String> {
    let blob = ctx.blob_record("photo.jpg", "image/jpeg", false).await?;
    let url = ctx.blob_record_url(&blob)?;
    Ok((blob, url))
}

async fn bearer_standard(ctx: &Ctx) -> CheckResult {
    let (blob, url) = private_blob(ctx).await?;
    let token = bearer(&ctx.full, &url, 600_000).standard();
    let response = ctx.send(Call::get(with_bearer(&url, &token))).await?;
    expect::status(&response, 200)?;
    ensure!(response.body == blob.data, "the blob's bytes differ");
    Ok(())
}

async fn bearer_url_safe(ctx: &Ctx) -> CheckResult {
    let (_, url) = private_blob(ctx).await?;
    let token = bearer(&ctx.full, &url, 600_000).url_safe_unpadded();
    expect::status(&ctx.send(Call::get(with_bearer(&url, &token))).await?, 200)
}

async fn bearer_record_get(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .note(&ctx.note_type().await?, json!({"title": "bearer"}))
        .await?;
    let url = ctx.record_url(expect::str_at(&record, "/id")?)?;
    let token = bearer(&ctx.full, &url, 600_000).standard();
    expect::status(&ctx.send(Call::get(with_bearer(&url, &token))).await?, 200)
}

async fn bearer_with_query(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .note(&ctx.note_type().await?, json!({"title": "bearer"}))
        .await?;
    let url = with_query(
        ctx.record_url(expect::str_at(&record, "/id")?)?,
        &[("include_links", "entity")],
    );
    let token = bearer(&ctx.full, &url, 600_000).standard();
    expect::status(&ctx.send(Call::get(with_bearer(&url, &token))).await?, 200)
}

async fn bearer_path_only(ctx: &Ctx) -> CheckResult {
    let record = ctx
        .note(&ctx.note_type().await?, json!({"title": "bearer"}))
        .await?;
    let path = ctx.record_url(expect::str_at(&record, "/id")?)?;
    let token = bearer(&ctx.full, &path, 600_000).url_safe_unpadded();
    let url = with_query(path, &[("include_links", "entity"), ("bearer", &token)]);
    expect::status(&ctx.send(Call::get(url)).await?, 200)
}

async fn bearer_expired(ctx: &Ctx) -> CheckResult {
    let (_, url) = private_blob(ctx).await?;
    let token = bearer(&ctx.full, &url, -60_000).standard();
    let response = ctx.send(Call::get(with_bearer(&url, &token))).await?;
    expect::problem_response(&response, STALE_TIMESTAMP).map(drop)
}

async fn bearer_other_path(ctx: &Ctx) -> CheckResult {
    let (blob, url) = private_blob(ctx).await?;
    let token = bearer(&ctx.full, &url, 600_000).standard();
    let other = ctx.record_url(&blob.id)?;
    let response = ctx.send(Call::get(with_bearer(&other, &token))).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}

async fn bearer_too_long(ctx: &Ctx) -> CheckResult {
    let (_, url) = private_blob(ctx).await?;
    let token = bearer(&ctx.full, &url, 91 * 24 * 3600 * 1000).standard();
    let response = ctx.send(Call::get(with_bearer(&url, &token))).await?;
    expect::problem_response(&response, STALE_TIMESTAMP).map(drop)
}

async fn bearer_unknown_app(ctx: &Ctx) -> CheckResult {
    let (_, url) = private_blob(ctx).await?;
    let key = AppKey::from_seed(&record_id(), &record_id(), rand::random());
    let token = bearer(&key, &url, 600_000).standard();
    let response = ctx.send(Call::get(with_bearer(&url, &token))).await?;
    expect::problem_response(&response, UNKNOWN_APP).map(drop)
}

async fn bearer_ignored_on_post(ctx: &Ctx) -> CheckResult {
    let url = ctx.records_url()?;
    let token = bearer(&ctx.full, &url, 600_000).standard();
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "bearer"}});
    let response = ctx
        .send(Call::post(with_bearer(&url, &token)).json(&body))
        .await?;
    expect::problem_response(&response, MISSING_AUTHORIZATION).map(drop)
}

/// How late after its token's expiry a bearer stream may end: the time
/// its end takes to reach the client, and a loaded machine's timers.
const STREAM_END_SLACK: Duration = Duration::from_secs(1);

/// An event stream opened with a bearer token lasts until the token
/// expires and no longer: it is open a moment before the expiry and ends
/// within [`STREAM_END_SLACK`] after it, whatever the heartbeat interval.
async fn bearer_stream_ends_at_expiry(ctx: &Ctx) -> CheckResult {
    const LIFETIME: Duration = Duration::from_secs(3);
    let url = ctx.events_url()?;
    let lifetime_ms = i64::try_from(LIFETIME.as_millis()).unwrap_or(i64::MAX);
    let token = bearer(&ctx.full, &url, lifetime_ms).standard();
    let opened = Instant::now();
    let response = ctx.http.open(&Call::get(with_bearer(&url, &token))).await?;
    ensure!(
        response.status().as_u16() == 200,
        "events with a bearer token: status {}",
        response.status()
    );
    let mut stream = EventStream::new(response);
    let expires = opened + LIFETIME;
    let latest_end = expires + STREAM_END_SLACK;
    loop {
        let left = latest_end.saturating_duration_since(Instant::now());
        match stream.next_event(left).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(format!(
                    "the stream is still open {} ms after its token expired",
                    STREAM_END_SLACK.as_millis()
                ));
            }
            Err(_closed) => break,
        }
    }
    let ended = opened.elapsed();
    ensure!(
        ended + Duration::from_millis(500) >= LIFETIME,
        "the stream ended {} ms after it opened, before its token expired ({} ms)",
        ended.as_millis(),
        LIFETIME.as_millis()
    );
    ensure!(
        ended <= LIFETIME + STREAM_END_SLACK,
        "the stream ended {} ms after its token expired",
        ended.saturating_sub(LIFETIME).as_millis()
    );
    Ok(())
}
