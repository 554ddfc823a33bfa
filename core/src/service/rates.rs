//! Rate limits (PROTOCOL.md §13, and §10 for registrations and sign-ins)
//! as token buckets, kept by the generic cell rate algorithm: each key
//! remembers only the theoretical arrival time of its next request. The
//! host passes the time in; both hosts count alike.
//!
//! An address is counted as [`address_key`] gives it: an IPv6 address by
//! its /64, which one subscriber or one machine usually holds whole. A
//! password typed for an account is counted per account too, with a
//! back-off ([`AccountBackoff`]), so that many addresses gain nothing.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};

use crate::service::limits::{Limits, RateLimit};
use serde::{Deserialize, Serialize};

use crate::model::{Entity, RecordDate, RecordId};
use crate::problem::{Problem, ProblemType};

use super::{Limited, Rate};

const TICKS_PER_SECOND: i64 = 10_000_000;

/// The key a per-address rate counts a client under: an IPv4 address as it
/// is (also written as an IPv4-mapped IPv6 address), an IPv6 address by
/// its first 64 bits. One subscriber or machine is usually given a whole
/// /64, so keying by the address would give it 2^64 buckets.
pub fn address_key(peer: Option<IpAddr>) -> Option<IpAddr> {
    peer.map(|address| match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
    })
}

/// Passwords typed for one account, right or wrong, before it backs off:
/// the next attempt waits [`ACCOUNT_BACKOFF_FIRST_SECS`], and each further
/// one twice as long as the one before, up to
/// [`ACCOUNT_BACKOFF_MAX_SECS`]. A right password starts the count again.
pub const ACCOUNT_SIGN_IN_ATTEMPTS: u32 = 5;

/// The first wait of an account past [`ACCOUNT_SIGN_IN_ATTEMPTS`].
pub const ACCOUNT_BACKOFF_FIRST_SECS: i64 = 15;

/// The longest wait between two attempts on one account.
pub const ACCOUNT_BACKOFF_MAX_SECS: i64 = 15 * 60;

/// An account with no attempt for this long starts its count again.
pub const ACCOUNT_BACKOFF_RESET_SECS: i64 = 60 * 60;

/// The attempts on one account since its last right password: what a host
/// keeps of an account's budget where its memory does not last (an edge
/// object may be evicted between two attempts), and gives back with
/// [`RateLimits::restore_account`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountAttempts {
    counted: u32,
    /// When the last one was counted, in ticks (as a string on the wire,
    /// past what a JavaScript number holds exactly).
    #[serde(with = "ticks_text")]
    last: i64,
}

