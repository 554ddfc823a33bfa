//! Response header values fixed by the protocol: CORS (spec §4.0,
//! PROTOCOL.md §12) and `Cache-Control` (PROTOCOL.md §9).

use crate::model::dialect::Dialect;

/// `Cache-Control` of every response except a blob download.
pub const NO_CACHE: &str = "no-cache";

/// Whether an `Accept` header names `text/html` (with a quality above 0):
/// a browser navigating, which a page answers rather than an API reply.
pub fn prefers_html(accept: Option<&str>) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            parts
                .next()
                .is_some_and(|essence| essence.eq_ignore_ascii_case("text/html"))
                && parts.all(|param| {
                    !param
                        .strip_prefix("q=")
                        .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0))
                })
        })
    })
}

/// The status of a preflight (`OPTIONS`) response.
pub const PREFLIGHT_STATUS: u16 = 204;

/// The longest time a bearer-authenticated private blob may be cached.
pub const BEARER_CACHE_MAX_SECS: i64 = 7_200;

impl Dialect {
    /// The exactly four headers of an `OPTIONS` answer.
    pub fn preflight_headers(self) -> [(&'static str, &'static str); 4] {
        [
            (
                "access-control-allow-headers",
                self.names().cors_allow_headers,
            ),
            (
                "access-control-allow-methods",
                "HEAD,GET,POST,PUT,DELETE,OPTIONS",
            ),
            ("access-control-allow-origin", "*"),
            ("access-control-max-age", "43200"),
        ]
    }

    /// The CORS headers of every other response.
    pub fn cors_headers(self) -> [(&'static str, &'static str); 2] {
        [
            ("access-control-allow-origin", "*"),
            (
                "access-control-expose-headers",
                self.names().cors_expose_headers,
            ),
        ]
    }
}

/// `X-Content-Type-Options` on every answer but a preflight: a browser
/// never guesses a script or a page from bytes served as something else
/// (a blob an app uploaded as `image/png`, a problem+json body).
pub const NOSNIFF: (&str, &str) = ("x-content-type-options", "nosniff");

/// `Strict-Transport-Security` of a server reached at `base_url`: a year,
/// for an HTTPS base URL whose host is a name the public can reach. None
/// for plain HTTP and for loopback hosts (`localhost`, `127.0.0.1`,
/// `[::1]`), where a browser that remembered it would refuse every other
/// development server on that host.
pub fn strict_transport_security(base_url: &str) -> Option<&'static str> {
    let rest = base_url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    let host = host.to_ascii_lowercase();
    let loopback = host == "localhost"
        || host.ends_with(".localhost")
        || host == "[::1]"
        || host.starts_with("127.");
    (!loopback && !host.is_empty()).then_some(HSTS)
}

/// The value [`strict_transport_security`] sends: one year.
const HSTS: &str = "max-age=31536000";

/// The status of the answer that sends a plain-HTTP request to HTTPS: a
/// permanent redirect that keeps the method and body.
pub const HTTPS_REDIRECT_STATUS: u16 = 308;

/// Where a plain-HTTP request is sent instead ([`HTTPS_REDIRECT_STATUS`],
/// PROTOCOL.md: only HTTPS): the same URL with the `https` scheme, on the
/// default port. `None` for a request that came over HTTPS, or when
/// `plain_allowed` (local development).
pub fn https_redirect(url: &str, plain_allowed: bool) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let (authority, target) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    (!plain_allowed).then(|| https_location(Some(authority), target, 443))
}

/// The HTTPS URL for a plain-HTTP request of `target` to `authority` (its
/// `Host`, perhaps with a port, which is dropped): the same host on
/// `https_port`, named only when it is not 443. A request without a
/// `Host` goes to `localhost`.
pub fn https_location(authority: Option<&str>, target: &str, https_port: u16) -> String {
    let host = authority.map_or("localhost", |authority| {
        match authority.rsplit_once(':') {
            // An IPv6 literal's colons are inside its brackets.
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => authority,
        }
    });
    let target = if target.starts_with('/') { target } else { "/" };
    match https_port {
        443 => format!("https://{host}{target}"),
        port => format!("https://{host}:{port}{target}"),
    }
}

/// Who a blob download is for, which decides how long and where it may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobAudience {
    /// The record is public.
    Public,
    /// A private record, requested with a signed `Authorization` header.
    PrivateSigned,
    /// A private record, requested with a bearer token that expires in
    /// `remaining_secs` seconds.
    PrivateBearer {
        /// Seconds until the token expires.
        remaining_secs: i64,
    },
}

