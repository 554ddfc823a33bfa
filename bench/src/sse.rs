//! Live delivery under load: N subscribers hold event streams open while one
//! writer creates records at a fixed rate; the delay measured is from the
//! write's `200` reaching the writer to the event reaching each subscriber.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::watch;

use crate::drive::latency_histogram;
use crate::http::{Conn, Endpoint};

/// How long after the last write the subscribers may still receive it.
const DRAIN: Duration = Duration::from_secs(3);
/// Subscribers connect this many at a time.
const CONNECTING_AT_ONCE: usize = 64;

/// One server's side of the test: how a subscriber subscribes, and how a
/// write is made and recognised in an event.
pub trait Feed: Send + Sync + 'static {
    /// Opens one subscriber's stream, ready for the events of writes made
    /// from now on.
    fn subscribe(&self) -> impl Future<Output = Result<EventStream, String>> + Send;

    /// Creates record number `seq` on `conn`; the new record's id.
    fn write(
        &self,
        conn: &mut Conn,
        seq: u64,
    ) -> impl Future<Output = Result<String, String>> + Send;

    /// The id of the record an event carries, if it is a record event.
    fn record_id<'a>(&self, event: &str, data: &'a [u8]) -> Option<&'a [u8]>;
}

/// An open event stream, read frame by frame.
pub struct EventStream {
    body: Incoming,
    buffer: BytesMut,
    /// The connection the stream came on, open as long as the stream is.
    _conn: Conn,
}

/// One server-sent event: its `event` name and `data` (lines joined).
pub struct Frame {
    pub event: String,
    pub data: Vec<u8>,
}

impl EventStream {
    pub fn new(conn: Conn, body: Incoming) -> Self {
        Self {
            body,
            buffer: BytesMut::new(),
            _conn: conn,
        }
    }

    /// The next event, or `None` when the stream ends.
    pub async fn next(&mut self) -> Result<Option<Frame>, String> {
        loop {
            if let Some(end) = frame_end(&self.buffer) {
                let block = self.buffer.split_to(end.0);
                self.buffer.advance(end.1);
                return Ok(Some(parse_frame(&block)));
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

/// Where the first blank line is: `(end of the block, length of the separator)`.
fn frame_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| (at, 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn parse_frame(block: &[u8]) -> Frame {
    let mut frame = Frame {
        event: "message".to_owned(),
        data: Vec::new(),
    };
    for line in block.split(|&byte| byte == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(at) => (&line[..at], &line[at + 1..]),
            None => (line, &[][..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            b"event" => frame.event = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                if !frame.data.is_empty() {
                    frame.data.push(b'\n');
                }
                frame.data.extend_from_slice(value);
            }
            _ => {}
        }
    }
    frame
}

/// The value of the first `"id":"…"` in a JSON text, without parsing it all.
pub fn first_id(data: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = b"\"id\":\"";
    let start = data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let length = data[start..].iter().position(|&byte| byte == b'"')?;
    Some(&data[start..start + length])
}

/// What the delivery test measured.
pub struct Delivery {
    pub subscribers: usize,
    pub connect_errors: usize,
    pub first_error: Option<String>,
    /// Writes answered `200`.
    pub writes: u64,
    pub write_errors: u64,
    pub elapsed: Duration,
    /// Events that reached a subscriber for a write it should see.
    pub delivered: u64,
    /// Writes times subscribers, less what was delivered.
    pub missed: u64,
    /// From the write's `200` to the event, microseconds (0 when the event
    /// arrived first).
    pub latency: Histogram<u64>,
}

/// Connects `subscribers`, writes at `rate` per second for `duration`, and
/// measures every delivery.
pub async fn measure<F: Feed>(
    feed: Arc<F>,
    writer: &Endpoint,
    subscribers: usize,
    rate: u32,
    duration: Duration,
) -> Delivery {
    let (stop, stopped) = watch::channel(false);
    let mut delivery = Delivery {
        subscribers: 0,
        connect_errors: 0,
        first_error: None,
        writes: 0,
        write_errors: 0,
        elapsed: Duration::ZERO,
        delivered: 0,
        missed: 0,
        latency: latency_histogram(),
    };
    // Connect in waves, so the server sees many handshakes but not all at once.
    let mut streams = Vec::with_capacity(subscribers);
    let mut pending = Vec::new();
    for _ in 0..subscribers {
        let feed = feed.clone();
        pending.push(tokio::spawn(async move { feed.subscribe().await }));
        if pending.len() == CONNECTING_AT_ONCE {
            collect_streams(&mut pending, &mut streams, &mut delivery).await;
        }
    }
    collect_streams(&mut pending, &mut streams, &mut delivery).await;
    delivery.subscribers = streams.len();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|stream| {
            let feed = feed.clone();
            let stopped = stopped.clone();
            tokio::spawn(read_events(feed, stream, stopped))
        })
        .collect();

    // The writer: one record every 1/rate s, on one kept-alive connection.
    let mut acked: HashMap<Vec<u8>, Instant> = HashMap::new();
    let start = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1))));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut conn = None;
    let mut seq = 0;
    while start.elapsed() < duration {
        ticks.tick().await;
        let connection = match &mut conn {
            Some(connection) => connection,
            None => match writer.connect().await {
                Ok(connection) => conn.insert(connection),
                Err(error) => {
                    delivery.write_errors += 1;
                    delivery.first_error.get_or_insert(error);
                    continue;
                }
            },
        };
        seq += 1;
        match feed.write(connection, seq).await {
            Ok(id) => {
                acked.insert(id.into_bytes(), Instant::now());
            }
            Err(error) => {
                delivery.write_errors += 1;
                delivery.first_error.get_or_insert(error);
                conn = None;
            }
        }
    }
    delivery.writes = acked.len() as u64;
    delivery.elapsed = start.elapsed();
    tokio::time::sleep(DRAIN).await;
    let _ = stop.send(true);

