//! Rate limits (PROTOCOL.md §13), and those on registration and on failed
//! sign-ins (PROTOCOL.md §10). These run last: they empty the buckets, and
//! failed sign-ins may shut the consent page to this address for a while.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;

use super::{Check, CheckResult, check};
use crate::apps::{NewApp, PUBLIC_KEY_HEADER, consent_url, register, registration};
use crate::browser::{Browser, csrf, html};
use crate::client::{Call, Http, Response, record_id, retry_after};
use crate::context::Ctx;
use crate::expect::{self, RATE_LIMITED, ensure};

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "rate-limits/unauthenticated-reads-429-with-retry-after",
            unauthenticated_reads
        ),
        check!(
            "rate-limits/writes-past-burst-429-with-retry-after",
            writes_past_burst
        ),
        check!(
            "rate-limits/registrations-past-burst-429-with-retry-after",
            registrations_past_burst
        ),
        check!(
            "rate-limits/sign-in-failures-429-with-retry-after",
            sign_in_failures
        ),
    ]
}

/// Sends every call at once without retrying; fails unless some answer is
/// a rate-limit problem with a `Retry-After`.
async fn ensure_some_limited(http: &Http, calls: Vec<Call<'_>>) -> CheckResult {
    let sent = calls.len();
    let responses: Vec<Result<Response, String>> =
        join_all(calls.iter().map(|call| http.send(call))).await;
    let limited: Vec<&Response> = responses
        .iter()
        .filter_map(|response| response.as_ref().ok())
        .filter(|response| response.status == 429)
        .collect();
    let first = limited.first().ok_or_else(|| {
        let errors = responses
            .iter()
            .filter(|response| response.is_err())
            .count();
        format!("none of {sent} requests sent at once was rate limited ({errors} failed to send)")
    })?;
    expect::problem_response(first, RATE_LIMITED)?;
    ensure!(
        retry_after(&first.headers).is_some(),
        "429 without a Retry-After in seconds: {:?}",
        first.header("retry-after")
    );
    Ok(())
}

async fn unauthenticated_reads(ctx: &Ctx) -> CheckResult {
    let (per_second, burst) = ctx
        .rate_limit("unauthenticated_reads_per_address", (300, 300))
        .await?;
    let count = usize::try_from(burst * 2 + per_second).map_err(|error| error.to_string())?;
    let url = crate::context::with_query(ctx.records_url()?, &[("page_size", "1")]);
    let calls = (0..count).map(|_| Call::get(url.clone())).collect();
    let result = ensure_some_limited(&ctx.http.without_retries(), calls).await;
    // Let the bucket refill for whatever runs next.
    tokio::time::sleep(Duration::from_secs(2)).await;
    result
}

async fn writes_past_burst(ctx: &Ctx) -> CheckResult {
    let (per_second, burst) = ctx.rate_limit("writes_per_app", (100, 200)).await?;
    let count = usize::try_from(burst * 2 + per_second).map_err(|error| error.to_string())?;
    let ty = ctx.note_type().await?;
    let body = json!({"type": ty, "content": {"title": "burst"}});
    let url = ctx.records_url()?;
    let calls = (0..count)
        .map(|_| Call::post(url.clone()).json(&body).signed(&ctx.full))
        .collect();
    let result = ensure_some_limited(&ctx.http.without_retries(), calls).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    result
}

async fn registrations_past_burst(ctx: &Ctx) -> CheckResult {
    let (per_second, burst) = ctx
        .rate_limit("registrations_per_address", (10, 20))
        .await?;
    let count = usize::try_from(burst * 2 + per_second).map_err(|error| error.to_string())?;
    let apps: Vec<NewApp> = (0..count).map(|_| NewApp::fresh()).collect();
    let mut calls = Vec::with_capacity(count);
    for app in &apps {
        let body = app.body(ctx, &[]).await?;
        calls.push(registration(
            ctx,
            &app.key,
            PUBLIC_KEY_HEADER,
            &app.key.public_key(),
            &body,
        )?);
    }
    let result = ensure_some_limited(&ctx.http.without_retries(), calls).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    result
}

/// The most wrong passwords sent before giving up on a `429`.
const SIGN_IN_ATTEMPTS: usize = 100;

async fn sign_in_failures(ctx: &Ctx) -> CheckResult {
    let app = NewApp::fresh();
    register(ctx, &app, &[]).await?;
    let url = consent_url(ctx, app.id())?;
    let http = ctx.http.without_retries();
    let mut browser = Browser::new(&http, &url);
    let (_, mut token) = browser.open(&url).await?;
    let wrong = format!("not-the-password-{}", record_id());
    for attempt in 1..=SIGN_IN_ATTEMPTS {
        let fields = [
            ("csrf", token.as_str()),
            ("action", "sign_in"),
            ("password", wrong.as_str()),
        ];
        let response = browser.post_form(&url, &fields).await?;
        match response.status {
            401 => {
                let page = html(&response, 401)?;
                if let Ok(fresh) = csrf(&page) {
                    token = fresh;
                }
            }
            429 => {
                html(&response, 429)?;
                ensure!(
                    retry_after(&response.headers).is_some(),
                    "429 after {attempt} wrong passwords without a Retry-After in seconds: {:?}",
                    response.header("retry-after")
                );
                return Ok(());
            }
            status => {
                return Err(format!(
                    "wrong password {attempt}: expected 401 or 429, got {status}: {}",
                    response.excerpt()
                ));
            }
        }
    }
    Err(format!(
        "{SIGN_IN_ATTEMPTS} wrong passwords from one address were never rate limited"
    ))
}
