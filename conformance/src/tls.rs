//! TLS client settings for the raw transport checks, trusting what the
//! target says to trust.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use url::Url;

use crate::target::Target;

/// A client configuration offering only `versions` and these ALPN protocols.
pub fn client_config(
    target: &Target,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|error| format!("TLS settings: {error}"))?;
    let mut config = if target.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(roots(target)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(config)
}

/// Opens a TLS connection to the target's base URL.
pub async fn connect(
    target: &Target,
    config: ClientConfig,
) -> Result<TlsStream<TcpStream>, String> {
    let url = Url::parse(&target.base_url).map_err(|error| format!("base_url: {error}"))?;
    let host = url.host_str().ok_or("base_url has no host")?.to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let tcp = TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|error| format!("connecting to {host}:{port}: {error}"))?;
    let name = ServerName::try_from(host.trim_matches(['[', ']']).to_string())
        .map_err(|error| format!("server name {host}: {error}"))?;
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|error| format!("TLS handshake with {host}:{port}: {error}"))
}

fn roots(target: &Target) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &target.ca_cert {
        for certificate in CertificateDer::pem_file_iter(path)
            .map_err(|error| format!("ca_cert {path}: {error}"))?
        {
            let certificate = certificate.map_err(|error| format!("ca_cert {path}: {error}"))?;
            roots
                .add(certificate)
                .map_err(|error| format!("ca_cert {path}: {error}"))?;
        }
    }
    Ok(roots)
}

/// `insecure: true`: any certificate is accepted, but handshake signatures
/// are still verified.
#[derive(Debug)]
struct AcceptAnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, certificate, signature, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, certificate, signature, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
