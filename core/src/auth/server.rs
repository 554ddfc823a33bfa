//! A server's signature on a request it sends for one of its users
//! (federation, `docs/federation.md` "Server identity").
//!
//! The header is the app header's scheme with an `entity` parameter in
//! place of `id`, always with the algorithm:
//!
//! ```text
//! Authorization: SVC entity="bob.example" algorithm="ed25519" ts="…" nonce="…"
//!                headers="x-svc-content-sha256" signature="…"
//! ```
//!
//! and the signature input is the app layout's, with the dialect's server
//! prefix (`svc.server`) on the first line and the entity where an app's
//! authorization id goes:
//!
//! ```text
//! svc.server
//! ed25519
//! {ts}
//! {nonce}
//! {entity}
//! {METHOD}
//! {path_and_query}
//! {host}
//! {port}
//! {header=value}…
//! ```
//!
//! The receiving server checks it with a key the entity publishes in its
//! Entity record (`signing_keys`), which it fetched from the entity's own
//! host over HTTPS; `ts` and the nonce are checked as an app's are.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer, SigningKey};

use super::header::push_request_lines;
use super::header::{header_names, signed_digest};
use super::sign::push_header_line;
use super::{
    AppKey, AuthError, HeaderLookup, MAX_NONCE_LEN, Malformed, SignedRequest, decode_signature,
    parse_millis, parse_parameters, push_line,
};
use crate::model::Entity;
use crate::model::dialect::Dialect;

/// A parsed server `Authorization` header.
#[derive(Debug, Clone)]
pub struct ServerAuthorization<'a> {
    dialect: Dialect,
    /// The entity whose server signed.
    pub entity: Entity,
    /// Request time, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// The header's `nonce`.
    pub nonce: &'a str,
    signed_headers: &'a str,
    signature: Signature,
}

impl Dialect {
    /// Whether an `Authorization` value of this dialect is a server's: its
    /// parameters name an `entity`. A value that does not parse is not.
    pub fn is_server_authorization(self, value: &str) -> bool {
        let scheme = self.names().auth_scheme;
        let Some((given, params)) = value.trim_matches([' ', '\t']).split_once(' ') else {
            return false;
        };
        let mut entity = false;
        given.eq_ignore_ascii_case(scheme)
            && parse_parameters(params, |name, _| {
                entity |= name.eq_ignore_ascii_case("entity");
                Ok(())
            })
            .is_ok()
            && entity
    }

    /// Parses a server `Authorization` value of this dialect: `entity`,
    /// `algorithm` (`ed25519`), `ts`, `nonce`, `headers` and `signature`,
    /// each once, in any order.
    pub fn parse_server_authorization<'a>(
        self,
        value: &'a str,
    ) -> Result<ServerAuthorization<'a>, AuthError> {
        let scheme = self.names().auth_scheme;
        let params = match value.trim_matches([' ', '\t']).split_once(' ') {
            Some((given, params)) if given.eq_ignore_ascii_case(scheme) => params,
            _ => return Err(Malformed::Scheme { expected: scheme }.into()),
        };
        const NAMES: [&str; 6] = ["entity", "algorithm", "ts", "nonce", "headers", "signature"];
        let mut raw: [Option<&'a str>; 6] = [None; 6];
        parse_parameters(params, |name, value| {
            match NAMES
                .iter()
                .position(|known| known.eq_ignore_ascii_case(name))
            {
                Some(i) if raw[i].is_some() => Err(Malformed::RepeatedParameter(NAMES[i])),
                Some(i) => {
                    raw[i] = Some(value);
                    Ok(())
                }
                None => Ok(()),
            }
        })?;
        let [entity, algorithm, ts, nonce, headers, signature] = raw;
        let required =
            |value: Option<&'a str>, name| value.ok_or(Malformed::MissingParameter(name));
        let entity: Entity = required(entity, "entity")?
            .parse()
            .map_err(|_| Malformed::InvalidParameter("entity"))?;
        if required(algorithm, "algorithm")? != "ed25519" {
            return Err(Malformed::UnsupportedAlgorithm.into());
        }
        let ts_ms = parse_millis(required(ts, "ts")?, "ts")?;
        let nonce = required(nonce, "nonce")?;
        if nonce.is_empty() || nonce.chars().count() > MAX_NONCE_LEN {
            return Err(Malformed::NonceLength.into());
        }
        let signed_headers = required(headers, "headers")?;
        self.check_signed_headers(signed_headers)?;
        let signature = decode_signature(required(signature, "signature")?, "signature")?;
        Ok(ServerAuthorization {
            dialect: self,
            entity,
            ts_ms,
            nonce,
            signed_headers,
            signature,
        })
    }
}

