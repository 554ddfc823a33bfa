//! The record model's edge cases: dates, ids, names, paths and record shapes.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use folio_core::model::{
    BlobHash, BlobLink, DateError, Entity, FileName, LinkPath, MediaType, Permissions,
    ReadPermission, Record, RecordDate, RecordId, Tag, TagError, VersionHash,
};
use serde_json::json;

fn date(text: &str) -> RecordDate {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn dates_are_written_with_seven_fractional_digits() {
    assert_eq!(
        date("2024-02-19T15:20:51.359Z").to_string(),
        "2024-02-19T15:20:51.3590000Z"
    );
    assert_eq!(
        date("2024-02-19T15:20:51Z").to_string(),
        "2024-02-19T15:20:51.0000000Z"
    );
    assert_eq!(
        date("2024-02-19T15:20:51.3590000Z").to_string(),
        "2024-02-19T15:20:51.3590000Z"
    );
}

#[test]
fn digits_past_the_seventh_are_dropped_not_rounded() {
    assert_eq!(
        date("2024-05-01T12:34:56.99999999Z").to_string(),
        "2024-05-01T12:34:56.9999999Z"
    );
    assert_eq!(
        date("2024-05-01T12:34:56.123456789012Z").to_string(),
        "2024-05-01T12:34:56.1234567Z"
    );
    // Before the epoch, dropping digits still moves towards the past.
    assert_eq!(
        date("1969-12-31T23:59:59.99999999Z").to_string(),
        "1969-12-31T23:59:59.9999999Z"
    );
}

#[test]
fn offsets_are_converted_to_utc() {
    assert_eq!(
        date("2024-03-01T01:30:00+02:00").to_string(),
        "2024-02-29T23:30:00.0000000Z"
    );
    assert_eq!(
        date("2024-12-31T20:00:00.5-05:30").to_string(),
        "2025-01-01T01:30:00.5000000Z"
    );
    assert_eq!(
        date("2024-02-19T15:20:51-00:00"),
        date("2024-02-19T15:20:51Z")
    );
}

#[test]
fn the_separators_rfc_3339_permits_are_accepted() {
    // RFC 3339 §5.6 allows lowercase `t` and `z`, and (in its note) a space
    // between date and time.
    for text in ["2024-02-19t15:20:51z", "2024-02-19 15:20:51Z"] {
        assert_eq!(date(text), date("2024-02-19T15:20:51Z"), "{text:?}");
    }
    assert_eq!(
        date("2016-12-31T23:59:60Z").to_string(),
        "2016-12-31T23:59:59.9999999Z",
        "a leap second"
    );
}

#[test]
fn malformed_dates_are_rejected() {
    for text in [
        "",
        "2024-02-19",
        "2024-02-19T15:20:51",
        "2024-02-30T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2024-13-01T00:00:00Z",
        "2024-02-19T24:00:00Z",
        "2024-02-19T15:20:51.Z",
        "2024-02-19T15:20:51+2:00",
        "24-02-19T15:20:51Z",
        " 2024-02-19T15:20:51Z",
    ] {
        assert_eq!(
            text.parse::<RecordDate>(),
            Err(DateError::Syntax),
            "{text:?}"
        );
    }
}

#[test]
fn dates_outside_four_digit_utc_years_are_rejected() {
    assert_eq!(
        date("0000-01-01T00:00:00Z").to_string(),
        "0000-01-01T00:00:00.0000000Z"
    );
    assert_eq!(
        "0000-01-01T00:00:00+00:01".parse::<RecordDate>(),
        Err(DateError::OutOfRange)
    );
    assert_eq!(
        "9999-12-31T23:59:59-00:01".parse::<RecordDate>(),
        Err(DateError::OutOfRange)
    );
    assert!(RecordDate::from_unix_millis(i64::MAX).is_err());
}

#[test]
fn millisecond_precision_truncates() {
    let d = date("2024-05-01T12:34:56.9999999Z");
    assert_eq!(d.millis_form().to_string(), "2024-05-01T12:34:56.999Z");
    assert_eq!(
        d.truncated_to_millis().to_string(),
        "2024-05-01T12:34:56.9990000Z"
    );
    let before_epoch = date("1969-12-31T23:59:59.9999Z");
    assert_eq!(before_epoch.unix_millis(), -1);
    assert_eq!(
        before_epoch.truncated_to_millis().to_string(),
        "1969-12-31T23:59:59.9990000Z"
    );
}

#[test]
fn subtracting_milliseconds_stops_at_the_earliest_date() {
    assert_eq!(
        date("2024-05-01T12:00:20Z").saturating_sub_millis(20_000),
        date("2024-05-01T12:00:00Z")
    );
    assert_eq!(
        date("0000-01-01T00:00:01Z").saturating_sub_millis(i64::MAX),
        date("0000-01-01T00:00:00Z")
    );
}

#[test]
fn received_at_increases_strictly() {
    let now = date("2024-05-01T12:00:00Z");
    assert_eq!(RecordDate::received_after(now, None), now);
    assert_eq!(
        RecordDate::received_after(now, Some(date("2024-05-01T11:00:00Z"))),
        now
    );
    assert_eq!(
        RecordDate::received_after(now, Some(now)).to_string(),
        "2024-05-01T12:00:00.0000001Z"
    );
    let later = date("2024-05-01T12:00:01Z");
    assert_eq!(
        RecordDate::received_after(now, Some(later)).to_string(),
        "2024-05-01T12:00:01.0000001Z"
    );
}

#[test]
fn dates_round_trip_through_serde() {
    let d = date("2024-02-19T15:20:51.1234567Z");
    let text = serde_json::to_string(&d).unwrap();
    assert_eq!(text, "\"2024-02-19T15:20:51.1234567Z\"");
    assert_eq!(serde_json::from_str::<RecordDate>(&text).unwrap(), d);
    assert!(serde_json::from_str::<RecordDate>("1708356051").is_err());
}

#[test]
fn ids_are_exactly_lowercase_hex_of_their_length() {
    let id: RecordId = "0123456789abcdef0123456789abcdef".parse().unwrap();
    assert_eq!(id.to_string(), "0123456789abcdef0123456789abcdef");
    for bad in [
        "0123456789ABCDEF0123456789abcdef",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "0123456789abcdef0123456789abcdeg",
        "éééééééééééééééé",
        "",
    ] {
        assert!(bad.parse::<RecordId>().is_err(), "{bad:?}");
    }
    let hash = "a".repeat(64);
    assert!(hash.parse::<VersionHash>().is_ok());
    assert!(hash.parse::<BlobHash>().is_ok());
    assert!(hash[..32].parse::<VersionHash>().is_err());
    assert!(hash.parse::<RecordId>().is_err());
}

#[test]
fn ids_order_as_their_hex_text() {
    let low: RecordId = "0f000000000000000000000000000000".parse().unwrap();
    let high: RecordId = "a0000000000000000000000000000000".parse().unwrap();
    assert!(low < high);
}

#[test]
fn entities_are_short_lowercase_names() {
    assert!("alice.example-1.org".parse::<Entity>().is_ok());
    assert!("a".repeat(252).parse::<Entity>().is_ok());
    for bad in [
        "",
        "Alice.org",
        "alice_org",
        "alice org",
        "alice.org/",
        "ålice.org",
    ] {
        assert!(bad.parse::<Entity>().is_err(), "{bad:?}");
    }
    assert!("a".repeat(253).parse::<Entity>().is_err());
}

#[test]
fn tags_count_code_points_and_must_be_nfc() {
    assert!("é".repeat(100).parse::<Tag>().is_ok());
    assert_eq!("é".repeat(101).parse::<Tag>(), Err(TagError::Length));
    assert_eq!("".parse::<Tag>(), Err(TagError::Length));
    assert_eq!("e\u{301}".parse::<Tag>(), Err(TagError::NotNfc));
}

#[test]
fn blob_links_carry_a_media_type_and_a_file_name() {
    let image: MediaType = "image/jpeg".parse().unwrap();
    assert_eq!(image.essence(), "image/jpeg");
    let text: MediaType = "text/plain; charset=utf-8".parse().unwrap();
    assert_eq!(text.essence(), "text/plain");
    for bad in ["", "jpeg", "image/", "/jpeg", "image/jpeg\r\nx-evil: 1"] {
        assert!(bad.parse::<MediaType>().is_err(), "{bad:?}");
    }

    assert!("Résumé 2024 (final).pdf".parse::<FileName>().is_ok());
    assert!("x".repeat(255).parse::<FileName>().is_ok());
    for bad in ["", "a/b.txt", "a\\b.txt", "a\nb.txt", "a\u{7f}"] {
        assert!(bad.parse::<FileName>().is_err(), "{bad:?}");
    }
    assert!("x".repeat(256).parse::<FileName>().is_err());

    let link: BlobLink = serde_json::from_value(json!({
        "hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99",
        "type": "image/jpeg", "name": "small.jpg", "size": 1200
    }))
    .unwrap();
    assert_eq!(link.name.as_str(), "small.jpg");
    assert_eq!(link.media_type.essence(), "image/jpeg");
    assert!(
        serde_json::from_value::<BlobLink>(json!({
            "hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99",
            "type": "image/jpeg", "name": "small.jpg", "size": -1
        }))
        .is_err()
    );
}

#[test]
fn link_paths_use_bracket_segments() {
    for good in [
        "$['author']",
        "$['content']['mentions'][*]['entity']",
        "$['a'][*][*]",
    ] {
        assert_eq!(good.parse::<LinkPath>().unwrap().as_str(), good);
    }
    for bad in [
        "",
        "$",
        "$.content",
        "$['']",
        "$['a'",
        "$[a]",
        "$['a']x",
        "$['it's']",
        "['a']",
    ] {
        assert!(bad.parse::<LinkPath>().is_err(), "{bad:?}");
    }
}

#[test]
fn read_permission_is_public_or_entity_links() {
    let public: Permissions = serde_json::from_value(json!({"read": "public"})).unwrap();
    assert_eq!(public, Permissions::public());
    let listed: Permissions =
        serde_json::from_value(json!({"read": [{"entity": "bob.example"}]})).unwrap();
    assert!(matches!(listed.read, Some(ReadPermission::Entities(ref links)) if links.len() == 1));
    assert!(serde_json::from_value::<Permissions>(json!({"read": "private"})).is_err());
    assert!(serde_json::from_value::<Permissions>(json!({"admin": []})).is_err());
    assert_eq!(
        serde_json::to_value(Permissions::default()).unwrap(),
        json!({})
    );
}

fn record_json() -> serde_json::Value {
    json!({
        "author": {"entity": "alice.example"},
        "id": "0123456789abcdef0123456789abcdef",
        "source": "self",
        "created_at": "2024-02-19T15:20:51.3590000Z",
        "received_at": "2024-02-19T15:20:51.3600000Z",
        "version": {
            "author": {"entity": "alice.example"},
            "hash": "a".repeat(64),
            "created_at": "2024-02-19T15:20:51.3590000Z",
            "received_at": "2024-02-19T15:20:51.3600000Z"
        },
        "permissions": {},
        "type": {"entity": "alice.example", "record_id": "f".repeat(32), "version_hash": "b".repeat(64)},
        "content": {"text": "hello"}
    })
}

#[test]
fn a_record_has_exactly_one_of_content_and_no_content() {
    let record: Record = serde_json::from_value(record_json()).unwrap();
    assert!(!record.is_tombstone());
    assert_eq!(serde_json::to_value(&record).unwrap(), record_json());

    let mut both = record_json();
    both["no_content"] = json!({"action": "delete", "links": []});
    assert!(serde_json::from_value::<Record>(both).is_err());

    let mut neither = record_json();
    neither.as_object_mut().unwrap().remove("content");
    assert!(serde_json::from_value::<Record>(neither).is_err());
}

#[test]
fn a_record_rejects_unknown_fields_and_bad_tombstones() {
    let mut extra = record_json();
    extra["surprise"] = json!(1);
    assert!(serde_json::from_value::<Record>(extra).is_err());

    let mut tombstone = record_json();
    tombstone.as_object_mut().unwrap().remove("content");
    tombstone["no_content"] = json!({"action": "vanish", "links": []});
    assert!(serde_json::from_value::<Record>(tombstone.clone()).is_err());

    tombstone["no_content"] = json!({"action": "leave", "links": [
        {"path": "$['content']['topic']", "type": "tag", "link": "rust"},
        {"path": "$['content']['parent']", "type": "record", "link": {"entity": "bob.example"}}
    ]});
    assert!(
        serde_json::from_value::<Record>(tombstone.clone()).is_err(),
        "a record link needs its record_id"
    );

    tombstone["no_content"]["links"]
        .as_array_mut()
        .unwrap()
        .pop();
    let record: Record = serde_json::from_value(tombstone.clone()).unwrap();
    assert!(record.is_tombstone());
    assert_eq!(serde_json::to_value(&record).unwrap(), tombstone);
}

#[test]
fn record_sources_have_one_wire_name_each() {
    use folio_core::model::RecordSource;
    let names: Vec<&str> = RecordSource::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "self",
            "notification",
            "notification_unknown",
            "subscription",
            "proxy",
            "resolution"
        ]
    );
    for source in RecordSource::ALL {
        let json = serde_json::to_string(&source).unwrap();
        assert_eq!(json, format!("\"{}\"", source.as_str()));
        assert_eq!(serde_json::from_str::<RecordSource>(&json).unwrap(), source);
        assert_eq!(source.as_str().parse::<RecordSource>(), Ok(source));
    }
    assert!("Self".parse::<RecordSource>().is_err());
    assert!(serde_json::from_str::<RecordSource>("\"elsewhere\"").is_err());
}