    for reader in readers {
        let Ok((receipts, error)) = reader.await else {
            continue;
        };
        if let Some(error) = error {
            delivery.first_error.get_or_insert(error);
        }
        let mut seen = 0;
        for (id, at) in receipts {
            if let Some(written) = acked.get(&id) {
                seen += 1;
                let delay = at.saturating_duration_since(*written);
                let _ = delivery.latency.record((delay.as_micros() as u64).max(1));
            }
        }
        delivery.delivered += seen;
        delivery.missed += delivery.writes.saturating_sub(seen);
    }
    delivery
}

async fn collect_streams(
    pending: &mut Vec<tokio::task::JoinHandle<Result<EventStream, String>>>,
    streams: &mut Vec<EventStream>,
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

/// Reads one stream until told to stop: each record event's id and when it came.
async fn read_events<F: Feed>(
    feed: Arc<F>,
    mut stream: EventStream,
    mut stopped: watch::Receiver<bool>,
) -> (Vec<(Vec<u8>, Instant)>, Option<String>) {
    let mut receipts = Vec::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => return (receipts, None),
            frame = stream.next() => match frame {
                Ok(Some(frame)) => {
                    let at = Instant::now();
                    if let Some(id) = feed.record_id(&frame.event, &frame.data) {
                        receipts.push((id.to_vec(), at));
                    }
                }
                Ok(None) => return (receipts, Some("an event stream ended early".to_owned())),
                Err(error) => return (receipts, Some(error)),
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
        let frame = parse_frame(&text[..end]);
        assert_eq!(frame.event, "record");
        assert_eq!(first_id(&frame.data), Some(&b"ab12"[..]));
        assert!(frame_end(&text[end + gap..]).is_some());
        let crlf = b"event: notes\r\ndata: {\"id\":\"q\"}\r\n\r\n";
        let (end, gap) = frame_end(crlf).expect("a CRLF frame");
        assert_eq!(gap, 4);
        let frame = parse_frame(&crlf[..end]);
        assert_eq!(
            (frame.event.as_str(), first_id(&frame.data)),
            ("notes", Some(&b"q"[..]))
        );
    }
}
