//! The events stream (spec §6, PROTOCOL.md §8).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::{Call, Http, Response, now_ms, read_response, record_id};
use crate::context::{Ctx, record_link, type_filter, with_query};
use crate::dates::record_date;
use crate::expect::{self, TOO_MANY_EVENTS, ensure, ensure_eq, str_at};
use crate::signer::AppKey;
use crate::sse::{EventStream, RecordEvent};

pub fn checks() -> Vec<Check> {
    vec![
        check!("events/content-type-event-stream", content_type),
        check!("events/catch-up-sends-recent-writes", catch_up),
        check!("events/catch-up-oldest-first", catch_up_order),
        check!("events/live-event-after-write", live_event),
        check!("events/event-has-id-type-and-one-data-line", event_format),
        check!("events/data-is-the-record", data_is_record),
        check!("events/update-emits-event", update_event),
        check!("events/tombstones-left-out-by-default", tombstones_left_out),
        check!("events/include-deleted-sends-tombstones", include_deleted),
        check!("events/cascade-emits-dependant-tombstones", cascade_events),
        check!(
            "events/last-event-id-resumes-after-that-event",
            last_event_id
        ),
        check!(
            "events/unknown-last-event-id-falls-back-to-min",
            unknown_last_event_id
        ),
        check!("events/min-older-than-20s-clamped", min_clamped),
        check!("events/min-is-exclusive-bound", min_exclusive),
        check!("events/hundred-pending-accepted", hundred_pending),
        check!(
            "events/over-hundred-pending-too-many-events",
            too_many_pending
        ),
        check!("events/same-client-id-filtered-out", same_client_id),
        check!("events/other-client-id-delivered", other_client_id),
        check!("events/filter-applies", filter_applies),
        check!("events/repeated-filters-or", repeated_filters),
        check!(
            "events/include-links-and-page-size-ignored",
            include_links_ignored
        ),
        check!("events/scoped-app-gets-subscribed-type", scoped_subscribed),
        check!(
            "events/scoped-app-without-subscribe-grant-left-out",
            scoped_not_subscribed
        ),
        check!("events/anonymous-gets-public-only", anonymous_public_only),
        check!(
            "events/lagging-subscriber-disconnected-then-resumes",
            lagging_subscriber
        ),
        check!(
            "events/anonymous-streams-hold-at-most-half-the-users-cap",
            anonymous_half
        ),
        check!(
            "events/silent-stream-hears-heartbeats",
            heartbeat_on_silence
        ),
    ]
}

const WAIT: Duration = Duration::from_secs(10);

/// An events request with these parameters, signed by `app` when given.
fn events_call<'a>(
    ctx: &Ctx,
    app: Option<&'a AppKey>,
    parameters: &[(&str, &str)],
) -> Result<Call<'a>, String> {
    let call = Call::get(with_query(ctx.events_url()?, parameters));
    Ok(match app {
        Some(app) => call.signed(app),
        None => call,
    })
}

enum Connection {
    Stream(EventStream),
    Refused(Response),
}

async fn connect(ctx: &Ctx, call: &Call<'_>) -> Result<Connection, String> {
    let response = ctx.http.open(call).await?;
    if response.status().as_u16() != 200 {
        return Ok(Connection::Refused(read_response(response).await?));
    }
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    ensure!(
        content_type.starts_with("text/event-stream"),
        "Content-Type {content_type:?}"
    );
    Ok(Connection::Stream(EventStream::new(response)))
}

/// Opens the stream; anything but a 200 event stream fails.
async fn open(ctx: &Ctx, call: &Call<'_>) -> Result<EventStream, String> {
    match connect(ctx, call).await? {
        Connection::Stream(stream) => Ok(stream),
        Connection::Refused(response) => Err(format!(
            "events answered {}: {}",
            response.status,
            response.excerpt()
        )),
    }
}

