//! The native host of core's service: SQLite through the read pool and the
//! writer, blob files, the hub's event streams, governor's rate buckets,
//! the wall clock and the OS's randomness.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use folio_core::model::{BlobHash, UserName};
use folio_core::service::Peers;
use folio_core::service::blob::{Received, UploadMeter};
use folio_core::service::consent::SessionKey;
use folio_core::service::events::{
    CatchUp, Chunk, EndReason, EventStream, LiveCommit, Output, StreamsFull,
};
use folio_core::service::federation::{PeerAnswer, PeerFailure, PeerRequest};
use folio_core::store::{Statement, user_by_name_sql};
use folio_core::{
    Blobs, Bodies, BodyError, Decided, Guards, Host, Job, JobOutcome, Jobs, Note, Resident, Row,
    Secrets, Settings, Store, Streams, UploadFailure, User, WriteFailure, WriteJob,
};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::broadcast;

use crate::app::App;
use crate::db;
use crate::hub::{StreamPlace, Subscription};
use crate::metrics::{Limit, METRICS};
use crate::writer::{self, Driven, WriterError};

/// A failure of the native host's storage.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("database: {0}")]
    Db(#[from] db::DbError),
    #[error("blob storage: {0}")]
    Io(#[from] std::io::Error),
    #[error("a stored row: {0}")]
    Row(#[from] folio_core::RowError),
}

/// How much of a refused body is read and dropped before the answer, so
/// that the client, still sending, receives the problem+json instead of a
/// reset connection. A larger body is cut off.
const MAX_DRAINED_BYTES: usize = 16 << 20;

/// A `record` frame shared by every stream that sends it, as a body chunk.
struct SharedFrame(Arc<str>);

impl AsRef<[u8]> for SharedFrame {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A chunk as a body chunk: a single frame goes out as it is, still shared
/// with every other stream (2,000 streams each copying theirs held a third
/// more memory), several in one buffer.
fn chunk_bytes(chunk: Chunk) -> Bytes {
    let len = chunk.byte_len();
    let mut frames = chunk.into_frames();
    if frames.len() == 1 {
        return Bytes::from_owner(SharedFrame(frames.swap_remove(0)));
    }
    let mut bytes = bytes::BytesMut::with_capacity(len);
    for frame in &frames {
        bytes.extend_from_slice(frame.as_bytes());
    }
    bytes.freeze()
}

/// An open event stream's body: core's [`EventStream`] driven by the
/// connection that sends it. It keeps the hub's channel, the timer and the
/// shutdown signal; what is sent and when is the stream's. A commit goes
/// from the hub's channel to the socket without a task or a queue of its
/// own in between.
struct LiveBody {
    stream: EventStream,
    /// The commits the hub publishes to the user, since the place was taken.
    receiver: broadcast::Receiver<LiveCommit>,
    /// Given back when the body is dropped.
    _place: StreamPlace,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

impl LiveBody {
    /// The next chunk to send; `None` ends the body.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            self.take_published();
            let now = crate::clock::Clock.now();
            let until = match self.stream.poll_output(now) {
                Output::Send(chunk) => {
                    METRICS.events_sent(chunk.record_events());
                    return Some(chunk_bytes(chunk));
                }
                Output::End(reason) => {
                    if reason == EndReason::Lagged {
                        METRICS.stream_lagged();
                    }
                    return None;
                }
                Output::Wait(until) => until,
            };
            let wait = Duration::from_millis(now.millis_until(until));
            tokio::select! {
                received = self.receiver.recv() => take(&mut self.stream, received),
                () = tokio::time::sleep(wait) => {}
                _ = self.shutdown.wait_for(|stopped| *stopped) => self.stream.handle_shutdown(),
            }
        }
    }

    /// Hands the stream every commit waiting in the hub's channel.
    fn take_published(&mut self) {
        loop {
            match self.receiver.try_recv() {
                Ok(commit) => self.stream.handle_commit(commit),
                Err(broadcast::error::TryRecvError::Empty) => return,
                Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    self.stream.handle_commits_lost();
                }
                Err(broadcast::error::TryRecvError::Closed) => {
                    self.stream.handle_shutdown();
                    return;
                }
            }
        }
    }
}

/// Hands `stream` what the hub's channel gave.
fn take(stream: &mut EventStream, received: Result<LiveCommit, broadcast::error::RecvError>) {
    match received {
        Ok(commit) => stream.handle_commit(commit),
        Err(broadcast::error::RecvError::Lagged(_)) => stream.handle_commits_lost(),
        // The hub is gone: the server is stopping.
        Err(broadcast::error::RecvError::Closed) => stream.handle_shutdown(),
    }
}

/// An event stream's body: its stream started with the catch-up, then
/// driven until it ends.
fn live_body(
    subscribed: Subscribed,
    catch_up: CatchUp,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Body {
    let Subscribed {
        subscription,
        mut stream,
    } = subscribed;
    stream.start(catch_up);
    let body = LiveBody {
        stream,
        receiver: subscription.receiver,
        _place: subscription.place,
        shutdown,
    };
    let chunks = futures_util::stream::unfold(body, |mut body| async move {
        let chunk = body.next_chunk().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), body))
    });
    Body::from_stream(chunks)
}

