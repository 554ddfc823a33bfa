// What both service test crates share, with no SQLite: requests built and
// signed here (the signature input is written out from PROTOCOL.md §10,
// not with core's own code), request bodies, the counters a host keeps
// (rates, nonces, open streams) on core's own types, the fake host itself
// ([`Fake`], generic over the store that each crate gives it), and
// readers of the answers. Included with `#[path]` by `service.rs` (the
// SQLite fake host) and `service_pure.rs` (the in-memory one, also run in
// wasm32), so it uses only what wasm-tests depends on too.

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer as _, SigningKey};
use folio_core::auth::{HeaderLookup, NonceUse, ReplayError, ReplayGuard};
use folio_core::model::dialect::Dialect;
use folio_core::model::{BlobHash, RecordDate, RecordId, UserName};
use folio_core::problem::{PROBLEM_CONTENT_TYPE, default_docs_url};
use folio_core::service::blob::{Received, UploadMeter};
use folio_core::service::consent::SessionKey;
use folio_core::service::events::{
    CatchUp, EventStream, OpenStreams, Opened, StreamCaps, StreamsFull, Subscriber,
};
use folio_core::service::fresh::Fresh;
use folio_core::service::jobs::{Decided, Effects, WriteJob};
use folio_core::service::jobs::{Job, JobOutcome};
use folio_core::service::limits::{Limits, RateLimit, header_section_len};
use folio_core::service::standing::Epoch;
use folio_core::service::store::Row;
use folio_core::service::{
    Blobs, Bodies, BodyError, Guards, Host, Jobs, Limited, Note, Rate, RateLimits, Reply,
    ReplyBody, Request, Resident, Secrets, Settings, Store, Streams, UploadFailure, User,
    WriteFailure, handle,
};
use folio_core::store::Statement;
use serde_json::Value;

/// The one user of the fakes: `{user}` segment, entity, and the host name
/// its requests address.
pub const USER: &str = "alice";
pub const ENTITY: &str = "alice.example";
pub const BASE_URL: &str = "https://alice.example";
/// The consent-page password of [`USER`], and its argon2id hash with the
/// server's parameters (`folio_core::service::consent::check_password_hash`).
pub const PASSWORD: &str = "correct horse";
pub const PASSWORD_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$Zm9saW8tdGVzdC1zYWx0IQ$iGwh47Jv6zU0hs4hkbHbwju1nkq4yk3rlih/Tyz32xA";
/// [`PASSWORD`]'s argon2id hash with other parameters than the server's
/// (m=8 KiB, one pass), as an archive from elsewhere may bring it.
pub const OFF_POLICY_PASSWORD_HASH: &str =
    "$argon2id$v=19$m=8,t=1,p=1$Zm9saW8tdGVzdC1zYWx0IQ$dGWMpzxvQvrn6A77CjQpoAB4ODRjrOkI4Bb7L9kjthw";

/// When every request arrives unless a test says otherwise.
pub const REQUEST_NOW: &str = "2026-11-21T10:00:00Z";
/// When the fake's scheduler runs write jobs: never the request's time,
/// so a test tells the two apart.
pub const SCHEDULER_NOW: &str = "2026-11-21T10:00:07.5Z";
/// When the fakes started: their replay guard's boot fence.
pub const BOOT: &str = "2026-11-21T09:00:00Z";

pub const SEED: [u8; 32] = [0x5e; 32];
pub const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
pub const OTHER_PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

pub fn date(text: &str) -> RecordDate {
    text.parse().expect("a date")
}

pub fn now() -> RecordDate {
    date(REQUEST_NOW)
}

pub fn millis_after(at: RecordDate, millis: i64) -> RecordDate {
    RecordDate::from_unix_millis(at.unix_millis() + millis).expect("a date")
}

/// What a fake host is configured with: core's limits (PROTOCOL.md §13's
/// defaults unless a test changes one).
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub limits: Limits,
}

impl Config {
    /// PROTOCOL.md §13's defaults, but for the rate `limit` picks:
    /// `per_second`, with room for `burst`.
    pub fn with_rate(
        limit: fn(&mut Limits) -> &mut Option<RateLimit>,
        per_second: u32,
        burst: u32,
    ) -> Self {
        let mut config = Config::default();
        *limit(&mut config.limits) = Some(RateLimit { per_second, burst });
        config
    }

    pub fn settings(&self) -> Settings {
        Settings {
            dialect: Dialect::Svc,
            base_url: BASE_URL.to_owned(),
            docs_url: default_docs_url(BASE_URL),
            limits: self.limits.clone(),
            version: "0.0.0-test".to_owned(),
        }
    }
}

