//! Upkeep: what a host does on a timer, decided once for both hosts, as a
//! machine the host drives ([`UpkeepRound`]), so that no host can skip a
//! step or take them in another order.
//!
//! Every [`UPKEEP_INTERVAL_MS`] a host starts an [`UpkeepRound`] at its
//! current time and does what each [`UpkeepStep`] says:
//!
//! 1. about once an hour ([`STRAY_SWEEP_INTERVAL_MS`]), the sweep: remove the
//!    unfinished uploads older than an upload may wait, read
//!    [`Upkeep::held_blobs`] once, list the blobs whose bytes the host
//!    keeps, and for each one no store holds, read whether one holds it
//!    now and when its bytes were stored, and remove them if
//!    [`Upkeep::may_remove_bytes`] lets them go: bytes stored whose row
//!    never committed (the host stopped between the two);
//! 2. run [`Upkeep::prune`] as a job (events past retention go);
//! 3. read [`Upkeep::expired_blobs`], and for each row run
//!    [`ExpiredBlob::release`] as a job, read [`ExpiredBlob::held`] and
//!    when the bytes were stored, and remove them only when
//!    [`Upkeep::may_remove_bytes`] says so;
//! 4. forget idle rate buckets;
//! 5. give their words to versions stored without them (the search
//!    index's backfill, `store::search`): read [`unsearched_sql`], run the
//!    [`Backfill`] of its rows as a job, and again, at most
//!    [`SEARCH_BATCHES_PER_ROUND`] times.
//!
//! A blob's steps run under the host's placement lock (the one an upload
//! places its bytes and writes its row under), where it has one. A step
//! that fails ends its phase ([`UpkeepRound::failed`]): the round goes on
//! with the next, and its [`UpkeepReport`] says what failed.
//!
//! Before it serves, a host runs [`UpkeepRound::before_serving`]: the sweep
//! and the backfill: the sweep removes every kept blob no store holds,
//! whatever its age (no upload is on its way to its row then), and every
//! unfinished upload; the backfill indexes an upgraded store's records
//! before its first search, when there are few enough.
//!
//! Nonces and rate buckets past their windows are also forgotten by their
//! own owners as they go.

use std::collections::{HashSet, VecDeque};
use std::fmt;

use crate::auth::TIMESTAMP_WINDOW_MS;
use crate::model::RecordDate;
use crate::service::blob::UNLINKED_BLOB_LIFETIME_MS;
use crate::service::events::retention_cutoff;
use crate::store::{
    Backfill, Statement, blob_held_sql, delete_blob_sql, expired_blobs_sql, held_blobs_sql,
    prune_events_sql, prune_nonces_sql, unsearched_sql,
};

use crate::service::store::{Row, RowError, RowExt};
use crate::store::SqlValue;

use super::Job;

/// How often a host runs its upkeep.
pub const UPKEEP_INTERVAL_MS: u64 = 60_000;

/// The most backfill batches ([`crate::store::SEARCH_BACKFILL_BATCH`]
/// versions each) one round runs: 10,000 versions, each batch its own job,
/// so that writes are never held up for long.
pub const SEARCH_BATCHES_PER_ROUND: usize = 50;

/// How often a host looks for stray blob bytes: it reads every blob's
/// bytes' place, too costly each minute.
pub const STRAY_SWEEP_INTERVAL_MS: i64 = 60 * 60 * 1_000;

/// One round of upkeep, at the host's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upkeep {
    now: RecordDate,
}

/// A blob row past its expiry: an upload no record linked in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredBlob {
    /// The row id of the user whose store holds the row.
    pub user_id: i64,
    /// The blob's SHA-256, as stored (64 hex digits).
    pub hash: String,
}