/// The full app's stream of one type's records.
async fn watch_type(ctx: &Ctx, ty: &Value, extra: &[(&str, &str)]) -> Result<EventStream, String> {
    let filter = type_filter(ty)?;
    let mut parameters = vec![("filter", filter.as_str())];
    parameters.extend_from_slice(extra);
    open(ctx, &events_call(ctx, Some(&ctx.full), &parameters)?).await
}

fn id(record: &Value) -> Result<String, String> {
    str_at(record, "/id").map(str::to_string)
}

fn event_ids(events: &[RecordEvent]) -> Vec<&str> {
    events.iter().map(RecordEvent::record_id).collect()
}

/// A filter that matches nothing, so no catch-up is pending.
pub fn nothing_filter() -> String {
    format!("$['id']=\"{}\"", record_id())
}

async fn content_type(ctx: &Ctx) -> CheckResult {
    let filter = nothing_filter();
    open(
        ctx,
        &events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?,
    )
    .await
    .map(drop)
}

async fn catch_up(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let first = id(&ctx.note(&ty, json!({"title": "1"})).await?)?;
    let second = id(&ctx.note(&ty, json!({"title": "2"})).await?)?;
    let events = watch_type(ctx, &ty, &[])
        .await?
        .records_until(&second, WAIT)
        .await?;
    ensure!(
        event_ids(&events).contains(&first.as_str()),
        "catch-up lacks the first write: {:?}",
        event_ids(&events)
    );
    Ok(())
}

async fn catch_up_order(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let first = id(&ctx.note(&ty, json!({"title": "1"})).await?)?;
    let second = id(&ctx.note(&ty, json!({"title": "2"})).await?)?;
    let mut stream = watch_type(ctx, &ty, &[]).await?;
    let events = stream.records_until(&second, WAIT).await?;
    ensure_eq!(
        event_ids(&events),
        vec![first.as_str(), second.as_str()],
        "catch-up order"
    );
    Ok(())
}

async fn live_event(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let mut stream = watch_type(ctx, &ty, &[]).await?;
    let record = id(&ctx.note(&ty, json!({"title": "live"})).await?)?;
    stream.records_until(&record, WAIT).await.map(drop)
}

/// One fresh record's event, as received.
async fn one_event(ctx: &Ctx) -> Result<(Value, RecordEvent), String> {
    let ty = ctx.note_type().await?;
    let mut stream = watch_type(ctx, &ty, &[]).await?;
    let record = ctx.note(&ty, json!({"title": "format"})).await?;
    let mut events = stream.records_until(&id(&record)?, WAIT).await?;
    let event = events.pop().ok_or("no event")?;
    Ok((record, event))
}

async fn event_format(ctx: &Ctx) -> CheckResult {
    let (_, event) = one_event(ctx).await?;
    ensure!(
        event.event.id.as_deref().is_some_and(|id| !id.is_empty()),
        "event without id"
    );
    ensure_eq!(event.event.event.as_deref(), Some("record"), "event type");
    ensure_eq!(event.event.data_lines, 1, "data lines");
    Ok(())
}

async fn data_is_record(ctx: &Ctx) -> CheckResult {
    let (record, event) = one_event(ctx).await?;
    ensure_eq!(event.record, record, "event data");
    Ok(())
}

async fn update_event(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = id(&ctx.note(&ty, json!({"title": "1"})).await?)?;
    let mut stream = watch_type(ctx, &ty, &[]).await?;
    stream.records_until(&record, WAIT).await?;
    let call = Call::put(ctx.record_url(&record)?)
        .json(&json!({"content": {"title": "2"}}))
        .signed(&ctx.full);
    let updated = expect::json(&ctx.send(call).await?, 200)?;
    let event = stream
        .records_until(&record, WAIT)
        .await?
        .pop()
        .ok_or("no event")?;
    ensure_eq!(
        event.record["version"]["hash"],
        updated["record"]["version"]["hash"],
        "version in the event"
    );
    Ok(())
}

