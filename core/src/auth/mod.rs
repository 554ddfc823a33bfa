//! Request authentication (spec §5, PROTOCOL.md §10): the `Authorization`
//! header, the signature input in both layouts, bearer tokens, and the clock
//! window. The host supplies the request's parts, the app's key and `now`;
//! nonce bookkeeping is the host's, with the window this module names.

pub mod access;
pub mod apps;
pub mod register;

mod bearer;
mod header;
mod replay;
mod server;
mod sign;

pub use bearer::{BEARER_PARAMETER, BearerToken, MAX_BEARER_LIFETIME_MS};
pub(crate) use header::parse_parameters;
pub use header::{AuthorizationHeader, MAX_NONCE_LEN, SignatureLayout, check_body_digest};
pub use replay::{
    Accepted, MAX_NONCES_PER_APP, MAX_REGISTRATION_NONCES, MAX_REMEMBERED_NONCES,
    MEMORY_ONLY_AHEAD_MS, NonceUse, ReplayError, ReplayGuard, nonce_table,
};
pub use server::{ServerAuthorization, ServerKey};
pub use sign::{ClientBearer, ClientSignature};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};

use crate::model::RecordDate;
use crate::problem::{Problem, ProblemType};

/// How far a signed request's `ts` may be from the server clock, either way,
/// and so how long a nonce must be remembered.
pub const TIMESTAMP_WINDOW_MS: i64 = 300_000;

/// Why a request is not authenticated. Each variant is one `auth/401-*` problem type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No `Authorization` header and no bearer token: `auth/401-missing-authorization`.
    #[error("the request carries no credentials")]
    MissingAuthorization,
    /// The header or the token cannot be parsed: `auth/401-malformed-authorization`.
    #[error("malformed authorization: {0}")]
    Malformed(Malformed),
    /// The signature does not verify with the key it names: `auth/401-invalid-signature`.
    #[error("the signature does not match the request")]
    InvalidSignature,
    /// The signature's `ts` is outside the window around the request's time:
    /// `auth/401-stale-timestamp`.
    #[error("the timestamp is outside the accepted window")]
    StaleTimestamp,
    /// The nonce was already used within the window: `auth/401-replayed-request`.
    #[error("this nonce was already used")]
    ReplayedRequest,
    /// No app (or no live authorization) is registered under the signature's id:
    /// `auth/401-unknown-app`.
    #[error("no app is registered under this id")]
    UnknownApp,
}

/// What is wrong with a malformed `Authorization` header or bearer token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// The header does not start with the dialect's scheme.
    #[error("the scheme is not {expected}")]
    Scheme {
        /// The dialect's scheme.
        expected: &'static str,
    },
    /// The parameters do not parse.
    #[error("bad syntax at byte {at}")]
    Syntax {
        /// The byte offset in the header where parsing stopped.
        at: usize,
    },
    /// A required parameter, named here, is absent.
    #[error("the `{0}` parameter is missing")]
    MissingParameter(&'static str),
    /// A parameter, named here, appears more than once.
    #[error("the `{0}` parameter is repeated")]
    RepeatedParameter(&'static str),
    /// A parameter, named here, has a value that is not of its form.
    #[error("the `{0}` parameter has an invalid value")]
    InvalidParameter(&'static str),
    /// The nonce is empty or longer than [`MAX_NONCE_LEN`] characters.
    #[error("the nonce is empty or longer than {MAX_NONCE_LEN} characters")]
    NonceLength,
    /// The `algorithm` parameter names something other than `ed25519`.
    #[error("the algorithm is not ed25519")]
    UnsupportedAlgorithm,
    /// The signed headers name one, given here, that may not be signed.
    #[error("the header `{0}` cannot be signed")]
    UnsignableHeader(String),
    /// The signed headers name one, given here, twice.
    #[error("the header `{0}` is listed twice")]
    RepeatedHeader(String),
    /// The signed headers name one, given here, that the request does not carry.
    #[error("the signed header `{0}` is not in the request")]
    SignedHeaderAbsent(String),
    /// The bearer token is not base64 of its three parts.
    #[error("the bearer token is not base64 of `id\\ts\\signature`")]
    BearerToken,
    /// The public key is not a base64 Ed25519 key.
    #[error("the public key is not a base64 Ed25519 key")]
    PublicKey,
    /// A registration carries its public key in more than one header.
    #[error("a registration carries its key in one header, not two")]
    KeyHeaders,
}

impl From<Malformed> for AuthError {
    fn from(reason: Malformed) -> Self {
        AuthError::Malformed(reason)
    }
}

impl From<&AuthError> for Problem {
    fn from(error: &AuthError) -> Self {
        let kind = match error {
            AuthError::MissingAuthorization => ProblemType::MissingAuthorization,
            AuthError::Malformed(_) => ProblemType::MalformedAuthorization,
            AuthError::InvalidSignature => ProblemType::InvalidSignature,
            AuthError::StaleTimestamp => ProblemType::StaleTimestamp,
            AuthError::ReplayedRequest => ProblemType::ReplayedRequest,
            AuthError::UnknownApp => ProblemType::UnknownApp,
        };
        Problem::new(kind).with_detail(error.to_string())
    }
}

/// The parts of a request that a signature covers, besides its headers.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'r> {
    /// Uppercase HTTP method.
    pub method: &'r str,
    /// The request target as received: path and `?query`, never re-encoded.
    pub path_and_query: &'r str,
    /// The request's host name, without the port.
    pub host: &'r str,
    /// The explicit port of the request, else 443.
    pub port: u16,
}

/// The port a signature names when the request's authority has none
/// (PROTOCOL.md §10): 443, whatever the scheme.
pub const DEFAULT_SIGNED_PORT: u16 = 443;

impl<'r> SignedRequest<'r> {
    /// The `port` line of a request whose authority carries `explicit`, if any.
    pub fn port_of(explicit: Option<u16>) -> u16 {
        explicit.unwrap_or(DEFAULT_SIGNED_PORT)
    }
}

/// Read access to a request's headers, by lowercase name.
pub trait HeaderLookup {
    /// The raw value of the header, if the request has it.
    fn header(&self, lowercase_name: &str) -> Option<&[u8]>;
}

impl HeaderLookup for [(&str, &str)] {
    fn header(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(lowercase_name))
            .map(|(_, value)| value.as_bytes())
    }
}

