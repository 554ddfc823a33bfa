//! One HTTP/1.1 connection per load worker, over TLS (Folio) or plain TCP
//! (PocketBase), kept alive between requests: the cost measured is the
//! server's, not the client's connection setup.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Where a server listens and how to reach it.
#[derive(Clone)]
pub struct Endpoint {
    /// `127.0.0.1:port`: what the socket connects to.
    pub address: String,
    /// The `Host` header (and TLS server name): `localhost:port`.
    pub authority: String,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Endpoint {
    /// Plain HTTP.
    pub fn plain(port: u16) -> Self {
        Self {
            address: format!("127.0.0.1:{port}"),
            authority: format!("127.0.0.1:{port}"),
            tls: None,
        }
    }

    /// HTTPS to `localhost`, trusting only the PEM certificate at `ca`.
    pub fn tls(port: u16, ca: &Path) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca)
            .map_err(|error| format!("{}: {error}", ca.display()))?
        {
            let cert = cert.map_err(|error| format!("{}: {error}", ca.display()))?;
            roots
                .add(cert)
                .map_err(|error| format!("{}: {error}", ca.display()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("TLS settings: {error}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::try_from("localhost").map_err(|error| error.to_string())?;
        Ok(Self {
            address: format!("127.0.0.1:{port}"),
            authority: format!("localhost:{port}"),
            tls: Some((TlsConnector::from(Arc::new(config)), name)),
        })
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The port the signature covers.
    pub fn port(&self) -> u16 {
        self.address
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .unwrap_or(443)
    }

    /// Opens a TCP connection and, for HTTPS, completes its TLS handshake;
    /// sends nothing else (the connection floods of [`crate::flood`]).
    pub async fn open_raw(&self) -> Result<RawConn, String> {
        let tcp = TcpStream::connect(&self.address)
            .await
            .map_err(|error| format!("connecting to {}: {error}", self.address))?;
        match &self.tls {
            Some((connector, name)) => connector
                .connect(name.clone(), tcp)
                .await
                .map(|stream| RawConn::Tls(Box::new(stream)))
                .map_err(|error| format!("TLS handshake with {}: {error}", self.address)),
            None => Ok(RawConn::Plain(tcp)),
        }
    }

    /// Opens a new connection and hands back its request half; the
    /// connection itself runs as a task until either side closes it.
    pub async fn connect(&self) -> Result<Conn, String> {
        let tcp = TcpStream::connect(&self.address)
            .await
            .map_err(|error| format!("connecting to {}: {error}", self.address))?;
        tcp.set_nodelay(true).map_err(|error| error.to_string())?;
        let sender = match &self.tls {
            Some((connector, name)) => {
                let stream = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|error| format!("TLS handshake with {}: {error}", self.address))?;
                handshake(TokioIo::new(stream)).await?
            }
            None => handshake(TokioIo::new(tcp)).await?,
        };
        Ok(Conn { sender })
    }
}

async fn handshake<T>(io: T) -> Result<SendRequest<Full<Bytes>>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(io)
        .await
        .map_err(|error| format!("HTTP/1.1 handshake: {error}"))?;
    tokio::spawn(async move {
        // A closed connection shows up as an error on the next request.
        let _ = connection.await;
    });
    Ok(sender)
}

/// A connection with nothing on it yet.
pub enum RawConn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// A kept-alive HTTP/1.1 connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
}

/// A whole answer.
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Conn {
    /// Sends one request and reads the whole answer.
    pub async fn send(&mut self, request: Request<Full<Bytes>>) -> Result<Answer, String> {
        self.sender
            .ready()
            .await
            .map_err(|error| format!("connection: {error}"))?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|error| format!("request: {error}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|error| format!("reading the answer: {error}"))?
            .to_bytes();
        Ok(Answer { status, body })
    }

    /// Sends one request and hands back the answer's head and a body
    /// still streaming (an event stream).
    pub async fn open(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, String> {
        self.sender
            .ready()
            .await
            .map_err(|error| format!("connection: {error}"))?;
        self.sender
            .send_request(request)
            .await
            .map_err(|error| format!("request: {error}"))
    }
}

/// A request with this method, target and body; `Host` from `endpoint`.
pub fn request(
    endpoint: &Endpoint,
    method: http::Method,
    target: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Request<Full<Bytes>>, String> {
    let mut builder = Request::builder()
        .method(method)
        .uri(target)
        .header(http::header::HOST, &endpoint.authority);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    if !body.is_empty() {
        builder = builder.header(http::header::CONTENT_TYPE, "application/json");
    }
    builder
        .body(Full::new(body))
        .map_err(|error| format!("request to {target}: {error}"))
}
