//! The JavaScript SDK's wasm module: the parts of `folio-core` a client
//! runs itself, so that a browser or node app signs and checks exactly as
//! the server does. The key never enters this module: it returns the bytes
//! to sign, and the SDK signs them with WebCrypto.
//!
//! Each function takes and returns plain JavaScript values (strings, byte
//! arrays, JSON text); errors are `Error`s with a message.

use folio_core::auth::{ClientBearer, ClientSignature, SignatureLayout, SignedRequest};
use folio_core::model::dialect::Dialect;
use folio_core::model::{Record, RecordId, VersionLink};
use folio_core::schema::{RecordType, provisional_record};
use folio_core::write::new_record_permissions;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use wasm_bindgen::prelude::*;

/// A request to sign, as the SDK describes it (JSON, camelCase).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RequestToSign {
    /// `"svc"` or `"baq"`.
    dialect: String,
    /// Whether the `ed25519` line is signed (PROTOCOL.md §10).
    algorithm_line: bool,
    app_id: String,
    /// `null` for the registration request.
    authorization_id: Option<String>,
    ts: i64,
    nonce: String,
    method: String,
    path_and_query: String,
    host: String,
    port: u16,
    /// Lowercase names with their values, in the order they are signed.
    headers: Vec<(String, String)>,
}

/// A bearer token to make, as the SDK describes it (JSON, camelCase).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BearerToMake {
    dialect: String,
    app_id: String,
    authorization_id: Option<String>,
    /// Milliseconds since the epoch.
    expires_at: i64,
    /// The target's path and query, without `bearer`.
    path_and_query: String,
    host: String,
    port: u16,
}

fn dialect(name: &str) -> Result<Dialect, JsError> {
    match name {
        "svc" => Ok(Dialect::Svc),
        "baq" => Ok(Dialect::Baq),
        other => Err(error(format!("unknown dialect {other:?}"))),
    }
}

