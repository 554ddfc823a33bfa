//! One attempt's decided writes, not yet committed: the overlay a job's
//! later writes read through, the reads a prepared job's commit checks
//! again, and the statements that store it all.

use std::sync::Arc;

use crate::model::{
    ClientId, Entity, ReceivedRecord, Record, RecordDate, RecordSource, VersionHash,
};
use crate::query::{IndexEntry, index_entries};
use crate::service::User;
use crate::service::events::LiveVersion;
use crate::service::federation::notify::{Audience, announces};
use crate::service::federation::recipients;
use crate::service::store::{Row, RowExt};
use crate::store::{
    NeedRows, Replaces, Statement, WriteOrigin, audience_statements, count_received_sql,
    event_seq_sql, queue_notification_sql, version_statements_replacing,
};
use crate::write::{Commit, Need, RecordKey, Supplied};

use super::{Effects, JobFailure, RecordWrite, Stored, Written};

/// One job's decided writes, not yet committed.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) user: User,
    /// What the job's writes store, in order: the overlay later writes of
    /// the job read through.
    versions: Vec<PendingVersion>,
    /// Statements that follow the versions' (a registration's key row).
    pub(super) extra: Vec<Statement>,
    /// The latest `received_at` the job's versions took so far.
    pub(super) last_received_at: Option<RecordDate>,
    /// The client of the job's first write, for its events.
    client_id: Option<ClientId>,
    /// What the job read from the store, with what it found: the read set
    /// a prepared job's commit checks again.
    reads: Vec<Read>,
    /// The index entries, as stored, of the latest versions the job read,
    /// by hash: what a version written over one of them replaces.
    read_entries: Vec<(VersionHash, Arc<[IndexEntry]>)>,
}

/// A version a job stores, as decided.
#[derive(Debug, Clone)]
struct PendingVersion {
    record: ReceivedRecord,
    entries: Vec<IndexEntry>,
    /// The text search finds it by.
    search_text: String,
    /// The parent's index entries, when the job read them: then the link
    /// index changes by the difference alone
    /// ([`version_statements_replacing`]).
    replaced: Option<Arc<[IndexEntry]>>,
    /// Its record's first stored version: it replaces nothing.
    first: bool,
    origin: WriteOrigin,
    /// The entities to notify of it (federation): queued in the outbox in
    /// the same commit.
    recipients: Vec<Entity>,
    /// Who of its record's audience may read it, for a version announced
    /// to anyone ([`announces`]): the audience hears of it too, then
    /// narrows to them ([`audience_statements`]).
    audience: Option<Audience>,
    /// A version another server notified: the source it came with and its
    /// size as stored, counted in the user's received usage in the same
    /// commit (the quotas of `Limits::received_from_*`).
    received: Option<(RecordSource, u64)>,
}

/// A job's first answer: a replay's stored version, or the first version
/// the job stores.
#[derive(Debug)]
pub(super) enum Answered {
    Replay(Box<Stored>),
    Stored,
}

/// What checking a prepared job's reads again found
/// ([`Pending::reads_hold`]).
pub(super) struct Recheck {
    /// Whether every read still holds.
    pub(super) hold: bool,
    /// The store's latest `received_at`.
    pub(super) last: Option<RecordDate>,
    /// The records whose latest version is no longer the one read.
    pub(super) moved: Vec<RecordKey>,
}

/// One read of a job, as a prepared job's commit checks it again. A stored
/// version never changes, so one found is not kept.
#[derive(Debug)]
enum Read {
    /// A record's latest version, by its hash (`None`: no such record).
    Latest(RecordKey, Option<VersionHash>),
    /// Any other read: its statement, and what it answered.
    Answer(Statement, NeedRows, Supplied),
}

impl Pending {
    pub(super) fn new(user: User) -> Self {
        Pending {
            user,
            versions: Vec::new(),
            extra: Vec::new(),
            last_received_at: None,
            client_id: None,
            reads: Vec::new(),
            read_entries: Vec::new(),
        }
    }

