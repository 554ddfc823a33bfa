//! The limits a server enforces (PROTOCOL.md §13), in one value a host
//! configures once and hands to the checks that need it, and that
//! `server_info` reports (see [`crate::service::discovery::server_info_json`]).
//!
//! Two kinds of limit live here. Those a host may change or switch off are
//! fields of [`Limits`]; `None` switches one off. Those the protocol fixes
//! (the page size range, the filter length, the data nesting depth) are
//! enforced by the core itself wherever the value is read, cannot be
//! changed, and appear here only as constants so that `server_info` lists
//! them beside the others.
//!
//! Every breach answers with a problem+json error (never a dropped
//! connection), so a host sets its HTTP library's own limits *above* these
//! and lets these checks answer first.

use serde::{Serialize, Serializer};

use crate::problem::{Problem, ProblemType};
use crate::query::{MAX_FILTER_LEN, MAX_FILTERS, PAGE_SIZES};
use crate::schema::MAX_VALUE_DEPTH;
use crate::service::events::{
    HEARTBEAT_INTERVAL_MS, MAX_CONNECTIONS_PER_SERVER, MAX_CONNECTIONS_PER_USER,
};

/// Default largest JSON request body: 1 MiB.
pub const DEFAULT_JSON_BODY_BYTES: u64 = 1 << 20;
/// Default largest blob upload: 64 MiB.
pub const DEFAULT_BLOB_BYTES: u64 = 64 << 20;
/// Default longest request target (path and query): 16 KiB.
pub const DEFAULT_REQUEST_TARGET_BYTES: usize = 16 << 10;
/// Default largest request header section: 16 KiB (see [`header_section_len`]).
pub const DEFAULT_REQUEST_HEADER_BYTES: usize = 16 << 10;
/// Default write rate of one app: 100 writes a second, bursts of 200.
pub const DEFAULT_WRITES_PER_APP: RateLimit = RateLimit {
    per_second: 100,
    burst: 200,
};
/// Default rate of unauthenticated reads from one client address: 300 a
/// second, bursts of 300.
pub const DEFAULT_UNAUTHENTICATED_READS_PER_ADDRESS: RateLimit = RateLimit {
    per_second: 300,
    burst: 300,
};

/// App registrations per client address (PROTOCOL.md §10): each stores two
/// records, so a stranger may not register apps faster than this.
/// Notifications one other entity's server may send to one user
/// (federation, `docs/federation.md` §6): as many as one app's writes, 100
/// a second with bursts of 200 (a server sends one request per batch of up
/// to 100 versions, so this is a flood's bound, not a busy
/// conversation's).
pub const DEFAULT_NOTIFICATIONS_PER_ENTITY: RateLimit = RateLimit {
    per_second: 100,
    burst: 200,
};
/// Notifications one user receives from every other server together: a
/// bound on what a crowd of senders (or one sender under many names) makes
/// a user's store do, whatever each sender's own rate.
pub const DEFAULT_NOTIFICATIONS_PER_USER: RateLimit = RateLimit {
    per_second: 200,
    burst: 400,
};
/// Notifications from every entity under one registrable domain (the
/// public suffix list's `evil.example` for `e1.evil.example`,
/// `e2.evil.example`, …) to one user: names under one domain cost their
/// owner nothing, so they share one entity's rate.
pub const DEFAULT_NOTIFICATIONS_PER_DOMAIN: RateLimit = DEFAULT_NOTIFICATIONS_PER_ENTITY;

/// Default quota of what servers of entities a user knows (has linked to
/// in a record of their own) may store in the user's store by
/// notification: a million versions, 4 GiB.
pub const DEFAULT_RECEIVED_FROM_KNOWN: ReceivedQuota = ReceivedQuota {
    versions: 1_000_000,
    bytes: 4 << 30,
};
/// Default quota of what servers of entities a user never linked to may
/// store in the user's store by notification (`notification_unknown`,
/// versions that name the user): 10,000 versions, 64 MiB.
pub const DEFAULT_RECEIVED_FROM_STRANGERS: ReceivedQuota = ReceivedQuota {
    versions: 10_000,
    bytes: 64 << 20,
};