/// Runs `with` on the core's view of the bearer token in `json`.
fn with_bearer<T>(json: &str, with: impl FnOnce(&ClientBearer<'_>) -> T) -> Result<T, JsError> {
    let bearer: BearerToMake = serde_json::from_str(json).map_err(error)?;
    let token = ClientBearer {
        dialect: dialect(&bearer.dialect)?,
        app: id(&bearer.app_id, "appId")?,
        authorization: bearer
            .authorization_id
            .as_deref()
            .map(|text| id(text, "authorizationId"))
            .transpose()?,
        expires_at_ms: bearer.expires_at,
        request: SignedRequest {
            method: "GET",
            path_and_query: &bearer.path_and_query,
            host: &bearer.host,
            port: bearer.port,
        },
    };
    Ok(with(&token))
}

/// The bytes to sign for the bearer token described by `bearer` (JSON).
#[wasm_bindgen(js_name = bearerInput)]
pub fn bearer_input(bearer: &str) -> Result<Vec<u8>, JsError> {
    with_bearer(bearer, |token| token.signature_input())
}

/// The bearer token described by `bearer` (JSON), carrying `signature`.
#[wasm_bindgen(js_name = bearerToken)]
pub fn bearer_token(bearer: &str, signature: &[u8]) -> Result<String, JsError> {
    let signature: &[u8; 64] = signature
        .try_into()
        .map_err(|_| error("an Ed25519 signature is 64 bytes"))?;
    with_bearer(bearer, |token| token.token(signature))
}

fn error(message: impl std::fmt::Display) -> JsError {
    JsError::new(&message.to_string())
}

fn id(text: &str, what: &str) -> Result<RecordId, JsError> {
    text.parse()
        .map_err(|_| error(format!("{what} is not a record id: {text:?}")))
}

/// Runs `with` on the core's view of the request in `json`.
fn with_signature<T>(
    json: &str,
    with: impl FnOnce(&ClientSignature<'_>) -> T,
) -> Result<T, JsError> {
    let request: RequestToSign = serde_json::from_str(json).map_err(error)?;
    let dialect = dialect(&request.dialect)?;
    let headers: Vec<(&str, &str)> = request
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let signature = ClientSignature {
        dialect,
        layout: match request.algorithm_line {
            true => SignatureLayout::WithAlgorithmLine,
            false => SignatureLayout::WithoutAlgorithmLine,
        },
        app: id(&request.app_id, "appId")?,
        authorization: request
            .authorization_id
            .as_deref()
            .map(|text| id(text, "authorizationId"))
            .transpose()?,
        ts_ms: request.ts,
        nonce: &request.nonce,
        request: SignedRequest {
            method: &request.method,
            path_and_query: &request.path_and_query,
            host: &request.host,
            port: request.port,
        },
        headers: &headers,
    };
    Ok(with(&signature))
}

/// The bytes to sign for the request described by `request` (JSON).
#[wasm_bindgen(js_name = signatureInput)]
pub fn signature_input(request: &str) -> Result<Vec<u8>, JsError> {
    with_signature(request, |client| client.signature_input())
}

/// The `Authorization` header for the request described by `request`
/// (JSON), carrying `signature` (64 bytes).
#[wasm_bindgen(js_name = authorizationHeader)]
pub fn authorization_header(request: &str, signature: &[u8]) -> Result<String, JsError> {
    let signature: &[u8; 64] = signature
        .try_into()
        .map_err(|_| error("an Ed25519 signature is 64 bytes"))?;
    with_signature(request, |client| client.authorization_header(signature))
}

/// The version hash a record's content and metadata come to (64 hex
/// digits), computed from the record as received (JSON).
#[wasm_bindgen(js_name = versionHash)]
pub fn version_hash(record: &str) -> Result<String, JsError> {
    let record: Record = serde_json::from_str(record).map_err(error)?;
    Ok(record.hash_input().hash().to_string())
}

/// A Type record's schema, compiled once, for checking many records'
/// bodies against it: what a new record's body breaks of it, as the server
/// would answer `schema_violation`. Only the schema is checked here;
/// whether links resolve is the server's to say.
#[wasm_bindgen]
pub struct TypeChecker {
    record_type: RecordType,
}

#[wasm_bindgen]
impl TypeChecker {
    /// Compiles the schema of `type_record` (a Type record, JSON, as
    /// received).
    #[wasm_bindgen(constructor)]
    pub fn new(type_record: &str) -> Result<TypeChecker, JsError> {
        let type_record: Value = serde_json::from_str(type_record).map_err(error)?;
        let record_type = RecordType::from_content(&type_record["content"]).map_err(error)?;
        Ok(TypeChecker { record_type })
    }

    /// What `body` (JSON: `type`, `content`, `permissions`), written by
    /// `author`, breaks of the schema: `null` when nothing, else the
    /// violation as text (its JSON path first).
    pub fn check(&self, body: &str, author: &str) -> Result<Option<String>, JsError> {
        let body: Value = serde_json::from_str(body).map_err(error)?;
        let type_link: VersionLink = serde_json::from_value(body["type"].clone()).map_err(error)?;
        let given = match body.get("permissions") {
            Some(permissions) => Some(serde_json::from_value(permissions.clone()).map_err(error)?),
            None => None,
        };
        let Some(Value::Object(content)) = body.get("content") else {
            return Err(error("the body's content is not an object"));
        };
        let author = author
            .parse()
            .map_err(|_| error(format!("{author:?} is not an entity")))?;
        let permissions = new_record_permissions(&type_link, given);
        let record = provisional_record(author, type_link, permissions, content.clone());
        Ok(self
            .record_type
            .schema
            .validate(&record)
            .err()
            .map(|violation| violation.to_string()))
    }
}

/// The records of an answer (JSON, as received): `record` or `records`,
/// and `linked_records`; anything else in it is left alone.
#[derive(Deserialize)]
struct Answered {
    #[serde(default)]
    record: Option<Record>,
    #[serde(default)]
    records: Vec<Record>,
    #[serde(default)]
    linked_records: Vec<Record>,
}

/// Checks the version hash of every record in `answer` (a record's or a
/// page's answer, JSON text as received, before any parsing in
/// JavaScript): `null` when each is what its content and metadata come to,
/// else which record does not, and what it comes to.
#[wasm_bindgen(js_name = checkVersionHashes)]
pub fn check_version_hashes(answer: &str) -> Result<Option<String>, JsError> {
    let answered: Answered = serde_json::from_str(answer).map_err(error)?;
    let mut records = (answered.record.iter())
        .chain(&answered.records)
        .chain(&answered.linked_records);
    Ok(records.find_map(|record| {
        let computed = record.hash_input().hash();
        (computed != record.version.hash).then(|| {
            format!(
                "record {}: carries {}, its content comes to {computed}",
                record.id, record.version.hash
            )
        })
    }))
}

/// The SHA-256 of `bytes`, as 64 lowercase hex digits: a body's digest
/// header, computed at once (WebCrypto's digest is asynchronous).
#[wasm_bindgen(js_name = sha256Hex)]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