/// Request headers, looked up case-insensitively as HTTP names are.
#[derive(Debug, Clone, Default)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

impl HeaderLookup for Headers {
    fn header(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.get(lowercase_name).map(str::as_bytes)
    }
}

/// A request body as a host receives it: chunks, perhaps cut short by a
/// broken connection.
#[derive(Debug, Clone, Default)]
pub struct Body {
    pub chunks: Vec<Vec<u8>>,
    pub broken: bool,
}

impl Body {
    pub fn empty() -> Self {
        Body::default()
    }

    pub fn of(bytes: impl Into<Vec<u8>>) -> Self {
        Body {
            chunks: vec![bytes.into()],
            broken: false,
        }
    }

    pub fn json(value: &Value) -> Self {
        Body::of(value.to_string())
    }

    pub fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }
}

/// What the fakes' bodies saw: how many were read, and how many dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BodyLog {
    pub read: usize,
    pub discarded: usize,
    pub uploads_received: usize,
    pub uploads_discarded: usize,
}

/// [`Bodies::read_body`](folio_core::service::Bodies::read_body) over a
/// [`Body`]: refused as soon as it passes `max`.
pub fn read_limited(body: Body, max: usize) -> Result<Vec<u8>, BodyError> {
    let mut bytes = Vec::new();
    for chunk in body.chunks {
        if bytes.len() + chunk.len() > max {
            return Err(BodyError::TooLarge);
        }
        bytes.extend_from_slice(&chunk);
    }
    match body.broken {
        true => Err(BodyError::Broken),
        false => Ok(bytes),
    }
}

/// [`Blobs::receive_blob`](folio_core::service::Blobs::receive_blob) over
/// a [`Body`]: every chunk through core's meter, which stops the reading.
pub fn receive_metered(
    body: Body,
    mut meter: UploadMeter,
) -> Result<(Vec<u8>, Received), UploadFailure> {
    let mut bytes = Vec::new();
    for chunk in body.chunks {
        meter.feed(&chunk)?;
        bytes.extend_from_slice(&chunk);
    }
    if body.broken {
        return Err(UploadFailure::Broken("the connection closed".into()));
    }
    let received = meter.finish()?;
    Ok((bytes, received))
}

/// A rate the host counted, owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateKey {
    AnonymousRead(Option<IpAddr>),
    Write(RecordId),
    Registration(Option<IpAddr>),
    SignIn(Option<IpAddr>),
    /// A notification from another entity's server (whose name is left out).
    Notification,
    /// A password typed for an account, and a right one (the account's name left out).
    AccountSignIn,
    AccountSignedIn,
    UnverifiedDiscovery(Option<IpAddr>),
    AnyUnverifiedDiscovery,
}

impl From<Rate<'_>> for RateKey {
    fn from(rate: Rate<'_>) -> Self {
        match rate {
            Rate::AnonymousRead(peer) => RateKey::AnonymousRead(peer),
            Rate::Write(app) => RateKey::Write(*app),
            Rate::Registration(peer) => RateKey::Registration(peer),
            Rate::SignIn(peer) => RateKey::SignIn(peer),
            Rate::Notification { .. } | Rate::Rediscovery(_) => RateKey::Notification,
            Rate::AccountSignIn(_) => RateKey::AccountSignIn,
            Rate::AccountSignedIn(_) => RateKey::AccountSignedIn,
            Rate::UnverifiedDiscovery(peer) => RateKey::UnverifiedDiscovery(peer),
            Rate::AnyUnverifiedDiscovery => RateKey::AnyUnverifiedDiscovery,
        }
    }
}

/// One call of `Guards::rate`: what, at which time, and whether it passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateCall {
    pub key: RateKey,
    pub now: RecordDate,
    pub passed: bool,
}

/// One call of `Guards::check_nonce`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonceCall {
    pub user: String,
    pub app: RecordId,
    pub nonce: String,
    pub now: RecordDate,
    pub verdict: Result<(), ReplayError>,
}

/// A note the host logged, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Noted {
    Registered {
        user: String,
        app: RecordId,
    },
    SignedIn {
        user: String,
    },
    WrongPassword {
        user: String,
        peer: Option<IpAddr>,
    },
    Authorized {
        user: String,
        app: RecordId,
        authorization: RecordId,
    },
    Denied {
        user: String,
        app: RecordId,
    },
    PasswordChanged {
        user: String,
    },
    PasswordHashRefused {
        user: String,
    },
    /// A refusal counted in the resident buckets: the rate, as debugged.
    RateRefused(String),
}

