//! Folio's Rust client: what an app (or a test of a server) needs to talk to
//! a Folio server. It shares no code with the server's core on purpose: its
//! [`signer`] is written from the protocol and checked against
//! `../shared/vectors`, so that the conformance suite, which is built on
//! it, tests the core rather than agreeing with it.
//!
//! - [`signer`]: app keys, request signatures and bearer tokens, in both
//!   dialects and both signature layouts.
//! - [`client`]: requests ([`client::Call`]) signed and sent over HTTPS
//!   (reqwest on rustls, HTTP/2 when offered), answers read whole.
//! - [`sse`]: reading an event stream one event at a time.

pub mod client;
pub mod signer;
pub mod sse;

/// Which server certificates a client trusts.
pub trait Trust {
    /// A PEM certificate file to trust besides the web's roots (a server's
    /// self-signed one).
    fn ca_cert(&self) -> Option<&str>;
    /// Whether to accept any certificate (tests only).
    fn insecure(&self) -> bool;
}

/// The web's roots, and optionally one more certificate.
#[derive(Debug, Clone, Default)]
pub struct TrustOptions {
    pub ca_cert: Option<String>,
    pub insecure: bool,
}

impl Trust for TrustOptions {
    fn ca_cert(&self) -> Option<&str> {
        self.ca_cert.as_deref()
    }

    fn insecure(&self) -> bool {
        self.insecure
    }
}
