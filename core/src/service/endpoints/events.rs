//! `GET …/events` (PROTOCOL.md §8): who may listen, the catch-up from the
//! event log, and the subscriber the host's live stream filters with.

use crate::auth::access::Access;
use crate::model::dialect::LAST_EVENT_ID;
use crate::problem::Problem;
use crate::query::EventsQuery;
use crate::service::events::{
    CatchUp, EVENT_STREAM_HEADERS, EventId, EventLogBounds, EventStream, EventsError,
    MAX_CATCH_UP_EVENTS, MAX_CATCH_UP_ROWS, Subscriber, authorize_events, catch_up_batch,
    catch_up_start, parse_client_id, record_event,
};
use crate::store::{event_log_bounds_sql, events_sql, read_version};

use crate::service::store::RowExt;
use crate::service::{Context, Failure, Host, Limited, Outcome, Rate, Reply, ReplyBody, User};

/// How many event-log rows one catch-up query reads.
const CATCH_UP_CHUNK: u32 = 500;

pub(in crate::service) async fn events<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
) -> Outcome<H::Stream> {
    let host = cx.host;
    let caller = cx.authenticate(user, None).await?;
    if matches!(caller.access, Access::Anonymous) {
        cx.rate(Rate::AnonymousRead(cx.request.peer)).await?;
    }
    authorize_events(&caller.access).map_err(|e| Problem::from(&e))?;
    let query =
        EventsQuery::from_params(&cx.params, cx.request.now).map_err(|e| Problem::from(&e))?;
    cx.refuse_unmatchable(user, &query.filters).await?;
    let dialect = host.settings().dialect;
    let client_id = parse_client_id(
        cx.request
            .headers
            .header(dialect.names().client_id.lowercase),
    )?;
    let last_event_id = cx
        .request
        .header(LAST_EVENT_ID.lowercase)
        .and_then(EventId::from_header);

    let anonymous = matches!(caller.access, Access::Anonymous);
    let subscriber = Subscriber::new(caller.access, client_id, query.clone())
        .with_standing(caller.authorization, caller.bearer_expiry);
    let stream = EventStream::new(
        subscriber.clone(),
        cx.request.now,
        host.settings().limits.heartbeat_ms,
    );
    // Subscribe first, so nothing committed during the catch-up is missed.
    let subscription = host
        .subscribe(user, anonymous, stream)
        .map_err(|full| Failure::from(Limited::from(full)))?;
    let bounds_rows = cx.fetch(&event_log_bounds_sql(user.id)).await?;
    let bounds = match bounds_rows.first() {
        Some(row) => {
            let oldest = row.optional_integer(0)?;
            let latest = row.integer(1)?;
            EventLogBounds {
                oldest_retained: oldest.map(|s| EventId::from_sequence(sequence(s))),
                latest: (latest > 0).then(|| EventId::from_sequence(sequence(latest))),
            }
        }
        None => EventLogBounds::default(),
    };
    let start = catch_up_start(&query, last_event_id, bounds);

    // Read the log in chunks, keeping what this subscriber accepts.
    let mut pending = Vec::new();
    let mut after = None;
    let mut last_seq = 0u64;
    let mut scanned = 0usize;
    loop {
        let rows = cx
            .fetch(&events_sql(user.id, start, after, CATCH_UP_CHUNK))
            .await?;
        let count = rows.len();
        scanned += count;
        for row in rows {
            let read = || -> Result<_, Failure> {
                let seq = row.integer(0)?;
                let client = row.optional_text(1)?;
                let record = row.text(2)?;
                let links = row.text(3)?;
                let (record, entries) = read_version(record, links)?;
                Ok((
                    sequence(seq),
                    client.and_then(|c| c.parse().ok()),
                    record,
                    entries,
                ))
            };
            let (seq, written_by, record, entries) = read()?;
            last_seq = seq;
            after = Some(EventId::from_sequence(seq));
            if subscriber.should_send(&record, &entries, written_by) {
                pending.push(record_event(EventId::from_sequence(seq), &record));
            }
        }
        if count < CATCH_UP_CHUNK as usize || pending.len() > MAX_CATCH_UP_EVENTS {
            break;
        }
        if scanned >= MAX_CATCH_UP_ROWS {
            return Err(Problem::from(&EventsError::TooManyEvents).into());
        }
    }
    let frames = catch_up_batch(pending).map_err(|e| Problem::from(&e))?;
    let stream = host.event_stream(subscription, CatchUp { frames, last_seq });
    let mut reply = Reply::new(200, ReplyBody::Stream(stream));
    for (name, value) in EVENT_STREAM_HEADERS {
        reply.set(name, value);
    }
    Ok(reply)
}

/// An event sequence as stored (never negative).
fn sequence(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or_default()
}
