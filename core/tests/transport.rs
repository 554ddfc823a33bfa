//! The HTTP edge: a blob's upload answer, the link its download goes
//! through and the download's headers; entity discovery and the Entity
//! record's content, checked by the built-in Entity type's schema;
//! `server_info` and its limits; and the page of every error type.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/record.rs");

use folio_core::model::dialect::Dialect;
use folio_core::model::{BlobHash, BlobLink, Entity, Record, RecordDate, RecordId};
use folio_core::problem::ProblemType;
use folio_core::query::{IndexEntry, index_entries};
use folio_core::schema::Schema;
use folio_core::schema::builtin::{BuiltinType, builtin_record_type};
use folio_core::service::blob::{
    RangeAnswer, UploadResponse, blob_audience, content_disposition, content_range, find_blob_link,
    find_indexed_blob_link, parse_range, unsatisfied_content_range,
};
use folio_core::service::discovery::{
    discovery_link, entity_content, entity_record_body, entity_record_update, entity_record_url,
    server_info_json,
};
use folio_core::service::docs::{ERROR_TYPES_PATH, error_type_page};
use folio_core::service::http::blob_cache_control;
use folio_core::service::limits::Limits;
use serde_json::{Value, json};

const HASH_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const HASH_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn date(text: &str) -> RecordDate {
    text.parse().unwrap()
}

fn hash(text: &str) -> BlobHash {
    text.parse().unwrap()
}

fn blob(hash: &str, media_type: &str, name: &str) -> Value {
    json!({"hash": hash, "type": media_type, "name": name})
}

/// A type whose content holds an attachment list and a map of blobs, and a
/// `decoy` object that has the blob link shape without being one.
fn attachments_schema() -> Schema {
    let decoy = json!({"type": "object", "optional": true, "properties": {
        "hash": {"type": "string"}, "type": {"type": "string"}, "name": {"type": "string"}
    }});
    Schema::compile(&json!({"type": "object", "properties": {"content": {
        "type": "object",
        "properties": {
            "files": {"type": "array", "items": {"type": "blob_link"}},
            "by_role": {"type": "map", "values": {"type": "blob_link"}, "optional": true},
            "decoy": decoy
        }
    }}}))
    .expect("a valid schema")
}

/// The record and its link index entries, as a store would hold them.
fn stored(content: Value) -> (Record, Vec<IndexEntry>) {
    let record = record(content, json!({}));
    let validated = attachments_schema()
        .validate(&record)
        .unwrap_or_else(|v| panic!("{v}"));
    let entries = index_entries(&validated.links);
    (record, entries)
}

#[test]
fn an_upload_answers_its_hash_size_and_expiry() {
    let response = UploadResponse::new(hash(HASH_A), 42, date("2026-11-21T10:00:00.5Z"));
    assert_eq!(
        serde_json::from_str::<Value>(&response.to_json()).unwrap(),
        json!({"hash": HASH_A, "size": 42, "expires_at": "2026-11-21T11:00:00.5000000Z"})
    );
}

/// Either search, given the record and its index entries.
type FindBlobLink = fn(&Record, &[IndexEntry], &BlobHash, &str) -> Option<BlobLink>;

#[test]
fn downloads_go_through_the_link_with_that_hash_and_name() {
    let (record, entries) = stored(json!({
        "files": [blob(HASH_A, "text/plain", "a.txt"), blob(HASH_B, "image/png", "b.png")],
        "by_role": {"cover": blob(HASH_B, "image/png", "cover.png")}
    }));
    let finders: [FindBlobLink; 2] = [
        |r, e, h, n| find_indexed_blob_link(r, e, h, n),
        |r, _, h, n| find_blob_link(r, h, n),
    ];
    for find in finders {
        let link = find(&record, &entries, &hash(HASH_B), "b.png").expect("linked");
        assert_eq!(link.media_type.as_str(), "image/png");
        let cover = find(&record, &entries, &hash(HASH_B), "cover.png").expect("in the map");
        assert_eq!(cover.name.as_str(), "cover.png");
        // Each name belongs to its own hash: a and b do not mix.
        assert_eq!(find(&record, &entries, &hash(HASH_A), "b.png"), None);
        assert_eq!(find(&record, &entries, &hash(HASH_B), "a.txt"), None);
        assert_eq!(find(&record, &entries, &hash(HASH_A), "A.TXT"), None);
    }
}

