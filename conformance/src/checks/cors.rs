//! CORS: preflights on every API endpoint and the headers of other
//! responses (spec §4.0.2, PROTOCOL.md §12); the pages a person reads (the
//! console, the consent page) send none (issue 40).

use reqwest::Method;

use super::{Check, CheckResult, check};
use crate::client::{Call, record_id};
use crate::context::Ctx;
use crate::expect::{self, ensure, ensure_eq};

pub fn checks() -> Vec<Check> {
    vec![
        check!("cors/preflight-entity-root", preflight_root),
        check!("cors/preflight-records", preflight_records),
        check!("cors/preflight-record", preflight_record),
        check!("cors/preflight-record-versions", preflight_versions),
        check!("cors/preflight-record-blob", preflight_blob),
        check!("cors/preflight-new-blob", preflight_new_blob),
        check!("cors/preflight-events", preflight_events),
        check!("cors/preflight-server-info", preflight_server_info),
        check!("cors/allow-origin-on-success", allow_origin_on_success),
        check!("cors/expose-headers-on-success", expose_headers_on_success),
        check!("cors/pages-send-no-cors-headers", pages_send_no_cors),
    ]
}

const PREFLIGHT_HEADERS: [(&str, &str); 4] = [
    (
        "access-control-allow-headers",
        "Authorization,Content-Type,X-Svc-Client-Id,Last-Event-Id,X-Svc-PublicKey",
    ),
    (
        "access-control-allow-methods",
        "HEAD,GET,POST,PUT,DELETE,OPTIONS",
    ),
    ("access-control-allow-origin", "*"),
    ("access-control-max-age", "43200"),
];

/// The headers every non-preflight response exposes.
pub const EXPOSED_HEADERS: [&str; 5] = [
    "link",
    "x-svc-credentials",
    "x-svc-publickey",
    "content-range",
    "content-disposition",
];

async fn preflight(ctx: &Ctx, url: url::Url) -> CheckResult {
    let call = Call::new(Method::OPTIONS, url)
        .header("origin", "https://app.example")
        .header("access-control-request-method", "PUT")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        );
    let response = ctx.send(call).await?;
    expect::status(&response, 204)?;
    for (name, value) in PREFLIGHT_HEADERS {
        ensure_eq!(response.header(name), Some(value), name);
    }
    Ok(())
}

async fn preflight_root(ctx: &Ctx) -> CheckResult {
    preflight(ctx, ctx.url("/")?).await
}

async fn preflight_records(ctx: &Ctx) -> CheckResult {
    preflight(ctx, ctx.records_url()?).await
}

async fn preflight_record(ctx: &Ctx) -> CheckResult {
    preflight(ctx, ctx.record_url(&record_id())?).await
}

async fn preflight_versions(ctx: &Ctx) -> CheckResult {
    preflight(ctx, ctx.record_url_with(&record_id(), &["versions"])?).await
}

async fn preflight_blob(ctx: &Ctx) -> CheckResult {
    let hash = "0".repeat(64);
    preflight(ctx, ctx.blob_url(&record_id(), &hash, "a.txt")?).await
}

async fn preflight_new_blob(ctx: &Ctx) -> CheckResult {
    preflight(ctx, ctx.new_blob_url()?).await
}

async fn preflight_events(ctx: &Ctx) -> CheckResult {
    preflight(ctx, ctx.events_url()?).await
}

async fn preflight_server_info(ctx: &Ctx) -> CheckResult {
    preflight(ctx, ctx.api("/server")?).await
}

async fn allow_origin_on_success(ctx: &Ctx) -> CheckResult {
    let response = ctx
        .send(Call::get(ctx.records_url()?).signed(&ctx.full))
        .await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("access-control-allow-origin"),
        Some("*"),
        "Access-Control-Allow-Origin"
    );
    Ok(())
}

/// Fails unless the response exposes exactly [`EXPOSED_HEADERS`].
pub fn ensure_exposed_headers(response: &crate::client::Response) -> CheckResult {
    let value = response
        .header("access-control-expose-headers")
        .ok_or("no Access-Control-Expose-Headers")?;
    let mut exposed: Vec<String> = value
        .split(',')
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    exposed.sort();
    let mut expected: Vec<String> = EXPOSED_HEADERS
        .iter()
        .map(|name| name.to_string())
        .collect();
    expected.sort();
    ensure!(
        exposed == expected,
        "Access-Control-Expose-Headers: expected {expected:?}, got {value:?}"
    );
    Ok(())
}

async fn expose_headers_on_success(ctx: &Ctx) -> CheckResult {
    let response = ctx
        .send(Call::get(ctx.records_url()?).signed(&ctx.full))
        .await?;
    expect::status(&response, 200)?;
    ensure_exposed_headers(&response)
}

/// The console and the consent page are for a person's browser on this
/// origin: no answer of theirs, a preflight included, carries a CORS
/// header, so no other origin's script may read them.
async fn pages_send_no_cors(ctx: &Ctx) -> CheckResult {
    let user = &ctx.target.user;
    let pages = [
        ctx.url(&format!("/{user}/console"))?,
        ctx.url(&format!("/{user}/console/account"))?,
        ctx.url(&format!("/{user}/auth/{}", record_id()))?,
    ];
    for page in pages {
        let get = Call::get(page.clone())
            .header("origin", "https://app.example")
            .header("accept", "text/html");
        let preflight = Call::new(Method::OPTIONS, page.clone())
            .header("origin", "https://app.example")
            .header("access-control-request-method", "POST");
        for (what, call) in [("GET", get), ("OPTIONS", preflight)] {
            let response = ctx.send(call).await?;
            let cors: Vec<&str> = response
                .headers
                .keys()
                .map(|name| name.as_str())
                .filter(|name| name.starts_with("access-control-"))
                .collect();
            ensure!(
                cors.is_empty(),
                "{what} {page} ({}) sent CORS headers: {cors:?}",
                response.status
            );
        }
    }
    Ok(())
}
