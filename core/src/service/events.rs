//! The events stream (spec §6, PROTOCOL.md §8, §13): who may open one, where
//! its catch-up starts, which committed versions each subscriber receives,
//! and the exact bytes of every event. A host only moves these bytes.
//!
//! # How a host drives a stream
//!
//! 1. [`authorize_events`] the caller; an error is answered as problem+json.
//! 2. Read the [`EventsQuery`], parse `Last-Event-Id` with
//!    [`EventId::from_header`], and ask [`catch_up_start`] where catch-up
//!    begins, telling it the [`EventLogBounds`] of the user's log.
//! 3. Register a [`Subscriber`] for live events *before* reading the log, so
//!    that nothing committed meanwhile falls between catch-up and live.
//! 4. Read the log from the start, oldest first, keep the events
//!    [`Subscriber::should_send`] accepts, and pass them to
//!    [`catch_up_batch`]. Its error (`too_many_events`) is answered as
//!    problem+json: the stream has not started yet.
//! 5. Answer `200` with [`EVENT_STREAM_HEADERS`] (and the CORS headers),
//!    and drive the stream's [`EventStream`]: it was made in step 3 and
//!    takes every commit of the user from then on, is started with the
//!    catch-up ([`CatchUp`]), and says what to send and when: the catch-up,
//!    then each live event the subscriber accepts, in commit order,
//!    skipping those whose sequence the catch-up read already covered,
//!    batched into chunks; [`HEARTBEAT_EVENT`] after the heartbeat interval
//!    ([`HEARTBEAT_INTERVAL_MS`] by default) with nothing written; and the
//!    end of the stream ([`EndReason`]).
//! 6. A host hands its streams each commit's versions of the user as
//!    one [`LiveCommit`]. A stream with more than [`SUBSCRIBER_QUEUE_LEN`]
//!    commits waiting ends; its client comes back with `Last-Event-Id` and
//!    catches up.
//!
//! The host also prunes its log, keeping every event at or after
//! [`retention_cutoff`], and caps connections at
//! [`MAX_CONNECTIONS_PER_SERVER`] and [`MAX_CONNECTIONS_PER_USER`] by default
//! (`request/429-rate-limited` with `Retry-After` beyond them).

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::auth::access::{Access, is_type};
use crate::model::{ClientId, Record, RecordDate, RecordId};
use crate::problem::{Problem, ProblemType};
use crate::query::{EventsQuery, Filter, IndexEntry, entries_match};
use crate::schema::builtin::BuiltinType;
use crate::service::http::NO_CACHE;

mod stream;

pub use stream::{CatchUp, Chunk, EndReason, EventStream, MAX_CHUNK_BYTES, Output};

/// The most events a catch-up sends; more pending is `too_many_events`.
pub const MAX_CATCH_UP_EVENTS: usize = 100;

/// The most event-log rows one catch-up reads. A subscriber that sees few
/// of the store's events (an anonymous one, an app with a narrow grant or
/// filter) and resumes from far back would otherwise make the server read
/// the whole day's log to find its hundred; past this it is answered
/// `too_many_events`, as if they were pending, and lists afresh.
pub const MAX_CATCH_UP_ROWS: usize = 10_000;

/// How long a stream may stay silent before a heartbeat is written, by
/// default ([`Limits::heartbeat_ms`](crate::service::limits::Limits::heartbeat_ms)).
pub const HEARTBEAT_INTERVAL_MS: u64 = 15_000;

/// How far back `Last-Event-Id` replay reaches at least: a host keeps every
/// event this young in its log (see [`retention_cutoff`]).
pub const EVENT_RETENTION_MS: i64 = 24 * 60 * 60 * 1_000;

/// Default cap on open events streams across the whole server.
pub const MAX_CONNECTIONS_PER_SERVER: usize = 1_024;

/// Default cap on open events streams of one user.
pub const MAX_CONNECTIONS_PER_USER: usize = 64;

/// The shortest time between two writes to one live stream, in
/// milliseconds. A version committed after a quiet spell goes out at once;
/// versions that follow within the interval wait for its end and leave
/// together, in one chunk. Each write to a stream costs a TLS record and a
/// system call on both ends, whatever it carries: at 100 versions a second
/// to 2,000 streams, one write per version is 200,000 writes a second,
/// which saturates a core, and the delays grow without bound. The interval
/// bounds the writes to `1000 / LIVE_FLUSH_INTERVAL_MS` a stream a second,
/// at the price of at most that much added delay. Every host applies it
/// to each stream, through [`EventStream`].
pub const LIVE_FLUSH_INTERVAL_MS: u64 = 50;

