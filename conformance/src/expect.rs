//! Comparing responses with what the protocol says, turning every mismatch
//! into a failure message (never a panic).

use serde_json::Value;

use crate::client::Response;

/// Fails the check with a message when the condition does not hold.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(format!($($message)+));
        }
    };
}

/// Fails the check when `actual != expected`, naming what was compared.
macro_rules! ensure_eq {
    ($actual:expr, $expected:expr, $what:expr) => {{
        let actual = &$actual;
        let expected = &$expected;
        if actual != expected {
            return Err(format!(
                "{}: expected {:?}, got {:?}",
                $what, expected, actual
            ));
        }
    }};
}

pub(crate) use {ensure, ensure_eq};

/// One problem type of PROTOCOL.md §11: its `<group>/<status>-<slug>` and its code.
#[derive(Debug, Clone, Copy)]
pub struct Problem {
    pub path: &'static str,
    pub code: &'static str,
}

impl Problem {
    /// The status in the type's name.
    pub fn status(&self) -> u16 {
        self.path
            .split_once('/')
            .and_then(|(_, rest)| rest.get(..3))
            .and_then(|digits| digits.parse().ok())
            .unwrap_or_default()
    }
}

const fn problem(path: &'static str, code: &'static str) -> Problem {
    Problem { path, code }
}

pub const MISSING_PROPERTIES: Problem =
    problem("new-record/400-missing-properties", "missing_properties");
pub const UPDATE_MISSING_PROPERTIES: Problem =
    problem("update-record/400-missing-properties", "missing_properties");
pub const INVALID_JSON: Problem = problem("request/400-invalid-json", "invalid_json");
pub const INVALID_BODY: Problem = problem("request/400-invalid-body", "invalid_body");
pub const INVALID_PARAMETER: Problem =
    problem("request/400-invalid-parameter", "invalid_parameter");
pub const INVALID_FILTER: Problem = problem("request/400-invalid-filter", "invalid_filter");
pub const SCHEMA_VIOLATION: Problem = problem("record/400-schema-violation", "schema_violation");
pub const INVALID_LINK: Problem = problem("record/400-invalid-link", "invalid_link");
pub const INVALID_SCHEMA: Problem = problem("record/400-invalid-schema", "invalid_schema");
pub const TOO_MANY_EVENTS: Problem = problem("events/400-too-many-events", "too_many_events");
pub const MISSING_AUTHORIZATION: Problem =
    problem("auth/401-missing-authorization", "missing_authorization");
pub const MALFORMED_AUTHORIZATION: Problem = problem(
    "auth/401-malformed-authorization",
    "malformed_authorization",
);
pub const INVALID_SIGNATURE: Problem = problem("auth/401-invalid-signature", "invalid_signature");
pub const STALE_TIMESTAMP: Problem = problem("auth/401-stale-timestamp", "stale_timestamp");
pub const REPLAYED_REQUEST: Problem = problem("auth/401-replayed-request", "replayed_request");
pub const UNKNOWN_APP: Problem = problem("auth/401-unknown-app", "unknown_app");
pub const FORBIDDEN: Problem = problem("auth/403-forbidden", "forbidden");
pub const RECORD_NOT_FOUND: Problem = problem("record/404-not-found", "record_not_found");
pub const BLOB_NOT_FOUND: Problem = problem("blob/404-not-found", "blob_not_found");
pub const NOT_FOUND: Problem = problem("request/404-not-found", "not_found");
pub const METHOD_NOT_ALLOWED: Problem =
    problem("request/405-method-not-allowed", "method_not_allowed");
pub const VERSION_CONFLICT: Problem = problem("record/409-version-conflict", "version_conflict");
pub const ID_CONFLICT: Problem = problem("record/409-id-conflict", "id_conflict");
pub const DELETED: Problem = problem("record/410-deleted", "record_deleted");
pub const LENGTH_REQUIRED: Problem = problem("blob/411-length-required", "length_required");
pub const BODY_TOO_LARGE: Problem = problem("request/413-body-too-large", "body_too_large");
pub const URI_TOO_LONG: Problem = problem("request/414-uri-too-long", "uri_too_long");
pub const UNSUPPORTED_MEDIA_TYPE: Problem = problem(
    "request/415-unsupported-media-type",
    "unsupported_media_type",
);
pub const RANGE_NOT_SATISFIABLE: Problem =
    problem("blob/416-range-not-satisfiable", "range_not_satisfiable");
