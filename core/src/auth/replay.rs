//! Replay protection (PROTOCOL.md §10): a nonce seen again from the same app
//! within the timestamp window is refused. The guard keeps nonces in memory
//! and holds across a restart with a boot fence: a request dated before the
//! guard's creation plus [`MEMORY_ONLY_AHEAD_MS`] is refused as stale, since
//! its nonce could have been seen by the process before. A request dated
//! further ahead of its arrival than that (a client whose clock runs fast,
//! up to the window's 300 s) would pass the fence after a quick restart, so
//! its nonce is also written to the store before the request is answered
//! ([`Accepted::Durable`]) and read back at the next start
//! ([`ReplayGuard::restore`]).

use std::collections::HashMap;

use crate::model::{RecordDate, RecordId};
use crate::store::{Statement, remember_nonce_sql, remembered_nonces_sql};
use crate::{Row, RowError, RowExt};

use super::{AuthError, TIMESTAMP_WINDOW_MS};

/// How many nonces a guard holds at most. Past this, requests are refused
/// until old nonces leave the window (`server/503-unavailable` for the
/// host): forgetting one early would let a replay through. About 150 bytes
/// each: 150 MB at most.
pub const MAX_REMEMBERED_NONCES: usize = 1_000_000;

/// How many nonces one app may hold by default: about 800 signed requests
/// a second, sustained over the window. Past this the app's requests are
/// refused (`request/429-rate-limited`) until its oldest nonces leave the
/// window, and no app can fill the guard for the others. A host may set
/// another share, or none ([`ReplayGuard::with_app_share`]).
pub const MAX_NONCES_PER_APP: usize = 250_000;

/// How many nonces registrations may hold together. Each registration is
/// signed under a new app id, so the per-app share does not bound them;
/// past this registrations are refused (`server/503-unavailable`) while
/// authorized apps go on.
pub const MAX_REGISTRATION_NONCES: usize = 250_000;

/// How far ahead of its arrival a request may be dated and have its nonce
/// kept in memory only. Such a nonce is dated at most this long after the
/// process last ran, so the next process's fence (its start plus this)
/// refuses it; the nonce of a request dated further ahead is written to the
/// store. The host serves no request before [`ReplayGuard::serves_from`].
pub const MEMORY_ONLY_AHEAD_MS: i64 = 1_000;

/// What the guard did with a nonce it accepted.
#[must_use]
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// Kept in memory; the next process's fence covers it.
    InMemory,
    /// Kept in memory, and to be written to the store with this statement
    /// before the request is answered: the request is dated past what the
    /// next process's fence covers.
    Durable(Statement),
}

/// How often, at most, a guard sweeps out the nonces that left the window
/// (and whenever it is full): a sweep visits every nonce it holds, which
/// costs microseconds per thousand once a second, where an index of the
/// nonces by date, to forget each on time, doubled the memory each took.
pub(super) const NONCE_SWEEP_EVERY_MS: i64 = 1_000;

/// The nonces of the last window, per app.
#[derive(Debug)]
pub struct ReplayGuard {
    /// Requests dated before this are stale.
    fence_ms: i64,
    /// Each nonce held, with its request's `ts` and whether a registration
    /// signed it.
    seen: HashMap<(RecordId, Box<str>), Held>,
    /// The window's start after which the next sweep runs.
    next_sweep_ms: i64,
    /// How many nonces each app holds.
    per_app: HashMap<RecordId, usize>,
    /// How many nonces registrations hold.
    registrations: usize,
    /// How many nonces one app may hold (`None`: up to the whole guard).
    app_share: Option<usize>,
}

/// What a guard keeps of a nonce besides the nonce.
#[derive(Debug, Clone, Copy)]
struct Held {
    ts_ms: i64,
    registration: bool,
}

/// A verified request's nonce, as a host records it: the app that signed,
/// the nonce and the signature's timestamp (checked within the window of
/// `now`, the request's time), and whether the request is a registration
/// (signed under the id of an app that does not exist yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonceUse<'a> {
    /// The app whose key signed.
    pub app: RecordId,
    /// The signature's nonce.
    pub nonce: &'a str,
    /// The signature's timestamp, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// The request's time, as the host read it.
    pub now: RecordDate,
    /// Whether the request registers its app (signed under an id no app has yet).
    pub registration: bool,
}

