//! Request signatures, freshness, replays and bearer tokens (spec §5,
//! PROTOCOL.md §10).

use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Check, CheckResult, check};
use crate::client::{Call, Response, host_and_port, nonce, now_ms, record_id, sign_call};
use crate::context::{Ctx, with_query};
use crate::expect::{
    self, INVALID_SIGNATURE, MALFORMED_AUTHORIZATION, MISSING_AUTHORIZATION, Problem,
    REPLAYED_REQUEST, STALE_TIMESTAMP, UNKNOWN_APP, ensure, ensure_eq,
};
use crate::signer::{AppKey, Layout, format_authorization};
use crate::sse::EventStream;

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "auth/missing-authorization-on-create-401",
            missing_on_create
        ),
        check!(
            "auth/missing-authorization-on-blob-upload-401",
            missing_on_blob_upload
        ),
        check!("auth/bad-scheme-malformed", bad_scheme),
        check!("auth/bad-syntax-malformed", bad_syntax),
        check!("auth/missing-parameter-malformed", missing_parameter),
        check!("auth/repeated-parameter-malformed", repeated_parameter),
        check!("auth/nonce-over-10-characters-malformed", long_nonce),
        check!("auth/nonce-of-10-characters-accepted", ten_character_nonce),
        check!(
            "auth/algorithm-other-than-ed25519-malformed",
            other_algorithm
        ),
        check!("auth/unsignable-header-malformed", unsignable_header),
        check!("auth/invalid-signature-401", invalid_signature),
        check!("auth/wrong-key-invalid-signature", wrong_key),
        check!(
            "auth/wrong-authorization-id-invalid-signature",
            wrong_authorization_id
        ),
        check!("auth/unknown-app-401", unknown_app),
        check!("auth/tampered-query-invalid-signature", tampered_query),
        check!("auth/other-method-invalid-signature", other_method),
        check!("auth/other-port-invalid-signature", other_port),
        check!("auth/stale-timestamp-past-401", stale_past),
        check!("auth/stale-timestamp-future-401", stale_future),
        check!(
            "auth/timestamp-ahead-within-window-accepted",
            ahead_within_window
        ),
        check!("auth/replayed-request-401", replayed_request),
        check!("auth/reused-nonce-401", reused_nonce),
        check!(
            "auth/layout-with-algorithm-line-accepted",
            layout_with_algorithm
        ),
        check!(
            "auth/layout-without-algorithm-line-accepted",
            layout_without_algorithm
        ),
        check!("auth/layout-mismatch-invalid-signature", layout_mismatch),
        check!(
            "auth/parameters-in-any-order-accepted",
            parameters_any_order
        ),
        check!(
            "auth/content-sha256-matching-accepted",
            content_sha256_matching
        ),
        check!(
            "auth/content-sha256-mismatching-invalid-signature",
            content_sha256_mismatching
        ),
        check!("auth/signed-client-id-accepted", signed_client_id),
        check!("auth/signed-range-accepted", signed_range),
        check!("auth/signed-last-event-id-accepted", signed_last_event_id),
        check!(
            "auth/tampered-signed-header-invalid-signature",
            tampered_signed_header
        ),
    ]
}

/// A cheap signed GET that answers 200 when the signature is good.
fn probe(ctx: &Ctx) -> Result<Call<'_>, String> {
    Ok(Call::get(with_query(
        ctx.records_url()?,
        &[("page_size", "1")],
    )))
}

/// The parameters of a freshly signed probe, in the header's order.
fn honest_parameters(ctx: &Ctx, call: &Call<'_>, layout: Layout) -> Vec<(&'static str, String)> {
    parameters(&sign_call(call, &ctx.full, &[], layout, now_ms(), &nonce()))
}

/// `SVC k="v" …` back into its parameters.
fn parameters(header: &str) -> Vec<(&'static str, String)> {
    const NAMES: [&str; 6] = ["algorithm", "ts", "nonce", "id", "headers", "signature"];
    header
        .split(' ')
        .skip(1)
        .filter_map(|part| {
            let (name, value) = part.split_once('=')?;
            let name = NAMES.into_iter().find(|known| *known == name)?;
            Some((name, value.trim_matches('"').to_string()))
        })
        .collect()
}

