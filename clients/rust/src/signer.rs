//! Request signatures and bearer tokens (spec §5, PROTOCOL.md §10), written
//! independently of the server's core so the suite checks it from outside.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer as _, SigningKey};

/// The names that differ between this protocol and the original one.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    /// The `Authorization` scheme.
    pub scheme: &'static str,
    /// The first word of signature inputs: `<prefix>.request`, `<prefix>.url`.
    pub prefix: &'static str,
}

/// The names the spec uses, which Folio speaks by default.
pub const SVC: Dialect = Dialect {
    scheme: "SVC",
    prefix: "svc",
};

/// The original protocol's names (used by some test vectors).
pub const BAQ: Dialect = Dialect {
    scheme: "BAQ",
    prefix: "baq",
};

/// Whether the signature input carries the `ed25519` algorithm line, and the
/// header an `algorithm` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The spec's layout.
    WithAlgorithmLine,
    /// What SDK clients of the original protocol send.
    WithoutAlgorithmLine,
}

/// What a request signature covers besides the credentials and freshness.
#[derive(Debug, Clone)]
pub struct SignedTarget<'a> {
    pub method: &'a str,
    /// The request target in WHATWG-serialized form.
    pub path_and_query: &'a str,
    pub host: &'a str,
    pub port: u16,
    /// Signed headers as lowercase `(name, raw value)`, in signing order.
    pub headers: &'a [(String, String)],
}

/// An authorized app: its record id, its authorization id and its key.
#[derive(Clone)]
pub struct AppKey {
    pub app_id: String,
    pub authorization_id: String,
    key: SigningKey,
}

impl std::fmt::Debug for AppKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppKey")
            .field("app_id", &self.app_id)
            .field("authorization_id", &self.authorization_id)
            .finish_non_exhaustive()
    }
}

impl AppKey {
    /// `private_key` is the standard base64 of a 32-byte Ed25519 seed.
    pub fn new(app_id: &str, authorization_id: &str, private_key: &str) -> Result<Self, String> {
        let seed = STANDARD
            .decode(private_key.trim())
            .map_err(|error| format!("private key is not base64: {error}"))?;
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| "private key is not 32 bytes".to_string())?;
        Ok(Self::from_seed(app_id, authorization_id, seed))
    }

    pub fn from_seed(app_id: &str, authorization_id: &str, seed: [u8; 32]) -> Self {
        Self {
            app_id: app_id.to_string(),
            authorization_id: authorization_id.to_string(),
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// A fresh key pair for an app that is not registered yet: its
    /// authorization id is empty, so requests it signs carry the empty
    /// authorization-id line registration asks for.
    pub fn generate(app_id: &str) -> Self {
        Self::from_seed(app_id, "", rand::random())
    }

    /// The same app and key, signing as `authorization_id`.
    pub fn authorized(&self, authorization_id: &str) -> Self {
        Self {
            authorization_id: authorization_id.to_string(),
            ..self.clone()
        }
    }

    /// Standard base64 of the 32-byte Ed25519 seed, as a target file holds it.
    pub fn private_key(&self) -> String {
        STANDARD.encode(self.key.to_bytes())
    }

    /// Standard base64 of the 32-byte public key.
    pub fn public_key(&self) -> String {
        STANDARD.encode(self.key.verifying_key().as_bytes())
    }

    /// Standard base64 of the Ed25519 signature of `input`.
    pub fn sign(&self, input: &str) -> String {
        STANDARD.encode(self.key.sign(input.as_bytes()).to_bytes())
    }

    /// The full `Authorization` header value for one request.
    pub fn authorization_header(
        &self,
        dialect: Dialect,
        layout: Layout,
        ts: i64,
        nonce: &str,
        target: &SignedTarget<'_>,
    ) -> String {
        let input =
            request_signature_input(dialect, layout, ts, nonce, &self.authorization_id, target);
        let names: Vec<&str> = target
            .headers
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        let mut parameters = vec![
            ("ts", ts.to_string()),
            ("nonce", nonce.to_string()),
            ("id", self.app_id.clone()),
            ("headers", names.join(",")),
            ("signature", self.sign(&input)),
        ];
        match layout {
            Layout::WithAlgorithmLine => parameters.insert(0, ("algorithm", "ed25519".into())),
            // The original SDK's order, so the vectors' headers come out identical.
            Layout::WithoutAlgorithmLine => {
                let id = parameters.remove(2);
                parameters.insert(0, id);
            }
        }
        format_authorization(dialect.scheme, &parameters)
    }

    /// A bearer token granting GET of `path_and_query` until `expires_at_ms`.
    pub fn bearer_token(
        &self,
        dialect: Dialect,
        expires_at_ms: i64,
        path_and_query: &str,
        host: &str,
        port: u16,
    ) -> BearerToken {
        let input = bearer_signature_input(
            dialect,
            expires_at_ms,
            &self.authorization_id,
            path_and_query,
            host,
            port,
        );
        BearerToken {
            text: format!("{}\\{expires_at_ms}\\{}", self.app_id, self.sign(&input)),
        }
    }
}

/// The text a bearer token encodes: `<app id>\<expiry>\<signature>`.
#[derive(Debug, Clone)]
pub struct BearerToken {
    text: String,
}

impl BearerToken {
    /// Standard base64, padded.
    pub fn standard(&self) -> String {
        STANDARD.encode(&self.text)
    }

    /// URL-safe base64 without padding, as the original SDK sends it.
    pub fn url_safe_unpadded(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.text)
    }
}

