//! TLS versions, ALPN and the plain-HTTP redirect (spec §4.0.1, PROTOCOL.md §12).

use std::time::Duration;

use rustls::version::{TLS12, TLS13};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use url::Url;

use super::{Check, CheckResult, Needs, check};
use crate::client::Call;
use crate::context::Ctx;
use crate::expect::{ensure, ensure_eq};
use crate::tls;

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "transport/tls12-handshake",
            tls12_handshake,
            Needs::Transport
        ),
        check!(
            "transport/tls13-handshake",
            tls13_handshake,
            Needs::Transport
        ),
        check!("transport/alpn-h2-negotiated", alpn_h2, Needs::Transport),
        check!(
            "transport/alpn-http11-fallback",
            alpn_http11_fallback,
            Needs::Transport
        ),
        check!(
            "transport/no-alpn-gets-http11",
            no_alpn_gets_http11,
            Needs::Transport
        ),
        check!(
            "transport/main-client-uses-http2",
            main_client_uses_http2,
            Needs::Transport
        ),
        check!(
            "transport/plain-http-answers-308",
            plain_http_answers_308,
            Needs::Redirect
        ),
        check!(
            "transport/redirect-keeps-path-and-query",
            redirect_keeps_target,
            Needs::Redirect
        ),
    ]
}

const H2: &[u8] = b"h2";
const HTTP11: &[u8] = b"http/1.1";

async fn tls_version(ctx: &Ctx, version: &'static rustls::SupportedProtocolVersion) -> CheckResult {
    let config = tls::client_config(&ctx.target, &[version], &[H2, HTTP11])?;
    let stream = tls::connect(&ctx.target, config).await?;
    ensure_eq!(
        stream.get_ref().1.protocol_version(),
        Some(version.version),
        "TLS version"
    );
    Ok(())
}

async fn tls12_handshake(ctx: &Ctx) -> CheckResult {
    tls_version(ctx, &TLS12).await
}

async fn tls13_handshake(ctx: &Ctx) -> CheckResult {
    tls_version(ctx, &TLS13).await
}

async fn alpn_h2(ctx: &Ctx) -> CheckResult {
    let config = tls::client_config(&ctx.target, &[&TLS13, &TLS12], &[H2, HTTP11])?;
    let stream = tls::connect(&ctx.target, config).await?;
    ensure_eq!(
        stream.get_ref().1.alpn_protocol(),
        Some(H2),
        "ALPN protocol"
    );
    Ok(())
}

/// Sends `HEAD /` over HTTP/1.1 on the connection; returns the status line.
async fn http11_status_line(
    ctx: &Ctx,
    mut stream: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> Result<String, String> {
    let url = Url::parse(&ctx.base).map_err(|error| error.to_string())?;
    let host = url[url::Position::BeforeHost..url::Position::AfterPort].to_string();
    let request = format!("HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|error| format!("writing the request: {error}"))?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    // Servers may close without a TLS close_notify; what was read still counts.
    if read.is_err() && answer.is_empty() {
        return Err("no answer within 10 s".into());
    }
    let text = String::from_utf8_lossy(&answer);
    Ok(text.lines().next().unwrap_or_default().to_string())
}

async fn alpn_http11_fallback(ctx: &Ctx) -> CheckResult {
    let config = tls::client_config(&ctx.target, &[&TLS13, &TLS12], &[HTTP11])?;
    let stream = tls::connect(&ctx.target, config).await?;
    ensure_eq!(
        stream.get_ref().1.alpn_protocol(),
        Some(HTTP11),
        "ALPN protocol"
    );
    let line = http11_status_line(ctx, stream).await?;
    ensure!(
        line.starts_with("HTTP/1.1 204"),
        "expected HTTP/1.1 204 to HEAD /, got {line:?}"
    );
    Ok(())
}

async fn no_alpn_gets_http11(ctx: &Ctx) -> CheckResult {
    let config = tls::client_config(&ctx.target, &[&TLS13, &TLS12], &[])?;
    let stream = tls::connect(&ctx.target, config).await?;
    ensure_eq!(stream.get_ref().1.alpn_protocol(), None, "ALPN protocol");
    let line = http11_status_line(ctx, stream).await?;
    ensure!(
        line.starts_with("HTTP/1.1 "),
        "expected an HTTP/1.1 answer, got {line:?}"
    );
    Ok(())
}

async fn main_client_uses_http2(ctx: &Ctx) -> CheckResult {
    let response = ctx
        .send(Call::get(ctx.api("/server")?).signed(&ctx.full))
        .await?;
    ensure_eq!(response.version, reqwest::Version::HTTP_2, "HTTP version");
    Ok(())
}

/// The plain-HTTP URL and the HTTPS URL it must redirect to.
fn redirect_pair(ctx: &Ctx) -> Result<(Url, String), String> {
    let plain = ctx.target.http_redirect_url.as_deref().unwrap_or_default();
    let target = format!("/api/{}/records?page_size=3", ctx.target.user);
    let from = Url::parse(&format!("{}{target}", plain.trim_end_matches('/')))
        .map_err(|error| format!("http_redirect_url: {error}"))?;
    Ok((from, format!("{}{target}", ctx.base)))
}

async fn plain_http_answers_308(ctx: &Ctx) -> CheckResult {
    let (from, _) = redirect_pair(ctx)?;
    let response = ctx.send(Call::get(from)).await?;
    ensure_eq!(response.status, 308, "status");
    let location = response.header("location").unwrap_or_default();
    ensure!(
        location.starts_with("https://"),
        "Location is not HTTPS: {location:?}"
    );
    Ok(())
}

async fn redirect_keeps_target(ctx: &Ctx) -> CheckResult {
    let (from, expected) = redirect_pair(ctx)?;
    let response = ctx.send(Call::get(from)).await?;
    ensure_eq!(
        response.header("location"),
        Some(expected.as_str()),
        "Location"
    );
    Ok(())
}