/// Watches a type (with `extra` parameters) while a record is created and
/// deleted, then a sentinel created; returns the events up to the sentinel.
async fn deletion_events(
    ctx: &Ctx,
    extra: &[(&str, &str)],
) -> Result<(String, Vec<RecordEvent>), String> {
    let ty = ctx.note_type().await?;
    let mut stream = watch_type(ctx, &ty, extra).await?;
    let gone = id(&ctx.note(&ty, json!({"title": "gone"})).await?)?;
    expect::status(
        &ctx.send(Call::delete(ctx.record_url(&gone)?).signed(&ctx.full))
            .await?,
        200,
    )?;
    let sentinel = id(&ctx.note(&ty, json!({"title": "sentinel"})).await?)?;
    Ok((gone, stream.records_until(&sentinel, WAIT).await?))
}

fn tombstones(events: &[RecordEvent]) -> usize {
    events
        .iter()
        .filter(|event| event.record.get("no_content").is_some())
        .count()
}

async fn tombstones_left_out(ctx: &Ctx) -> CheckResult {
    let (_, events) = deletion_events(ctx, &[]).await?;
    ensure_eq!(tombstones(&events), 0, "tombstone events");
    Ok(())
}

async fn include_deleted(ctx: &Ctx) -> CheckResult {
    let (gone, events) = deletion_events(ctx, &[("include_deleted", "true")]).await?;
    let found = events
        .iter()
        .any(|event| event.record_id() == gone && event.record.get("no_content").is_some());
    ensure!(found, "no tombstone event for {gone}");
    Ok(())
}

async fn cascade_events(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let parent = ctx.note(&ty, json!({"title": "parent"})).await?;
    let child = id(&ctx
        .note(
            &ty,
            json!({"title": "child", "parent": record_link(&parent)?}),
        )
        .await?)?;
    let mut stream = watch_type(ctx, &ty, &[("include_deleted", "true")]).await?;
    stream.records_until(&child, WAIT).await?;
    expect::status(
        &ctx.send(Call::delete(ctx.record_url(&id(&parent)?)?).signed(&ctx.full))
            .await?,
        200,
    )?;
    let event = stream
        .records_until(&child, WAIT)
        .await?
        .pop()
        .ok_or("no event")?;
    ensure!(
        event.record.get("no_content").is_some(),
        "the child's event is not a tombstone"
    );
    Ok(())
}

async fn last_event_id(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let mut ids = Vec::new();
    for title in ["1", "2", "3"] {
        ids.push(id(&ctx.note(&ty, json!({"title": title})).await?)?);
    }
    let events = watch_type(ctx, &ty, &[])
        .await?
        .records_until(&ids[2], WAIT)
        .await?;
    let first = events
        .iter()
        .find(|event| event.record_id() == ids[0])
        .ok_or("no event for the first record")?;
    let last_id = first.event.id.clone().ok_or("event without id")?;
    let filter = type_filter(&ty)?;
    let call = events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?
        .header("last-event-id", &last_id);
    let resumed = open(ctx, &call).await?.records_until(&ids[2], WAIT).await?;
    ensure_eq!(
        event_ids(&resumed),
        vec![ids[1].as_str(), ids[2].as_str()],
        "events after the resume point"
    );
    Ok(())
}

async fn unknown_last_event_id(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = id(&ctx.note(&ty, json!({"title": "recent"})).await?)?;
    let filter = type_filter(&ty)?;
    let call = events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?
        .header("last-event-id", "no-such-event");
    open(ctx, &call)
        .await?
        .records_until(&record, WAIT)
        .await
        .map(drop)
}

async fn min_clamped(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = id(&ctx.note(&ty, json!({"title": "recent"})).await?)?;
    let min = format!("\"{}\"", record_date(now_ms() - 3_600_000));
    watch_type(ctx, &ty, &[("min", &min)])
        .await?
        .records_until(&record, WAIT)
        .await
        .map(drop)
}

async fn min_exclusive(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let first = ctx.note(&ty, json!({"title": "1"})).await?;
    let second = id(&ctx.note(&ty, json!({"title": "2"})).await?)?;
    let min = format!("\"{}\"", str_at(&first, "/version/received_at")?);
    let events = watch_type(ctx, &ty, &[("min", &min)])
        .await?
        .records_until(&second, WAIT)
        .await?;
    ensure_eq!(
        event_ids(&events),
        vec![second.as_str()],
        "events after min"
    );
    Ok(())
}

