//! One open event stream as a machine its host drives (PROTOCOL.md §8,
//! §13): what it sends and when, and when it ends. It owns the catch-up
//! before the live events, the batching of live events into chunks, the
//! heartbeat in silences, the bearer token's expiry, the bound on the
//! commits waiting for it, and the end of a stream whose standing changed.
//!
//! It holds no socket, reads no clock and sets no timer: the host hands it
//! each commit ([`EventStream::handle_commit`]) and the server's shutdown
//! ([`EventStream::handle_shutdown`]), and asks it what to do at a given
//! time ([`EventStream::poll_output`]): send a [`Chunk`], end the stream,
//! or wait until a time unless an input comes first.
//!
//! # How a host drives a stream
//!
//! 1. Core's service makes the stream with [`EventStream::new`] and hands
//!    it to the host's `subscribe`, before the catch-up is read; from then
//!    on the host hands it every commit of the user
//!    ([`EventStream::handle_commit`]), which it keeps until the stream
//!    starts. (A host may keep the commits in a channel of its own
//!    meanwhile, bounded at [`SUBSCRIBER_QUEUE_LEN`], and hand them over
//!    when it polls; it reports commits the channel lost with
//!    [`EventStream::handle_commits_lost`].)
//! 2. Once the catch-up is read, the host calls [`EventStream::start`] with
//!    it, and opens the response body.
//! 3. Whenever the body can take more, the host calls
//!    [`EventStream::poll_output`] with its clock's time and does what it
//!    answers: [`Output::Send`] writes a chunk and polls again at once;
//!    [`Output::Wait`] waits for the next commit, the shutdown, or the time
//!    given, whichever comes first, then polls again; [`Output::End`]
//!    closes the body.
//!
//! A host that does not poll (its client does not read, so its socket is
//! full) lets commits pile up; past [`SUBSCRIBER_QUEUE_LEN`] of them the
//! stream ends ([`EndReason::Lagged`]) and the client resumes with
//! `Last-Event-Id`.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{
    HEARTBEAT_EVENT, LIVE_FLUSH_INTERVAL_MS, LiveCommit, LiveSubscriber, SUBSCRIBER_QUEUE_LEN,
    StandingChanged, Subscriber,
};
use crate::model::RecordDate;

/// The most bytes of frames one chunk gathers before it leaves, without
/// waiting out the flush interval: a chunk is closed by the frame that
/// brings it to this size or past it.
pub const MAX_CHUNK_BYTES: usize = 64 * 1024;

/// The flush interval as a signed count, for date arithmetic.
const FLUSH_INTERVAL_MS: i64 = LIVE_FLUSH_INTERVAL_MS as i64;

/// What the catch-up read of the event log found: the frames to send
/// before any live event, oldest first, and the last sequence the read
/// covered (a live version at or before it is not sent again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// The `record` frames of the catch-up, each from
    /// [`record_event`](super::record_event).
    pub frames: Vec<String>,
    /// The last sequence the catch-up read, whether or not it was sent.
    pub last_seq: u64,
}

/// The frames of one write to a stream. A live frame stays shared with
/// every other stream that sends it; a host that can send a frame without
/// copying it takes [`Chunk::into_frames`], any other [`Chunk::to_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    frames: Vec<Arc<str>>,
    len: usize,
    record_events: usize,
}

impl Chunk {
    fn empty() -> Self {
        Self {
            frames: Vec::new(),
            len: 0,
            record_events: 0,
        }
    }

    fn heartbeat() -> Self {
        Self {
            frames: vec![Arc::from(HEARTBEAT_EVENT)],
            len: HEARTBEAT_EVENT.len(),
            record_events: 0,
        }
    }

    fn push_record(&mut self, frame: Arc<str>) {
        self.len += frame.len();
        self.record_events += 1;
        self.frames.push(frame);
    }

    fn is_full(&self) -> bool {
        self.len >= MAX_CHUNK_BYTES
    }

    /// The frames, in the order they are sent.
    pub fn frames(&self) -> &[Arc<str>] {
        &self.frames
    }

    /// The frames, in the order they are sent.
    pub fn into_frames(self) -> Vec<Arc<str>> {
        self.frames
    }

