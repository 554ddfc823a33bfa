//! [`UserStore`]: the Durable Object of one user (or of the server, for
//! requests outside any store), and the host of core's service there.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use folio_core::auth::{HeaderLookup, NonceUse, ReplayError, SignedRequest, nonce_table};
use folio_core::model::{BlobHash, RecordDate, UserName};
use folio_core::service::blob::{Received, UploadMeter};
use folio_core::service::consent::{SessionKey, hash_password, verify_password};
use folio_core::service::events::{
    CatchUp, EventStream, LiveCommit, LiveVersion, OpenStreams, Opened, Output, StreamCaps,
    StreamsFull,
};
use folio_core::service::federation::{NotificationAnswer, PeerAnswer, PeerFailure, PeerRequest};
use folio_core::service::fresh::Fresh;
use folio_core::service::limits::{Limits, header_section_len};
use folio_core::service::{AccountAttempts, Peers};
use folio_core::store::{Statement, user_by_name_sql, users_sql};
use folio_core::{
    Blobs, Bodies, BodyError, Effects, Guards, Host, Job, JobOutcome, Jobs, Limited, Note, Rate,
    RateLimits, Reply, ReplyBody, Row, Secrets, Settings, Store, Streams, UploadFailure, User,
    WriteFailure,
};
use futures_util::StreamExt;
use futures_util::future::{Either, join_all, select};
use futures_util::lock::Mutex;
use futures_util::pin_mut;
use futures_util::stream::LocalBoxStream;
use worker::{
    D1Database, Data, Delay, DurableObject, Env, FixedLengthStream, Headers, Range, Request,
    Response, ResponseBody, State, durable_object,
};

use crate::{d1, rates};

/// Whether plain HTTP is allowed: only in the dev environment.
pub fn is_dev(env: &Env) -> bool {
    env.var("FOLIO_DEV").is_ok_and(|v| v.to_string() == "1")
}

/// One open event stream: core's [`EventStream`], shared by the object,
/// which hands it each commit of the user, and by the response body that
/// drives it ([`live_body`]). What it sends, when, and when it ends (a
/// stream more than its queue behind, one whose bearer token expired) is
/// the stream's; the object keeps the timer and the wake-ups.
struct LiveSlot {
    stream: RefCell<EventStream>,
    /// Opened without authentication (counted apart against the caps).
    anonymous: bool,
    /// Set when its place is given back: the body ended or was dropped
    /// (the client went away), or the request failed before it began.
    closed: Cell<bool>,
    /// A commit was handed to the stream since its body last looked.
    committed: Cell<bool>,
    /// The body waiting for a commit.
    waker: RefCell<Option<Waker>>,
}

impl LiveSlot {
    fn is_open(&self) -> bool {
        !self.closed.get() && self.stream.borrow().ended().is_none()
    }