/// How many commits may wait for one subscriber before it is disconnected.
///
/// A commit's versions of one user wait as one item (a [`LiveCommit`]), so
/// a group commit of many writes (the writes that queued behind a slow
/// fsync, committed together) takes one place: counted in versions, one
/// such commit would overflow every stream of its user at once, however
/// fast their clients read.
///
/// Below [`MAX_CATCH_UP_EVENTS`] on purpose: at the usual one version a
/// commit, a subscriber dropped for a full queue has missed about this many
/// events, so when it reconnects with `Last-Event-Id` there is still room
/// (36 events) for what is committed while it reconnects before its
/// catch-up fails with `too_many_events` (and the client lists afresh).
/// Large enough that a burst of writes does not drop a healthy client whose
/// socket is briefly slow.
pub const SUBSCRIBER_QUEUE_LEN: usize = 64;

// The queue length's reason to be, checked where it is stated.
const _: () = assert!(SUBSCRIBER_QUEUE_LEN < MAX_CATCH_UP_EVENTS);

/// How long a client refused by a stream cap should wait before it
/// tries again (`Retry-After`).
pub const STREAM_CAP_RETRY_AFTER_SECS: u64 = 5;

/// The caps on open event streams (PROTOCOL.md §13); `None` switches one
/// off. A host counts its open streams and asks [`StreamCaps::admit`]
/// before it opens another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    /// Open streams on the whole server, at most.
    pub per_server: Option<usize>,
    /// Open streams of one user, at most.
    pub per_user: Option<usize>,
}

/// The streams a host holds open when another asks to open: all of them
/// and the unauthenticated ones, on the server (`None` for a host that
/// keeps one user's streams only, as the edge's user object does) and for
/// the user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenStreams {
    /// On the whole server (`None`: the host keeps one user's streams only).
    pub on_server: Option<Opened>,
    /// Of the user the new stream is for.
    pub for_user: Opened,
}

/// A count of open streams, and how many of them are unauthenticated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Opened {
    /// Every open stream.
    pub all: usize,
    /// The open streams no one authenticated.
    pub anonymous: usize,
}

impl Opened {
    /// Counts one more stream.
    pub fn open(&mut self, anonymous: bool) {
        self.all += 1;
        self.anonymous += usize::from(anonymous);
    }

    /// Counts one stream fewer.
    pub fn close(&mut self, anonymous: bool) {
        self.all = self.all.saturating_sub(1);
        if anonymous {
            self.anonymous = self.anonymous.saturating_sub(1);
        }
    }
}

impl StreamCaps {
    /// The caps of `limits`.
    pub fn of(limits: &crate::service::limits::Limits) -> Self {
        StreamCaps {
            per_server: limits.sse_connections_per_server,
            per_user: limits.sse_connections_per_user,
        }
    }

    /// Whether one more stream, `anonymous` or signed, may open beside
    /// `open`. Unauthenticated streams may hold at most half of each cap
    /// (rounded down): whoever can reach the server may open them, and
    /// they must not shut the user's own apps out.
    pub fn admit(&self, open: OpenStreams, anonymous: bool) -> Result<(), StreamsFull> {
        let full = |cap: Option<usize>, opened: Opened| {
            cap.is_some_and(|cap| opened.all >= cap || (anonymous && opened.anonymous >= cap / 2))
        };
        let server_full = open
            .on_server
            .is_some_and(|opened| full(self.per_server, opened));
        match server_full || full(self.per_user, open.for_user) {
            true => Err(StreamsFull),
            false => Ok(()),
        }
    }
}

/// A stream refused by a cap: `request/429-rate-limited`, with
/// [`STREAM_CAP_RETRY_AFTER_SECS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many event streams are open; retry later")]
pub struct StreamsFull;

impl From<&StreamsFull> for Problem {
    fn from(full: &StreamsFull) -> Self {
        Problem::new(ProblemType::RateLimited).with_detail(full.to_string())
    }
}

/// The media type of an events stream.
pub const EVENT_STREAM_CONTENT_TYPE: &str = "text/event-stream";

