//! Federation: people on different servers share records
//! (`docs/federation.md`).
//!
//! Each user's server acts for that user's entity towards other servers:
//! it finds another entity's server through discovery ([`entity`]),
//! signs what it asks with the user's server key ([`Signer`]), fetches
//! and checks the records its user links to or is notified of
//! ([`fetch`]), tells the servers of the entities a new version concerns
//! ([`notify`]) through a durable outbox
//! ([`plan_deliveries`](crate::service::plan_deliveries)), and answers
//! lists and reads with `proxy_to` by asking the other server. Every
//! decision is here; a host only sends what core asks ([`peer`]).

pub mod entity;
mod error;
pub mod fetch;
pub mod notify;
pub mod peer;

pub use entity::{Endpoints, RemoteEntity};
pub use error::PeerError;
pub use fetch::{
    Expected, RECORD_ANSWER_BYTES, Signer, check_record, proxied_list, read_record,
    record_of_answer,
};
pub use notify::{
    Notification, NotificationAnswer, NotificationError, RefusedVersion, RetryPolicy, recipients,
    retry_at,
};

pub use peer::{
    AnswerBody, PEER_CONNECT_TIMEOUT_MS, PEER_EXCHANGE_TIMEOUT_MS, PeerAnswer, PeerFailure,
    PeerMethod, PeerRequest, SMALL_ANSWER_BYTES, address_allowed, target_url,
};
