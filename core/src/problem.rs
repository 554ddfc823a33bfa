//! The problem+json catalogue (RFC 9457, PROTOCOL.md §11): every error a
//! client can see is one [`ProblemType`], which fixes its status, type URL,
//! code and title in this one place.

use serde::Serialize;

/// The media type of every error response.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

macro_rules! problem_types {
    ($($variant:ident => $group:literal, $status:literal, $slug:literal, $code:literal, $title:literal, $explanation:literal;)*) => {
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

            /// What the error means and what a client should do about it, in
            /// one or two sentences: the text of the type's documentation page
            /// (see [`crate::service::docs`]).
            pub const fn explanation(self) -> &'static str {
                match self { $(ProblemType::$variant => $explanation,)* }
            }
        }
    };
}

problem_types! {
    NewRecordMissingProperties => "new-record", 400, "missing-properties", "missing_properties", "The new record lacks required properties",
        "Creating a record needs at least `type` and `content` in the body. Add them and send the request again; `id`, `created_at` and `permissions` are optional.";
    UpdateRecordMissingProperties => "update-record", 400, "missing-properties", "missing_properties", "The update lacks required properties",
        "The body of an update lacks a property the update needs, such as the record's new `content`. Add it and send the request again.";
    InvalidJson => "request", 400, "invalid-json", "invalid_json", "The body is not valid JSON",
        "The request body could not be parsed as JSON. Send one well-formed JSON document, encoded in UTF-8.";
    InvalidBody => "request", 400, "invalid-body", "invalid_body", "The body is not valid for this request",
        "The body is JSON but not a valid request of this kind: a field has the wrong shape, or an `id` or `author` disagrees with the path. Read `detail`, correct the body and send it again.";
    InvalidParameter => "request", 400, "invalid-parameter", "invalid_parameter", "A query parameter is invalid",
        "A query parameter has a malformed or out-of-range value, such as a `page_size` outside 1 to 200 or a bad `sort`. `detail` names the parameter; correct its value.";
    InvalidFilter => "request", 400, "invalid-filter", "invalid_filter", "A filter is invalid",
        "A `filter` parameter does not follow the filter grammar, or exceeds 4 KiB, 32 conditions or 8 levels of parentheses. `detail` gives the position of the fault.";
    SchemaViolation => "record", 400, "schema-violation", "schema_violation", "The record does not match its type's schema",
        "The record does not match the schema of its type. `detail` holds the JSON path of the value at fault; correct it and write the record again.";
    InvalidLink => "record", 400, "invalid-link", "invalid_link", "A link in the record does not resolve",
        "A link in the record does not resolve: an unknown entity, a record or version the writer cannot read, or a blob the writer did not upload or that has expired. `detail` holds the path of the link.";
    InvalidSchema => "record", 400, "invalid-schema", "invalid_schema", "The type's schema is invalid",
        "The schema in this Type record is not a valid schema. `detail` holds the JSON path of the fault inside the schema.";
    InvalidNotification => "federation", 400, "invalid-notification", "invalid_notification", "The notification is not valid",
        "A notification from another server must be `{\"versions\": [version links]}` with 1 to 100 links, each to a version of a record its signer authored. `detail` says what is wrong; the sender should not send it again unchanged.";
    TooManyEvents => "events", 400, "too-many-events", "too_many_events", "Too many events are pending; list the records instead",
        "More than 100 events were waiting for this events stream, so the server refused to catch up. List the records to resynchronise, then open a new stream.";
    MissingAuthorization => "auth", 401, "missing-authorization", "missing_authorization", "The request is not authenticated",
        "This request must be signed by an authorized app, or carry a bearer token, and it was neither. Sign it and send it again.";
    MalformedAuthorization => "auth", 401, "malformed-authorization", "malformed_authorization", "The authorization is malformed",
        "The `Authorization` header or the bearer token could not be read: bad syntax, a missing or repeated parameter, an unsupported algorithm or a header that cannot be signed. Sending it again unchanged fails again.";
    InvalidSignature => "auth", 401, "invalid-signature", "invalid_signature", "The signature does not match the request",
        "The signature does not verify against the request the server received, or the signed body hash does not match the body. Check that the client signs the exact method, host, port, path and query it sends.";
    StaleTimestamp => "auth", 401, "stale-timestamp", "stale_timestamp", "The request's timestamp is outside the accepted window",
        "The request's timestamp is too far from the server's clock, or the bearer token has expired. Check the client's clock or get a new token, then sign the request again.";
    ReplayedRequest => "auth", 401, "replayed-request", "replayed_request", "The request was already received",
        "A request with this nonce was already received from this app. Sign every request with a fresh random nonce.";
    UnknownApp => "auth", 401, "unknown-app", "unknown_app", "The app is not registered or not authorized",
        "The app that signed the request is not registered with this user, or its authorization was revoked. Register the app and ask the user to authorize it again.";
    UnknownServer => "auth", 401, "unknown-server", "unknown_server", "The signing server could not be checked",
        "The request is signed for an entity whose server this server could not discover, or whose Entity record publishes no signing key. Check that the entity's host answers discovery over HTTPS and that its Entity record lists the key.";
    Forbidden => "auth", 403, "forbidden", "forbidden", "The app is not allowed to do this",
        "The app is authenticated, but its grant does not cover this action, for example a write to a record type outside its `write` scope. Ask the user for a wider authorization.";
    Unsolicited => "federation", 403, "unsolicited", "unsolicited", "The notified version concerns nobody here",
        "A server sent a version from an entity this user has never linked to, and the version does not name the user (not in its permissions, no link to the user or the user's records). Such versions are not stored. An honest server never sends them; do not send it again.";
    RecordNotFound => "record", 404, "not-found", "record_not_found", "The record does not exist",
        "No record exists at this address, or the requester may not read it; the two are not told apart. Check the entity and the record id.";
    BlobNotFound => "blob", 404, "not-found", "blob_not_found", "The blob does not exist",
        "The record's latest version does not link this blob under this file name, or the record is deleted. Fetch the record again and follow the blob link it holds.";
    NotFound => "request", 404, "not-found", "not_found", "Nothing is served at this address",
        "Nothing is served at this address: no such endpoint, or no such user. Take the endpoint URLs from the user's Entity record.";
    MethodNotAllowed => "request", 405, "method-not-allowed", "method_not_allowed", "This method is not allowed here",
        "This endpoint does not answer this HTTP method. The `Allow` header lists the methods it answers.";
    VersionConflict => "record", 409, "version-conflict", "version_conflict", "The record has a newer version",
        "The `parent_hash` given is not the record's latest version: it changed since the client read it. Fetch the latest version (`detail` names its hash), apply the change to it and write again.";
    IdConflict => "record", 409, "id-conflict", "id_conflict", "Another record already has this id",
        "A record with this id already exists, and the request is not an exact replay of its creation. Use a new id, or fetch the existing record.";
    RecordDeleted => "record", 410, "deleted", "record_deleted", "The record is deleted",
        "The record is deleted: its latest version is a tombstone, which cannot be changed. Create a new record instead.";
    LengthRequired => "blob", 411, "length-required", "length_required", "The upload needs a Content-Length",
        "A blob upload must state its size in a `Content-Length` header. Send the upload again with its length.";
    BodyTooLarge => "request", 413, "body-too-large", "body_too_large", "The body is too large",
        "The request body is larger than this server accepts. Send a smaller body; the server info endpoint lists the limits in force.";
    VersionTooLarge => "federation", 413, "version-too-large", "version_too_large", "A notified version is too large",
        "A version another server notified is larger than this server's JSON body limit, so no app here could have written it and it is not stored. Sending it again does not help.";
    UriTooLong => "request", 414, "uri-too-long", "uri_too_long", "The request target is too long",
        "The request target (path and query) is longer than this server accepts. Shorten the query, for example by splitting a long filter over several requests.";
    UnsupportedMediaType => "request", 415, "unsupported-media-type", "unsupported_media_type", "The body's media type is not accepted here",
        "The body's `Content-Type` is missing or not accepted here: JSON endpoints take `application/json`, and a blob upload needs the blob's own media type. Send the right `Content-Type`.";
    RangeNotSatisfiable => "blob", 416, "range-not-satisfiable", "range_not_satisfiable", "The range lies outside the blob",
        "The requested byte range lies outside the blob. `Content-Range` gives the blob's size; ask for a range inside it, or for the whole blob.";
    RateLimited => "request", 429, "rate-limited", "rate_limited", "Too many requests; retry later",
        "Too many requests came from this app or address, or too many event streams are open. Wait as long as `Retry-After` says, then retry.";
    HeadersTooLarge => "request", 431, "headers-too-large", "headers_too_large", "The request headers are too large",
        "The request's headers are larger than this server accepts. Send fewer or shorter headers.";
    PeerUnreachable => "federation", 502, "peer-unreachable", "peer_unreachable", "Another server could not be reached",
        "This server had to ask another entity's server and could not reach it: its name did not resolve, the connection failed, or it did not answer in time. `detail` names the server; retry later.";
    PeerRefused => "federation", 502, "peer-refused", "peer_refused", "This server refused to talk to another server",
        "Another entity's server is at an address or answered in a way this server refuses to follow: a loopback or private address, a redirect to another host, or an answer larger than the limit. `detail` says which; retrying does not help until that server changes.";
    InvalidPeerAnswer => "federation", 502, "invalid-peer-answer", "invalid_peer_answer", "Another server answered with something invalid",
        "Another entity's server answered, but not with what the protocol allows: no discovery link, malformed JSON, a record under an author it does not host, or a version whose hash does not match its content. Nothing of the answer was stored.";
    Internal => "server", 500, "internal", "internal", "The server failed to handle the request",
        "The server failed while handling the request. Retry later; a write sent with its `id` or `parent_hash` and its `created_at` is safe to replay.";
    NotImplemented => "server", 501, "not-implemented", "not_implemented", "This server does not implement this",
        "This server does not implement this endpoint yet, such as notifications from other servers before federation exists. Retrying does not help.";
    Unavailable => "server", 503, "unavailable", "unavailable", "The server is unavailable; retry later",
        "The server cannot handle requests right now, for example while it starts or stops. Retry later, after `Retry-After` when the response gives it.";
    LinkUnreachable => "federation", 503, "link-unreachable", "link_unreachable", "A linked entity's server cannot be reached right now",
        "The record links an entity, or a record or version of an entity, that this server does not know yet, and that entity's server could not be reached to resolve it: the connection failed, it did not answer in time, or it answered that it is unavailable. Cannot reach is not does not exist: nothing was stored, and the same request may succeed later. Send it again after `Retry-After`.";
    QuotaExceeded => "federation", 507, "quota-exceeded", "quota_exceeded", "The user's store takes no more from other servers",
        "The versions other servers sent this user fill the quota the server keeps for them (versions and bytes, apart for entities the user knows and strangers). Nothing was stored. The sender may retry later: it is accepted once the owner frees room or raises the quota.";
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
    /// The problem type: status, type URL, code and title.
    pub kind: ProblemType,
    /// What exactly is at fault, for the body's `detail`; `None` leaves it out.
    pub detail: Option<String>,
}

impl Problem {
    /// A problem of this type, without a detail.
    pub fn new(kind: ProblemType) -> Self {
        Self { kind, detail: None }
    }

    /// The problem with this detail.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The HTTP status of its type.
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
