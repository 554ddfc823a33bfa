//! Requests to other servers: what core asks a host to send, what comes
//! back, and the rules a host applies while sending (PROTOCOL.md §4,
//! `docs/federation.md` "Talking to peers").
//!
//! Core decides every request (its URL, its headers, its body, how many
//! bytes of answer it accepts) and judges every answer. The host owns the
//! socket: it resolves the name, refuses an address that
//! [`address_allowed`] refuses, connects within [`PEER_CONNECT_TIMEOUT_MS`],
//! gives up on the whole exchange after [`PEER_EXCHANGE_TIMEOUT_MS`], stops
//! reading an answer as soon as it passes [`PeerRequest::max_answer_bytes`],
//! and never follows a redirect: a 3xx comes back as an answer, which core
//! refuses ([`PeerFailure::Redirected`]). Every URL core asks comes from
//! an Entity record, so a server that moves updates that record instead.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How long a host waits for a peer's TCP and TLS handshake.
pub const PEER_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// How long a host waits for a whole exchange with a peer: connection,
/// request, and every byte of the answer.
pub const PEER_EXCHANGE_TIMEOUT_MS: u64 = 15_000;
/// The largest answer core accepts to a discovery `HEAD` or a notification.
pub const SMALL_ANSWER_BYTES: usize = 64 * 1024;

/// The methods core sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerMethod {
    /// `HEAD`: entity discovery.
    Head,
    /// `GET`: reading an Entity record, records or versions from a peer.
    Get,
    /// `POST`: delivering a notification.
    Post,
}

impl PeerMethod {
    /// The method's name, as a request line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerMethod::Head => "HEAD",
            PeerMethod::Get => "GET",
            PeerMethod::Post => "POST",
        }
    }
}

/// A request for a host to send to another server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRequest {
    /// The method to send.
    pub method: PeerMethod,
    /// An absolute `https` URL (`http` only where the host allows plain
    /// HTTP between local test servers).
    pub url: String,
    /// Lowercase names.
    pub headers: Vec<(&'static str, String)>,
    /// A JSON body, for a POST.
    pub body: Option<Vec<u8>>,
    /// The most bytes of answer body to read; more is [`PeerFailure::TooLarge`].
    pub max_answer_bytes: usize,
}

/// A peer's answer, read whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerAnswer {
    /// The answer's status code.
    pub status: u16,
    /// Lowercase names, in the order received; a name may repeat.
    pub headers: Vec<(String, String)>,
    /// The answer's body, whole.
    pub body: Vec<u8>,
}

impl PeerAnswer {
    /// The first value of header `lowercase_name`.
    pub fn header(&self, lowercase_name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(name, _)| name == lowercase_name)
            .map(|(_, value)| value.as_str())
    }

    /// Every value of header `lowercase_name`.
    pub fn headers_named<'a>(&'a self, lowercase_name: &'a str) -> impl Iterator<Item = &'a str> {
        self.headers
            .iter()
            .filter(move |(name, _)| name == lowercase_name)
            .map(|(_, value)| value.as_str())
    }
}

/// A peer's answer body as its chunks arrive, kept only while it is no
/// longer than the request allows ([`PeerRequest::max_answer_bytes`]).
///
/// A host checks the announced length before it reads
/// ([`AnswerBody::announced`]), pushes each chunk as it arrives
/// ([`AnswerBody::push`]) and stops reading at the first refusal, so that
/// it never holds more of an answer than the request allows.
#[derive(Debug)]
pub struct AnswerBody {
    bytes: Vec<u8>,
    max: usize,
}