/// How much other servers may store in one user's store by notification:
/// past either bound, a notified version is refused with
/// `federation/507-quota-exceeded` and nothing is stored. Counted from the
/// versions stored (their JSON as stored), never reset by time: the store's
/// size, not a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ReceivedQuota {
    /// The most versions those servers may store in the user's store.
    pub versions: u64,
    /// The most bytes of versions, as stored, those servers may store in the user's store.
    pub bytes: u64,
}

impl ReceivedQuota {
    /// A quota as a server's settings write it: `VERSIONS/BYTES` (both
    /// positive whole numbers; bytes may end in `KiB`, `MiB` or `GiB`), or
    /// `off` for none.
    pub fn parse_setting(text: &str) -> Result<Option<ReceivedQuota>, String> {
        if text == "off" {
            return Ok(None);
        }
        let (versions, bytes) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` is not `VERSIONS/BYTES` or `off`"))?;
        let number = |t: &str, unit: u64| {
            t.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .and_then(|n| n.checked_mul(unit))
                .ok_or_else(|| format!("`{t}` is not a positive number"))
        };
        let bytes = match bytes {
            b if b.ends_with("GiB") => number(&b[..b.len() - 3], 1 << 30)?,
            b if b.ends_with("MiB") => number(&b[..b.len() - 3], 1 << 20)?,
            b if b.ends_with("KiB") => number(&b[..b.len() - 3], 1 << 10)?,
            b => number(b, 1)?,
        };
        Ok(Some(ReceivedQuota {
            versions: number(versions, 1)?,
            bytes,
        }))
    }
}

impl ReceivedQuota {
    /// Whether a store holding `stored` (versions, bytes) under this quota
    /// takes `incoming` more: neither bound may be passed.
    pub fn admits(&self, stored: (u64, u64), incoming: (u64, u64)) -> bool {
        stored.0.saturating_add(incoming.0) <= self.versions
            && stored.1.saturating_add(incoming.1) <= self.bytes
    }
}

/// As [`ReceivedQuota::parse_setting`] reads it: `VERSIONS/BYTES`.
impl std::fmt::Display for ReceivedQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bytes = self.bytes;
        match [(30, "GiB"), (20, "MiB"), (10, "KiB")]
            .into_iter()
            .find(|(shift, _)| bytes >> shift > 0 && bytes.is_multiple_of(1 << shift))
        {
            Some((shift, unit)) => write!(f, "{}/{}{unit}", self.versions, bytes >> shift),
            None => write!(f, "{}/{bytes}", self.versions),
        }
    }
}

/// App registrations per client address, by default (PROTOCOL.md §10).
pub const DEFAULT_REGISTRATIONS_PER_ADDRESS: RateLimit = RateLimit {
    per_second: 10,
    burst: 20,
};

/// Consent-page sign-in attempts per client address per minute (and the
/// burst): bounds password guessing, with argon2 making each guess costly.
pub const DEFAULT_SIGN_IN_ATTEMPTS_PER_MINUTE: u32 = 10;

/// A token-bucket rate: `burst` requests at once, refilled at `per_second`.
/// A request the bucket cannot pay for is `request/429-rate-limited` with a
/// `Retry-After` of the seconds until it could.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct RateLimit {
    /// Requests the bucket refills per second.
    pub per_second: u32,
    /// Requests the bucket holds at once.
    pub burst: u32,
}

/// A count per minute as a server's settings write it (the consent page's
/// sign-in attempts): a positive number, or `off` for none.
pub fn parse_per_minute_setting(text: &str) -> Result<Option<u32>, String> {
    match text {
        "off" => Ok(None),
        _ => text
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| format!("`{text}` is not a positive number or `off`")),
    }
}

impl RateLimit {
    /// A rate as a server's settings write it: `PER_SECOND/BURST` (both
    /// positive), or `off` for none.
    pub fn parse_setting(text: &str) -> Result<Option<RateLimit>, String> {
        if text == "off" {
            return Ok(None);
        }
        let (rate, burst) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` is not `PER_SECOND/BURST` or `off`"))?;
        let number = |t: &str| {
            t.parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("`{t}` is not a positive number"))
        };
        Ok(Some(RateLimit {
            per_second: number(rate)?,
            burst: number(burst)?,
        }))
    }
}

