//! Blobs through the service (PROTOCOL.md §9): uploads held to their
//! declared length by core's meter, their signed digest, the one job that
//! stores their row; downloads through a record that links them, with
//! `Range`.

use folio_core::model::BlobHash;
use folio_core::service::blob::upload_expiry;
use folio_core::store::upload_blob_sql;
use serde_json::json;

use crate::fake_host::{FakeHost, JobEnd, JobKind};
use crate::kit::{Body, Call, Config, ENTITY, Signer, Stream, header, json, now, problem};
use crate::{host_with_app, link, note_type, record_path, send, sha256_hex, write};
use folio_core::service::{Reply, ReplyBody};

const BLOBS: &str = "/api/alice/blobs";
const PNG: &[u8] = b"\x89PNG fake image bytes";

/// An upload of `body` declaring `declared` bytes (none: no header), signed.
fn upload(app: &Signer, body: &[u8], declared: Option<usize>, nonce: &str) -> (Call, Body) {
    let mut call = Call::post(BLOBS).header("content-type", "image/png");
    if let Some(declared) = declared {
        call = call.header("content-length", declared.to_string());
    }
    (call.signed(app, nonce, &[]), Body::of(body))
}

/// Uploads the 5 bytes `12345` declaring `declared`, and checks that it is
/// 400 `invalid_body` for the mismatch and runs no job; answers the host.
#[track_caller]
fn upload_of_5_bytes_refused_as_declaring(declared: usize) -> FakeHost {
    let (host, app) = host_with_app(Config::default());
    let (call, body) = upload(&app, b"12345", Some(declared), "u1");
    let reply = send(&host, &call, body);
    let body = problem(&reply, "request/400-invalid-body", "invalid_body");
    assert_eq!(
        body["detail"],
        format!("the body is 5 bytes, not the {declared} its Content-Length declares")
    );
    assert!(host.jobs().is_empty());
    host
}

/// An upload of [`PNG`] whose signed `X-Svc-Content-SHA256` is the digest
/// of `digest_of`.
fn digest_signed_upload(app: &Signer, digest_of: &[u8], nonce: &str) -> Call {
    Call::post(BLOBS)
        .header("content-type", "image/png")
        .header("content-length", PNG.len().to_string())
        .header("x-svc-content-sha256", sha256_hex(digest_of))
        .signed(app, nonce, &["x-svc-content-sha256"])
}

#[test]
fn an_upload_shorter_than_its_content_length_is_400_invalid_body_and_not_kept() {
    let host = upload_of_5_bytes_refused_as_declaring(10);
    assert_eq!(host.count("SELECT COUNT(*) FROM blobs"), 0);
}

#[test]
fn an_upload_longer_than_its_content_length_is_400_invalid_body_and_not_kept() {
    let host = upload_of_5_bytes_refused_as_declaring(3);
    let hash = BlobHash::from_bytes(<sha2::Sha256 as sha2::Digest>::digest(b"12345").into());
    assert_eq!(host.kept_blob(&hash), None);
}

#[test]
fn an_upload_without_content_length_is_411_and_its_body_is_drained_unread() {
    let (host, app) = host_with_app(Config::default());
    let (call, body) = upload(&app, PNG, None, "u1");
    let reply = send(&host, &call, body);
    problem(&reply, "blob/411-length-required", "length_required");
    let bodies = host.bodies();
    assert_eq!((bodies.uploads_received, bodies.discarded), (0, 1));
    assert!(host.jobs().is_empty());
}

#[test]
fn an_upload_without_content_type_is_415() {
    let (host, app) = host_with_app(Config::default());
    let call = Call::post(BLOBS)
        .header("content-length", PNG.len().to_string())
        .signed(&app, "u1", &[]);
    let reply = send(&host, &call, Body::of(PNG));
    problem(
        &reply,
        "request/415-unsupported-media-type",
        "unsupported_media_type",
    );
    assert!(host.jobs().is_empty());
}

#[test]
fn an_upload_whose_signed_digest_is_not_its_bodys_is_401_and_dropped() {
    let (host, app) = host_with_app(Config::default());
    let call = digest_signed_upload(&app, b"other bytes", "u1");
    let reply = send(&host, &call, Body::of(PNG));
    problem(&reply, "auth/401-invalid-signature", "invalid_signature");
    let bodies = host.bodies();
    assert_eq!((bodies.uploads_received, bodies.uploads_discarded), (1, 1));
    assert!(host.jobs().is_empty());
    assert_eq!(host.count("SELECT COUNT(*) FROM blobs"), 0);
}

/// Uploads [`PNG`] with its digest signed; answers its hash.
fn upload_png(host: &FakeHost, app: &Signer) -> String {
    let call = digest_signed_upload(app, PNG, "up");
    let reply = send(host, &call, Body::of(PNG));
    assert_eq!(reply.status, 200, "{}", json(&reply));
    json(&reply)["hash"].as_str().expect("a hash").to_owned()
}

