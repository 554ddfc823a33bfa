//! What the service asks of its host.

use std::fmt;
use std::net::IpAddr;

use crate::auth::{NonceUse, ReplayError};
use crate::model::dialect::Dialect;
use crate::model::{BlobHash, Entity, RecordDate, RecordId, UserName};
use crate::problem::{Problem, default_docs_url};
use crate::service::consent::SessionKey;
use crate::service::events::{CatchUp, EventStream};
use crate::service::limits::Limits;
use crate::store::Statement;

use super::resident::Resident;

use crate::service::blob::{LengthMismatch, Received, UploadMeter};
use crate::service::events::{STREAM_CAP_RETRY_AFTER_SECS, StreamsFull};
use crate::service::federation::{PeerAnswer, PeerFailure, PeerRequest};

use super::store::{Row, RowError, RowExt};
use crate::service::jobs::{Decided, Job, JobOutcome, WriteJob};

/// A user of this server: its `{user}` path segment and its entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The row id of the user in the store's tables.
    pub id: i64,
    /// The `{user}` path segment.
    pub name: String,
    /// The user's entity: the author of the records the user writes.
    pub entity: Entity,
}

impl User {
    /// A user as core's `user_by_name_sql` and `users_sql` read it.
    pub fn from_row(row: &Row) -> Result<User, RowError> {
        let not_an_entity = |_| RowError {
            column: 2,
            expected: "an entity",
        };
        Ok(User {
            id: row.integer(0)?,
            name: row.text(1)?.to_owned(),
            entity: row.text(2)?.parse().map_err(not_an_entity)?,
        })
    }
}

/// What a server is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The names the server speaks.
    pub dialect: Dialect,
    /// `https://host[:port]`, where the API is served.
    pub base_url: String,
    /// Where the problem types' pages are (`{base_url}/errors` by default).
    pub docs_url: String,
    /// The limits the server enforces.
    pub limits: Limits,
    /// The server's version, for `server_info`.
    pub version: String,
}

impl Settings {
    /// A server's settings, the same on every host: the default dialect,
    /// and the problem types' pages at `docs_url` when the operator set
    /// one, else under `base_url` ([`default_docs_url`]). `version` is the
    /// host's, for `server_info`.
    pub fn new(base_url: String, docs_url: Option<String>, limits: Limits, version: &str) -> Self {
        Settings {
            dialect: Dialect::default(),
            docs_url: docs_url.unwrap_or_else(|| default_docs_url(&base_url)),
            base_url,
            limits,
            version: version.to_owned(),
        }
    }
}

