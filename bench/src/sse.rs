//! Live delivery under load: N subscribers hold event streams open while a
//! writer creates records at a fixed rate (each write on its own task, so a
//! slow answer does not hold back the next write); the delay measured is
//! from the write's `200` reaching the writer to the event reaching each
//! subscriber.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{Semaphore, watch};

use crate::drive::latency_histogram;
use crate::http::{Conn, Endpoint};

/// How long after the last answer the subscribers may still receive events;
/// the wait ends sooner once every subscriber has had the event of every
/// answered write.
const DRAIN: Duration = Duration::from_secs(5);
/// How often the drain looks whether every event has come.
const DRAIN_POLL: Duration = Duration::from_millis(20);
/// Subscribers connect this many at a time.
const CONNECTING_AT_ONCE: usize = 64;

/// One server's side of the test: how a subscriber subscribes, and how a
/// write is made and recognised in an event.
pub trait Feed: Send + Sync + 'static {
    /// How many users the streams and writes are spread over: subscriber
    /// `n` follows user `n % users`, and write `seq` goes to user
    /// `seq % users`, so each subscriber expects the writes of its user.
    fn users(&self) -> usize {
        1
    }

    /// Opens one subscriber's stream on user `user`'s store, ready for the
    /// events of writes made from now on.
    fn subscribe(&self, user: usize) -> impl Future<Output = Result<EventStream, String>> + Send;

    /// Creates record number `seq` in user `user`'s store on `conn`; the
    /// new record's id.
    fn write(
        &self,
        conn: &mut Conn,
        seq: u64,
        user: usize,
    ) -> impl Future<Output = Result<String, String>> + Send;

    /// The id of the record an event carries, if it is a record event.
    fn record_id<'a>(&self, event: &[u8], data: &'a [u8]) -> Option<&'a [u8]>;
}

/// An open event stream, read frame by frame.
pub struct EventStream {
    body: Incoming,
    buffer: BytesMut,
    /// Bytes at the front of `buffer` that the last frame taken occupies:
    /// dropped when the next one is asked for, so that a frame is read in
    /// place, without a copy or an allocation of its own.
    taken: usize,
    /// The connection the stream came on, open as long as the stream is.
    _conn: Conn,
}

/// One server-sent event, as its block of lines (without the blank line
/// that ended it); its fields are read from the block in place.
pub struct Frame<'a> {
    block: &'a [u8],
}

impl<'a> Frame<'a> {
    /// The block's fields, `(name, value)`, the value without its one
    /// leading space.
    fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut rest = Some(self.block);
        std::iter::from_fn(move || {
            let text = rest?;
            let line = match memchr::memchr(b'\n', text) {
                Some(at) => {
                    rest = Some(&text[at + 1..]);
                    &text[..at]
                }
                None => {
                    rest = None;
                    text
                }
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let (field, value) = match memchr::memchr(b':', line) {
                Some(at) => (&line[..at], &line[at + 1..]),
                None => (line, &[][..]),
            };
            Some((field, value.strip_prefix(b" ").unwrap_or(value)))
        })
    }

    /// The `event` name (`message` when the frame names none).
    pub fn event(&self) -> &'a [u8] {
        self.fields()
            .filter(|(field, _)| *field == b"event")
            .last()
            .map_or(b"message", |(_, value)| value)
    }

    /// The `data` lines, joined with LF: borrowed from the block when
    /// there is one line, as there is in Folio's and PocketBase's events.
    pub fn data(&self) -> Cow<'a, [u8]> {
        let mut lines = self
            .fields()
            .filter(|(field, _)| *field == b"data")
            .map(|(_, value)| value);
        let Some(first) = lines.next() else {
            return Cow::Borrowed(&[]);
        };
        match lines.next() {
            None => Cow::Borrowed(first),
            Some(second) => {
                let mut joined = [first, second].join(&b'\n');
                for line in lines {
                    joined.push(b'\n');
                    joined.extend_from_slice(line);
                }
                Cow::Owned(joined)
            }
        }
    }
}

