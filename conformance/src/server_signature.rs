//! Server signatures (docs/federation.md §2), written apart from the
//! server's: the suite signs requests as its hostile entities' server,
//! honestly or not.
//!
//! The header is `SVC entity="…" algorithm="ed25519" ts="…" nonce="…"
//! headers="…" signature="…"`, and the signed input the app layout's with
//! `svc.server` on its first line and the entity where an app's
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

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer as _, SigningKey};
use url::Url;

use crate::client::{host_and_port, path_and_query};

/// The header that carries a body's SHA-256, which a server signs.
pub const CONTENT_SHA256: &str = "x-svc-content-sha256";

/// An entity's server key: signs the requests its server sends.
#[derive(Clone)]
pub struct ServerKey {
    pub entity: String,
    key: SigningKey,
}

impl std::fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKey")
            .field("entity", &self.entity)
            .field("public_key", &self.public_key())
            .finish()
    }
}

impl ServerKey {
    /// A fresh key for `entity`.
    pub fn generate(entity: &str) -> Self {
        Self {
            entity: entity.to_owned(),
            key: SigningKey::from_bytes(&rand::random()),
        }
    }

    /// Standard base64 of the 32-byte public key, as an Entity record's
    /// `signing_keys` list it.
    pub fn public_key(&self) -> String {
        STANDARD.encode(self.key.verifying_key().as_bytes())
    }

    /// The `Authorization` value of a `method` request to `url` at `ts_ms`
    /// with `nonce`, signing `headers` (lowercase names and their values,
    /// in order). The host and port are the URL's, 443 when it names none.
    pub fn authorization(
        &self,
        method: &str,
        url: &Url,
        headers: &[(&str, &str)],
        ts_ms: i64,
        nonce: &str,
    ) -> String {
        let (host, port) = host_and_port(url);
        let mut input = format!(
            "svc.server\ned25519\n{ts_ms}\n{nonce}\n{}\n{method}\n{}\n{host}\n{port}\n",
            self.entity,
            path_and_query(url),
        );
        for (name, value) in headers {
            input.push_str(&format!("{name}={value}\n"));
        }
        let signature = STANDARD.encode(self.key.sign(input.as_bytes()).to_bytes());
        let names: Vec<&str> = headers.iter().map(|(name, _)| *name).collect();
        format!(
            "SVC entity=\"{}\" algorithm=\"ed25519\" ts=\"{ts_ms}\" nonce=\"{nonce}\" \
             headers=\"{}\" signature=\"{signature}\"",
            self.entity,
            names.join(","),
        )
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signature, Verifier};

    use super::*;

    #[test]
    fn the_signature_covers_the_documented_input() {
        let key = ServerKey::generate("alice.example");
        let url = Url::parse("https://bob.example/api/bob/notifications?x=1").unwrap();
        let digest = "ab".repeat(32);
        let header = key.authorization("POST", &url, &[(CONTENT_SHA256, &digest)], 17, "n1");
        let prefix = "SVC entity=\"alice.example\" algorithm=\"ed25519\" ts=\"17\" nonce=\"n1\" \
                      headers=\"x-svc-content-sha256\" signature=\"";
        let signature = header
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{header}"));
        let signature = Signature::from_slice(&STANDARD.decode(signature).unwrap()).unwrap();
        let input = format!(
            "svc.server\ned25519\n17\nn1\nalice.example\nPOST\n/api/bob/notifications?x=1\n\
             bob.example\n443\nx-svc-content-sha256={digest}\n"
        );
        key.key
            .verifying_key()
            .verify(input.as_bytes(), &signature)
            .unwrap();
    }
}
