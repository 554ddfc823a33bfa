//! The epoch of what core remembers between requests (apps' standings,
//! users, versions: core's `service::standing` and `Resident`): how this
//! host tells when one may have changed.
//!
//! The epoch has two parts. The writer counts its commits that may change
//! a standing ([`Done::changes_standing`](folio_core::Done::changes_standing))
//! before it acknowledges them. Changes made beside the server (`folio app
//! add`, `folio app revoke`, `folio user remove`, `folio import` on the
//! data directory of a running server) replace the file `apps.changed`
//! once they are committed, and each request's epoch includes that file's
//! inode and times, looked at again when the last look is older than
//! [`OUTSIDE_RECHECK`]: at most a `stat` a millisecond, where the two reads
//! it replaces cost tens of microseconds (and a `stat` per request was 3%
//! of the request threads' time at 4,000 writes a second). A command that
//! dies between its commit and the file leaves the old standing in use
//! until the server restarts or the next such change.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use folio_core::service::standing::Epoch;

use crate::config::DataDir;

/// The file every change to apps made outside the server replaces.
const OUTSIDE_CHANGES: &str = "apps.changed";

/// How long one look at the file of outside changes stands for: a request
/// that starts this long after a command noted its change sees it. A
/// command's change reaches a client later than that anyway (the command
/// exits, then the client sends).
const OUTSIDE_RECHECK: Duration = Duration::from_millis(1);

pub struct Standings {
    commits: AtomicU64,
    outside: PathBuf,
    /// The last look at `outside`: when, and its stamp.
    looked: Mutex<Option<(Instant, Option<[u64; 3]>)>>,
}

impl Standings {
    pub fn new(data: &DataDir) -> Self {
        Self::watching(data.root().join(OUTSIDE_CHANGES))
    }

    /// Standings with no file of outside changes, for the writer's tests.
    #[cfg(test)]
    pub fn for_tests() -> Self {
        Self::watching(PathBuf::from("/nonexistent/apps.changed"))
    }

    fn watching(outside: PathBuf) -> Self {
        Standings {
            commits: AtomicU64::new(0),
            outside,
            looked: Mutex::new(None),
        }
    }

    /// The epoch now; `None` when the file of outside changes cannot be
    /// read (then nothing is remembered or used).
    pub fn epoch(&self) -> Option<Epoch> {
        let commits = self.commits.load(Ordering::SeqCst);
        let outside = self.outside_stamp()?;
        Some(Epoch { commits, outside })
    }

    /// The stamp of the file of outside changes, as of at most
    /// [`OUTSIDE_RECHECK`] ago.
    fn outside_stamp(&self) -> Option<[u64; 3]> {
        let now = Instant::now();
        let mut looked = self.looked.lock().unwrap_or_else(|p| p.into_inner());
        match *looked {
            Some((at, stamp)) if now.duration_since(at) < OUTSIDE_RECHECK => stamp,
            _ => {
                let fresh = stamp(&self.outside);
                *looked = Some((now, fresh));
                fresh
            }
        }
    }

    /// Called by the writer after a commit that may have changed a
    /// standing, before it is acknowledged.
    pub fn changed(&self) {
        self.commits.fetch_add(1, Ordering::SeqCst);
    }
}

/// The identity of the file's last replacement: its inode and its
/// modification and change times (each replacement is a new file). An
/// absent file (no change ever made beside a server) is all zeros.
fn stamp(path: &Path) -> Option<[u64; 3]> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(meta) => Some([
            meta.ino(),
            nanos(meta.mtime(), meta.mtime_nsec()),
            nanos(meta.ctime(), meta.ctime_nsec()),
        ]),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Some([0; 3]),
        Err(error) => {
            tracing::warn!(%error, path = %path.display(), "cannot read the file of outside changes to apps");
            None
        }
    }
}

fn nanos(secs: i64, nsecs: i64) -> u64 {
    (secs as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(nsecs as u64)
}

/// Tells a server running on `data` that apps changed beside it: replaces
/// the file of outside changes (written aside, then renamed over it).
pub fn note_outside_change(data: &DataDir) -> std::io::Result<()> {
    let path = data.root().join(OUTSIDE_CHANGES);
    let aside = data
        .root()
        .join(format!("{OUTSIDE_CHANGES}.{}", std::process::id()));
    std::fs::write(&aside, b"apps changed outside the server\n")?;
    std::fs::rename(&aside, &path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_moves_with_each_commit_and_each_outside_change() {
        let dir = std::env::temp_dir().join(format!("folio-standings-{}", std::process::id()));
        let data = DataDir::open(&dir).expect("a data directory");
        let standings = Standings::new(&data);
        let first = standings.epoch().expect("an epoch");
        assert_eq!(first.outside, [0; 3], "no change was made beside it");
        assert_eq!(standings.epoch(), Some(first));
        standings.changed();
        let second = standings.epoch().expect("an epoch");
        assert_ne!(second, first);
        let mut seen = vec![second];
        for _ in 0..5 {
            note_outside_change(&data).expect("noted");
            std::thread::sleep(OUTSIDE_RECHECK);
            let next = standings.epoch().expect("an epoch");
            assert!(
                !seen.contains(&next),
                "every outside change moves the epoch"
            );
            seen.push(next);
        }
        std::fs::remove_dir_all(&dir).expect("removed");
    }
}
