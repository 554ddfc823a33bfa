//! Metrics in Prometheus's text format ([`METRICS`]), a readiness answer,
//! and federation's health, on a listener of their own (`--metrics-listen`,
//! off by default).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};

use crate::app::App;
use crate::metrics::{METRICS, StoreSizes};

/// The target of this listener's log lines: the metrics' own, which log
/// filters name (`FOLIO_LOG=info,folio::metrics=warn`).
const LOG_TARGET: &str = "folio::metrics";

/// The size of the file at `path`, 0 if there is none.
fn file_size(path: &Path) -> i64 {
    std::fs::metadata(path).map_or(0, |meta| i64::try_from(meta.len()).unwrap_or(i64::MAX))
}

/// Serves `GET /metrics`, `GET /ready` and `GET /health/federation` on
/// `address` until shutdown.
pub async fn serve(
    address: SocketAddr,
    app: Arc<App>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let local = listener.local_addr()?;
    tracing::info!(target: LOG_TARGET, address = %local, "serving metrics (/metrics), readiness (/ready) and federation's health (/health/federation) over plain HTTP");
    let mut stop = app.shutdown.clone();
    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/ready", get(ready))
        .route("/health/federation", get(federation_health))
        .with_state(app);
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await;
    }))
}

/// The exposition, in Prometheus's text format 0.0.4.
async fn metrics(State(app): State<Arc<App>>) -> Response {
    let database = app.data.database();
    let wal = database.with_extension("db-wal");
    let blobs = app.blob_bytes().await.unwrap_or_else(|error| {
        tracing::warn!(target: LOG_TARGET, %error, "could not read the blobs' size for the metrics");
        0
    });
    let sizes = StoreSizes {
        database: file_size(&database),
        wal: file_size(&wal),
        blobs,
    };
    let outbox = folio_core::service::outbox_summary(&*app, app.clock.now())
        .await
        .inspect_err(|error| {
            tracing::warn!(target: LOG_TARGET, %error, "could not read the outbox for the metrics");
        })
        .ok();
    let text = METRICS.render(sizes, outbox.as_ref());
    ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response()
}

/// Federation's health, in JSON: the outbox by state (notifications, the
/// oldest one's age in seconds, recipients) and the peers failing now.
/// Always `200` when the outbox could be read: a peer that is down is the
/// peer's trouble, never this server's unreadiness (`503` only when the
/// store does not answer).
async fn federation_health(State(app): State<Arc<App>>) -> Response {
    match folio_core::service::outbox_summary(&*app, app.clock.now()).await {
        Ok(summary) => (
            [(header::CONTENT_TYPE, "application/json")],
            summary.to_json().to_string(),
        )
            .into_response(),
        Err(error) => {
            tracing::warn!(target: LOG_TARGET, %error, "federation health: the outbox could not be read");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the store does not answer\n",
            )
                .into_response()
        }
    }
}

/// `200 ready` while the server serves and its store answers a read;
/// `503` while it shuts down or when the store fails.
async fn ready(State(app): State<Arc<App>>) -> Response {
    if *app.shutdown.borrow() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    match app.blob_bytes().await {
        Ok(_) => (StatusCode::OK, "ready\n").into_response(),
        Err(error) => {
            tracing::warn!(target: LOG_TARGET, %error, "readiness: the store did not answer a read");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the store does not answer\n",
            )
                .into_response()
        }
    }
}
