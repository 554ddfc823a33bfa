//! The `Authorization: SVC k="v" …` header and the request signature.

use ed25519_dalek::Signature;

use super::sign::{push_header_line, push_preamble};
use super::{
    AppKey, AuthError, HeaderLookup, Malformed, SignedRequest, decode_signature, parse_millis,
    push_line,
};
use crate::model::RecordId;
use crate::model::dialect::Dialect;

/// The longest nonce a client may send (spec §8).
pub const MAX_NONCE_LEN: usize = 10;

/// The two layouts of a signature input. A header with an `algorithm`
/// parameter is verified with the spec's layout; one without, with the layout
/// existing clients send, which has no algorithm line (PROTOCOL.md §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureLayout {
    /// The spec's layout: the signature input has an `algorithm` line.
    WithAlgorithmLine,
    /// The layout existing clients send, without the `algorithm` line.
    WithoutAlgorithmLine,
}

/// A parsed `Authorization` header. Parsing checks everything that can be
/// checked without the request: syntax, every parameter's value, and that the
/// signed headers may be signed.
#[derive(Debug, Clone)]
pub struct AuthorizationHeader<'a> {
    dialect: Dialect,
    /// The app record the request claims to come from.
    pub app_id: RecordId,
    /// Which layout the signature was made with: the header's `algorithm` parameter decides.
    pub layout: SignatureLayout,
    /// Request time, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// The header's `nonce`: the replay guard holds it for the timestamp window.
    pub nonce: &'a str,
    /// Comma-separated lowercase names, validated; see [`Self::signed_headers`].
    signed_headers: &'a str,
    signature: Signature,
}

/// The raw text of each known parameter, before validation.
#[derive(Default)]
struct RawParameters<'a> {
    id: Option<&'a str>,
    algorithm: Option<&'a str>,
    ts: Option<&'a str>,
    nonce: Option<&'a str>,
    headers: Option<&'a str>,
    signature: Option<&'a str>,
}

impl<'a> RawParameters<'a> {
    fn slot(&mut self, name: &str) -> Option<(&'static str, &mut Option<&'a str>)> {
        let known: [(&'static str, &mut Option<&'a str>); 6] = [
            ("id", &mut self.id),
            ("algorithm", &mut self.algorithm),
            ("ts", &mut self.ts),
            ("nonce", &mut self.nonce),
            ("headers", &mut self.headers),
            ("signature", &mut self.signature),
        ];
        known
            .into_iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
    }
}