#[test]
fn only_the_indexed_search_tells_a_blob_link_from_its_shape() {
    let (record, entries) = stored(json!({
        "files": [],
        "decoy": blob(HASH_A, "text/plain", "secret.txt")
    }));
    assert!(find_blob_link(&record, &hash(HASH_A), "secret.txt").is_some());
    assert_eq!(
        find_indexed_blob_link(&record, &entries, &hash(HASH_A), "secret.txt"),
        None
    );
}

#[test]
fn a_tombstone_serves_no_blob() {
    let (live, entries) = stored(json!({"files": [blob(HASH_A, "text/plain", "a.txt")]}));
    let mut tombstone = serde_json::to_value(&live).unwrap();
    let content = tombstone
        .as_object_mut()
        .unwrap()
        .remove("content")
        .unwrap();
    tombstone["no_content"] = json!({"action": "delete", "links": [{
        "path": "$['content']['files'][*]", "type": "blob", "link": content["files"][0]
    }]});
    let tombstone: Record = serde_json::from_value(tombstone).unwrap();
    assert_eq!(find_blob_link(&tombstone, &hash(HASH_A), "a.txt"), None);
    assert_eq!(
        find_indexed_blob_link(&tombstone, &entries, &hash(HASH_A), "a.txt"),
        None
    );
}

#[test]
fn a_ranged_download_serves_exactly_the_bytes_its_headers_name() {
    let bytes: Vec<u8> = (0..=99).collect();
    let size = bytes.len() as u64;
    let RangeAnswer::Partial {
        start,
        end_inclusive,
    } = parse_range(Some("bytes=-10"), size)
    else {
        panic!("a suffix range is partial");
    };
    let part = &bytes[start as usize..=end_inclusive as usize];
    assert_eq!(part, &bytes[90..]);
    assert_eq!(content_range(start, end_inclusive, size), "bytes 90-99/100");
    assert_eq!(parse_range(Some("bytes=100-"), size).status(), 416);
    assert_eq!(
        ProblemType::RangeNotSatisfiable.status(),
        parse_range(Some("bytes=100-"), size).status()
    );
    assert_eq!(unsatisfied_content_range(size), "bytes */100");
    assert_eq!(parse_range(Some("bytes=0-1,5-6"), size).status(), 200);
}

#[test]
fn downloads_are_attachments_under_their_link_name() {
    let (record, _) = stored(json!({"files": [blob(HASH_A, "text/plain", "Übersicht 2026.txt")]}));
    let link = find_blob_link(&record, &hash(HASH_A), "Übersicht 2026.txt").unwrap();
    assert_eq!(
        content_disposition(&link.name),
        "attachment; filename=\"_bersicht 2026.txt\"; filename*=UTF-8''%C3%9Cbersicht%202026.txt"
    );
}

#[test]
fn cache_control_follows_the_records_audience() {
    let now = date("2026-11-21T10:00:00Z");
    let public = record(json!({}), json!({"read": "public"}));
    let private = record(json!({}), json!({}));
    let cache = |record: &Record, bearer: Option<RecordDate>| {
        blob_cache_control(blob_audience(record, bearer, now))
    };
    let soon = Some(date("2026-11-21T10:10:00.9Z"));
    let later = Some(date("2026-11-22T10:00:00Z"));
    let past = Some(date("2026-11-21T09:00:00Z"));
    assert_eq!(
        cache(&public, soon),
        "max-age=31536000, s-maxage=7200, immutable"
    );
    assert_eq!(
        cache(&private, None),
        "private, max-age=31536000, immutable"
    );
    assert_eq!(cache(&private, soon), "max-age=600, s-maxage=600");
    assert_eq!(cache(&private, later), "max-age=7200, s-maxage=7200");
    assert_eq!(cache(&private, past), "max-age=0, s-maxage=0");
}

fn alice() -> Entity {
    "alice.example".parse().unwrap()
}

