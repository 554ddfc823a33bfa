//! `GET …/events` (PROTOCOL.md §8): the catch-up from the event log, then
//! live events from the hub, heartbeats in silences, and the end of the
//! stream when the subscriber lags, leaves, or the server stops.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use folio_core::events::{
    EVENT_STREAM_HEADERS, EventId, EventLogBounds, HEARTBEAT_EVENT, MAX_CATCH_UP_EVENTS,
    Subscriber, authorize_events, catch_up_batch, catch_up_start, parse_client_id, record_event,
};
use folio_core::problem::Problem;
use folio_core::query::EventsQuery;
use folio_core::store::{event_log_bounds_sql, events_sql, read_version};
use http::{HeaderValue, StatusCode, header};
use sqlx::Row;
use tokio::sync::{broadcast, mpsc};

use crate::api::{Failure, limited};
use crate::auth::{Presented, authenticate};
use crate::db;
use crate::hub::CAP_RETRY_AFTER_SECS;
use crate::server::App;
use crate::users::User;

pub struct StreamRequest<'r> {
    pub app: &'r App,
    pub presented: Presented<'r>,
    pub params: &'r [(String, String)],
    pub peer: SocketAddr,
}

/// How many event-log rows one catch-up query reads.
const CATCH_UP_CHUNK: u32 = 500;

/// How many frames may wait for a slow client socket.
const FRAMES_IN_FLIGHT: usize = 16;

pub async fn events(request: &StreamRequest<'_>, user: &User) -> Result<Response, Failure> {
    let app = request.app;
    let caller = authenticate(app, user, &request.presented).await?;
    if matches!(caller.access, folio_core::access::Access::Anonymous) {
        limited(app.rates.anonymous_read(&request.peer.ip()))?;
    }
    authorize_events(&caller.access).map_err(|e| Problem::from(&e))?;
    let now = app.clock.now();
    let query = EventsQuery::from_params(request.params, now).map_err(|e| Problem::from(&e))?;
    let headers = request.presented.headers;
    let client_id = parse_client_id(
        headers
            .get(app.dialect.names().client_id.lowercase)
            .map(HeaderValue::as_bytes),
    )?;
    let last_event_id = headers
        .get(folio_core::dialect::LAST_EVENT_ID.lowercase)
        .and_then(|v| v.to_str().ok())
        .and_then(EventId::from_header);

    // Subscribe first, so nothing committed during the catch-up is missed.
    let subscription = app.hub.subscribe(user.id).map_err(|problem| {
        Failure::from(problem).with_header(header::RETRY_AFTER, CAP_RETRY_AFTER_SECS)
    })?;
    let bounds_row = db::fetch(&app.readers, &event_log_bounds_sql(user.id))
        .await
        .map_err(|e| app.internal(&e))?;
    let bounds = match bounds_row.first() {
        Some(row) => {
            let oldest: Option<i64> = row.try_get(0).map_err(|e| app.internal(&e))?;
            let latest: i64 = row.try_get(1).map_err(|e| app.internal(&e))?;
            EventLogBounds {
                oldest_retained: oldest.map(|s| EventId::from_sequence(s as u64)),
                latest: (latest > 0).then(|| EventId::from_sequence(latest as u64)),
            }
        }
        None => EventLogBounds::default(),
    };
    let start = catch_up_start(&query, last_event_id, bounds);
    let subscriber = Subscriber::new(caller.access, client_id, query);

    // Read the log in chunks, keeping what this subscriber accepts.
    let mut pending = Vec::new();
    let mut after = None;
    let mut last_seq = 0u64;
    loop {
        let rows = db::fetch(
            &app.readers,
            &events_sql(user.id, start, after, CATCH_UP_CHUNK),
        )
        .await
        .map_err(|e| app.internal(&e))?;
        let count = rows.len();
        for row in rows {
            let seq: i64 = row.try_get(0).map_err(|e| app.internal(&e))?;
            let client: Option<String> = row.try_get(1).map_err(|e| app.internal(&e))?;
            let record: String = row.try_get(2).map_err(|e| app.internal(&e))?;
            let links: String = row.try_get(3).map_err(|e| app.internal(&e))?;
            let (record, entries) = read_version(&record, &links).map_err(|e| app.internal(&e))?;
            let seq = seq as u64;
            last_seq = seq;
            after = Some(EventId::from_sequence(seq));
            let written_by = client.and_then(|c| c.parse().ok());
            if subscriber.should_send(&record, &entries, written_by) {
                pending.push(record_event(EventId::from_sequence(seq), &record));
            }
        }
        if count < CATCH_UP_CHUNK as usize || pending.len() > MAX_CATCH_UP_EVENTS {
            break;
        }
    }
    let catch_up = catch_up_batch(pending).map_err(|e| Problem::from(&e))?;

    let (frames, body) = mpsc::channel::<Result<Bytes, std::io::Error>>(FRAMES_IN_FLIGHT);
    let heartbeat = Duration::from_millis(app.limits.heartbeat_ms);
    let mut shutdown = app.shutdown.clone();
    let mut receiver = subscription.receiver.resubscribe();
    tokio::spawn(async move {
        let _subscription = subscription;
        for frame in catch_up {
            if frames.send(Ok(Bytes::from(frame))).await.is_err() {
                return;
            }
        }
        loop {
            let frame = tokio::select! {
                event = receiver.recv() => match event {
                    Ok(event) if event.seq <= last_seq => continue,
                    Ok(event) => {
                        last_seq = event.seq;
                        if !subscriber.should_send(&event.record, &event.entries, event.client_id) {
                            continue;
                        }
                        record_event(EventId::from_sequence(event.seq), &event.record)
                    }
                    // Too far behind: end the stream; the client resumes with Last-Event-Id.
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                () = tokio::time::sleep(heartbeat) => HEARTBEAT_EVENT.to_owned(),
                _ = shutdown.wait_for(|stopped| *stopped) => return,
            };
            if frames.send(Ok(Bytes::from(frame))).await.is_err() {
                return;
            }
        }
    });
    let mut response = Response::new(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(body),
    ));
    *response.status_mut() = StatusCode::OK;
    for (name, value) in EVENT_STREAM_HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    Ok(response)
}