/// Why a guard refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayError {
    /// The request is stale or replayed.
    Auth(AuthError),
    /// The app holds its share of the guard ([`MAX_NONCES_PER_APP`]).
    AppFull,
    /// The guard is full ([`MAX_REMEMBERED_NONCES`]), or registrations
    /// hold their share of it ([`MAX_REGISTRATION_NONCES`]).
    Full,
}

impl ReplayGuard {
    /// A guard for a process started at `boot`. It refuses requests dated
    /// before [`ReplayGuard::serves_from`]; the host opens no listener
    /// before then, and first gives back the nonces the last process
    /// stored ([`ReplayGuard::restore`]).
    pub fn new(boot: RecordDate) -> Self {
        ReplayGuard {
            fence_ms: boot.unix_millis().saturating_add(MEMORY_ONLY_AHEAD_MS),
            seen: HashMap::new(),
            next_sweep_ms: i64::MIN,
            per_app: HashMap::new(),
            registrations: 0,
            app_share: Some(MAX_NONCES_PER_APP),
        }
    }

    /// The same guard with another share of nonces per app, or none.
    pub fn with_app_share(mut self, share: Option<usize>) -> Self {
        self.app_share = share;
        self
    }

    /// The time from which the guard accepts requests: its process's start
    /// plus [`MEMORY_ONLY_AHEAD_MS`].
    pub fn serves_from(&self) -> i64 {
        self.fence_ms
    }

    /// The nonces an earlier process stored that may still be replayed at
    /// `now`: rows for [`ReplayGuard::restore`].
    pub fn stored_nonces(now: RecordDate) -> Statement {
        remembered_nonces_sql(now.unix_millis() - TIMESTAMP_WINDOW_MS)
    }

    /// Takes back the nonces an earlier process stored (the rows of
    /// [`ReplayGuard::stored_nonces`]); a row that is not one is an error.
    pub fn restore(&mut self, rows: &[Row]) -> Result<(), RowError> {
        for row in rows {
            let app = row.text(0)?.parse::<RecordId>().map_err(|_| RowError {
                column: 0,
                expected: "an app id",
            })?;
            let nonce = Box::<str>::from(row.text(1)?);
            let ts_ms = row.integer(2)?;
            let held = Held {
                ts_ms,
                registration: false,
            };
            if self.seen.insert((app, nonce), held).is_none() {
                *self.per_app.entry(app).or_default() += 1;
            }
        }
        Ok(())
    }

    /// Records the nonce of a request whose signature and `ts` (within the
    /// window of `now`) were verified; refuses a replay.
    pub fn check(&mut self, used: &NonceUse<'_>) -> Result<Accepted, ReplayError> {
        let NonceUse {
            app,
            nonce,
            ts_ms,
            now,
            registration,
        } = *used;
        if ts_ms < self.fence_ms {
            return Err(ReplayError::Auth(AuthError::StaleTimestamp));
        }
        let cutoff_ms = now.unix_millis() - TIMESTAMP_WINDOW_MS;
        if cutoff_ms >= self.next_sweep_ms {
            self.forget_before(cutoff_ms);
        }
        let key = (app, Box::<str>::from(nonce));
        if self.seen.contains_key(&key) {
            return Err(ReplayError::Auth(AuthError::ReplayedRequest));
        }
        if self.refusal(app, registration).is_some() {
            // Only nonces of the window count against the limits.
            self.forget_before(cutoff_ms);
            if let Some(refusal) = self.refusal(app, registration) {
                return Err(refusal);
            }
        }
        *self.per_app.entry(app).or_default() += 1;
        self.registrations += usize::from(registration);
        self.seen.insert(
            key,
            Held {
                ts_ms,
                registration,
            },
        );
        if ts_ms > now.unix_millis().saturating_add(MEMORY_ONLY_AHEAD_MS) {
            return Ok(Accepted::Durable(remember_nonce_sql(&app, nonce, ts_ms)));
        }
        Ok(Accepted::InMemory)
    }

    /// Why the guard may not take another nonce of `app`, if it may not.
    fn refusal(&self, app: RecordId, registration: bool) -> Option<ReplayError> {
        let held = self.per_app.get(&app).copied().unwrap_or_default();
        if self.seen.len() >= MAX_REMEMBERED_NONCES
            || (registration && self.registrations >= MAX_REGISTRATION_NONCES)
        {
            Some(ReplayError::Full)
        } else if self.app_share.is_some_and(|share| held >= share) {
            Some(ReplayError::AppFull)
        } else {
            None
        }
    }