/// As [`RateLimit::parse_setting`] reads it: `PER_SECOND/BURST`.
impl std::fmt::Display for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.per_second, self.burst)
    }
}

/// The limits in force on one server.
///
/// Start from [`Limits::default`] (PROTOCOL.md §13) and change fields:
/// `Limits { writes_per_app: None, ..Limits::default() }` switches the
/// write rate limit off, as load tests do.
///
/// Serialized (for `server_info`) as an object with one stable snake_case
/// name per limit, the fixed ones included, a switched-off limit as `null`:
/// `json_body_bytes`, `json_depth`, `blob_bytes`, `page_size_max`,
/// `filter_bytes`, `filters`, `registration_body_bytes`, `sse_connections_per_server`, `sse_connections_per_user`,
/// `heartbeat_ms`, `request_target_bytes`, `request_header_bytes`,
/// `writes_per_app`, `unauthenticated_reads_per_address`,
/// `notifications_per_entity`, `notifications_per_domain` and
/// `notifications_per_user` (each `{"per_second", "burst"}`), and
/// `received_from_known` and `received_from_strangers` (each
/// `{"versions", "bytes"}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest JSON request body, in bytes: `request/413-body-too-large`.
    pub json_body_bytes: Option<u64>,
    /// Largest blob upload, in bytes: `request/413-body-too-large`.
    pub blob_bytes: Option<u64>,
    /// Most open events streams on the whole server: `request/429-rate-limited`.
    pub sse_connections_per_server: Option<usize>,
    /// Most open events streams of one user: `request/429-rate-limited`.
    pub sse_connections_per_user: Option<usize>,
    /// Longest silence on an events stream before a heartbeat, in
    /// milliseconds. It can be changed but not switched off: it keeps idle
    /// streams alive through proxies. Must be above zero.
    pub heartbeat_ms: u64,
    /// Longest request target (path and query, as received), in bytes:
    /// `request/414-uri-too-long`.
    pub request_target_bytes: Option<usize>,
    /// Largest request header section, in bytes as [`header_section_len`]
    /// counts it: `request/431-headers-too-large`.
    pub request_header_bytes: Option<usize>,
    /// Write rate of one authorized app.
    pub writes_per_app: Option<RateLimit>,
    /// Rate of unauthenticated reads from one client address.
    pub unauthenticated_reads_per_address: Option<RateLimit>,
    /// Rate of app registrations from one client address (PROTOCOL.md §10).
    pub registrations_per_address: Option<RateLimit>,
    /// Consent-page sign-in attempts from one client address, per minute.
    pub sign_in_attempts_per_minute: Option<u32>,
    /// Notifications from one other entity's server to one user
    /// (federation): `request/429-rate-limited`.
    pub notifications_per_entity: Option<RateLimit>,
    /// Notifications from the servers of every entity under one
    /// registrable domain to one user: `request/429-rate-limited`.
    pub notifications_per_domain: Option<RateLimit>,
    /// Notifications to one user from every other server together:
    /// `request/429-rate-limited`.
    pub notifications_per_user: Option<RateLimit>,
    /// What the servers of entities a user knows may store in the user's
    /// store: `federation/507-quota-exceeded`.
    pub received_from_known: Option<ReceivedQuota>,
    /// What the servers of entities a user never linked to may store in
    /// the user's store: `federation/507-quota-exceeded`.
    pub received_from_strangers: Option<ReceivedQuota>,
}