/// A rate the host counts (PROTOCOL.md §13).
#[derive(Debug, Clone, Copy)]
pub enum Rate<'a> {
    /// An unauthenticated read from an address.
    AnonymousRead(Option<IpAddr>),
    /// A write by an app.
    Write(&'a RecordId),
    /// An app registration from an address.
    Registration(Option<IpAddr>),
    /// A consent-page sign-in attempt from an address.
    SignIn(Option<IpAddr>),
    /// A password typed for an account (the user's name), wherever: the
    /// console's and the consent page's sign-in and a password change.
    /// Counted before the password is checked, and refused while the
    /// account backs off ([`AccountBackoff`](super::rates::AccountBackoff)).
    AccountSignIn(&'a str),
    /// The account's password was typed right: its count starts again.
    /// Never refused.
    AccountSignedIn(&'a str),
    /// A notification from another entity's server (federation) to the
    /// user with row id `user`: counted per sending entity, per its
    /// registrable domain and per receiving user.
    Notification {
        /// The entity whose server sent the notification.
        sender: &'a Entity,
        /// The row id of the receiving user.
        user: i64,
    },
    /// Discovering an entity again because its stored keys did not verify
    /// a signature: at most `REDISCOVERIES_PER_MINUTE` (one) per entity.
    Rediscovery(&'a Entity),
    /// Discovering an entity the store does not know, for a server-signed
    /// request from an address whose signature cannot be checked before:
    /// at most [`UNVERIFIED_DISCOVERIES_PER_ADDRESS_PER_MINUTE`] per address.
    UnverifiedDiscovery(Option<IpAddr>),
    /// The same, from every address together: at most
    /// [`UNVERIFIED_DISCOVERIES_PER_MINUTE`] for the server.
    AnyUnverifiedDiscovery,
}

/// How often an entity is discovered again for a signature its stored keys
/// do not verify ([`Rate::Rediscovery`]): a fixed limit, not a setting.
pub(super) const REDISCOVERIES_PER_MINUTE: u32 = 1;

/// How many entities one address may make this server discover, a minute,
/// by naming them in server-signed requests ([`Rate::UnverifiedDiscovery`]):
/// each costs requests to a host the requester chose, before anything is
/// verified. A fixed limit, not a setting: a real server names each of
/// its entities once, after which the entity is known.
pub const UNVERIFIED_DISCOVERIES_PER_ADDRESS_PER_MINUTE: u32 = 10;

/// How many such discoveries every address together may cause a minute
/// ([`Rate::AnyUnverifiedDiscovery`]), so that many addresses cannot make
/// this server a crawler for them either.
pub const UNVERIFIED_DISCOVERIES_PER_MINUTE: u32 = 60;

/// A request over its rate: the problem and the seconds to wait.
#[derive(Debug)]
pub struct Limited {
    /// The problem to answer with: `request/429-rate-limited` with a detail saying which rate, or
    /// `server/503-unavailable` when the rate could not be counted.
    pub problem: Problem,
    /// The seconds to wait, for the `Retry-After` header.
    pub retry_after_secs: u64,
}

impl From<StreamsFull> for Limited {
    fn from(full: StreamsFull) -> Self {
        Limited {
            problem: Problem::from(&full),
            retry_after_secs: STREAM_CAP_RETRY_AFTER_SECS,
        }
    }
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyError {
    /// It is longer than the limit the service asked for.
    TooLarge,
    /// It ended early or the connection failed.
    Broken,
}

/// Why an upload could not be received.
#[derive(Debug)]
#[non_exhaustive]
pub enum UploadFailure {
    /// The client sent other than it declared: what core's
    /// [`UploadMeter`] refused.
    Length(LengthMismatch),
    /// The body ended early or its connection failed.
    Broken(String),
    /// The host's storage is full: logged, answered as
    /// [`WriteFailure::StorageFull`] is.
    StorageFull(String),
    /// The host's storage failed: logged, answered `server/500-internal`.
    Failed(String),
}

impl From<LengthMismatch> for UploadFailure {
    fn from(mismatch: LengthMismatch) -> Self {
        UploadFailure::Length(mismatch)
    }
}

/// Why a write job did not run: never the client's doing.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteFailure {
    /// Too many writes are waiting: `server/503-unavailable`, retry soon.
    Busy,
    /// The store is full (its disk, or a size cap): nothing was stored.
    /// Logged, answered `server/503-unavailable` with a `Retry-After` of
    /// [`STORAGE_FULL_RETRY_AFTER_SECS`]: reads go on, and writes do again
    /// once there is room.
    StorageFull(String),
    /// The store failed: logged, answered `server/500-internal`.
    Failed(String),
}

/// The `Retry-After` of a write refused because the store is full.
pub const STORAGE_FULL_RETRY_AFTER_SECS: u64 = 30;

impl fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteFailure::Busy => f.write_str("too many writes are waiting"),
            WriteFailure::StorageFull(error) | WriteFailure::Failed(error) => f.write_str(error),
        }
    }
}