    /// Forgets nonces whose `ts` is before `cutoff_ms` (a request carrying
    /// one again is stale anyway), and sweeps again no sooner than
    /// [`NONCE_SWEEP_EVERY_MS`] later.
    fn forget_before(&mut self, cutoff_ms: i64) {
        self.next_sweep_ms = cutoff_ms.saturating_add(NONCE_SWEEP_EVERY_MS);
        let (per_app, registrations) = (&mut self.per_app, &mut self.registrations);
        self.seen.retain(|(app, _), held| {
            if held.ts_ms >= cutoff_ms {
                return true;
            }
            *registrations -= usize::from(held.registration);
            if let Some(count) = per_app.get_mut(app) {
                *count -= 1;
                if *count == 0 {
                    per_app.remove(app);
                }
            }
            false
        });
    }

    /// How many nonces the guard holds.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether the guard holds no nonce.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// The replay guard of a host that keeps nonces in its own SQLite storage
/// (the worker's user object, whose memory does not outlive an eviction):
/// the table, the statement that records a nonce, and the one that forgets
/// those past the window. Statement text only; the values are bound.
pub mod nonce_table {
    use super::{AuthError, ReplayError, TIMESTAMP_WINDOW_MS};
    use crate::model::RecordDate;

    /// Create the table and its index, once (one statement each).
    pub const CREATE: [&str; 2] = [
        "CREATE TABLE IF NOT EXISTS nonces (app TEXT NOT NULL, nonce TEXT NOT NULL, \
         ts INTEGER NOT NULL, PRIMARY KEY (app, nonce)) WITHOUT ROWID",
        "CREATE INDEX IF NOT EXISTS nonces_by_ts ON nonces (ts)",
    ];

    /// Records `(?1 app, ?2 nonce, ?3 ts in ms)`; writes no row when the app
    /// used the nonce before.
    pub const RECORD: &str = "INSERT OR IGNORE INTO nonces (app, nonce, ts) VALUES (?1, ?2, ?3)";

    /// Forgets nonces whose `ts` is before `?1` ([`cutoff`]): a request
    /// carrying one again is stale anyway.
    pub const FORGET: &str = "DELETE FROM nonces WHERE ts < ?1";

    /// The `ts` before which nonces are forgotten at `now`.
    pub fn cutoff(now: RecordDate) -> i64 {
        now.unix_millis() - TIMESTAMP_WINDOW_MS
    }