/// The Entity record a store would hold, with this content.
fn entity_record(content: Value) -> Record {
    serde_json::from_value(json!({
        "author": {"entity": "alice.example"},
        "id": "0123456789abcdef0123456789abcdef",
        "source": "self",
        "created_at": "2026-11-21T10:00:00.0000000Z",
        "version": {
            "author": {"entity": "alice.example"},
            "hash": "c".repeat(64),
            "created_at": "2026-11-21T10:00:00.0000000Z"
        },
        "permissions": {"read": "public"},
        "type": BuiltinType::Entity.link(),
        "content": content
    }))
    .expect("a well-formed record")
}

#[test]
fn entity_content_is_a_valid_entity_record_with_every_endpoint_template() {
    let entity_type = builtin_record_type(&BuiltinType::Entity.link()).unwrap();
    for name in [Some("Alice"), None] {
        let content = entity_content(&alice(), "alice", "https://h.example:8443/", name, None);
        entity_type
            .schema
            .validate(&entity_record(content.clone()))
            .unwrap_or_else(|v| panic!("{name:?}: {v}"));
        assert_eq!(
            content["profile"],
            name.map_or(json!({}), |n| json!({ "name": n }))
        );
    }

    let content = entity_content(
        &alice(),
        "alice",
        "https://h.example:8443",
        Some("Alice"),
        None,
    );
    let b = "https://h.example:8443";
    let record = format!("{b}/api/alice/records/{{entity}}/{{record_id}}");
    let version = format!("{record}/versions/{{version_hash}}");
    assert_eq!(
        content,
        json!({
            "entity": "alice.example",
            "previous_entities": [],
            "signing_keys": [],
            "profile": {"name": "Alice"},
            "servers": [{
                "version": "1.0.0",
                "preference": 0,
                "endpoints": {
                    "auth": format!("{b}/alice/auth/{{record_id}}"),
                    "records": format!("{b}/api/alice/records"),
                    "record": record,
                    "record_versions": format!("{record}/versions"),
                    "record_version": version,
                    "new_record": format!("{b}/api/alice/records"),
                    "record_blob": format!("{record}/blobs/{{blob_hash}}/{{file_name}}"),
                    "record_version_blob": format!("{version}/blobs/{{blob_hash}}/{{file_name}}"),
                    "new_blob": format!("{b}/api/alice/blobs"),
                    "events": format!("{b}/api/alice/events"),
                    "new_notification": format!("{b}/api/alice/notifications"),
                    "server_info": format!("{b}/api/alice/server"),
                }
            }]
        })
    );
}

#[test]
fn a_new_entity_record_is_public_and_names_the_user() {
    let body = entity_record_body(&alice(), "alice", "https://h.example:8443", None);
    assert_eq!(body["permissions"], json!({"read": "public"}));
    assert_eq!(body["type"], json!(BuiltinType::Entity.link()));
    assert_eq!(
        body["content"],
        entity_content(
            &alice(),
            "alice",
            "https://h.example:8443",
            Some("alice"),
            None
        )
    );
}

#[test]
fn an_entity_record_is_updated_only_when_its_endpoints_move() {
    let stored = entity_record(entity_content(
        &alice(),
        "alice",
        "https://old.example",
        Some("Al"),
        None,
    ));
    // A server key to publish is a change too.
    assert_eq!(
        entity_record_update(
            &stored,
            &alice(),
            "alice",
            "https://old.example",
            Some("a2V5")
        )
        .map(|update| update.changed),
        Some(vec!["signing_keys".to_owned()])
    );
    assert_eq!(
        entity_record_update(&stored, &alice(), "alice", "https://old.example", None),
        None
    );
    let update = entity_record_update(&stored, &alice(), "alice", "https://new.example", None)
        .expect("a new version");
    assert_eq!(update.changed, ["servers"]);
    let update = update.body;
    // The profile name the owner gave is kept; the parent is the stored version.
    assert_eq!(
        update["content"],
        entity_content(&alice(), "alice", "https://new.example", Some("Al"), None)
    );
    assert_eq!(update["version"]["parent_hash"], json!(stored.version.hash));
}

#[test]
fn discovery_leads_to_the_entity_records_url() {
    let id: RecordId = "0123456789abcdef0123456789abcdef".parse().unwrap();
    let url = entity_record_url("https://h.example:8443", "alice", &alice(), &id);
    let content = entity_content(&alice(), "alice", "https://h.example:8443", None, None);
    let template = content["servers"][0]["endpoints"]["record"]
        .as_str()
        .unwrap();
    assert_eq!(
        url,
        template
            .replace("{entity}", "alice.example")
            .replace("{record_id}", &id.to_string())
    );
    assert_eq!(
        discovery_link(Dialect::Svc, &url),
        format!("<{url}>; rel=\"https://folio.dev/rels/entity-record\"")
    );
}

