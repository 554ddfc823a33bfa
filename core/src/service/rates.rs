//! Rate limits (PROTOCOL.md §13, and §10 for registrations and sign-ins)
//! as token buckets, kept by the generic cell rate algorithm: each key
//! remembers only the theoretical arrival time of its next request. The
//! host passes the time in; both hosts count alike.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;

use crate::limits::{Limits, RateLimit};
use serde::{Deserialize, Serialize};

use crate::model::{Entity, RecordDate, RecordId};
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

/// The buckets of a server (or, on the edge, of one user's object).
#[derive(Debug)]
pub struct RateLimits {
    writes: Option<Buckets<RecordId>>,
    /// Keyed by address; requests whose address the host does not know
    /// share one bucket (never uncounted).
    reads: Option<Buckets<Option<IpAddr>>>,
    registrations: Option<Buckets<Option<IpAddr>>>,
    sign_ins: Option<Buckets<Option<IpAddr>>>,
    notifications: Option<Buckets<Entity>>,
    rediscoveries: Option<Buckets<Entity>>,
    unverified_discoveries: Option<Buckets<Option<IpAddr>>>,
    /// One bucket, for every address.
    any_unverified_discoveries: Option<Buckets<()>>,
}

/// `count` a minute, all of them at once if they come together.
fn per_minute<K: Hash + Eq>(count: u32, what: &'static str) -> Option<Buckets<K>> {
    Buckets::new(count, 60 * TICKS_PER_SECOND, count, what)
}

impl RateLimits {
    /// The buckets of the rates of `limits`; a rate that is off has none.
    pub fn new(limits: &Limits) -> Self {
        let rates = limits;
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
            notifications: per_second(
                rates.notifications_per_entity,
                "notifications from this entity's server",
            ),
            rediscoveries: Buckets::new(
                super::host::REDISCOVERIES_PER_MINUTE,
                60 * TICKS_PER_SECOND,
                1,
                "discoveries of this entity",
            ),
            unverified_discoveries: per_minute(
                super::host::UNVERIFIED_DISCOVERIES_PER_ADDRESS_PER_MINUTE,
                "unknown entities named by server-signed requests from this address; wait a minute",
            ),
            any_unverified_discoveries: per_minute(
                super::host::UNVERIFIED_DISCOVERIES_PER_MINUTE,
                "unknown entities named by server-signed requests; wait a minute",
            ),
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
            Rate::Notification(entity) => self
                .notifications
                .as_mut()
                .map_or(Ok(()), |b| b.check(entity.clone(), now)),
            Rate::Rediscovery(entity) => self
                .rediscoveries
                .as_mut()
                .map_or(Ok(()), |b| b.check(entity.clone(), now)),
            Rate::UnverifiedDiscovery(peer) => check(&mut self.unverified_discoveries, peer, now),
            Rate::AnyUnverifiedDiscovery => self
                .any_unverified_discoveries
                .as_mut()
                .map_or(Ok(()), |b| b.check((), now)),
        }
    }

    /// Drops the state of keys whose buckets are full again.
    pub fn forget_idle(&mut self, now: RecordDate) {
        let now = now.unix_ticks();
        if let Some(b) = &mut self.writes {
            b.forget_idle(now);
        }
        for b in [&mut self.notifications, &mut self.rediscoveries]
            .into_iter()
            .flatten()
        {
            b.forget_idle(now);
        }
        for b in [
            &mut self.reads,
            &mut self.registrations,
            &mut self.sign_ins,
            &mut self.unverified_discoveries,
        ]
        .into_iter()
        .flatten()
        {
            b.forget_idle(now);
        }
        if let Some(b) = &mut self.any_unverified_discoveries {
            b.forget_idle(now);
        }
    }
}

/// A rate counted per client address, in the form a host carries it to
/// where that address's buckets are kept when they are not kept beside the
/// request (on the edge, an object of the address's own), and its verdict
/// back. Both ends decide nothing: [`RateLimits::check`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressRate {
    pub kind: AddressRateKind,
    pub peer: Option<IpAddr>,
    /// The request's time, in ticks.
    pub now: i64,
}

/// The rates counted per client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressRateKind {
    AnonymousRead,
    Registration,
    SignIn,
    UnverifiedDiscovery,
    /// Counted for every address together, in one place
    /// ([`AddressRate::place_name`]).
    AnyUnverifiedDiscovery,
}

