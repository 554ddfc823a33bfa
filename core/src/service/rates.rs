//! Rate limits (PROTOCOL.md §13, and §10 for registrations and sign-ins)
//! as token buckets, kept by the generic cell rate algorithm: each key
//! remembers only the theoretical arrival time of its next request. The
//! host passes the time in; both hosts count alike.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;

use crate::limits::RateLimit;
use crate::model::{RecordDate, RecordId};
use crate::problem::{Problem, ProblemType};

use super::{Limited, Rate};

const TICKS_PER_SECOND: i64 = 10_000_000;

/// One bucket per key: `burst` requests at once, then one per interval.
#[derive(Debug)]
struct Buckets<K> {
    /// Ticks between two tokens.
    interval: i64,
    /// How far ahead of now a key's arrival time may run: `burst - 1` intervals.
    tolerance: i64,
    /// Each key's theoretical arrival time of its next request, in ticks.
    arrivals: HashMap<K, i64>,
    what: &'static str,
}

impl<K: Hash + Eq> Buckets<K> {
    fn new(tokens: u32, per_ticks: i64, burst: u32, what: &'static str) -> Option<Self> {
        if tokens == 0 || burst == 0 {
            return None;
        }
        let interval = (per_ticks / i64::from(tokens)).max(1);
        Some(Buckets {
            interval,
            tolerance: interval * (i64::from(burst) - 1),
            arrivals: HashMap::new(),
            what,
        })
    }

    fn check(&mut self, key: K, now: i64) -> Result<(), Limited> {
        let arrival = self.arrivals.get(&key).copied().unwrap_or(now).max(now);
        let early = arrival - self.tolerance - now;
        if early > 0 {
            let secs = (early + TICKS_PER_SECOND - 1) / TICKS_PER_SECOND;
            return Err(Limited {
                problem: Problem::new(ProblemType::RateLimited)
                    .with_detail(format!("too many {}", self.what)),
                retry_after_secs: u64::try_from(secs).unwrap_or(1).max(1),
            });
        }
        self.arrivals.insert(key, arrival + self.interval);
        Ok(())
    }

    /// Forgets the keys whose bucket is full again.
    fn forget_idle(&mut self, now: i64) {
        self.arrivals.retain(|_, arrival| *arrival > now);
    }
}

/// The rates a server enforces; `None` switches one off.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    pub writes_per_app: Option<RateLimit>,
    pub unauthenticated_reads_per_address: Option<RateLimit>,
    pub registrations_per_address: Option<RateLimit>,
    pub sign_in_attempts_per_minute: Option<u32>,
}

/// The buckets of a server (or, on the edge, of one user's object).
#[derive(Debug)]
pub struct RateLimits {
    writes: Option<Buckets<RecordId>>,
    /// Keyed by address; requests whose address the host does not know
    /// share one bucket (never uncounted).
    reads: Option<Buckets<Option<IpAddr>>>,
    registrations: Option<Buckets<Option<IpAddr>>>,
    sign_ins: Option<Buckets<Option<IpAddr>>>,
}

impl RateLimits {
    pub fn new(rates: Rates) -> Self {
        fn per_second<K: Hash + Eq>(
            rate: Option<RateLimit>,
            what: &'static str,
        ) -> Option<Buckets<K>> {
            rate.and_then(|r| Buckets::new(r.per_second, TICKS_PER_SECOND, r.burst, what))
        }
        RateLimits {
            writes: per_second(rates.writes_per_app, "writes from this app; slow down"),
            reads: per_second(
                rates.unauthenticated_reads_per_address,
                "unauthenticated requests from this address",
            ),
            registrations: per_second(
                rates.registrations_per_address,
                "app registrations from this address",
            ),
            sign_ins: rates.sign_in_attempts_per_minute.and_then(|attempts| {
                Buckets::new(
                    attempts,
                    60 * TICKS_PER_SECOND,
                    attempts,
                    "sign-in attempts from this address; wait a minute",
                )
            }),
        }
    }