async fn pending(ctx: &Ctx, count: usize) -> Result<(Value, String), String> {
    let ty = ctx.note_type().await?;
    let mut last = String::new();
    for n in 0..count {
        last = id(&ctx
            .note(&ty, json!({"title": format!("pending {n}")}))
            .await?)?;
    }
    Ok((ty, last))
}

async fn hundred_pending(ctx: &Ctx) -> CheckResult {
    let (ty, last) = pending(ctx, 100).await?;
    let events = watch_type(ctx, &ty, &[])
        .await?
        .records_until(&last, WAIT)
        .await?;
    ensure_eq!(events.len(), 100, "catch-up events");
    Ok(())
}

async fn too_many_pending(ctx: &Ctx) -> CheckResult {
    let (ty, _) = pending(ctx, 101).await?;
    let filter = type_filter(&ty)?;
    match connect(
        ctx,
        &events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?,
    )
    .await?
    {
        Connection::Stream(_) => Err("the stream started with 101 updates pending".into()),
        Connection::Refused(response) => {
            expect::problem_response(&response, TOO_MANY_EVENTS).map(drop)
        }
    }
}

/// Watches with client id `watcher` while a record is written with client
/// id `writer`, then a sentinel without one; whether the record came.
async fn delivered_with_client_ids(ctx: &Ctx, watcher: &str, writer: &str) -> Result<bool, String> {
    let ty = ctx.note_type().await?;
    let filter = type_filter(&ty)?;
    let call = events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?
        .header("x-svc-client-id", watcher);
    let mut stream = open(ctx, &call).await?;
    let body = json!({"type": ty, "content": {"title": "tagged write"}});
    let write = Call::post(ctx.records_url()?)
        .json(&body)
        .header("x-svc-client-id", writer)
        .signed(&ctx.full);
    let written = id(&expect::json(&ctx.send(write).await?, 200)?["record"])?;
    let sentinel = id(&ctx.note(&ty, json!({"title": "sentinel"})).await?)?;
    let events = stream.records_until(&sentinel, WAIT).await?;
    Ok(event_ids(&events).contains(&written.as_str()))
}

async fn same_client_id(ctx: &Ctx) -> CheckResult {
    let client = record_id();
    ensure!(
        !delivered_with_client_ids(ctx, &client, &client).await?,
        "the client's own write was sent to it"
    );
    Ok(())
}

async fn other_client_id(ctx: &Ctx) -> CheckResult {
    ensure!(
        delivered_with_client_ids(ctx, &record_id(), &record_id()).await?,
        "another client's write was not sent"
    );
    Ok(())
}

async fn filter_applies(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let filter = format!("{},$['content']['label']=\"wanted\"", type_filter(&ty)?);
    let mut stream = open(
        ctx,
        &events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?,
    )
    .await?;
    ctx.note(&ty, json!({"title": "other", "label": "unwanted"}))
        .await?;
    let wanted = id(&ctx
        .note(&ty, json!({"title": "wanted", "label": "wanted"}))
        .await?)?;
    let events = stream.records_until(&wanted, WAIT).await?;
    ensure_eq!(event_ids(&events), vec![wanted.as_str()], "events");
    Ok(())
}

async fn repeated_filters(ctx: &Ctx) -> CheckResult {
    let (one, two) = (ctx.note_type().await?, ctx.note_type().await?);
    let (filter_one, filter_two) = (type_filter(&one)?, type_filter(&two)?);
    let call = events_call(
        ctx,
        Some(&ctx.full),
        &[("filter", &filter_one), ("filter", &filter_two)],
    )?;
    let mut stream = open(ctx, &call).await?;
    let first = id(&ctx.note(&one, json!({"title": "one"})).await?)?;
    let second = id(&ctx.note(&two, json!({"title": "two"})).await?)?;
    let events = stream.records_until(&second, WAIT).await?;
    ensure_eq!(
        event_ids(&events),
        vec![first.as_str(), second.as_str()],
        "events"
    );
    Ok(())
}

