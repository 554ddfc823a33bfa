//! The whole API as one function both hosts call: [`handle`] takes a
//! request as the host received it and answers the reply to send.
//!
//! Every decision of a request lives here: limits, routing, who is asking,
//! which statements to run, what a write stores, which headers the answer
//! carries. The service does no IO and runs on no runtime: it awaits what
//! the host does.
//!
//! ```text
//! native:  axum request ──► handle(&App, Request) ──► Reply ──► axum response
//! worker:  fetch event  ──► user object ──► handle(&UserStore, Request) ──► Reply ──► Response
//! ```
//!
//! # The calling contract
//!
//! **One input per request.** The host reads its clock once and draws 32
//! random bytes once, and hands both in with the [`Request`] (`now`,
//! `fresh`). Every time-dependent decision of the request (signature
//! windows, nonces, rates, bearer expiry, cookies, upload expiry) uses that
//! `now`; every id, key and nonce it makes comes from that [`Fresh`](fresh::Fresh). The
//! service never asks the host for the time or for randomness.
//!
//! **What a host provides**, as small traits ([`Host`] is all of them): a
//! [`Store`] to read (user lookups and core's statements, outside any
//! write); [`Jobs`], its one ordered place of writes; [`Bodies`], request
//! bodies read on demand up to a limit; [`Blobs`] (uploads through core's
//! [`UploadMeter`](crate::service::blob::UploadMeter), bytes by hash); [`Streams`]
//! (a place among a user's subscribers, within core's
//! [`StreamCaps`](crate::service::events::StreamCaps), and the live stream);
//! [`Guards`] (rates with core's [`RateLimits`], nonces); [`Secrets`] (the
//! consent page's session key and password check).
//!
//! **In what order.** Within one request, calls happen one at a time, in
//! this order: the user lookup; reads for authentication (the app's key,
//! its authorization), then the nonce check and the rate; the body, read at
//! most once and only after the headers passed; further reads; at most
//! **one job** ([`Jobs::run`], or [`Blobs::place_blob`] for an upload),
//! whose versions the host publishes to the user's streams once durable;
//! then the reads of the answer (linked records). An events request takes
//! its place with its [`EventStream`](crate::service::events::EventStream)
//! ([`Streams::subscribe`]) before it reads the catch-up, so that nothing
//! committed meanwhile is missed, and hands the place back with the
//! catch-up in [`Streams::event_stream`], whose body the host drives as
//! the stream says. A body the service did not read is handed to
//! [`Bodies::discard`] before the reply.
//!
//! **What may interleave.** Requests run concurrently: their reads see any
//! committed state, and nothing a request decided before its job is trusted
//! by the job. A job ([`Job`](crate::service::jobs::Job)) re-reads what it depends on inside
//! its transaction, at its scheduler's time, and runs again from the start
//! if its commit loses a race ([`store::CommitError::Conflict`]).
//!
//! **Failures.** A host's error becomes `server/500-internal`; the service
//! logs it once, through [`Host::report`], and never sends its text.

pub mod blob;
pub mod consent;
pub mod console;
pub mod discovery;
pub mod docs;
pub mod events;
pub mod federation;
pub mod fresh;
pub mod http;
pub mod jobs;
pub mod limits;
pub mod respond;
pub mod route;
pub mod standing;
pub mod store;

mod auth;
mod dispatch;
mod endpoints;
mod host;
mod observe;
mod outbox;
mod rates;
mod request;
mod resident;

pub use auth::Caller;
pub use endpoints::federation::receive_locally;
pub use host::{
    Blobs, Bodies, BodyError, Guards, Host, Jobs, Limited, Note, Peers, Rate,
    STORAGE_FULL_RETRY_AFTER_SECS, Secrets, Settings, Store, Streams, UploadFailure, User,
    WriteFailure,
};
pub use host::{UNVERIFIED_DISCOVERIES_PER_ADDRESS_PER_MINUTE, UNVERIFIED_DISCOVERIES_PER_MINUTE};
pub use observe::{
    NotificationOutcome, NotificationReceipt, OutboxCount, OutboxState, OutboxSummary,
    outbox_summary,
};
pub use outbox::{
    DELIVERY_DEADLINE_MS, DELIVERY_PLAN_ROWS, Delivery, DeliveryKey, DeliveryReport,
    MAX_DELIVERIES_AT_ONCE, next_due, plan_deliveries,
};
pub use rates::{
    ACCOUNT_BACKOFF_FIRST_SECS, ACCOUNT_BACKOFF_MAX_SECS, ACCOUNT_BACKOFF_RESET_SECS,
    ACCOUNT_SIGN_IN_ATTEMPTS, AccountAttempts, AccountBackoff, AddressRate, AddressRateKind,
    AddressVerdict, RateLimits, address_key,
};

pub use dispatch::handle;
pub use request::{Reply, ReplyBody, Request};
pub use resident::{MAX_REMEMBERED_USERS, Resident};

use request::{Context, Failure, Outcome};