/// The headers of a stream's `200` answer, besides the CORS headers every
/// response carries.
pub const EVENT_STREAM_HEADERS: [(&str, &str); 2] = [
    ("content-type", EVENT_STREAM_CONTENT_TYPE),
    ("cache-control", NO_CACHE),
];

/// The keep-alive event. It has no `id` field, because an `id` line (even an
/// empty one) would replace the last event id the client sends back on
/// reconnecting; its empty `data` line makes browsers dispatch it as a
/// `heartbeat` event, which clients ignore.
pub const HEARTBEAT_EVENT: &str = "event: heartbeat\ndata:\n\n";

/// Why an events request is refused before its stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventsError {
    /// `auth/403-forbidden`: an app whose grant names no type to subscribe to.
    #[error("the app's authorization grants no record type to subscribe to")]
    Forbidden,
    /// `events/400-too-many-events`: more than [`MAX_CATCH_UP_EVENTS`] pending.
    #[error(
        "more than {} events are pending; list the records, then subscribe from there",
        MAX_CATCH_UP_EVENTS
    )]
    TooManyEvents,
}

impl From<&EventsError> for Problem {
    fn from(error: &EventsError) -> Self {
        let kind = match error {
            EventsError::Forbidden => ProblemType::Forbidden,
            EventsError::TooManyEvents => ProblemType::TooManyEvents,
        };
        Problem::new(kind).with_detail(error.to_string())
    }
}

/// Whether the caller may open an events stream at all: an app needs at
/// least one type in its `subscribe` grant; the owner and anonymous callers
/// always may (what they receive is decided per version).
pub fn authorize_events(access: &Access) -> Result<(), EventsError> {
    match access.grant() {
        Some(grant) if grant.subscribe.is_empty() && !grant.every_type => {
            Err(EventsError::Forbidden)
        }
        _ => Ok(()),
    }
}

/// An event's id: the user's event sequence, which the host's storage
/// assigns, strictly increasing in commit order. Written in decimal; clients
/// treat it as opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(u64);

impl EventId {
    /// The id of the event with the user's event sequence `sequence`.
    pub const fn from_sequence(sequence: u64) -> Self {
        Self(sequence)
    }

    /// The user's event sequence this id names.
    pub const fn sequence(self) -> u64 {
        self.0
    }

    /// Reads a `Last-Event-Id` value. Only the form [`Display`](fmt::Display)
    /// writes is accepted (decimal, no sign, no leading zero), so every id
    /// has one spelling; anything else is `None`, which [`catch_up_start`]
    /// treats as an unknown id, never as an error.
    pub fn from_header(value: &str) -> Option<Self> {
        let canonical = !value.is_empty()
            && value.bytes().all(|b| b.is_ascii_digit())
            && (value == "0" || !value.starts_with('0'));
        if !canonical {
            return None;
        }
        value.parse().ok().map(Self)
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// What the host knows of one user's event log when a stream opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventLogBounds {
    /// The oldest event still in the log; `None` when the log is empty.
    /// Pruning removes the oldest events only, so every event from this one
    /// on is still there.
    pub oldest_retained: Option<EventId>,
    /// The newest event ever committed (the storage's sequence counter, kept
    /// when its event is pruned); `None` when the user has none yet.
    pub latest: Option<EventId>,
}

/// Where a stream's catch-up begins: every event after this point that the
/// subscriber accepts is sent, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUpStart {
    /// After a known `Last-Event-Id`: the log's events with a greater sequence.
    AfterEvent(EventId),
    /// After the clamped `min`: the log's events whose `version.received_at`
    /// is later than this date. The log reaches back far enough for it,
    /// since [`EVENT_RETENTION_MS`] exceeds the 20 s a `min` may go back.
    AfterReceivedAt(RecordDate),
}

/// Decides where catch-up begins. A `Last-Event-Id` is honoured only when
/// the log still holds every event after it: it was issued (not after
/// `log.latest`) and nothing after it was pruned. An unknown or expired id
/// falls back to the query's clamped `min`, as does no id.
pub fn catch_up_start(
    query: &EventsQuery,
    last_event_id: Option<EventId>,
    log: EventLogBounds,
) -> CatchUpStart {
    match last_event_id {
        Some(id) if can_replay_after(id, log) => CatchUpStart::AfterEvent(id),
        _ => CatchUpStart::AfterReceivedAt(query.min),
    }
}

