//! The native host of core's service: SQLite through the read pool and the
//! writer, blob files, the hub's event streams, governor's rate buckets,
//! the wall clock and the OS's randomness.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use folio_core::auth::{Accepted, NonceUse, ReplayError};
use folio_core::model::{BlobHash, RecordDate, UserName};
use folio_core::service::Peers;
use folio_core::service::blob::{Received, UploadMeter};
use folio_core::service::consent::SessionKey;
use folio_core::service::events::{
    HEARTBEAT_EVENT, LIVE_FLUSH_INTERVAL_MS, LiveCommit, LiveSubscriber, StreamsFull, Subscriber,
};
use folio_core::service::federation::{PeerAnswer, PeerFailure, PeerRequest};
use folio_core::service::standing::{Epoch, StandingCache};
use folio_core::store::Statement;
use folio_core::{
    Blobs, Bodies, BodyError, Guards, Host, Job, JobOutcome, Jobs, Limited, Note, Rate, Row,
    Secrets, Settings, Store, Streams, UploadFailure, User, WriteFailure,
};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::broadcast;

use crate::app::App;
use crate::db;
use crate::hub::{StreamPlace, Subscription};
use crate::metrics::{Limit, METRICS};
use crate::writer::{self, Prepared, WriterError};

/// A failure of the native host's storage.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("database: {0}")]
    Db(#[from] db::DbError),
    #[error("blob storage: {0}")]
    Io(#[from] std::io::Error),
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

/// The most bytes of frames one chunk gathers (past the frame that
/// crosses it); a full chunk leaves without waiting out the flush interval.
const MAX_CHUNK_BYTES: usize = 64 * 1024;

/// The frames of one write to a stream. They stay shared with every other
/// stream until the write (2,000 streams each copying theirs while they
/// wait out the interval held a third more memory), then one frame goes
/// out as it is, several in one buffer.
struct Chunk {
    frames: Vec<Arc<str>>,
    len: usize,
}

impl Chunk {
    fn new(first: Arc<str>) -> Self {
        Self {
            len: first.len(),
            frames: vec![first],
        }
    }

    fn push(&mut self, frame: Arc<str>) {
        self.len += frame.len();
        self.frames.push(frame);
    }

    fn is_full(&self) -> bool {
        self.len >= MAX_CHUNK_BYTES
    }

    fn into_bytes(mut self) -> Bytes {
        if self.frames.len() == 1 {
            return Bytes::from_owner(SharedFrame(self.frames.swap_remove(0)));
        }
        let mut bytes = bytes::BytesMut::with_capacity(self.len);
        for frame in &self.frames {
            bytes.extend_from_slice(frame.as_bytes());
        }
        bytes.freeze()
    }
}

/// An open event stream after its catch-up, polled by the connection that
/// sends it: a committed version goes from the hub's channel to the socket
/// without a task or a queue of its own in between.
struct LiveStream {
    feed: Feed,
    /// Given back when the body is dropped.
    _place: StreamPlace,
    live: LiveSubscriber,
    heartbeat: Duration,
    /// No chunk leaves before this, unless it is full (see
    /// [`LIVE_FLUSH_INTERVAL_MS`]).
    next_flush: tokio::time::Instant,
    /// When the stream ends whatever it sends: the expiry of the bearer
    /// token that opened it ([`LiveSubscriber::ends_at`]).
    ends: Option<tokio::time::Instant>,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

/// Why a stream ends: the server is shutting down, the stream fell more
/// than the hub's queue behind (the client resumes with `Last-Event-Id`),
/// or the access it was opened with was revoked or expired (the client's
/// reconnection is authorized afresh).
struct StreamEnd;

impl LiveStream {
    /// The next chunk to send: the frames of the versions this subscriber
    /// receives, or a heartbeat after [`LiveStream::heartbeat`] of silence.
    /// `None` ends the stream ([`StreamEnd`]).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let silence = tokio::time::sleep(self.heartbeat);
        tokio::pin!(silence);
        let ends = self.ends;
        let expiry = async move {
            match ends {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expiry);
        let first = loop {
            tokio::select! {
                frame = self.feed.next_frame(&mut self.live) => match frame.ok()? {
                    Some(frame) => break frame,
                    None => continue,
                },
                () = &mut silence => return Some(Bytes::from_static(HEARTBEAT_EVENT.as_bytes())),
                () = &mut expiry => return None,
                _ = self.shutdown.wait_for(|stopped| *stopped) => return None,
            }
        };
        // A stream that has just sent waits out the interval, gathering
        // what comes meanwhile into the same chunk; it keeps taking from
        // the hub's queue while it waits, so the wait never makes it lag.
        // Frames are polled first: at the deadline, whatever is already
        // waiting still joins the chunk.
        let mut chunk = Chunk::new(first);
        let flush = tokio::time::sleep_until(self.next_flush);
        tokio::pin!(flush);
        while !chunk.is_full() {
            tokio::select! {
                biased;
                frame = self.feed.next_frame(&mut self.live) => {
                    if let Some(frame) = frame.ok()? {
                        chunk.push(frame);
                    }
                }
                () = &mut flush => break,
            }
        }
        self.next_flush =
            tokio::time::Instant::now() + Duration::from_millis(LIVE_FLUSH_INTERVAL_MS);
        METRICS.events_sent(chunk.frames.len());
        Some(chunk.into_bytes())
    }
}

/// The commits the hub hands a stream, taken one version at a time: a
/// commit of many versions may fill more than one chunk.
struct Feed {
    receiver: broadcast::Receiver<LiveCommit>,
    /// The commit being sent, and how many of its versions were taken.
    current: Option<(LiveCommit, usize)>,
}

impl Feed {
    fn new(receiver: broadcast::Receiver<LiveCommit>) -> Self {
        Self {
            receiver,
            current: None,
        }
    }

    /// The next committed version's frame, if `live` receives it.
    ///
    /// Cancel-safe, as `select!` needs: it awaits only the hub's channel,
    /// and takes a version only when it returns its frame.
    async fn next_frame(
        &mut self,
        live: &mut LiveSubscriber,
    ) -> Result<Option<Arc<str>>, StreamEnd> {
        loop {
            if let Some((commit, taken)) = &mut self.current {
                if let Some(version) = commit.get(*taken) {
                    *taken += 1;
                    return live.frame(version).map_err(|_| StreamEnd);
                }
                self.current = None;
            }
            match self.receiver.recv().await {
                Ok(commit) => self.current = Some((commit, 0)),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    METRICS.stream_lagged();
                    return Err(StreamEnd);
                }
                Err(broadcast::error::RecvError::Closed) => return Err(StreamEnd),
            }
        }
    }
}

/// An event stream's body: the catch-up frames, then the live ones.
fn live_body(
    subscription: Subscription,
    live: LiveSubscriber,
    catch_up: Vec<String>,
    heartbeat: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Body {
    let ends = live.ends_at().map(|at| {
        let left = at.unix_millis() - crate::clock::Clock.now().unix_millis();
        tokio::time::Instant::now() + Duration::from_millis(u64::try_from(left).unwrap_or(0))
    });
    let stream = LiveStream {
        feed: Feed::new(subscription.receiver),
        _place: subscription.place,
        live,
        heartbeat,
        next_flush: tokio::time::Instant::now(),
        ends,
        shutdown,
    };
    METRICS.events_sent(catch_up.len());
    let catch_up = futures_util::stream::iter(catch_up.into_iter().map(Bytes::from));
    let live = futures_util::stream::unfold(stream, |mut stream| async move {
        let chunk = stream.next_chunk().await?;
        Some((chunk, stream))
    });
    Body::from_stream(catch_up.chain(live).map(Ok::<_, std::convert::Infallible>))
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

    fn note(&self, note: Note<'_>) {
        tracing::info!("{note}");
    }
}

impl Store for App {
    type Error = HostError;

    async fn user(&self, name: &UserName) -> Result<Option<User>, HostError> {
        Ok(self.users.get(&self.readers, name.as_str()).await?)
    }

    async fn users(&self) -> Result<Vec<User>, HostError> {
        Ok(self.readers.with(crate::users::list_users).await?)
    }

    async fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, HostError> {
        Ok(self.readers.fetch(statement).await?)
    }

    fn standings(&self) -> Option<(&StandingCache, Epoch)> {
        Some((&self.standings.cache, self.standings.epoch()?))
    }
}

impl Jobs for App {
    /// Decides a record write on a read snapshot here, on the request's
    /// thread, so that the single writer only checks, stamps and commits it.
    async fn run(&self, job: Job) -> Result<JobOutcome, WriteFailure> {
        // Taken before the snapshot, as for standings: a version read
        // across a store's removal is remembered under an epoch that is over.
        let memo = self.standings.epoch().map(|epoch| self.memo.at(epoch));
        let prepared = self
            .readers
            .with(|conn| Ok(writer::prepare(conn, job, memo)))
            .await
            .map_err(|error| write_failure(WriterError::Db(error)))?
            .map_err(write_failure)?;
        let (store, outcome) = match prepared {
            Prepared::Answered(outcome) => return Ok(outcome),
            Prepared::Decided(decided) => (decided.user_id(), self.writer.commit(decided).await),
        };
        let outcome = outcome.map_err(write_failure)?;
        if let (Some(memo), Some(store)) = (memo, store) {
            memo.remember_outcome(store, &outcome);
        }
        Ok(outcome)
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
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                    WriteFailure::StorageFull(format!("placing a blob: {error}"))
                }
                _ => WriteFailure::Failed(format!("placing a blob: {error}")),
            })?;
        self.writer.run(row).await.map_err(write_failure)
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
    type Subscription = Subscription;

    fn subscribe(&self, user: &User, anonymous: bool) -> Result<Subscription, StreamsFull> {
        self.hub.subscribe(user.id, anonymous)
    }

    fn event_stream(
        &self,
        subscription: Subscription,
        subscriber: Subscriber,
        catch_up: Vec<String>,
        last_seq: u64,
    ) -> Body {
        live_body(
            subscription,
            LiveSubscriber::new(subscriber, last_seq),
            catch_up,
            Duration::from_millis(self.settings.limits.heartbeat_ms),
            self.shutdown.clone(),
        )
    }
}

impl Guards for App {
    async fn rate(&self, rate: Rate<'_>, now: RecordDate) -> Result<(), Limited> {
        let limit = Limit::of_rate(&rate);
        let checked = self
            .rates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(rate, now);
        if checked.is_err() {
            METRICS.refused(limit);
        }
        checked
    }

    async fn check_nonce(&self, _user: &User, used: &NonceUse<'_>) -> Result<(), ReplayError> {
        // One guard for the server, in memory; a request dated further
        // ahead than the next start's fence covers has its nonce stored
        // before it goes on (folio_core::auth::replay).
        let accepted = self
            .replay
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(used)?;
        if let Accepted::Durable(statement) = accepted {
            let stored = self.writer.run(Job::Statements(vec![statement])).await;
            if let Err(error) = stored.map_err(write_failure).and_then(|done| {
                done.map(|_| ())
                    .map_err(|refused| WriteFailure::Failed(refused.to_string()))
            }) {
                self.report(&format!(
                    "storing the nonce of a request dated ahead: {error}"
                ));
                return Err(ReplayError::Full);
            }
        }
        Ok(())
    }
}

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
    use folio_core::service::events::{LiveVersion, StreamCaps};

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

    /// A stream of user 1 on `hub` with nothing to catch up on, and the
    /// sender that shuts it down (kept while the stream is read).
    fn open_stream(hub: &Arc<Hub>) -> (Body, tokio::sync::watch::Sender<bool>) {
        let subscription = hub.subscribe(1, false).expect("no caps");
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let live = LiveSubscriber::new(subscriber(), 0);
        let heartbeat = Duration::from_secs(60);
        (
            live_body(subscription, live, Vec::new(), heartbeat, shutdown),
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
        let subscription = hub.subscribe(1, false).expect("no caps");
        for seq in [6, 7] {
            publish(&hub, seq);
        }
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        // The catch-up read the store up to sequence 6.
        let catch_up = vec![folio_core::service::events::HEARTBEAT_EVENT.to_owned()];
        let body = live_body(
            subscription,
            LiveSubscriber::new(subscriber(), 6),
            catch_up,
            Duration::from_secs(60),
            shutdown,
        );
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
}