impl From<Note<'_>> for Noted {
    fn from(note: Note<'_>) -> Self {
        match note {
            Note::Registered { user, app } => Noted::Registered {
                user: user.to_owned(),
                app: *app,
            },
            Note::SignedIn { user } => Noted::SignedIn {
                user: user.to_owned(),
            },
            Note::WrongPassword { user, peer } => Noted::WrongPassword {
                user: user.to_owned(),
                peer,
            },
            Note::Authorized {
                user,
                app,
                authorization,
            } => Noted::Authorized {
                user: user.to_owned(),
                app: *app,
                authorization: *authorization,
            },
            Note::Denied { user, app } => Noted::Denied {
                user: user.to_owned(),
                app: *app,
            },
            Note::PasswordChanged { user } => Noted::PasswordChanged {
                user: user.to_owned(),
            },
            Note::PasswordHashRefused { user, .. } => Noted::PasswordHashRefused {
                user: user.to_owned(),
            },
            Note::RateRefused(rate) => Noted::RateRefused(format!("{rate:?}")),
        }
    }
}

/// The counters a host keeps across requests: core's [`RateLimits`] and
/// [`ReplayGuard`], and the open streams that core's [`StreamCaps`] admits.
pub struct Counters {
    rates: RefCell<RateLimits>,
    replay: RefCell<ReplayGuard>,
    caps: StreamCaps,
    /// Open streams per user id; a [`Subscription`] gives its place back
    /// when dropped.
    open: Rc<RefCell<HashMap<i64, Opened>>>,
    pub rate_calls: RefCell<Vec<RateCall>>,
    pub nonce_calls: RefCell<Vec<NonceCall>>,
    /// Every `subscribe`: the user id, and whether a place was given.
    pub subscribes: RefCell<Vec<(i64, bool)>>,
    /// Knob: the place that counts rates cannot be asked (as the edge's
    /// rate object that does not answer).
    pub unreachable: std::cell::Cell<bool>,
}

impl Counters {
    pub fn new(config: &Config) -> Self {
        Counters {
            rates: RefCell::new(RateLimits::new(&config.limits)),
            replay: RefCell::new(ReplayGuard::new(date(BOOT))),
            caps: StreamCaps::of(&config.limits),
            open: Rc::default(),
            rate_calls: RefCell::default(),
            nonce_calls: RefCell::default(),
            subscribes: RefCell::default(),
            unreachable: std::cell::Cell::new(false),
        }
    }

    /// Forgets what a restarted server forgets: its rate buckets, and the
    /// nonces it saw (its replay guard fenced at `now`, its new boot).
    pub fn restart(&self, limits: &Limits, now: RecordDate) {
        *self.rates.borrow_mut() = RateLimits::new(limits);
        *self.replay.borrow_mut() = ReplayGuard::new(now);
    }

    pub fn rate(&self, rate: Rate<'_>, now: RecordDate) -> Result<(), Limited> {
        let result = match self.unreachable.get() {
            true => Err(Limited::counter_unreachable()),
            false => self.rates.borrow_mut().check(rate, now),
        };
        self.rate_calls.borrow_mut().push(RateCall {
            key: rate.into(),
            now,
            passed: result.is_ok(),
        });
        result
    }

    pub fn check_nonce(&self, user: &User, used: &NonceUse<'_>) -> Result<(), ReplayError> {
        let verdict = self.replay.borrow_mut().check(used).map(|_| ());
        self.nonce_calls.borrow_mut().push(NonceCall {
            user: user.name.clone(),
            app: used.app,
            nonce: used.nonce.to_owned(),
            now: used.now,
            verdict: verdict.clone(),
        });
        verdict
    }

    pub fn subscribe(&self, user: &User, anonymous: bool) -> Result<Subscription, StreamsFull> {
        let admitted = {
            let open = self.open.borrow();
            let on_server = open.values().fold(Opened::default(), |sum, opened| Opened {
                all: sum.all + opened.all,
                anonymous: sum.anonymous + opened.anonymous,
            });
            let for_user = open.get(&user.id).copied().unwrap_or_default();
            let open = OpenStreams {
                on_server: Some(on_server),
                for_user,
            };
            self.caps.admit(open, anonymous)
        };
        self.subscribes
            .borrow_mut()
            .push((user.id, admitted.is_ok()));
        admitted?;
        self.open
            .borrow_mut()
            .entry(user.id)
            .or_default()
            .open(anonymous);
        Ok(Subscription {
            user_id: user.id,
            anonymous,
            open: Rc::clone(&self.open),
        })
    }

