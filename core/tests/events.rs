//! The events stream: exact event bytes, event and client ids, who may open
//! a stream, where catch-up starts and when it is too long, and which
//! versions each subscriber receives.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/record.rs");

use folio_core::auth::access::{Access, AppGrant};
use folio_core::model::{
    ClientId, DeletionAction, HexIdError, Link, NoContent, Record, RecordBody, RecordDate,
    RecordLink,
};
use folio_core::problem::Problem;
use folio_core::query::{EventsQuery, index_entries, parse_filter};
use folio_core::schema::FoundLink;
use folio_core::service::events::{
    CatchUpStart, EVENT_RETENTION_MS, EVENT_STREAM_HEADERS, EventId, EventLogBounds, EventsError,
    HEARTBEAT_EVENT, LiveSubscriber, LiveVersion, MAX_CATCH_UP_EVENTS, OpenStreams, Opened,
    StandingChanged, StreamCaps, StreamsFull, Subscriber, authorize_events, catch_up_batch,
    catch_up_start, record_event, retention_cutoff,
};
use serde_json::json;

const CLIENT_ID: &str = "8fbf7696f25b4628bde73f46f4631d3f";
const OTHER_CLIENT_ID: &str = "00112233445566778899aabbccddeeff";
const RECORD_ID: &str = "0123456789abcdef0123456789abcdef";

fn date(text: &str) -> RecordDate {
    text.parse().unwrap()
}

fn client_id(text: &str) -> ClientId {
    text.parse().unwrap()
}

/// A live record by alice, private to her, of the type `types.example/fff…`.
fn private_record() -> Record {
    record(json!({"title": "a"}), json!({}))
}

fn tombstone() -> Record {
    let mut tombstone = private_record();
    tombstone.body = RecordBody::Tombstone(NoContent {
        action: DeletionAction::Delete,
        links: Vec::new(),
    });
    tombstone
}

/// A link to the Type record the test records use, or to another one.
fn type_link(record_id_digit: &str) -> RecordLink {
    RecordLink {
        entity: "types.example".parse().unwrap(),
        original_entity: None,
        record_id: record_id_digit.repeat(32).parse().unwrap(),
    }
}

fn owner(entity: &str) -> Access {
    Access::Owner {
        entity: entity.parse().unwrap(),
    }
}

fn app(grant: AppGrant) -> Access {
    Access::App {
        entity: "alice.example".parse().unwrap(),
        grant,
    }
}

fn subscriber(access: Access) -> Subscriber {
    Subscriber {
        access,
        client_id: None,
        include_deleted: false,
        filters: Vec::new(),
        authorization: None,
        expires_at: None,
    }
}

fn query(min: &str) -> EventsQuery {
    EventsQuery {
        min: date(min),
        filters: Vec::new(),
        include_deleted: false,
    }
}

fn log(oldest_retained: Option<u64>, latest: Option<u64>) -> EventLogBounds {
    EventLogBounds {
        oldest_retained: oldest_retained.map(EventId::from_sequence),
        latest: latest.map(EventId::from_sequence),
    }
}

const MIN: &str = "2026-11-21T10:00:00.0000000Z";

// Framing.

#[test]
fn record_event_is_framed_exactly() {
    let frame = record_event(EventId::from_sequence(42), &private_record());
    let expected = format!(
        concat!(
            "id: 42\nevent: record\ndata: ",
            r#"{{"author":{{"entity":"alice.example"}},"id":"{id}","source":"self","#,
            r#""created_at":"2026-11-21T10:00:00.0000000Z","received_at":"2026-11-21T10:00:00.0000000Z","#,
            r#""version":{{"author":{{"entity":"alice.example"}},"hash":"{hash}","#,
            r#""created_at":"2026-11-21T10:00:00.0000000Z","received_at":"2026-11-21T10:00:00.0000000Z"}},"#,
            r#""permissions":{{}},"type":{{"entity":"types.example","record_id":"{type_id}","version_hash":"{type_hash}"}},"#,
            r#""content":{{"title":"a"}}}}"#,
            "\n\n"
        ),
        id = RECORD_ID,
        hash = "a".repeat(64),
        type_id = "f".repeat(32),
        type_hash = "b".repeat(64),
    );
    assert_eq!(frame, expected);
}

