//! An events request's inputs: `Last-Event-Id`, then (after a NUL byte)
//! the query string, then (after another) 16 bytes of event log bounds.
//!
//! `EventId::from_header` must accept exactly the decimal spelling of a
//! 64-bit sequence (checked against `u64` parsing, independently), and an id
//! that parses prints back to the same text, which parses to the same id.
//! The same text as `X-Svc-Client-Id` reads only as 32 lowercase hex
//! characters, which print back the same. The events query must read
//! deterministically with `min` clamped to 20 s ago; catch-up must start
//! after the id only when the log still holds every event after it, and
//! otherwise after the clamped `min`. The events SQL of that start must run
//! on SQLite (core's migrations, a store of events) and list events in
//! sequence order, after the start, at most as many as asked.

#![no_main]

#[path = "support/list_store.rs"]
mod list_store;

use folio_core::service::events::{CatchUpStart, EventId, EventLogBounds, catch_up_start, parse_client_id};
use folio_core::model::RecordDate;
use folio_core::query::{EVENTS_LOOKBACK_MS, EventsQuery, decode_query_string};
use folio_core::store::events_sql;
use libfuzzer_sys::fuzz_target;
use rusqlite::types::Value as SqlValue;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let header = parts.next().unwrap_or_default();
    let query = parts.next().unwrap_or_default();
    let bounds = parts.next().unwrap_or_default();

    let client_id = parse_client_id(Some(header));
    assert_eq!(
        client_id,
        parse_client_id(Some(header)),
        "client id: deterministic"
    );
    if let Ok(Some(id)) = &client_id {
        assert_eq!(
            id.to_string().as_bytes(),
            header,
            "a client id has one spelling"
        );
    }
    assert_eq!(parse_client_id(None), Ok(None));

    let Ok(header) = std::str::from_utf8(header) else {
        return;
    };
    let id = EventId::from_header(header);
    assert_eq!(
        id,
        EventId::from_header(header),
        "Last-Event-Id: deterministic"
    );
    let canonical = header
        .parse::<u64>()
        .ok()
        .filter(|n| n.to_string() == header);
    assert_eq!(
        id.map(EventId::sequence),
        canonical,
        "{header:?}: the decimal spelling only"
    );
    if let Some(id) = id {
        let printed = id.to_string();
        assert_eq!(printed, header, "an id prints as it was sent");
        assert_eq!(EventId::from_header(&printed), Some(id));
    }

    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let Ok(params) = decode_query_string(query) else {
        return;
    };
    let now = RecordDate::from_unix_millis(1_795_000_000_000).expect("a date");
    let events = EventsQuery::from_params(&params, now);
    assert_eq!(
        events,
        EventsQuery::from_params(&params, now),
        "events query: deterministic"
    );
    let Ok(events) = events else { return };
    assert!(
        events.min >= now.saturating_sub_millis(EVENTS_LOOKBACK_MS),
        "min is clamped"
    );

    let word = |at: usize| {
        bounds
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) % 64)
    };
    let log = EventLogBounds {
        oldest_retained: word(0).map(EventId::from_sequence),
        latest: word(8).map(EventId::from_sequence),
    };
    let start = catch_up_start(&events, id, log);
    assert_eq!(
        start,
        catch_up_start(&events, id, log),
        "catch-up: deterministic"
    );
    match start {
        CatchUpStart::AfterEvent(after) => {
            assert_eq!(Some(after), id, "catch-up starts after the id sent");
            let latest = log.latest.expect("an issued id");
            assert!(after <= latest, "the id was issued");
            match log.oldest_retained {
                Some(oldest) => assert!(oldest.sequence() <= after.sequence().saturating_add(1)),
                None => assert_eq!(after, latest, "an empty log"),
            }
        }
        CatchUpStart::AfterReceivedAt(min) => assert_eq!(min, events.min),
    }

    for (after, limit) in [(None, 100), (id, 3)] {
        let statement = events_sql(list_store::USER_ID, start, after, limit);
        let rows = list_store::with_store(|store| store.rows(&statement));
        assert!(rows.len() <= limit as usize, "at most {limit} events");
        let seqs: Vec<i64> = rows
            .iter()
            .map(|row| match row.first() {
                Some(SqlValue::Integer(seq)) => *seq,
                other => panic!("an event row starts with its sequence: {other:?}"),
            })
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "in sequence order: {seqs:?}"
        );
        let from_start = match start {
            CatchUpStart::AfterEvent(id) => Some(id.sequence()),
            CatchUpStart::AfterReceivedAt(_) => None,
        };
        let floor = from_start
            .into_iter()
            .chain(after.map(EventId::sequence))
            .max();
        if let Some(floor) = floor {
            assert!(
                seqs.iter().all(|&seq| seq as u64 > floor),
                "after {floor}: {seqs:?}"
            );
        }
    }
});
