//! Rate limits (PROTOCOL.md §13): writes per app and unauthenticated reads
//! per client address, as token buckets (governor's GCRA).

use std::net::IpAddr;
use std::num::NonZeroU32;

use folio_core::limits::RateLimit;
use folio_core::model::RecordId;
use folio_core::problem::{Problem, ProblemType};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// A request over its rate: the problem and the seconds to wait.
#[derive(Debug)]
pub struct Limited {
    pub problem: Problem,
    pub retry_after_secs: u64,
}

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
}

impl RateLimits {
    pub fn new(writes: Option<RateLimit>, reads: Option<RateLimit>) -> Self {
        RateLimits {
            writes: writes.and_then(Bucket::new),
            reads: reads.and_then(Bucket::new),
        }
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
        if let Some(b) = &self.reads {
            b.limiter.retain_recent();
        }
    }
}