/// `SCHEME k="v" k="v" …` in the given order.
pub fn format_authorization(scheme: &str, parameters: &[(&str, String)]) -> String {
    let parameters: Vec<String> = parameters
        .iter()
        .map(|(name, value)| format!("{name}=\"{value}\""))
        .collect();
    format!("{scheme} {}", parameters.join(" "))
}

/// The text a request signature signs (spec §5.1).
pub fn request_signature_input(
    dialect: Dialect,
    layout: Layout,
    ts: i64,
    nonce: &str,
    authorization_id: &str,
    target: &SignedTarget<'_>,
) -> String {
    let mut lines = vec![format!("{}.request", dialect.prefix)];
    if layout == Layout::WithAlgorithmLine {
        lines.push("ed25519".into());
    }
    lines.extend([
        ts.to_string(),
        nonce.to_string(),
        authorization_id.to_string(),
        target.method.to_string(),
        target.path_and_query.to_string(),
        target.host.to_string(),
        target.port.to_string(),
    ]);
    lines.extend(
        target
            .headers
            .iter()
            .map(|(name, value)| format!("{name}={value}")),
    );
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// The text a bearer token signs (spec §5.3): the empty line stands where a
/// request signature has its nonce.
pub fn bearer_signature_input(
    dialect: Dialect,
    expires_at_ms: i64,
    authorization_id: &str,
    path_and_query: &str,
    host: &str,
    port: u16,
) -> String {
    let lines = [
        &format!("{}.url", dialect.prefix),
        "ed25519",
        &expires_at_ms.to_string(),
        "",
        authorization_id,
        "GET",
        path_and_query,
        host,
        &port.to_string(),
    ];
    lines.iter().map(|line| format!("{line}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn vectors() -> Vec<Value> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/vectors/signatures.json"
        );
        let text = std::fs::read_to_string(path).expect("the shared signature vectors");
        serde_json::from_str(&text).expect("signatures.json is JSON")
    }

    fn text<'a>(case: &'a Value, field: &str) -> &'a str {
        case[field]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no string {field}", case["name"]))
    }

    fn dialect(case: &Value) -> Dialect {
        match text(case, "prefix") {
            "svc" => SVC,
            "baq" => BAQ,
            other => panic!("unknown prefix {other}"),
        }
    }

    fn key(case: &Value) -> AppKey {
        AppKey::new(
            text(case, "app_record_id"),
            text(case, "authorization_id"),
            text(case, "private_key_base64"),
        )
        .expect("vector key")
    }

    fn valid_cases(kind: &str) -> Vec<Value> {
        vectors()
            .into_iter()
            .filter(|case| case["kind"] == kind && case["expect_valid"] == true)
            .collect()
    }

    #[test]
    fn reproduces_every_valid_authorization_header() {
        let cases = valid_cases("authorization_header");
        assert!(cases.len() >= 10, "too few header cases: {}", cases.len());
        for case in &cases {
            let layout = match text(case, "layout") {
                "with_algorithm_line" => Layout::WithAlgorithmLine,
                _ => Layout::WithoutAlgorithmLine,
            };
            let headers: Vec<(String, String)> =
                serde_json::from_value(case["headers"].clone()).expect("headers pairs");
            let target = SignedTarget {
                method: text(case, "method"),
                path_and_query: text(case, "path_and_query"),
                host: text(case, "host"),
                port: case["port"].as_u64().expect("port") as u16,
                headers: &headers,
            };
            let ts = case["ts"].as_i64().expect("ts");
            let nonce = text(case, "nonce");
            let input = request_signature_input(
                dialect(case),
                layout,
                ts,
                nonce,
                text(case, "authorization_id"),
                &target,
            );
            assert_eq!(input, text(case, "signature_input"), "{}", case["name"]);
            let header = key(case).authorization_header(dialect(case), layout, ts, nonce, &target);
            assert_eq!(
                header,
                text(case, "authorization_header"),
                "{}",
                case["name"]
            );
        }
    }

    #[test]
    fn reproduces_every_valid_bearer_token() {
        let cases = valid_cases("bearer_token");
        assert!(
            cases.iter().any(|case| case["prefix"] == "svc"),
            "no svc bearer case"
        );
        for case in &cases {
            let token = key(case).bearer_token(
                dialect(case),
                case["ts"].as_i64().expect("ts"),
                text(case, "path_and_query"),
                text(case, "host"),
                case["port"].as_u64().expect("port") as u16,
            );
            assert_eq!(
                token.standard(),
                text(case, "token_base64"),
                "{}",
                case["name"]
            );
            assert_eq!(
                token.url_safe_unpadded(),
                text(case, "token_base64url_unpadded"),
                "{}",
                case["name"]
            );
        }
    }
}
