//! A test CA for the tests that run servers over TLS with certificates
//! they trust (`--peer-ca`): two servers federating, and their clients.

use std::path::{Path, PathBuf};

use folio_client::TrustOptions;
use folio_conformance::client::Http;

/// A test CA, and certificates it signs.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pub pem: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Folio federation test CA");
        let key = rcgen::KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("the CA certificate");
        let pem = dir.join("ca.pem");
        std::fs::write(&pem, cert.pem()).expect("ca.pem");
        TestCa {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        }
    }

    /// An HTTP client that trusts the CA.
    pub fn client(&self) -> Http {
        let trust = TrustOptions {
            ca_cert: Some(self.pem.display().to_string()),
            insecure: false,
        };
        Http::new(&trust).expect("an HTTP client")
    }

    /// A certificate for `names`, written as `{stem}.pem` and `{stem}.key`.
    pub fn certificate(&self, dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let params = rcgen::CertificateParams::new(names).expect("params");
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        let (cert_path, key_path) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).expect("cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("key");
        (cert_path, key_path)
    }
}