    /// The streams of user `user_id` open now.
    pub fn open_streams(&self, user_id: i64) -> usize {
        self.open
            .borrow()
            .get(&user_id)
            .map_or(0, |opened| opened.all)
    }

    /// The rates counted so far.
    pub fn rates_counted(&self) -> Vec<RateCall> {
        self.rate_calls.borrow().clone()
    }

    /// What each rate counted so far was of.
    pub fn rate_keys(&self) -> Vec<RateKey> {
        self.rate_calls
            .borrow()
            .iter()
            .map(|call| call.key)
            .collect()
    }

    /// The time each rate counted so far was counted at.
    pub fn rate_times(&self) -> Vec<RecordDate> {
        self.rate_calls
            .borrow()
            .iter()
            .map(|call| call.now)
            .collect()
    }
}

/// A place among a user's subscribers, held while its stream is.
#[derive(Debug)]
pub struct Subscription {
    pub user_id: i64,
    anonymous: bool,
    open: Rc<RefCell<HashMap<i64, Opened>>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(opened) = self.open.borrow_mut().get_mut(&self.user_id) {
            opened.close(self.anonymous);
        }
    }
}

/// A reply body the fakes stream.
#[derive(Debug)]
pub enum Stream {
    Blob(Vec<u8>),
    Events {
        subscription: Subscription,
        subscriber: Box<Subscriber>,
        catch_up: Vec<String>,
        last_seq: u64,
    },
}

/// What a fake's store does its own way: the SQLite one runs core's SQL,
/// the in-memory one answers from a list of users. All else a host does
/// (bodies, blobs, counters, streams, the session key) is [`Fake`]'s.
#[allow(async_fn_in_trait)]
pub trait Backend {
    type Error: std::fmt::Display;

    async fn user(&self, name: &UserName) -> Result<Option<User>, Self::Error>;

    async fn users(&self) -> Result<Vec<User>, Self::Error>;

    async fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, Self::Error>;

    /// Runs a job (a blob's row too, once its bytes are kept).
    async fn run(&self, job: Job) -> Result<JobOutcome, WriteFailure>;

    /// Commits a job core decided, as the native writer does: its answer
    /// and effects. By default, runs it whole (and applies nothing).
    async fn commit(&self, decided: Decided) -> Result<(JobOutcome, Effects), WriteFailure> {
        let outcome = self.run(decided.into_job()).await?;
        Ok((outcome, Effects::none()))
    }

    /// Decides a job that asked to read the store, as the native host does
    /// on a read snapshot. By default, runs it whole.
    async fn decide(&self, job: WriteJob<'_>) -> Result<Prepared, WriteFailure> {
        Ok(Prepared::Answered(self.run(job.into_job()).await?))
    }

    /// Whether `password` matches `hash`.
    fn verify_password(&self, hash: &str, password: &str) -> bool;

    /// Forgets what the store logged of its own.
    fn clear_log(&self) {}
}

/// What deciding a job on the store came to ([`Backend::decide`]).
pub enum Prepared {
    /// Answered without committing: refused, or a replay.
    Answered(JobOutcome),
    /// Decided: to commit ([`Backend::commit`]).
    Decided(Decided),
}

/// The epoch of a fake that keeps a [`Resident`]: every request carries it
/// unless it sets its own.
pub const RESIDENT_EPOCH: Epoch = Epoch {
    commits: 7,
    outside: [0; 3],
};

/// What a fake saw of every request, whatever its store.
#[derive(Debug, Default)]
pub struct Log {
    /// The SQL text of every `Store::fetch`, in order.
    pub fetched: Vec<String>,
    /// The name of every `Store::user`, in order.
    pub user_lookups: Vec<String>,
    /// Each `Jobs` method core called (`run`, `commit`, `decide`), in order.
    pub jobs_asked: Vec<&'static str>,
    pub notes: Vec<Noted>,
    pub reports: Vec<String>,
    pub bodies: BodyLog,
    pub passwords_checked: usize,
    /// The URL of every request to another server, in order.
    pub peer_requests: Vec<String>,
}

/// A host of core's service for tests over the store `S`: core's counters,
/// bodies as [`Body`], blobs in a map, a fixed session key, and a log.
pub struct Fake<S> {
    pub settings: Settings,
    pub store: S,
    pub counters: Counters,
    pub log: RefCell<Log>,
    blobs: RefCell<HashMap<BlobHash, Vec<u8>>>,
    session_key: SessionKey,
    /// Where `Peers::send` goes: none (the default) reaches no other server.
    network: RefCell<Option<Route>>,
    /// What core keeps between requests, as the native host does; none by
    /// default (core asks the fake for each user, rate and nonce).
    resident: Option<Resident>,
}