impl AnswerBody {
    /// An empty body of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        AnswerBody {
            bytes: Vec::new(),
            max,
        }
    }

    /// Refuses an answer whose announced length (its `Content-Length`;
    /// none for an answer to a `HEAD`, whatever it says) is longer than
    /// allowed, before any of its body is read.
    pub fn announced(&self, length: Option<u64>) -> Result<(), PeerFailure> {
        match length {
            Some(length) if length > self.max as u64 => Err(self.too_large()),
            _ => Ok(()),
        }
    }

    /// Appends the next chunk, or refuses the answer once it is longer
    /// than allowed; after a refusal the host reads no more of it.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), PeerFailure> {
        if chunk.len() > self.max - self.bytes.len() {
            return Err(self.too_large());
        }
        self.bytes.extend_from_slice(chunk);
        Ok(())
    }

    /// The body read.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    fn too_large(&self) -> PeerFailure {
        PeerFailure::TooLarge { max: self.max }
    }
}

/// Why an exchange with a peer failed before core could judge an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerFailure {
    /// The URL is not one core may ask (not https, no host, a port the
    /// host refuses).
    BadUrl(String),
    /// Every address of the name is one [`address_allowed`] refuses. The
    /// address is for the host's log; the message ([`fmt::Display`]), which
    /// reaches apps as a problem's detail, never names it: an app that
    /// names a host would otherwise learn what it resolves to.
    ForbiddenAddress(IpAddr),
    /// The name did not resolve now, the connection or TLS failed, or the
    /// peer closed early.
    Unreachable(String),
    /// The name resolves to no address: the system's resolver answered
    /// that it does not exist (not that it could not ask). What it names
    /// has no server, as far as anyone can tell now.
    NoSuchName(String),
    /// The exchange took longer than [`PEER_EXCHANGE_TIMEOUT_MS`].
    TimedOut,
    /// The answer's body was longer than the request allowed.
    TooLarge {
        /// The most bytes the request allowed.
        max: usize,
    },
    /// A redirect, which core never follows.
    Redirected {
        /// The redirect's `Location`.
        location: String,
    },
}

impl fmt::Display for PeerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerFailure::BadUrl(reason) => write!(f, "not a URL this server asks: {reason}"),
            PeerFailure::ForbiddenAddress(_) => {
                f.write_str("the peer's address is loopback, private or reserved")
            }
            PeerFailure::Unreachable(reason) => write!(f, "the peer is unreachable: {reason}"),
            PeerFailure::NoSuchName(name) => write!(f, "the name {name} has no address"),
            PeerFailure::TimedOut => write!(
                f,
                "the peer did not answer within {PEER_EXCHANGE_TIMEOUT_MS} ms"
            ),
            PeerFailure::TooLarge { max } => {
                write!(f, "the peer's answer is longer than {max} bytes")
            }
            PeerFailure::Redirected { location } => {
                write!(
                    f,
                    "the peer redirects to {location}; redirects are not followed"
                )
            }
        }
    }
}

