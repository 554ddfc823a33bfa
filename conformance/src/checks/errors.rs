//! The shape of errors (spec §7, PROTOCOL.md §11).

use reqwest::Method;
use serde_json::Value;

use super::cors::ensure_exposed_headers;
use super::{Check, CheckResult, check};
use crate::client::{Call, Response};
use crate::context::Ctx;
use crate::expect::{
    self, BLOB_NOT_FOUND, DELETED, FORBIDDEN, ID_CONFLICT, INVALID_FILTER, INVALID_JSON,
    INVALID_LINK, INVALID_PARAMETER, MALFORMED_AUTHORIZATION, METHOD_NOT_ALLOWED,
    MISSING_AUTHORIZATION, MISSING_PROPERTIES, NOT_FOUND, Problem, RECORD_NOT_FOUND,
    SCHEMA_VIOLATION, STALE_TIMESTAMP, TOO_MANY_EVENTS, VERSION_CONFLICT, ensure, ensure_eq,
    str_at,
};

pub fn checks() -> Vec<Check> {
    vec![
        check!("errors/unknown-path-404", unknown_path_404),
        check!("errors/unknown-user-404", unknown_user_404),
        check!("errors/problem-json-content-type", problem_content_type),
        check!("errors/type-url-format", type_url_format),
        check!("errors/problem-status-matches-http-status", status_matches),
        check!("errors/problem-has-title-and-code", title_and_code),
        check!("errors/docs-page-is-html", docs_page_is_html),
        check!("errors/docs-page-for-every-type", docs_page_for_every_type),
        check!("errors/cache-control-no-cache", error_cache_control),
        check!("errors/cors-headers-on-errors", error_cors_headers),
        check!(
            "errors/405-with-allow-on-records",
            method_not_allowed_records
        ),
        check!("errors/405-with-allow-on-record", method_not_allowed_record),
    ]
}

async fn unknown_path(ctx: &Ctx) -> Result<Response, String> {
    ctx.send(Call::get(ctx.api("/no-such-endpoint")?).signed(&ctx.full))
        .await
}

async fn unknown_path_404(ctx: &Ctx) -> CheckResult {
    expect::problem_response(&unknown_path(ctx).await?, NOT_FOUND).map(drop)
}

async fn unknown_user_404(ctx: &Ctx) -> CheckResult {
    let user = format!("nobody-{}", &crate::client::record_id()[..8]);
    let response = ctx
        .send(Call::get(ctx.url(&format!("/api/{user}/records"))?))
        .await?;
    expect::problem_response(&response, NOT_FOUND).map(drop)
}

async fn problem_content_type(ctx: &Ctx) -> CheckResult {
    let response = unknown_path(ctx).await?;
    let content_type = response.header("content-type").unwrap_or_default();
    ensure_eq!(content_type, "application/problem+json", "Content-Type");
    Ok(())
}

/// The `type` URL of the unknown-path problem, checked for its form.
async fn type_url(ctx: &Ctx) -> Result<url::Url, String> {
    let body = unknown_path(ctx).await?.json()?;
    let kind = str_at(&body, "/type")?;
    let url =
        url::Url::parse(kind).map_err(|error| format!("type {kind:?} is not a URL: {error}"))?;
    ensure!(
        matches!(url.scheme(), "http" | "https"),
        "type {kind:?} is not an HTTP URL"
    );
    ensure!(
        url.path().ends_with("/error-types/request/404-not-found"),
        "type {kind:?} does not end in /error-types/request/404-not-found"
    );
    Ok(url)
}

async fn type_url_format(ctx: &Ctx) -> CheckResult {
    type_url(ctx).await.map(drop)
}

async fn status_matches(ctx: &Ctx) -> CheckResult {
    let response = unknown_path(ctx).await?;
    let body = response.json()?;
    ensure_eq!(
        body["status"].as_u64(),
        Some(u64::from(response.status)),
        "status field"
    );
    Ok(())
}

