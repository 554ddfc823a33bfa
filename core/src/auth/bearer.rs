//! Bearer tokens: `?bearer=<base64 of id\ts\signature>` grants GET of one
//! resource until `ts` (spec §5.3, PROTOCOL.md §10).

use std::borrow::Cow;

use ed25519_dalek::Signature;

use super::header::{push_authorization_id, push_request_lines};
use super::{
    AppKey, AuthError, Malformed, SignedRequest, decode_base64_any, decode_signature, parse_millis,
    push_line,
};
use crate::model::dialect::Dialect;
use crate::model::{RecordDate, RecordId};

/// The query parameter that carries a token.
pub const BEARER_PARAMETER: &str = "bearer";

/// The furthest ahead a token's expiry may lie: 90 days.
pub const MAX_BEARER_LIFETIME_MS: i64 = 90 * 24 * 3600 * 1000;

/// A parsed bearer token.
#[derive(Debug, Clone)]
pub struct BearerToken {
    /// The app record that signed the token.
    pub app_id: RecordId,
    /// Expiry, milliseconds since the Unix epoch.
    pub expires_at_ms: i64,
    signature: Signature,
}

impl BearerToken {
    /// Finds the `bearer` parameter in a request target and parses it.
    /// `None` when the target carries no token.
    pub fn from_target(path_and_query: &str) -> Option<Result<Self, AuthError>> {
        let (_, query) = path_and_query.split_once('?')?;
        let value = query
            .split('&')
            .find_map(|pair| pair.strip_prefix(BEARER_PARAMETER)?.strip_prefix('='))?;
        let decoded = percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .ok();
        Some(
            decoded
                .ok_or_else(|| Malformed::BearerToken.into())
                .and_then(|token| Self::parse(&token)),
        )
    }

    /// Parses a token: standard or URL-safe base64, padded or not, of the
    /// text `<app record id>\<expiry ms>\<signature in base64>`.
    pub fn parse(token: &str) -> Result<Self, AuthError> {
        let text = decode_base64_any(token).ok_or(Malformed::BearerToken)?;
        let text = std::str::from_utf8(&text).map_err(|_| Malformed::BearerToken)?;
        let mut parts = text.split('\\');
        let (Some(id), Some(ts), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Malformed::BearerToken.into());
        };
        Ok(Self {
            app_id: id.parse().map_err(|_| Malformed::InvalidParameter("id"))?,
            expires_at_ms: parse_millis(ts, "ts")?,
            signature: decode_signature(signature, "signature")?,
        })
    }

    /// A token is usable from now until its expiry, and its expiry may lie at
    /// most [`MAX_BEARER_LIFETIME_MS`] ahead.
    pub fn check_expiry(&self, now: RecordDate) -> Result<(), AuthError> {
        let remaining = self.expires_at_ms.saturating_sub(now.unix_millis());
        if (0..=MAX_BEARER_LIFETIME_MS).contains(&remaining) {
            Ok(())
        } else {
            Err(AuthError::StaleTimestamp)
        }
    }

    /// The signature input for one signed target. The input always names
    /// `GET`, and has an empty line where a request signature has its nonce.
    pub fn signature_input(
        &self,
        dialect: Dialect,
        authorization_id: Option<&RecordId>,
        request: &SignedRequest<'_>,
    ) -> Vec<u8> {
        bearer_input(dialect, self.expires_at_ms, authorization_id, request)
    }

    /// Verifies the token against the request it came with. The signed target
    /// is the request's with the `bearer` parameter removed; clients that
    /// signed the path alone are accepted too.
    pub fn verify(
        &self,
        dialect: Dialect,
        key: &AppKey,
        authorization_id: Option<&RecordId>,
        request: &SignedRequest<'_>,
    ) -> Result<(), AuthError> {
        let check = |target: &str| {
            let signed = SignedRequest {
                path_and_query: target,
                ..*request
            };
            key.verify(
                &self.signature_input(dialect, authorization_id, &signed),
                &self.signature,
            )
        };
        let without_bearer = target_without_bearer(request.path_and_query);
        let path_only = request.path_and_query.split('?').next().unwrap_or_default();
        check(&without_bearer).or_else(|error| match without_bearer != path_only {
            true => check(path_only),
            false => Err(error),
        })
    }
}

/// The request target with every `bearer` parameter removed, the other
/// parameters left exactly as they were, and no `?` if none remain.
fn target_without_bearer(path_and_query: &str) -> Cow<'_, str> {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return Cow::Borrowed(path_and_query);
    };
    let is_bearer = |pair: &&str| pair.split('=').next() == Some(BEARER_PARAMETER);
    if !query.split('&').any(|pair| is_bearer(&pair)) {
        return Cow::Borrowed(path_and_query);
    }
    let kept: Vec<&str> = query.split('&').filter(|pair| !is_bearer(pair)).collect();
    if kept.is_empty() {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(format!("{path}?{}", kept.join("&")))
    }
}

/// What a bearer token signs: the URL prefix, the algorithm, the expiry, an
/// empty nonce line, the authorization id and `GET` of the target.
pub(super) fn bearer_input(
    dialect: Dialect,
    expires_at_ms: i64,
    authorization_id: Option<&RecordId>,
    request: &SignedRequest<'_>,
) -> Vec<u8> {
    let mut input = Vec::with_capacity(256);
    push_line(&mut input, dialect.names().url_prefix.as_bytes());
    push_line(&mut input, b"ed25519");
    push_line(&mut input, expires_at_ms.to_string().as_bytes());
    push_line(&mut input, b"");
    push_authorization_id(&mut input, authorization_id);
    push_request_lines(
        &mut input,
        &SignedRequest {
            method: "GET",
            ..*request
        },
    );
    input
}

#[cfg(test)]
mod tests {
    use super::target_without_bearer;

    #[test]
    fn bearer_is_removed_and_the_rest_kept_verbatim() {
        assert_eq!(target_without_bearer("/a?bearer=x"), "/a");
        assert_eq!(target_without_bearer("/a?x=%27&bearer=y&z"), "/a?x=%27&z");
        assert_eq!(target_without_bearer("/a?bearerish=1"), "/a?bearerish=1");
        assert_eq!(target_without_bearer("/a"), "/a");
    }
}
