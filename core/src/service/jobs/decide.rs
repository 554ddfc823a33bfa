//! Deciding a job's record writes, one after another: each write's
//! [`Write`] machine asks for what it needs; this answers from the job's own
//! writes when they decide it, else asks the host for the rows, all of a
//! step's needs at once.
//!
//! Through a memo ([`MemoAt`]) a version is read and parsed once: an exact
//! version is answered from it when it remembers it (a stored version never
//! changes), and a record's latest version when it remembers the version
//! the record's row names; a version read is then remembered. While
//! preparing, a record's latest is first taken from the memo's guess
//! ([`MemoAt::latest`]), without a read: the commit checks it as it checks
//! every read, and [`Deciding::guessed`] tells the job that an answer
//! given without the writer must be decided again without guessing.

use std::mem;
use std::sync::Arc;

use crate::model::{Record, RecordDate};
use crate::query::IndexEntry;
use crate::service::jobs::memo::{MemoAt, Remembered};
use crate::service::store::{Row, RowExt, version_row};
use crate::store::{
    NeedRow, NeedRows, Statement, last_received_at_sql, latest_hash_sql, need_sql, read_links,
    read_record, read_version, version_sql,
};
use crate::write::{Commit, Need, RecordKey, Step, Supplied, Write, WriteContext, WriteError};

use super::pending::{Answered, Pending, last_received_at, latest_hash};
use super::{JobFailure, RecordWrite, Stored};

/// Record writes being decided, in order; the first refusal ends them.
#[derive(Debug)]
pub(super) struct Deciding {
    writes: Vec<RecordWrite>,
    /// The index of the write being decided.
    next: usize,
    current: Option<Current>,
    /// When the versions are received (the scheduler's time). A prepared
    /// job's are stamped again at its commit: then the store's latest is
    /// not read to decide, since it would decide nothing.
    at: RecordDate,
    restamped: bool,
    /// Whether a record's latest may be the memo's guess.
    guess_latest: bool,
    /// The records whose latest was.
    guessed: Vec<RecordKey>,
    /// The store's latest `received_at`, read for the current write.
    stored_last: Option<Option<RecordDate>>,
    /// The answer of the job's first write.
    first: Option<Answered>,
    /// What each statement asked is for, in the order asked.
    awaiting: Vec<Awaiting>,
}

/// The write being decided, and the needs of its last step.
#[derive(Debug)]
struct Current {
    write: Box<Write>,
    needs: Vec<Need>,
    answers: Vec<Option<Supplied>>,
}

/// What a statement asked of the host is for.
#[derive(Debug)]
enum Awaiting {
    /// The store's latest `received_at`.
    LastReceivedAt,
    /// The current write's need in slot `slot`.
    Need { slot: usize, read: NeedRead },
    /// The stored version a replay is answered with.
    Replay(Box<Record>),
}

/// How a need's rows are read.
#[derive(Debug, Clone, Copy)]
enum NeedRead {
    /// The rows of its own statement.
    Rows(NeedRows),
    /// The hash of the record's latest version, looked up in the memo.
    LatestHash,
    /// A version by hash, to remember.
    Version,
}

/// How deciding ended a step.
pub(super) enum Decision {
    /// Statements were asked: the host answers them.
    Asked,
    /// Every write was decided; the first's answer.
    Decided(Answered),
    /// A write was refused: the job stores nothing.
    Refused(WriteError),
}

impl Deciding {
    /// Decides `writes` at `at`; `restamped` when a prepared job's versions
    /// are stamped again at its commit, and then `guess_latest` when a
    /// record's latest may be the memo's guess.
    pub(super) fn new(
        writes: Vec<RecordWrite>,
        at: RecordDate,
        restamped: bool,
        guess_latest: bool,
    ) -> Self {
        Deciding {
            writes,
            next: 0,
            current: None,
            at,
            restamped,
            guess_latest: restamped && guess_latest,
            guessed: Vec::new(),
            stored_last: None,
            first: None,
            awaiting: Vec::new(),
        }
    }

    /// Whether a record's latest was the memo's guess: the commit checks
    /// it, but an answer given without the writer (a refusal, a replay)
    /// must not rest on it.
    pub(super) fn guessed(&self) -> &[RecordKey] {
        &self.guessed
    }