impl Upkeep {
    /// Upkeep at the host's time `now`.
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

/// One round of upkeep as a machine the host drives: call
/// [`step`](UpkeepRound::step), do what it says, answer it, and again,
/// until [`UpkeepStep::Done`].
#[derive(Debug)]
pub struct UpkeepRound {
    upkeep: Upkeep,
    /// Before serving: the sweep alone, whatever the bytes' age.
    before_serving: bool,
    phase: Phase,
    /// The statement of the last [`UpkeepStep::Read`].
    asked: Option<Statement>,
    report: UpkeepReport,
}

/// What the host does next for an [`UpkeepRound`].
#[derive(Debug)]
pub enum UpkeepStep<'a> {
    /// Remove the unfinished uploads begun before this time (every one:
    /// `None`); then [`UpkeepRound::uploads_removed`].
    RemoveUnfinishedUploads {
        /// Uploads begun at or after it may still be on their way.
        begun_before: Option<RecordDate>,
    },
    /// Run this read; then [`UpkeepRound::supply`] with its rows.
    Read(&'a Statement),
    /// List the hashes of the blobs whose bytes the host keeps (64 hex
    /// digits each); then [`UpkeepRound::kept`].
    ListKept,
    /// Take the lock uploads place their bytes and rows under, and hold it
    /// until [`UpkeepStep::Unlock`]; then step again.
    Lock,
    /// Let the lock go; then step again.
    Unlock,
    /// Run this job in the host's ordered place of writes; then step
    /// again (or [`UpkeepRound::failed`]).
    Run(Job),
    /// Say when the bytes of this blob were stored (or stored again), if
    /// the host can tell; then [`UpkeepRound::stored_at`].
    StoredAt(&'a str),
    /// Remove the bytes of this blob; then step again.
    RemoveBytes(&'a str),
    /// Forget the rate buckets idle at this time; then step again.
    ForgetIdleRates(RecordDate),
    /// The round is over.
    Done(&'a UpkeepReport),
}

/// What a round of upkeep did, for the host's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpkeepReport {
    /// Unfinished uploads removed.
    pub unfinished_uploads: usize,
    /// Kept bytes that no store held, removed by the sweep.
    pub stray_blobs: usize,
    /// Expired blob rows released.
    pub expired_blobs: usize,
    /// Expired blobs whose bytes were removed.
    pub collected_blobs: usize,
    /// Versions given their words by the search backfill.
    pub searched: usize,
    /// Latest versions the backfill could not read words from (stored
    /// with none).
    pub unsearchable: usize,
    /// The phases that failed, each with the host's error.
    pub failures: Vec<(&'static str, String)>,
}

/// Asks the host to read `statement`, kept in `asked` for the step's life.
fn read_step(asked: &mut Option<Statement>, statement: Statement) -> UpkeepStep<'_> {
    UpkeepStep::Read(asked.insert(statement))
}

impl UpkeepReport {
    /// Whether the round removed or released anything: what a host logs.
    pub fn did_anything(&self) -> bool {
        self.unfinished_uploads
            + self.stray_blobs
            + self.expired_blobs
            + self.collected_blobs
            + self.searched
            + self.unsearchable
            > 0
    }
}

/// Where a round stands: what the host is asked to do now.
#[derive(Debug)]
enum Phase {
    /// The sweep's unfinished uploads.
    SweepUploads,
    /// The sweep's read of every held blob.
    SweepHeld,
    /// The sweep's listing of the kept bytes.
    SweepKept(HashSet<String>),
    /// The sweep's kept bytes that no store held, one after another.
    Strays(VecDeque<String>, BlobStage),
    /// The job that prunes the event log and nonces.
    Prune,
    /// The read of the expired blob rows.
    Expired,
    /// The expired blobs, one after another.
    Collect(VecDeque<ExpiredBlob>, BlobStage),
    /// A phase failed under the lock: let it go, then this.
    Unlocking(Box<Phase>),
    /// The idle rate buckets.
    ForgetIdle,
    /// The read of unsearched versions, after this many batches.
    Unsearched(usize),
    /// The job that stores one batch's words, and how many came before.
    Search(Vec<Statement>, usize),
    Done,
}

/// Where one blob stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlobStage {
    /// The lock is to be taken.
    Lock,
    /// An expired blob's row is to be released.
    Release,
    /// Whether any store holds it is to be read.
    Held,
    /// When its bytes were stored is to be asked.
    StoredAt { held: bool },
    /// Its bytes are to be removed.
    Remove,
    /// The lock is to be let go, then the next blob taken.
    Unlock,
}

impl UpkeepRound {
    /// The round at `now` of a host that runs one every `interval_ms`: it
    /// sweeps when a multiple of [`STRAY_SWEEP_INTERVAL_MS`] since the
    /// epoch fell since the round before (about once an hour, whatever the
    /// interval, and with no state kept between rounds).
    pub fn start(now: RecordDate, interval_ms: u64) -> Self {
        let at = now.unix_millis();
        let before = at.saturating_sub(i64::try_from(interval_ms).unwrap_or(i64::MAX));
        let sweep =
            at.div_euclid(STRAY_SWEEP_INTERVAL_MS) != before.div_euclid(STRAY_SWEEP_INTERVAL_MS);
        UpkeepRound::new(Upkeep::at(now), false, sweep)
    }

    /// The sweep before a host serves, at `now`.
    pub fn before_serving(now: RecordDate) -> Self {
        UpkeepRound::new(Upkeep::at(now), true, true)
    }

    fn new(upkeep: Upkeep, before_serving: bool, sweep: bool) -> Self {
        UpkeepRound {
            upkeep,
            before_serving,
            phase: match sweep {
                true => Phase::SweepUploads,
                false => Phase::Prune,
            },
            asked: None,
            report: UpkeepReport::default(),
        }
    }

    /// What the host does now. Asking again without an answer asks the same.
    pub fn step(&mut self) -> UpkeepStep<'_> {
        // A list of blobs done with is its phase done with.
        match &self.phase {
            Phase::Strays(hashes, _) if hashes.is_empty() => self.phase = self.after_sweep(),
            Phase::Collect(blobs, _) if blobs.is_empty() => self.phase = Phase::ForgetIdle,
            _ => {}
        }
        let upkeep = self.upkeep;
        let read = read_step;
        match &self.phase {
            Phase::SweepUploads => UpkeepStep::RemoveUnfinishedUploads {
                begun_before: (!self.before_serving).then(|| upkeep.unfinished_uploads_before()),
            },
            Phase::SweepHeld => read(&mut self.asked, Upkeep::held_blobs()),
            Phase::SweepKept(_) => UpkeepStep::ListKept,
            Phase::Strays(hashes, stage) => match (stage, hashes.front()) {
                (_, None) | (BlobStage::Lock, _) => UpkeepStep::Lock,
                (BlobStage::Release | BlobStage::Held, Some(hash)) => {
                    read(&mut self.asked, Upkeep::bytes_held(hash))
                }
                (BlobStage::StoredAt { .. }, Some(hash)) => UpkeepStep::StoredAt(hash),
                (BlobStage::Remove, Some(hash)) => UpkeepStep::RemoveBytes(hash),
                (BlobStage::Unlock, _) => UpkeepStep::Unlock,
            },
            Phase::Prune => UpkeepStep::Run(upkeep.prune()),
            Phase::Expired => read(&mut self.asked, upkeep.expired_blobs()),
            Phase::Collect(blobs, stage) => match (stage, blobs.front()) {
                (_, None) | (BlobStage::Lock, _) => UpkeepStep::Lock,
                (BlobStage::Release, Some(blob)) => UpkeepStep::Run(blob.release()),
                (BlobStage::Held, Some(blob)) => read(&mut self.asked, blob.held()),
                (BlobStage::StoredAt { .. }, Some(blob)) => UpkeepStep::StoredAt(&blob.hash),
                (BlobStage::Remove, Some(blob)) => UpkeepStep::RemoveBytes(&blob.hash),
                (BlobStage::Unlock, _) => UpkeepStep::Unlock,
            },
            Phase::Unlocking(_) => UpkeepStep::Unlock,
            Phase::ForgetIdle => UpkeepStep::ForgetIdleRates(upkeep.now),
            Phase::Unsearched(_) => read(&mut self.asked, unsearched_sql()),
            Phase::Search(statements, _) => UpkeepStep::Run(Job::Statements(statements.clone())),
            Phase::Done => UpkeepStep::Done(&self.report),
        }
    }

    /// What follows the sweep.
    fn after_sweep(&self) -> Phase {
        match self.before_serving {
            true => Phase::Unsearched(0),
            false => Phase::Prune,
        }
    }

    /// Says that the host did the last step, one that answers nothing:
    /// [`UpkeepStep::Lock`], [`UpkeepStep::Unlock`], [`UpkeepStep::Run`],
    /// [`UpkeepStep::RemoveBytes`] or [`UpkeepStep::ForgetIdleRates`].
    pub fn done(&mut self) {
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        self.phase = match phase {
            Phase::Strays(mut hashes, stage) => match stage {
                BlobStage::Lock => Phase::Strays(hashes, BlobStage::Held),
                BlobStage::Remove => {
                    self.report.stray_blobs += 1;
                    Phase::Strays(hashes, BlobStage::Unlock)
                }
                BlobStage::Unlock => {
                    hashes.pop_front();
                    Phase::Strays(hashes, BlobStage::Lock)
                }
                other => Phase::Strays(hashes, other),
            },
            Phase::Prune => Phase::Expired,
            Phase::Collect(mut blobs, stage) => match stage {
                BlobStage::Lock => Phase::Collect(blobs, BlobStage::Release),
                BlobStage::Release => {
                    self.report.expired_blobs += 1;
                    Phase::Collect(blobs, BlobStage::Held)
                }
                BlobStage::Remove => {
                    self.report.collected_blobs += 1;
                    Phase::Collect(blobs, BlobStage::Unlock)
                }
                BlobStage::Unlock => {
                    blobs.pop_front();
                    Phase::Collect(blobs, BlobStage::Lock)
                }
                other => Phase::Collect(blobs, other),
            },
            Phase::Unlocking(next) => *next,
            Phase::ForgetIdle => Phase::Unsearched(0),
            Phase::Search(_, batches) if batches + 1 < SEARCH_BATCHES_PER_ROUND => {
                Phase::Unsearched(batches + 1)
            }
            Phase::Search(..) => Phase::Done,
            other => other,
        };
    }

    /// Says how many unfinished uploads the host removed.
    pub fn uploads_removed(&mut self, count: usize) {
        self.report.unfinished_uploads += count;
        if let Phase::SweepUploads = self.phase {
            self.phase = Phase::SweepHeld;
        }
    }

    /// Hands in the rows of the last [`UpkeepStep::Read`].
    pub fn supply(&mut self, rows: Vec<Row>) {
        self.asked = None;
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        self.phase = match phase {
            Phase::SweepHeld => {
                let held: Result<HashSet<String>, RowError> = (rows.iter())
                    .map(|row| row.text(0).map(str::to_owned))
                    .collect();
                match held {
                    Ok(held) => Phase::SweepKept(held),
                    Err(error) => self.failure("sweep", error, self.after_sweep()),
                }
            }
            Phase::Strays(hashes, BlobStage::Held) => {
                let stage = match self.before_serving {
                    true if Upkeep::may_remove_before_serving(&rows) => BlobStage::Remove,
                    true => BlobStage::Unlock,
                    false => BlobStage::StoredAt {
                        held: !unheld(&rows),
                    },
                };
                Phase::Strays(hashes, stage)
            }
            Phase::Expired => {
                let blobs: Result<VecDeque<ExpiredBlob>, RowError> =
                    rows.iter().map(|row| Upkeep::expired_blob(row)).collect();
                match blobs {
                    Ok(blobs) => Phase::Collect(blobs, BlobStage::Lock),
                    Err(error) => self.failure("expired blobs", error, Phase::ForgetIdle),
                }
            }
            Phase::Collect(blobs, BlobStage::Held) => {
                let held = !unheld(&rows);
                Phase::Collect(blobs, BlobStage::StoredAt { held })
            }
            Phase::Unsearched(_) if rows.is_empty() => Phase::Done,
            Phase::Unsearched(batches) => match Backfill::of(&rows) {
                Ok(backfill) => {
                    self.report.searched += backfill.searched;
                    self.report.unsearchable += backfill.unreadable;
                    Phase::Search(backfill.statements, batches)
                }
                Err(error) => self.failure("search", error, Phase::Done),
            },
            other => other,
        };
    }

    /// Hands in the hashes of the blobs whose bytes the host keeps.
    pub fn kept(&mut self, hashes: Vec<String>) {
        if let Phase::SweepKept(held) = &self.phase {
            let strays = hashes.into_iter().filter(|hash| !held.contains(hash));
            self.phase = Phase::Strays(strays.collect(), BlobStage::Lock);
        }
    }

    /// Says when the bytes of the blob asked were stored, if the host can
    /// tell: they go only when no store holds them and they are older than
    /// an upload may wait to be linked ([`Upkeep::may_remove_bytes`]).
    pub fn stored_at(&mut self, stored_at: Option<RecordDate>) {
        let upkeep = self.upkeep;
        if let Phase::Strays(_, stage) | Phase::Collect(_, stage) = &mut self.phase
            && let BlobStage::StoredAt { held } = *stage
        {
            let rows = [vec![SqlValue::Integer(i64::from(held))]];
            *stage = match upkeep.may_remove_bytes(&rows, stored_at) {
                true => BlobStage::Remove,
                false => BlobStage::Unlock,
            };
        }
    }

    /// Says that the last step failed: its phase ends, the round goes on
    /// with the next (after letting the lock go), and the report says so.
    pub fn failed(&mut self, error: impl fmt::Display) {
        self.asked = None;
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        let locked = matches!(
            &phase,
            Phase::Strays(_, stage) | Phase::Collect(_, stage) if *stage != BlobStage::Lock
        );
        let (name, next) = match phase {
            Phase::SweepUploads | Phase::SweepHeld | Phase::SweepKept(_) | Phase::Strays(..) => {
                ("sweep", self.after_sweep())
            }
            Phase::Prune => ("prune", Phase::Expired),
            Phase::Expired | Phase::Collect(..) => ("expired blobs", Phase::ForgetIdle),
            Phase::Unlocking(next) => ("unlock", *next),
            Phase::ForgetIdle => ("rates", Phase::Unsearched(0)),
            Phase::Unsearched(_) | Phase::Search(..) | Phase::Done => ("search", Phase::Done),
        };
        self.phase = self.failure(name, error, next);
        if locked {
            let next = std::mem::replace(&mut self.phase, Phase::Done);
            self.phase = Phase::Unlocking(Box::new(next));
        }
    }

    /// Records that phase `name` failed; the phase that follows.
    fn failure(&mut self, name: &'static str, error: impl fmt::Display, next: Phase) -> Phase {
        self.report.failures.push((name, error.to_string()));
        next
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

    /// What a host did, step by step, as a test reads it.
    fn script(
        round: &mut UpkeepRound,
        host: &mut dyn FnMut(&UpkeepStep<'_>) -> Answer,
    ) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            assert!(seen.len() < 100, "the round goes on: {seen:?}");
            let step = round.step();
            seen.push(match &step {
                UpkeepStep::RemoveUnfinishedUploads { begun_before } => {
                    format!(
                        "uploads before {}",
                        begun_before.map_or("any".into(), |at| at.unix_millis().to_string())
                    )
                }
                UpkeepStep::Read(statement) => {
                    format!("read {}", &statement.sql[..statement.sql.len().min(20)])
                }
                UpkeepStep::ListKept => "list".into(),
                UpkeepStep::Lock => "lock".into(),
                UpkeepStep::Unlock => "unlock".into(),
                UpkeepStep::Run(_) => "run".into(),
                UpkeepStep::StoredAt(hash) => format!("stored_at {hash}"),
                UpkeepStep::RemoveBytes(hash) => format!("remove {hash}"),
                UpkeepStep::ForgetIdleRates(_) => "rates".into(),
                UpkeepStep::Done(_) => "done".into(),
            });
            if let UpkeepStep::Done(_) = step {
                return seen;
            }
            match host(&step) {
                Answer::Rows(rows) => round.supply(rows),
                Answer::Kept(hashes) => round.kept(hashes),
                Answer::StoredAt(at) => round.stored_at(at),
                Answer::Uploads(count) => round.uploads_removed(count),
                Answer::Done => round.done(),
                Answer::Failed => round.failed("broken"),
            }
        }
    }

    enum Answer {
        Rows(Vec<Row>),
        Kept(Vec<String>),
        StoredAt(Option<RecordDate>),
        Uploads(usize),
        Done,
        Failed,
    }

    /// The partial index the backfill reads through, and how [`script`]
    /// writes that read.
    const UNSEARCHED: &str = "versions_unsearched";
    const UNSEARCHED_READ: &str = "read SELECT v.user_id, v.";

    /// Half past an hour: no sweep in a round a minute long.
    const NOW: i64 = 10 * STRAY_SWEEP_INTERVAL_MS + STRAY_SWEEP_INTERVAL_MS / 2;

    fn integer(n: i64) -> Vec<Row> {
        vec![vec![SqlValue::Integer(n)]]
    }

    #[test]
    fn a_round_prunes_then_collects_each_expired_blob_under_the_lock() {
        let mut round = UpkeepRound::start(at_ms(NOW), 60_000);
        let old = Some(at_ms(NOW - UNLINKED_BLOB_LIFETIME_MS - 1));
        let mut held = [0, 1].into_iter();
        let seen = script(&mut round, &mut |step| match step {
            UpkeepStep::Read(statement) if statement.sql.contains(UNSEARCHED) => {
                Answer::Rows(Vec::new())
            }
            UpkeepStep::Read(statement) if statement.sql.contains("expires_at") => {
                Answer::Rows(vec![
                    vec![SqlValue::Integer(1), SqlValue::Text("a".repeat(64))],
                    vec![SqlValue::Integer(1), SqlValue::Text("b".repeat(64))],
                ])
            }
            UpkeepStep::Read(_) => Answer::Rows(integer(held.next().expect("two blobs"))),
            UpkeepStep::StoredAt(_) => Answer::StoredAt(old),
            _ => Answer::Done,
        });
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let expected_tail = [
            "lock".to_owned(),
            "run".into(),
            seen[4].clone(),
            format!("stored_at {a}"),
            format!("remove {a}"),
            "unlock".into(),
            "lock".into(),
            "run".into(),
            seen[10].clone(),
            format!("stored_at {b}"),
            "unlock".into(),
            "rates".into(),
            UNSEARCHED_READ.into(),
            "done".into(),
        ];
        assert_eq!(seen[0], "run", "the prune first: {seen:?}");
        assert!(seen[1].starts_with("read"), "{seen:?}");
        assert_eq!(seen[2..], expected_tail, "{seen:?}");
        let report = match round.step() {
            UpkeepStep::Done(report) => report.clone(),
            other => panic!("done: {other:?}"),
        };
        assert_eq!((report.expired_blobs, report.collected_blobs), (2, 1));
        assert!(report.did_anything());
        assert!(!UpkeepReport::default().did_anything());
        assert!(report.failures.is_empty());
    }

    #[test]
    fn before_serving_the_sweep_removes_every_unheld_file_and_nothing_else() {
        let mut round = UpkeepRound::before_serving(at_ms(NOW));
        let seen = script(&mut round, &mut |step| match step {
            UpkeepStep::RemoveUnfinishedUploads { begun_before: None } => Answer::Uploads(2),
            UpkeepStep::Read(statement) if statement.sql.contains(UNSEARCHED) => {
                Answer::Rows(Vec::new())
            }
            UpkeepStep::Read(statement) if statement.sql.contains("DISTINCT") => {
                Answer::Rows(vec![vec![SqlValue::Text("h".repeat(64))]])
            }
            UpkeepStep::Read(_) => Answer::Rows(integer(0)),
            UpkeepStep::ListKept => Answer::Kept(vec!["h".repeat(64), "s".repeat(64)]),
            UpkeepStep::StoredAt(_) => panic!("age does not matter before serving"),
            _ => Answer::Done,
        });
        let s = "s".repeat(64);
        assert_eq!(seen[0], "uploads before any");
        assert_eq!(
            seen[2..],
            [
                "list".to_owned(),
                "lock".into(),
                seen[4].clone(),
                format!("remove {s}"),
                "unlock".into(),
                UNSEARCHED_READ.into(),
                "done".into()
            ]
        );
        match round.step() {
            UpkeepStep::Done(report) => {
                assert_eq!((report.unfinished_uploads, report.stray_blobs), (2, 1))
            }
            other => panic!("done: {other:?}"),
        }
    }

    #[test]
    fn a_step_that_fails_under_the_lock_lets_it_go_and_the_round_goes_on() {
        let mut round = UpkeepRound::start(at_ms(NOW), 60_000);
        let mut reads = 0;
        let seen = script(&mut round, &mut |step| match step {
            UpkeepStep::Read(statement) if statement.sql.contains(UNSEARCHED) => {
                Answer::Rows(Vec::new())
            }
            UpkeepStep::Read(_) => {
                reads += 1;
                match reads {
                    1 => Answer::Rows(vec![vec![
                        SqlValue::Integer(1),
                        SqlValue::Text("c".repeat(64)),
                    ]]),
                    _ => Answer::Failed,
                }
            }
            _ => Answer::Done,
        });
        assert_eq!(
            seen[2..],
            [
                "lock",
                "run",
                seen[4].as_str(),
                "unlock",
                "rates",
                UNSEARCHED_READ,
                "done"
            ],
            "{seen:?}"
        );
        match round.step() {
            UpkeepStep::Done(report) => {
                assert_eq!(report.failures, [("expired blobs", "broken".to_owned())]);
            }
            other => panic!("done: {other:?}"),
        }
    }

    #[test]
    fn a_round_sweeps_once_an_hour_whatever_the_interval() {
        let hour = STRAY_SWEEP_INTERVAL_MS;
        let sweeps = |at: i64, interval: u64| {
            matches!(
                UpkeepRound::start(at_ms(at), interval).step(),
                UpkeepStep::RemoveUnfinishedUploads {
                    begun_before: Some(_)
                }
            )
        };
        assert!(sweeps(100 * hour, 60_000));
        assert!(sweeps(100 * hour + 59_999, 60_000));
        assert!(!sweeps(100 * hour + 60_000, 60_000));
        assert!(sweeps(100 * hour + 10 * 60_000, 15 * 60_000));
        assert!(!sweeps(100 * hour + 20 * 60_000, 15 * 60_000));
    }
}
