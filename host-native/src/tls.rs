//! TLS: rustls with TLS 1.2 and 1.3 and ALPN `h2` then `http/1.1`, from a
//! given certificate or one generated (self-signed) on first start.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Pem(String),
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
}

/// Writes a self-signed certificate for `hosts` unless `cert` exists.
pub fn ensure_self_signed(cert: &Path, key: &Path, hosts: Vec<String>) -> Result<bool, TlsError> {
    if cert.exists() && key.exists() {
        return Ok(false);
    }
    let generated = rcgen::generate_simple_self_signed(hosts)?;
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).map_err(|source| TlsError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    write(key, generated.signing_key.serialize_pem())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600));
    }
    write(cert, generated.cert.pem())?;
    Ok(true)
}

/// The server's rustls configuration.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| TlsError::Pem(format!("{}: {e}", cert.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem(format!("{}: {e}", cert.display())))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| TlsError::Pem(format!("{}: {e}", key.display())))?;
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