#[test]
fn record_event_data_stays_on_one_line() {
    let record = record(
        json!({"title": "one\r\ntwo\rthree\nfour\u{2028}five\u{0}six"}),
        json!({}),
    );
    let frame = record_event(EventId::from_sequence(7), &record);
    assert!(!frame.contains('\r'));
    let lines: Vec<&str> = frame.split('\n').collect();
    assert_eq!(
        lines.len(),
        5,
        "id, event, data, then the blank line: {frame:?}"
    );
    assert_eq!(&lines[..2], ["id: 7", "event: record"]);
    assert_eq!(&lines[3..], ["", ""]);
    let data = lines[2].strip_prefix("data: ").unwrap();
    assert_eq!(serde_json::from_str::<Record>(data).unwrap(), record);
}

#[test]
fn heartbeat_event_is_framed_exactly() {
    assert_eq!(HEARTBEAT_EVENT, "event: heartbeat\ndata:\n\n");
}

#[test]
fn streams_are_event_streams_without_caching() {
    assert_eq!(
        EVENT_STREAM_HEADERS,
        [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache")
        ]
    );
}

// Event ids.

#[test]
fn event_ids_are_decimal_sequences() {
    assert_eq!(EventId::from_sequence(1234).to_string(), "1234");
    assert_eq!(EventId::from_sequence(0).to_string(), "0");
}

#[test]
fn event_ids_round_trip_through_last_event_id() {
    for sequence in [0, 1, 42, 1_000_000, u64::MAX] {
        let id = EventId::from_sequence(sequence);
        assert_eq!(EventId::from_header(&id.to_string()), Some(id));
        assert_eq!(id.sequence(), sequence);
    }
}

#[test]
fn malformed_last_event_ids_are_none() {
    for text in [
        "",
        " 1",
        "1 ",
        "+1",
        "-1",
        "01",
        "00",
        "1.0",
        "abc",
        "0x10",
        "18446744073709551616",
    ] {
        assert_eq!(EventId::from_header(text), None, "{text:?}");
    }
}

// Client ids.

#[test]
fn client_ids_are_32_lowercase_hex_characters() {
    let id = client_id(CLIENT_ID);
    assert_eq!(id.to_string(), CLIENT_ID);
    assert_eq!(ClientId::HEX_LEN, 32);
}

#[test]
fn client_ids_reject_any_other_text() {
    for text in [
        "",
        "8FBF7696F25B4628BDE73F46F4631D3F",
        "8fbf7696f25b4628bde73f46f4631d3",
        "8fbf7696f25b4628bde73f46f4631d3f0",
        "8fbf7696-f25b-4628-bde7-3f46f4631d3f",
        "gfbf7696f25b4628bde73f46f4631d3f",
    ] {
        assert_eq!(
            text.parse::<ClientId>(),
            Err(HexIdError { expected_len: 32 }),
            "{text:?}"
        );
    }
}

// Who may open a stream.

#[test]
fn apps_without_a_subscribe_grant_are_forbidden() {
    let reader = app(AppGrant {
        read: vec![type_link("f")],
        write: vec![type_link("f")],
        ..AppGrant::default()
    });
    let error = authorize_events(&reader).unwrap_err();
    assert_eq!(error, EventsError::Forbidden);
    let problem = Problem::from(&error);
    assert_eq!(problem.status(), 403);
    assert_eq!(problem.kind.code(), "forbidden");
}

#[test]
fn subscribing_apps_owners_and_anonymous_callers_may_open_streams() {
    let subscriber = app(AppGrant {
        subscribe: vec![type_link("f")],
        ..AppGrant::default()
    });
    assert_eq!(authorize_events(&subscriber), Ok(()));
    assert_eq!(authorize_events(&owner("alice.example")), Ok(()));
    assert_eq!(authorize_events(&Access::Anonymous), Ok(()));
}

// Where catch-up starts.

#[test]
fn without_last_event_id_catch_up_starts_after_min() {
    assert_eq!(
        catch_up_start(&query(MIN), None, log(Some(1), Some(10))),
        CatchUpStart::AfterReceivedAt(date(MIN))
    );
}