async fn title_and_code(ctx: &Ctx) -> CheckResult {
    let body = unknown_path(ctx).await?.json()?;
    ensure_eq!(body["code"].as_str(), Some("not_found"), "code");
    ensure!(
        body["title"].as_str().is_some_and(|t| !t.is_empty()),
        "no title: {body}"
    );
    Ok(())
}

/// Fails unless `url` answers 200 with an HTML page.
async fn ensure_html_page(ctx: &Ctx, url: url::Url) -> CheckResult {
    let response = ctx.send(Call::get(url.clone())).await?;
    ensure_eq!(response.status, 200, format!("status of {url}"));
    let content_type = response.header("content-type").unwrap_or_default();
    ensure!(
        content_type.starts_with("text/html"),
        "{url}: Content-Type {content_type:?}"
    );
    ensure!(!response.body.is_empty(), "{url}: empty page");
    Ok(())
}

async fn docs_page_is_html(ctx: &Ctx) -> CheckResult {
    ensure_html_page(ctx, type_url(ctx).await?).await
}

async fn docs_page_for_every_type(ctx: &Ctx) -> CheckResult {
    let known = type_url(ctx).await?;
    let docs = known
        .as_str()
        .strip_suffix("/error-types/request/404-not-found")
        .ok_or("unexpected type URL")?
        .to_string();
    let problems: [Problem; 16] = [
        MISSING_PROPERTIES,
        INVALID_JSON,
        INVALID_PARAMETER,
        INVALID_FILTER,
        SCHEMA_VIOLATION,
        INVALID_LINK,
        TOO_MANY_EVENTS,
        MISSING_AUTHORIZATION,
        MALFORMED_AUTHORIZATION,
        STALE_TIMESTAMP,
        FORBIDDEN,
        RECORD_NOT_FOUND,
        BLOB_NOT_FOUND,
        VERSION_CONFLICT,
        ID_CONFLICT,
        DELETED,
    ];
    for problem in problems {
        let url = url::Url::parse(&format!("{docs}/error-types/{}", problem.path))
            .map_err(|error| error.to_string())?;
        ensure_html_page(ctx, url).await?;
    }
    Ok(())
}

async fn error_cache_control(ctx: &Ctx) -> CheckResult {
    let response = unknown_path(ctx).await?;
    ensure_eq!(
        response.header("cache-control"),
        Some("no-cache"),
        "Cache-Control"
    );
    Ok(())
}

async fn error_cors_headers(ctx: &Ctx) -> CheckResult {
    let response = unknown_path(ctx).await?;
    ensure_eq!(
        response.header("access-control-allow-origin"),
        Some("*"),
        "Access-Control-Allow-Origin"
    );
    ensure_exposed_headers(&response)
}

/// Fails unless the answer is a 405 whose `Allow` holds `allowed` and not `method`.
fn ensure_405(response: &Response, method: &str, allowed: &[&str]) -> CheckResult {
    expect::problem_response(response, METHOD_NOT_ALLOWED)?;
    let allow = response
        .header("allow")
        .ok_or("405 without an Allow header")?;
    let methods: Vec<String> = allow
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .collect();
    for wanted in allowed {
        ensure!(
            methods.iter().any(|m| m == wanted),
            "Allow {allow:?} lacks {wanted}"
        );
    }
    ensure!(
        !methods.iter().any(|m| m == method),
        "Allow {allow:?} lists {method}"
    );
    Ok(())
}

async fn method_not_allowed_records(ctx: &Ctx) -> CheckResult {
    let call = Call::new(Method::PATCH, ctx.records_url()?)
        .json(&Value::Object(Default::default()))
        .signed(&ctx.full);
    ensure_405(&ctx.send(call).await?, "PATCH", &["GET", "POST"])
}

async fn method_not_allowed_record(ctx: &Ctx) -> CheckResult {
    let call = Call::post(ctx.record_url(&crate::client::record_id())?)
        .json(&Value::Object(Default::default()))
        .signed(&ctx.full);
    ensure_405(&ctx.send(call).await?, "POST", &["GET", "PUT", "DELETE"])
}