/// An app's Ed25519 public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppKey(VerifyingKey);

impl AppKey {
    /// The key of these 32 bytes; bytes that are not a valid Ed25519 point are
    /// `Malformed::PublicKey`.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, AuthError> {
        VerifyingKey::from_bytes(bytes)
            .map(Self)
            .map_err(|_| Malformed::PublicKey.into())
    }

    /// Reads a key written as standard base64 (as registration sends it).
    pub fn from_base64(text: &str) -> Result<Self, AuthError> {
        let mut bytes = [0; 32];
        match STANDARD.decode_slice(text, &mut bytes) {
            Ok(32) => Self::from_bytes(&bytes),
            _ => Err(Malformed::PublicKey.into()),
        }
    }

    /// Strict Ed25519 verification: rejects non-canonical signatures and
    /// small-order keys, so a signature has exactly one valid encoding.
    pub(crate) fn verify(&self, input: &[u8], signature: &Signature) -> Result<(), AuthError> {
        self.0
            .verify_strict(input, signature)
            .map_err(|_| AuthError::InvalidSignature)
    }
}

/// Checks a signed request's `ts` (milliseconds) against the server clock.
pub fn check_timestamp(ts_ms: i64, now: RecordDate) -> Result<(), AuthError> {
    if ts_ms.abs_diff(now.unix_millis()) <= TIMESTAMP_WINDOW_MS.unsigned_abs() {
        Ok(())
    } else {
        Err(AuthError::StaleTimestamp)
    }
}

/// Decodes a 64-byte signature written in base64 (either alphabet, padded or not).
fn decode_signature(text: &str, parameter: &'static str) -> Result<Signature, Malformed> {
    let bytes = decode_base64_any(text).ok_or(Malformed::InvalidParameter(parameter))?;
    let bytes: [u8; 64] = bytes
        .try_into()
        .map_err(|_| Malformed::InvalidParameter(parameter))?;
    Ok(Signature::from_bytes(&bytes))
}

/// Standard or URL-safe base64, padded or not.
fn decode_base64_any(text: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD_ANY: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL_SAFE_ANY: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    STANDARD_ANY
        .decode(text)
        .or_else(|_| URL_SAFE_ANY.decode(text))
        .ok()
}

/// Parses a decimal millisecond timestamp: digits only, no sign, no leading zero.
fn parse_millis(text: &str, parameter: &'static str) -> Result<i64, Malformed> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical
        .then(|| text.parse().ok())
        .flatten()
        .ok_or(Malformed::InvalidParameter(parameter))
}

/// Appends `line` and a newline.
fn push_line(input: &mut Vec<u8>, line: &[u8]) {
    input.extend_from_slice(line);
    input.push(b'\n');
}

#[cfg(test)]
mod error_mapping_tests {
    use super::*;

    /// PROTOCOL.md §11's type of each authentication error, as the table
    /// writes it, stated apart from the `From` impl. No wildcard: a new
    /// variant does not compile until it is mapped here too.
    fn documented(error: &AuthError) -> &'static str {
        match error {
            AuthError::MissingAuthorization => "auth/401-missing-authorization",
            AuthError::Malformed(_) => "auth/401-malformed-authorization",
            AuthError::InvalidSignature => "auth/401-invalid-signature",
            AuthError::StaleTimestamp => "auth/401-stale-timestamp",
            AuthError::ReplayedRequest => "auth/401-replayed-request",
            AuthError::UnknownApp => "auth/401-unknown-app",
        }
    }

    #[test]
    fn each_auth_error_maps_to_its_documented_401() {
        let errors = [
            AuthError::MissingAuthorization,
            AuthError::Malformed(Malformed::NonceLength),
            AuthError::InvalidSignature,
            AuthError::StaleTimestamp,
            AuthError::ReplayedRequest,
            AuthError::UnknownApp,
        ];
        for error in errors {
            let problem = Problem::from(&error);
            assert_eq!(problem.kind.type_path(), documented(&error), "{error:?}");
            assert_eq!(problem.status(), 401, "{error:?}");
            assert!(problem.detail.is_some(), "{error:?}");
        }
    }
}