impl EventStream {
    pub fn new(conn: Conn, body: Incoming) -> Self {
        Self {
            body,
            buffer: BytesMut::new(),
            taken: 0,
            _conn: conn,
        }
    }

    /// The next event, or `None` when the stream ends.
    pub async fn next(&mut self) -> Result<Option<Frame<'_>>, String> {
        self.buffer.advance(std::mem::take(&mut self.taken));
        loop {
            if let Some((end, gap)) = frame_end(&self.buffer) {
                self.taken = end + gap;
                return Ok(Some(Frame {
                    block: &self.buffer[..end],
                }));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(error)) => return Err(format!("event stream: {error}")),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

/// A record id as the delivery test keeps it: inline, so that receiving an
/// event allocates nothing (2,000 subscribers at 100 writes a second are
/// 200,000 receipts a second, on the machine the server runs on).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordKey {
    len: u8,
    bytes: [u8; RecordKey::MAX_LEN],
}

impl RecordKey {
    /// Longest id kept: Folio's are 32 hex characters, PocketBase's 15.
    pub const MAX_LEN: usize = 32;

    /// `None` for an id longer than [`RecordKey::MAX_LEN`].
    pub fn new(id: &[u8]) -> Option<Self> {
        let mut bytes = [0; Self::MAX_LEN];
        bytes.get_mut(..id.len())?.copy_from_slice(id);
        Some(Self {
            len: id.len() as u8,
            bytes,
        })
    }
}

/// Where the first blank line is: `(end of the block, length of the separator)`.
fn frame_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = memchr::memmem::find(buffer, b"\n\n").map(|at| (at, 2));
    // Folio ends lines with LF alone: look for CRLF only where there is a CR.
    let crlf = match memchr::memchr(b'\r', buffer) {
        Some(_) => memchr::memmem::find(buffer, b"\r\n\r\n").map(|at| (at, 4)),
        None => None,
    };
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The value of the first `"id":"…"` in a JSON text, without parsing it all.
pub fn first_id(data: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = b"\"id\":\"";
    let start = memchr::memmem::find(data, KEY)? + KEY.len();
    let length = memchr::memchr(b'"', &data[start..])?;
    Some(&data[start..start + length])
}

/// What the delivery test measured.
pub struct Delivery {
    pub subscribers: usize,
    /// The users they and the writes were spread over.
    pub users: usize,
    pub connect_errors: usize,
    pub first_error: Option<String>,
    /// Writes due in `duration` at the rate asked.
    pub writes_due: u64,
    /// Writes answered `200`.
    pub writes: u64,
    pub write_errors: u64,
    /// Connections the writer opened: more than one when a write was still
    /// waiting for its answer when the next one was due.
    pub writer_connections: usize,
    /// From the first write to the last write's answer: `writes / elapsed`
    /// is the write rate achieved, which is below the rate asked when the
    /// server could not take the writes as fast.
    pub elapsed: Duration,
    /// Events that reached a subscriber for a write it should see.
    pub delivered: u64,
    /// Each subscriber's user's writes, summed, less what was delivered.
    pub missed: u64,
    /// From the write's `200` reaching the writer to the event reaching the
    /// subscriber, microseconds. An event that arrived before the write's
    /// answer (PocketBase sends its events before it answers) counts as 0,
    /// not as a negative delay.
    pub latency: Histogram<u64>,
}

/// Connects `subscribers`, writes at `rate` per second for `duration`, and
/// measures every delivery.
///
/// Write number `n` is due `n / rate` seconds after the first, whatever the
/// server's answer time: each write runs on its own task, on a connection
/// no other write is waiting on (opened when none is free), so a server
/// slower to answer than `1 / rate` still gets the writes at the rate.
/// Writes not started by the end of `duration` (at most
/// [`MAX_WRITES_IN_FLIGHT`] wait for their answers at once) are not made.
pub async fn measure<F: Feed>(
    feed: Arc<F>,
    writer: &Endpoint,
    subscribers: usize,
    rate: u32,
    duration: Duration,
) -> Delivery {
    let (stop, stopped) = watch::channel(false);
    let users = feed.users().max(1);
    let mut delivery = Delivery {
        subscribers: 0,
        users,
        connect_errors: 0,
        first_error: None,
        writes_due: 0,
        writes: 0,
        write_errors: 0,
        writer_connections: 0,
        elapsed: Duration::ZERO,
        delivered: 0,
        missed: 0,
        latency: latency_histogram(),
    };
    // Connect in waves, so the server sees many handshakes but not all at once.
    let mut streams = Vec::with_capacity(subscribers);
    let mut pending = Vec::new();
    for n in 0..subscribers {
        let feed = feed.clone();
        let user = n % users;
        pending.push(tokio::spawn(async move {
            feed.subscribe(user).await.map(|stream| (user, stream))
        }));
        if pending.len() == CONNECTING_AT_ONCE {
            collect_streams(&mut pending, &mut streams, &mut delivery).await;
        }
    }
    collect_streams(&mut pending, &mut streams, &mut delivery).await;
    delivery.subscribers = streams.len();
    // Room for every event from the start: an inbox that grows while
    // events arrive copies itself on the machine under test.
    let expected_events = (writes_due(rate, duration) as usize).div_ceil(users);
    let inboxes: Vec<Inbox> = (0..streams.len())
        .map(|_| Arc::new(Mutex::new(Vec::with_capacity(expected_events))))
        .collect();
    let stream_users: Vec<usize> = streams.iter().map(|(user, _)| *user).collect();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|(_, stream)| stream)
        .zip(&inboxes)
        .map(|(stream, inbox)| {
            let feed = feed.clone();
            let stopped = stopped.clone();
            tokio::spawn(read_events(feed, stream, stopped, inbox.clone()))
        })
        .collect();