/// A stream's place in the hub, whose channel keeps the commits published
/// while the catch-up is read, and the stream that waits for it.
pub struct Subscribed {
    subscription: Subscription,
    stream: EventStream,
}

fn write_failure(error: WriterError) -> WriteFailure {
    match error {
        WriterError::Busy => WriteFailure::Busy,
        WriterError::StorageFull(error) => WriteFailure::StorageFull(error),
        other => WriteFailure::Failed(other.to_string()),
    }
}

impl Host for App {
    fn settings(&self) -> &Settings {
        &self.settings
    }

    fn report(&self, error: &dyn std::fmt::Display) {
        tracing::error!(%error, "internal error");
    }

    fn resident(&self) -> Option<&Resident> {
        Some(&self.resident)
    }

    fn note(&self, note: Note<'_>) {
        match note {
            // A flood of refusals is a count, not a flood of log lines.
            Note::RateRefused(rate) => METRICS.refused(Limit::of_rate(&rate)),
            note => tracing::info!("{note}"),
        }
    }
}

impl Store for App {
    type Error = HostError;

    async fn user(&self, name: &UserName) -> Result<Option<User>, HostError> {
        let statement = user_by_name_sql(name.as_str());
        let found = self.readers.fetch(&statement).await?;
        Ok(found.first().map(User::from_row).transpose()?)
    }

    async fn users(&self) -> Result<Vec<User>, HostError> {
        Ok(self.readers.with(crate::users::list_users).await?)
    }

    async fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, HostError> {
        Ok(self.readers.fetch(statement).await?)
    }
}

/// Core decides a write through the memo itself, and hands the writer
/// only what it decided ([`Jobs::commit`]); a write that must read the
/// store is decided here on a read snapshot ([`Jobs::decide`]), on the
/// request's thread, so that the single writer only checks, stamps and
/// commits it.
impl Jobs for App {
    async fn run(&self, job: Job) -> Result<JobOutcome, WriteFailure> {
        self.writer.run(job).await.map_err(write_failure)
    }

    async fn commit(&self, decided: Decided) -> Result<JobOutcome, WriteFailure> {
        self.writer.commit(decided).await.map_err(write_failure)
    }

    async fn decide(&self, mut job: WriteJob<'_>) -> Result<JobOutcome, WriteFailure> {
        let driven = (self.readers)
            .with(|conn| Ok(writer::on_snapshot(conn, &mut job)))
            .await
            .map_err(|error| write_failure(WriterError::Db(error)))?
            .map_err(write_failure)?;
        match driven {
            Driven::Done(finished) => Ok(finished.outcome),
            Driven::Decided => self.commit(job.decided()).await,
        }
    }
}

impl Peers for App {
    async fn send(&self, request: PeerRequest) -> Result<PeerAnswer, PeerFailure> {
        self.peers.send(request).await
    }
}

impl Bodies for App {
    type Body = Body;
    type Stream = Body;