/// Something a person running the server wants to see: a line in the
/// host's log, or a count in its metrics.
#[derive(Debug, Clone, Copy)]
pub enum Note<'a> {
    /// An app registered in a user's store.
    Registered {
        /// The user's name.
        user: &'a str,
        /// The app's record id.
        app: &'a RecordId,
    },
    /// The owner signed in.
    SignedIn {
        /// The user's name.
        user: &'a str,
    },
    /// The owner changed the password; every other session ended.
    PasswordChanged {
        /// The user's name.
        user: &'a str,
    },
    /// A wrong password was typed for an account.
    WrongPassword {
        /// The user's name.
        user: &'a str,
        /// The client's address, when the host knows it.
        peer: Option<IpAddr>,
    },
    /// The owner authorized an app on the consent page.
    Authorized {
        /// The user's name.
        user: &'a str,
        /// The app's record id.
        app: &'a RecordId,
        /// The App Authorization record created.
        authorization: &'a RecordId,
    },
    /// The owner refused an app on the consent page.
    Denied {
        /// The user's name.
        user: &'a str,
        /// The app's record id.
        app: &'a RecordId,
    },
    /// A request over a rate was refused (counted in a
    /// [`Resident`]'s buckets): for the host's metrics rather than its log,
    /// which a flood would fill.
    RateRefused(Rate<'a>),
    /// A sign-in found a stored password hash whose parameters are not the
    /// server's ([`check_password_hash`](crate::service::consent::check_password_hash)):
    /// refused without running argon2; the operator sets a new password.
    PasswordHashRefused {
        /// The user's name.
        user: &'a str,
        /// Why the hash is refused.
        reason: &'a crate::service::consent::PasswordHashError,
    },
}

impl fmt::Display for Note<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Registered { user, app } => write!(f, "user {user} registered app {app}"),
            Note::SignedIn { user } => write!(f, "user {user} signed in"),
            Note::PasswordChanged { user } => {
                write!(
                    f,
                    "user {user} changed their password; every other session ended"
                )
            }
            Note::WrongPassword { user, peer } => match peer {
                Some(peer) => write!(f, "a wrong password for {user} from {peer}"),
                None => write!(f, "a wrong password for {user}"),
            },
            Note::Authorized {
                user,
                app,
                authorization,
            } => write!(f, "user {user} authorized app {app} ({authorization})"),
            Note::Denied { user, app } => write!(f, "user {user} denied app {app}"),
            Note::RateRefused(rate) => write!(f, "a request over a rate was refused: {rate:?}"),
            Note::PasswordHashRefused { user, reason } => write!(
                f,
                "user {user}'s stored password hash is not checked ({reason}): nobody can sign \
                 in as {user} until the operator runs `folio user passwd {user}`"
            ),
        }
    }
}

/// A host of the service: its settings and log, and the capabilities
/// below. Each capability is a small trait of its own, so that a reader
/// (or a fake host in a test) can take them one at a time.
pub trait Host: Store + Jobs + Bodies + Blobs + Streams + Guards + Secrets + Peers {
    /// The server's settings.
    fn settings(&self) -> &Settings;

    /// What core keeps in this host's memory between requests, if the host
    /// keeps it ([`Resident`]); `None` (the default) asks the host for each
    /// user, nonce and rate, and runs each job whole ([`Jobs::run`]).
    fn resident(&self) -> Option<&Resident> {
        None
    }

    /// Logs an unexpected failure (answered `server/500-internal`).
    fn report(&self, error: &dyn fmt::Display);

    /// Logs something a person running the server wants to see.
    fn note(&self, note: Note<'_>);
}

/// Reads of the store: every statement a request reads runs here, outside
/// any write job.
///
/// Futures need not be `Send`: the worker is single-threaded, and the
/// native host names its concrete type, so the compiler sees that its
/// futures are.
#[allow(async_fn_in_trait)]
pub trait Store {
    /// A failure of the host's storage: logged, answered `server/500-internal`.
    type Error: fmt::Display;

    /// The user named `name`.
    async fn user(&self, name: &UserName) -> Result<Option<User>, Self::Error>;

    /// Every user.
    async fn users(&self) -> Result<Vec<User>, Self::Error>;

    /// The rows of a read.
    async fn fetch(&self, statement: &Statement) -> Result<Vec<Row>, Self::Error>;
}

/// The one ordered place where a user's writes commit.
///
/// A host that keeps no [`Resident`] is handed each job whole
/// ([`run`](Jobs::run)). One that keeps one is handed what core decided
/// without it: a job decided through the memo ([`commit`](Jobs::commit)),
/// or one that must read the store first ([`decide`](Jobs::decide)).
#[allow(async_fn_in_trait)]
pub trait Jobs {
    /// Runs `job` as a core [`WriteJob`] over a transaction of the host's
    /// ([`WriteJob::start`]), with the time at which the host's scheduler
    /// runs it, and applies its [`Effects`](crate::service::jobs::Effects)
    /// (hands the versions it stored to the open event streams of its user,
    /// [`Job::user_id`]) once they are durable. A request runs at most one
    /// job.
    async fn run(&self, job: Job) -> Result<JobOutcome, WriteFailure>;