impl Dialect {
    /// Parses an `Authorization` header value of this dialect.
    ///
    /// Parameters may come in any order, separated by spaces (a comma is also
    /// taken); each value is a quoted string. Unknown parameters are ignored.
    pub fn parse_authorization<'a>(
        self,
        value: &'a str,
    ) -> Result<AuthorizationHeader<'a>, AuthError> {
        let scheme = self.names().auth_scheme;
        let value = value.trim_matches([' ', '\t']);
        let params = match value.split_once(' ') {
            Some((given, params)) if given.eq_ignore_ascii_case(scheme) => params,
            _ => return Err(Malformed::Scheme { expected: scheme }.into()),
        };
        let offset = value.len() - params.len();
        let mut raw = RawParameters::default();
        parse_parameters(params, |name, value| match raw.slot(name) {
            Some((known, slot)) => match slot.replace(value) {
                Some(_) => Err(Malformed::RepeatedParameter(known)),
                None => Ok(()),
            },
            None => Ok(()),
        })
        .map_err(|reason| match reason {
            Malformed::Syntax { at } => Malformed::Syntax { at: at + offset },
            other => other,
        })?;

        let required =
            |value: Option<&'a str>, name| value.ok_or(Malformed::MissingParameter(name));
        let app_id = required(raw.id, "id")?
            .parse()
            .map_err(|_| Malformed::InvalidParameter("id"))?;
        let layout = match raw.algorithm {
            None => SignatureLayout::WithoutAlgorithmLine,
            Some("ed25519") => SignatureLayout::WithAlgorithmLine,
            Some(_) => return Err(Malformed::UnsupportedAlgorithm.into()),
        };
        let ts_ms = parse_millis(required(raw.ts, "ts")?, "ts")?;
        let nonce = required(raw.nonce, "nonce")?;
        if nonce.is_empty() || nonce.chars().count() > MAX_NONCE_LEN {
            return Err(Malformed::NonceLength.into());
        }
        let signed_headers = required(raw.headers, "headers")?;
        self.check_signed_headers(signed_headers)?;
        let signature = decode_signature(required(raw.signature, "signature")?, "signature")?;

        Ok(AuthorizationHeader {
            dialect: self,
            app_id,
            layout,
            ts_ms,
            nonce,
            signed_headers,
            signature,
        })
    }

    /// Every listed name must be signable, lowercase, and listed once.
    pub(super) fn check_signed_headers(self, list: &str) -> Result<(), Malformed> {
        let signable = self.signable_headers();
        for (i, name) in header_names(list).enumerate() {
            if !signable.iter().any(|header| header.lowercase == name) {
                return Err(Malformed::UnsignableHeader(name.to_owned()));
            }
            if header_names(list).take(i).any(|earlier| earlier == name) {
                return Err(Malformed::RepeatedHeader(name.to_owned()));
            }
        }
        Ok(())
    }
}

/// The names of a `headers` parameter; `""` lists none.
pub(super) fn header_names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').filter(move |_| !list.is_empty())
}

/// Reads `name="value"` pairs separated by whitespace or one comma, handing
/// each to `put`.
pub(crate) fn parse_parameters<'a>(
    text: &'a str,
    mut put: impl FnMut(&str, &'a str) -> Result<(), Malformed>,
) -> Result<(), Malformed> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut expect_separator = false;
    loop {
        let separator_start = at;
        let mut commas = 0;
        while at < bytes.len() && matches!(bytes[at], b' ' | b'\t' | b',') {
            commas += usize::from(bytes[at] == b',');
            at += 1;
        }
        if at == bytes.len() {
            return if commas == 0 {
                Ok(())
            } else {
                Err(Malformed::Syntax {
                    at: separator_start,
                })
            };
        }
        // Between parameters: whitespace, at most one comma. Before the first: no comma.
        let bad_separator = if expect_separator {
            at == separator_start || commas > 1
        } else {
            commas > 0
        };
        if bad_separator {
            return Err(Malformed::Syntax { at });
        }

        let name_start = at;
        while at < bytes.len()
            && (bytes[at].is_ascii_alphanumeric() || matches!(bytes[at], b'-' | b'_'))
        {
            at += 1;
        }
        let name = &text[name_start..at];
        if name.is_empty() || bytes.get(at) != Some(&b'=') || bytes.get(at + 1) != Some(&b'"') {
            return Err(Malformed::Syntax { at });
        }
        at += 2;
        let value_start = at;
        // Quoted values hold printable ASCII; no legitimate value needs an escape.
        while at < bytes.len() && bytes[at] != b'"' {
            if !(0x20..0x7f).contains(&bytes[at]) || bytes[at] == b'\\' {
                return Err(Malformed::Syntax { at });
            }
            at += 1;
        }
        if at == bytes.len() {
            return Err(Malformed::Syntax { at });
        }
        let value = &text[value_start..at];
        at += 1;

        put(name, value)?;
        expect_separator = true;
    }
}

impl<'a> AuthorizationHeader<'a> {
    /// The signed header names, in the order the signature input lists them.
    pub fn signed_headers(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        header_names(self.signed_headers)
    }

    /// Whether `name` (lowercase) is among the signed headers.
    pub fn signs(&self, lowercase_name: &str) -> bool {
        self.signed_headers().any(|name| name == lowercase_name)
    }

