//! The shared test vectors (`../shared/vectors`), checked against the core.
//!
//! This file runs twice: natively as a core integration test, reading the
//! vector files from disk, and in wasm32 under node through `wasm-tests`,
//! with the same files embedded at compile time. The values themselves are
//! never copied into code.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer, SigningKey};
use folio_core::auth::{
    AppKey, AuthError, BearerToken, ClientBearer, ClientSignature, SignatureLayout, SignedRequest,
};
use folio_core::model::dialect::Dialect;
use folio_core::model::{Record, RecordId, VersionHash};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct SignatureCase {
    name: String,
    kind: String,
    prefix: String,
    layout: String,
    expect_valid: bool,
    private_key_base64: String,
    public_key_base64: String,
    app_record_id: String,
    authorization_id: String,
    ts: i64,
    nonce: Option<String>,
    method: String,
    path_and_query: String,
    host: String,
    port: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    signature_input: String,
    expected_signature: String,
    authorization_header: Option<String>,
    token_base64: Option<String>,
    token_base64url_unpadded: Option<String>,
}

impl SignatureCase {
    fn dialect(&self) -> Dialect {
        match self.prefix.as_str() {
            "svc" => Dialect::Svc,
            "baq" => Dialect::Baq,
            other => panic!("{}: unknown prefix {other}", self.name),
        }
    }

    fn authorization_id(&self) -> Option<RecordId> {
        (!self.authorization_id.is_empty())
            .then(|| self.authorization_id.parse().expect("authorization id"))
    }

    fn key(&self) -> AppKey {
        AppKey::from_base64(&self.public_key_base64).expect("public key")
    }

    fn request<'a>(&'a self, path_and_query: &'a str) -> SignedRequest<'a> {
        SignedRequest {
            method: &self.method,
            path_and_query,
            host: &self.host,
            port: self.port,
        }
    }

    /// Checks a header case; returns whether the signature verified.
    fn check_header(&self) -> bool {
        let value = self
            .authorization_header
            .as_deref()
            .expect("authorization_header");
        let header = self
            .dialect()
            .parse_authorization(value)
            .expect("the header parses");
        assert_eq!(
            header.app_id.to_string(),
            self.app_record_id,
            "{}: id",
            self.name
        );
        assert_eq!(header.ts_ms, self.ts, "{}: ts", self.name);
        assert_eq!(
            Some(header.nonce),
            self.nonce.as_deref(),
            "{}: nonce",
            self.name
        );
        let layout = match header.layout {
            SignatureLayout::WithAlgorithmLine => "with_algorithm_line",
            SignatureLayout::WithoutAlgorithmLine => "without_algorithm_line",
        };
        assert_eq!(layout, self.layout, "{}: layout", self.name);
        let names: Vec<&str> = header.signed_headers().collect();
        let expected: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, expected, "{}: signed headers", self.name);

        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let request = self.request(&self.path_and_query);
        let auth_id = self.authorization_id();
        let input = header
            .signature_input(auth_id.as_ref(), &request, headers.as_slice())
            .expect("input");
        assert_eq!(
            String::from_utf8(input).unwrap(),
            self.signature_input,
            "{}: signature input",
            self.name
        );