    /// Decides until the host must read something (pushed on `asked`), or
    /// every write is decided, or one is refused.
    pub(super) fn step(
        &mut self,
        pending: &mut Pending,
        memo: Option<MemoAt<'_>>,
        asked: &mut Vec<Statement>,
    ) -> Result<Decision, JobFailure> {
        loop {
            if !self.awaiting.is_empty() {
                return Ok(Decision::Asked);
            }
            let Some(current) = &mut self.current else {
                let Some(write) = self.writes.get(self.next) else {
                    let first = self.first.take();
                    return first
                        .map(Decision::Decided)
                        .ok_or_else(|| JobFailure::Data("a job without writes".into()));
                };
                if !self.restamped && self.stored_last.is_none() {
                    asked.push(last_received_at_sql(pending.user.id));
                    self.awaiting.push(Awaiting::LastReceivedAt);
                    continue;
                }
                let context = WriteContext {
                    user: pending.user.entity.clone(),
                    access: write.access.clone(),
                    now: write.requested_at,
                    received_at: self.at,
                    last_received_at: self.stored_last.flatten().max(pending.last_received_at),
                    fresh_id: write.fresh_id,
                };
                let mut machine = Write::new(write.request.clone(), context);
                if let Some(memo) = memo {
                    machine = machine.remembering(memo.types().clone());
                }
                self.current = Some(Current {
                    write: Box::new(machine),
                    needs: Vec::new(),
                    answers: Vec::new(),
                });
                continue;
            };
            if !current.needs.is_empty() {
                let answers = mem::take(&mut current.answers)
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| JobFailure::Data("a need left unanswered".into()))?;
                current.needs.clear();
                current.write.supply(answers);
            }
            match current.write.step() {
                Step::Fetch(needs) => {
                    let user_id = pending.user.id;
                    let now = self.writes[self.next].requested_at;
                    let mut answers = Vec::with_capacity(needs.len());
                    for (slot, need) in needs.iter().enumerate() {
                        let answer = match pending.overlay(need) {
                            Some(answer) => Some(answer),
                            None => match source(user_id, need, now, memo, self.guess_latest) {
                                Source::Memo(answer) => Some(answer),
                                Source::Guess(key, found) => {
                                    self.guessed.push(key);
                                    let answer = Supplied::Record(Some(found.record));
                                    let statement = || need_sql(user_id, need, now);
                                    Some(pending.read(need, answer, Some(found.entries), statement))
                                }
                                Source::Store(statement, read) => {
                                    asked.push(statement);
                                    self.awaiting.push(Awaiting::Need { slot, read });
                                    None
                                }
                            },
                        };
                        answers.push(answer);
                    }
                    current.needs = needs;
                    current.answers = answers;
                }
                Step::Done(Err(error)) => return Ok(Decision::Refused(error)),
                Step::Done(Ok(Commit::Replay(record))) => {
                    // Nothing to store: the answer is the stored version, with its links.
                    let (author, id, hash) =
                        (&record.author.entity, &record.id, &record.version.hash);
                    asked.push(version_sql(pending.user.id, author, id, hash));
                    self.awaiting.push(Awaiting::Replay(record));
                }
                Step::Done(Ok(commit)) => {
                    pending.add(&self.writes[self.next], commit);
                    self.first.get_or_insert(Answered::Stored);
                    self.next_write();
                }
            }
        }
    }

    /// Takes the rows of the statements asked, one list per statement in
    /// the order asked. A need may ask again (a version the memo does not
    /// hold): pushed on `asked`.
    pub(super) fn supply(
        &mut self,
        pending: &mut Pending,
        memo: Option<MemoAt<'_>>,
        rows: Vec<Vec<Row>>,
        asked: &mut Vec<Statement>,
    ) -> Result<(), JobFailure> {
        let awaiting = mem::take(&mut self.awaiting);
        if awaiting.len() != rows.len() {
            return Err(JobFailure::Data("not one answer per statement".into()));
        }
        for (awaiting, rows) in awaiting.into_iter().zip(rows) {
            match awaiting {
                Awaiting::LastReceivedAt => self.stored_last = Some(last_received_at(&rows)?),
                Awaiting::Replay(record) => {
                    let (record, entries) = match rows.first() {
                        Some(row) => {
                            let (record, links) = version_row(row)?;
                            read_version(&record, &links)?
                        }
                        None => (*record, Vec::new()),
                    };
                    let stored = Stored { record, entries };
                    self.first.get_or_insert(Answered::Replay(Box::new(stored)));
                    self.next_write();
                }
                Awaiting::Need { slot, read } => {
                    self.answer(pending, memo, slot, read, &rows, asked)?;
                }
            }
        }
        Ok(())
    }

    /// Answers the current write's need in `slot` from `rows`.
    fn answer(
        &mut self,
        pending: &mut Pending,
        memo: Option<MemoAt<'_>>,
        slot: usize,
        read: NeedRead,
        rows: &[Row],
        asked: &mut Vec<Statement>,
    ) -> Result<(), JobFailure> {
        let user_id = pending.user.id;
        let now = self.writes.get(self.next).map(|write| write.requested_at);
        let current = self.current.as_mut();
        let Some((current, now)) = current.zip(now) else {
            return Err(JobFailure::Data("rows for no write".into()));
        };
        let Some(need) = current.needs.get(slot) else {
            return Err(JobFailure::Data("rows for no need".into()));
        };
        let (answer, entries) = match read {
            NeedRead::Rows(shape) => need_answer(shape, rows)?,
            NeedRead::LatestHash => match (latest_hash(rows)?, need, memo) {
                (None, _, _) => (Supplied::Record(None), None),
                (Some(hash), Need::Latest(key), Some(memo)) => {
                    memo.observe_latest(user_id, key, hash);
                    match memo.version(user_id, key, &hash) {
                        Some(found) => (Supplied::Record(Some(found.record)), Some(found.entries)),
                        None => {
                            asked.push(version_sql(user_id, &key.entity, &key.record_id, &hash));
                            let read = NeedRead::Version;
                            self.awaiting.push(Awaiting::Need { slot, read });
                            return Ok(());
                        }
                    }
                }
                _ => return Err(JobFailure::Data("a latest hash for another need".into())),
            },
            NeedRead::Version => match rows.first() {
                None => (Supplied::Record(None), None),
                Some(row) => {
                    let (text, links) = (row.text(0)?, row.text(1)?);
                    let found = Remembered {
                        record: Arc::new(read_record(text)?),
                        entries: read_links(links)?.into(),
                    };
                    if let Some(memo) = memo {
                        memo.remember_version(user_id, &found, text.len() + links.len());
                    }
                    (Supplied::Record(Some(found.record)), Some(found.entries))
                }
            },
        };
        let answer = pending.read(need, answer, entries, || need_sql(user_id, need, now));
        current.answers[slot] = Some(answer);
        Ok(())
    }

    /// Moves on to the job's next write.
    fn next_write(&mut self) {
        self.current = None;
        self.stored_last = None;
        self.next += 1;
    }
}