async fn include_links_ignored(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = ctx.note(&ty, json!({"title": "t"})).await?;
    let events = watch_type(ctx, &ty, &[("include_links", "entity"), ("page_size", "0")])
        .await?
        .records_until(&id(&record)?, WAIT)
        .await?;
    ensure_eq!(
        events.last().map(|event| &event.record),
        Some(&record),
        "event data"
    );
    Ok(())
}

/// The scoped app's stream of its two types' records.
async fn scoped_stream(ctx: &Ctx) -> Result<(EventStream, Value, Value), String> {
    let types = ctx.scoped_types().await?;
    let (read, write) = (types.read.clone(), types.write.clone());
    let (filter_read, filter_write) = (type_filter(&read)?, type_filter(&write)?);
    let call = events_call(
        ctx,
        Some(&ctx.scoped),
        &[("filter", &filter_read), ("filter", &filter_write)],
    )?;
    Ok((open(ctx, &call).await?, read, write))
}

async fn scoped_subscribed(ctx: &Ctx) -> CheckResult {
    let (mut stream, _, write) = scoped_stream(ctx).await?;
    let record = id(&ctx.note(&write, json!({"title": "subscribed"})).await?)?;
    stream.records_until(&record, WAIT).await.map(drop)
}

async fn scoped_not_subscribed(ctx: &Ctx) -> CheckResult {
    let (mut stream, read, write) = scoped_stream(ctx).await?;
    let unsubscribed = id(&ctx.note(&read, json!({"title": "not subscribed"})).await?)?;
    let sentinel = id(&ctx.note(&write, json!({"title": "sentinel"})).await?)?;
    let events = stream.records_until(&sentinel, WAIT).await?;
    ensure!(
        !event_ids(&events).contains(&unsubscribed.as_str()),
        "a read-only type's record was sent"
    );
    Ok(())
}

async fn anonymous_public_only(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let filter = type_filter(&ty)?;
    let mut stream = open(ctx, &events_call(ctx, None, &[("filter", &filter)])?).await?;
    let private = id(&ctx.note(&ty, json!({"title": "private"})).await?)?;
    let public = id(&ctx.public_note(&ty, json!({"title": "public"})).await?)?;
    let events = stream.records_until(&public, WAIT).await?;
    ensure!(
        !event_ids(&events).contains(&private.as_str()),
        "a private record was sent anonymously"
    );
    Ok(())
}

/// How many versions the lagging subscriber is sent while it reads
/// nothing: no more than a reconnection's catch-up takes (PROTOCOL.md §8),
/// so that whatever it missed when it was disconnected comes back.
const LAG_VERSIONS: usize = 100;

/// The largest body the check sends: the protocol's JSON body limit.
const LAG_BODY_MAX: u64 = 1 << 20;

/// Room in a body for the record around its padding.
const LAG_BODY_ROOM: u64 = 16 << 10;