    let written = write_at_rate(feed.clone(), writer, rate, duration, users).await;
    delivery.writes_due = written.due;
    delivery.writes = written.acked.len() as u64;
    delivery.write_errors = written.errors;
    delivery.writer_connections = written.connections;
    delivery.elapsed = written.elapsed;
    if let Some(error) = written.first_error {
        delivery.first_error.get_or_insert(error);
    }
    // Each subscriber expects its user's writes.
    let mut per_user = vec![0u64; users];
    for (_, user) in written.acked.values() {
        per_user[*user] += 1;
    }
    let expected: u64 = stream_users.iter().map(|user| per_user[*user]).sum();
    let drain_until = Instant::now() + DRAIN;
    let mut counted = vec![Counted::default(); inboxes.len()];
    while count_delivered(&inboxes, &mut counted, &written.acked) < expected
        && Instant::now() < drain_until
    {
        tokio::time::sleep(DRAIN_POLL).await;
    }
    let _ = stop.send(true);

    for ((reader, inbox), user) in readers.into_iter().zip(&inboxes).zip(&stream_users) {
        if let Ok(Some(error)) = reader.await {
            delivery.first_error.get_or_insert(error);
        }
        let receipts = std::mem::take(&mut *inbox.lock().unwrap_or_else(PoisonError::into_inner));
        let mut seen = 0;
        for (id, at) in receipts {
            if let Some((answered, _)) = written.acked.get(&id) {
                seen += 1;
                // An event ahead of the answer is a delay of 0.
                let delay = at.saturating_duration_since(*answered);
                let _ = delivery.latency.record(delay.as_micros() as u64);
            }
        }
        delivery.delivered += seen;
        delivery.missed += per_user[*user].saturating_sub(seen);
    }
    delivery
}

/// One subscriber's record events so far: each one's record id and when it came.
type Inbox = Arc<Mutex<Vec<(RecordKey, Instant)>>>;

/// How far the drain has looked into one inbox, and how many of the events
/// there were for answered writes.
#[derive(Clone, Copy, Default)]
struct Counted {
    looked: usize,
    delivered: u64,
}