/// The `Cache-Control` of a successful blob download.
pub fn blob_cache_control(audience: BlobAudience) -> String {
    match audience {
        BlobAudience::Public => "max-age=31536000, s-maxage=7200, immutable".to_owned(),
        BlobAudience::PrivateSigned => "private, max-age=31536000, immutable".to_owned(),
        BlobAudience::PrivateBearer { remaining_secs } => {
            let n = remaining_secs.clamp(0, BEARER_CACHE_MAX_SECS);
            format!("max-age={n}, s-maxage={n}")
        }
    }
}

/// Checks the `Content-Type` of a request to a JSON endpoint (PROTOCOL.md
/// §5): a body must be `application/json`, with any parameters (such as
/// `; charset=utf-8`) and in any letter case; a request without a body needs
/// no type. Anything else is `request/415-unsupported-media-type`.
pub fn check_json_content_type(
    content_type: Option<&str>,
    has_body: bool,
) -> Result<(), crate::problem::Problem> {
    use crate::problem::{Problem, ProblemType};
    if !has_body {
        return Ok(());
    }
    let is_json = content_type
        .and_then(|text| text.parse::<crate::model::MediaType>().ok())
        .is_some_and(|media| media.essence().eq_ignore_ascii_case("application/json"));
    if is_json {
        Ok(())
    } else {
        Err(
            Problem::new(ProblemType::UnsupportedMediaType).with_detail(match content_type {
                Some(text) => format!("a JSON endpoint takes application/json, not `{text}`"),
                None => "a request body needs `Content-Type: application/json`".to_owned(),
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preflight_matches_the_spec() {
        let headers = Dialect::Svc.preflight_headers();
        assert_eq!(
            headers[0].1,
            "Authorization,Content-Type,X-Svc-Client-Id,Last-Event-Id,X-Svc-PublicKey"
        );
        assert_eq!(headers[3], ("access-control-max-age", "43200"));
        assert_eq!(
            headers,
            [
                (
                    "access-control-allow-headers",
                    "Authorization,Content-Type,X-Svc-Client-Id,Last-Event-Id,X-Svc-PublicKey"
                ),
                (
                    "access-control-allow-methods",
                    "HEAD,GET,POST,PUT,DELETE,OPTIONS"
                ),
                ("access-control-allow-origin", "*"),
                ("access-control-max-age", "43200"),
            ]
        );
    }

    #[test]
    fn bearer_cache_lifetime_is_capped() {
        assert_eq!(
            blob_cache_control(BlobAudience::PrivateBearer { remaining_secs: 60 }),
            "max-age=60, s-maxage=60"
        );
        assert_eq!(
            blob_cache_control(BlobAudience::PrivateBearer {
                remaining_secs: 90_000
            }),
            "max-age=7200, s-maxage=7200"
        );
    }
}

#[cfg(test)]
mod https_tests {
    use super::{HSTS, https_location, https_redirect, strict_transport_security};

    #[test]
    fn hsts_is_sent_for_public_https_hosts_only() {
        for public in [
            "https://folio.example",
            "https://folio.example:8443/",
            "https://Folio.Example/x",
        ] {
            assert_eq!(strict_transport_security(public), Some(HSTS), "{public}");
        }
        for local in [
            "http://folio.example",
            "https://localhost:8443",
            "https://LOCALHOST",
            "https://app.localhost",
            "https://127.0.0.1:8443",
            "https://[::1]:8443/",
            "https://",
        ] {
            assert_eq!(strict_transport_security(local), None, "{local}");
        }
    }

    #[test]
    fn plain_http_is_sent_to_https_unless_allowed() {
        assert_eq!(
            https_redirect("http://folio.example/api/a/records?x=1", false).as_deref(),
            Some("https://folio.example/api/a/records?x=1")
        );
        assert_eq!(https_redirect("http://127.0.0.1:8787/", true), None);
        assert_eq!(https_redirect("https://folio.example/", false), None);
        assert_eq!(
            https_redirect("http://folio.example:80", false).as_deref(),
            Some("https://folio.example/")
        );
    }

    #[test]
    fn the_location_names_the_https_port_unless_it_is_the_default() {
        assert_eq!(
            https_location(Some("localhost:8080"), "/a?b=1", 8443),
            "https://localhost:8443/a?b=1"
        );
        assert_eq!(
            https_location(Some("folio.example"), "/", 443),
            "https://folio.example/"
        );
        assert_eq!(
            https_location(Some("[::1]:8080"), "/x", 443),
            "https://[::1]/x"
        );
        assert_eq!(https_location(Some("[::1]"), "/x", 443), "https://[::1]/x");
        assert_eq!(https_location(None, "*", 443), "https://localhost/");
    }
}