    /// The exact bytes the client signed, rebuilt from the request.
    ///
    /// `authorization_id` is the id of the App Authorization record that
    /// admitted the app, or `None` for the registration request, whose line is
    /// empty. Fails if a signed header is absent from the request.
    pub fn signature_input(
        &self,
        authorization_id: Option<&RecordId>,
        request: &SignedRequest<'_>,
        headers: &(impl HeaderLookup + ?Sized),
    ) -> Result<Vec<u8>, AuthError> {
        let mut input = Vec::with_capacity(256);
        push_preamble(
            &mut input,
            self.dialect,
            self.layout,
            self.ts_ms,
            self.nonce,
            authorization_id,
            request,
        );
        for name in self.signed_headers() {
            let value = headers
                .header(name)
                .ok_or_else(|| Malformed::SignedHeaderAbsent(name.to_owned()))?;
            push_header_line(&mut input, name, value);
        }
        Ok(input)
    }

    /// Verifies the signature against the request and the app's key.
    /// Freshness and nonce reuse are separate checks ([`super::check_timestamp`]).
    pub fn verify(
        &self,
        key: &AppKey,
        authorization_id: Option<&RecordId>,
        request: &SignedRequest<'_>,
        headers: &(impl HeaderLookup + ?Sized),
    ) -> Result<(), AuthError> {
        let input = self.signature_input(authorization_id, request, headers)?;
        key.verify(&input, &self.signature)
    }

    /// The body digest the signature vouches for: the content hash header,
    /// when it is signed (hex, either case). A signed value that is not a
    /// SHA-256 in hex vouches for no body: `auth/401-invalid-signature`.
    pub fn signed_content_sha256(
        &self,
        headers: &(impl HeaderLookup + ?Sized),
    ) -> Result<Option<[u8; 32]>, AuthError> {
        signed_digest(self.dialect, |name| self.signs(name), headers)
    }
}

/// The content digest header's SHA-256 when `signs` says the signature
/// covers it (hex, either case); a signed value that is no SHA-256 in hex
/// vouches for no body: `auth/401-invalid-signature`.
pub(super) fn signed_digest(
    dialect: Dialect,
    signs: impl Fn(&str) -> bool,
    headers: &(impl HeaderLookup + ?Sized),
) -> Result<Option<[u8; 32]>, AuthError> {
    let header = dialect.names().content_sha256;
    if !signs(header.lowercase) {
        return Ok(None);
    }
    let mut claimed = [0; 32];
    match headers
        .header(header.lowercase)
        .map(|value| hex::decode_to_slice(value, &mut claimed))
    {
        Some(Ok(())) => Ok(Some(claimed)),
        _ => Err(AuthError::InvalidSignature),
    }
}

/// Checks a body against the digest a signature vouched for (see
/// [`AuthorizationHeader::signed_content_sha256`]), for hosts that learn
/// the digest only once a streamed body (a blob upload) has been read.
pub fn check_body_digest(
    signed: Option<[u8; 32]>,
    body_sha256: &[u8; 32],
) -> Result<(), AuthError> {
    match signed {
        Some(claimed) if &claimed != body_sha256 => Err(AuthError::InvalidSignature),
        _ => Ok(()),
    }
}

pub(super) fn push_authorization_id(input: &mut Vec<u8>, authorization_id: Option<&RecordId>) {
    match authorization_id {
        Some(id) => push_line(input, id.encode(&mut [0; RecordId::HEX_LEN]).as_bytes()),
        None => push_line(input, b""),
    }
}

/// The method, target, host and port lines.
pub(super) fn push_request_lines(input: &mut Vec<u8>, request: &SignedRequest<'_>) {
    push_line(input, request.method.as_bytes());
    push_line(input, request.path_and_query.as_bytes());
    push_line(input, request.host.as_bytes());
    push_line(input, request.port.to_string().as_bytes());
}