/// A subscriber that stops reading while many versions are written is
/// disconnected (its queue is bounded: PROTOCOL.md §8, §13) instead of
/// having them buffered for it without bound; reconnecting with the last
/// `Last-Event-Id` it read, it catches up with exactly the versions it
/// missed.
///
/// The stream is opened on a client of its own (an unread HTTP/2 stream
/// holds its connection's window) and not read until every version is
/// written; then it must hand over a prefix of them, in order, and end.
/// Everything between the server's queue and the client buffers bytes too
/// (TCP, HTTP/2's flow-control window, a proxy in front), so each version
/// is padded to nearly the JSON body limit: 100 of them are about 100 MiB,
/// which must outgrow all of that and a queue (Folio's holds 64 events)
/// well before the last is written. Which prefix arrives depends on those
/// buffers, so the check asks only that some versions were missed (77 of
/// them arrived from `wrangler dev`: 64 from the worker's queue, the rest
/// from buffers on the way; 4 from `folio serve` over HTTP/2); all of them
/// arriving means the server kept them all for a client that read none.
async fn lagging_subscriber(ctx: &Ctx) -> CheckResult {
    let schema = json!({
        "type": "object",
        "properties": {"content": {"type": "object", "properties": {
            "n": {"type": "int"},
            "pad": {"type": "string"}
        }}}
    });
    let ty = ctx.new_type(schema).await?;
    let filter = type_filter(&ty)?;
    let call = events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?;
    let watcher = Http::new(&ctx.target)?;
    let response = watcher.open(&call).await?;
    ensure_eq!(response.status().as_u16(), 200, "events status");
    let mut stream = EventStream::new(response);

    let body_limit = ctx
        .limit("json_body_bytes", LAG_BODY_MAX)
        .await
        .unwrap_or(LAG_BODY_MAX);
    let pad_bytes = body_limit.min(LAG_BODY_MAX).saturating_sub(LAG_BODY_ROOM);
    let pad = "x".repeat(usize::try_from(pad_bytes).map_err(|error| error.to_string())?);
    let mut written = Vec::with_capacity(LAG_VERSIONS);
    for n in 0..LAG_VERSIONS {
        let record = ctx.note(&ty, json!({"n": n, "pad": pad})).await?;
        written.push(id(&record)?);
    }

    // Now read: what the buffers held, then the end of the stream.
    let mut received: Vec<RecordEvent> = Vec::new();
    let ended = loop {
        match stream.next_record(WAIT).await {
            Ok(Some(event)) => received.push(event),
            Ok(None) => {
                return Err(format!(
                    "the stream of a subscriber that read nothing while {LAG_VERSIONS} versions \
                     of {} KiB were written sent {} of them, then nothing for {} s without \
                     ending",
                    pad_bytes >> 10,
                    received.len(),
                    WAIT.as_secs()
                ));
            }
            Err(end) => break end,
        }
        ensure!(
            received.len() < LAG_VERSIONS,
            "all {LAG_VERSIONS} versions ({} MiB) were kept for a subscriber that read none \
             of them while they were written: its queue is not bounded",
            (LAG_VERSIONS as u64 * pad_bytes) >> 20
        );
    };
    let ids = event_ids(&received);
    ensure_eq!(
        ids.as_slice(),
        &written[..ids.len()],
        "the events before the stream ended ({ended})"
    );
    let last = received.last().ok_or_else(|| {
        format!("the stream ended ({ended}) before any event reached the subscriber")
    })?;
    let last_id = last.event.id.clone().ok_or("event without id")?;
    drop(stream);

    let missed = &written[received.len()..];
    let call = events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?
        .header("last-event-id", &last_id);
    let newest = written.last().ok_or("nothing written")?;
    let resumed = open(ctx, &call)
        .await?
        .records_until(newest, WAIT)
        .await
        .map_err(|error| {
            format!(
                "resuming after the {} events read, {} missed: {error}",
                received.len(),
                missed.len()
            )
        })?;
    ensure_eq!(
        event_ids(&resumed),
        missed.iter().map(String::as_str).collect::<Vec<_>>(),
        format!(
            "the events after Last-Event-Id (after {} read before the stream ended)",
            received.len()
        )
    );
    Ok(())
}