    /// The chunk's bytes: its frames one after the other.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len);
        for frame in &self.frames {
            bytes.extend_from_slice(frame.as_bytes());
        }
        bytes
    }

    /// The length of [`Chunk::to_bytes`].
    pub fn byte_len(&self) -> usize {
        self.len
    }

    /// How many `record` events it holds (a heartbeat holds none).
    pub fn record_events(&self) -> usize {
        self.record_events
    }
}

/// Why a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// More than [`SUBSCRIBER_QUEUE_LEN`] commits waited for it: its client
    /// does not read. The client resumes with `Last-Event-Id`.
    Lagged,
    /// The bearer token that opened it expired
    /// ([`LiveSubscriber::ends_at`]).
    BearerExpired,
    /// A new version of the App Authorization its access comes from
    /// ([`StandingChanged`]); the client's reconnection is authorized
    /// afresh.
    StandingChanged,
    /// The server is shutting down ([`EventStream::handle_shutdown`]).
    Shutdown,
}

/// What a host does next for a stream: the answer of
/// [`EventStream::poll_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Write this chunk to the stream, then poll again.
    Send(Chunk),
    /// Nothing to send before this time (always later than the time
    /// polled): poll again then, or sooner after an input.
    Wait(RecordDate),
    /// Close the stream. Every later poll answers the same.
    End(EndReason),
}

/// One open event stream: its subscriber, the commits waiting for it, the
/// frames it gathers, and its deadlines.
#[derive(Debug)]
pub struct EventStream {
    live: LiveSubscriber,
    heartbeat_ms: i64,
    /// Set by [`EventStream::start`]: nothing is sent before.
    started: bool,
    /// The catch-up frames not sent yet.
    catch_up: VecDeque<Arc<str>>,
    /// Commits handed over and not yet taken, one place each.
    queue: VecDeque<LiveCommit>,
    /// The commit being taken, and how many of its versions were: a commit
    /// of many versions may fill more than one chunk.
    current: Option<(LiveCommit, usize)>,
    /// The live frames gathered for the next chunk.
    gathered: Chunk,
    /// When the stream last sent (or opened): the heartbeat counts silence
    /// from here.
    last_sent: RecordDate,
    /// No chunk of live frames leaves before this unless it is full.
    next_flush: RecordDate,
    ended: Option<EndReason>,
}

impl EventStream {
    /// A stream for `subscriber`, opened at `opened_at`, that sends a
    /// heartbeat after `heartbeat_ms` of silence (at least 1): the host
    /// takes it in its `subscribe`, and [`EventStream::start`]s it once the
    /// catch-up is read.
    pub fn new(subscriber: Subscriber, opened_at: RecordDate, heartbeat_ms: u64) -> Self {
        Self {
            live: LiveSubscriber::new(subscriber, 0),
            heartbeat_ms: i64::try_from(heartbeat_ms.max(1)).unwrap_or(i64::MAX),
            started: false,
            catch_up: VecDeque::new(),
            queue: VecDeque::new(),
            current: None,
            gathered: Chunk::empty(),
            last_sent: opened_at,
            next_flush: opened_at,
            ended: None,
        }
    }

    /// Who listens.
    pub fn subscriber(&self) -> &Subscriber {
        &self.live.subscriber
    }

    /// Why the stream ended, once it has; a host may forget a stream then
    /// (hand it no more commits).
    pub fn ended(&self) -> Option<EndReason> {
        self.ended
    }

    /// Starts the stream with its catch-up: its frames go first, then the
    /// live versions after `catch_up.last_seq`, those handed over meanwhile
    /// included. Called once; a second call changes nothing.
    pub fn start(&mut self, catch_up: CatchUp) {
        if self.started {
            return;
        }
        self.started = true;
        self.live.last_seq = catch_up.last_seq;
        if self.ended.is_none() {
            self.catch_up = catch_up.frames.into_iter().map(Arc::from).collect();
        }
    }

    /// A commit's versions of the stream's user, in commit order: it waits
    /// as one item until the stream takes it. More than
    /// [`SUBSCRIBER_QUEUE_LEN`] waiting ends the stream
    /// ([`EndReason::Lagged`]). After the end, commits are dropped.
    pub fn handle_commit(&mut self, commit: LiveCommit) {
        if self.ended.is_some() {
            return;
        }
        self.queue.push_back(commit);
        if self.queue.len() > SUBSCRIBER_QUEUE_LEN {
            self.end(EndReason::Lagged);
        }
    }