/// A verdict as it travels back: `{"limited": null}` or the problem's
/// type path, detail and the seconds to wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressVerdict {
    limited: Option<WireLimited>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct WireLimited {
    #[serde(rename = "type")]
    type_path: String,
    detail: Option<String>,
    retry_after_secs: u64,
}

impl AddressRate {
    /// `rate` as counted per address at `now`; `None` for a rate that is
    /// counted per app (writes), or that `limits` switch off, which a host
    /// need not carry anywhere.
    pub fn of(rate: Rate<'_>, now: RecordDate, limits: &Limits) -> Option<Self> {
        let (kind, peer, on) = match rate {
            Rate::AnonymousRead(peer) => (
                AddressRateKind::AnonymousRead,
                peer,
                limits.unauthenticated_reads_per_address.is_some(),
            ),
            Rate::Registration(peer) => (
                AddressRateKind::Registration,
                peer,
                limits.registrations_per_address.is_some(),
            ),
            Rate::SignIn(peer) => (
                AddressRateKind::SignIn,
                peer,
                limits.sign_in_attempts_per_minute.is_some(),
            ),
            Rate::UnverifiedDiscovery(peer) => (AddressRateKind::UnverifiedDiscovery, peer, true),
            Rate::AnyUnverifiedDiscovery => (AddressRateKind::AnyUnverifiedDiscovery, None, true),
            Rate::Write(_) | Rate::Notification(_) | Rate::Rediscovery(_) => return None,
        };
        on.then_some(AddressRate {
            kind,
            peer,
            now: now.unix_ticks(),
        })
    }

    /// Where this address's buckets are kept: one place per address;
    /// requests whose address is unknown share one, as they share one
    /// bucket natively. A rate of every address together has one place of
    /// its own.
    pub fn place_name(&self) -> String {
        if self.kind == AddressRateKind::AnyUnverifiedDiscovery {
            return "server:unverified-discoveries".to_owned();
        }
        match self.peer {
            Some(address) => format!("address:{address}"),
            None => "address:unknown".to_owned(),
        }
    }

    /// Counts it in `limits`, the address's buckets.
    pub fn check(&self, limits: &mut RateLimits) -> AddressVerdict {
        let rate = match self.kind {
            AddressRateKind::AnonymousRead => Rate::AnonymousRead(self.peer),
            AddressRateKind::Registration => Rate::Registration(self.peer),
            AddressRateKind::SignIn => Rate::SignIn(self.peer),
            AddressRateKind::UnverifiedDiscovery => Rate::UnverifiedDiscovery(self.peer),
            AddressRateKind::AnyUnverifiedDiscovery => Rate::AnyUnverifiedDiscovery,
        };
        let verdict = match RecordDate::from_unix_ticks(self.now) {
            Ok(now) => limits.check(rate, now),
            Err(_) => Err(Limited::counter_unreachable()),
        };
        AddressVerdict {
            limited: verdict.err().map(|limited| WireLimited {
                type_path: limited.problem.kind.type_path().to_owned(),
                detail: limited.problem.detail,
                retry_after_secs: limited.retry_after_secs,
            }),
        }
    }
}

impl AddressVerdict {
    /// The verdict, as [`RateLimits::check`] gave it; one that does not
    /// read is [`Limited::counter_unreachable`].
    pub fn into_result(self) -> Result<(), Limited> {
        let Some(wire) = self.limited else {
            return Ok(());
        };
        let kind = ProblemType::ALL
            .iter()
            .copied()
            .find(|kind| kind.type_path() == wire.type_path);
        match kind {
            Some(kind) => {
                let mut problem = Problem::new(kind);
                problem.detail = wire.detail;
                Err(Limited {
                    problem,
                    retry_after_secs: wire.retry_after_secs,
                })
            }
            None => Err(Limited::counter_unreachable()),
        }
    }
}

