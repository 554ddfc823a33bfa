//! Limits and hostile input: each is refused with the right problem, and the
//! server still answers afterwards (PROTOCOL.md §13).

use serde_json::json;

use super::filters::nested;
use super::{Check, CheckResult, check};
use crate::client::{Call, Response, host_and_port, nonce, now_ms, path_and_query, sign_call};
use crate::context::{Ctx, with_query};
use crate::expect::{
    self, BLOB_NOT_FOUND, BODY_TOO_LARGE, HEADERS_TOO_LARGE, INVALID_FILTER, INVALID_JSON,
    INVALID_SIGNATURE, Problem, REPLAYED_REQUEST, STALE_TIMESTAMP, URI_TOO_LONG, ensure,
};
use crate::signer::{Layout, SVC};

pub fn checks() -> Vec<Check> {
    vec![
        check!("limits/body-over-json-limit-413", body_too_large),
        check!("limits/json-nested-100000-deep-invalid-json", deep_json),
        check!("limits/query-string-20-kib-414", long_query),
        check!("limits/headers-20-kib-431", large_headers),
        check!(
            "limits/filter-500-conditions-invalid-filter",
            filter_500_conditions
        ),
        check!(
            "limits/filter-50-parenthesis-levels-invalid-filter",
            filter_50_levels
        ),
        check!("limits/range-1000-parts-whole-blob", range_1000_parts),
        check!("limits/file-name-with-dot-dot-slash-blob-404", dot_dot_name),
        check!("limits/replayed-request-refused", replayed),
        check!("limits/stale-timestamp-refused", stale),
        check!("limits/bearer-for-other-path-refused", bearer_other_path),
    ]
}

/// Fails unless the answer is `problem` and the server then still answers.
async fn refused_then_alive(ctx: &Ctx, response: Response, problem: Problem) -> CheckResult {
    expect::problem_response(&response, problem)?;
    still_answers(ctx).await
}

async fn still_answers(ctx: &Ctx) -> CheckResult {
    let response = ctx
        .send(Call::get(ctx.api("/server")?).signed(&ctx.full))
        .await;
    let response = response.map_err(|error| format!("the server no longer answers: {error}"))?;
    expect::status(&response, 200)
        .map_err(|error| format!("the server no longer answers well: {error}"))
}

async fn body_too_large(ctx: &Ctx) -> CheckResult {
    let limit = ctx.limit("json_body_bytes", 1 << 20).await?;
    let size = usize::try_from(limit.max(1 << 20) * 2).map_err(|error| error.to_string())?;
    ensure!(
        size <= 64 << 20,
        "the JSON body limit {limit} is too large to test"
    );
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "x".repeat(size)}});
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await?;
    refused_then_alive(ctx, response, BODY_TOO_LARGE).await
}

async fn deep_json(ctx: &Ctx) -> CheckResult {
    // A valid create whose content nests objects 100,000 deep: only the
    // depth is wrong.
    let depth = 100_000;
    let ty = ctx.note_type().await?;
    let deep = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    let body = format!("{{\"type\":{ty},\"content\":{deep}}}").into_bytes();
    let call = Call::post(ctx.records_url()?)
        .body(body, Some("application/json"))
        .signed(&ctx.full);
    let response = ctx.send(call).await?;
    refused_then_alive(ctx, response, INVALID_JSON).await
}

async fn long_query(ctx: &Ctx) -> CheckResult {
    let limit = ctx.limit("request_target_bytes", 16 << 10).await?;
    let length =
        usize::try_from(limit.max(16 << 10) + (4 << 10)).map_err(|error| error.to_string())?;
    let url = with_query(ctx.records_url()?, &[("padding", &"a".repeat(length))]);
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    refused_then_alive(ctx, response, URI_TOO_LONG).await
}

async fn large_headers(ctx: &Ctx) -> CheckResult {
    let limit = ctx.limit("request_header_bytes", 16 << 10).await?;
    let length =
        usize::try_from(limit.max(16 << 10) + (4 << 10)).map_err(|error| error.to_string())?;
    let call = Call::get(ctx.records_url()?)
        .header("x-padding", &"a".repeat(length))
        .signed(&ctx.full);
    let response = ctx.send(call).await?;
    refused_then_alive(ctx, response, HEADERS_TOO_LARGE).await
}

async fn list_with_filter(ctx: &Ctx, filter: &str) -> Result<Response, String> {
    let url = with_query(ctx.records_url()?, &[("filter", filter)]);
    ctx.send(Call::get(url).signed(&ctx.full)).await
}

async fn filter_500_conditions(ctx: &Ctx) -> CheckResult {
    let filter = vec!["\"x\""; 500].join(",");
    refused_then_alive(ctx, list_with_filter(ctx, &filter).await?, INVALID_FILTER).await
}

async fn filter_50_levels(ctx: &Ctx) -> CheckResult {
    refused_then_alive(
        ctx,
        list_with_filter(ctx, &nested(50)).await?,
        INVALID_FILTER,
    )
    .await
}

async fn range_1000_parts(ctx: &Ctx) -> CheckResult {
    let blob = ctx
        .blob_record("many.bin", "application/octet-stream", false)
        .await?;
    let parts: Vec<String> = (0..1000).map(|n| format!("{n}-{n}")).collect();
    let range = format!("bytes={}", parts.join(","));
    let call = Call::get(ctx.blob_record_url(&blob)?)
        .header("range", &range)
        .signed(&ctx.full);
    let response = ctx.send(call).await?;
    expect::status(&response, 200)?;
    ensure!(response.body == blob.data, "the body is not the whole blob");
    still_answers(ctx).await
}

async fn dot_dot_name(ctx: &Ctx) -> CheckResult {
    let blob = ctx
        .blob_record("safe.bin", "application/octet-stream", false)
        .await?;
    let url = ctx.blob_url(&blob.id, &blob.hash, "../../../../etc/passwd")?;
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    refused_then_alive(ctx, response, BLOB_NOT_FOUND).await
}

async fn replayed(ctx: &Ctx) -> CheckResult {
    let call = Call::get(ctx.records_url()?);
    let header = sign_call(
        &call,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    expect::status(
        &ctx.send(call.clone().authorization(header.clone())).await?,
        200,
    )?;
    let response = ctx.send(call.authorization(header)).await?;
    refused_then_alive(ctx, response, REPLAYED_REQUEST).await
}

async fn stale(ctx: &Ctx) -> CheckResult {
    let call = Call::get(ctx.records_url()?).signed_with(
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        -3_600_000,
    );
    refused_then_alive(ctx, ctx.send(call).await?, STALE_TIMESTAMP).await
}

async fn bearer_other_path(ctx: &Ctx) -> CheckResult {
    let blob = ctx
        .blob_record("secret.bin", "application/octet-stream", false)
        .await?;
    let signed = ctx.record_url(&blob.id)?;
    let (host, port) = host_and_port(&signed);
    let token = ctx.full.bearer_token(
        SVC,
        now_ms() + 600_000,
        path_and_query(&signed),
        &host,
        port,
    );
    let url = with_query(
        ctx.blob_record_url(&blob)?,
        &[("bearer", &token.standard())],
    );
    refused_then_alive(ctx, ctx.send(Call::get(url)).await?, INVALID_SIGNATURE).await
}
