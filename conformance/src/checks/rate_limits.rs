//! Rate limits (PROTOCOL.md §13). These run last: they empty the buckets.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;

use super::{Check, CheckResult, check};
use crate::client::{Call, Http, Response, retry_after};
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