#[test]
fn an_upload_runs_one_statements_job_and_answers_hash_size_and_expiry() {
    let (host, app) = host_with_app(Config::default());
    let call = digest_signed_upload(&app, PNG, "u1");
    let reply = send(&host, &call, Body::of(PNG));
    assert_eq!(reply.status, 200, "{}", json(&reply));
    let hash = sha256_hex(PNG);
    assert_eq!(
        json(&reply),
        json!({
            "hash": hash,
            "size": PNG.len(),
            "expires_at": upload_expiry(now()).to_string(),
        })
    );
    assert_eq!(
        json(&reply)["expires_at"],
        "2026-11-21T11:00:00.0000000Z",
        "an hour after the request, not after the scheduler's time"
    );
    let row = upload_blob_sql(host.store.user.id, &hash, 0, now(), now());
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].kind, JobKind::Statements(vec![row.sql]));
    assert_eq!(jobs[0].end, JobEnd::Stored);
    assert_eq!(
        host.kept_blob(&hash.parse().expect("a hash")),
        Some(PNG.to_vec())
    );
    assert_eq!(host.count("SELECT COUNT(*) FROM blobs"), 1);
}

/// A host with an uploaded PNG linked by a note as `photo.png`; answers
/// the app, the note's download path, and the blob's hash.
fn linked_png() -> (FakeHost, Signer, String) {
    let (host, app) = host_with_app(Config::default());
    let note_type = note_type(&host);
    let hash = upload_png(&host, &app);
    let body = json!({
        "type": link(&note_type),
        "content": {"text": "a photo", "image": {"hash": hash, "type": "image/png", "name": "photo.png"}}
    });
    let reply = write(&host, "POST", crate::RECORDS, &body, &app, "w1");
    assert_eq!(reply.status, 200, "{}", json(&reply));
    let id = json(&reply)["record"]["id"]
        .as_str()
        .expect("an id")
        .parse()
        .expect("an id");
    let path = format!("{}/blobs/{hash}/photo.png", record_path(ENTITY, &id));
    (host, app, path)
}

fn streamed(body: &ReplyBody<Stream>) -> &[u8] {
    match body {
        ReplyBody::Stream(Stream::Blob(bytes)) => bytes,
        _ => panic!("a blob stream"),
    }
}

#[test]
fn a_download_through_a_linking_record_streams_the_blob_with_its_headers() {
    let (host, app, path) = linked_png();
    let call = Call::get(path.as_str()).signed(&app, "d1", &[]);
    let reply = send(&host, &call, Body::empty());
    assert_eq!(reply.status, 200);
    assert_eq!(streamed(&reply.body), PNG);
    assert_eq!(header(&reply, "content-type"), "image/png");
    assert_eq!(header(&reply, "content-length"), PNG.len().to_string());
    assert_eq!(
        header(&reply, "content-disposition"),
        "attachment; filename=photo.png"
    );
    assert_eq!(header(&reply, "accept-ranges"), "bytes");
    assert_eq!(
        header(&reply, "cache-control"),
        "private, max-age=31536000, immutable"
    );
}

/// A GET of the blob at `path` by `app`, of the byte range `range`.
fn download_range(host: &FakeHost, app: &Signer, path: &str, range: &str) -> Reply<Stream> {
    let call = Call::get(path)
        .header("range", range)
        .signed(app, "d1", &[]);
    send(host, &call, Body::empty())
}

#[test]
fn a_range_download_is_206_with_content_range() {
    let (host, app, path) = linked_png();
    let reply = download_range(&host, &app, &path, "bytes=2-5");
    assert_eq!(reply.status, 206);
    assert_eq!(streamed(&reply.body), &PNG[2..=5]);
    assert_eq!(header(&reply, "content-length"), "4");
    assert_eq!(
        header(&reply, "content-range"),
        format!("bytes 2-5/{}", PNG.len())
    );
}

#[test]
fn a_range_past_the_end_is_416_with_the_blobs_size() {
    let (host, app, path) = linked_png();
    let reply = download_range(&host, &app, &path, "bytes=100-");
    problem(
        &reply,
        "blob/416-range-not-satisfiable",
        "range_not_satisfiable",
    );
    assert_eq!(
        header(&reply, "content-range"),
        format!("bytes */{}", PNG.len())
    );
    assert_eq!(header(&reply, "cache-control"), "no-cache");
}

#[test]
fn a_name_the_record_does_not_link_is_404_blob_not_found() {
    let (host, app, path) = linked_png();
    let path = path.replace("photo.png", "other.png");
    let call = Call::get(path.as_str()).signed(&app, "d1", &[]);
    let reply = send(&host, &call, Body::empty());
    problem(&reply, "blob/404-not-found", "blob_not_found");
}
