//! Reading a Server-Sent Events stream one event at a time.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::client::describe;

/// One event as it came over the wire.
#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// How many `data:` lines the event had.
    pub data_lines: usize,
}

impl SseEvent {
    pub fn is_record(&self) -> bool {
        self.event.as_deref() == Some("record")
    }
}

/// A `record` event with its parsed record.
#[derive(Debug, Clone)]
pub struct RecordEvent {
    pub event: SseEvent,
    pub record: Value,
}

impl RecordEvent {
    pub fn record_id(&self) -> &str {
        self.record["id"].as_str().unwrap_or_default()
    }
}

/// An open event stream.
pub struct EventStream {
    response: reqwest::Response,
    buffer: Vec<u8>,
    /// How much of `buffer` holds no block end: a large event arriving in
    /// many chunks is searched once, not once per chunk.
    searched: usize,
}

impl EventStream {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: Vec::new(),
            searched: 0,
        }
    }

    /// The next event, or `None` when none arrives within `wait`.
    pub async fn next_event(&mut self, wait: Duration) -> Result<Option<SseEvent>, String> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(event) = self.take_buffered_event() {
                return Ok(Some(event));
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Err(_) => return Ok(None),
                Ok(Err(error)) => return Err(format!("event stream broke: {}", describe(&error))),
                Ok(Ok(None)) => return Err("the server closed the event stream".into()),
                Ok(Ok(Some(chunk))) => self.buffer.extend_from_slice(&chunk),
            }
        }
    }

    /// The next `record` event (others, such as heartbeats, are skipped), or
    /// `None` when none arrives within `wait`.
    pub async fn next_record(&mut self, wait: Duration) -> Result<Option<RecordEvent>, String> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(event) = self.next_event(left).await? else {
                return Ok(None);
            };
            if event.is_record() {
                let record = serde_json::from_str(&event.data)
                    .map_err(|error| format!("event data is not JSON ({error}): {}", event.data))?;
                return Ok(Some(RecordEvent { event, record }));
            }
        }
    }

    /// Every record event up to and including the first whose record has
    /// id `last_id`; fails when it does not come within `wait`.
    pub async fn records_until(
        &mut self,
        last_id: &str,
        wait: Duration,
    ) -> Result<Vec<RecordEvent>, String> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(event) = self.next_record(left).await? else {
                return Err(format!(
                    "no event for record {last_id} within {} s (got {} other record events)",
                    wait.as_secs(),
                    seen.len()
                ));
            };
            let done = event.record_id() == last_id;
            seen.push(event);
            if done {
                return Ok(seen);
            }
        }
    }

    fn take_buffered_event(&mut self) -> Option<SseEvent> {
        loop {
            // A separator may straddle the searched part's end (by up to 3 bytes).
            let from = self.searched.saturating_sub(3);
            let Some((end, separator)) = block_end(&self.buffer[from..]) else {
                self.searched = self.buffer.len();
                return None;
            };
            let end = from + end;
            self.searched = 0;
            let block: Vec<u8> = self.buffer.drain(..end + separator).take(end).collect();
            let block = String::from_utf8_lossy(&block).replace("\r\n", "\n");
            if let Some(event) = parse_block(&block) {
                return Some(event);
            }
        }
    }
}

/// Where the first complete event block ends, and the blank-line separator's length.
fn block_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|pair| pair == b"\n\n")
        .map(|end| (end, 2));
    let crlf = buffer
        .windows(4)
        .position(|quad| quad == b"\r\n\r\n")
        .map(|end| (end, 4));
    match (lf, crlf) {
        (Some(lf), Some(crlf)) => Some(if crlf.0 < lf.0 { crlf } else { lf }),
        (lf, crlf) => lf.or(crlf),
    }
}

/// One event block; `None` when it holds only comments.
fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = SseEvent::default();
    let mut any_field = false;
    let mut data = Vec::new();
    for line in block.lines() {
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        any_field = true;
        match field {
            "id" => event.id = Some(value.to_string()),
            "event" => event.event = Some(value.to_string()),
            "data" => data.push(value.to_string()),
            _ => {}
        }
    }
    event.data_lines = data.len();
    event.data = data.join("\n");
    any_field.then_some(event)
}