    /// Whether the job stores nothing (a replay's).
    pub(super) fn is_empty(&self) -> bool {
        self.versions.is_empty() && self.extra.is_empty()
    }

    /// A need's answer from the job's own writes, when they decide it: a
    /// record this job wrote is seen as written.
    pub(super) fn overlay(&self, need: &Need) -> Option<Supplied> {
        let pending = |pick: &dyn Fn(&Record) -> bool| {
            self.versions
                .iter()
                .rev()
                .find(|pending| pick(pending.record.record()))
                .map(|pending| Supplied::Record(Some(Arc::new(pending.record.record().clone()))))
        };
        match need {
            Need::Latest(key) => {
                pending(&|r| r.id == key.record_id && r.author.entity == key.entity)
            }
            Need::Version { record, hash } => pending(&|r| {
                r.id == record.record_id
                    && r.author.entity == record.entity
                    && r.version.hash == *hash
            }),
            _ => None,
        }
    }

    /// Keeps what the store answered `need` (to check again at a prepared
    /// job's commit), and answers it as the job sees it: a dependant this
    /// job already changed is seen as changed, and one it already deleted
    /// is no dependant any more.
    pub(super) fn read(
        &mut self,
        need: &Need,
        answer: Supplied,
        entries: Option<Arc<[IndexEntry]>>,
        statement: impl FnOnce() -> (Statement, NeedRows),
    ) -> Supplied {
        match (need, &answer) {
            (Need::Latest(key), Supplied::Record(found)) => {
                if let (Some(found), Some(entries)) = (found, entries) {
                    self.read_entries.push((found.version.hash, entries));
                }
                let hash = found.as_ref().map(|record| record.version.hash);
                self.reads.push(Read::Latest(key.clone(), hash));
            }
            (Need::Version { .. }, Supplied::Record(Some(_))) => {}
            _ => {
                let (statement, shape) = statement();
                self.reads
                    .push(Read::Answer(statement, shape, answer.clone()));
            }
        }
        match (need, answer) {
            (Need::Dependants(_), Supplied::Records(records)) => Supplied::Records(
                records
                    .into_iter()
                    .filter_map(|record| {
                        let latest = self
                            .versions
                            .iter()
                            .rev()
                            .map(|pending| pending.record.record())
                            .find(|stored| {
                                stored.id == record.id
                                    && stored.author.entity == record.author.entity
                            })
                            .map_or(record, |stored| stored.clone());
                        (!latest.is_tombstone()).then_some(latest)
                    })
                    .collect(),
            ),
            (_, answer) => answer,
        }
    }

    /// Adds the versions a write decided.
    pub(super) fn add(&mut self, write: &RecordWrite, commit: Commit) {
        if self.client_id.is_none() && self.versions.is_empty() {
            self.client_id = write.origin.client_id;
        }
        for version in commit.into_versions() {
            let received_at = version.record.version_received_at();
            self.last_received_at = self.last_received_at.max(Some(received_at));
            let replaced =
                (version.record.version.parent_hash).and_then(|parent| self.entries_of(&parent));
            let mut recipients =
                recipients(&self.user.entity, version.record.record(), &version.links);
            if !version.former_audience.is_empty() {
                // Whoever could read the version replaced hears of this one.
                recipients.extend(version.former_audience.iter().cloned());
                recipients.sort_unstable();
                recipients.dedup();
            }
            let audience = announces(&self.user.entity, version.record.record())
                .then(|| Audience::after(version.record.record()));
            let received = write
                .request
                .received_source()
                .filter(|source| source.is_notification())
                .map(|source| (source, received_bytes(version.record.record())));
            self.versions.push(PendingVersion {
                received,
                entries: index_entries(&version.links),
                search_text: version.search_text,
                replaced,
                first: version.replaces.is_none(),
                record: version.record,
                origin: write.origin,
                recipients,
                audience,
            });
        }
    }