async fn send_with(ctx: &Ctx, call: Call<'_>, authorization: String) -> Result<Response, String> {
    ctx.send(call.authorization(authorization)).await
}

async fn expect_probe_problem(ctx: &Ctx, authorization: String, problem: Problem) -> CheckResult {
    let response = send_with(ctx, probe(ctx)?, authorization).await?;
    expect::problem_response(&response, problem).map(drop)
}

async fn expect_probe_ok(ctx: &Ctx, authorization: String) -> CheckResult {
    let response = send_with(ctx, probe(ctx)?, authorization).await?;
    expect::status(&response, 200)
}

async fn missing_on_create(ctx: &Ctx) -> CheckResult {
    let body = json!({"type": ctx.builtin_type("type").await?, "content": {"name": "x"}});
    let response = ctx.send(Call::post(ctx.records_url()?).json(&body)).await?;
    expect::problem_response(&response, MISSING_AUTHORIZATION).map(drop)
}

async fn missing_on_blob_upload(ctx: &Ctx) -> CheckResult {
    let call = Call::post(ctx.new_blob_url()?).body(b"hello".to_vec(), Some("text/plain"));
    expect::problem_response(&ctx.send(call).await?, MISSING_AUTHORIZATION).map(drop)
}

async fn bad_scheme(ctx: &Ctx) -> CheckResult {
    let parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    expect_probe_problem(
        ctx,
        format_authorization("XYZ", &parameters),
        MALFORMED_AUTHORIZATION,
    )
    .await
}

async fn bad_syntax(ctx: &Ctx) -> CheckResult {
    let header = "SVC this is, not a parameter list".to_string();
    expect_probe_problem(ctx, header, MALFORMED_AUTHORIZATION).await
}

async fn missing_parameter(ctx: &Ctx) -> CheckResult {
    let mut parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    parameters.retain(|(name, _)| *name != "ts");
    expect_probe_problem(
        ctx,
        format_authorization("SVC", &parameters),
        MALFORMED_AUTHORIZATION,
    )
    .await
}

async fn repeated_parameter(ctx: &Ctx) -> CheckResult {
    let mut parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    parameters.push(("nonce", nonce()));
    expect_probe_problem(
        ctx,
        format_authorization("SVC", &parameters),
        MALFORMED_AUTHORIZATION,
    )
    .await
}

async fn long_nonce(ctx: &Ctx) -> CheckResult {
    let header = sign_call(
        &probe(ctx)?,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &format!("{}a", nonce()),
    );
    expect_probe_problem(ctx, header, MALFORMED_AUTHORIZATION).await
}

async fn ten_character_nonce(ctx: &Ctx) -> CheckResult {
    let nonce = nonce();
    if nonce.len() != 10 {
        return Err(format!(
            "the client's nonce {nonce} is not 10 characters long"
        ));
    }
    let header = sign_call(
        &probe(ctx)?,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce,
    );
    expect_probe_ok(ctx, header).await
}

async fn other_algorithm(ctx: &Ctx) -> CheckResult {
    let mut parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    for (name, value) in &mut parameters {
        if *name == "algorithm" {
            *value = "rsa-sha256".into();
        }
    }
    expect_probe_problem(
        ctx,
        format_authorization("SVC", &parameters),
        MALFORMED_AUTHORIZATION,
    )
    .await
}