#[test]
fn known_last_event_id_replaces_min() {
    for known in [1, 5, 10] {
        let id = EventId::from_sequence(known);
        assert_eq!(
            catch_up_start(&query(MIN), Some(id), log(Some(1), Some(10))),
            CatchUpStart::AfterEvent(id)
        );
    }
}

#[test]
fn last_event_id_just_before_the_oldest_retained_is_known() {
    let id = EventId::from_sequence(4);
    assert_eq!(
        catch_up_start(&query(MIN), Some(id), log(Some(5), Some(10))),
        CatchUpStart::AfterEvent(id)
    );
}

#[test]
fn expired_last_event_id_falls_back_to_min() {
    let id = EventId::from_sequence(3);
    assert_eq!(
        catch_up_start(&query(MIN), Some(id), log(Some(5), Some(10))),
        CatchUpStart::AfterReceivedAt(date(MIN))
    );
}

#[test]
fn unknown_last_event_id_falls_back_to_min() {
    let id = EventId::from_sequence(11);
    assert_eq!(
        catch_up_start(&query(MIN), Some(id), log(Some(1), Some(10))),
        CatchUpStart::AfterReceivedAt(date(MIN))
    );
    assert_eq!(
        catch_up_start(
            &query(MIN),
            Some(EventId::from_sequence(0)),
            log(None, None)
        ),
        CatchUpStart::AfterReceivedAt(date(MIN))
    );
}

#[test]
fn in_an_emptied_log_only_the_latest_id_is_known() {
    let latest = EventId::from_sequence(10);
    assert_eq!(
        catch_up_start(&query(MIN), Some(latest), log(None, Some(10))),
        CatchUpStart::AfterEvent(latest)
    );
    assert_eq!(
        catch_up_start(
            &query(MIN),
            Some(EventId::from_sequence(9)),
            log(None, Some(10))
        ),
        CatchUpStart::AfterReceivedAt(date(MIN))
    );
}

// How much catch-up is sent.

#[test]
fn no_pending_events_is_an_empty_catch_up() {
    assert_eq!(catch_up_batch(Vec::<u64>::new()), Ok(Vec::new()));
}

#[test]
fn exactly_100_pending_events_are_sent_oldest_first() {
    let pending: Vec<u64> = (1..=100).collect();
    assert_eq!(MAX_CATCH_UP_EVENTS, 100);
    assert_eq!(catch_up_batch(pending.clone()), Ok(pending));
}

#[test]
fn pending_101_events_are_too_many_events() {
    let error = catch_up_batch(1..=101_u64).unwrap_err();
    assert_eq!(error, EventsError::TooManyEvents);
    let problem = Problem::from(&error);
    assert_eq!(problem.status(), 400);
    assert_eq!(problem.kind.code(), "too_many_events");
    assert_eq!(problem.kind.type_path(), "events/400-too-many-events");
}

#[test]
fn catch_up_reads_no_further_than_one_event_past_the_limit() {
    let mut read = 0;
    let endless = std::iter::repeat_with(|| read += 1);
    assert_eq!(catch_up_batch(endless), Err(EventsError::TooManyEvents));
    assert_eq!(read, MAX_CATCH_UP_EVENTS + 1);
}

// Retention.

#[test]
fn events_older_than_24_hours_may_be_pruned() {
    assert_eq!(EVENT_RETENTION_MS, 86_400_000);
    assert_eq!(
        retention_cutoff(date("2026-11-22T10:00:00.5000000Z")),
        date("2026-11-21T10:00:00.5000000Z")
    );
}

// Which versions a subscriber receives.