impl Limits {
    /// Deepest nesting of a record's values, fixed by the protocol and
    /// enforced by schema validation (`record/400-schema-violation`).
    pub const JSON_DEPTH: usize = MAX_VALUE_DEPTH;
    /// Largest `page_size`, fixed by the protocol (`request/400-invalid-parameter`).
    pub const PAGE_SIZE_MAX: u32 = *PAGE_SIZES.end();
    /// Longest `filter`, in bytes, fixed by the protocol (`request/400-invalid-filter`).
    pub const FILTER_BYTES: usize = MAX_FILTER_LEN;
    /// Most `filter` parameters on one list or events request, fixed by
    /// the protocol (`request/400-invalid-parameter`): each becomes a
    /// condition of one SQL statement, whose depth SQLite bounds.
    pub const FILTERS: usize = MAX_FILTERS;
    /// Largest registration body (an App record), in bytes: anyone may
    /// register, and each registration is stored for good, so it may not
    /// be as large as an authorized app's write (`request/413-body-too-large`).
    /// The App type's own bounds (a name of 100 characters, a description
    /// of 500, three URIs of 2,048) leave room for about 250 scope types.
    pub const REGISTRATION_BODY_BYTES: u64 = 32 << 10;

    /// The largest registration body: [`Self::REGISTRATION_BODY_BYTES`],
    /// or the JSON body limit if that is smaller.
    pub fn registration_body_bytes(&self) -> Option<u64> {
        Some(
            self.json_body_bytes
                .map_or(Self::REGISTRATION_BODY_BYTES, |json| {
                    json.min(Self::REGISTRATION_BODY_BYTES)
                }),
        )
    }
}

impl Default for Limits {
    /// The defaults of PROTOCOL.md §13, every limit on.
    fn default() -> Self {
        Self {
            json_body_bytes: Some(DEFAULT_JSON_BODY_BYTES),
            blob_bytes: Some(DEFAULT_BLOB_BYTES),
            sse_connections_per_server: Some(MAX_CONNECTIONS_PER_SERVER),
            sse_connections_per_user: Some(MAX_CONNECTIONS_PER_USER),
            heartbeat_ms: HEARTBEAT_INTERVAL_MS,
            request_target_bytes: Some(DEFAULT_REQUEST_TARGET_BYTES),
            request_header_bytes: Some(DEFAULT_REQUEST_HEADER_BYTES),
            writes_per_app: Some(DEFAULT_WRITES_PER_APP),
            unauthenticated_reads_per_address: Some(DEFAULT_UNAUTHENTICATED_READS_PER_ADDRESS),
            registrations_per_address: Some(DEFAULT_REGISTRATIONS_PER_ADDRESS),
            sign_in_attempts_per_minute: Some(DEFAULT_SIGN_IN_ATTEMPTS_PER_MINUTE),
            notifications_per_entity: Some(DEFAULT_NOTIFICATIONS_PER_ENTITY),
            notifications_per_domain: Some(DEFAULT_NOTIFICATIONS_PER_DOMAIN),
            notifications_per_user: Some(DEFAULT_NOTIFICATIONS_PER_USER),
            received_from_known: Some(DEFAULT_RECEIVED_FROM_KNOWN),
            received_from_strangers: Some(DEFAULT_RECEIVED_FROM_STRANGERS),
        }
    }
}

impl Serialize for Limits {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire {
            json_body_bytes: Option<u64>,
            json_depth: usize,
            blob_bytes: Option<u64>,
            page_size_max: u32,
            filter_bytes: usize,
            filters: usize,
            registration_body_bytes: Option<u64>,
            sse_connections_per_server: Option<usize>,
            sse_connections_per_user: Option<usize>,
            heartbeat_ms: u64,
            request_target_bytes: Option<usize>,
            request_header_bytes: Option<usize>,
            writes_per_app: Option<RateLimit>,
            unauthenticated_reads_per_address: Option<RateLimit>,
            notifications_per_entity: Option<RateLimit>,
            notifications_per_domain: Option<RateLimit>,
            notifications_per_user: Option<RateLimit>,
            received_from_known: Option<ReceivedQuota>,
            received_from_strangers: Option<ReceivedQuota>,
        }
        Wire {
            json_body_bytes: self.json_body_bytes,
            json_depth: Self::JSON_DEPTH,
            blob_bytes: self.blob_bytes,
            page_size_max: Self::PAGE_SIZE_MAX,
            filter_bytes: Self::FILTER_BYTES,
            filters: Self::FILTERS,
            registration_body_bytes: self.registration_body_bytes(),
            sse_connections_per_server: self.sse_connections_per_server,
            sse_connections_per_user: self.sse_connections_per_user,
            heartbeat_ms: self.heartbeat_ms,
            request_target_bytes: self.request_target_bytes,
            request_header_bytes: self.request_header_bytes,
            writes_per_app: self.writes_per_app,
            unauthenticated_reads_per_address: self.unauthenticated_reads_per_address,
            notifications_per_entity: self.notifications_per_entity,
            notifications_per_domain: self.notifications_per_domain,
            notifications_per_user: self.notifications_per_user,
            received_from_known: self.received_from_known,
            received_from_strangers: self.received_from_strangers,
        }
        .serialize(serializer)
    }
}