    /// Counts one request against `rate` at `now`. Requests without an
    /// address count together, as if from one address.
    pub fn check(&mut self, rate: Rate<'_>, now: RecordDate) -> Result<(), Limited> {
        let now = now.unix_ticks();
        match rate {
            Rate::Write(app) => self.writes.as_mut().map_or(Ok(()), |b| b.check(*app, now)),
            Rate::AnonymousRead(peer) => check(&mut self.reads, peer, now),
            Rate::Registration(peer) => check(&mut self.registrations, peer, now),
            Rate::SignIn(peer) => check(&mut self.sign_ins, peer, now),
        }
    }

    /// Drops the state of keys whose buckets are full again.
    pub fn forget_idle(&mut self, now: RecordDate) {
        let now = now.unix_ticks();
        if let Some(b) = &mut self.writes {
            b.forget_idle(now);
        }
        for b in [&mut self.reads, &mut self.registrations, &mut self.sign_ins]
            .into_iter()
            .flatten()
        {
            b.forget_idle(now);
        }
    }
}

fn check(
    buckets: &mut Option<Buckets<Option<IpAddr>>>,
    peer: Option<IpAddr>,
    now: i64,
) -> Result<(), Limited> {
    buckets.as_mut().map_or(Ok(()), |b| b.check(peer, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: i64) -> RecordDate {
        RecordDate::from_unix_millis(1_800_000_000_000 + millis).expect("a date")
    }

    fn limits(per_second: u32, burst: u32) -> RateLimits {
        RateLimits::new(Rates {
            writes_per_app: None,
            unauthenticated_reads_per_address: Some(RateLimit { per_second, burst }),
            registrations_per_address: None,
            sign_in_attempts_per_minute: Some(3),
        })
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn a_burst_passes_then_one_token_per_interval() {
        let mut limits = limits(10, 5);
        let read = Rate::AnonymousRead(Some(PEER));
        for _ in 0..5 {
            assert!(limits.check(read, at(0)).is_ok());
        }
        let limited = limits.check(read, at(0)).expect_err("the sixth at once");
        assert_eq!(limited.retry_after_secs, 1);
        assert_eq!(limited.problem.status(), 429);
        assert!(
            limits.check(read, at(99)).is_err(),
            "no token before 100 ms"
        );
        assert!(
            limits.check(read, at(100)).is_ok(),
            "one token after 100 ms"
        );
        assert!(limits.check(read, at(100)).is_err());
        assert!(
            limits.check(read, at(1_100)).is_ok(),
            "refilled after a second"
        );
    }

    #[test]
    fn addresses_count_apart_and_unknown_addresses_count_together() {
        let mut limits = limits(1, 1);
        let other = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
        assert!(limits.check(Rate::AnonymousRead(Some(PEER)), at(0)).is_ok());
        assert!(
            limits
                .check(Rate::AnonymousRead(Some(PEER)), at(0))
                .is_err()
        );
        assert!(
            limits
                .check(Rate::AnonymousRead(Some(other)), at(0))
                .is_ok()
        );
        assert!(limits.check(Rate::AnonymousRead(None), at(0)).is_ok());
        assert!(limits.check(Rate::AnonymousRead(None), at(0)).is_err());
        // Writes are off in this configuration.
        let app = RecordId::from_bytes([7; 16]);
        for _ in 0..10 {
            assert!(limits.check(Rate::Write(&app), at(0)).is_ok());
        }
    }

    #[test]
    fn sign_ins_are_counted_per_minute() {
        let mut limits = limits(1, 1);
        let sign_in = Rate::SignIn(Some(PEER));
        for _ in 0..3 {
            assert!(limits.check(sign_in, at(0)).is_ok());
        }
        let limited = limits.check(sign_in, at(0)).expect_err("the fourth");
        assert_eq!(limited.retry_after_secs, 20);
        assert!(limits.check(sign_in, at(20_000)).is_ok());
    }

    #[test]
    fn idle_keys_are_forgotten_once_full_again() {
        let mut limits = limits(10, 5);
        assert!(limits.check(Rate::AnonymousRead(Some(PEER)), at(0)).is_ok());
        limits.forget_idle(at(50));
        assert_eq!(limits.reads.as_ref().map(|b| b.arrivals.len()), Some(1));
        limits.forget_idle(at(100));
        assert_eq!(limits.reads.as_ref().map(|b| b.arrivals.len()), Some(0));
    }
}