/// Where a need's answer comes from, when the job's own writes do not
/// decide it.
enum Source {
    /// The memo remembers the exact version.
    Memo(Supplied),
    /// The memo's guess at a record's latest version, to be checked.
    Guess(RecordKey, Remembered),
    /// The store: a statement, and how its rows are read.
    Store(Statement, NeedRead),
}

fn source(
    user_id: i64,
    need: &Need,
    now: RecordDate,
    memo: Option<MemoAt<'_>>,
    guess_latest: bool,
) -> Source {
    match (need, memo) {
        (Need::Latest(key), Some(memo)) => match memo.latest(user_id, key) {
            Some(found) if guess_latest => Source::Guess(key.clone(), found),
            _ => Source::Store(
                latest_hash_sql(user_id, &key.entity, &key.record_id),
                NeedRead::LatestHash,
            ),
        },
        (Need::Version { record, hash }, Some(memo)) => match memo.version(user_id, record, hash) {
            Some(found) => Source::Memo(Supplied::Record(Some(found.record))),
            None => Source::Store(
                version_sql(user_id, &record.entity, &record.record_id, hash),
                NeedRead::Version,
            ),
        },
        _ => {
            let (statement, shape) = need_sql(user_id, need, now);
            Source::Store(statement, NeedRead::Rows(shape))
        }
    }
}

/// A need's answer, with the index entries of the version it holds, for a
/// record's latest.
pub(super) type NeedAnswer = (Supplied, Option<Arc<[IndexEntry]>>);

/// The answer a need's rows give.
pub(super) fn need_answer(shape: NeedRows, rows: &[Row]) -> Result<NeedAnswer, JobFailure> {
    let rows = rows
        .iter()
        .map(|row| {
            Ok(match shape {
                NeedRows::Record | NeedRows::Records => {
                    let (record, links) = version_row(row)?;
                    NeedRow::Version { record, links }
                }
                NeedRows::Known => NeedRow::Integers(vec![row.integer(0)?]),
                NeedRows::Blob => NeedRow::Integers(vec![row.integer(0)?, row.integer(1)?]),
            })
        })
        .collect::<Result<Vec<_>, JobFailure>>()?;
    let entries = match (shape, rows.first()) {
        (NeedRows::Record, Some(NeedRow::Version { links, .. })) => Some(read_links(links)?.into()),
        _ => None,
    };
    Ok((shape.answer(rows)?, entries))
}