mod ticks_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(ticks: &i64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&ticks.to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The per-account budget of password attempts, with back-off: whatever
/// the address, an account takes [`ACCOUNT_SIGN_IN_ATTEMPTS`] attempts,
/// then one after a wait that doubles with each attempt (15 s, 30 s, …,
/// 15 min). A sustained guesser gets about four guesses an hour, and the
/// owner (whose open sessions go on) waits at most 15 minutes to sign in.
/// Every attempt is counted before its password is checked, so that
/// attempts sent at once are no faster than one after the other.
#[derive(Debug, Default)]
pub struct AccountBackoff {
    accounts: HashMap<String, AccountAttempts>,
}

impl AccountBackoff {
    /// The wait after the `counted`-th attempt before the next, in ticks.
    fn wait(counted: u32) -> i64 {
        match counted.checked_sub(ACCOUNT_SIGN_IN_ATTEMPTS) {
            None => 0,
            Some(past) => {
                let secs = ACCOUNT_BACKOFF_FIRST_SECS
                    .saturating_mul(1 << past.min(30))
                    .min(ACCOUNT_BACKOFF_MAX_SECS);
                secs * TICKS_PER_SECOND
            }
        }
    }

    /// Counts an attempt on `account` at `now`, or refuses it (counting
    /// nothing) while the account waits.
    fn check(&mut self, account: &str, now: i64) -> Result<(), Limited> {
        let previous =
            self.accounts.get(account).copied().filter(|attempts| {
                now - attempts.last < ACCOUNT_BACKOFF_RESET_SECS * TICKS_PER_SECOND
            });
        if let Some(attempts) = previous {
            let ready = attempts.last + Self::wait(attempts.counted);
            if now < ready {
                let secs = (ready - now + TICKS_PER_SECOND - 1) / TICKS_PER_SECOND;
                return Err(Limited {
                    problem: Problem::new(ProblemType::RateLimited).with_detail(
                        "too many password attempts for this account; wait before the next",
                    ),
                    retry_after_secs: u64::try_from(secs).unwrap_or(1).max(1),
                });
            }
        }
        let counted = previous.map_or(0, |attempts| attempts.counted);
        self.accounts.insert(
            account.to_owned(),
            AccountAttempts {
                counted: counted.saturating_add(1),
                last: now,
            },
        );
        Ok(())
    }

    /// The account's password was right: its count starts again.
    fn clear(&mut self, account: &str) {
        self.accounts.remove(account);
    }

    /// Forgets the accounts whose count has started again.
    fn forget_idle(&mut self, now: i64) {
        self.accounts.retain(|_, attempts| {
            now - attempts.last < ACCOUNT_BACKOFF_RESET_SECS * TICKS_PER_SECOND
        });
    }
}

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
        let arrival = self.admit(&key, now)?;
        self.arrivals.insert(key, arrival);
        Ok(())
    }

    /// Whether the bucket of `key` can pay for one request at `now`, and
    /// then the key's next arrival time; nothing is counted yet.
    fn admit(&self, key: &K, now: i64) -> Result<i64, Limited> {
        let arrival = self.arrivals.get(key).copied().unwrap_or(now).max(now);
        let early = arrival - self.tolerance - now;
        if early > 0 {
            let secs = (early + TICKS_PER_SECOND - 1) / TICKS_PER_SECOND;
            return Err(Limited {
                problem: Problem::new(ProblemType::RateLimited)
                    .with_detail(format!("too many {}", self.what)),
                retry_after_secs: u64::try_from(secs).unwrap_or(1).max(1),
            });
        }
        Ok(arrival + self.interval)
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
    /// Notifications to a user (its row id) from one entity, from every
    /// entity under one registrable domain, and from everyone.
    notifications: Option<Buckets<(i64, Entity)>>,
    notification_domains: Option<Buckets<(i64, String)>>,
    notification_users: Option<Buckets<i64>>,
    rediscoveries: Option<Buckets<Entity>>,
    /// Always on: a fixed limit, not a setting.
    accounts: AccountBackoff,
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
            notification_domains: per_second(
                rates.notifications_per_domain,
                "notifications from the servers of this entity's domain",
            ),
            notification_users: per_second(
                rates.notifications_per_user,
                "notifications to this user",
            ),
            rediscoveries: Buckets::new(
                super::host::REDISCOVERIES_PER_MINUTE,
                60 * TICKS_PER_SECOND,
                1,
                "discoveries of this entity",
            ),
            accounts: AccountBackoff::default(),
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
            Rate::Notification { sender, user } => self.check_notification(sender, user, now),
            Rate::Rediscovery(entity) => self
                .rediscoveries
                .as_mut()
                .map_or(Ok(()), |b| b.check(entity.clone(), now)),
            Rate::AccountSignIn(account) => self.accounts.check(account, now),
            Rate::AccountSignedIn(account) => {
                self.accounts.clear(account);
                Ok(())
            }
            Rate::UnverifiedDiscovery(peer) => check(&mut self.unverified_discoveries, peer, now),
            Rate::AnyUnverifiedDiscovery => self
                .any_unverified_discoveries
                .as_mut()
                .map_or(Ok(()), |b| b.check((), now)),
        }
    }

    /// A notification from `sender` to user `user`: counted against the
    /// sender's bucket, its registrable domain's and the user's, only if
    /// all three can pay (a refused notification costs no bucket a token).
    fn check_notification(&mut self, sender: &Entity, user: i64, now: i64) -> Result<(), Limited> {
        let entity_key = (user, sender.clone());
        let domain_key = (user, registrable_domain(sender).to_owned());
        let entity = admit(&self.notifications, &entity_key, now)?;
        let domain = admit(&self.notification_domains, &domain_key, now)?;
        let everyone = admit(&self.notification_users, &user, now)?;
        settle(&mut self.notifications, entity_key, entity);
        settle(&mut self.notification_domains, domain_key, domain);
        settle(&mut self.notification_users, user, everyone);
        Ok(())
    }

    /// The attempts counted on `account` since its last right password
    /// (`None`: none), for a host to keep beyond its memory after each
    /// [`Rate::AccountSignIn`] and [`Rate::AccountSignedIn`].
    pub fn account_attempts(&self, account: &str) -> Option<AccountAttempts> {
        self.accounts.accounts.get(account).copied()
    }

    /// Gives back what [`RateLimits::account_attempts`] gave, once memory
    /// was lost (an evicted edge object starting again). Attempts counted
    /// in memory meanwhile are kept: they are the newer.
    pub fn restore_account(&mut self, account: &str, attempts: AccountAttempts) {
        self.accounts
            .accounts
            .entry(account.to_owned())
            .or_insert(attempts);
    }

    /// Drops the state of keys whose buckets are full again.
    pub fn forget_idle(&mut self, now: RecordDate) {
        let now = now.unix_ticks();
        if let Some(b) = &mut self.writes {
            b.forget_idle(now);
        }
        self.accounts.forget_idle(now);
        if let Some(b) = &mut self.notifications {
            b.forget_idle(now);
        }
        if let Some(b) = &mut self.notification_domains {
            b.forget_idle(now);
        }
        if let Some(b) = &mut self.notification_users {
            b.forget_idle(now);
        }
        if let Some(b) = &mut self.rediscoveries {
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

/// [`Buckets::admit`] on a rate that may be off (then always admitted).
fn admit<K: Hash + Eq>(
    buckets: &Option<Buckets<K>>,
    key: &K,
    now: i64,
) -> Result<Option<i64>, Limited> {
    buckets.as_ref().map(|b| b.admit(key, now)).transpose()
}

/// Counts what [`admit`] admitted.
fn settle<K: Hash + Eq>(buckets: &mut Option<Buckets<K>>, key: K, arrival: Option<i64>) {
    if let (Some(b), Some(arrival)) = (buckets, arrival) {
        b.arrivals.insert(key, arrival);
    }
}

/// The registrable domain of an entity's host name, by the public suffix
/// list (`e1.evil.example` → `evil.example`; a name under an unlisted
/// suffix, such as `bob.test`, is its last two labels): what one owner
/// controls, and so the unit a flood from many names is counted in. A
/// name that is itself a public suffix is its own domain.
pub(super) fn registrable_domain(entity: &Entity) -> &str {
    let name = entity.as_str();
    psl::domain(name.as_bytes())
        .and_then(|domain| std::str::from_utf8(domain.as_bytes()).ok())
        .unwrap_or(name)
}

/// A rate counted per client address, in the form a host carries it to
/// where that address's buckets are kept when they are not kept beside the
/// request (on the edge, an object of the address's own), and its verdict
/// back. Both ends decide nothing: [`RateLimits::check`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressRate {
    /// Which rate.
    pub kind: AddressRateKind,
    /// The client's address, when the host knows it; `None` for
    /// [`AddressRateKind::AnyUnverifiedDiscovery`].
    pub peer: Option<IpAddr>,
    /// The request's time, in ticks.
    pub now: i64,
}

/// The rates counted per client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressRateKind {
    /// An unauthenticated read ([`Rate::AnonymousRead`]).
    AnonymousRead,
    /// An app registration ([`Rate::Registration`]).
    Registration,
    /// A consent-page sign-in attempt ([`Rate::SignIn`]).
    SignIn,
    /// Discovering an unknown entity for an unverified server-signed request
    /// ([`Rate::UnverifiedDiscovery`]).
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
            Rate::Write(_)
            | Rate::Notification { .. }
            | Rate::Rediscovery(_)
            | Rate::AccountSignIn(_)
            | Rate::AccountSignedIn(_) => return None,
        };
        on.then_some(AddressRate {
            kind,
            peer: address_key(peer),
            now: now.unix_ticks(),
        })
    }

    /// Where this address's buckets are kept: one place per
    /// [`address_key`] (an IPv6 /64 is one place); requests whose address
    /// is unknown share one, as they share one bucket natively.
    /// A rate of every address together has one place of its own.
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
    buckets
        .as_mut()
        .map_or(Ok(()), |b| b.check(address_key(peer), now))
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

    fn entity(name: &str) -> Entity {
        name.parse().expect("an entity")
    }

    #[test]
    fn registrable_domains_come_from_the_public_suffix_list() {
        let domain = |name: &str| registrable_domain(&entity(name)).to_owned();
        assert_eq!(domain("e1.evil.example"), "evil.example");
        assert_eq!(domain("a.b.evil.test"), "evil.test");
        assert_eq!(domain("alice.co.uk"), "alice.co.uk");
        assert_eq!(domain("x.alice.co.uk"), "alice.co.uk");
        // Each user of a hosting suffix is a domain of their own.
        assert_eq!(domain("alice.github.io"), "alice.github.io");
        assert_ne!(domain("alice.github.io"), domain("bob.github.io"));
        assert_eq!(domain("evil.example"), "evil.example");
    }

    /// Notifications to user 1: one entity at 10/s with bursts of 10, its
    /// domain at 10/s with bursts of 15, everyone at 10/s with bursts of 20.
    fn notifications() -> RateLimits {
        RateLimits::new(&Limits {
            notifications_per_entity: Some(RateLimit {
                per_second: 10,
                burst: 10,
            }),
            notifications_per_domain: Some(RateLimit {
                per_second: 10,
                burst: 15,
            }),
            notifications_per_user: Some(RateLimit {
                per_second: 10,
                burst: 20,
            }),
            ..Limits::default()
        })
    }

    fn notify(limits: &mut RateLimits, sender: &str, user: i64) -> Result<(), Limited> {
        limits.check(
            Rate::Notification {
                sender: &entity(sender),
                user,
            },
            at(0),
        )
    }

    #[test]
    fn many_names_of_one_domain_share_the_domains_bucket() {
        let mut limits = notifications();
        for n in 0..15 {
            let name = format!("e{n}.evil.example");
            assert!(notify(&mut limits, &name, 1).is_ok(), "{name}");
        }
        let limited = notify(&mut limits, "e99.evil.example", 1).expect_err("the domain's 16th");
        assert!(
            limited
                .problem
                .detail
                .as_deref()
                .unwrap_or_default()
                .contains("domain"),
            "{:?}",
            limited.problem.detail
        );
        // Another domain, and another user, are still served.
        assert!(notify(&mut limits, "friend.example", 1).is_ok());
        assert!(notify(&mut limits, "e0.evil.example", 2).is_ok());
    }

    #[test]
    fn a_user_takes_at_most_its_own_burst_from_everyone_together() {
        let mut limits = notifications();
        for n in 0..20 {
            let name = format!("sender{n}.example");
            assert!(notify(&mut limits, &name, 1).is_ok(), "{name}");
        }
        let limited = notify(&mut limits, "sender99.example", 1).expect_err("the user's 21st");
        assert!(
            limited
                .problem
                .detail
                .as_deref()
                .unwrap_or_default()
                .contains("to this user"),
            "{:?}",
            limited.problem.detail
        );
        assert!(
            notify(&mut limits, "sender99.example", 2).is_ok(),
            "another user"
        );
    }

    #[test]
    fn a_refused_notification_costs_no_bucket_a_token() {
        let mut limits = notifications();
        for _ in 0..10 {
            assert!(notify(&mut limits, "a.evil.example", 1).is_ok());
        }
        // a.evil.example's own bucket is empty: refused before the domain pays.
        assert!(notify(&mut limits, "a.evil.example", 1).is_err());
        for n in 0..5 {
            let name = format!("b{n}.evil.example");
            assert!(
                notify(&mut limits, &name, 1).is_ok(),
                "{name}: the domain kept its tokens"
            );
        }
    }

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

    #[test]
    fn an_ipv6_64_is_one_address_and_a_mapped_ipv4_is_its_ipv4() {
        let v6 = |text: &str| Some(text.parse::<IpAddr>().expect("an address"));
        assert_eq!(
            address_key(v6("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            v6("2001:db8:1:2::")
        );
        assert_eq!(address_key(v6("::ffff:192.0.2.7")), v6("192.0.2.7"));
        assert_eq!(address_key(v6("192.0.2.7")), v6("192.0.2.7"));
        assert_eq!(address_key(None), None);
        // Three addresses of one /64 share its sign-in bucket; the next /64 has its own.
        let mut limits = limits(1, 1);
        for host in [
            "2001:db8::1",
            "2001:db8::2:3",
            "2001:db8::ffff:ffff:ffff:ffff",
        ] {
            assert!(
                limits.check(Rate::SignIn(v6(host)), at(0)).is_ok(),
                "{host}"
            );
        }
        assert!(
            limits
                .check(Rate::SignIn(v6("2001:db8::4")), at(0))
                .is_err()
        );
        assert!(
            limits
                .check(Rate::SignIn(v6("2001:db8:0:1::4")), at(0))
                .is_ok()
        );
        // And the edge counts it in one place.
        let on = Limits::default();
        let place = |host: &str| {
            AddressRate::of(Rate::SignIn(v6(host)), at(0), &on)
                .expect("counted per address")
                .place_name()
        };
        assert_eq!(place("2001:db8::1"), place("2001:db8::9:9"));
        assert_eq!(place("2001:db8::1"), "address:2001:db8::");
        assert_ne!(place("2001:db8::1"), place("2001:db8:0:1::1"));
    }

    #[test]
    fn an_account_backs_off_whatever_the_address_until_a_right_password() {
        let mut limits = limits(1, 1);
        let attempt =
            |limits: &mut RateLimits, ms: i64| limits.check(Rate::AccountSignIn("me"), at(ms));
        for n in 0..ACCOUNT_SIGN_IN_ATTEMPTS {
            assert!(attempt(&mut limits, i64::from(n)).is_ok(), "attempt {n}");
        }
        let last = i64::from(ACCOUNT_SIGN_IN_ATTEMPTS - 1);
        let limited = attempt(&mut limits, last + 1).expect_err("past the budget");
        assert_eq!(limited.problem.status(), 429);
        assert_eq!(limited.retry_after_secs, 15);
        // Another account is not held back.
        assert!(limits.check(Rate::AccountSignIn("you"), at(last)).is_ok());
        // Then 15 s, 30 s, 60 s, … between attempts; a refusal counts nothing.
        let mut at_ms = last;
        for wait in [15_000, 30_000, 60_000, 120_000] {
            assert!(attempt(&mut limits, at_ms + wait - 1).is_err());
            at_ms += wait;
            assert!(attempt(&mut limits, at_ms).is_ok(), "after {wait} ms");
        }
        // Capped at 15 minutes.
        let mut waits = Vec::new();
        for _ in 0..6 {
            at_ms += ACCOUNT_BACKOFF_MAX_SECS * 1000;
            assert!(attempt(&mut limits, at_ms).is_ok());
            waits.push(
                attempt(&mut limits, at_ms)
                    .expect_err("waits")
                    .retry_after_secs,
            );
        }
        assert_eq!(waits, [480, 900, 900, 900, 900, 900]);
        // A right password starts the count again.
        assert!(limits.check(Rate::AccountSignedIn("me"), at(at_ms)).is_ok());
        for n in 0..ACCOUNT_SIGN_IN_ATTEMPTS {
            assert!(attempt(&mut limits, at_ms + 1 + i64::from(n)).is_ok());
        }
        // So does an hour without attempts, and the account is forgotten.
        let quiet = at_ms + ACCOUNT_BACKOFF_RESET_SECS * 1000 + 10;
        limits.forget_idle(at(quiet));
        assert!(limits.accounts.accounts.is_empty());
        assert!(attempt(&mut limits, quiet).is_ok());
    }

    #[test]
    fn an_accounts_attempts_outlive_a_restart_when_the_host_keeps_them() {
        let mut limits = limits(1, 1);
        for n in 0..ACCOUNT_SIGN_IN_ATTEMPTS {
            assert!(
                limits
                    .check(Rate::AccountSignIn("me"), at(i64::from(n)))
                    .is_ok()
            );
        }
        let kept = limits.account_attempts("me").expect("attempts");
        let wire = serde_json::to_string(&kept).unwrap();
        assert!(
            wire.contains(&format!("\"{}\"", at(4).unix_ticks())),
            "{wire}"
        );
        let mut restarted = self::limits(1, 1);
        restarted.restore_account("me", serde_json::from_str(&wire).unwrap());
        assert!(restarted.check(Rate::AccountSignIn("me"), at(10)).is_err());
        assert!(restarted.check(Rate::AccountSignedIn("me"), at(10)).is_ok());
        assert_eq!(restarted.account_attempts("me"), None);
    }

    #[test]
    fn the_account_rates_are_not_carried_to_an_address() {
        let on = Limits::default();
        assert_eq!(AddressRate::of(Rate::AccountSignIn("me"), at(0), &on), None);
        assert_eq!(
            AddressRate::of(Rate::AccountSignedIn("me"), at(0), &on),
            None
        );
    }
}
