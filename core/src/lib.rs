//! Folio's core: the whole protocol of a versioned-record server, with no IO.
//!
//! # What the core decides
//!
//! Everything a client can observe that is not a socket: the record model and
//! its wire JSON ([`model`]); canonical JSON and version hashes
//! ([`canonical`], [`hash`]); request signatures and bearer tokens ([`auth`]);
//! record types, their schemas and the links a record holds ([`schema`]),
//! and the built-in types every store holds ([`builtin`]); reading list and
//! events requests ([`query`]); turning a write request, with what the host
//! fetched, into the versions to store ([`write`](mod@write)); the events
//! stream: who may open one, its catch-up, which versions each subscriber
//! receives and its bytes, and what an open stream sends when, as a machine
//! its host drives with commits and the time ([`events::EventStream`]);
//! the names of the two wire dialects ([`dialect`]); the problem+json
//! catalogue ([`problem`]); the fixed response headers ([`http`]); which
//! endpoint a path addresses ([`route`]); the answers of reads, built from
//! the rows a host fetched ([`respond`]); and apps' records and the access
//! an authorization grants ([`apps`]).
//!
//! At the edge of HTTP it also decides: blob uploads and downloads, their
//! expiry, `Range` and `Content-Disposition` and the link a download goes
//! through ([`blob`]); entity discovery, the Entity record's content and the
//! `server_info` answer ([`discovery`]); the page served at each error type
//! URL ([`docs`]); and the limits a server enforces ([`limits`]).
//!
//! # What it never does
//!
//! It reads no clock, draws no randomness, opens no file or socket, and runs
//! no async runtime. It builds for `wasm32-unknown-unknown` and behaves the
//! same there as natively.
//!
//! # How a host drives it
//!
//! A host (the native server, the Cloudflare worker) holds the IO. For each
//! request it reads its clock once and draws 32 random bytes once, and
//! calls [`handle`] with the request, that time and those bytes ([`Fresh`]);
//! the service does the rest through a few small capability traits the host
//! implements: a [`Store`] to read, [`Jobs`] to commit, [`Bodies`],
//! [`Blobs`], [`Streams`], [`Guards`] and [`Secrets`] (the calling contract
//! is in [`service`]). Every write is a core [`Job`] that the host's
//! scheduler (the native group-commit writer, the worker's user object)
//! runs with [`Job::run`] over its [`Transaction`] at the scheduler's time,
//! then publishes [`Done::take_live_versions`] to open streams. Upkeep is
//! a core plan too ([`Upkeep`]). The host never decides anything the
//! protocol fixes; when it would need to, the decision belongs here.
//!
//! What a host uses is re-exported here, below the modules.

pub mod access;
pub mod apps;
pub mod archive;
pub mod auth;
pub mod blob;
pub mod builtin;
pub mod canonical;
pub mod consent;
pub mod console;
pub mod dialect;
pub mod discovery;
pub mod docs;
pub mod events;
pub mod federation;
pub mod fresh;
pub mod hash;
pub mod http;
pub mod limits;
pub mod model;
pub mod problem;
pub mod query;
pub mod register;
pub mod respond;
pub mod route;
pub mod schema;
pub mod service;
pub mod store;
pub mod write;

pub use fresh::Fresh;
pub use service::store::{CommitError, Fetch, Row, RowError, RowExt, Transaction};
pub use service::upkeep::{ExpiredBlob, STRAY_SWEEP_EVERY, UPKEEP_INTERVAL_MS, Upkeep};
pub use service::writes::{
    Done, Job, JobFailure, JobOutcome, Preparation, Prepared, RecordWrite, Refused,
};
pub use service::{
    AddressRate, AddressVerdict, Blobs, Bodies, BodyError, Guards, Host, Jobs, Limited, Note, Rate,
    RateLimits, Reply, ReplyBody, Request, Secrets, Settings, Store, Streams, UploadFailure, User,
    WriteFailure, handle,
};
