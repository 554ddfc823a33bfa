//! Credentials for the suite's hostile peer ([`crate::hostile`]): a fresh
//! test CA and a certificate, signed by it, for every entity the peer
//! answers for. A harness writes them once per run and tells the server
//! under test to trust the CA (`folio serve --peer-ca`); on the edge in
//! development the server reaches the peer through its plain-HTTP relay
//! instead, and the certificate serves only the suite's own listener.

use std::net::SocketAddr;
use std::path::Path;

use crate::hostile::entity_names;
use crate::target::HostilePeerConfig;

/// Writes `hostile-ca.pem`, `hostile.pem` and `hostile.key` to `dir` for
/// the entities under `domain`, and answers the peer's configuration
/// (listening on `listen`, relaying on `relay`) with the CA's path.
pub fn write_credentials(
    dir: &Path,
    domain: &str,
    listen: SocketAddr,
    relay: Option<SocketAddr>,
) -> Result<(HostilePeerConfig, String), String> {
    let failed = |what: &str, error: rcgen::Error| format!("{what}: {error}");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())
        .map_err(|e| failed("the CA's parameters", e))?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "Folio conformance hostile peer CA",
    );
    let ca_key = rcgen::KeyPair::generate().map_err(|e| failed("the CA's key", e))?;
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(|e| failed("the CA's certificate", e))?;
    let ca = rcgen::Issuer::new(ca_params, ca_key);
    let params = rcgen::CertificateParams::new(entity_names(domain))
        .map_err(|e| failed("the certificate's parameters", e))?;
    let key = rcgen::KeyPair::generate().map_err(|e| failed("the key", e))?;
    let cert = params
        .signed_by(&key, &ca)
        .map_err(|e| failed("the certificate", e))?;
    let write = |name: &str, text: String| -> Result<String, String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
        Ok(path.display().to_string())
    };
    let ca_pem = write("hostile-ca.pem", ca_cert.pem())?;
    let config = HostilePeerConfig {
        listen,
        domain: domain.to_owned(),
        cert: write("hostile.pem", cert.pem())?,
        key: write("hostile.key", key.serialize_pem())?,
        relay,
    };
    Ok((config, ca_pem))
}
