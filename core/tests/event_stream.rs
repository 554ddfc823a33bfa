//! An event stream's machine under simulated time: the catch-up before the
//! live events, batching into chunks and the flush interval, the heartbeat
//! in silences, the bearer token's expiry, the queue bound, a changed
//! standing and the shutdown. The same scenarios run natively and in wasm
//! (wasm-tests/tests/core.rs includes this file).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/record.rs");

use std::sync::Arc;

use folio_core::auth::access::Access;
use folio_core::model::{DeletionAction, NoContent, Record, RecordBody, RecordDate};
use folio_core::query::EventsQuery;
use folio_core::schema::builtin::BuiltinType;
use folio_core::service::events::{
    CatchUp, Chunk, EndReason, EventId, EventStream, HEARTBEAT_EVENT, LIVE_FLUSH_INTERVAL_MS,
    LiveCommit, LiveVersion, MAX_CHUNK_BYTES, Output, SUBSCRIBER_QUEUE_LEN, Subscriber,
    record_event,
};
use serde_json::json;

/// The simulated clock's start: 2026-11-21T10:00:00Z.
const T0_MS: i64 = 1_795_255_200_000;

/// A heartbeat interval short enough to tell apart from the flush interval.
const HEARTBEAT_MS: u64 = 1_000;

const FLUSH_MS: i64 = LIVE_FLUSH_INTERVAL_MS as i64;

/// `ms` milliseconds into the simulation.
fn at(ms: i64) -> RecordDate {
    RecordDate::from_unix_millis(T0_MS + ms).expect("a date")
}

fn owner() -> Subscriber {
    Subscriber::new(
        Access::Owner {
            entity: "alice.example".parse().expect("an entity"),
        },
        None,
        EventsQuery {
            min: at(0),
            filters: Vec::new(),
            include_deleted: false,
        },
    )
}

/// A stream of the owner, opened at 0, started with nothing to catch up.
fn started() -> EventStream {
    let mut stream = EventStream::new(owner(), at(0), HEARTBEAT_MS);
    stream.start(CatchUp::default());
    stream
}

fn note(title: &str) -> Record {
    record(json!({ "title": title }), json!({}))
}

fn version(seq: u64, record: &Record) -> LiveVersion {
    LiveVersion::new(seq, record.clone(), Vec::new(), None)
}

/// A commit of one small version per sequence.
fn commit(seqs: impl IntoIterator<Item = u64>) -> LiveCommit {
    let record = note("a");
    seqs.into_iter().map(|seq| version(seq, &record)).collect()
}

fn frame(seq: u64) -> String {
    record_event(EventId::from_sequence(seq), &note("a"))
}

/// The chunk the stream sends at `now`; fails on anything else.
fn sent(stream: &mut EventStream, now: RecordDate) -> Chunk {
    match stream.poll_output(now) {
        Output::Send(chunk) => chunk,
        other => panic!("a chunk to send, got {other:?}"),
    }
}

/// The event ids in a chunk, in order.
fn ids(chunk: &Chunk) -> Vec<u64> {
    chunk
        .frames()
        .iter()
        .filter_map(|frame| frame.strip_prefix("id: "))
        .map(|rest| rest.split('\n').next().expect("a line"))
        .map(|id| id.parse().expect("a sequence"))
        .collect()
}

#[test]
fn the_catch_up_goes_first_then_the_live_versions_it_did_not_cover() {
    let mut stream = EventStream::new(owner(), at(0), HEARTBEAT_MS);
    // Committed while the catch-up was read: 5 was read, 6 was not.
    stream.handle_commit(commit([5, 6]));
    assert_eq!(
        stream.poll_output(at(1)),
        Output::Wait(at(HEARTBEAT_MS as i64)),
        "nothing leaves before the start"
    );
    stream.start(CatchUp {
        frames: vec![frame(4), frame(5)],
        last_seq: 5,
    });
    let catch_up = sent(&mut stream, at(2));
    assert_eq!(ids(&catch_up), [4, 5]);
    assert_eq!(catch_up.record_events(), 2);
    assert_eq!(
        catch_up.to_bytes(),
        [frame(4), frame(5)].concat().as_bytes()
    );
    let live = sent(&mut stream, at(2));
    assert_eq!(ids(&live), [6], "5 is not sent twice");
    assert_eq!(
        stream.poll_output(at(2)),
        Output::Wait(at(2 + HEARTBEAT_MS as i64))
    );
}

#[test]
fn a_version_after_a_quiet_spell_leaves_at_once_and_those_within_the_interval_together() {
    let mut stream = started();
    stream.handle_commit(commit([1]));
    assert_eq!(ids(&sent(&mut stream, at(10))), [1]);
    stream.handle_commit(commit([2]));
    assert_eq!(stream.poll_output(at(20)), Output::Wait(at(10 + FLUSH_MS)));
    stream.handle_commit(commit([3]));
    assert_eq!(stream.poll_output(at(30)), Output::Wait(at(10 + FLUSH_MS)));
    let together = sent(&mut stream, at(10 + FLUSH_MS));
    assert_eq!(ids(&together), [2, 3], "one chunk");
    // The next waits out the interval from this write.
    stream.handle_commit(commit([4]));
    assert_eq!(
        stream.poll_output(at(10 + FLUSH_MS + 1)),
        Output::Wait(at(10 + 2 * FLUSH_MS))
    );
}