/// Events received so far for answered writes, over every inbox; looks only
/// at what came since the last call.
fn count_delivered(inboxes: &[Inbox], counted: &mut [Counted], acked: &Acked) -> u64 {
    let mut total = 0;
    for (inbox, counted) in inboxes.iter().zip(counted) {
        let receipts = inbox.lock().unwrap_or_else(PoisonError::into_inner);
        let new = &receipts[counted.looked..];
        counted.delivered += new.iter().filter(|(id, _)| acked.contains_key(id)).count() as u64;
        counted.looked = receipts.len();
        total += counted.delivered;
    }
    total
}

/// At most this many writes wait for their answers at once (and so at most
/// this many writer connections): past it the server is not keeping up, and
/// the writes fall behind the rate instead of piling up.
pub const MAX_WRITES_IN_FLIGHT: usize = 32;

/// How long one write may wait for its answer before it counts as an error:
/// long enough for a server that answers a few writes a second to work
/// through [`MAX_WRITES_IN_FLIGHT`] of them, so a slow server shows as a low
/// rate rather than as errors.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Writes due in `duration` at `rate` a second: write `n` is due at
/// `n / rate` s, for every such time before the end (the margin keeps
/// float error from adding one at the very end).
fn writes_due(rate: u32, duration: Duration) -> u64 {
    let rate = f64::from(rate.max(1));
    (duration.as_secs_f64() * rate - 1e-6).ceil().max(1.0) as u64
}

/// Each answered write's record id, when its `200` came and its user.
type Acked = HashMap<RecordKey, (Instant, usize)>;

/// What the writer did.
struct Written {
    /// Writes on the schedule before the end of `duration`.
    due: u64,
    acked: Acked,
    errors: u64,
    first_error: Option<String>,
    connections: usize,
    elapsed: Duration,
}

/// Idle writer connections, shared by the write tasks.
type Idle = Arc<Mutex<Vec<Conn>>>;

/// Starts one write every `1 / rate` s until `duration` is over, each on its
/// own task, then waits for every answer.
async fn write_at_rate<F: Feed>(
    feed: Arc<F>,
    writer: &Endpoint,
    rate: u32,
    duration: Duration,
    users: usize,
) -> Written {
    let due = writes_due(rate, duration);
    let rate = f64::from(rate.max(1));
    let idle: Idle = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(Semaphore::new(MAX_WRITES_IN_FLIGHT));
    let connections = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(due as usize);
    for seq in 0..due {
        // On the fixed schedule, however long the earlier writes took.
        let at = start + Duration::from_secs_f64(seq as f64 / rate);
        tokio::time::sleep_until(at.into()).await;
        let Ok(Ok(permit)) =
            tokio::time::timeout_at(deadline.into(), in_flight.clone().acquire_owned()).await
        else {
            break;
        };
        let (feed, writer, idle, connections) = (
            feed.clone(),
            writer.clone(),
            idle.clone(),
            connections.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            let answered = tokio::time::timeout(
                WRITE_TIMEOUT,
                write_once(&*feed, &writer, &idle, &connections, seq + 1, users),
            )
            .await;
            answered
                .unwrap_or_else(|_| Err(format!("a write had no answer within {WRITE_TIMEOUT:?}")))
        }));
    }
    let mut written = Written {
        due,
        acked: HashMap::with_capacity(tasks.len()),
        errors: 0,
        first_error: None,
        connections: 0,
        elapsed: Duration::ZERO,
    };
    let mut last_answer = start;
    for task in tasks {
        match task.await {
            Ok(Ok((id, answered, user))) => {
                last_answer = last_answer.max(answered);
                written.acked.insert(id, (answered, user));
            }
            Ok(Err(error)) => {
                written.errors += 1;
                written.first_error.get_or_insert(error);
            }
            Err(error) => {
                written.errors += 1;
                written.first_error.get_or_insert(error.to_string());
            }
        }
    }
    written.connections = connections.load(Ordering::Relaxed);
    written.elapsed = last_answer.duration_since(start);
    written
}