/// Checks the length of a request target (path and query, as received,
/// in bytes) against [`Limits::request_target_bytes`]:
/// `request/414-uri-too-long`. Call it before routing or parsing the query.
pub fn check_request_target(len: usize, limits: &Limits) -> Result<(), Problem> {
    match limits.request_target_bytes {
        Some(max) if len > max => Err(Problem::new(ProblemType::UriTooLong).with_detail(format!(
            "the request target is {len} bytes; this server takes at most {max}"
        ))),
        _ => Ok(()),
    }
}

/// Checks the size of a request's header section, as [`header_section_len`]
/// counts it, against [`Limits::request_header_bytes`]:
/// `request/431-headers-too-large`. Call it before reading any header.
pub fn check_header_bytes(len: usize, limits: &Limits) -> Result<(), Problem> {
    match limits.request_header_bytes {
        Some(max) if len > max => Err(Problem::new(ProblemType::HeadersTooLarge).with_detail(
            format!("the request headers are {len} bytes; this server takes at most {max}"),
        )),
        _ => Ok(()),
    }
}

/// Checks a body length against a limit (`None`: no limit):
/// `request/413-body-too-large`.
///
/// Call it with the `Content-Length` before reading, and again with the
/// count read so far while reading a body that has none (chunked), so that
/// an oversized body is refused without being held in memory. Pass
/// [`Limits::json_body_bytes`] for JSON endpoints; blob uploads go through
/// [`crate::service::blob::check_upload_length`].
pub fn check_body_len(len: u64, limit: Option<u64>) -> Result<(), Problem> {
    match limit {
        Some(max) if len > max => Err(Problem::new(ProblemType::BodyTooLarge).with_detail(
            format!("the body is at least {len} bytes; this server takes at most {max}"),
        )),
        _ => Ok(()),
    }
}