#[test]
fn server_info_lists_every_limit_in_force() {
    let info: Value = serde_json::from_str(&server_info_json("0.1.0", &Limits::default())).unwrap();
    assert_eq!(
        info,
        json!({
            "software": "folio",
            "version": "0.1.0",
            "protocol": "1.0",
            "limits": {
                "json_body_bytes": 1_048_576,
                "json_depth": 64,
                "blob_bytes": 67_108_864,
                "page_size_max": 200,
                "filter_bytes": 4_096,
                "filters": 16,
                "registration_body_bytes": 32_768,
                "sse_connections_per_server": 1_024,
                "sse_connections_per_user": 64,
                "heartbeat_ms": 15_000,
                "request_target_bytes": 16_384,
                "request_header_bytes": 16_384,
                "writes_per_app": {"per_second": 100, "burst": 200},
                "unauthenticated_reads_per_address": {"per_second": 300, "burst": 300},
                "notifications_per_entity": {"per_second": 100, "burst": 200},
                "notifications_per_domain": {"per_second": 100, "burst": 200},
                "notifications_per_user": {"per_second": 200, "burst": 400},
                "received_from_known": {"versions": 1_000_000, "bytes": 4_294_967_296_u64},
                "received_from_strangers": {"versions": 10_000, "bytes": 67_108_864}
            }
        })
    );

    let load_test = Limits {
        writes_per_app: None,
        unauthenticated_reads_per_address: None,
        blob_bytes: None,
        ..Limits::default()
    };
    let info: Value = serde_json::from_str(&server_info_json("0.1.0", &load_test)).unwrap();
    assert_eq!(info["limits"]["writes_per_app"], Value::Null);
    assert_eq!(
        info["limits"]["unauthenticated_reads_per_address"],
        Value::Null
    );
    assert_eq!(info["limits"]["blob_bytes"], Value::Null);
    assert_eq!(info["limits"]["page_size_max"], 200);
}

#[test]
fn every_error_type_has_a_page_at_its_type_url() {
    for &kind in ProblemType::ALL {
        assert_eq!(
            kind.type_url("https://h.example/docs"),
            format!(
                "https://h.example/docs/{ERROR_TYPES_PATH}/{}",
                kind.type_path()
            )
        );
        let page =
            error_type_page(kind.type_path()).unwrap_or_else(|| panic!("{kind:?} has no page"));
        assert!(
            page.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"),
            "{kind:?}"
        );
        assert!(page.contains("<meta charset=\"utf-8\">"));
        let title = kind.title().replace('\'', "&#39;");
        assert!(page.contains(&format!("<h1>{title}</h1>")), "{kind:?}");
        assert!(
            page.contains(&format!("<dd>{} ", kind.status())),
            "{kind:?}"
        );
        assert!(
            page.contains(&format!("<code>{}</code>", kind.code())),
            "{kind:?}"
        );
        assert!(page.trim_end().ends_with("</html>"));

        let explanation = kind.explanation();
        assert!(
            explanation.ends_with('.') && explanation.len() > 40,
            "{kind:?}: {explanation}"
        );
        assert_eq!(explanation.matches('`').count() % 2, 0, "{kind:?}");
        assert!(
            !explanation.contains(['<', '>', '&']),
            "{kind:?}: explanations are plain text"
        );
    }
    assert_eq!(error_type_page("request/404-nothing"), None);
}

#[test]
fn error_type_pages_escape_their_text() {
    let page = error_type_page(ProblemType::RecordDeleted.type_path()).unwrap();
    assert!(page.contains("<title>The record is deleted (410) · Folio error</title>"));
    assert!(page.contains("<dd>410 Gone</dd>"));
    let conflict = error_type_page(ProblemType::VersionConflict.type_path()).unwrap();
    assert!(conflict.contains("<code>parent_hash</code>"));
    let schema = error_type_page(ProblemType::SchemaViolation.type_path()).unwrap();
    assert!(schema.contains("its type&#39;s schema"));
}