        match header.verify(&self.key(), auth_id.as_ref(), &request, headers.as_slice()) {
            Ok(()) => true,
            Err(AuthError::InvalidSignature) => false,
            Err(other) => panic!("{}: unexpected error {other}", self.name),
        }
    }

    /// Checks a bearer case in both token encodings; returns whether both verified.
    fn check_bearer(&self) -> bool {
        let tokens = [&self.token_base64, &self.token_base64url_unpadded];
        let results: Vec<bool> = tokens
            .into_iter()
            .map(|token| {
                let token = token.as_deref().expect("bearer cases carry both encodings");
                let separator = if self.path_and_query.contains('?') {
                    '&'
                } else {
                    '?'
                };
                let target = format!("{}{separator}bearer={token}", self.path_and_query);
                let parsed = BearerToken::from_target(&target)
                    .expect("a bearer parameter")
                    .expect("token parses");
                assert_eq!(
                    parsed.app_id.to_string(),
                    self.app_record_id,
                    "{}: id",
                    self.name
                );
                assert_eq!(parsed.expires_at_ms, self.ts, "{}: ts", self.name);
                let auth_id = self.authorization_id();
                let input = parsed.signature_input(
                    self.dialect(),
                    auth_id.as_ref(),
                    &self.request(&self.path_and_query),
                );
                assert_eq!(
                    String::from_utf8(input).unwrap(),
                    self.signature_input,
                    "{}: signature input",
                    self.name
                );
                parsed
                    .verify(
                        self.dialect(),
                        &self.key(),
                        auth_id.as_ref(),
                        &self.request(&target),
                    )
                    .is_ok()
            })
            .collect();
        assert_eq!(
            results[0], results[1],
            "{}: both encodings agree",
            self.name
        );
        results[0]
    }

    /// The vector's signature, as bytes.
    fn signature(&self) -> [u8; 64] {
        STANDARD
            .decode(&self.expected_signature)
            .unwrap()
            .try_into()
            .unwrap()
    }

    /// A client signing this request with core's [`ClientSignature`] signs
    /// the vector's bytes and sends the vector's header (valid cases).
    fn check_client_signature(&self) {
        let layout = match self.layout.as_str() {
            "with_algorithm_line" => SignatureLayout::WithAlgorithmLine,
            _ => SignatureLayout::WithoutAlgorithmLine,
        };
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let client = ClientSignature {
            dialect: self.dialect(),
            layout,
            app: self.app_record_id.parse().expect("app id"),
            authorization: self.authorization_id(),
            ts_ms: self.ts,
            nonce: self.nonce.as_deref().expect("a nonce"),
            request: self.request(&self.path_and_query),
            headers: &headers,
        };
        let input = client.signature_input();
        assert_eq!(
            String::from_utf8(input).unwrap(),
            self.signature_input,
            "{}: the client's signature input",
            self.name
        );
        let signature = self.signature();
        assert_eq!(
            client.authorization_header(&signature),
            self.authorization_header.clone().expect("a header"),
            "{}: the client's Authorization header",
            self.name
        );
    }

    /// An app making this token with core's [`ClientBearer`] signs the
    /// vector's bytes and writes the vector's token (valid cases).
    fn check_client_bearer(&self) {
        let client = ClientBearer {
            dialect: self.dialect(),
            app: self.app_record_id.parse().expect("app id"),
            authorization: self.authorization_id(),
            expires_at_ms: self.ts,
            request: self.request(&self.path_and_query),
        };
        assert_eq!(
            String::from_utf8(client.signature_input()).unwrap(),
            self.signature_input,
            "{}: the client's bearer input",
            self.name
        );
        let signature = self.signature();
        assert_eq!(
            Some(client.token(&signature)),
            self.token_base64,
            "{}: the client's token",
            self.name
        );
    }

    /// The vector's own key pair signs its input to its signature (valid cases).
    fn check_vector_is_consistent(&self) {
        let seed: [u8; 32] = STANDARD
            .decode(&self.private_key_base64)
            .unwrap()
            .try_into()
            .unwrap();
        let signature = SigningKey::from_bytes(&seed).sign(self.signature_input.as_bytes());
        assert_eq!(
            STANDARD.encode(signature.to_bytes()),
            self.expected_signature,
            "{}",
            self.name
        );
    }
}

#[test]
fn every_signature_vector_verifies_exactly_when_expected() {
    let cases: Vec<SignatureCase> =
        serde_json::from_str(&shared_file!("vectors/signatures.json")).unwrap();
    let mut wrong = Vec::new();
    for case in &cases {
        let verified = match case.kind.as_str() {
            "authorization_header" => case.check_header(),
            "bearer_token" => case.check_bearer(),
            other => panic!("{}: unknown kind {other}", case.name),
        };
        if case.expect_valid {
            case.check_vector_is_consistent();
            match case.kind.as_str() {
                "authorization_header" => case.check_client_signature(),
                _ => case.check_client_bearer(),
            }
        }
        if verified != case.expect_valid {
            wrong.push(format!(
                "{} (expected valid: {})",
                case.name, case.expect_valid
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "signature vectors that disagree: {wrong:#?}"
    );
    for prefix in ["svc", "baq"] {
        for kind in ["authorization_header", "bearer_token"] {
            assert!(
                cases
                    .iter()
                    .any(|c| c.prefix == prefix && c.kind == kind && c.expect_valid),
                "{prefix} {kind}"
            );
        }
    }
    assert!(
        cases.iter().any(|c| !c.expect_valid),
        "the file has negative cases"
    );
}

#[derive(Deserialize)]
struct HashCase {
    name: String,
    record: Value,
    canonical_json: String,
    expected_hash: String,
}

#[test]
fn every_version_hash_vector_matches() {
    let cases: Vec<HashCase> =
        serde_json::from_str(&shared_file!("vectors/version-hashes.json")).unwrap();
    assert!(!cases.is_empty());
    for case in &cases {
        let record: Record = serde_json::from_value(case.record.clone())
            .unwrap_or_else(|e| panic!("{}: the record does not parse: {e}", case.name));
        let input = record.hash_input();
        assert_eq!(
            String::from_utf8(input.canonical_json()).unwrap(),
            case.canonical_json,
            "{}",
            case.name
        );
        let expected: VersionHash = case.expected_hash.parse().unwrap();
        assert_eq!(input.hash(), expected, "{}: hash", case.name);
        assert_eq!(
            record.version.hash, expected,
            "{}: the record carries its hash",
            case.name
        );

        let written = serde_json::to_value(&record).unwrap();
        assert_eq!(
            written, case.record,
            "{}: the wire JSON round-trips",
            case.name
        );
        let text = serde_json::to_string(&record).unwrap();
        let reread: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_string(&reread).unwrap(),
            text,
            "{}: writing is stable",
            case.name
        );
    }
}