/// How a fake reaches other servers: its requests, answered (a fake
/// network of fake hosts, `convergence/network.rs`).
pub type Route = Rc<
    dyn Fn(
        folio_core::service::federation::PeerRequest,
    ) -> Result<
        folio_core::service::federation::PeerAnswer,
        folio_core::service::federation::PeerFailure,
    >,
>;

impl<S: Backend> Fake<S> {
    /// A fake configured by `config` over `store`.
    pub fn over(config: &Config, store: S) -> Self {
        Fake {
            settings: config.settings(),
            store,
            counters: Counters::new(config),
            log: RefCell::default(),
            blobs: RefCell::default(),
            session_key: SessionKey::from_bytes([0x4b; 32]),
            network: RefCell::default(),
            resident: None,
        }
    }

    /// The fake, keeping a [`Resident`] from now on, as the native host
    /// does: its requests carry [`RESIDENT_EPOCH`].
    pub fn keeping_resident(mut self) -> Self {
        let replay = ReplayGuard::new(date(BOOT));
        let rates = RateLimits::new(&self.settings.limits);
        self.resident = Some(Resident::new(replay, rates));
        self
    }

    /// From now on `Peers::send` goes through `route`.
    pub fn connect(&self, route: Route) {
        *self.network.borrow_mut() = Some(route);
    }

    pub fn session_key(&self) -> &SessionKey {
        &self.session_key
    }

    /// A blob kept (bytes only, no row), as if uploaded earlier.
    pub fn keep_blob(&self, hash: BlobHash, bytes: Vec<u8>) {
        self.blobs.borrow_mut().insert(hash, bytes);
    }

    pub fn kept_blob(&self, hash: &BlobHash) -> Option<Vec<u8>> {
        self.blobs.borrow().get(hash).cloned()
    }

    /// The statements fetched so far.
    pub fn fetched(&self) -> Vec<String> {
        self.log.borrow().fetched.clone()
    }

    /// Each `Jobs` method core called so far, in order.
    pub fn jobs_asked(&self) -> Vec<&'static str> {
        self.log.borrow().jobs_asked.clone()
    }

    pub fn user_lookups(&self) -> Vec<String> {
        self.log.borrow().user_lookups.clone()
    }

    pub fn notes(&self) -> Vec<Noted> {
        self.log.borrow().notes.clone()
    }

    pub fn reports(&self) -> Vec<String> {
        self.log.borrow().reports.clone()
    }

    /// The URLs of the requests to other servers so far.
    pub fn peer_requests(&self) -> Vec<String> {
        self.log.borrow().peer_requests.clone()
    }

    pub fn bodies(&self) -> BodyLog {
        self.log.borrow().bodies
    }

    /// Forgets what the log holds (after a test's setup requests).
    pub fn clear_log(&self) {
        *self.log.borrow_mut() = Log::default();
        self.counters.rate_calls.borrow_mut().clear();
        self.counters.nonce_calls.borrow_mut().clear();
        self.counters.subscribes.borrow_mut().clear();
        self.store.clear_log();
    }
}

impl<S: Backend> Host for Fake<S> {
    fn settings(&self) -> &Settings {
        &self.settings
    }

    fn report(&self, error: &dyn std::fmt::Display) {
        self.log.borrow_mut().reports.push(error.to_string());
    }

    fn note(&self, note: Note<'_>) {
        self.log.borrow_mut().notes.push(note.into());
    }

    fn resident(&self) -> Option<&Resident> {
        self.resident.as_ref()
    }
}

impl<S: Backend> Store for Fake<S> {
    type Error = S::Error;

    async fn user(&self, name: &UserName) -> Result<Option<User>, S::Error> {
        self.log
            .borrow_mut()
            .user_lookups
            .push(name.as_str().to_owned());
        self.store.user(name).await
    }

    async fn users(&self) -> Result<Vec<User>, S::Error> {
        self.store.users().await
    }

    async fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, S::Error> {
        self.log.borrow_mut().fetched.push(statement.sql.clone());
        self.store.fetch(statement).await
    }
}

impl<S: Backend> Jobs for Fake<S> {
    async fn run(&self, job: Job) -> Result<JobOutcome, WriteFailure> {
        self.log.borrow_mut().jobs_asked.push("run");
        self.store.run(job).await
    }

    async fn commit(&self, decided: Decided) -> Result<JobOutcome, WriteFailure> {
        self.log.borrow_mut().jobs_asked.push("commit");
        self.commit_applying(decided).await
    }