fn can_replay_after(id: EventId, log: EventLogBounds) -> bool {
    let Some(latest) = log.latest else {
        return false;
    };
    if id > latest {
        return false;
    }
    match log.oldest_retained {
        // Everything pruned had a sequence below `oldest`; sequences may
        // have gaps, so only an id right before it proves none was missed.
        Some(oldest) => oldest.0 <= id.0.saturating_add(1),
        // An empty log has pruned everything up to `latest`.
        None => id == latest,
    }
}

/// Decides whether a catch-up may be sent. `pending` are the log's events
/// after the [`CatchUpStart`] that [`Subscriber::should_send`] accepts, in
/// commit order; at most `MAX_CATCH_UP_EVENTS + 1` of them are consumed, so
/// a host may pass a lazy iterator over its log. Answers them, in the order
/// given, or [`EventsError::TooManyEvents`] when there are more than
/// [`MAX_CATCH_UP_EVENTS`].
pub fn catch_up_batch<T>(pending: impl IntoIterator<Item = T>) -> Result<Vec<T>, EventsError> {
    let batch: Vec<T> = pending.into_iter().take(MAX_CATCH_UP_EVENTS + 1).collect();
    if batch.len() > MAX_CATCH_UP_EVENTS {
        Err(EventsError::TooManyEvents)
    } else {
        Ok(batch)
    }
}

/// The events whose `version.received_at` is earlier than the returned date
/// may be pruned at `now`; every later one must be kept, so that replay
/// reaches back [`EVENT_RETENTION_MS`].
pub fn retention_cutoff(now: RecordDate) -> RecordDate {
    now.saturating_sub_millis(EVENT_RETENTION_MS)
}

/// One open stream: who listens, and what it asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscriber {
    /// What the stream's caller may read.
    pub access: Access,
    /// The stream request's `X-Svc-Client-Id`, if it carried one.
    pub client_id: Option<ClientId>,
    /// Whether the stream asked for deletions too (tombstones).
    pub include_deleted: bool,
    /// Versions matching any of these are sent (none: every version).
    pub filters: Vec<Filter>,
    /// The App Authorization record the caller's access comes from: a new
    /// version of it (a revocation, a changed grant) ends the stream, and
    /// the client reconnects under its standing then.
    pub authorization: Option<RecordId>,
    /// When the bearer token that opened the stream expires: the stream
    /// ends then ([`EndReason::BearerExpired`]).
    pub expires_at: Option<RecordDate>,
}

impl Subscriber {
    /// The subscriber of an events request; the query's `min` is only for
    /// [`catch_up_start`], which should be asked first.
    pub fn new(access: Access, client_id: Option<ClientId>, query: EventsQuery) -> Self {
        Self {
            access,
            client_id,
            include_deleted: query.include_deleted,
            filters: query.filters,
            authorization: None,
            expires_at: None,
        }
    }

    /// The same subscriber, whose access comes from `authorization` and
    /// lasts until `expires_at` (a bearer token's expiry).
    pub fn with_standing(
        mut self,
        authorization: Option<RecordId>,
        expires_at: Option<RecordDate>,
    ) -> Self {
        self.authorization = authorization;
        self.expires_at = expires_at;
        self
    }

    /// Whether `record` changes the standing this subscriber was admitted
    /// with: a new version of the App Authorization record its access
    /// comes from.
    pub fn is_revoked_by(&self, record: &Record) -> bool {
        self.authorization == Some(record.id)
            && is_type(&record.type_link, BuiltinType::AppAuthorization)
    }

    /// Whether a committed version is sent to this subscriber, in catch-up
    /// and live alike. `entries` are the version's link index entries (as
    /// its commit computed them, or as the log stored them); `written_by` is the `X-Svc-Client-Id` of the request that wrote it.
    /// The same answer for the same inputs: a host may decide once per
    /// version and subscriber.
    pub fn should_send(
        &self,
        record: &Record,
        entries: &[IndexEntry],
        written_by: Option<ClientId>,
    ) -> bool {
        let own_write = self.client_id.is_some() && self.client_id == written_by;
        !own_write
            && (self.include_deleted || !record.is_tombstone())
            && self.access.can_subscribe_type(&record.type_link)
            && self.access.can_read(record)
            && entries_match(&self.filters, record, entries)
    }
}

