//! [`Resident`]: what core keeps in a host's memory between requests, so
//! that a request asks its host only for input and output.
//!
//! A host that runs one process for many requests (the native server)
//! keeps one `Resident` and hands it to core ([`Host::resident`](super::Host::resident)),
//! with each request's [`Epoch`] ([`Request::epoch`](super::Request::epoch)). Core then
//! finds users, standings, nonces, rates and remembered versions there
//! itself: none of them is a call to the host. A host that keeps nothing
//! between requests (the edge, where each user's object reads its own
//! storage) keeps none, and core asks it for each instead ([`Store::user`](super::Store::user),
//! [`Guards`](super::Guards), [`Jobs::run`](super::Jobs::run)).
//!
//! Everything here is memory only, bounded, and lost at a restart: the
//! replay guard's durability comes from its fence and the statements it
//! asks to store (PROTOCOL.md §10), the rest is read again.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use crate::auth::{Accepted, NonceUse, ReplayError, ReplayGuard};
use crate::model::{RecordDate, UserName};
use crate::service::jobs::memo::Memo;
use crate::service::jobs::{Job, JobOutcome, JobStep, WriteJob};
use crate::service::rates::RateLimits;
use crate::service::standing::{Epoch, StandingCache};

use super::{Host, Limited, Note, Rate, User, WriteFailure};

/// How many users [`Resident`] remembers by name; past it, it starts again
/// empty. A user's row changes only when the user is removed, and a
/// server holds a few.
pub const MAX_REMEMBERED_USERS: usize = 10_000;

/// What core keeps in a host's memory between requests.
#[derive(Debug)]
pub struct Resident {
    /// Users by their `{user}` segment, each with the epoch it was read
    /// under: a user removed beside the server (`folio user remove`) moves
    /// the epoch, as it ends the user's standings.
    users: RwLock<HashMap<String, (Epoch, User)>>,
    /// Apps' standings, each under the [`Epoch`](super::standing::Epoch) it was read in.
    pub standings: StandingCache,
    /// Versions and compiled types, for deciding writes without the store.
    pub memo: Memo,
    /// The nonces of the replay window (PROTOCOL.md §10).
    replay: Mutex<ReplayGuard>,
    /// The rates' buckets (PROTOCOL.md §13).
    rates: Mutex<RateLimits>,
}

impl Resident {
    /// A resident state around a replay guard, which the host then gives
    /// back the nonces the last process stored ([`ReplayGuard::restore`],
    /// through [`Resident::replay`]) before it serves, and the rate limits
    /// of its settings.
    pub fn new(replay: ReplayGuard, rates: RateLimits) -> Self {
        Resident {
            users: RwLock::default(),
            standings: StandingCache::new(),
            memo: Memo::new(),
            replay: Mutex::new(replay),
            rates: Mutex::new(rates),
        }
    }

    /// The replay guard, locked.
    pub fn replay(&self) -> MutexGuard<'_, ReplayGuard> {
        self.replay.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The rates' buckets, locked.
    pub fn rates(&self) -> MutexGuard<'_, RateLimits> {
        self.rates.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The user named `name`, if remembered under `epoch`.
    fn user(&self, name: &str, epoch: Epoch) -> Option<User> {
        let users = self.users.read().unwrap_or_else(PoisonError::into_inner);
        match users.get(name) {
            Some((read_in, user)) if *read_in == epoch => Some(user.clone()),
            _ => None,
        }
    }

    /// Remembers `user`, as the store held it under `epoch`.
    fn remember_user(&self, user: &User, epoch: Epoch) {
        let mut users = self.users.write().unwrap_or_else(PoisonError::into_inner);
        if users.len() >= MAX_REMEMBERED_USERS && !users.contains_key(&user.name) {
            users.clear();
        }
        users.insert(user.name.clone(), (epoch, user.clone()));
    }
}

/// The user named `name`: remembered under `epoch`, or read from the
/// host's store ([`Store::user`](super::Store::user)) and remembered.
pub(crate) async fn user<H: Host>(
    host: &H,
    name: &UserName,
    epoch: Option<Epoch>,
) -> Result<Option<User>, H::Error> {
    let resident = host.resident().zip(epoch);
    if let Some(user) = resident.and_then(|(resident, epoch)| resident.user(name.as_str(), epoch)) {
        return Ok(Some(user));
    }
    let found = host.user(name).await?;
    if let (Some((resident, epoch)), Some(user)) = (resident, &found) {
        resident.remember_user(user, epoch);
    }
    Ok(found)
}

/// Counts one request against `rate` at `now`: in the resident buckets, or
/// by the host ([`Guards::rate`](super::Guards::rate)). A refusal counted
/// here is noted ([`Note::RateRefused`]), for the host's metrics.
pub(crate) async fn count<H: Host>(
    host: &H,
    rate: Rate<'_>,
    now: RecordDate,
) -> Result<(), Limited> {
    let Some(resident) = host.resident() else {
        return host.rate(rate, now).await;
    };
    let counted = resident.rates().check(rate, now);
    if counted.is_err() {
        host.note(Note::RateRefused(rate));
    }
    counted
}

/// Records a verified request's nonce, or refuses one seen within the
/// window (PROTOCOL.md §10): in the resident guard, or by the host
/// ([`Guards::check_nonce`](super::Guards::check_nonce)). A request dated
/// further ahead than the next start's fence covers has its nonce stored
/// before it goes on ([`Accepted::Durable`]).
pub(crate) async fn check_nonce<H: Host>(
    host: &H,
    user: &User,
    used: &NonceUse<'_>,
) -> Result<(), ReplayError> {
    let Some(resident) = host.resident() else {
        return host.check_nonce(user, used).await;
    };
    let accepted = resident.replay().check(used)?;
    if let Accepted::Durable(statement) = accepted {
        let stored = match host.run(Job::Statements(vec![statement])).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(refused)) => Err(refused.to_string()),
            Err(failure) => Err(failure.to_string()),
        };
        if let Err(error) = stored {
            host.report(&format!(
                "storing the nonce of a request dated ahead: {error}"
            ));
            return Err(ReplayError::Full);
        }
    }
    Ok(())
}

/// Runs `job`. With a [`Resident`], core decides it here, through the memo
/// under `epoch`, and hands the host only what is left: nothing (a refusal
/// or a replay decided on what the memo holds, then checked), the decided
/// job for its writer ([`Jobs::commit`]), or the job that must read the
/// store ([`Jobs::decide`]). Without one, the host runs it whole
/// ([`Jobs::run`]).
pub(crate) async fn run<H: Host>(
    host: &H,
    job: Job,
    epoch: Option<Epoch>,
) -> Result<JobOutcome, WriteFailure> {
    let Some(resident) = host.resident() else {
        return host.run(job).await;
    };
    let memo = epoch.map(|epoch| resident.memo.at(epoch));
    let mut job = WriteJob::prepare(job, memo);
    match job.step() {
        JobStep::Decided => host.commit(job.decided()).await,
        JobStep::Done(finished) => Ok(finished.outcome),
        JobStep::Read(_) => host.decide(job).await,
        JobStep::Failed(failure) => Err(WriteFailure::Failed(failure.to_string())),
        JobStep::Commit(_) => Err(WriteFailure::Failed("a prepared job committed".into())),
    }
}
