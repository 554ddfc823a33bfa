//! The problem+json catalogue (RFC 9457, PROTOCOL.md §11): every error a
//! client can see is one [`ProblemType`], which fixes its status, type URL,
//! code and title in this one place.

use serde::Serialize;

/// The media type of every error response.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

macro_rules! problem_types {
    ($($variant:ident => $group:literal, $status:literal, $slug:literal, $code:literal, $title:literal;)*) => {
        /// One documented error type.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ProblemType {
            $(
                #[doc = concat!("`", $group, "/", $status, "-", $slug, "`: ", $title, ".")]
                $variant,
            )*
        }

        impl ProblemType {
            /// Every documented type, in catalogue order.
            pub const ALL: &'static [ProblemType] = &[$(ProblemType::$variant),*];

            /// The HTTP status.
            pub const fn status(self) -> u16 {
                match self { $(ProblemType::$variant => $status,)* }
            }

            /// `group/status-slug`, the part of the type URL after `{docs_url}/error-types/`.
            pub const fn type_path(self) -> &'static str {
                match self { $(ProblemType::$variant => concat!($group, "/", $status, "-", $slug),)* }
            }

            /// The snake_case `code` of the body.
            pub const fn code(self) -> &'static str {
                match self { $(ProblemType::$variant => $code,)* }
            }

            /// The short human-readable `title` of the body.
            pub const fn title(self) -> &'static str {
                match self { $(ProblemType::$variant => $title,)* }
            }
        }
    };
}

problem_types! {
    NewRecordMissingProperties => "new-record", 400, "missing-properties", "missing_properties", "The new record lacks required properties";
    UpdateRecordMissingProperties => "update-record", 400, "missing-properties", "missing_properties", "The update lacks required properties";
    InvalidJson => "request", 400, "invalid-json", "invalid_json", "The body is not valid JSON";
    InvalidBody => "request", 400, "invalid-body", "invalid_body", "The body is not valid for this request";
    InvalidParameter => "request", 400, "invalid-parameter", "invalid_parameter", "A query parameter is invalid";
    InvalidFilter => "request", 400, "invalid-filter", "invalid_filter", "A filter is invalid";
    SchemaViolation => "record", 400, "schema-violation", "schema_violation", "The record does not match its type's schema";
    InvalidLink => "record", 400, "invalid-link", "invalid_link", "A link in the record does not resolve";
    InvalidSchema => "record", 400, "invalid-schema", "invalid_schema", "The type's schema is invalid";
    TooManyEvents => "events", 400, "too-many-events", "too_many_events", "Too many events are pending; list the records instead";
    MissingAuthorization => "auth", 401, "missing-authorization", "missing_authorization", "The request is not authenticated";
    MalformedAuthorization => "auth", 401, "malformed-authorization", "malformed_authorization", "The authorization is malformed";
    InvalidSignature => "auth", 401, "invalid-signature", "invalid_signature", "The signature does not match the request";
    StaleTimestamp => "auth", 401, "stale-timestamp", "stale_timestamp", "The request's timestamp is outside the accepted window";
    ReplayedRequest => "auth", 401, "replayed-request", "replayed_request", "The request was already received";
    UnknownApp => "auth", 401, "unknown-app", "unknown_app", "The app is not registered or not authorized";
    Forbidden => "auth", 403, "forbidden", "forbidden", "The app is not allowed to do this";
    RecordNotFound => "record", 404, "not-found", "record_not_found", "The record does not exist";
    BlobNotFound => "blob", 404, "not-found", "blob_not_found", "The blob does not exist";
    NotFound => "request", 404, "not-found", "not_found", "Nothing is served at this address";
    MethodNotAllowed => "request", 405, "method-not-allowed", "method_not_allowed", "This method is not allowed here";
    VersionConflict => "record", 409, "version-conflict", "version_conflict", "The record has a newer version";
    IdConflict => "record", 409, "id-conflict", "id_conflict", "Another record already has this id";
    RecordDeleted => "record", 410, "deleted", "record_deleted", "The record is deleted";
    LengthRequired => "blob", 411, "length-required", "length_required", "The upload needs a Content-Length";
    BodyTooLarge => "request", 413, "body-too-large", "body_too_large", "The body is too large";
    UriTooLong => "request", 414, "uri-too-long", "uri_too_long", "The request target is too long";
    UnsupportedMediaType => "request", 415, "unsupported-media-type", "unsupported_media_type", "The body's media type is not accepted here";
    RangeNotSatisfiable => "blob", 416, "range-not-satisfiable", "range_not_satisfiable", "The range lies outside the blob";
    RateLimited => "request", 429, "rate-limited", "rate_limited", "Too many requests; retry later";
    HeadersTooLarge => "request", 431, "headers-too-large", "headers_too_large", "The request headers are too large";
    Internal => "server", 500, "internal", "internal", "The server failed to handle the request";
    NotImplemented => "server", 501, "not-implemented", "not_implemented", "This server does not implement this";
    Unavailable => "server", 503, "unavailable", "unavailable", "The server is unavailable; retry later";
}

/// The `docs_url` a server uses unless configured otherwise: its own `{base_url}/docs`.
pub fn default_docs_url(base_url: &str) -> String {
    format!("{}/docs", base_url.trim_end_matches('/'))
}

impl ProblemType {
    /// The type URL: `{docs_url}/error-types/{group}/{status}-{slug}`.
    pub fn type_url(self, docs_url: &str) -> String {
        format!(
            "{}/error-types/{}",
            docs_url.trim_end_matches('/'),
            self.type_path()
        )
    }
}

/// An error response: a type and, where it helps, a detail (a JSON path, the
/// latest hash, the parameter at fault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemType,
    pub detail: Option<String>,
}

impl Problem {
    pub fn new(kind: ProblemType) -> Self {
        Self { kind, detail: None }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn status(&self) -> u16 {
        self.kind.status()
    }

    /// The `application/problem+json` body.
    pub fn to_json(&self, docs_url: &str) -> String {
        #[derive(Serialize)]
        struct Body<'a> {
            #[serde(rename = "type")]
            type_url: String,
            status: u16,
            title: &'static str,
            code: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            detail: Option<&'a str>,
        }
        let body = Body {
            type_url: self.kind.type_url(docs_url),
            status: self.kind.status(),
            title: self.kind.title(),
            code: self.kind.code(),
            detail: self.detail.as_deref(),
        };
        // Serializing plain strings and integers cannot fail.
        serde_json::to_string(&body).unwrap_or_default()
    }
}

impl From<ProblemType> for Problem {
    fn from(kind: ProblemType) -> Self {
        Self::new(kind)
    }
}