/// A committed version as the live streams receive it.
///
/// Its `record` frame is the same for every subscriber (the event id is the
/// version's sequence), so it is made once, by the first subscriber that
/// receives the version, and shared by the rest: a version reaching N
/// subscribers is serialized once, not N times.
#[derive(Debug)]
pub struct LiveVersion {
    /// The version's event sequence in its user's store.
    pub seq: u64,
    /// The version, as stored.
    pub record: Record,
    /// Its link-index entries, for subscribers that filter by links.
    pub entries: Vec<IndexEntry>,
    /// The client whose write committed it (`X-Svc-Client-Id`), if named.
    pub written_by: Option<ClientId>,
    frame: OnceLock<Arc<str>>,
}

impl LiveVersion {
    /// A version stored with event sequence `seq`, written by `written_by`
    /// (the client id its request carried, if any).
    pub fn new(
        seq: u64,
        record: Record,
        entries: Vec<IndexEntry>,
        written_by: Option<ClientId>,
    ) -> Self {
        Self {
            seq,
            record,
            entries,
            written_by,
            frame: OnceLock::new(),
        }
    }

    /// The version's `record` frame.
    pub fn frame(&self) -> Arc<str> {
        self.frame
            .get_or_init(|| record_event(EventId::from_sequence(self.seq), &self.record).into())
            .clone()
    }
}

/// The versions one commit stored for one user, in the order they were
/// stored: what a host's subscribers receive as one item (see
/// [`SUBSCRIBER_QUEUE_LEN`]).
pub type LiveCommit = Arc<[LiveVersion]>;

/// A subscriber on its live stream, after its catch-up: the last sequence
/// it was offered, so that a version it already had (from the catch-up, or
/// offered twice) is not sent again.
#[derive(Debug, Clone)]
pub struct LiveSubscriber {
    subscriber: Subscriber,
    last_seq: u64,
}

impl LiveSubscriber {
    /// `last_seq`: the last sequence the catch-up read.
    pub fn new(subscriber: Subscriber, last_seq: u64) -> Self {
        Self {
            subscriber,
            last_seq,
        }
    }

    /// The frame to send for a committed version, if this subscriber
    /// receives it; [`StandingChanged`] when the version revokes the
    /// access the stream was opened with, which ends the stream.
    pub fn frame(&mut self, version: &LiveVersion) -> Result<Option<Arc<str>>, StandingChanged> {
        if version.seq <= self.last_seq {
            return Ok(None);
        }
        self.last_seq = version.seq;
        if self.subscriber.is_revoked_by(&version.record) {
            return Err(StandingChanged);
        }
        Ok(self
            .subscriber
            .should_send(&version.record, &version.entries, version.written_by)
            .then(|| version.frame()))
    }

    /// When the stream ends, whatever it sends: the expiry of the
    /// bearer token that opened it.
    pub fn ends_at(&self) -> Option<RecordDate> {
        self.subscriber.expires_at
    }
}

/// A live stream's access was revoked or changed: the stream ends
/// (the client's reconnection is authorized afresh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the access this stream was opened with changed")]
pub struct StandingChanged;

/// The `record` event of one committed version.
pub fn record_event(id: EventId, record: &Record) -> String {
    // A `data` field ends at the first CR or LF, so the JSON must be one
    // line. serde_json's compact form puts no whitespace between tokens and
    // escapes every control character inside strings (CR and LF included),
    // so no raw CR or LF can appear, whatever the record holds.
    let json = serde_json::to_string(record)
        .expect("a record serializes: its values are JSON and its keys strings");
    format!("id: {id}\nevent: record\ndata: {json}\n\n")
}

/// Reads a request's `X-Svc-Client-Id` (spec §4.0): absent, or 32 lowercase
/// hex characters. Anything else is `request/400-invalid-parameter`, so a
/// client that sends a malformed id learns it, instead of silently getting
/// its own writes back on its events stream.
pub fn parse_client_id(header: Option<&[u8]>) -> Result<Option<ClientId>, Problem> {
    let Some(value) = header else {
        return Ok(None);
    };
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.parse().ok())
        .map(Some)
        .ok_or_else(|| {
            Problem::new(ProblemType::InvalidParameter)
                .with_detail("the client id header is not 32 lowercase hex characters")
        })
}