#[test]
fn a_full_chunk_leaves_without_waiting_out_the_interval() {
    let big = note(&"x".repeat(20 * 1024));
    let mut stream = started();
    stream.handle_commit(commit([1]));
    sent(&mut stream, at(0));
    // Within the interval: nine versions of about 20 KiB in one commit.
    let nine: LiveCommit = (2..=10).map(|seq| version(seq, &big)).collect();
    stream.handle_commit(nine);
    let first = sent(&mut stream, at(1));
    let second = sent(&mut stream, at(1));
    for chunk in [&first, &second] {
        assert!(chunk.byte_len() >= MAX_CHUNK_BYTES, "{}", chunk.byte_len());
        assert!(chunk.byte_len() - chunk.frames().last().expect("a frame").len() < MAX_CHUNK_BYTES);
    }
    let rest = match stream.poll_output(at(1)) {
        Output::Wait(until) => {
            assert_eq!(until, at(1 + FLUSH_MS), "the rest waits out the interval");
            sent(&mut stream, until)
        }
        other => panic!("a wait, got {other:?}"),
    };
    let all: Vec<u64> = [first, second, rest].iter().flat_map(ids).collect();
    assert_eq!(all, (2..=10).collect::<Vec<_>>());
}

#[test]
fn a_long_catch_up_is_sent_in_full_chunks() {
    let big = record_event(EventId::from_sequence(1), &note(&"x".repeat(30 * 1024)));
    let mut stream = EventStream::new(owner(), at(0), HEARTBEAT_MS);
    stream.start(CatchUp {
        frames: vec![big.clone(); 5],
        last_seq: 5,
    });
    let first = sent(&mut stream, at(0));
    let second = sent(&mut stream, at(0));
    assert_eq!((first.record_events(), second.record_events()), (3, 2));
    assert!(matches!(stream.poll_output(at(0)), Output::Wait(_)));
}

#[test]
fn a_silent_stream_hears_a_heartbeat_after_each_interval_of_silence() {
    let mut stream = started();
    let hb = HEARTBEAT_MS as i64;
    assert_eq!(stream.poll_output(at(0)), Output::Wait(at(hb)));
    assert_eq!(stream.poll_output(at(hb - 1)), Output::Wait(at(hb)));
    let heartbeat = sent(&mut stream, at(hb));
    assert_eq!(heartbeat.to_bytes(), HEARTBEAT_EVENT.as_bytes());
    assert_eq!(heartbeat.record_events(), 0);
    assert_eq!(stream.poll_output(at(hb)), Output::Wait(at(2 * hb)));
    // A version sent restarts the silence.
    stream.handle_commit(commit([1]));
    sent(&mut stream, at(hb + 500));
    assert_eq!(
        stream.poll_output(at(hb + 500)),
        Output::Wait(at(2 * hb + 500))
    );
    // A version the subscriber does not receive (a tombstone) is still silence.
    let mut tombstone = note("b");
    tombstone.body = RecordBody::Tombstone(NoContent {
        action: DeletionAction::Delete,
        links: Vec::new(),
    });
    stream.handle_commit(Arc::from([version(2, &tombstone)]));
    assert_eq!(
        stream.poll_output(at(hb + 600)),
        Output::Wait(at(2 * hb + 500))
    );
    assert_eq!(
        sent(&mut stream, at(2 * hb + 500)).to_bytes(),
        HEARTBEAT_EVENT.as_bytes()
    );
}

#[test]
fn the_heartbeat_interval_is_the_streams_own() {
    let mut stream = EventStream::new(owner(), at(0), 15_000);
    stream.start(CatchUp::default());
    assert_eq!(stream.poll_output(at(0)), Output::Wait(at(15_000)));
    let mut zero = EventStream::new(owner(), at(0), 0);
    zero.start(CatchUp::default());
    assert_eq!(
        zero.poll_output(at(0)),
        Output::Wait(at(1)),
        "at least 1 ms"
    );
}

#[test]
fn a_stream_opened_with_a_bearer_token_ends_at_its_expiry() {
    let subscriber = owner().with_standing(None, Some(at(3_000)));
    let mut stream = EventStream::new(subscriber, at(0), 15_000);
    stream.start(CatchUp::default());
    assert_eq!(stream.poll_output(at(0)), Output::Wait(at(3_000)));
    stream.handle_commit(commit([1]));
    assert_eq!(ids(&sent(&mut stream, at(2_990))), [1]);
    // Gathered within the interval, which the expiry cuts short.
    stream.handle_commit(commit([2]));
    assert_eq!(stream.poll_output(at(2_995)), Output::Wait(at(3_000)));
    assert_eq!(
        stream.poll_output(at(3_000)),
        Output::End(EndReason::BearerExpired),
        "nothing is sent at the expiry"
    );
    stream.handle_commit(commit([3]));
    assert_eq!(
        stream.poll_output(at(4_000)),
        Output::End(EndReason::BearerExpired)
    );
    assert_eq!(stream.ended(), Some(EndReason::BearerExpired));
}

