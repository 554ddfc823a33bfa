//! Rate limits (PROTOCOL.md §13): writes per app and unauthenticated reads
//! per client address, as token buckets (governor's GCRA).

use std::net::IpAddr;
use std::num::NonZeroU32;

use folio_core::limits::RateLimit;
use folio_core::model::RecordId;
use folio_core::problem::{Problem, ProblemType};
use folio_core::service::Limited;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

struct Bucket<K: std::hash::Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
}

impl<K: std::hash::Hash + Eq + Clone> Bucket<K> {
    fn new(rate: RateLimit) -> Option<Self> {
        let per_second = NonZeroU32::new(rate.per_second)?;
        let burst = NonZeroU32::new(rate.burst)?;
        Some(Bucket {
            limiter: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
        })
    }

    fn per_minute(attempts: u32) -> Option<Self> {
        let attempts = NonZeroU32::new(attempts)?;
        Some(Bucket {
            limiter: RateLimiter::keyed(Quota::per_minute(attempts)),
        })
    }

    fn check(&self, key: &K, what: &str) -> Result<(), Limited> {
        self.limiter.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            Limited {
                problem: Problem::new(ProblemType::RateLimited)
                    .with_detail(format!("too many {what}")),
                retry_after_secs: (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1),
            }
        })
    }
}

/// The server's rate limiters.
pub struct RateLimits {
    writes: Option<Bucket<RecordId>>,
    reads: Option<Bucket<IpAddr>>,
    registrations: Option<Bucket<IpAddr>>,
    sign_ins: Option<Bucket<IpAddr>>,
}

/// The rates a server enforces; `None` switches one off.
pub struct Rates {
    pub writes_per_app: Option<RateLimit>,
    pub unauthenticated_reads_per_address: Option<RateLimit>,
    pub registrations_per_address: Option<RateLimit>,
    pub sign_in_attempts_per_minute: Option<u32>,
}

impl RateLimits {
    pub fn new(rates: Rates) -> Self {
        RateLimits {
            writes: rates.writes_per_app.and_then(Bucket::new),
            reads: rates
                .unauthenticated_reads_per_address
                .and_then(Bucket::new),
            registrations: rates.registrations_per_address.and_then(Bucket::new),
            sign_ins: rates
                .sign_in_attempts_per_minute
                .and_then(Bucket::per_minute),
        }
    }

    /// One app registration from an address.
    pub fn registration(&self, address: &IpAddr) -> Result<(), Limited> {
        self.registrations.as_ref().map_or(Ok(()), |b| {
            b.check(address, "app registrations from this address")
        })
    }

    /// One consent-page sign-in attempt from an address.
    pub fn sign_in(&self, address: &IpAddr) -> Result<(), Limited> {
        self.sign_ins.as_ref().map_or(Ok(()), |b| {
            b.check(address, "sign-in attempts from this address; wait a minute")
        })
    }

    /// One write by an app.
    pub fn write(&self, app: &RecordId) -> Result<(), Limited> {
        self.writes
            .as_ref()
            .map_or(Ok(()), |b| b.check(app, "writes from this app; slow down"))
    }

    /// One unauthenticated read from an address.
    pub fn anonymous_read(&self, address: &IpAddr) -> Result<(), Limited> {
        self.reads.as_ref().map_or(Ok(()), |b| {
            b.check(address, "unauthenticated requests from this address")
        })
    }

    /// Drops the state of keys whose buckets are full again.
    pub fn forget_idle(&self) {
        if let Some(b) = &self.writes {
            b.limiter.retain_recent();
        }
        for b in [&self.reads, &self.registrations, &self.sign_ins]
            .into_iter()
            .flatten()
        {
            b.limiter.retain_recent();
        }
    }
}