/// The size of a header section as the limit counts it: for each field, its
/// name, its value and 4 bytes (`": "` and CRLF), as HTTP/1.1 writes it.
/// Both hosts count from the decoded fields, whatever the wire version, so
/// a request is accepted or refused alike on each.
pub fn header_section_len<N, V>(fields: impl IntoIterator<Item = (N, V)>) -> usize
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    fields
        .into_iter()
        .map(|(name, value)| {
            name.as_ref()
                .len()
                .saturating_add(value.as_ref().len())
                .saturating_add(4)
        })
        .fold(0, usize::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_reads_as_versions_and_bytes_with_binary_units() {
        let read = |text: &str| ReceivedQuota::parse_setting(text);
        assert_eq!(
            read("20/1MiB"),
            Ok(Some(ReceivedQuota {
                versions: 20,
                bytes: 1 << 20
            }))
        );
        assert_eq!(read("5/512").map(|q| q.map(|q| q.bytes)), Ok(Some(512)));
        assert_eq!(read("off"), Ok(None));
        for bad in ["20", "0/1MiB", "20/0", "20/-1", "x/1", "20/99999999999GiB"] {
            assert!(read(bad).is_err(), "{bad}");
        }
        // What --help shows reads back as itself.
        for quota in [DEFAULT_RECEIVED_FROM_KNOWN, DEFAULT_RECEIVED_FROM_STRANGERS] {
            assert_eq!(read(&quota.to_string()), Ok(Some(quota)));
        }
        assert_eq!(DEFAULT_RECEIVED_FROM_STRANGERS.to_string(), "10000/64MiB");
    }

    #[test]
    fn a_quota_admits_until_either_bound_would_be_passed() {
        let quota = ReceivedQuota {
            versions: 3,
            bytes: 1_000,
        };
        assert!(quota.admits((0, 0), (3, 1_000)), "exactly full");
        assert!(!quota.admits((3, 10), (1, 1)), "one version too many");
        assert!(!quota.admits((1, 990), (1, 11)), "one byte too many");
        assert!(quota.admits((1, 990), (1, 10)));
        assert!(!quota.admits((u64::MAX, 0), (1, 0)), "no overflow");
    }

    #[test]
    fn defaults_are_protocol_section_13() {
        let limits = Limits::default();
        assert_eq!(limits.json_body_bytes, Some(1_048_576));
        assert_eq!(limits.blob_bytes, Some(67_108_864));
        assert_eq!(limits.sse_connections_per_server, Some(1_024));
        assert_eq!(limits.sse_connections_per_user, Some(64));
        assert_eq!(limits.heartbeat_ms, 15_000);
        assert_eq!(limits.request_target_bytes, Some(16_384));
        assert_eq!(limits.request_header_bytes, Some(16_384));
        assert_eq!(
            limits.writes_per_app,
            Some(RateLimit {
                per_second: 100,
                burst: 200
            })
        );
        assert_eq!(
            limits.unauthenticated_reads_per_address,
            Some(RateLimit {
                per_second: 300,
                burst: 300
            })
        );
        assert_eq!(Limits::JSON_DEPTH, 64);
        assert_eq!(Limits::PAGE_SIZE_MAX, 200);
        assert_eq!(Limits::FILTER_BYTES, 4_096);
    }

    #[test]
    fn checks_pass_up_to_the_limit_and_are_off_when_switched_off() {
        let limits = Limits::default();
        assert!(check_request_target(16_384, &limits).is_ok());
        let too_long = check_request_target(16_385, &limits).unwrap_err();
        assert_eq!(too_long.kind, ProblemType::UriTooLong);
        assert!(check_header_bytes(16_384, &limits).is_ok());
        assert_eq!(
            check_header_bytes(16_385, &limits).unwrap_err().kind,
            ProblemType::HeadersTooLarge
        );
        assert!(check_body_len(10, Some(10)).is_ok());
        assert_eq!(check_body_len(11, Some(10)).unwrap_err().status(), 413);

        let off = Limits {
            request_target_bytes: None,
            request_header_bytes: None,
            ..Limits::default()
        };
        assert!(check_request_target(usize::MAX, &off).is_ok());
        assert!(check_header_bytes(usize::MAX, &off).is_ok());
        assert!(check_body_len(u64::MAX, None).is_ok());
    }

    #[test]
    fn header_sections_count_like_http_1_1() {
        let fields = [("host", "a.example"), ("accept", "*/*")];
        assert_eq!(header_section_len(fields), 4 + 9 + 4 + 6 + 3 + 4);
        assert_eq!(header_section_len(Vec::<(&str, &str)>::new()), 0);
    }

    #[test]
    fn rates_and_counts_read_as_settings_write_them() {
        assert_eq!(
            RateLimit::parse_setting("50/100"),
            Ok(Some(RateLimit {
                per_second: 50,
                burst: 100
            }))
        );
        assert_eq!(RateLimit::parse_setting("off"), Ok(None));
        for bad in ["50", "0/10", "10/0", "a/b", "", "-1/2"] {
            assert!(RateLimit::parse_setting(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_per_minute_setting("10"), Ok(Some(10)));
        assert_eq!(parse_per_minute_setting("off"), Ok(None));
        for bad in ["0", "-3", "ten", ""] {
            assert!(parse_per_minute_setting(bad).is_err(), "{bad:?}");
        }
    }
}