pub const HEADERS_TOO_LARGE: Problem =
    problem("request/431-headers-too-large", "headers_too_large");
pub const RATE_LIMITED: Problem = problem("request/429-rate-limited", "rate_limited");
pub const INTERNAL: Problem = problem("server/500-internal", "internal");
pub const PEER_UNREACHABLE: Problem =
    problem("federation/502-peer-unreachable", "peer_unreachable");
pub const PEER_REFUSED: Problem = problem("federation/502-peer-refused", "peer_refused");
pub const INVALID_PEER_ANSWER: Problem =
    problem("federation/502-invalid-peer-answer", "invalid_peer_answer");
pub const UNKNOWN_SERVER: Problem = problem("auth/401-unknown-server", "unknown_server");
pub const UNSOLICITED: Problem = problem("federation/403-unsolicited", "unsolicited");
pub const VERSION_TOO_LARGE: Problem =
    problem("federation/413-version-too-large", "version_too_large");
pub const QUOTA_EXCEEDED: Problem = problem("federation/507-quota-exceeded", "quota_exceeded");

/// The response has exactly this status.
pub fn status(response: &Response, expected: u16) -> Result<(), String> {
    ensure!(
        response.status == expected,
        "expected status {expected}, got {}: {}",
        response.status,
        response.excerpt()
    );
    Ok(())
}

/// The response has this status and a JSON body, which it returns.
pub fn json(response: &Response, expected: u16) -> Result<Value, String> {
    status(response, expected)?;
    response.json()
}

/// The response is this problem: status, `application/problem+json`, a
/// `type` URL ending in `/error-types/<group>/<status>-<slug>`, `status`,
/// `code` and a `title`. Returns the problem object.
pub fn problem_response(response: &Response, expected: Problem) -> Result<Value, String> {
    ensure!(
        response.status == expected.status(),
        "expected {} ({}), got status {}: {}",
        expected.status(),
        expected.path,
        response.status,
        response.excerpt()
    );
    let content_type = response.header("content-type").unwrap_or_default();
    ensure!(
        content_type.starts_with("application/problem+json"),
        "expected Content-Type application/problem+json, got {content_type:?}"
    );
    let body = response.json()?;
    let kind = str_at(&body, "/type")?;
    let suffix = format!("/error-types/{}", expected.path);
    ensure!(
        kind.ends_with(&suffix) && kind.starts_with("http"),
        "expected a type URL ending in {suffix}, got {kind:?} (detail: {})",
        body["detail"]
    );
    ensure_eq!(
        body["status"].as_u64(),
        Some(u64::from(expected.status())),
        "problem status"
    );
    ensure_eq!(body["code"].as_str(), Some(expected.code), "problem code");
    ensure!(
        body["title"]
            .as_str()
            .is_some_and(|title| !title.is_empty()),
        "problem has no title: {body}"
    );
    Ok(body)
}

/// The value at a JSON pointer.
pub fn at<'a>(value: &'a Value, pointer: &str) -> Result<&'a Value, String> {
    value
        .pointer(pointer)
        .ok_or_else(|| format!("no {pointer} in {}", brief(value)))
}

/// The string at a JSON pointer.
pub fn str_at<'a>(value: &'a Value, pointer: &str) -> Result<&'a str, String> {
    at(value, pointer)?
        .as_str()
        .ok_or_else(|| format!("{pointer} is not a string in {}", brief(value)))
}

/// The array at a JSON pointer.
pub fn array_at<'a>(value: &'a Value, pointer: &str) -> Result<&'a Vec<Value>, String> {
    at(value, pointer)?
        .as_array()
        .ok_or_else(|| format!("{pointer} is not an array in {}", brief(value)))
}

/// A JSON value cut short for a failure message.
pub fn brief(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 400 {
        format!("{}…", text.chars().take(400).collect::<String>())
    } else {
        text
    }
}

/// `YYYY-MM-DDTHH:MM:SS.fffffffZ`: UTC, 7 fractional digits.
pub fn is_record_date(text: &str) -> bool {
    let pattern = "dddd-dd-ddTdd:dd:dd.dddddddZ";
    text.len() == pattern.len()
        && text.chars().zip(pattern.chars()).all(|(c, p)| match p {
            'd' => c.is_ascii_digit(),
            _ => c == p,
        })
}

/// `length` lowercase hex characters.
pub fn is_hex(text: &str, length: usize) -> bool {
    text.len() == length && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