    async fn decide(&self, job: WriteJob<'_>) -> Result<JobOutcome, WriteFailure> {
        self.log.borrow_mut().jobs_asked.push("decide");
        match self.store.decide(job).await? {
            Prepared::Answered(outcome) => Ok(outcome),
            Prepared::Decided(decided) => self.commit_applying(decided).await,
        }
    }
}

impl<S: Backend> Fake<S> {
    /// Commits `decided`, then applies its effects to the resident memo,
    /// as the native writer does once a commit is durable.
    async fn commit_applying(&self, decided: Decided) -> Result<JobOutcome, WriteFailure> {
        let store = decided.user_id();
        let (outcome, effects) = self.store.commit(decided).await?;
        if let (Some(resident), Some(store)) = (&self.resident, store) {
            let memo = resident.memo.at(RESIDENT_EPOCH);
            memo.forget_latest(&effects.moved_latest);
            memo.remember_stored(store, &effects.live);
        }
        Ok(outcome)
    }
}

impl<S: Backend> Bodies for Fake<S> {
    type Body = Body;
    type Stream = Stream;

    async fn read_body(&self, body: Body, max: usize) -> Result<Vec<u8>, BodyError> {
        self.log.borrow_mut().bodies.read += 1;
        read_limited(body, max)
    }

    async fn discard(&self, _body: Body) {
        self.log.borrow_mut().bodies.discarded += 1;
    }
}

impl<S: Backend> Blobs for Fake<S> {
    type Upload = Vec<u8>;

    async fn receive_blob(
        &self,
        body: Body,
        meter: UploadMeter,
    ) -> Result<(Vec<u8>, Received), UploadFailure> {
        self.log.borrow_mut().bodies.uploads_received += 1;
        receive_metered(body, meter)
    }

    async fn discard_blob(&self, _upload: Vec<u8>) {
        self.log.borrow_mut().bodies.uploads_discarded += 1;
    }

    async fn place_blob(
        &self,
        upload: Vec<u8>,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure> {
        self.keep_blob(*hash, upload);
        self.store.run(row).await
    }

    async fn keep_blob(
        &self,
        bytes: Vec<u8>,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure> {
        self.place_blob(bytes, hash, row).await
    }

    async fn blob_size(&self, hash: &BlobHash) -> Result<Option<u64>, S::Error> {
        Ok(self.kept_blob(hash).map(|bytes| bytes.len() as u64))
    }

    async fn blob_bytes(&self, hash: &BlobHash, start: u64, len: u64) -> Result<Stream, S::Error> {
        let bytes = self.kept_blob(hash).expect("a kept blob");
        Ok(Stream::Blob(
            bytes[start as usize..(start + len) as usize].to_vec(),
        ))
    }

    async fn small_blob(&self, hash: &BlobHash, max: usize) -> Option<Vec<u8>> {
        self.kept_blob(hash).filter(|bytes| bytes.len() <= max)
    }
}

impl<S: Backend> Streams for Fake<S> {
    /// The place, and the stream that waits in it for its catch-up.
    type Subscription = (Subscription, Box<EventStream>);

    fn subscribe(
        &self,
        user: &User,
        anonymous: bool,
        stream: EventStream,
    ) -> Result<Self::Subscription, StreamsFull> {
        Ok((self.counters.subscribe(user, anonymous)?, Box::new(stream)))
    }

    fn event_stream(
        &self,
        (subscription, stream): Self::Subscription,
        catch_up: CatchUp,
    ) -> Stream {
        Stream::Events {
            subscription,
            subscriber: Box::new(stream.subscriber().clone()),
            catch_up: catch_up.frames,
            last_seq: catch_up.last_seq,
        }
    }
}

impl<S: Backend> Guards for Fake<S> {
    async fn rate(&self, rate: Rate<'_>, now: RecordDate) -> Result<(), Limited> {
        assert!(
            self.resident.is_none(),
            "core asked for a rate it keeps: {rate:?}"
        );
        self.counters.rate(rate, now)
    }

    async fn check_nonce(&self, user: &User, used: &NonceUse<'_>) -> Result<(), ReplayError> {
        assert!(self.resident.is_none(), "core asked for a nonce it keeps");
        self.counters.check_nonce(user, used)
    }
}

impl<S: Backend> Secrets for Fake<S> {
    fn session_key(&self) -> &SessionKey {
        &self.session_key
    }

    async fn verify_password(&self, hash: String, password: String) -> bool {
        self.log.borrow_mut().passwords_checked += 1;
        self.store.verify_password(&hash, &password)
    }

    async fn hash_password(&self, password: String, salt: [u8; 16]) -> Option<String> {
        folio_core::service::consent::hash_password(&password, salt)
    }
}

/// A request, owned, as a test builds it.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub target: String,
    pub host: String,
    pub port: u16,
    pub headers: Headers,
    pub peer: Option<IpAddr>,
    pub now: RecordDate,
    pub seed: [u8; 32],
    /// The header section's size, when a test sets it rather than have it counted.
    pub header_bytes: Option<usize>,
    /// The host's epoch at the request, for a host that keeps a
    /// [`Resident`](folio_core::service::Resident).
    pub epoch: Option<Epoch>,
}

impl Call {
    pub fn new(method: &str, target: impl Into<String>) -> Self {
        Call {
            method: method.to_owned(),
            target: target.into(),
            host: ENTITY.to_owned(),
            port: 443,
            headers: Headers::default(),
            peer: Some(PEER),
            now: now(),
            seed: SEED,
            header_bytes: None,
            epoch: None,
        }
    }