    /// Commits were lost before they reached the stream: a host whose
    /// channel to its streams holds [`SUBSCRIBER_QUEUE_LEN`] commits lost
    /// the oldest to a stream that did not take them, so more than that
    /// many were waiting for it. The stream cannot go on without them: it
    /// ends as one that fell behind ([`EndReason::Lagged`]), unless it
    /// already has.
    pub fn handle_commits_lost(&mut self) {
        if self.ended.is_none() {
            self.end(EndReason::Lagged);
        }
    }

    /// The server is shutting down: the stream ends
    /// ([`EndReason::Shutdown`]), unless it already has.
    pub fn handle_shutdown(&mut self) {
        if self.ended.is_none() {
            self.end(EndReason::Shutdown);
        }
    }

    /// What to do at `now`, the host's clock: the catch-up's chunks first,
    /// then the live frames the subscriber receives, gathered into a chunk
    /// that leaves when it is full or when [`LIVE_FLUSH_INTERVAL_MS`] have
    /// passed since the last one (at once after a quiet spell), a heartbeat
    /// after the heartbeat interval without sending, and the end at the
    /// bearer token's expiry or when the standing changes. `now` is
    /// expected not to go back; an earlier one only delays what is due.
    pub fn poll_output(&mut self, now: RecordDate) -> Output {
        if let Some(reason) = self.ended {
            return Output::End(reason);
        }
        if self.live.ends_at().is_some_and(|at| now >= at) {
            return self.end(EndReason::BearerExpired);
        }
        if !self.started {
            return Output::Wait(self.deadline());
        }
        if let Some(chunk) = self.next_catch_up_chunk() {
            self.last_sent = now;
            return Output::Send(chunk);
        }
        if self.gather().is_err() {
            return self.end(EndReason::StandingChanged);
        }
        let gathered = self.gathered.record_events > 0;
        if gathered && (self.gathered.is_full() || now >= self.next_flush) {
            self.last_sent = now;
            self.next_flush = now.saturating_add_millis(FLUSH_INTERVAL_MS);
            return Output::Send(std::mem::replace(&mut self.gathered, Chunk::empty()));
        }
        if !gathered && now >= self.heartbeat_due() {
            self.last_sent = now;
            return Output::Send(Chunk::heartbeat());
        }
        Output::Wait(self.deadline())
    }

    /// Ends the stream, dropping what waits for it.
    fn end(&mut self, reason: EndReason) -> Output {
        self.ended = Some(reason);
        self.catch_up = VecDeque::new();
        self.queue = VecDeque::new();
        self.current = None;
        self.gathered = Chunk::empty();
        Output::End(reason)
    }

    fn heartbeat_due(&self) -> RecordDate {
        self.last_sent.saturating_add_millis(self.heartbeat_ms)
    }

    /// The next time something is due when nothing comes meanwhile.
    fn deadline(&self) -> RecordDate {
        let due = match self.gathered.record_events > 0 {
            true => self.next_flush,
            false => self.heartbeat_due(),
        };
        self.live.ends_at().map_or(due, |at| at.min(due))
    }

    /// The catch-up frames of the next chunk, if any are left.
    fn next_catch_up_chunk(&mut self) -> Option<Chunk> {
        let mut chunk = Chunk::empty();
        while !chunk.is_full() {
            let Some(frame) = self.catch_up.pop_front() else {
                break;
            };
            chunk.push_record(frame);
        }
        (chunk.record_events > 0).then_some(chunk)
    }

    /// Takes waiting versions into the gathered chunk until it is full or
    /// none waits.
    fn gather(&mut self) -> Result<(), StandingChanged> {
        while !self.gathered.is_full() {
            let (commit, taken) = match &mut self.current {
                Some((commit, taken)) if *taken < commit.len() => (commit, taken),
                _ => {
                    self.current = self.queue.pop_front().map(|commit| (commit, 0));
                    if self.current.is_none() {
                        return Ok(());
                    }
                    continue;
                }
            };
            let version = &commit[*taken];
            *taken += 1;
            if let Some(frame) = self.live.frame(version)? {
                self.gathered.push_record(frame);
            }
        }
        Ok(())
    }
}