async fn unsignable_header(ctx: &Ctx) -> CheckResult {
    let call = probe(ctx)?.header("accept", "application/json");
    let header = sign_call(
        &call,
        &ctx.full,
        &["accept"],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    let response = send_with(ctx, call, header).await?;
    expect::problem_response(&response, MALFORMED_AUTHORIZATION).map(drop)
}

async fn invalid_signature(ctx: &Ctx) -> CheckResult {
    let mut parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    for (name, value) in &mut parameters {
        if *name == "signature" {
            *value = ctx.full.sign("not the signature input\n");
        }
    }
    expect_probe_problem(
        ctx,
        format_authorization("SVC", &parameters),
        INVALID_SIGNATURE,
    )
    .await
}

async fn wrong_key(ctx: &Ctx) -> CheckResult {
    let key = AppKey::from_seed(&ctx.full.app_id, &ctx.full.authorization_id, rand::random());
    let header = sign_call(
        &probe(ctx)?,
        &key,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    expect_probe_problem(ctx, header, INVALID_SIGNATURE).await
}

async fn wrong_authorization_id(ctx: &Ctx) -> CheckResult {
    let mut key = ctx.full.clone();
    key.authorization_id = record_id();
    let header = sign_call(
        &probe(ctx)?,
        &key,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    expect_probe_problem(ctx, header, INVALID_SIGNATURE).await
}

async fn unknown_app(ctx: &Ctx) -> CheckResult {
    let key = AppKey::from_seed(&record_id(), &record_id(), rand::random());
    let header = sign_call(
        &probe(ctx)?,
        &key,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    expect_probe_problem(ctx, header, UNKNOWN_APP).await
}

/// Signs `signed` and sends the header with `sent`.
async fn sign_one_send_other(
    ctx: &Ctx,
    signed: &Call<'_>,
    sent: Call<'_>,
) -> Result<Response, String> {
    let header = sign_call(
        signed,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    send_with(ctx, sent, header).await
}

async fn tampered_query(ctx: &Ctx) -> CheckResult {
    let signed = probe(ctx)?;
    let sent = Call::get(with_query(ctx.records_url()?, &[("page_size", "2")]));
    let response = sign_one_send_other(ctx, &signed, sent).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}

async fn other_method(ctx: &Ctx) -> CheckResult {
    let mut signed = probe(ctx)?;
    signed.method = reqwest::Method::POST;
    let response = sign_one_send_other(ctx, &signed, probe(ctx)?).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}

async fn other_port(ctx: &Ctx) -> CheckResult {
    let mut signed = probe(ctx)?;
    let other = if host_and_port(&signed.url).1 == 8443 {
        9443
    } else {
        8443
    };
    signed
        .url
        .set_port(Some(other))
        .map_err(|_| "cannot set a port".to_string())?;
    let response = sign_one_send_other(ctx, &signed, probe(ctx)?).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}

async fn stale(ctx: &Ctx, offset_ms: i64) -> CheckResult {
    let header = sign_call(
        &probe(ctx)?,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now_ms() + offset_ms,
        &nonce(),
    );
    expect_probe_problem(ctx, header, STALE_TIMESTAMP).await
}

async fn stale_past(ctx: &Ctx) -> CheckResult {
    stale(ctx, -600_000).await
}

async fn stale_future(ctx: &Ctx) -> CheckResult {
    stale(ctx, 600_000).await
}

async fn ahead_within_window(ctx: &Ctx) -> CheckResult {
    let header = sign_call(
        &probe(ctx)?,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now_ms() + 60_000,
        &nonce(),
    );
    expect_probe_ok(ctx, header).await
}

async fn replayed_request(ctx: &Ctx) -> CheckResult {
    let header = sign_call(
        &probe(ctx)?,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    expect_probe_ok(ctx, header.clone())
        .await
        .map_err(|error| format!("first request: {error}"))?;
    expect_probe_problem(ctx, header, REPLAYED_REQUEST).await
}

async fn reused_nonce(ctx: &Ctx) -> CheckResult {
    let nonce = nonce();
    let now = now_ms();
    let first = sign_call(
        &probe(ctx)?,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now,
        &nonce,
    );
    expect_probe_ok(ctx, first)
        .await
        .map_err(|error| format!("first request: {error}"))?;
    let second = sign_call(
        &probe(ctx)?,
        &ctx.full,
        &[],
        Layout::WithAlgorithmLine,
        now + 1_000,
        &nonce,
    );
    expect_probe_problem(ctx, second, REPLAYED_REQUEST).await
}

async fn layout_with_algorithm(ctx: &Ctx) -> CheckResult {
    let parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    ensure!(
        parameters.iter().any(|(name, _)| *name == "algorithm"),
        "signer sent no algorithm"
    );
    expect_probe_ok(ctx, format_authorization("SVC", &parameters)).await
}

async fn layout_without_algorithm(ctx: &Ctx) -> CheckResult {
    let parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithoutAlgorithmLine);
    ensure!(
        !parameters.iter().any(|(name, _)| *name == "algorithm"),
        "signer sent an algorithm"
    );
    expect_probe_ok(ctx, format_authorization("SVC", &parameters)).await
}

async fn layout_mismatch(ctx: &Ctx) -> CheckResult {
    let mut parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    parameters.retain(|(name, _)| *name != "algorithm");
    expect_probe_problem(
        ctx,
        format_authorization("SVC", &parameters),
        INVALID_SIGNATURE,
    )
    .await
}

async fn parameters_any_order(ctx: &Ctx) -> CheckResult {
    let mut parameters = honest_parameters(ctx, &probe(ctx)?, Layout::WithAlgorithmLine);
    parameters.reverse();
    expect_probe_ok(ctx, format_authorization("SVC", &parameters)).await
}

/// A create whose body's digest is sent, signed, as `X-Svc-Content-SHA256`.
async fn create_with_digest(ctx: &Ctx, digest_of: Option<&[u8]>) -> Result<Response, String> {
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "digest"}});
    let bytes = body.to_string().into_bytes();
    let digest = hex::encode(Sha256::digest(digest_of.unwrap_or(&bytes)));
    let call = Call::post(ctx.records_url()?)
        .body(bytes, Some("application/json"))
        .header("x-svc-content-sha256", &digest)
        .signed_headers(&ctx.full, &["x-svc-content-sha256"]);
    ctx.send(call).await
}

async fn content_sha256_matching(ctx: &Ctx) -> CheckResult {
    expect::status(&create_with_digest(ctx, None).await?, 200)
}

async fn content_sha256_mismatching(ctx: &Ctx) -> CheckResult {
    let response = create_with_digest(ctx, Some(b"another body")).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}

async fn signed_client_id(ctx: &Ctx) -> CheckResult {
    let call = probe(ctx)?
        .header("x-svc-client-id", &record_id())
        .signed_headers(&ctx.full, &["x-svc-client-id"]);
    expect::status(&ctx.send(call).await?, 200)
}

async fn signed_range(ctx: &Ctx) -> CheckResult {
    let blob = ctx
        .blob_record("range.bin", "application/octet-stream", false)
        .await?;
    let call = Call::get(ctx.blob_record_url(&blob)?)
        .header("range", "bytes=0-9")
        .signed_headers(&ctx.full, &["range"]);
    let response = ctx.send(call).await?;
    expect::status(&response, 206)?;
    ensure_eq!(response.body, blob.data[..10].to_vec(), "ranged body");
    Ok(())
}

async fn signed_last_event_id(ctx: &Ctx) -> CheckResult {
    let filter = super::events::nothing_filter();
    let call = Call::get(with_query(ctx.events_url()?, &[("filter", &filter)]))
        .header("last-event-id", "0")
        .signed_headers(&ctx.full, &["last-event-id"]);
    let response = ctx.http.open(&call).await?;
    ensure_eq!(response.status().as_u16(), 200, "status");
    let mut stream = EventStream::new(response);
    // The stream is open: reading it briefly must not fail.
    stream
        .next_event(Duration::from_millis(200))
        .await
        .map(drop)
}

async fn tampered_signed_header(ctx: &Ctx) -> CheckResult {
    let signed = probe(ctx)?.header("x-svc-client-id", &record_id());
    let header = sign_call(
        &signed,
        &ctx.full,
        &["x-svc-client-id"],
        Layout::WithAlgorithmLine,
        now_ms(),
        &nonce(),
    );
    let sent = probe(ctx)?.header("x-svc-client-id", &record_id());
    let response = send_with(ctx, sent, header).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}
