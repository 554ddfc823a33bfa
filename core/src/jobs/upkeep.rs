//! Upkeep: what a host does on a timer, decided once for both hosts.
//!
//! Every [`UPKEEP_INTERVAL_MS`] a host takes an [`Upkeep`] at its current
//! time and executes it in this order:
//!
//! 1. run [`Upkeep::prune`] as a job (events past retention go);
//! 2. fetch [`Upkeep::expired_blobs`], and for each row
//!    ([`Upkeep::expired_blob`]) run [`ExpiredBlob::release`] as a job,
//!    fetch [`ExpiredBlob::held`], and remove the bytes kept under the hash
//!    only when [`Upkeep::may_remove_bytes`] says so;
//! 3. now and then ([`STRAY_SWEEP_EVERY`] rounds), fetch [`Upkeep::held_blobs`]
//!    once, and for each blob it keeps bytes of that is not among them,
//!    fetch [`Upkeep::bytes_held`] and remove the bytes that
//!    [`Upkeep::may_remove_bytes`] lets go: bytes stored whose row never
//!    committed (the host stopped between the two).
//!
//! Before it serves, a host may also remove every kept blob that
//! [`Upkeep::held_blobs`] does not name, whatever its age: no upload is on
//! its way to its row then ([`Upkeep::may_remove_before_serving`] says so
//! of one blob). Unfinished uploads of an earlier run go too.
//!
//! Nonces and rate buckets are forgotten by their own owners as they go.

use crate::auth::TIMESTAMP_WINDOW_MS;
use crate::blob::UNLINKED_BLOB_LIFETIME_MS;
use crate::events::retention_cutoff;
use crate::model::RecordDate;
use crate::store::{
    Statement, blob_held_sql, delete_blob_sql, expired_blobs_sql, held_blobs_sql, prune_events_sql,
    prune_nonces_sql,
};

use crate::service::store::{Row, RowError, RowExt};

use super::Job;

/// How often a host runs its upkeep.
pub const UPKEEP_INTERVAL_MS: u64 = 60_000;

/// Every how many rounds of upkeep a host looks for stray blob bytes (an
/// hour's worth): it reads every blob's bytes' place, too costly each minute.
pub const STRAY_SWEEP_EVERY: u64 = 60;

/// One round of upkeep, at the host's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upkeep {
    now: RecordDate,
}

/// A blob row past its expiry: an upload no record linked in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredBlob {
    pub user_id: i64,
    /// The blob's SHA-256, as stored (64 hex digits).
    pub hash: String,
}

impl Upkeep {
    pub fn at(now: RecordDate) -> Self {
        Upkeep { now }
    }

    /// The job that forgets the events past retention, and the stored
    /// nonces past the signature window.
    pub fn prune(&self) -> Job {
        Job::Statements(vec![
            prune_events_sql(retention_cutoff(self.now)),
            prune_nonces_sql(self.now.unix_millis() - TIMESTAMP_WINDOW_MS),
        ])
    }

    /// The expired blob rows, read by [`Upkeep::expired_blob`].
    pub fn expired_blobs(&self) -> Statement {
        expired_blobs_sql(self.now)
    }

    /// A row of [`Upkeep::expired_blobs`].
    pub fn expired_blob(row: &[crate::store::SqlValue]) -> Result<ExpiredBlob, RowError> {
        Ok(ExpiredBlob {
            user_id: row.integer(0)?,
            hash: row.text(1)?.to_owned(),
        })
    }

    /// Whether the bytes of an expired blob may be removed: no store holds
    /// them any more (`held`, the rows of [`ExpiredBlob::held`]), and they
    /// were stored (or stored again) at `stored_at` longer ago than an
    /// upload may wait to be linked, so that an upload of the same bytes
    /// still on its way to its row keeps them. `None`: the host cannot
    /// tell when, and keeps them.
    pub fn may_remove_bytes(&self, held: &[Row], stored_at: Option<RecordDate>) -> bool {
        let fresh_after = self.now.saturating_sub_millis(UNLINKED_BLOB_LIFETIME_MS);
        unheld(held) && stored_at.is_some_and(|at| at < fresh_after)
    }
}

impl Upkeep {
    /// An upload whose bytes a host began storing before this time and
    /// never placed under their hash (the server stopped in between) is
    /// abandoned: the host may remove what it stored of it.
    pub fn unfinished_uploads_before(&self) -> RecordDate {
        self.now.saturating_sub_millis(UNLINKED_BLOB_LIFETIME_MS)
    }

    /// Every blob hash some store holds: rows `(hash)`, each once.
    pub fn held_blobs() -> Statement {
        held_blobs_sql()
    }

    /// Whether any store holds a blob with this hash (64 hex digits): one
    /// row, `(0 or 1)`, for [`Upkeep::may_remove_bytes`].
    pub fn bytes_held(hash: &str) -> Statement {
        blob_held_sql(hash)
    }

    /// Whether the bytes of a blob may be removed before the host serves:
    /// no store holds them (`held`, the rows of [`Upkeep::bytes_held`]).
    /// Their age does not matter, since no upload is in flight yet.
    pub fn may_remove_before_serving(held: &[Row]) -> bool {
        unheld(held)
    }
}

/// Whether `held`, the rows of a held statement, says no store holds the bytes.
fn unheld(held: &[Row]) -> bool {
    held.first()
        .is_some_and(|row| row.integer(0).is_ok_and(|count| count == 0))
}

impl ExpiredBlob {
    /// The job that forgets this row, unless a record linked the blob
    /// meanwhile.
    pub fn release(&self) -> Job {
        Job::Statements(vec![delete_blob_sql(self.user_id, &self.hash)])
    }

    /// Whether any store still holds the bytes: one row, `(0 or 1)`.
    pub fn held(&self) -> Statement {
        blob_held_sql(&self.hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqlValue;

    fn at_ms(ms: i64) -> RecordDate {
        RecordDate::from_unix_millis(ms).expect("a date")
    }

    #[test]
    fn bytes_go_only_when_unheld_and_older_than_an_upload_may_wait() {
        let now = 10 * UNLINKED_BLOB_LIFETIME_MS;
        let upkeep = Upkeep::at(at_ms(now));
        let unheld = [vec![SqlValue::Integer(0)]];
        let held = [vec![SqlValue::Integer(1)]];
        let old = Some(at_ms(now - UNLINKED_BLOB_LIFETIME_MS - 1));
        let fresh = Some(at_ms(now - UNLINKED_BLOB_LIFETIME_MS + 1));
        assert!(upkeep.may_remove_bytes(&unheld, old));
        assert!(!upkeep.may_remove_bytes(&held, old));
        assert!(!upkeep.may_remove_bytes(&unheld, fresh));
        assert!(!upkeep.may_remove_bytes(&unheld, None));
        assert!(!upkeep.may_remove_bytes(&[], old));
    }

    #[test]
    fn before_serving_any_unheld_bytes_go() {
        assert!(Upkeep::may_remove_before_serving(&[vec![
            SqlValue::Integer(0)
        ]]));
        assert!(!Upkeep::may_remove_before_serving(&[vec![
            SqlValue::Integer(1)
        ]]));
        assert!(!Upkeep::may_remove_before_serving(&[]));
    }
}