/// The URL of a request a host sends, checked before anything is
/// resolved or connected: `https` (or `http` when `allow_http`), with a
/// host, and a literal address only where [`address_allowed`] allows it
/// (names are checked once resolved, by the host).
pub fn target_url(
    text: &str,
    allow_http: bool,
    allow_private: bool,
) -> Result<url::Url, PeerFailure> {
    let url = url::Url::parse(text).map_err(|e| PeerFailure::BadUrl(format!("{text}: {e}")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => {
            return Err(PeerFailure::BadUrl(format!(
                "{text}: plain http is not allowed, only https"
            )));
        }
        other => {
            return Err(PeerFailure::BadUrl(format!(
                "{text}: the scheme {other} is not https"
            )));
        }
    }
    let literal = match url.host() {
        None => return Err(PeerFailure::BadUrl(format!("{text}: no host"))),
        Some(url::Host::Domain(_)) => None,
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
    };
    match literal {
        Some(ip) if !address_allowed(ip, allow_private) => Err(PeerFailure::ForbiddenAddress(ip)),
        _ => Ok(url),
    }
}

/// Whether a host may connect to `ip` for a peer: a public unicast
/// address, or any address when `allow_private` (a development setting:
/// two test servers on loopback). Refused otherwise: loopback,
/// unspecified, private (RFC 1918, unique local), link-local, shared
/// (RFC 6598), documentation, benchmarking, multicast, broadcast and
/// reserved ranges, and IPv4-mapped or -compatible forms of them; in IPv6
/// also site-local (`fec0::/10`, deprecated but still routed by some
/// networks) and the transition ranges that reach an IPv4 address through
/// a relay, whatever that address is: 6to4 (`2002::/16`), Teredo
/// (`2001::/32`) and NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`). A relay
/// chooses where such an address leads, so no embedded address is trusted.
pub fn address_allowed(ip: IpAddr, allow_private: bool) -> bool {
    allow_private
        || match ip {
            IpAddr::V4(v4) => public_v4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => public_v4(v4),
                None => public_v6(v6),
            },
        }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space, RFC 6598
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking, RFC 2544
        || a >= 240) // reserved
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first & 0xffc0) == 0xfec0 // site-local, RFC 3879
        || first == 0x2002 // 6to4, RFC 3056: an IPv4 address behind a relay
        || (first == 0x2001 && ip.segments()[1] == 0) // Teredo, RFC 4380
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
        || (first == 0 && ip.segments()[..6].iter().all(|&s| s == 0)) // IPv4-compatible
        || first == 0x0064 && ip.segments()[1] == 0xff9b) // NAT64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_body_is_refused_as_soon_as_it_is_longer_than_allowed() {
        let mut body = AnswerBody::new(5);
        assert_eq!(body.announced(None), Ok(()));
        assert_eq!(body.announced(Some(5)), Ok(()));
        assert_eq!(
            body.announced(Some(6)),
            Err(PeerFailure::TooLarge { max: 5 })
        );
        assert_eq!(body.push(b"abc"), Ok(()));
        assert_eq!(body.push(b"de"), Ok(()));
        assert_eq!(body.push(b"f"), Err(PeerFailure::TooLarge { max: 5 }));
        assert_eq!(body.into_bytes(), b"abcde");
    }

    #[test]
    fn targets_are_https_with_a_host_and_no_refused_literal_address() {
        assert!(target_url("https://alice.example/x", false, false).is_ok());
        for bad in [
            "http://alice.example/",
            "ftp://alice.example/",
            "https://",
            "not a url",
        ] {
            assert!(
                matches!(target_url(bad, false, false), Err(PeerFailure::BadUrl(_))),
                "{bad}"
            );
        }
        assert!(target_url("http://alice.example/", true, false).is_ok());
        assert_eq!(
            target_url("https://127.0.0.1:8443/", false, false).unwrap_err(),
            PeerFailure::ForbiddenAddress("127.0.0.1".parse().unwrap())
        );
        assert!(target_url("https://[::1]/", false, true).is_ok());
    }

    #[test]
    fn a_refused_address_is_not_named_to_apps() {
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let problem = crate::problem::Problem::from(&super::super::PeerError::from(
            PeerFailure::ForbiddenAddress(ip),
        ));
        let detail = problem.detail.unwrap_or_default();
        assert!(!detail.contains("10.1.2.3"), "{detail}");
        assert!(detail.contains("private"), "{detail}");
    }

    #[test]
    fn only_public_unicast_addresses_are_allowed() {
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "192.0.2.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            "64:ff9b::a00:1",
            "fec0::1",
            "feff::1",
            // 6to4 and Teredo reach IPv4 through a relay: the embedded
            // address (10.0.0.1, 127.0.0.1, or even a public one) is not
            // what is connected to.
            "2002:a00:1::1",
            "2002:7f00:1::1",
            "2002:808:808::1",
            "2001:0:4136:e378:8000:63bf:f5ff:fffe",
            "2001::1",
        ] {
            let ip: IpAddr = refused.parse().unwrap();
            assert!(!address_allowed(ip, false), "{refused} must be refused");
            assert!(
                address_allowed(ip, true),
                "{refused} is allowed in development"
            );
        }
        for allowed in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2001:4860:4860::8888",
            "2003::1",
        ] {
            let ip: IpAddr = allowed.parse().unwrap();
            assert!(address_allowed(ip, false), "{allowed} must be allowed");
        }
    }
}