    /// The index entries of version `hash`, if the job wrote or read it:
    /// a version the job wrote is its record's latest in the job's
    /// transaction, and one it read was checked to be still the latest.
    fn entries_of(&self, hash: &VersionHash) -> Option<Arc<[IndexEntry]>> {
        let written = self.versions.iter().rev();
        match written
            .map(|pending| (pending.record.version.hash, &pending.entries))
            .find(|(written, _)| written == hash)
        {
            Some((_, entries)) => Some(entries.as_slice().into()),
            None => (self.read_entries.iter())
                .find(|(read, _)| read == hash)
                .map(|(_, entries)| Arc::clone(entries)),
        }
    }

    /// The statements that check again, in a prepared job's commit, that
    /// everything the job read is still what the store holds; then the
    /// store's latest `received_at` ([`Pending::reads_hold`] reads the rows).
    pub(super) fn recheck_statements(&self) -> Vec<Statement> {
        let user_id = self.user.id;
        let mut statements: Vec<Statement> = self
            .reads
            .iter()
            .map(|read| match read {
                Read::Latest(key, _) => {
                    crate::store::latest_hash_sql(user_id, &key.entity, &key.record_id)
                }
                Read::Answer(statement, _, _) => statement.clone(),
            })
            .collect();
        statements.push(crate::store::last_received_at_sql(user_id));
        statements
    }

    /// Whether every read still holds, by the rows of
    /// [`Pending::recheck_statements`]; the store's latest `received_at`;
    /// and the records whose latest version moved since it was read (or
    /// guessed).
    pub(super) fn reads_hold(&self, rows: &[Vec<Row>]) -> Result<Recheck, JobFailure> {
        let (last, reads) = match rows.split_last() {
            Some(split) if split.1.len() == self.reads.len() => split,
            _ => return Err(JobFailure::Data("not one answer per recheck".into())),
        };
        let mut recheck = Recheck {
            hold: true,
            last: last_received_at(last)?,
            moved: Vec::new(),
        };
        for (read, rows) in self.reads.iter().zip(reads) {
            match read {
                Read::Latest(key, hash) => {
                    if latest_hash(rows)? != *hash {
                        recheck.hold = false;
                        recheck.moved.push(key.clone());
                    }
                }
                Read::Answer(_, shape, found) => {
                    if super::decide::need_answer(*shape, rows)?.0 != *found {
                        recheck.hold = false;
                    }
                }
            }
        }
        Ok(recheck)
    }

    /// Receives the job's versions, in order, at `now` or just after the
    /// previous one (the first just after `last`, the store's latest). A
    /// record whose `received_at` one of them set (its first version)
    /// takes that version's new date.
    pub(super) fn restamp(&mut self, last: Option<RecordDate>, now: RecordDate) {
        let mut previous = last;
        let mut moved: Vec<(RecordDate, RecordDate)> = Vec::with_capacity(self.versions.len());
        for version in &mut self.versions {
            let at = RecordDate::received_after(now, previous);
            let old = version.record.version_received_at();
            moved.push((old, at));
            let first = moved
                .iter()
                .find(|(old, _)| *old == version.record.received_at())
                .map(|(_, new)| *new);
            version.record.restamp(at, first);
            previous = Some(at);
        }
    }