    pub fn get(target: impl Into<String>) -> Self {
        Call::new("GET", target)
    }

    pub fn post(target: impl Into<String>) -> Self {
        Call::new("POST", target)
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.0.push((name.to_owned(), value.into()));
        self
    }

    /// A JSON body's headers: its type and length.
    pub fn json_headers(self, body: &Body) -> Self {
        let len = body.len();
        self.header("content-type", "application/json")
            .header("content-length", len.to_string())
    }

    pub fn at(mut self, now: RecordDate) -> Self {
        self.now = now;
        self
    }

    pub fn seed(mut self, seed: [u8; 32]) -> Self {
        self.seed = seed;
        self
    }

    pub fn from(mut self, peer: Option<IpAddr>) -> Self {
        self.peer = peer;
        self
    }

    /// Signed by `app` at the request's time with `nonce`, over the
    /// headers named (which the request must carry already).
    pub fn signed(self, app: &Signer, nonce: &str, names: &[&str]) -> Self {
        let ts = self.now.unix_millis();
        self.signed_at(app, ts, nonce, names)
    }

    pub fn signed_at(self, app: &Signer, ts_ms: i64, nonce: &str, names: &[&str]) -> Self {
        let value = app.authorization(ts_ms, nonce, &self, names);
        self.header("authorization", value)
    }

    /// Sends the request to `host`.
    pub async fn send<H: Host>(&self, host: &H, body: H::Body) -> Reply<H::Stream> {
        let header_bytes = self.header_bytes.unwrap_or_else(|| {
            header_section_len(
                self.headers
                    .0
                    .iter()
                    .map(|(name, value)| (name.as_bytes(), value.as_bytes())),
            )
        });
        let request = Request {
            method: &self.method,
            target: &self.target,
            host: &self.host,
            port: self.port,
            headers: &self.headers,
            header_bytes,
            peer: self.peer,
            now: self.now,
            fresh: Fresh::from_seed(self.seed),
            epoch: self.epoch.or(host.resident().map(|_| RESIDENT_EPOCH)),
        };
        handle(host, request, body).await
    }
}

/// An app's key, signing as the protocol says.
#[derive(Clone)]
pub struct Signer {
    pub app_id: RecordId,
    /// `None` for a registration: its authorization-id line is empty.
    pub authorization_id: Option<RecordId>,
    key: SigningKey,
}

impl Signer {
    pub fn new(app_id: RecordId, authorization_id: Option<RecordId>, key_seed: [u8; 32]) -> Self {
        Signer {
            app_id,
            authorization_id,
            key: SigningKey::from_bytes(&key_seed),
        }
    }

    /// Standard base64 of the public key.
    pub fn public_key(&self) -> String {
        STANDARD.encode(self.key.verifying_key().as_bytes())
    }

    /// The same key signing as `authorization_id`.
    pub fn authorized(&self, authorization_id: RecordId) -> Self {
        Signer {
            authorization_id: Some(authorization_id),
            ..self.clone()
        }
    }

    fn authorization_line(&self) -> String {
        self.authorization_id
            .map(|id| id.to_string())
            .unwrap_or_default()
    }

    /// The signature input of PROTOCOL.md §10, spec layout.
    pub fn request_input(&self, ts_ms: i64, nonce: &str, call: &Call, names: &[&str]) -> String {
        let mut input = format!(
            "svc.request\ned25519\n{ts_ms}\n{nonce}\n{}\n{}\n{}\n{}\n{}\n",
            self.authorization_line(),
            call.method,
            call.target,
            call.host,
            call.port
        );
        for name in names {
            let value = call
                .headers
                .get(name)
                .unwrap_or_else(|| panic!("a signed header `{name}` the request lacks"));
            input.push_str(&format!("{name}={value}\n"));
        }
        input
    }