    /// Commits a job core decided ([`JobStep::Decided`](crate::service::jobs::JobStep::Decided)):
    /// the host's scheduler reads [`Decided::reads`], then [begins](Decided::begin)
    /// it with their rows at its time and drives it to its end, as
    /// [`run`](Jobs::run) does. By default, runs it whole.
    async fn commit(&self, decided: Decided) -> Result<JobOutcome, WriteFailure> {
        self.run(decided.into_job()).await
    }

    /// Decides `job`, which asked to read the store
    /// ([`JobStep::Read`](crate::service::jobs::JobStep::Read)), on one
    /// read snapshot, away from the scheduler; then answers it (a refusal,
    /// a replay) or [commits](Jobs::commit) it. By default, runs it whole.
    async fn decide(&self, job: WriteJob<'_>) -> Result<JobOutcome, WriteFailure> {
        self.run(job.into_job()).await
    }
}

/// Request bodies, read on demand.
#[allow(async_fn_in_trait)]
pub trait Bodies {
    /// A request body, unread.
    type Body;
    /// A reply body the host streams (a blob's bytes, an event stream).
    type Stream;

    /// The whole body, if it holds at most `max` bytes; a longer one is
    /// refused as soon as it passes `max`, without being kept.
    async fn read_body(&self, body: Self::Body, max: usize) -> Result<Vec<u8>, BodyError>;

    /// Reads and drops a refused body (within reason), so that a client
    /// still sending it receives the answer.
    async fn discard(&self, body: Self::Body);
}

/// The bytes of blobs, kept under their SHA-256.
#[allow(async_fn_in_trait)]
pub trait Blobs: Bodies + Store {
    /// A received upload, not yet placed.
    type Upload;

    /// Receives an upload, feeding every chunk to `meter` (which refuses
    /// it as soon as it is longer than declared) and answering what
    /// [`UploadMeter::finish`] makes of it.
    async fn receive_blob(
        &self,
        body: Self::Body,
        meter: UploadMeter,
    ) -> Result<(Self::Upload, Received), UploadFailure>;

    /// Drops a received upload.
    async fn discard_blob(&self, upload: Self::Upload);

    /// Keeps a received upload under `hash`, then runs `row` (the job that
    /// stores its blob row) as [`Jobs::run`] would, so that upkeep never
    /// removes the bytes in between.
    async fn place_blob(
        &self,
        upload: Self::Upload,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure>;

    /// Keeps `bytes`, read from another server and checked by core to hash
    /// to `hash`, under `hash`, then runs `row` as [`Blobs::place_blob`]
    /// does.
    async fn keep_blob(
        &self,
        bytes: Vec<u8>,
        hash: &BlobHash,
        row: Job,
    ) -> Result<JobOutcome, WriteFailure>;

    /// The size of the blob kept under `hash`, if it is kept.
    async fn blob_size(&self, hash: &BlobHash) -> Result<Option<u64>, Self::Error>;

    /// `len` bytes of a kept blob from `start`, streamed.
    async fn blob_bytes(
        &self,
        hash: &BlobHash,
        start: u64,
        len: u64,
    ) -> Result<Self::Stream, Self::Error>;

    /// A small blob's bytes, if it is kept and holds at most `max` bytes.
    async fn small_blob(&self, hash: &BlobHash, max: usize) -> Option<Vec<u8>>;
}

/// Open event streams.
pub trait Streams: Bodies {
    /// A place among the subscribers of a user's events.
    type Subscription;

    /// A place among the user's subscribers for `stream`, taken before the
    /// catch-up is read: from now on the host hands the stream every commit
    /// of the user ([`EventStream::handle_commit`](crate::service::events::EventStream::handle_commit)),
    /// so that nothing committed meanwhile is missed. The host counts its
    /// open streams, `anonymous` (unauthenticated) ones apart, and asks
    /// core's [`StreamCaps::admit`](crate::service::events::StreamCaps::admit)
    /// whether one more fits. Dropping the subscription gives the place
    /// back.
    fn subscribe(
        &self,
        user: &User,
        anonymous: bool,
        stream: EventStream,
    ) -> Result<Self::Subscription, StreamsFull>;