/// Unauthenticated streams may hold at most half of the user's streams
/// (PROTOCOL.md §13's cap), so that strangers cannot shut the user's own
/// apps out. Streams other checks left open may still be counted, so this
/// opens anonymous ones until the first refusal.
async fn anonymous_half(ctx: &Ctx) -> CheckResult {
    let cap = ctx.limit("sse_connections_per_user", 64).await?;
    let cap = usize::try_from(cap).map_err(|error| error.to_string())?;
    let http = ctx.http.without_retries();
    let call = Call::get(ctx.events_url()?);
    let mut open = Vec::new();
    let refusal = loop {
        ensure!(
            open.len() <= cap / 2,
            "{} unauthenticated streams open of a cap of {cap}",
            open.len()
        );
        let response = http.open(&call).await?;
        if response.status().as_u16() == 200 {
            open.push(EventStream::new(response));
            continue;
        }
        let refused = read_response(response).await?;
        let detail = refused
            .json()
            .ok()
            .and_then(|body| body["detail"].as_str().map(str::to_owned));
        if refused.status == 429 && !detail.as_deref().unwrap_or_default().contains("stream") {
            // The address's read rate, not the cap: wait it out.
            tokio::time::sleep(
                crate::client::retry_after(&refused.headers).unwrap_or(Duration::from_secs(1)),
            )
            .await;
            continue;
        }
        break refused;
    };
    expect::status(&refusal, 429).map_err(|error| format!("the stream past the half: {error}"))?;
    ensure!(!open.is_empty(), "no unauthenticated stream opened at all");
    // From now on: without `min` the catch-up reaches 20 s back, where the
    // lagging subscriber's check may have written its hundred versions,
    // and more than a hundred pending is `too_many_events`.
    let min = format!("\"{}\"", record_date(now_ms()));
    let signed = ctx
        .http
        .open(&events_call(ctx, Some(&ctx.full), &[("min", &min)])?)
        .await?;
    let beside = format!("a signed stream beside {} unauthenticated ones", open.len());
    ensure_eq!(signed.status().as_u16(), 200, beside);
    Ok(())
}

/// How much later than the server's interval a heartbeat may come (the
/// time a stream takes to open, and a loaded machine's timers).
const HEARTBEAT_LATE: Duration = Duration::from_secs(1);

/// How much sooner than the server's interval a heartbeat may come: only
/// the timers' rounding; a heartbeat due for another stream is not this
/// one's.
const HEARTBEAT_EARLY: Duration = Duration::from_millis(200);

/// An open stream that will receive nothing but heartbeats, and when it
/// was asked for.
async fn silent_stream(ctx: &Ctx) -> Result<(EventStream, tokio::time::Instant), String> {
    let filter = nothing_filter();
    let call = events_call(ctx, Some(&ctx.full), &[("filter", &filter)])?;
    let opened = tokio::time::Instant::now();
    let response = ctx.http.open(&call).await?;
    ensure_eq!(response.status().as_u16(), 200, "events status");
    Ok((EventStream::new(response), opened))
}

/// A stream with nothing to send hears a heartbeat after each interval of
/// its own silence that `server_info` reports (`heartbeat_ms`, PROTOCOL.md
/// §8): `event: heartbeat` with an empty `data` and no `id` (which would
/// change the client's `Last-Event-Id`). Two streams opened half an
/// interval apart each hear theirs on their own schedule, neither sooner
/// nor much later. A server whose interval is the default 15 s makes this
/// check take about 40 s.
async fn heartbeat_on_silence(ctx: &Ctx) -> CheckResult {
    let interval = Duration::from_millis(ctx.limit("heartbeat_ms", 15_000).await?);
    let mut first = silent_stream(ctx).await?;
    tokio::time::sleep(interval / 2).await;
    let mut second = silent_stream(ctx).await?;
    for nth in 1..=2u32 {
        for (name, (stream, opened)) in [("first", &mut first), ("second", &mut second)] {
            let due = interval * nth;
            let event = stream
                .next_event(due.saturating_sub(opened.elapsed()) + HEARTBEAT_LATE)
                .await?
                .ok_or_else(|| {
                    format!(
                        "the {name} stream: no heartbeat {nth} within {} ms of opening \
                         (heartbeat_ms {})",
                        (due + HEARTBEAT_LATE).as_millis(),
                        interval.as_millis()
                    )
                })?;
            let after = opened.elapsed();
            ensure_eq!(event.event.as_deref(), Some("heartbeat"), "event type");
            ensure!(event.id.is_none(), "a heartbeat with an id: {:?}", event.id);
            ensure_eq!(event.data.as_str(), "", "a heartbeat's data");
            ensure!(
                after + HEARTBEAT_EARLY >= due,
                "the {name} stream heard heartbeat {nth} {} ms after it opened, before \
                 {} ms of silence",
                after.as_millis(),
                due.as_millis()
            );
        }
    }
    Ok(())
}
