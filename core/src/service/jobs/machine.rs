//! [`WriteJob`]: a job as a machine the host drives, step by step.
//!
//! The host calls [`WriteJob::step`] and does what it says: runs the
//! statements of a [`JobStep::Read`] and hands their rows to
//! [`WriteJob::supply`]; runs those of a [`JobStep::Commit`] atomically
//! and says what became of them ([`WriteJob::committed`], or
//! [`WriteJob::conflicted`] when a constraint refused them: a concurrent
//! write won, and the job runs again from the start, at most
//! [`WRITE_ATTEMPTS`] times; a replay then finds what the winner stored,
//! and a stale parent becomes a version conflict, PROTOCOL.md §5). The
//! job ends in [`JobStep::Done`] or [`JobStep::Failed`]. Nothing in it
//! waits: the host may answer a step at once (SQLite) or after an await
//! (D1).
//!
//! A job runs in one of two ways:
//! - **whole** ([`WriteJob::start`]): every read and the commit in one
//!   transaction, at the scheduler's time (the worker's user object, the
//!   native writer for a registration or statements);
//! - **prepared** ([`WriteJob::prepare`]): the record writes are decided
//!   away from the writer, through the memo and on a read snapshot if they
//!   must read, until [`JobStep::Decided`] (or [`JobStep::Done`], for a
//!   refusal or a replay that stores nothing); the writer then runs
//!   [`Decided::reads`] in its transaction and [begins](Decided::begin) the
//!   job with their rows at its time: it checks that every read still
//!   holds, stamps `received_at` and commits. If a read changed, or the
//!   commit conflicts, the job runs whole there instead.

use std::mem;

use crate::auth::apps::server_public_key;
use crate::auth::register::RegistrationPlan;
use crate::auth::register::registration_access;
use crate::model::RecordDate;
use crate::service::jobs::memo::MemoAt;
use crate::service::store::{Row, RowExt, version_row};
use crate::store::read_version;
use crate::store::{Statement, WRITE_ATTEMPTS, WriteOrigin, app_credentials_sql, app_key_sql};
use crate::write::RecordKey;

use super::decide::{Deciding, Decision};
use super::pending::{Answered, Pending};
use super::{
    Done, Effects, Job, JobFailure, JobOutcome, RecordWrite, Refused, Registered, RegistrationJob,
    Written,
};

/// A job being run: the host drives it with [`step`](WriteJob::step).
#[derive(Debug)]
pub struct WriteJob<'m> {
    job: Job,
    /// When the job's versions are received: the scheduler's time (for a
    /// prepared job, the request's, until [`Decided::begin`]).
    at: RecordDate,
    /// Versions and types remembered between jobs, while deciding on a
    /// snapshot.
    memo: Option<MemoAt<'m>>,
    /// Whether the job is decided on a snapshot, to be committed later.
    preparing: bool,
    /// Whether a record's latest may be the memo's guess
    /// ([`MemoAt::latest`]): until an answer given without the writer
    /// rests on one.
    guess_latest: bool,
    /// The records, by store, whose latest version moved after the job
    /// read it: for [`Effects::moved_latest`].
    moved: Vec<(i64, RecordKey)>,
    /// How many attempts started in this transaction.
    attempts: usize,
    state: State,
    /// The statements of the last [`JobStep::Read`] or [`JobStep::Commit`].
    asked: Vec<Statement>,
}

/// A job decided on a read snapshot ([`JobStep::Decided`]), for the
/// writer to [begin](Decided::begin). It holds no borrow.
#[derive(Debug)]
pub struct Decided {
    job: WriteJob<'static>,
    /// What the writer reads before it begins the job: each read the job
    /// was decided on, then the store's latest `received_at`.
    reads: Vec<Statement>,
}

impl Decided {
    /// The row id of the user whose store the job writes.
    pub fn user_id(&self) -> Option<i64> {
        self.job.job.user_id()
    }

    /// The reads to run in the writer's transaction, in order, before
    /// [`begin`](Decided::begin): whether what the job was decided on
    /// still holds. None for a job the writer runs whole.
    pub fn reads(&self) -> &[Statement] {
        &self.reads
    }