#[test]
fn a_token_that_expires_during_the_catch_up_ends_the_stream_before_it_sends() {
    let subscriber = owner().with_standing(None, Some(at(100)));
    let mut stream = EventStream::new(subscriber, at(0), HEARTBEAT_MS);
    stream.start(CatchUp {
        frames: vec![frame(1)],
        last_seq: 1,
    });
    assert_eq!(
        stream.poll_output(at(100)),
        Output::End(EndReason::BearerExpired)
    );
}

#[test]
fn a_stream_with_more_commits_waiting_than_its_queue_holds_ends() {
    let mut stream = started();
    let queue = SUBSCRIBER_QUEUE_LEN as u64;
    for seq in 1..=queue {
        stream.handle_commit(commit([seq]));
    }
    assert_eq!(stream.ended(), None, "a full queue is still read");
    assert_eq!(
        ids(&sent(&mut stream, at(0))),
        (1..=queue).collect::<Vec<_>>()
    );
    for seq in queue + 1..=2 * queue + 1 {
        stream.handle_commit(commit([seq]));
    }
    assert_eq!(stream.ended(), Some(EndReason::Lagged));
    assert_eq!(stream.poll_output(at(1)), Output::End(EndReason::Lagged));
}

#[test]
fn a_commit_of_more_versions_than_the_queue_holds_takes_one_place() {
    let mut stream = started();
    let many = 3 * SUBSCRIBER_QUEUE_LEN as u64;
    stream.handle_commit(commit(1..=many));
    stream.handle_commit(commit([many + 1]));
    let mut received = Vec::new();
    let mut now = at(0);
    while received.len() < many as usize + 1 {
        match stream.poll_output(now) {
            Output::Send(chunk) => received.extend(ids(&chunk)),
            Output::Wait(until) => now = until,
            Output::End(reason) => panic!("ended: {reason:?}"),
        }
    }
    assert_eq!(received, (1..=many + 1).collect::<Vec<_>>());
}

#[test]
fn commits_lost_on_the_way_to_a_stream_end_it_as_lagging() {
    let mut stream = started();
    stream.handle_commit(commit([1]));
    stream.handle_commits_lost();
    assert_eq!(stream.poll_output(at(0)), Output::End(EndReason::Lagged));
}

#[test]
fn commits_during_the_catch_up_count_against_the_queue() {
    let mut stream = EventStream::new(owner(), at(0), HEARTBEAT_MS);
    for seq in 1..=SUBSCRIBER_QUEUE_LEN as u64 + 1 {
        stream.handle_commit(commit([seq]));
    }
    stream.start(CatchUp::default());
    assert_eq!(stream.poll_output(at(0)), Output::End(EndReason::Lagged));
}

#[test]
fn a_new_version_of_the_streams_authorization_ends_it() {
    let mut authorization = note("grant");
    authorization.type_link = BuiltinType::AppAuthorization.link();
    let subscriber = owner().with_standing(Some(authorization.id), None);
    let mut stream = EventStream::new(subscriber, at(0), HEARTBEAT_MS);
    stream.start(CatchUp::default());
    stream.handle_commit(commit([1]));
    assert_eq!(ids(&sent(&mut stream, at(0))), [1]);
    stream.handle_commit(Arc::from([
        version(2, &note("b")),
        version(3, &authorization),
    ]));
    assert_eq!(
        stream.poll_output(at(100)),
        Output::End(EndReason::StandingChanged)
    );
}

#[test]
fn the_shutdown_ends_a_stream() {
    let mut stream = started();
    stream.handle_commit(commit([1]));
    stream.handle_shutdown();
    assert_eq!(stream.poll_output(at(0)), Output::End(EndReason::Shutdown));
    // The first end stays the reason.
    let mut lagged = started();
    for seq in 1..=SUBSCRIBER_QUEUE_LEN as u64 + 1 {
        lagged.handle_commit(commit([seq]));
    }
    lagged.handle_shutdown();
    assert_eq!(lagged.ended(), Some(EndReason::Lagged));
}

#[test]
fn a_wait_is_always_later_than_the_time_polled() {
    let subscriber = owner().with_standing(None, Some(at(10_000)));
    let mut stream = EventStream::new(subscriber, at(0), HEARTBEAT_MS);
    stream.start(CatchUp {
        frames: vec![frame(1)],
        last_seq: 1,
    });
    let mut now = at(0);
    let mut seq = 2;
    loop {
        if seq % 3 == 0 {
            stream.handle_commit(commit([seq]));
        }
        seq += 1;
        match stream.poll_output(now) {
            Output::Send(_) => {}
            Output::Wait(until) => {
                assert!(until > now, "{until} after {now}");
                now = until;
            }
            Output::End(reason) => {
                assert_eq!(reason, EndReason::BearerExpired);
                assert_eq!(now, at(10_000));
                break;
            }
        }
    }
}