impl ServerAuthorization<'_> {
    /// Whether `name` (lowercase) is among the signed headers.
    pub fn signs(&self, lowercase_name: &str) -> bool {
        header_names(self.signed_headers).any(|name| name == lowercase_name)
    }

    /// Verifies the signature against the request and one of the keys the
    /// entity publishes. Freshness and nonces are separate checks.
    pub fn verify(
        &self,
        keys: &[AppKey],
        request: &SignedRequest<'_>,
        headers: &(impl HeaderLookup + ?Sized),
    ) -> Result<(), AuthError> {
        let mut input =
            server_preamble(self.dialect, self.ts_ms, self.nonce, &self.entity, request);
        for name in header_names(self.signed_headers) {
            let value = headers
                .header(name)
                .ok_or_else(|| Malformed::SignedHeaderAbsent(name.to_owned()))?;
            push_header_line(&mut input, name, value);
        }
        match keys
            .iter()
            .any(|key| key.verify(&input, &self.signature).is_ok())
        {
            true => Ok(()),
            false => Err(AuthError::InvalidSignature),
        }
    }

    /// The body digest the signature vouches for (see
    /// [`AuthorizationHeader::signed_content_sha256`](super::AuthorizationHeader::signed_content_sha256)).
    pub fn signed_content_sha256(
        &self,
        headers: &(impl HeaderLookup + ?Sized),
    ) -> Result<Option<[u8; 32]>, AuthError> {
        signed_digest(self.dialect, |name| self.signs(name), headers)
    }
}

fn server_preamble(
    dialect: Dialect,
    ts_ms: i64,
    nonce: &str,
    entity: &Entity,
    request: &SignedRequest<'_>,
) -> Vec<u8> {
    let mut input = Vec::with_capacity(256);
    push_line(&mut input, dialect.names().server_prefix.as_bytes());
    push_line(&mut input, b"ed25519");
    push_line(&mut input, ts_ms.to_string().as_bytes());
    push_line(&mut input, nonce.as_bytes());
    push_line(&mut input, entity.as_str().as_bytes());
    push_request_lines(&mut input, request);
    input
}

/// A user's server key: the Ed25519 key its server signs requests to other
/// servers with, published in the user's Entity record.
#[derive(Clone)]
pub struct ServerKey(SigningKey);

impl std::fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerKey({})", self.public_base64())
    }
}