    /// The event stream's body: the host [`EventStream::start`]s the
    /// subscription's stream with `catch_up`, then drives it (see
    /// [`events`](crate::service::events)): it writes each chunk
    /// [`EventStream::poll_output`] answers, waits as it says for the next
    /// commit, the shutdown or the time given, and closes the body at the
    /// end. Hosts keep sockets and timers only: what is sent and when is
    /// the stream's.
    fn event_stream(&self, subscription: Self::Subscription, catch_up: CatchUp) -> Self::Stream;
}

/// The `Retry-After` of a request refused by [`Guards`]' default: the
/// host counts nothing, and waiting will not change that.
const UNCOUNTED_RETRY_AFTER_SECS: u64 = 60;

/// Counters that outlive a request: rates and nonces, for a host that
/// keeps no [`Resident`] (core counts in the resident state otherwise, and
/// never asks). The default bodies refuse every request: a host that keeps
/// neither counts nothing, and serves nothing that needs counting.
#[allow(async_fn_in_trait)]
pub trait Guards {
    /// Counts one request against `rate` at `now` (the request's time),
    /// with core's [`RateLimits`](super::RateLimits) kept where every
    /// request of the rate's key is counted (asynchronous: on the edge the
    /// buckets of an address live in an object of their own).
    async fn rate(&self, rate: Rate<'_>, now: RecordDate) -> Result<(), Limited> {
        let _ = (rate, now);
        Err(Limited {
            problem: Problem::new(crate::problem::ProblemType::Unavailable)
                .with_detail("this server counts no rates"),
            retry_after_secs: UNCOUNTED_RETRY_AFTER_SECS,
        })
    }

    /// Records a verified request's nonce for `app` in the user's store;
    /// refuses one seen within the window (PROTOCOL.md §10): on the edge
    /// the user object's own storage ([`nonce_table`](crate::auth::nonce_table)).
    async fn check_nonce(&self, user: &User, used: &NonceUse<'_>) -> Result<(), ReplayError> {
        let _ = (user, used);
        Err(ReplayError::Full)
    }
}

/// The secrets of the consent page and the console.
#[allow(async_fn_in_trait)]
pub trait Secrets {
    /// The key that signs session cookies.
    fn session_key(&self) -> &SessionKey;

    /// Whether `password` matches the stored argon2id `hash` (PHC string),
    /// with core's [`verify_password`](crate::service::consent::verify_password).
    async fn verify_password(&self, hash: String, password: String) -> bool;

    /// The argon2id hash to store for a new `password`, with core's
    /// [`hash_password`](crate::service::consent::hash_password) and `salt`; `None`
    /// if it could not be made.
    async fn hash_password(&self, password: String, salt: [u8; 16]) -> Option<String>;
}

/// Other servers (federation, `docs/federation.md`).
#[allow(async_fn_in_trait)]
pub trait Peers {
    /// Sends `request` and reads its answer whole, under the rules of
    /// [`crate::service::federation::peer`]: only to addresses
    /// [`address_allowed`](crate::service::federation::address_allowed) allows, within
    /// the timeouts, at most `max_answer_bytes` of body, and never
    /// following a redirect (a 3xx comes back as an answer).
    async fn send(&self, request: PeerRequest) -> Result<PeerAnswer, PeerFailure>;

    /// Delivers versions of `author`'s records to `recipient`, another user
    /// of this server, where the recipient's writes run: `None` (the
    /// default) when that is here, and core delivers in-process
    /// ([`receive_locally`](super::receive_locally)); else the host hands
    /// them to the place that runs the recipient's writes, which calls
    /// `receive_locally` itself (on the edge, each user's object).
    async fn hand_over(
        &self,
        author: &User,
        recipient: &User,
        links: &[crate::model::VersionLink],
    ) -> Option<Result<crate::service::federation::NotificationAnswer, String>> {
        let _ = (author, recipient, links);
        None
    }
}