#[test]
fn subscriber_takes_filters_and_include_deleted_from_the_query() {
    let filter = parse_filter(r#"$['source']="self""#).unwrap();
    let query = EventsQuery {
        min: date(MIN),
        filters: vec![filter.clone()],
        include_deleted: true,
    };
    let id = client_id(CLIENT_ID);
    let subscriber = Subscriber::new(owner("alice.example"), Some(id), query);
    assert_eq!(
        subscriber,
        Subscriber {
            access: owner("alice.example"),
            client_id: Some(id),
            include_deleted: true,
            filters: vec![filter],
            authorization: None,
            expires_at: None,
        }
    );
}

#[test]
fn a_readable_live_version_is_sent() {
    assert!(subscriber(owner("alice.example")).should_send(&private_record(), &[], None));
}

#[test]
fn versions_the_requester_cannot_read_are_not_sent() {
    assert!(!subscriber(owner("bob.example")).should_send(&private_record(), &[], None));
    assert!(!subscriber(Access::Anonymous).should_send(&private_record(), &[], None));
    let public = record(json!({"title": "a"}), json!({"read": "public"}));
    assert!(subscriber(Access::Anonymous).should_send(&public, &[], None));
}

#[test]
fn apps_receive_only_types_in_their_subscribe_grant() {
    let subscribed = app(AppGrant {
        read: vec![type_link("f")],
        subscribe: vec![type_link("f")],
        ..AppGrant::default()
    });
    assert!(subscriber(subscribed).should_send(&private_record(), &[], None));

    let readable_not_subscribed = app(AppGrant {
        read: vec![type_link("f")],
        subscribe: vec![type_link("e")],
        ..AppGrant::default()
    });
    let public = record(json!({"title": "a"}), json!({"read": "public"}));
    let not_subscribed = subscriber(readable_not_subscribed);
    assert!(!not_subscribed.should_send(&private_record(), &[], None));
    assert!(!not_subscribed.should_send(&public, &[], None));
}

#[test]
fn subscribed_types_are_still_subject_to_the_read_grant() {
    let subscribe_only = app(AppGrant {
        subscribe: vec![type_link("f")],
        ..AppGrant::default()
    });
    assert!(!subscriber(subscribe_only).should_send(&private_record(), &[], None));
}

#[test]
fn tombstones_are_sent_only_with_include_deleted() {
    let mut subscriber = subscriber(owner("alice.example"));
    assert!(!subscriber.should_send(&tombstone(), &[], None));
    subscriber.include_deleted = true;
    assert!(subscriber.should_send(&tombstone(), &[], None));
    assert!(subscriber.should_send(&private_record(), &[], None));
}

#[test]
fn versions_written_with_the_same_client_id_are_not_sent() {
    let mut subscriber = subscriber(owner("alice.example"));
    subscriber.client_id = Some(client_id(CLIENT_ID));
    assert!(!subscriber.should_send(&private_record(), &[], Some(client_id(CLIENT_ID))));
}

#[test]
fn versions_written_by_other_clients_are_sent() {
    let mut subscriber = subscriber(owner("alice.example"));
    assert!(subscriber.should_send(&private_record(), &[], Some(client_id(CLIENT_ID))));
    subscriber.client_id = Some(client_id(CLIENT_ID));
    assert!(subscriber.should_send(&private_record(), &[], Some(client_id(OTHER_CLIENT_ID))));
    assert!(subscriber.should_send(&private_record(), &[], None));
}

#[test]
fn versions_must_match_the_filter() {
    let mut subscriber = subscriber(owner("alice.example"));
    subscriber.filters = vec![parse_filter(&format!(r#"$['id']="{RECORD_ID}""#)).unwrap()];
    assert!(subscriber.should_send(&private_record(), &[], None));
    subscriber.filters = vec![parse_filter(r#"$['source']="proxy""#).unwrap()];
    assert!(!subscriber.should_send(&private_record(), &[], None));
}

#[test]
fn repeated_filters_are_alternatives() {
    let mut subscriber = subscriber(owner("alice.example"));
    subscriber.filters = vec![
        parse_filter(r#"$['source']="proxy""#).unwrap(),
        parse_filter(r#"$['source']="self""#).unwrap(),
    ];
    assert!(subscriber.should_send(&private_record(), &[], None));
}

#[test]
fn filters_match_against_the_versions_links() {
    let mut subscriber = subscriber(owner("alice.example"));
    subscriber.filters = vec![parse_filter(r#"$['content']['label']="news""#).unwrap()];
    let label = FoundLink {
        path: "$['content']['label']".parse().unwrap(),
        link: Link::Tag("news".parse().unwrap()),
        in_content: true,
        existential: false,
    };
    let entries = index_entries(std::slice::from_ref(&label));
    assert!(subscriber.should_send(&private_record(), &entries, None));
    assert!(!subscriber.should_send(&private_record(), &[], None));
}

#[test]
fn a_live_subscriber_gets_each_newer_version_once_and_not_its_own_writes() {
    let record = private_record();
    let version = |seq, written_by| LiveVersion::new(seq, record.clone(), Vec::new(), written_by);
    let mut live = LiveSubscriber::new(
        Subscriber {
            client_id: Some(client_id("0123456789abcdef0123456789abcdef")),
            ..subscriber(owner("alice.example"))
        },
        7,
    );
    assert_eq!(
        live.frame(&version(7, None)),
        Ok(None),
        "the catch-up sent it"
    );
    assert_eq!(
        live.frame(&version(8, None)).unwrap().as_deref(),
        Some(record_event(EventId::from_sequence(8), &record).as_str())
    );
    assert_eq!(live.frame(&version(8, None)), Ok(None), "offered twice");
    let own = Some(client_id("0123456789abcdef0123456789abcdef"));
    assert_eq!(live.frame(&version(9, own)), Ok(None), "its own write");
    assert!(matches!(live.frame(&version(10, None)), Ok(Some(_))));
}

#[test]
fn a_new_version_of_the_authorization_a_stream_was_opened_under_ends_it() {
    let authorization = private_record();
    let mut revoked = authorization.clone();
    revoked.type_link = folio_core::schema::builtin::BuiltinType::AppAuthorization.link();
    let standing = || subscriber(owner("alice.example")).with_standing(Some(revoked.id), None);
    // A record of another type with the same id changes nothing.
    let mut live = LiveSubscriber::new(standing(), 0);
    let same_id = LiveVersion::new(1, authorization, Vec::new(), None);
    assert!(matches!(live.frame(&same_id), Ok(Some(_))));
    let revocation = LiveVersion::new(2, revoked.clone(), Vec::new(), None);
    assert_eq!(live.frame(&revocation), Err(StandingChanged));
    // A stream opened otherwise, or under another authorization, goes on.
    let mut other = LiveSubscriber::new(subscriber(owner("alice.example")), 0);
    assert!(other.frame(&revocation).is_ok());
    assert_eq!(other.ends_at(), None);
    let at = date("2026-01-01T00:00:00.000Z");
    let bearer = LiveSubscriber::new(standing().with_standing(None, Some(at)), 0);
    assert_eq!(bearer.ends_at(), Some(at));
}

#[test]
fn unauthenticated_streams_hold_at_most_half_of_each_cap() {
    let caps = StreamCaps {
        per_server: Some(10),
        per_user: Some(4),
    };
    let open = |server: (usize, usize), user: (usize, usize)| OpenStreams {
        on_server: Some(Opened {
            all: server.0,
            anonymous: server.1,
        }),
        for_user: Opened {
            all: user.0,
            anonymous: user.1,
        },
    };
    assert_eq!(caps.admit(open((1, 1), (1, 1)), true), Ok(()));
    assert_eq!(caps.admit(open((2, 2), (2, 2)), true), Err(StreamsFull));
    assert_eq!(caps.admit(open((2, 2), (2, 2)), false), Ok(()));
    assert_eq!(caps.admit(open((4, 2), (4, 2)), false), Err(StreamsFull));
    // The server's half, across users.
    assert_eq!(caps.admit(open((5, 5), (0, 0)), true), Err(StreamsFull));
    assert_eq!(caps.admit(open((9, 5), (0, 0)), false), Ok(()));
    assert_eq!(caps.admit(open((10, 5), (0, 0)), false), Err(StreamsFull));
    // The edge's object knows one user's streams only.
    let edge = OpenStreams {
        on_server: None,
        for_user: Opened {
            all: 1,
            anonymous: 1,
        },
    };
    assert_eq!(caps.admit(edge, true), Ok(()));
}

#[test]
fn a_live_version_is_framed_once_for_all_its_subscribers() {
    let version = LiveVersion::new(3, private_record(), Vec::new(), None);
    let mut first = LiveSubscriber::new(subscriber(owner("alice.example")), 0);
    let mut second = LiveSubscriber::new(subscriber(owner("alice.example")), 0);
    let (a, b) = (first.frame(&version), second.frame(&version));
    let (Ok(Some(a)), Ok(Some(b))) = (a, b) else {
        panic!("both subscribers receive the version");
    };
    assert!(std::sync::Arc::ptr_eq(&a, &b), "one frame, shared");
    assert_eq!(
        &*a,
        record_event(EventId::from_sequence(3), &private_record())
    );
}
