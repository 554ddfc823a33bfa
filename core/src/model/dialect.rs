//! Wire names (PROTOCOL.md §1). Every name that differs between the spec's
//! protocol (`svc`) and the original one it renames (`baq`) comes from a
//! [`Dialect`], so the same server code speaks either.

/// An HTTP header name, in the form responses and CORS lists spell it and in
/// the lowercase form the `headers` signature parameter uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderName {
    /// The name as responses and CORS lists spell it: `X-Svc-Client-Id`.
    pub display: &'static str,
    /// The name in lowercase, as the `headers` signature parameter lists it: `x-svc-client-id`.
    pub lowercase: &'static str,
}

impl HeaderName {
    /// Case-insensitive comparison, as HTTP header names compare.
    pub fn matches(&self, name: &str) -> bool {
        self.lowercase.eq_ignore_ascii_case(name)
    }
}

/// The `Range` and `Last-Event-Id` headers, the same in both dialects.
pub const RANGE: HeaderName = HeaderName {
    display: "Range",
    lowercase: "range",
};
/// The `Last-Event-Id` header, with which an events client resumes a stream.
pub const LAST_EVENT_ID: HeaderName = HeaderName {
    display: "Last-Event-Id",
    lowercase: "last-event-id",
};

/// Which names a server speaks. The default is [`Dialect::Svc`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// The spec's names: `SVC`, `svc.request`, `X-Svc-*`.
    #[default]
    Svc,
    /// The original protocol's names: `BAQ`, `baq.request`, `X-Baq-*`.
    Baq,
}

/// The names one dialect uses.
#[derive(Debug)]
pub struct DialectNames {
    /// The `Authorization` scheme.
    pub auth_scheme: &'static str,
    /// First line of a request signature's input.
    pub request_prefix: &'static str,
    /// First line of a bearer token's input.
    pub url_prefix: &'static str,
    /// First line of a server's request signature's input (federation).
    pub server_prefix: &'static str,
    /// The header with a client's random id; events the client caused are
    /// not sent back to it: `X-Svc-Client-Id`.
    pub client_id: HeaderName,
    /// The header carrying the SHA-256 of a signed request's body:
    /// `X-Svc-Content-SHA256`.
    pub content_sha256: HeaderName,
    /// A header a registration carries the app's key in, and its answer the
    /// server's; the one browsers may send (PROTOCOL.md §10): `X-Svc-PublicKey`.
    pub public_key: HeaderName,
    /// The other header a registration carries the app's key in, and its
    /// answer the server's (PROTOCOL.md §10): `X-Svc-Credentials`.
    pub credentials: HeaderName,
    /// The link relation of entity discovery: a constant, never derived from a URL setting.
    pub entity_relation: &'static str,
    /// `Access-Control-Allow-Headers` of a preflight response (spec §4.0).
    pub cors_allow_headers: &'static str,
    /// `Access-Control-Expose-Headers` of every other response (PROTOCOL.md §12).
    pub cors_expose_headers: &'static str,
}

macro_rules! dialect_names {
    ($scheme:literal, $lower:literal, $title:literal, $relation:literal) => {
        DialectNames {
            auth_scheme: $scheme,
            request_prefix: concat!($lower, ".request"),
            url_prefix: concat!($lower, ".url"),
            server_prefix: concat!($lower, ".server"),
            client_id: HeaderName {
                display: concat!("X-", $title, "-Client-Id"),
                lowercase: concat!("x-", $lower, "-client-id"),
            },
            content_sha256: HeaderName {
                display: concat!("X-", $title, "-Content-SHA256"),
                lowercase: concat!("x-", $lower, "-content-sha256"),
            },
            public_key: HeaderName {
                display: concat!("X-", $title, "-PublicKey"),
                lowercase: concat!("x-", $lower, "-publickey"),
            },
            credentials: HeaderName {
                display: concat!("X-", $title, "-Credentials"),
                lowercase: concat!("x-", $lower, "-credentials"),
            },
            entity_relation: $relation,
            cors_allow_headers: concat!(
                "Authorization,Content-Type,X-",
                $title,
                "-Client-Id,Last-Event-Id,X-",
                $title,
                "-PublicKey"
            ),
            cors_expose_headers: concat!(
                "Link, X-",
                $title,
                "-Credentials, X-",
                $title,
                "-PublicKey, Content-Range, Content-Disposition"
            ),
        }
    };
}

static SVC: DialectNames =
    dialect_names!("SVC", "svc", "Svc", "https://folio.dev/rels/entity-record");
static BAQ: DialectNames =
    dialect_names!("BAQ", "baq", "Baq", "https://baq.dev/rels/entity-record");

impl Dialect {
    /// The names this dialect uses.
    pub fn names(self) -> &'static DialectNames {
        match self {
            Dialect::Svc => &SVC,
            Dialect::Baq => &BAQ,
        }
    }

    /// The headers a request signature may cover: the spec's list plus the
    /// credentials header of app registration (PROTOCOL.md §10).
    pub fn signable_headers(self) -> [HeaderName; 6] {
        let names = self.names();
        [
            RANGE,
            names.client_id,
            names.content_sha256,
            names.public_key,
            LAST_EVENT_ID,
            names.credentials,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svc_names_are_the_specs() {
        let names = Dialect::Svc.names();
        assert_eq!(
            names.cors_allow_headers,
            "Authorization,Content-Type,X-Svc-Client-Id,Last-Event-Id,X-Svc-PublicKey"
        );
        assert_eq!(
            names.cors_expose_headers,
            "Link, X-Svc-Credentials, X-Svc-PublicKey, Content-Range, Content-Disposition"
        );
        assert_eq!(names.content_sha256.display, "X-Svc-Content-SHA256");
        assert_eq!(names.content_sha256.lowercase, "x-svc-content-sha256");
        assert_eq!(Dialect::Baq.names().request_prefix, "baq.request");
    }
}