    /// Continues the job in the writer's transaction at `at`, the
    /// writer's time, with the rows of its [`reads`](Decided::reads), one
    /// list per statement: its versions are received then (or just after
    /// the store's latest). If a read changed, the job runs whole there.
    pub fn begin(self, at: RecordDate, rows: Vec<Vec<Row>>) -> WriteJob<'static> {
        let WriteJob { job, state, .. } = self.job;
        match state {
            State::Decided { pending, answered } => {
                let rechecking = State::Rechecking { pending, answered };
                let mut job = WriteJob::in_transaction(job, at, rechecking, self.reads);
                job.supply(rows);
                job
            }
            State::Whole => WriteJob::start(job, at),
            _ => WriteJob::in_transaction(job, at, State::Over, Vec::new()),
        }
    }

    /// The job as it was asked.
    pub fn job(&self) -> &Job {
        &self.job.job
    }

    /// The job as it was asked, to run whole.
    pub fn into_job(self) -> Job {
        self.job.job
    }
}

/// What the host does next for a [`WriteJob`].
#[derive(Debug)]
pub enum JobStep<'a> {
    /// Run these reads, in order, in the job's transaction (or snapshot),
    /// and hand their rows to [`WriteJob::supply`], one list per statement.
    Read(&'a [Statement]),
    /// Run these statements atomically: all or none. Then call
    /// [`WriteJob::committed`] with the rows of the last one, or
    /// [`WriteJob::conflicted`] if a constraint refused one (SQLite's
    /// `SQLITE_CONSTRAINT`, see
    /// [`CommitError::classify`](crate::service::store::CommitError::classify)).
    Commit(&'a [Statement]),
    /// A prepared job is decided: hand it to the writer, which calls
    /// [`Decided::begin`] in its transaction.
    Decided,
    /// The job is over: its answer, and what the host applies once the
    /// commit is durable.
    Done(Box<Finished>),
    /// The job could not run. Nothing of it was committed by this
    /// machine's last [`JobStep::Commit`] if it asked none since.
    Failed(JobFailure),
}

/// A job's end: its answer, and its effects.
#[derive(Debug)]
pub struct Finished {
    /// The answer to the request: stored, or refused.
    pub outcome: JobOutcome,
    /// What the host applies once the commit is durable.
    pub effects: Effects,
}

/// A [`JobStep`] without its borrow of the statements asked.
enum Next {
    Read,
    Commit,
    Decided,
    Done(Box<Finished>),
    Failed(JobFailure),
}

/// Where a job stands between steps.
#[derive(Debug, Default)]
enum State {
    /// About to start an attempt.
    Start,
    /// A registration's app key was asked.
    AppKey(Box<RegistrationJob>),
    /// Record writes are being decided.
    Deciding {
        deciding: Box<Deciding>,
        pending: Pending,
        then: Then,
    },
    /// A renewal's Credentials record was asked.
    Credentials {
        pending: Pending,
        answered: Answered,
    },
    /// Decided on a snapshot: waiting for [`Decided::begin`].
    Decided {
        pending: Pending,
        answered: Answered,
    },
    /// Decided on a snapshot, and the writer's checks were asked.
    Rechecking {
        pending: Pending,
        answered: Answered,
    },
    /// A job the writer runs whole: waiting for [`Decided::begin`].
    Whole,
    /// The commit was asked.
    Committing {
        pending: Pending,
        answered: Answered,
        /// Whether the commit may queue notifications.
        notifications: bool,
        registered: Option<String>,
    },
    /// Plain statements' commit was asked.
    CommittingStatements,
    /// Over: the answer and effects, for the next step.
    Finished(Box<Finished>),
    /// Failed: why, for the next step.
    Failed(JobFailure),
    /// Over, and said so.
    #[default]
    Over,
}

/// What follows deciding a job's record writes.
#[derive(Debug)]
enum Then {
    /// The commit (a prepared job: [`JobStep::Decided`] first).
    Commit,
    /// A new app's registration: the commit, answered with this key.
    Registered(String),
    /// A renewal: the read of the app's Credentials record, then the commit.
    Renewal,
}

impl<'m> WriteJob<'m> {
    /// Starts `job`, to run whole in one transaction at `at`, the
    /// scheduler's time.
    pub fn start(job: Job, at: RecordDate) -> WriteJob<'static> {
        WriteJob::in_transaction(job, at, State::Start, Vec::new())
    }

    /// A job in the transaction that commits it, at `at`, in `state`, with
    /// the statements `asked` of its next step.
    fn in_transaction(
        job: Job,
        at: RecordDate,
        state: State,
        asked: Vec<Statement>,
    ) -> WriteJob<'static> {
        WriteJob {
            job,
            at,
            memo: None,
            preparing: false,
            guess_latest: false,
            moved: Vec::new(),
            attempts: 0,
            state,
            asked,
        }
    }

    /// Starts `job` to be decided on a read snapshot, reading versions and
    /// compiling types through `memo` when the host keeps one. Record
    /// writes are decided there ([`JobStep::Decided`]); the other jobs are
    /// decided at once, to run whole in the writer.
    pub fn prepare(job: Job, memo: Option<MemoAt<'m>>) -> Self {
        let at = match &job {
            Job::Writes { writes, .. } => writes.first().map(|write| write.requested_at),
            _ => None,
        };
        WriteJob {
            at: at.unwrap_or(RecordDate::EPOCH),
            memo,
            preparing: true,
            guess_latest: true,
            moved: Vec::new(),
            attempts: 0,
            state: match job {
                Job::Writes { .. } => State::Start,
                _ => State::Whole,
            },
            job,
            asked: Vec::new(),
        }
    }

    /// The row id of the user whose store the job writes.
    pub fn user_id(&self) -> Option<i64> {
        self.job.user_id()
    }

    /// The job, decided ([`JobStep::Decided`]), without its borrow of
    /// the memo: it may cross to the writer's thread.
    pub fn decided(self) -> Decided {
        let reads = match &self.state {
            State::Decided { pending, .. } => pending.recheck_statements(),
            _ => Vec::new(),
        };
        let job = WriteJob {
            job: self.job,
            at: self.at,
            memo: None,
            preparing: self.preparing,
            guess_latest: false,
            moved: self.moved,
            attempts: self.attempts,
            state: self.state,
            asked: self.asked,
        };
        Decided { job, reads }
    }

    /// The job as it was asked, to run whole.
    pub fn into_job(self) -> Job {
        self.job
    }

    /// What the host does next.
    pub fn step(&mut self) -> JobStep<'_> {
        match self.advance() {
            Next::Read => JobStep::Read(&self.asked),
            Next::Commit => JobStep::Commit(&self.asked),
            Next::Decided => JobStep::Decided,
            Next::Done(mut finished) => {
                finished.effects.moved_latest.append(&mut self.moved);
                JobStep::Done(finished)
            }
            Next::Failed(failure) => JobStep::Failed(failure),
        }
    }

    /// Goes on until the host has something to do.
    fn advance(&mut self) -> Next {
        loop {
            match mem::take(&mut self.state) {
                State::Start => {
                    if let Some(step) = self.start_attempt() {
                        return step;
                    }
                }
                State::Deciding {
                    mut deciding,
                    mut pending,
                    then,
                } => match deciding.step(&mut pending, self.memo, &mut self.asked) {
                    Err(failure) => return Next::Failed(failure),
                    Ok(Decision::Asked) => {
                        self.state = State::Deciding {
                            deciding,
                            pending,
                            then,
                        };
                        return Next::Read;
                    }
                    Ok(Decision::Refused(_)) if !deciding.guessed().is_empty() => {
                        self.decide_again(pending.user.id, deciding.guessed());
                    }
                    Ok(Decision::Refused(error)) => {
                        let refused = match then {
                            Then::Commit => Refused::Write(error),
                            _ => Refused::Registration(error.into()),
                        };
                        return Next::Done(Box::new(Finished {
                            outcome: Err(refused),
                            effects: Effects::none(),
                        }));
                    }
                    Ok(Decision::Decided(answered)) => match then {
                        Then::Commit if self.preparing => {
                            let replay = matches!(answered, Answered::Replay(_));
                            if replay && pending.is_empty() && !deciding.guessed().is_empty() {
                                self.decide_again(pending.user.id, deciding.guessed());
                                continue;
                            }
                            if let (Answered::Replay(stored), true) =
                                (&answered, pending.is_empty())
                            {
                                // A replay stores nothing: its version is stored for good.
                                let written = Written {
                                    answer: (**stored).clone(),
                                };
                                return Next::Done(Box::new(Finished {
                                    outcome: Ok(Done::Written(written)),
                                    effects: Effects::none(),
                                }));
                            }
                            self.state = State::Decided { pending, answered };
                            return Next::Decided;
                        }
                        Then::Commit => self.state = self.commit(pending, answered, None),
                        Then::Registered(key) => {
                            self.state = self.commit(pending, answered, Some(key));
                        }
                        Then::Renewal => {
                            let user = &pending.user;
                            let app = match &self.job {
                                Job::Registration { registration, .. } => {
                                    registration.registration.app_id
                                }
                                _ => {
                                    let why = "a renewal of no registration".into();
                                    return Next::Failed(JobFailure::Data(why));
                                }
                            };
                            self.asked = vec![app_credentials_sql(user.id, &user.entity, &app)];
                            self.state = State::Credentials { pending, answered };
                            return Next::Read;
                        }
                    },
                },
                state @ State::Committing { .. } => {
                    self.state = state;
                    return Next::Commit;
                }
                State::Decided { pending, answered } => {
                    self.state = State::Decided { pending, answered };
                    return Next::Decided;
                }
                State::Whole => {
                    self.state = State::Whole;
                    return Next::Decided;
                }
                state @ (State::AppKey(_)
                | State::Credentials { .. }
                | State::Rechecking { .. }) => {
                    self.state = state;
                    return Next::Read;
                }
                State::CommittingStatements => {
                    self.state = State::CommittingStatements;
                    return Next::Commit;
                }
                State::Finished(finished) => return Next::Done(finished),
                State::Failed(failure) => return Next::Failed(failure),
                State::Over => {
                    return Next::Failed(JobFailure::Data("a step after the job ended".into()));
                }
            }
        }
    }

    /// Hands in the rows of the last [`JobStep::Read`], one list per
    /// statement, in order.
    pub fn supply(&mut self, rows: Vec<Vec<Row>>) {
        self.asked.clear();
        let next = match mem::take(&mut self.state) {
            State::Deciding {
                mut deciding,
                mut pending,
                then,
            } => deciding
                .supply(&mut pending, self.memo, rows, &mut self.asked)
                .map(|()| State::Deciding {
                    deciding,
                    pending,
                    then,
                }),
            State::AppKey(registration) => self.plan_registration(*registration, &rows),
            State::Credentials { pending, answered } => {
                renewal_key(&rows).map(|key| self.commit(pending, answered, Some(key)))
            }
            State::Rechecking {
                mut pending,
                answered,
            } => pending.reads_hold(&rows).map(|recheck| match recheck.hold {
                true => {
                    pending.restamp(recheck.last, self.at);
                    self.commit(pending, answered, None)
                }
                // A read changed since the snapshot: decide the job again
                // on what the store holds now; a guess at a record's
                // latest that was wrong is forgotten.
                false => {
                    let store = pending.user.id;
                    let moved = recheck.moved.into_iter().map(|key| (store, key));
                    self.moved.extend(moved);
                    State::Start
                }
            }),
            _ => Err(JobFailure::Data("rows for no read".into())),
        };
        self.state = next.unwrap_or_else(State::Failed);
    }

    /// Says that the last [`JobStep::Commit`] stored everything, with the
    /// rows of its last statement.
    pub fn committed(&mut self, rows: Vec<Row>) {
        self.asked.clear();
        self.state = match mem::take(&mut self.state) {
            State::CommittingStatements => {
                let effects = match &self.job {
                    Job::Reschedule { user, .. } => Effects {
                        store: Some(*user),
                        rescheduled: true,
                        ..Effects::none()
                    },
                    _ => Effects {
                        changes_standing: true,
                        ..Effects::none()
                    },
                };
                State::Finished(Box::new(Finished {
                    outcome: Ok(Done::Ran),
                    effects,
                }))
            }
            State::Committing {
                pending,
                answered,
                notifications,
                registered,
            } => {
                let registration = registered.is_some();
                match pending.committed(answered, notifications, &rows, registration) {
                    Ok((written, effects)) => {
                        let done = match registered {
                            Some(server_public_key) => Done::Registered(Registered {
                                written,
                                server_public_key,
                            }),
                            None => Done::Written(written),
                        };
                        State::Finished(Box::new(Finished {
                            outcome: Ok(done),
                            effects,
                        }))
                    }
                    Err(failure) => State::Failed(failure),
                }
            }
            _ => State::Failed(JobFailure::Data("a commit for no commit".into())),
        };
    }

    /// Says that a constraint refused the last [`JobStep::Commit`]: nothing
    /// of it was stored. The job runs again from the start.
    pub fn conflicted(&mut self) {
        self.asked.clear();
        self.state = match mem::take(&mut self.state) {
            State::Committing { .. } | State::CommittingStatements => State::Start,
            _ => State::Failed(JobFailure::Data("a conflict for no commit".into())),
        };
    }

    /// Decides the job again from the start on what the store holds, not
    /// counted as an attempt: a refusal or a replay decided on the memo's
    /// guesses at the latest versions of `guessed` (records of store
    /// `store`) must not be answered without the writer. The guesses are
    /// forgotten, so that the reads that replace them are remembered.
    fn decide_again(&mut self, store: i64, guessed: &[RecordKey]) {
        if let Some(memo) = self.memo {
            let guessed: Vec<_> = guessed.iter().map(|key| (store, key.clone())).collect();
            memo.forget_latest(&guessed);
        }
        self.guess_latest = false;
        self.attempts -= 1;
        self.state = State::Start;
    }

    /// Starts an attempt: what to ask first, or `None` to go on stepping.
    fn start_attempt(&mut self) -> Option<Next> {
        self.attempts += 1;
        if self.attempts > WRITE_ATTEMPTS {
            return Some(Next::Failed(JobFailure::Contended));
        }
        match &self.job {
            Job::Statements(statements) | Job::Reschedule { statements, .. } => {
                self.asked = statements.clone();
                self.state = State::CommittingStatements;
                Some(Next::Commit)
            }
            Job::Writes { user, writes } => {
                self.state = State::Deciding {
                    deciding: Box::new(Deciding::new(
                        writes.clone(),
                        self.at,
                        self.preparing,
                        self.guess_latest,
                    )),
                    pending: Pending::new(user.clone()),
                    then: Then::Commit,
                };
                None
            }
            Job::Registration { user, registration } => {
                self.asked = vec![app_key_sql(user.id, &registration.registration.app_id)];
                self.state = State::AppKey(registration.clone());
                Some(Next::Read)
            }
        }
    }

    /// Decides a registration on the key its app id is registered with
    /// (the rows of [`app_key_sql`]), as [`Registration::plan`] says.
    ///
    /// [`Registration::plan`]: crate::auth::register::Registration::plan
    fn plan_registration(
        &self,
        job: RegistrationJob,
        rows: &[Vec<Row>],
    ) -> Result<State, JobFailure> {
        let Job::Registration { user, .. } = &self.job else {
            return Err(JobFailure::Data(
                "a registration's key for another job".into(),
            ));
        };
        let registered = match rows.first().and_then(|rows| rows.first()) {
            Some(row) => Some(row.text(0)?.to_owned()),
            None => None,
        };
        let registration = &job.registration;
        let plan = registration.plan(
            &user.entity,
            user.id,
            registered.as_deref(),
            job.credentials_id,
            &job.server_keys,
        );
        // Both records name their ids: the App record the app's, the
        // Credentials record the job's.
        let write = |request, fresh_id| RecordWrite {
            request,
            access: registration_access(&user.entity),
            origin: WriteOrigin::default(),
            fresh_id,
            requested_at: job.requested_at,
        };
        let mut pending = Pending::new(user.clone());
        let (writes, then) = match plan {
            Err(error) => {
                let refused = Err(Refused::Registration(error));
                return Ok(State::Finished(Box::new(Finished {
                    outcome: refused,
                    effects: Effects::none(),
                })));
            }
            Ok(RegistrationPlan::New(new)) => {
                let new = *new;
                pending.extra.push(new.app_row);
                let writes = vec![
                    write(new.app, registration.app_id),
                    write(new.credentials, job.credentials_id),
                ];
                (writes, Then::Registered(new.server_public_key))
            }
            Ok(RegistrationPlan::Renewal { app }) => {
                (vec![write(*app, registration.app_id)], Then::Renewal)
            }
        };
        Ok(State::Deciding {
            deciding: Box::new(Deciding::new(writes, self.at, false, false)),
            pending,
            then,
        })
    }

    /// The state that commits `pending`, its statements asked; or, for a
    /// replay that stores nothing, its answer.
    fn commit(
        &mut self,
        pending: Pending,
        answered: Answered,
        registered: Option<String>,
    ) -> State {
        if let (true, Answered::Replay(stored)) = (pending.is_empty(), &answered) {
            let written = Written {
                answer: (**stored).clone(),
            };
            return State::Finished(Box::new(Finished {
                outcome: Ok(Done::Written(written)),
                effects: Effects::none(),
            }));
        }
        let (statements, notifications) = pending.commit_plan();
        self.asked = statements;
        State::Committing {
            pending,
            answered,
            notifications,
            registered,
        }
    }
}

/// The server's key for a renewed app, from the rows of its Credentials
/// record ([`app_credentials_sql`]).
fn renewal_key(rows: &[Vec<Row>]) -> Result<String, JobFailure> {
    let key = match rows.first().and_then(|rows| rows.first()) {
        Some(row) => {
            let (record, links) = version_row(row)?;
            server_public_key(&read_version(&record, &links)?.0).map(str::to_owned)
        }
        None => None,
    };
    key.ok_or_else(|| JobFailure::Data("a registered app has no Credentials record".into()))
}
