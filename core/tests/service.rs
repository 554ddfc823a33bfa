//! Core's request layer end to end: `service::handle` driven through a fake
//! host that runs core's own SQL on an in-memory SQLite, with a fixed
//! request time, a fixed scheduler time for write jobs and fixed seeds.
//! The tests check routing with the store, the order of authentication
//! steps and which statements they run, rate and replay decisions, the jobs
//! a request submits and when they run, blob uploads and downloads, event
//! streams and their caps, and the consent page.
//!
//! Native only: it needs SQLite. The checks that need no store are in
//! `service_pure.rs`, which also runs in wasm32.

#![cfg(not(target_arch = "wasm32"))]

#[path = "service/kit.rs"]
mod kit;

#[path = "support/fake_host.rs"]
mod fake_host;

#[path = "support/sqlite.rs"]
mod sqlite;

#[path = "service/auth.rs"]
mod auth;
#[path = "service/blobs.rs"]
mod blobs;
#[path = "service/consent.rs"]
mod consent;
#[path = "service/convergence.rs"]
mod convergence;
#[path = "service/events.rs"]
mod events;
#[path = "service/federation.rs"]
mod federation;
#[path = "service/identity.rs"]
mod identity;
#[path = "service/network.rs"]
mod network;
#[path = "service/outbox.rs"]
mod outbox;
#[path = "service/records.rs"]
mod records;
#[path = "service/resident.rs"]
mod resident;
// Federation's signals for operators (issue 42, item 10).
#[path = "service/console_outbox.rs"]
mod console_outbox;
#[path = "service/observe.rs"]
mod observe;

use fake_host::FakeHost;
use folio_core::auth::access::{Access, AppGrant};
use folio_core::model::{Record, RecordId};
use folio_core::schema::builtin::BuiltinType;
use folio_core::service::Reply;
use kit::{Body, Call, Config, ENTITY, Signer, Stream};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const RECORDS: &str = "/api/alice/records";
pub const APP_KEY_SEED: [u8; 32] = [7; 32];
pub const OTHER_KEY_SEED: [u8; 32] = [8; 32];

pub fn id(byte: u8) -> RecordId {
    RecordId::from_bytes([byte; 16])
}

pub fn app_id() -> RecordId {
    id(0xa1)
}

pub fn authorization_id() -> RecordId {
    id(0xa2)
}

/// A fake host holding one app with full access (as `folio app add
/// --full-access` makes it), and that app's signer.
pub fn host_with_app(config: Config) -> (FakeHost, Signer) {
    let host = FakeHost::with(config);
    let app = host.add_app(app_id(), authorization_id(), APP_KEY_SEED, None);
    (host, app)
}

/// The access the full-access app of [`host_with_app`] acts with.
pub fn full_access() -> Access {
    Access::App {
        entity: ENTITY.parse().expect("an entity"),
        grant: AppGrant {
            app_record: Some(app_id()),
            read: Vec::new(),
            write: Vec::new(),
            subscribe: Vec::new(),
            every_type: true,
        },
    }
}

pub fn send(host: &FakeHost, call: &Call, body: Body) -> Reply<Stream> {
    pollster::block_on(call.send(host, body))
}

/// A GET of `target` with no credentials.
pub fn get(host: &FakeHost, target: &str) -> Reply<Stream> {
    send(host, &Call::get(target), Body::empty())
}

/// A GET of `target` signed by `app` (over nothing but its request line).
pub fn signed_get(host: &FakeHost, target: &str, app: &Signer, nonce: &str) -> Reply<Stream> {
    send(
        host,
        &Call::get(target).signed(app, nonce, &[]),
        Body::empty(),
    )
}

/// Hex of the SHA-256 of `bytes`, as `X-Svc-Content-SHA256` carries it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A request's seed named after its nonce, so that two requests of a
/// test draw different ids.
pub fn seed_of(nonce: &str) -> [u8; 32] {
    Sha256::digest(nonce.as_bytes()).into()
}

/// A JSON request signed by `app` (over nothing but its request line),
/// its seed named after its nonce.
pub fn signed_json(
    method: &str,
    target: &str,
    body: &Value,
    app: &Signer,
    nonce: &str,
) -> (Call, Body) {
    let body = Body::json(body);
    let call = Call::new(method, target)
        .seed(seed_of(nonce))
        .json_headers(&body)
        .signed(app, nonce, &[]);
    (call, body)
}

/// Sends a JSON request signed by `app`.
pub fn write(
    host: &FakeHost,
    method: &str,
    target: &str,
    body: &Value,
    app: &Signer,
    nonce: &str,
) -> Reply<Stream> {
    let (call, body) = signed_json(method, target, body, app, nonce);
    send(host, &call, body)
}

/// A Type record `note`: `text`, and optionally an `image` blob.
pub fn note_type(host: &FakeHost) -> Record {
    host.owner_post(json!({
        "type": BuiltinType::Type.link(),
        "content": {"name": "note", "schema": {"type": "object", "properties": {
            "content": {"type": "object", "properties": {
                "text": {"type": "string"},
                "image": {"type": "blob_link", "optional": true}
            }}
        }}}
    }))
}

/// A version link to `record`, as a write body names its type.
pub fn link(record: &Record) -> Value {
    json!({"entity": record.author.entity, "record_id": record.id, "version_hash": record.version.hash})
}

/// The path of a record of the user's store.
pub fn record_path(entity: &str, id: &RecordId) -> String {
    format!("{RECORDS}/{entity}/{id}")
}

/// How many versions the store holds.
pub fn versions(host: &FakeHost) -> i64 {
    host.count("SELECT COUNT(*) FROM versions")
}