impl Limited {
    /// A request whose rate could not be counted because the place that
    /// counts it could not be asked: refused (`server/503-unavailable`,
    /// retry in a second) rather than counted nowhere, so that overloading
    /// that place never lifts the limit.
    pub fn counter_unreachable() -> Self {
        Limited {
            problem: Problem::new(ProblemType::Unavailable)
                .with_detail("the rate limiter could not be reached; retry"),
            retry_after_secs: 1,
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
        RateLimits::new(&Limits {
            writes_per_app: None,
            unauthenticated_reads_per_address: Some(RateLimit { per_second, burst }),
            registrations_per_address: None,
            sign_in_attempts_per_minute: Some(3),
            ..Limits::default()
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
    fn unverified_discoveries_are_few_per_address_and_per_server() {
        use crate::service::host::{
            UNVERIFIED_DISCOVERIES_PER_ADDRESS_PER_MINUTE as PER_ADDRESS,
            UNVERIFIED_DISCOVERIES_PER_MINUTE as PER_SERVER,
        };
        let mut limits = RateLimits::new(&Limits::default());
        let from = |last: u8| Rate::UnverifiedDiscovery(Some(IpAddr::from([203, 0, 113, last])));
        for _ in 0..PER_ADDRESS {
            assert!(limits.check(from(1), at(0)).is_ok());
        }
        let limited = limits.check(from(1), at(0)).expect_err("one too many");
        assert_eq!(limited.retry_after_secs, 6);
        assert!(limits.check(from(2), at(0)).is_ok(), "another address");
        for _ in 0..PER_SERVER {
            assert!(limits.check(Rate::AnyUnverifiedDiscovery, at(0)).is_ok());
        }
        assert!(limits.check(Rate::AnyUnverifiedDiscovery, at(0)).is_err());
        assert!(
            limits
                .check(Rate::AnyUnverifiedDiscovery, at(1_000))
                .is_ok()
        );
        // Both travel on the edge; the server's one to a place of its own.
        let settings = Limits::default();
        let one = AddressRate::of(from(1), at(0), &settings).unwrap();
        assert_eq!(one.place_name(), "address:203.0.113.1");
        let any = AddressRate::of(Rate::AnyUnverifiedDiscovery, at(0), &settings).unwrap();
        assert_eq!(any.place_name(), "server:unverified-discoveries");
    }

    #[test]
    fn an_address_rate_travels_and_its_verdict_comes_back_as_core_gave_it() {
        let mut buckets = limits(1, 1);
        let settings = Limits {
            unauthenticated_reads_per_address: Some(RateLimit {
                per_second: 1,
                burst: 1,
            }),
            ..Limits::default()
        };
        let read = AddressRate::of(Rate::AnonymousRead(Some(PEER)), at(0), &settings)
            .expect("counted per address");
        assert_eq!(read.place_name(), "address:127.0.0.1");
        let sent: AddressRate =
            serde_json::from_str(&serde_json::to_string(&read).unwrap()).unwrap();
        assert_eq!(sent, read);
        let verdict = |rate: &AddressRate, buckets: &mut RateLimits| {
            let wire = serde_json::to_string(&rate.check(buckets)).unwrap();
            serde_json::from_str::<AddressVerdict>(&wire)
                .unwrap()
                .into_result()
        };
        assert!(verdict(&read, &mut buckets).is_ok());
        let limited = verdict(&read, &mut buckets).expect_err("the second at once");
        assert_eq!(limited.problem.kind, ProblemType::RateLimited);
        assert_eq!(limited.retry_after_secs, 1);
        assert!(limited.problem.detail.is_some());
    }

    #[test]
    fn writes_and_rates_switched_off_are_not_carried() {
        let app = RecordId::from_bytes([7; 16]);
        let off = Limits {
            sign_in_attempts_per_minute: None,
            ..Limits::default()
        };
        assert_eq!(AddressRate::of(Rate::Write(&app), at(0), &off), None);
        assert_eq!(AddressRate::of(Rate::SignIn(Some(PEER)), at(0), &off), None);
        assert!(AddressRate::of(Rate::Registration(None), at(0), &off).is_some());
    }

    #[test]
    fn an_unreadable_verdict_refuses_as_unavailable() {
        let verdict: AddressVerdict = serde_json::from_str(
            r#"{"limited": {"type": "nonsense", "detail": null, "retry_after_secs": 3}}"#,
        )
        .unwrap();
        let limited = verdict.into_result().expect_err("refused");
        assert_eq!(limited.problem.kind, ProblemType::Unavailable);
        assert_eq!(limited.retry_after_secs, 1);
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