    pub fn sign(&self, input: &str) -> String {
        STANDARD.encode(self.key.sign(input.as_bytes()).to_bytes())
    }

    /// The `Authorization` header of `call`.
    pub fn authorization(&self, ts_ms: i64, nonce: &str, call: &Call, names: &[&str]) -> String {
        let signature = self.sign(&self.request_input(ts_ms, nonce, call, names));
        format!(
            "SVC algorithm=\"ed25519\" id=\"{}\" ts=\"{ts_ms}\" nonce=\"{nonce}\" headers=\"{}\" signature=\"{signature}\"",
            self.app_id,
            names.join(",")
        )
    }

    /// A bearer token (URL-safe base64, unpadded) granting GET of
    /// `path_and_query` on [`ENTITY`] until `expires_ms`.
    pub fn bearer(&self, expires_ms: i64, path_and_query: &str) -> String {
        let input = format!(
            "svc.url\ned25519\n{expires_ms}\n\n{}\nGET\n{path_and_query}\n{ENTITY}\n443\n",
            self.authorization_line()
        );
        let text = format!("{}\\{expires_ms}\\{}", self.app_id, self.sign(&input));
        URL_SAFE_NO_PAD.encode(text)
    }
}

/// The body bytes of an answer (none for an empty one).
#[track_caller]
pub fn bytes<S>(reply: &Reply<S>) -> &[u8] {
    match &reply.body {
        ReplyBody::Empty => &[],
        ReplyBody::Bytes(bytes) => bytes,
        ReplyBody::Stream(_) => panic!("a streamed answer"),
    }
}

#[track_caller]
pub fn text<S>(reply: &Reply<S>) -> &str {
    std::str::from_utf8(bytes(reply)).expect("a UTF-8 body")
}

#[track_caller]
pub fn json<S>(reply: &Reply<S>) -> Value {
    serde_json::from_slice(bytes(reply)).unwrap_or_else(|e| {
        panic!(
            "a JSON body ({e}): {:?}",
            String::from_utf8_lossy(bytes(reply))
        )
    })
}

/// Checks that `reply` is the problem+json of `type_path` (`group/status-slug`)
/// with `code`, and answers its body.
#[track_caller]
pub fn problem<S>(reply: &Reply<S>, type_path: &str, code: &str) -> Value {
    let body = json(reply);
    assert_eq!(
        reply.header("content-type"),
        Some(PROBLEM_CONTENT_TYPE),
        "{body}"
    );
    let status: u16 = type_path
        .split('/')
        .nth(1)
        .and_then(|slug| slug.get(..3))
        .and_then(|digits| digits.parse().ok())
        .expect("a type path group/status-slug");
    assert_eq!(reply.status, status, "{body}");
    assert_eq!(
        body["type"],
        format!("{BASE_URL}/docs/error-types/{type_path}"),
        "{body}"
    );
    assert_eq!(body["status"], status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    body
}

/// Checks that `reply` is the 429 `rate_limited` problem with
/// `Retry-After: retry_after`, and answers its body.
#[track_caller]
pub fn rate_limited<S>(reply: &Reply<S>, retry_after: &str) -> Value {
    let body = problem(reply, "request/429-rate-limited", "rate_limited");
    assert_eq!(header(reply, "retry-after"), retry_after);
    body
}

/// The value of header `name`, which the answer must carry.
#[track_caller]
pub fn header<'r, S>(reply: &'r Reply<S>, name: &str) -> &'r str {
    reply
        .header(name)
        .unwrap_or_else(|| panic!("no `{name}` header in {:?}", reply.headers))
}

/// The fake host reaches no other server unless it was connected to a
/// network ([`Fake::connect`]); it logs what it was asked.
impl<S: Backend> folio_core::service::Peers for Fake<S> {
    async fn send(
        &self,
        request: folio_core::service::federation::PeerRequest,
    ) -> Result<
        folio_core::service::federation::PeerAnswer,
        folio_core::service::federation::PeerFailure,
    > {
        self.log
            .borrow_mut()
            .peer_requests
            .push(request.url.clone());
        let route = self.network.borrow().clone();
        if let Some(route) = route {
            return route(request);
        }
        Err(folio_core::service::federation::PeerFailure::Unreachable(
            format!("the fake host reaches no other server ({})", request.url),
        ))
    }
}