    async fn read_body(&self, body: Body, max: usize) -> Result<Vec<u8>, BodyError> {
        let mut stream = body.into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| BodyError::Broken)?;
            if bytes.len() + chunk.len() > max {
                self.discard(Body::from_stream(stream)).await;
                return Err(BodyError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    async fn discard(&self, body: Body) {
        let mut stream = body.into_data_stream();
        let mut drained = 0;
        while drained < MAX_DRAINED_BYTES {
            match stream.next().await {
                Some(Ok(chunk)) => drained += chunk.len(),
                _ => break,
            }
        }
    }
}

/// A failure of the blob store's disk while `doing` something: full (or
/// over a quota) is `StorageFull`, anything else `Failed`.
fn blob_storage_failure(doing: &str, error: &std::io::Error) -> WriteFailure {
    match error.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
            WriteFailure::StorageFull(format!("{doing}: {error}"))
        }
        _ => WriteFailure::Failed(format!("{doing}: {error}")),
    }
}

impl Blobs for App {
    type Upload = std::path::PathBuf;

    async fn receive_blob(
        &self,
        body: Body,
        meter: UploadMeter,
    ) -> Result<(std::path::PathBuf, Received), UploadFailure> {
        self.blobs.receive(body, meter).await
    }

    async fn discard_blob(&self, upload: std::path::PathBuf) {
        let _ = tokio::fs::remove_file(&upload).await;
    }