    /// Hands a commit to the stream and wakes its body.
    fn handle_commit(&self, commit: &LiveCommit) {
        self.stream
            .borrow_mut()
            .handle_commit(LiveCommit::clone(commit));
        self.committed.set(true);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Returns once a commit was handed to the stream since the last
    /// return (at once if one was meanwhile).
    async fn committed(&self) {
        std::future::poll_fn(|cx| {
            if self.committed.replace(false) {
                return Poll::Ready(());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
    }
}

/// A stream's place among the user's streams, counted against the caps
/// while it is held; dropping it gives the place back.
pub struct StreamPlace(Rc<LiveSlot>);

impl Drop for StreamPlace {
    fn drop(&mut self) {
        self.0.closed.set(true);
    }
}

/// An event stream's body: its stream started with the catch-up, then
/// driven with the object's timer until it ends.
fn live_body(place: StreamPlace, catch_up: CatchUp) -> LocalBoxStream<'static, Vec<u8>> {
    place.0.stream.borrow_mut().start(catch_up);
    futures_util::stream::unfold(place, |place| async move {
        let chunk = next_chunk(&place.0).await?;
        Some((chunk, place))
    })
    .boxed_local()
}

/// The next chunk a stream sends; `None` ends it.
async fn next_chunk(slot: &LiveSlot) -> Option<Vec<u8>> {
    loop {
        let now = now();
        let output = slot.stream.borrow_mut().poll_output(now);
        match output {
            Output::Send(chunk) => return Some(chunk.to_bytes()),
            Output::End(_) => return None,
            Output::Wait(until) => {
                let wait = Duration::from_millis(now.millis_until(until));
                let committed = slot.committed();
                pin_mut!(committed);
                select(committed, Delay::from(wait)).await;
            }
        }
    }
}

/// The Durable Object of a user's store.
#[durable_object]
pub struct UserStore {
    state: State,
    env: Env,
    settings: Settings,
    session_key: Option<SessionKey>,
    /// Whether the nonce table exists in the object's storage.
    nonces_ready: Cell<bool>,
    /// The rates of an address are counted in its
    /// [`RateObject`](crate::rates::RateObject), across every user.
    rates: Limits,
    /// An app's writes, counted here: an app writes to one user's store.
    writes: RefCell<RateLimits>,
    caps: StreamCaps,
    /// One write job at a time: the store's one ordered place.
    writing: Mutex<()>,
    /// The user's open event streams.
    streams: RefCell<Vec<Rc<LiveSlot>>>,
    /// The user whose outbox this object delivers (federation): known once
    /// a job queued a notification, and kept in the object's storage
    /// ([`OUTBOX_USER_KEY`]) for the alarms after an eviction.
    outbox_user: Cell<Option<i64>>,
    /// The (user, recipient) deliveries running now, in any of the
    /// object's outbox rounds: none is started twice.
    delivering: RefCell<Vec<folio_core::service::DeliveryKey>>,
}

/// Where the object's storage keeps the id of the user whose outbox it
/// delivers.
const OUTBOX_USER_KEY: &str = "outbox_user";

/// A reply body on the edge.
pub enum EdgeStream {
    /// A blob's bytes from R2.
    Blob(ResponseBody),
    /// An event stream.
    Events(LocalBoxStream<'static, Vec<u8>>),
}

/// The current time, as core reads it.
pub fn now() -> RecordDate {
    let millis = js_sys::Date::now() as i64;
    RecordDate::from_unix_millis(millis)
        .unwrap_or_else(|_| RecordDate::from_unix_ticks(0).expect("the epoch is a date"))
}

impl UserStore {
    fn db(&self) -> worker::Result<D1Database> {
        self.env.d1("DB")
    }

    fn bucket(&self) -> worker::Result<worker::Bucket> {
        self.env.bucket("BLOBS")
    }

    /// Hands a committed job's versions to the open streams, as one
    /// commit.
    fn publish(&self, versions: Vec<LiveVersion>) {
        if versions.is_empty() {
            return;
        }
        // One frame of each version for every stream that receives it.
        let commit = LiveCommit::from(versions);
        let mut streams = self.streams.borrow_mut();
        streams.retain(|slot| slot.is_open());
        for slot in streams.iter() {
            slot.handle_commit(&commit);
        }
    }

    /// Runs a job in this store's one ordered place, at the time it runs,
    /// and applies its effects.
    async fn run_job(&self, job: Job) -> Result<JobOutcome, WriteFailure> {
        let _writing = self.writing.lock().await;
        let db = self.db().map_err(write_failure)?;
        let (outcome, effects) = d1::run_job(&db, job, now()).await.map_err(write_failure)?;
        self.apply_effects(effects).await;
        Ok(outcome)
    }

    /// Applies the effects of a committed job (D1 acknowledged its batch):
    /// its versions go to the open streams, and its notifications (queued,
    /// or made due sooner) wake the outbox. Apps' standings are not kept between requests here, so a
    /// change to one needs nothing.
    async fn apply_effects(&self, effects: Effects) {
        let wakes_outbox = effects.wakes_outbox();
        self.publish(effects.live);
        if wakes_outbox && let Some(user) = effects.store {
            self.deliver_soon(user).await;
        }
    }

    /// Wakes the object at once to deliver `user`'s outbox (its alarm).
    async fn deliver_soon(&self, user: i64) {
        let storage = self.state.storage();
        if self.outbox_user.replace(Some(user)) != Some(user)
            && let Err(error) = storage.put(OUTBOX_USER_KEY, user).await
        {
            worker::console_error!("could not keep the outbox's user: {error}");
        }
        if !self.start_round() {
            self.wake_at(js_sys::Date::now() as i64).await;
        }
    }

    /// Starts an outbox round in a request of the object's own
    /// ([`OUTBOX_ROUND_URL`]), without waiting for it: an object runs one
    /// alarm at a time, but its requests run side by side, so a round
    /// that waits on a slow recipient holds back no other round. Whether
    /// it could be started (else the caller runs the round itself, or
    /// sets the alarm).
    fn start_round(&self) -> bool {
        let id = self.state.id().to_string();
        let stub = self
            .env
            .durable_object(crate::USERS)
            .and_then(|namespace| namespace.id_from_string(&id)?.get_stub());
        let request = {
            let mut init = worker::RequestInit::new();
            init.with_method(worker::Method::Post);
            Request::new_with_init(OUTBOX_ROUND_URL, &init)
        };
        let (stub, request) = match (stub, request) {
            (Ok(stub), Ok(request)) => (stub, request),
            (Err(error), _) | (_, Err(error)) => {
                worker::console_error!("could not start an outbox round: {error}");
                return false;
            }
        };
        self.state.wait_until(async move {
            if let Err(error) = stub.fetch_with_request(request).await {
                worker::console_error!("an outbox round failed: {error}");
            }
        });
        true
    }

    /// Sets the object's alarm to `at_ms` (Unix milliseconds) unless it is
    /// due sooner already.
    async fn wake_at(&self, at_ms: i64) {
        let storage = self.state.storage();
        let due = storage.get_alarm().await.ok().flatten();
        if due.is_none_or(|due| due > at_ms) {
            let offset = at_ms.saturating_sub(js_sys::Date::now() as i64).max(0);
            if let Err(error) = storage.set_alarm(offset).await {
                worker::console_error!("could not set the alarm: {error}");
            }
        }
    }

    /// One outbox round: delivers the due notifications of this object's
    /// user that no other round is delivering, if it has any; when the
    /// next one is due. Each recipient's delivery runs at once beside the
    /// others under core's deadline and records its outcome as it ends;
    /// rounds run side by side ([`start_round`](Self::start_round)), each
    /// leaving out the (user, recipient) deliveries another is running, so
    /// a slow recipient delays no other and none is started twice.
    async fn deliver(&self) -> Option<i64> {
        let user = match self.outbox_user.get() {
            Some(user) => user,
            None => {
                let stored: Option<i64> = self.state.storage().get(OUTBOX_USER_KEY).await.ok()?;
                self.outbox_user.set(stored);
                stored?
            }
        };
        let retry = folio_core::service::federation::RetryPolicy::default();
        let busy = self.delivering.borrow().clone();
        let room = folio_core::service::MAX_DELIVERIES_AT_ONCE.saturating_sub(busy.len());
        let planned =
            folio_core::service::plan_deliveries(self, now(), Some(user), &busy, room).await;
        let planned = match planned {
            Ok(deliveries) => deliveries,
            Err(error) => {
                worker::console_error!("the outbox could not be read: {error}");
                return Some(js_sys::Date::now() as i64 + OUTBOX_RETRY_MS);
            }
        };
        // Another round may have started some meanwhile: each is taken
        // once, here, with no wait between the look and the taking.
        let deliveries: Vec<_> = {
            let mut delivering = self.delivering.borrow_mut();
            planned
                .into_iter()
                .filter(|delivery| {
                    let key = delivery.key();
                    let free = !delivering.contains(&key);
                    if free {
                        delivering.push(key);
                    }
                    free
                })
                .collect()
        };
        let reports = join_all(deliveries.iter().map(|delivery| async {
            let fresh = Fresh::from_seed(random_seed());
            let sending = delivery.run(self, now(), &fresh, &retry);
            let deadline = Delay::from(Duration::from_millis(
                folio_core::service::DELIVERY_DEADLINE_MS,
            ));
            pin_mut!(sending);
            let report = match select(sending, deadline).await {
                Either::Left((report, _)) => report,
                Either::Right(((), _)) => {
                    delivery.deadline_passed(self, now(), &fresh, &retry).await
                }
            };
            let key = delivery.key();
            self.delivering
                .borrow_mut()
                .retain(|running| *running != key);
            report
        }))
        .await;
        for error in reports.iter().flat_map(|report| &report.errors) {
            worker::console_warn!("a notification was not delivered: {error}");
        }
        let busy = self.delivering.borrow().clone();
        match folio_core::service::next_due(self, Some(user), &busy).await {
            Ok(next) => next,
            Err(error) => {
                worker::console_error!("the outbox could not be read: {error}");
                Some(js_sys::Date::now() as i64 + OUTBOX_RETRY_MS)
            }
        }
    }
}

/// When the outbox could not be read, the next try.
const OUTBOX_RETRY_MS: i64 = 5_000;

impl DurableObject for UserStore {
    fn new(state: State, env: Env) -> Self {
        let base_url = env
            .var("FOLIO_BASE_URL")
            .map(|v| v.to_string().trim_end_matches('/').to_owned())
            .unwrap_or_default();
        let session_key = env
            .secret("FOLIO_SESSION_KEY")
            .ok()
            .and_then(|secret| hex::decode(secret.to_string()).ok())
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .map(SessionKey::from_bytes);
        if session_key.is_none() {
            worker::console_error!(
                "FOLIO_SESSION_KEY is not 64 hex digits: consent-page sessions use a key of this instance only"
            );
        }
        let limits = rates::configured(&env);
        let caps = StreamCaps::of(&limits);
        let writes = RefCell::new(rates::kept_by_user(&limits));
        let rates = limits.clone();
        UserStore {
            state,
            settings: Settings::new(base_url, None, limits, env!("CARGO_PKG_VERSION")),
            env,
            session_key,
            nonces_ready: Cell::new(false),
            writes,
            rates,
            caps,
            writing: Mutex::new(()),
            streams: RefCell::new(Vec::new()),
            outbox_user: Cell::new(None),
            delivering: RefCell::new(Vec::new()),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let url = req.url()?;
        if url.as_str() == LOCAL_DELIVERY_URL {
            return self.receive_handed_over(req).await;
        }
        if url.as_str() == OUTBOX_ROUND_URL {
            if let Some(at) = self.deliver().await {
                self.wake_at(at).await;
            }
            return Response::empty();
        }
        let headers = HeaderList::of(req.headers());
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let method = req.method().to_string();
        let peer = headers
            .get("cf-connecting-ip")
            .and_then(|ip| ip.parse().ok());
        let request = folio_core::Request {
            method: &method,
            target: &target,
            host: &host,
            port: SignedRequest::port_of(url.port()),
            headers: &headers,
            header_bytes: header_section_len(
                headers.0.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
            ),
            peer,
            now: now(),
            fresh: Fresh::from_seed(random_seed()),
            // The user object keeps no Resident: it reads its own storage.
            epoch: None,
        };
        let started = js_sys::Date::now();
        // Cloudflare's id of the request, as its logs name it.
        let request_id = headers.get("cf-ray").unwrap_or_default().to_owned();
        let reply = folio_core::handle(self, request, req).await;
        log_request(&request_id, &method, &reply, js_sys::Date::now() - started);
        response(reply)
    }

    /// The outbox's alarm. (Event streams keep their own timers: see
    /// [`live_body`].)
    async fn alarm(&self) -> worker::Result<Response> {
        // The round runs in a request of its own when it can, so that the
        // alarm (one at a time) never waits on a slow recipient.
        let next_delivery = match self.outbox_user.get().is_some() && self.start_round() {
            true => None,
            false => self.deliver().await,
        };
        if let Some(at) = next_delivery {
            self.wake_at(at).await;
        }
        Response::empty()
    }
}

/// A request's headers, copied once (core looks them up many times).
struct HeaderList(Vec<(String, String)>);

impl HeaderList {
    fn of(headers: &Headers) -> Self {
        HeaderList(
            headers
                .entries()
                .map(|(name, value)| (name.to_ascii_lowercase(), value))
                .collect(),
        )
    }

    fn get(&self, lowercase_name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name == lowercase_name)
            .map(|(_, value)| value.as_str())
    }
}

impl HeaderLookup for HeaderList {
    fn header(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.get(lowercase_name).map(str::as_bytes)
    }
}

/// Core's reply as a Workers response.
fn response(reply: Reply<EdgeStream>) -> worker::Result<Response> {
    let headers = Headers::new();
    for (name, value) in &reply.headers {
        headers.set(name, value)?;
    }
    let response = match reply.body {
        ReplyBody::Empty => Response::empty()?,
        ReplyBody::Bytes(bytes) => Response::from_bytes(bytes)?,
        ReplyBody::Stream(EdgeStream::Blob(body)) => Response::from_body(body)?,
        ReplyBody::Stream(EdgeStream::Events(chunks)) => {
            Response::from_stream(chunks.map(Ok::<Vec<u8>, worker::Error>))?
        }
    };
    Ok(response.with_status(reply.status).with_headers(headers))
}

fn write_failure(error: impl std::fmt::Display) -> WriteFailure {
    WriteFailure::Failed(error.to_string())
}

fn upload_failure(error: impl std::fmt::Display) -> UploadFailure {
    UploadFailure::Failed(error.to_string())
}

/// A user's row, as core decodes it: a bad one is the store's failure.
fn user_of(row: &Row) -> worker::Result<User> {
    User::from_row(row).map_err(|error| worker::Error::RustError(format!("a user's row: {error}")))
}

/// One JSON line per request, with the fields of the native host's request
/// lines (`wrangler tail` and Workers Logs show it): never the path, query,
/// headers or body, which may carry a bearer token, a signature, a cookie
/// or a password.
fn log_request<S>(request_id: &str, method: &str, reply: &folio_core::Reply<S>, took_ms: f64) {
    let line = serde_json::json!({
        "message": "request",
        "request_id": request_id,
        "route": reply.route,
        "method": method,
        "status": reply.status,
        "problem": reply.problem.map(|kind| kind.code()),
        "duration_ms": took_ms,
    });
    worker::console_log!("{line}");
}

/// 32 bytes from the runtime's `crypto.getRandomValues`.
fn random_seed() -> [u8; 32] {
    let mut bytes = [0; 32];
    getrandom::fill(&mut bytes).expect("the Workers runtime gives randomness");
    bytes
}

/// The address of a local delivery handed to a recipient's object: a host
/// only object stubs reach (requests from the internet carry the worker's
/// own host names).
const LOCAL_DELIVERY_URL: &str = "https://users.internal/federation/local-delivery";

/// The address of an outbox round an object starts in itself
/// ([`UserStore::start_round`]); like [`LOCAL_DELIVERY_URL`], refused from
/// outside.
const OUTBOX_ROUND_URL: &str = "https://users.internal/federation/outbox-round";

/// The host of [`LOCAL_DELIVERY_URL`], which the worker refuses from outside.
pub const INTERNAL_HOST: &str = "users.internal";

/// A local delivery as it travels between two users' objects.
#[derive(serde::Serialize, serde::Deserialize)]
struct LocalDelivery {
    author: (i64, String, String),
    recipient: (i64, String, String),
    links: Vec<folio_core::model::VersionLink>,
}

fn user_tuple(user: &User) -> (i64, String, String) {
    (user.id, user.name.clone(), user.entity.to_string())
}

fn tuple_user((id, name, entity): (i64, String, String)) -> Option<User> {
    Some(User {
        id,
        name,
        entity: entity.parse().ok()?,
    })
}

impl UserStore {
    /// Receives a local delivery another user's object handed over: this
    /// object runs the recipient's writes and streams.
    async fn receive_handed_over(&self, mut req: Request) -> worker::Result<Response> {
        let delivery: LocalDelivery = serde_json::from_str(&req.text().await?)?;
        let (Some(author), Some(recipient)) =
            (tuple_user(delivery.author), tuple_user(delivery.recipient))
        else {
            return Response::error("not a local delivery", 400);
        };
        let fresh = Fresh::from_seed(random_seed());
        let received = folio_core::service::receive_locally(
            self,
            &author,
            &recipient,
            &delivery.links,
            now(),
            &fresh,
        )
        .await;
        match received {
            Ok(answer) => Response::ok(answer.to_json()),
            Err(error) => Response::error(error, 502),
        }
    }
}

impl Peers for UserStore {
    /// Local deliveries run in the recipient's object, which serialises its
    /// writes and holds its event streams.
    async fn hand_over(
        &self,
        author: &User,
        recipient: &User,
        links: &[folio_core::model::VersionLink],
    ) -> Option<Result<NotificationAnswer, String>> {
        let handed = async {
            let delivery = LocalDelivery {
                author: user_tuple(author),
                recipient: user_tuple(recipient),
                links: links.to_vec(),
            };
            let stub = self
                .env
                .durable_object(crate::USERS)?
                .id_from_name(&recipient.name)?
                .get_stub()?;
            let mut init = worker::RequestInit::new();
            init.with_method(worker::Method::Post)
                .with_body(Some(serde_json::to_string(&delivery)?.into()));
            let request = Request::new_with_init(LOCAL_DELIVERY_URL, &init)?;
            let mut answer = stub.fetch_with_request(request).await?;
            match answer.status_code() {
                200..=299 => Ok(Ok(NotificationAnswer::parse(&answer.bytes().await?))),
                status => Ok(Err(format!("{status}: {}", answer.text().await?))),
            }
        };
        let handed: worker::Result<Result<NotificationAnswer, String>> = handed.await;
        Some(handed.unwrap_or_else(|error| Err(error.to_string())))
    }

    async fn send(&self, request: PeerRequest) -> Result<PeerAnswer, PeerFailure> {
        let dev = is_dev(&self.env);
        let var = |name: &str| self.env.var(name).ok().map(|v| v.to_string());
        let options = crate::peers::PeerOptions {
            allow_http: dev,
            allow_private: dev && var("FOLIO_ALLOW_PRIVATE_PEERS").as_deref() == Some("1"),
            relay: var("FOLIO_PEER_RELAY")
                .filter(|_| dev)
                .and_then(|relay| worker::Url::parse(&relay).ok()),
        };
        crate::peers::send(options, request).await
    }
}

impl Host for UserStore {
    fn settings(&self) -> &Settings {
        &self.settings
    }

    fn report(&self, error: &dyn std::fmt::Display) {
        worker::console_error!("internal error: {error}");
    }

    fn note(&self, note: Note<'_>) {
        worker::console_log!("{note}");
    }
}

impl Store for UserStore {
    type Error = worker::Error;

    async fn user(&self, name: &UserName) -> worker::Result<Option<User>> {
        let rows = d1::fetch(&self.db()?, &user_by_name_sql(name.as_str())).await?;
        rows.first().map(user_of).transpose()
    }

    async fn users(&self) -> worker::Result<Vec<User>> {
        let rows = d1::fetch(&self.db()?, &users_sql()).await?;
        rows.iter().map(user_of).collect()
    }

    async fn fetch(&self, statement: &Statement) -> worker::Result<Vec<Row>> {
        d1::fetch(&self.db()?, statement).await
    }
}

impl Jobs for UserStore {
    async fn run(&self, job: Job) -> Result<JobOutcome, WriteFailure> {
        self.run_job(job).await
    }
}

impl Bodies for UserStore {
    type Body = Request;
    type Stream = EdgeStream;

    async fn read_body(&self, mut body: Request, max: usize) -> Result<Vec<u8>, BodyError> {
        let mut chunks = body.stream().map_err(|_| BodyError::Broken)?;
        let mut bytes = Vec::new();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|_| BodyError::Broken)?;
            if bytes.len() + chunk.len() > max {
                // The rest is read and dropped, never kept.
                while let Some(Ok(_)) = chunks.next().await {}
                return Err(BodyError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    async fn discard(&self, mut body: Request) {
        // Read to the end, chunk by chunk: an unread body sent on by the
        // worker entry fails its stream once this object has answered.
        if let Ok(mut chunks) = body.stream() {
            while let Some(Ok(_)) = chunks.next().await {}
        }
    }
}

/// Where an upload's bytes are written as they arrive (its hash is known
/// only at the end), before [`UserStore::place_blob`] stores them under
/// their hash. The cron's upkeep removes what a stopped upload left here.
pub const UNFINISHED_UPLOADS: &str = "uploads/";

impl Blobs for UserStore {
    /// The R2 key of the upload's bytes, under [`UNFINISHED_UPLOADS`]: they
    /// go to R2 chunk by chunk, never whole into the object's memory.
    type Upload = String;

    async fn receive_blob(
        &self,
        mut body: Request,
        meter: UploadMeter,
    ) -> Result<(String, Received), UploadFailure> {
        let declared = meter.declared();
        let chunks = body
            .stream()
            .map_err(|e| UploadFailure::Broken(e.to_string()))?;
        // Each chunk is counted and hashed on its way to R2; the first byte
        // past the declared length ends the stream, and so the write.
        let meter = Rc::new(RefCell::new(meter));
        let metered = {
            let meter = Rc::clone(&meter);
            chunks.map(move |chunk| {
                let chunk = chunk?;
                meter
                    .borrow_mut()
                    .feed(&chunk)
                    .map_err(|mismatch| worker::Error::RustError(mismatch.to_string()))?;
                Ok(chunk)
            })
        };
        let key = format!("{UNFINISHED_UPLOADS}{}", hex::encode(&random_seed()[..16]));
        let bucket = self.bucket().map_err(upload_failure)?;
        let written = bucket
            .put(
                &key,
                Data::Stream(FixedLengthStream::wrap(metered, declared)),
            )
            .execute()
            .await;
        let received = meter.borrow().clone().finish();
        let failure = match (&written, received) {
            (Ok(_), Ok(received)) => return Ok((key, received)),
            (_, Err(mismatch)) => UploadFailure::Length(mismatch),
            (Err(error), Ok(_)) => upload_failure(error),
        };
        if written.is_ok() {
            self.discard_blob(key).await;
        }
        Err(failure)
    }

    async fn discard_blob(&self, key: String) {
        let deleted = match self.bucket() {
            Ok(bucket) => bucket.delete(&key).await,
            Err(error) => Err(error),
        };
        if let Err(error) = deleted {
            // The cron's upkeep removes it later.
            self.report(&format!("removing the unfinished upload {key}: {error}"));
        }
    }

    async fn place_blob(
        &self,
        key: String,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure> {
        // Copied under the hash, chunk by chunk, and checked by R2 against it.
        let bucket = self.bucket().map_err(write_failure)?;
        let upload = bucket
            .get(&key)
            .execute()
            .await
            .map_err(write_failure)?
            .ok_or_else(|| write_failure(format!("the upload {key} went away")))?;
        let size = upload.size();
        let bytes = upload
            .body()
            .ok_or_else(|| write_failure(format!("the upload {key} has no body")))?
            .stream()
            .map_err(write_failure)?;
        bucket
            .put(
                hash.to_string(),
                Data::Stream(FixedLengthStream::wrap(bytes, size)),
            )
            .sha256(hash.as_bytes().to_vec())
            .execute()
            .await
            .map_err(write_failure)?;
        self.discard_blob(key).await;
        self.run_job(row).await
    }

    async fn keep_blob(
        &self,
        bytes: Vec<u8>,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure> {
        // Checked by R2 against the hash core checked.
        self.bucket()
            .map_err(write_failure)?
            .put(hash.to_string(), Data::Bytes(bytes))
            .sha256(hash.as_bytes().to_vec())
            .execute()
            .await
            .map_err(write_failure)?;
        self.run_job(row).await
    }

    async fn blob_size(&self, hash: &BlobHash) -> worker::Result<Option<u64>> {
        Ok(self
            .bucket()?
            .head(hash.to_string())
            .await?
            .map(|object| object.size()))
    }

    async fn blob_bytes(
        &self,
        hash: &BlobHash,
        start: u64,
        len: u64,
    ) -> worker::Result<EdgeStream> {
        let object = self
            .bucket()?
            .get(hash.to_string())
            .range(Range::OffsetWithLength {
                offset: start,
                length: len,
            })
            .execute()
            .await?
            .ok_or_else(|| worker::Error::RustError("the blob went away".into()))?;
        let body = object
            .body()
            .ok_or_else(|| worker::Error::RustError("an R2 object without a body".into()))?;
        Ok(EdgeStream::Blob(body.response_body()?))
    }

    async fn small_blob(&self, hash: &BlobHash, max: usize) -> Option<Vec<u8>> {
        let object = self
            .bucket()
            .ok()?
            .get(hash.to_string())
            .execute()
            .await
            .ok()??;
        if object.size() > max as u64 {
            return None;
        }
        object.body()?.bytes().await.ok()
    }
}

impl Streams for UserStore {
    type Subscription = StreamPlace;

    fn subscribe(
        &self,
        _user: &User,
        anonymous: bool,
        stream: EventStream,
    ) -> Result<StreamPlace, StreamsFull> {
        let mut streams = self.streams.borrow_mut();
        streams.retain(|slot| slot.is_open());
        // The object holds one user's streams; no object sees the server's.
        let for_user = Opened {
            all: streams.len(),
            anonymous: streams.iter().filter(|slot| slot.anonymous).count(),
        };
        let open = OpenStreams {
            on_server: None,
            for_user,
        };
        self.caps.admit(open, anonymous)?;
        let slot = Rc::new(LiveSlot {
            stream: RefCell::new(stream),
            anonymous,
            closed: Cell::new(false),
            committed: Cell::new(false),
            waker: RefCell::new(None),
        });
        streams.push(Rc::clone(&slot));
        Ok(StreamPlace(slot))
    }

    fn event_stream(&self, place: StreamPlace, catch_up: CatchUp) -> EdgeStream {
        EdgeStream::Events(live_body(place, catch_up))
    }
}

/// Where the object keeps an account's sign-in attempts beyond its memory.
fn account_attempts_key(account: &str) -> String {
    format!("sign_in_attempts:{account}")
}

impl UserStore {
    /// Counts a password typed for `account` in core's budget, kept in the
    /// object's storage as well, so an eviction between two attempts (a
    /// guesser pausing for it) does not start the count again. Storage that
    /// fails refuses the attempt, as an unreachable counter does.
    async fn count_account(
        &self,
        rate: Rate<'_>,
        account: &str,
        now: RecordDate,
    ) -> Result<(), Limited> {
        let storage = self.state.storage();
        let key = account_attempts_key(account);
        if self.writes.borrow().account_attempts(account).is_none() {
            match storage.get::<String>(&key).await {
                Ok(Some(text)) => match serde_json::from_str::<AccountAttempts>(&text) {
                    Ok(kept) => self.writes.borrow_mut().restore_account(account, kept),
                    Err(error) => worker::console_error!("{key}: {error}"),
                },
                Ok(None) => {}
                Err(error) => {
                    worker::console_error!("reading {key}: {error}");
                    return Err(Limited::counter_unreachable());
                }
            }
        }
        let verdict = self.writes.borrow_mut().check(rate, now);
        let kept = self.writes.borrow().account_attempts(account);
        let stored = match kept {
            Some(attempts) => match serde_json::to_string(&attempts) {
                Ok(text) => storage.put(&key, text).await,
                Err(error) => Err(error.into()),
            },
            None => storage.delete(&key).await.map(|_| ()),
        };
        if let Err(error) = stored {
            worker::console_error!("keeping {key}: {error}");
            if verdict.is_ok() && matches!(rate, Rate::AccountSignIn(_)) {
                return Err(Limited::counter_unreachable());
            }
        }
        verdict
    }
}

impl Guards for UserStore {
    async fn rate(&self, rate: Rate<'_>, now: RecordDate) -> Result<(), Limited> {
        if let Rate::AccountSignIn(account) | Rate::AccountSignedIn(account) = rate {
            return self.count_account(rate, account, now).await;
        }
        match rates::count_per_address(&self.env, &self.rates, rate, now).await {
            Some(verdict) => verdict,
            None => self.writes.borrow_mut().check(rate, now),
        }
    }

    async fn check_nonce(&self, _user: &User, used: &NonceUse<'_>) -> Result<(), ReplayError> {
        // In the object's own storage: strongly consistent, and it outlives
        // an eviction (memory would not).
        let sql = self.state.storage().sql();
        let recorded = (|| {
            if !self.nonces_ready.get() {
                for statement in nonce_table::CREATE {
                    sql.exec(statement, None)?;
                }
                self.nonces_ready.set(true);
            }
            sql.exec(
                nonce_table::FORGET,
                vec![nonce_table::cutoff(used.now).into()],
            )?;
            let values = vec![
                used.app.to_string().into(),
                used.nonce.to_owned().into(),
                used.ts_ms.into(),
            ];
            Ok::<_, worker::Error>(sql.exec(nonce_table::RECORD, values)?.rows_written())
        })();
        match recorded {
            Ok(rows) => nonce_table::verdict(rows),
            Err(error) => {
                self.report(&format!("the nonce table: {error}"));
                Err(ReplayError::Full)
            }
        }
    }
}

impl Secrets for UserStore {
    fn session_key(&self) -> &SessionKey {
        static MISSING: std::sync::OnceLock<SessionKey> = std::sync::OnceLock::new();
        match &self.session_key {
            Some(key) => key,
            // Without the secret no session verifies: each key is random.
            None => MISSING.get_or_init(|| SessionKey::from_bytes(random_seed())),
        }
    }

    async fn verify_password(&self, hash: String, password: String) -> bool {
        verify_password(&hash, &password)
    }

    async fn hash_password(&self, password: String, salt: [u8; 16]) -> Option<String> {
        hash_password(&password, salt)
    }
}
