//! An app's standing in a store, remembered between requests.
//!
//! Every signed request (and every bearer token) reads its app's key row
//! and its App Authorization from the store before the signature is
//! checked: two reads, a parse of the authorization record and the
//! decompression of the key, which together cost about as much as the
//! signature check itself. They change only when the app's key row or an
//! App Authorization is written, so a host whose writes all pass one place
//! can remember them: it counts the commits that may change a standing
//! ([`Done::changes_standing`](crate::service::jobs::Effects::changes_standing)) and
//! stamps the changes made beside it (another process on the same store),
//! and a standing read under one [`Epoch`] is used only while the epoch
//! holds.
//!
//! The epoch is taken before the store is read, so a standing read across a
//! change is remembered under the epoch that change ends: it is never used
//! after the change is acknowledged.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::auth::AppKey;
use crate::auth::access::Access;
use crate::model::RecordId;

/// How many standings a [`StandingCache`] holds; past it, it starts again
/// empty (each app then reads its standing once more).
pub const MAX_REMEMBERED_STANDINGS: usize = 10_000;

/// What authenticating as an app in a store found: its key, the access
/// its App Authorization grants, and that authorization's id.
#[derive(Debug, Clone)]
pub(crate) struct Standing {
    pub key: AppKey,
    pub access: Access,
    pub authorization: Option<RecordId>,
}

/// The moment standings are read in, as the host tells it: the commits so
/// far that may have changed one, and a stamp of the changes made outside
/// the host's own writer. Two reads under equal epochs see the same
/// standings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// How many commits that may have changed a standing the host's writer has made.
    pub commits: u64,
    /// A stamp of the changes made outside the host's writer, in a form the host chooses; it
    /// changes whenever such a change is made.
    pub outside: [u64; 3],
}

/// Standings by store and app, each with the epoch it was read under.
#[derive(Debug, Default)]
pub struct StandingCache {
    entries: Mutex<HashMap<(i64, RecordId), (Epoch, Standing)>>,
}

impl StandingCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The standing of `app` in store `store_id`, if it was read under
    /// `epoch`.
    pub(crate) fn get(&self, store_id: i64, app: &RecordId, epoch: Epoch) -> Option<Standing> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(&(store_id, *app)) {
            Some((read_in, standing)) if *read_in == epoch => Some(standing.clone()),
            _ => None,
        }
    }

    /// Remembers a standing read under `epoch`.
    pub(crate) fn put(&self, store_id: i64, app: RecordId, epoch: Epoch, standing: Standing) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_REMEMBERED_STANDINGS && !entries.contains_key(&(store_id, app)) {
            entries.retain(|_, (read_in, _)| *read_in == epoch);
            if entries.len() >= MAX_REMEMBERED_STANDINGS {
                entries.clear();
            }
        }
        entries.insert((store_id, app), (epoch, standing));
    }

    /// How many standings are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(commits: u64, outside: u64) -> Epoch {
        Epoch {
            commits,
            outside: [outside, 0, 0],
        }
    }

    fn standing(seed: u8) -> Standing {
        let signing = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
        Standing {
            key: AppKey::from_bytes(&signing.verifying_key().to_bytes()).expect("a key"),
            access: Access::Anonymous,
            authorization: None,
        }
    }

    fn app(n: u8) -> RecordId {
        RecordId::from_bytes([n; 16])
    }

    #[test]
    fn a_standing_is_used_only_under_the_epoch_it_was_read_in() {
        let cache = StandingCache::new();
        cache.put(1, app(1), epoch(0, 7), standing(1));
        assert!(cache.get(1, &app(1), epoch(0, 7)).is_some());
        assert!(cache.get(1, &app(1), epoch(1, 7)).is_none(), "a commit");
        assert!(
            cache.get(1, &app(1), epoch(0, 8)).is_none(),
            "an outside change"
        );
        assert!(
            cache.get(2, &app(1), epoch(0, 7)).is_none(),
            "another store"
        );
        assert!(cache.get(1, &app(2), epoch(0, 7)).is_none(), "another app");
    }

    #[test]
    fn a_full_cache_keeps_the_current_epochs_standings_and_stays_bounded() {
        let cache = StandingCache::new();
        let old = epoch(0, 0);
        let now = epoch(1, 0);
        for n in 0..MAX_REMEMBERED_STANDINGS - 1 {
            cache.put(i64::try_from(n).expect("small"), app(1), old, standing(1));
        }
        cache.put(-1, app(1), now, standing(1));
        assert_eq!(cache.len(), MAX_REMEMBERED_STANDINGS);
        cache.put(-2, app(1), now, standing(1));
        assert_eq!(cache.len(), 2, "the old epoch's standings went");
        assert!(cache.get(-1, &app(1), now).is_some());
        for n in 0..2 * MAX_REMEMBERED_STANDINGS {
            cache.put(i64::try_from(n).expect("small"), app(2), now, standing(2));
            assert!(cache.len() <= MAX_REMEMBERED_STANDINGS);
        }
    }
}