    /// The verdict of [`RECORD`] from the rows it wrote.
    pub fn verdict(rows_written: usize) -> Result<(), ReplayError> {
        match rows_written {
            0 => Err(ReplayError::Auth(AuthError::ReplayedRequest)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqlValue;

    fn check(
        guard: &mut ReplayGuard,
        app: RecordId,
        nonce: &str,
        ts_ms: i64,
        now: RecordDate,
    ) -> Result<(), ReplayError> {
        guard
            .check(&NonceUse {
                app,
                nonce,
                ts_ms,
                now,
                registration: false,
            })
            .map(|_| ())
    }

    /// A guard whose fence is `BOOT`.
    fn guard() -> ReplayGuard {
        ReplayGuard::new(at(BOOT - MEMORY_ONLY_AHEAD_MS))
    }

    fn at(ms: i64) -> RecordDate {
        RecordDate::from_unix_millis(ms).expect("a date")
    }

    const BOOT: i64 = 1_700_000_000_000;

    #[test]
    fn a_nonce_is_accepted_once_per_app() {
        let mut guard = guard();
        let (a, b) = (RecordId::from_bytes([1; 16]), RecordId::from_bytes([2; 16]));
        assert_eq!(check(&mut guard, a, "n1", BOOT + 10, at(BOOT + 20)), Ok(()));
        assert_eq!(
            check(&mut guard, a, "n1", BOOT + 11, at(BOOT + 21)),
            Err(ReplayError::Auth(AuthError::ReplayedRequest))
        );
        assert_eq!(check(&mut guard, b, "n1", BOOT + 12, at(BOOT + 22)), Ok(()));
    }

    #[test]
    fn requests_dated_before_the_start_plus_the_margin_are_stale() {
        let mut guard = ReplayGuard::new(at(BOOT));
        assert_eq!(guard.serves_from(), BOOT + MEMORY_ONLY_AHEAD_MS);
        let a = RecordId::from_bytes([1; 16]);
        let now = at(BOOT + MEMORY_ONLY_AHEAD_MS);
        assert_eq!(
            check(&mut guard, a, "n", BOOT + MEMORY_ONLY_AHEAD_MS - 1, now),
            Err(ReplayError::Auth(AuthError::StaleTimestamp))
        );
        assert_eq!(
            check(&mut guard, a, "n", BOOT + MEMORY_ONLY_AHEAD_MS, now),
            Ok(())
        );
    }

    #[test]
    fn a_nonce_dated_past_the_margin_is_stored_and_found_again_after_a_restart() {
        let a = RecordId::from_bytes([1; 16]);
        let used = |nonce, ts_ms| NonceUse {
            app: a,
            nonce,
            ts_ms,
            now: at(BOOT),
            registration: false,
        };
        let mut guard = guard();
        assert_eq!(
            guard.check(&used("near", BOOT + MEMORY_ONLY_AHEAD_MS)),
            Ok(Accepted::InMemory)
        );
        let ahead = BOOT + 200_000;
        let Ok(Accepted::Durable(statement)) = guard.check(&used("ahead", ahead)) else {
            panic!("a request dated 200 s ahead has its nonce stored");
        };
        assert_eq!(statement, remember_nonce_sql(&a, "ahead", ahead));

        // The next process, started a moment later, gets the stored row back.
        let restarted_at = BOOT + 10;
        let mut restarted = ReplayGuard::new(at(restarted_at));
        let row: Row = vec![
            SqlValue::Text(a.to_string()),
            SqlValue::Text("ahead".into()),
            SqlValue::Integer(ahead),
        ];
        restarted.restore(&[row]).expect("a stored nonce");
        let now = at(restarted.serves_from());
        assert_eq!(
            check(&mut restarted, a, "ahead", ahead, now),
            Err(ReplayError::Auth(AuthError::ReplayedRequest))
        );
        // The one kept in memory only is behind the new fence.
        assert_eq!(
            check(&mut restarted, a, "near", BOOT + MEMORY_ONLY_AHEAD_MS, now),
            Err(ReplayError::Auth(AuthError::StaleTimestamp))
        );
        assert_eq!(
            restarted
                .restore(&[vec![SqlValue::Integer(1)]])
                .map_err(|e| e.column),
            Err(0),
            "a row that is no nonce"
        );
    }

    #[test]
    fn nonces_leave_with_the_window() {
        let mut guard = guard();
        let a = RecordId::from_bytes([1; 16]);
        check(&mut guard, a, "old", BOOT, at(BOOT)).expect("fresh");
        let later = BOOT + TIMESTAMP_WINDOW_MS + 1;
        check(&mut guard, a, "new", later, at(later)).expect("fresh");
        assert_eq!(guard.len(), 1, "the old nonce left the window");
    }

    #[test]
    fn one_app_fills_its_share_only_and_gets_it_back_as_its_nonces_leave() {
        let mut guard = guard();
        let (a, b) = (RecordId::from_bytes([1; 16]), RecordId::from_bytes([2; 16]));
        for n in 0..MAX_NONCES_PER_APP {
            check(&mut guard, a, &n.to_string(), BOOT, at(BOOT)).expect("within its share");
        }
        assert_eq!(
            check(&mut guard, a, "one more", BOOT, at(BOOT)),
            Err(ReplayError::AppFull)
        );
        assert_eq!(check(&mut guard, b, "n", BOOT, at(BOOT)), Ok(()));
        let later = BOOT + TIMESTAMP_WINDOW_MS + 1;
        assert_eq!(check(&mut guard, a, "again", later, at(later)), Ok(()));
        assert_eq!(guard.len(), 1);
    }

    #[test]
    fn registrations_fill_their_share_only() {
        let mut guard = guard();
        let register = |guard: &mut ReplayGuard, n: usize| {
            let mut id = [0; 16];
            id[..8].copy_from_slice(&(n as u64).to_be_bytes());
            guard
                .check(&NonceUse {
                    app: RecordId::from_bytes(id),
                    nonce: "r",
                    ts_ms: BOOT,
                    now: at(BOOT),
                    registration: true,
                })
                .map(|_| ())
        };
        for n in 0..MAX_REGISTRATION_NONCES {
            register(&mut guard, n).expect("within the registrations' share");
        }
        assert_eq!(
            register(&mut guard, MAX_REGISTRATION_NONCES),
            Err(ReplayError::Full)
        );
        let app = RecordId::from_bytes([0xff; 16]);
        assert_eq!(check(&mut guard, app, "n", BOOT, at(BOOT)), Ok(()));
    }
}