impl ServerKey {
    /// The key made from 32 random bytes.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        ServerKey(SigningKey::from_bytes(&seed))
    }

    /// The key as stored: its seed in standard base64.
    pub fn from_base64(seed: &str) -> Option<Self> {
        let mut bytes = [0; 32];
        match STANDARD.decode_slice(seed, &mut bytes) {
            Ok(32) => Some(Self::from_seed(bytes)),
            _ => None,
        }
    }

    /// The seed, in standard base64, to store.
    pub fn seed_base64(&self) -> String {
        STANDARD.encode(self.0.to_bytes())
    }

    /// The public key, in standard base64, to publish.
    pub fn public_base64(&self) -> String {
        STANDARD.encode(self.0.verifying_key().as_bytes())
    }

    /// The `Authorization` value of a request `entity`'s server sends,
    /// signing the given headers (lowercase names with their values, in
    /// order; each must be signable in `dialect`).
    pub fn authorization(
        &self,
        dialect: Dialect,
        entity: &Entity,
        ts_ms: i64,
        nonce: &str,
        request: &SignedRequest<'_>,
        headers: &[(&str, &str)],
    ) -> String {
        let mut input = server_preamble(dialect, ts_ms, nonce, entity, request);
        for (name, value) in headers {
            push_header_line(&mut input, name, value.as_bytes());
        }
        let signature = STANDARD.encode(self.0.sign(&input).to_bytes());
        let names = headers
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "{} entity=\"{entity}\" algorithm=\"ed25519\" ts=\"{ts_ms}\" nonce=\"{nonce}\" \
             headers=\"{names}\" signature=\"{signature}\"",
            dialect.names().auth_scheme
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> SignedRequest<'static> {
        SignedRequest {
            method: "POST",
            path_and_query: "/api/bob/notifications",
            host: "bob.example",
            port: 443,
        }
    }

    #[test]
    fn a_signed_server_request_verifies_and_nothing_else_does() {
        let key = ServerKey::from_seed([7; 32]);
        let entity: Entity = "alice.example".parse().unwrap();
        let digest = "ab".repeat(32);
        let headers = [("x-svc-content-sha256", digest.as_str())];
        let value = key.authorization(
            Dialect::Svc,
            &entity,
            1_700_000_000_000,
            "n1",
            &request(),
            &headers,
        );
        assert!(Dialect::Svc.is_server_authorization(&value));
        assert!(!Dialect::Svc.is_server_authorization("SVC id=\"x\" ts=\"1\""));
        let parsed = Dialect::Svc.parse_server_authorization(&value).unwrap();
        assert_eq!(parsed.entity, entity);
        let public = AppKey::from_base64(&key.public_base64()).unwrap();
        let other = AppKey::from_base64(&ServerKey::from_seed([8; 32]).public_base64()).unwrap();
        parsed
            .verify(&[other, public], &request(), &headers[..])
            .unwrap();
        assert_eq!(
            parsed.verify(&[other], &request(), &headers[..]),
            Err(AuthError::InvalidSignature)
        );
        // Another path, host or body is another request.
        let elsewhere = SignedRequest {
            path_and_query: "/api/carol/notifications",
            ..request()
        };
        assert!(parsed.verify(&[public], &elsewhere, &headers[..]).is_err());
        let digest2 = "cd".repeat(32);
        let changed = [("x-svc-content-sha256", digest2.as_str())];
        assert!(parsed.verify(&[public], &request(), &changed[..]).is_err());
        // An app's signature input never equals a server's: the prefix differs.
        assert_eq!(
            parsed.signed_content_sha256(&headers[..]).unwrap(),
            Some([0xab; 32])
        );
    }

    #[test]
    fn malformed_server_headers_are_refused() {
        for value in [
            "SVC entity=\"alice.example\" ts=\"1\" nonce=\"n\" headers=\"\" signature=\"AA\"",
            "SVC entity=\"Alice!\" algorithm=\"ed25519\" ts=\"1\" nonce=\"n\" headers=\"\" signature=\"AA\"",
            "SVC entity=\"a.example\" entity=\"b.example\" algorithm=\"ed25519\" ts=\"1\" nonce=\"n\" headers=\"\" signature=\"AA\"",
        ] {
            assert!(matches!(
                Dialect::Svc.parse_server_authorization(value),
                Err(AuthError::Malformed(_))
            ));
        }
    }

    #[test]
    fn a_key_survives_its_stored_form() {
        let key = ServerKey::from_seed([9; 32]);
        let again = ServerKey::from_base64(&key.seed_base64()).unwrap();
        assert_eq!(again.public_base64(), key.public_base64());
        assert!(ServerKey::from_base64("short").is_none());
    }
}
