//! [`App`]: what every request handler and background task of `folio serve`
//! shares. `server.rs` builds it; `host.rs` implements core's host traits on
//! it; `api.rs`, `outbox.rs` and `metrics_listener.rs` use it.

use std::sync::Arc;

use folio_core::Resident;
use folio_core::RowExt;
use folio_core::service::consent::SessionKey;
use tokio::sync::watch;

use crate::blobs::BlobStore;
use crate::clock::Clock;
use crate::config::DataDir;
use crate::db;
use crate::hub::Hub;
use crate::passwords::PasswordChecks;
use crate::peers::PeerClient;
use crate::standings::Standings;
use crate::writer::Writer;

/// Everything a request handler shares.
pub struct App {
    pub settings: folio_core::Settings,
    pub clock: Clock,
    pub readers: db::Readers,
    pub writer: Writer,
    pub hub: Arc<Hub>,
    /// Signs the consent page's session cookies.
    pub session_key: SessionKey,
    pub blobs: BlobStore,
    /// Turns for password checks ([`PASSWORD_CHECKS_AT_ONCE`](crate::passwords::PASSWORD_CHECKS_AT_ONCE)).
    pub password_checks: PasswordChecks,
    /// Turns true when the server shuts down: open event streams end.
    pub shutdown: watch::Receiver<bool>,
    pub data: DataDir,
    /// Apps' standings, remembered between requests.
    pub standings: Arc<Standings>,
    /// What core keeps between requests: users, standings, nonces, rates
    /// and remembered versions.
    pub resident: Arc<Resident>,
    /// Other servers, reached under core's rules (federation).
    pub peers: PeerClient,
    /// Wakes the outbox's delivery loop: a write queued notifications.
    pub outbox: std::sync::Arc<tokio::sync::Notify>,
    /// When failed deliveries are tried again.
    pub outbox_retry: folio_core::service::federation::RetryPolicy,
}

impl App {
    /// The bytes of the blob files the stores hold (a read of the store).
    pub async fn blob_bytes(&self) -> Result<i64, db::DbError> {
        let rows = self
            .readers
            .fetch(&folio_core::store::stored_blob_bytes_sql())
            .await?;
        Ok(rows
            .first()
            .and_then(|row| row.integer(0).ok())
            .unwrap_or(0))
    }
}
