//! Folio's core: the whole protocol of a versioned-record server, with no IO.
//!
//! # What the core decides
//!
//! Everything a client can observe that is not a socket. Eight modules hold
//! it:
//!
//! - [`model`]: the record model and its wire JSON, canonical JSON and
//!   version hashes, the two wire dialects;
//! - [`auth`]: request signatures, bearer tokens and the nonce window; who
//!   may read and write what; apps' records, the access an authorization
//!   grants, and app registration;
//! - [`schema`]: record types, their schemas, the links a record holds, and
//!   the built-in types every store holds;
//! - [`query`]: list and events requests, filters, sorts and pages;
//! - [`write`](mod@write): a write request, with what the host fetched,
//!   turned into the versions to store;
//! - [`store`]: the storage schema and the text of every statement both
//!   hosts run, and the archive format;
//! - [`problem`]: the problem+json catalogue;
//! - [`service`]: what a host drives. The whole API as one function
//!   ([`handle`]), the capability traits a host implements, write jobs and
//!   upkeep as machines, the events stream, federation, blobs, discovery,
//!   the consent page and the console, routing, headers and limits.
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
//! a host that serves many requests from one process also keeps core's
//! [`Resident`] state (users, standings, nonces, rates, remembered
//! versions) and passes its epoch, so that core asks it for input and
//! output only. The service does the rest through a few small capability
//! traits the host implements: a [`Store`] to read, [`Jobs`] to commit, [`Bodies`],
//! [`Blobs`], [`Streams`], [`Guards`], [`Secrets`] and [`Peers`] (the
//! calling contract is in [`service`]). Every write is a core [`Job`] that
//! the host's scheduler (the native group-commit writer, the worker's user
//! object) runs as a [`WriteJob`]: a machine whose [`JobStep`]s the host
//! answers, reads with rows and the commit with what became of it, at the
//! scheduler's time; the job ends with its answer and its [`Effects`], which
//! the host applies once the commit is durable. Upkeep is a machine too
//! ([`UpkeepRound`]). The host never decides anything the protocol fixes;
//! when it would need to, the decision belongs here.
//!
//! What a host uses is re-exported here, below the modules.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod auth;
pub mod model;
pub mod problem;
pub mod query;
pub mod schema;
pub mod service;
pub mod store;
pub mod write;

pub use service::fresh::Fresh;
pub use service::jobs::upkeep::{
    ExpiredBlob, STRAY_SWEEP_INTERVAL_MS, UPKEEP_INTERVAL_MS, Upkeep, UpkeepReport, UpkeepRound,
    UpkeepStep,
};
pub use service::jobs::{
    Decided, Done, Effects, Job, JobFailure, JobOutcome, JobStep, RecordWrite, Refused, WriteJob,
};
pub use service::store::{CommitError, Row, RowError, RowExt};
pub use service::{
    AddressRate, AddressVerdict, Blobs, Bodies, BodyError, Guards, Host, Jobs, Limited, Note,
    Peers, Rate, RateLimits, Reply, ReplyBody, Request, Resident, Secrets, Settings, Store,
    Streams, UploadFailure, User, WriteFailure, handle,
};