    async fn place_blob(
        &self,
        upload: std::path::PathBuf,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure> {
        let _placing = self.blobs.lock().await;
        self.blobs
            .place(upload, &hash.to_string())
            .await
            .map_err(|error| blob_storage_failure("placing a blob", &error))?;
        self.writer.run(row).await.map_err(write_failure)
    }

    async fn keep_blob(
        &self,
        bytes: Vec<u8>,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure> {
        let tmp = self
            .blobs
            .write_tmp(&bytes)
            .await
            .map_err(|error| blob_storage_failure("keeping a blob", &error))?;
        self.place_blob(tmp, hash, row).await
    }

    async fn blob_size(&self, hash: &BlobHash) -> Result<Option<u64>, HostError> {
        match tokio::fs::metadata(self.blobs.path(&hash.to_string())).await {
            Ok(metadata) => Ok(Some(metadata.len())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn blob_bytes(&self, hash: &BlobHash, start: u64, len: u64) -> Result<Body, HostError> {
        let mut file = tokio::fs::File::open(self.blobs.path(&hash.to_string())).await?;
        file.seek(std::io::SeekFrom::Start(start)).await?;
        Ok(Body::from_stream(tokio_util::io::ReaderStream::new(
            file.take(len),
        )))
    }

    async fn small_blob(&self, hash: &BlobHash, max: usize) -> Option<Vec<u8>> {
        let path = self.blobs.path(&hash.to_string());
        let size = tokio::fs::metadata(&path).await.ok()?.len();
        if size > max as u64 {
            return None;
        }
        tokio::fs::read(&path).await.ok()
    }
}

impl Streams for App {
    type Subscription = Subscribed;

    fn subscribe(
        &self,
        user: &User,
        anonymous: bool,
        stream: EventStream,
    ) -> Result<Subscribed, StreamsFull> {
        let subscription = self.hub.subscribe(user.id, anonymous)?;
        Ok(Subscribed {
            subscription,
            stream,
        })
    }

    fn event_stream(&self, subscribed: Subscribed, catch_up: CatchUp) -> Body {
        live_body(subscribed, catch_up, self.shutdown.clone())
    }
}

/// Core counts rates and nonces in the [`Resident`] itself.
impl Guards for App {}

impl Secrets for App {
    fn session_key(&self) -> &SessionKey {
        &self.session_key
    }

    async fn verify_password(&self, hash: String, password: String) -> bool {
        self.password_checks.verify(hash, password).await
    }

    async fn hash_password(&self, password: String, salt: [u8; 16]) -> Option<String> {
        self.password_checks.hash(password, salt).await
    }
}

#[cfg(test)]
mod tests {
    use folio_core::auth::access::Access;
    use folio_core::model::RecordDate;
    use folio_core::query::EventsQuery;
    use folio_core::schema::builtin::BuiltinType;

    use super::*;
    use folio_core::service::events::{HEARTBEAT_EVENT, LiveVersion, StreamCaps, Subscriber};

    use crate::hub::Hub;

    fn subscriber() -> Subscriber {
        Subscriber::new(
            Access::Owner {
                entity: "localhost".parse().expect("an entity"),
            },
            None,
            EventsQuery {
                min: RecordDate::from_unix_ticks(0).expect("a date"),
                filters: Vec::new(),
                include_deleted: false,
            },
        )
    }

    fn uncapped_hub() -> Arc<Hub> {
        Arc::new(Hub::new(StreamCaps {
            per_server: None,
            per_user: None,
        }))
    }

    /// A stream of user 1 on `hub`, not started yet, that hears a
    /// heartbeat after a minute of silence.
    fn subscribe(hub: &Arc<Hub>) -> Subscribed {
        let stream = EventStream::new(subscriber(), crate::clock::Clock.now(), 60_000);
        subscribe_with(hub, stream)
    }

    fn subscribe_with(hub: &Arc<Hub>, stream: EventStream) -> Subscribed {
        Subscribed {
            subscription: hub.subscribe(1, false).expect("no caps"),
            stream,
        }
    }

    /// A stream of user 1 on `hub` with nothing to catch up on, and the
    /// sender that shuts it down (kept while the stream is read).
    fn open_stream(hub: &Arc<Hub>) -> (Body, tokio::sync::watch::Sender<bool>) {
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        (
            live_body(subscribe(hub), CatchUp::default(), shutdown),
            stop,
        )
    }

    fn version(seq: u64) -> LiveVersion {
        let record = BuiltinType::Entity.record().clone();
        LiveVersion::new(seq, record, Vec::new(), None)
    }

    /// Publishes a commit of one version to user 1.
    fn publish(hub: &Hub, seq: u64) {
        hub.publish(1, LiveCommit::from(vec![version(seq)]));
    }

    /// Counts the `record` events of a stream until it has `wanted`.
    async fn read_events(body: Body, wanted: u64) -> u64 {
        let mut chunks = body.into_data_stream();
        let mut events = 0;
        while events < wanted {
            let chunk = tokio::time::timeout(Duration::from_secs(5), chunks.next())
                .await
                .expect("the events without a stall")
                .expect("the stream goes on")
                .expect("a chunk");
            events += std::str::from_utf8(&chunk)
                .expect("UTF-8")
                .matches("event: record")
                .count() as u64;
        }
        events
    }

    /// A group commit of many versions to one user (what queues behind a
    /// slow fsync) takes one place in a stream's queue: published while
    /// nothing reads the stream, three queues' worth of versions in one
    /// commit are all sent, over several chunks, and the stream goes on.
    #[tokio::test]
    async fn a_commit_of_more_versions_than_the_queue_holds_is_sent_whole() {
        let hub = uncapped_hub();
        let (body, _stop) = open_stream(&hub);
        let many = 3 * folio_core::service::events::SUBSCRIBER_QUEUE_LEN as u64;
        hub.publish(1, (1..=many).map(version).collect());
        publish(&hub, many + 1);
        assert_eq!(read_events(body, many + 1).await, many + 1);
    }

    /// A stream waiting out its flush interval keeps taking versions from
    /// the hub: a burst of more than the hub's queue holds, published
    /// during the wait, is sent, not a reason to drop the stream.
    #[tokio::test]
    async fn a_burst_during_the_flush_interval_is_sent_whole() {
        let hub = uncapped_hub();
        let (body, _stop) = open_stream(&hub);
        let burst = 3 * folio_core::service::events::SUBSCRIBER_QUEUE_LEN as u64;
        let reader = tokio::spawn(read_events(body, 1 + burst));
        publish(&hub, 1);
        // The first version leaves at once; the burst comes during the wait after it.
        tokio::time::sleep(Duration::from_millis(5)).await;
        for seq in 2..=1 + burst {
            publish(&hub, seq);
            tokio::task::yield_now().await;
        }
        assert_eq!(reader.await.expect("the reader"), 1 + burst);
    }

    /// A stream that falls more than the hub's queue behind ends (its
    /// client resumes with `Last-Event-Id`), and the metrics count it.
    #[tokio::test]
    async fn a_stream_that_falls_behind_ends_and_is_counted() {
        let hub = uncapped_hub();
        let (body, _stop) = open_stream(&hub);
        let lagged = METRICS.streams_lagged();
        // Nothing reads the stream while more than its queue is published.
        for seq in 1..=2 * folio_core::service::events::SUBSCRIBER_QUEUE_LEN as u64 {
            publish(&hub, seq);
        }
        let mut chunks = body.into_data_stream();
        let end = tokio::time::timeout(Duration::from_secs(5), chunks.next())
            .await
            .expect("the stream ends without waiting");
        assert!(end.is_none(), "the stream ended");
        assert!(METRICS.streams_lagged() > lagged, "the metric moved");
    }

    /// The hub hands a stream every version published after its place was
    /// taken: one committed while the catch-up is read is sent live, and
    /// one the catch-up already read is not sent again.
    #[tokio::test]
    async fn a_version_committed_during_the_catch_up_is_sent_once() {
        let hub = uncapped_hub();
        let subscription = subscribe(&hub);
        for seq in [6, 7] {
            publish(&hub, seq);
        }
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        // The catch-up read the store up to sequence 6.
        let catch_up = CatchUp {
            frames: vec![HEARTBEAT_EVENT.to_owned()],
            last_seq: 6,
        };
        let body = live_body(subscription, catch_up, shutdown);
        let mut chunks = body.into_data_stream();
        let first = chunks.next().await.expect("the catch-up").expect("a chunk");
        assert_eq!(first, HEARTBEAT_EVENT.as_bytes());
        let live = tokio::time::timeout(Duration::from_secs(5), chunks.next())
            .await
            .expect("the live version without waiting for another")
            .expect("a chunk")
            .expect("a chunk");
        let text = std::str::from_utf8(&live).expect("UTF-8");
        assert!(text.starts_with("id: 7\nevent: record\n"), "{text}");
        assert_eq!(text.matches("event: record").count(), 1, "{text}");
    }

    /// The next chunk of a body, or `None` at its end, within 5 s.
    async fn next_chunk(chunks: &mut axum::body::BodyDataStream) -> Option<Bytes> {
        tokio::time::timeout(Duration::from_secs(5), chunks.next())
            .await
            .expect("a chunk or the end without a stall")
            .map(|chunk| chunk.expect("a chunk"))
    }

    /// The driver waits as the stream says: a silent stream with a short
    /// heartbeat interval hears one after it, and again after the next.
    #[tokio::test]
    async fn a_silent_stream_hears_a_heartbeat_after_its_interval() {
        let hub = uncapped_hub();
        let stream = EventStream::new(subscriber(), crate::clock::Clock.now(), 100);
        let subscription = subscribe_with(&hub, stream);
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let opened = std::time::Instant::now();
        let mut chunks = live_body(subscription, CatchUp::default(), shutdown).into_data_stream();
        for _ in 0..2 {
            let chunk = next_chunk(&mut chunks).await.expect("a heartbeat");
            assert_eq!(chunk, HEARTBEAT_EVENT.as_bytes());
        }
        assert!(
            opened.elapsed() >= Duration::from_millis(190),
            "{:?}",
            opened.elapsed()
        );
    }

    /// A stream opened with a bearer token ends at the token's expiry,
    /// long before its next heartbeat.
    #[tokio::test]
    async fn a_stream_ends_at_its_bearer_tokens_expiry() {
        let hub = uncapped_hub();
        let now = crate::clock::Clock.now();
        let expiry = RecordDate::from_unix_millis(now.unix_millis() + 300).expect("a date");
        let subscriber = subscriber().with_standing(None, Some(expiry));
        let stream = EventStream::new(subscriber, now, 60_000);
        let subscription = subscribe_with(&hub, stream);
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let opened = std::time::Instant::now();
        let mut chunks = live_body(subscription, CatchUp::default(), shutdown).into_data_stream();
        assert!(next_chunk(&mut chunks).await.is_none(), "the stream ended");
        let ended = opened.elapsed();
        assert!(
            (Duration::from_millis(250)..Duration::from_secs(1)).contains(&ended),
            "ended after {ended:?}"
        );
    }

    /// The server's shutdown ends an open stream.
    #[tokio::test]
    async fn the_shutdown_ends_an_open_stream() {
        let hub = uncapped_hub();
        let (body, stop) = open_stream(&hub);
        let mut chunks = body.into_data_stream();
        stop.send(true).expect("the stream listens");
        assert!(next_chunk(&mut chunks).await.is_none(), "the stream ended");
    }
}