/// One write on an idle connection (or a new one); the record's id and when
/// its answer came. The connection goes back to the idle ones unless it failed.
async fn write_once<F: Feed>(
    feed: &F,
    writer: &Endpoint,
    idle: &Idle,
    connections: &AtomicUsize,
    seq: u64,
    users: usize,
) -> Result<(RecordKey, Instant, usize), String> {
    let user = (seq % users as u64) as usize;
    let reused = idle.lock().map(|mut idle| idle.pop()).unwrap_or(None);
    let mut conn = match reused {
        Some(conn) => conn,
        None => {
            let conn = writer.connect().await?;
            connections.fetch_add(1, Ordering::Relaxed);
            conn
        }
    };
    let id = feed.write(&mut conn, seq, user).await?;
    let id = RecordKey::new(id.as_bytes())
        .ok_or_else(|| format!("a record id longer than {} bytes: {id}", RecordKey::MAX_LEN))?;
    let answered = Instant::now();
    if let Ok(mut idle) = idle.lock() {
        idle.push(conn);
    }
    Ok((id, answered, user))
}

/// A subscriber's stream with its user.
type UserStream = (usize, EventStream);

async fn collect_streams(
    pending: &mut Vec<tokio::task::JoinHandle<Result<UserStream, String>>>,
    streams: &mut Vec<UserStream>,
    delivery: &mut Delivery,
) {
    for task in pending.drain(..) {
        match task.await {
            Ok(Ok(stream)) => streams.push(stream),
            Ok(Err(error)) => {
                delivery.connect_errors += 1;
                delivery.first_error.get_or_insert(error);
            }
            Err(error) => {
                delivery.connect_errors += 1;
                delivery.first_error.get_or_insert(error.to_string());
            }
        }
    }
}

/// Reads one stream into `inbox` until told to stop; the error that ended
/// it early, if one did.
async fn read_events<F: Feed>(
    feed: Arc<F>,
    mut stream: EventStream,
    mut stopped: watch::Receiver<bool>,
    inbox: Inbox,
) -> Option<String> {
    loop {
        tokio::select! {
            _ = stopped.changed() => return None,
            frame = stream.next() => match frame {
                Ok(Some(frame)) => {
                    let at = Instant::now();
                    let data = frame.data();
                    if let Some(id) = feed.record_id(frame.event(), &data).and_then(RecordKey::new) {
                        inbox
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push((id, at));
                    }
                }
                Ok(None) => return Some("an event stream ended early".to_owned()),
                Err(error) => return Some(error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_on_blank_lines_and_ids_come_from_the_data() {
        let text = b"id: 7\nevent: record\ndata: {\"author\":{\"entity\":\"x\"},\"id\":\"ab12\",\"type\":{\"record_id\":\"cd\"}}\n\n: hb\n\n";
        let (end, gap) = frame_end(text).expect("a whole frame");
        let frame = Frame {
            block: &text[..end],
        };
        assert_eq!(frame.event(), b"record");
        assert_eq!(first_id(&frame.data()), Some(&b"ab12"[..]));
        assert!(frame_end(&text[end + gap..]).is_some());
        let crlf = b"event: notes\r\ndata: {\"id\":\"q\"}\r\n\r\n";
        let (end, gap) = frame_end(crlf).expect("a CRLF frame");
        assert_eq!(gap, 4);
        let frame = Frame {
            block: &crlf[..end],
        };
        assert_eq!(
            (frame.event(), first_id(&frame.data())),
            (&b"notes"[..], Some(&b"q"[..]))
        );
        let lines = Frame {
            block: b"data: a\ndata:b\ndata:  c",
        };
        assert_eq!(
            (lines.event(), &*lines.data()),
            (&b"message"[..], &b"a\nb\n c"[..])
        );
    }

    #[test]
    fn an_event_ahead_of_the_answer_is_a_delay_of_zero() {
        let received = Instant::now();
        let answered = received + Duration::from_millis(3);
        let mut latency = latency_histogram();
        let delay = received.saturating_duration_since(answered);
        latency
            .record(delay.as_micros() as u64)
            .expect("0 is within the bounds");
        assert_eq!((latency.min(), latency.max()), (0, 0));
    }
}
