//! The app's side of a signature (PROTOCOL.md §10): the bytes a client signs
//! for a request, and the `Authorization` header that carries the
//! signature. The server rebuilds the same bytes from what it received
//! ([`AuthorizationHeader::signature_input`](super::AuthorizationHeader::signature_input));
//! both go through [`push_preamble`], so the two sides cannot drift. Client
//! SDKs built on the core (the JavaScript SDK's wasm module) sign with it;
//! the key stays with the client, which signs these bytes itself.

use crate::model::RecordId;
use crate::model::dialect::Dialect;

use super::bearer::bearer_input;
use super::header::{push_authorization_id, push_request_lines};
use super::{SignatureLayout, SignedRequest, push_line};

/// One request as an app signs it.
#[derive(Debug, Clone)]
pub struct ClientSignature<'a> {
    /// The dialect whose names the header uses.
    pub dialect: Dialect,
    /// The layout of the signature input.
    pub layout: SignatureLayout,
    /// The app's record id (the header's `id`).
    pub app: RecordId,
    /// The App Authorization record that admitted the app; `None` for the
    /// registration request.
    pub authorization: Option<RecordId>,
    /// Request time, milliseconds since the Unix epoch (the header's `ts`).
    pub ts_ms: i64,
    /// The header's `nonce`; unique per app within the timestamp window.
    pub nonce: &'a str,
    /// The method, target and authority the signature covers.
    pub request: SignedRequest<'a>,
    /// The signed headers, lowercase names with their values, in the order
    /// they are signed.
    pub headers: &'a [(&'a str, &'a str)],
}

impl ClientSignature<'_> {
    /// The exact bytes to sign.
    pub fn signature_input(&self) -> Vec<u8> {
        let mut input = Vec::with_capacity(256);
        push_preamble(
            &mut input,
            self.dialect,
            self.layout,
            self.ts_ms,
            self.nonce,
            self.authorization.as_ref(),
            &self.request,
        );
        for (name, value) in self.headers {
            push_header_line(&mut input, name, value.as_bytes());
        }
        input
    }

    /// The `Authorization` header value that carries `signature` (the
    /// Ed25519 signature of [`ClientSignature::signature_input`]), with its
    /// parameters in the order PROTOCOL.md's examples use for the layout.
    pub fn authorization_header(&self, signature: &[u8; 64]) -> String {
        use base64::Engine;
        let scheme = self.dialect.names().auth_scheme;
        let id = self.app.encode(&mut [0; RecordId::HEX_LEN]).to_owned();
        let headers = self
            .headers
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(",");
        let signature = base64::engine::general_purpose::STANDARD.encode(signature);
        let (ts, nonce) = (self.ts_ms, self.nonce);
        match self.layout {
            SignatureLayout::WithAlgorithmLine => format!(
                "{scheme} algorithm=\"ed25519\" ts=\"{ts}\" nonce=\"{nonce}\" id=\"{id}\" \
                 headers=\"{headers}\" signature=\"{signature}\""
            ),
            SignatureLayout::WithoutAlgorithmLine => format!(
                "{scheme} id=\"{id}\" ts=\"{ts}\" nonce=\"{nonce}\" headers=\"{headers}\" \
                 signature=\"{signature}\""
            ),
        }
    }
}

/// A bearer token as an app makes it: GET of one target (its path and
/// query without `bearer`) until `expires_at_ms`.
#[derive(Debug, Clone)]
pub struct ClientBearer<'a> {
    /// The dialect whose names the token uses.
    pub dialect: Dialect,
    /// The app's record id.
    pub app: RecordId,
    /// The App Authorization record that admitted the app, if any; its id is part of the signed
    /// input.
    pub authorization: Option<RecordId>,
    /// When the token stops being valid, milliseconds since the Unix epoch.
    pub expires_at_ms: i64,
    /// The one GET request the token admits.
    pub request: SignedRequest<'a>,
}

impl ClientBearer<'_> {
    /// The exact bytes to sign.
    pub fn signature_input(&self) -> Vec<u8> {
        bearer_input(
            self.dialect,
            self.expires_at_ms,
            self.authorization.as_ref(),
            &self.request,
        )
    }

    /// The token (standard base64) that carries `signature`, for the
    /// target's `bearer` parameter.
    pub fn token(&self, signature: &[u8; 64]) -> String {
        use base64::Engine;
        let base64 = &base64::engine::general_purpose::STANDARD;
        let id = self.app.encode(&mut [0; RecordId::HEX_LEN]).to_owned();
        let text = format!("{id}\\{}\\{}", self.expires_at_ms, base64.encode(signature));
        base64.encode(text)
    }
}

/// The lines before the signed headers: prefix, algorithm (in that
/// layout), `ts`, nonce, authorization id, method, target, host and port.
pub(super) fn push_preamble(
    input: &mut Vec<u8>,
    dialect: Dialect,
    layout: SignatureLayout,
    ts_ms: i64,
    nonce: &str,
    authorization_id: Option<&RecordId>,
    request: &SignedRequest<'_>,
) {
    push_line(input, dialect.names().request_prefix.as_bytes());
    if layout == SignatureLayout::WithAlgorithmLine {
        push_line(input, b"ed25519");
    }
    push_line(input, ts_ms.to_string().as_bytes());
    push_line(input, nonce.as_bytes());
    push_authorization_id(input, authorization_id);
    push_request_lines(input, request);
}

/// One signed header's line: `name=value`.
pub(super) fn push_header_line(input: &mut Vec<u8>, name: &str, value: &[u8]) {
    input.extend_from_slice(name.as_bytes());
    input.push(b'=');
    push_line(input, value);
}