    /// What the commit stores: each version, its outbox entries and
    /// received usage, the extra statements, then the read of the store's
    /// event sequence (the commit's answer).
    /// Also whether they may queue notifications.
    pub(super) fn commit_plan(&self) -> (Vec<Statement>, bool) {
        let user_id = self.user.id;
        let mut statements: Vec<Statement> = self
            .versions
            .iter()
            .flat_map(|version| {
                let replaces = match (version.first, version.replaced.as_deref()) {
                    (true, _) => Replaces::Nothing,
                    (false, Some(entries)) => Replaces::Read(entries),
                    (false, None) => Replaces::Unread,
                };
                version_statements_replacing(
                    user_id,
                    &version.record,
                    &version.entries,
                    Some(&version.search_text),
                    replaces,
                    version.origin,
                )
            })
            .collect();
        let before = statements.len();
        statements.extend(self.versions.iter().flat_map(|version| {
            let record = version.record.record();
            let queued_at = version.record.version_received_at().unix_millis();
            version.recipients.iter().map(move |recipient| {
                queue_notification_sql(
                    user_id,
                    recipient,
                    &record.id,
                    &record.version.hash,
                    queued_at,
                )
            })
        }));
        statements.extend(self.versions.iter().flat_map(|version| {
            let Some(audience) = &version.audience else {
                return Vec::new();
            };
            let record = version.record.record();
            audience_statements(
                user_id,
                &record.id,
                &record.version.hash,
                version.record.version_received_at().unix_millis(),
                &version.recipients,
                audience,
            )
        }));
        let notifications = statements.len() > before;
        statements.extend(self.versions.iter().filter_map(|version| {
            let (source, bytes) = version.received?;
            Some(count_received_sql(user_id, source, bytes))
        }));
        statements.extend(self.extra.iter().cloned());
        statements.push(event_seq_sql(user_id));
        (statements, notifications)
    }

    /// The answer and the effects of the committed job, from the rows of
    /// its commit (the store's event sequence after it).
    pub(super) fn committed(
        self,
        answered: Answered,
        notifications: bool,
        rows: &[Row],
        registration: bool,
    ) -> Result<(Written, Effects), JobFailure> {
        let answer = match answered {
            Answered::Replay(stored) => *stored,
            Answered::Stored => self
                .versions
                .first()
                .map(PendingVersion::to_stored)
                .ok_or_else(|| JobFailure::Data("a stored write without versions".into()))?,
        };
        let latest = match rows.first() {
            Some(row) => row.integer(0)?,
            None => return Err(JobFailure::Data("a user without an event sequence".into())),
        };
        // The job's events took the last sequences, one per version, in order.
        let count = i64::try_from(self.versions.len()).unwrap_or(i64::MAX);
        let first = latest.saturating_sub(count - 1);
        let client_id = self.client_id;
        let live: Vec<LiveVersion> = self
            .versions
            .into_iter()
            .zip(first..)
            .map(|(version, seq)| {
                let seq = u64::try_from(seq).unwrap_or_default();
                LiveVersion::new(
                    seq,
                    version.record.into_record(),
                    version.entries,
                    client_id,
                )
            })
            .collect();
        let effects = Effects {
            store: Some(self.user.id),
            changes_standing: registration || Effects::writes_an_authorization(&live),
            live,
            queues_notifications: notifications,
            rescheduled: false,
            moved_latest: Vec::new(),
        };
        Ok((Written { answer }, effects))
    }
}

impl PendingVersion {
    /// The version as stored, copied: the answer, while the version itself
    /// goes on to its event.
    fn to_stored(&self) -> Stored {
        Stored {
            record: self.record.record().clone(),
            entries: self.entries.clone(),
        }
    }
}

/// The size a received version counts for against the quotas: its JSON,
/// as served and stored.
pub(crate) fn received_bytes(record: &Record) -> u64 {
    serde_json::to_vec(record).map_or(u64::MAX, |json| json.len() as u64)
}

/// The store's latest `version.received_at`, from the rows of
/// [`last_received_at_sql`](crate::store::last_received_at_sql).
pub(super) fn last_received_at(rows: &[Row]) -> Result<Option<RecordDate>, JobFailure> {
    let ticks = match rows.first() {
        Some(row) => row.optional_integer(0)?,
        None => None,
    };
    Ok(ticks.and_then(|ticks| RecordDate::from_unix_ticks(ticks).ok()))
}

/// A record's latest version's hash, from the rows of
/// [`latest_hash_sql`](crate::store::latest_hash_sql).
pub(super) fn latest_hash(rows: &[Row]) -> Result<Option<VersionHash>, JobFailure> {
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let hash = row
        .text(0)?
        .parse()
        .map_err(|_| JobFailure::Data("column 0 of a row is not a version hash".into()))?;
    Ok(Some(hash))
}
