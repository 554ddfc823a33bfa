//! App registration (PROTOCOL.md §10): a POST of an App record that carries
//! the app's new key in `X-Svc-Credentials` or `X-Svc-PublicKey` and is
//! signed with that key, under the record's id, with an empty
//! authorization-id line. The server stores the App record (private to the
//! user) and a Credentials record holding a new server key pair for the
//! app, and answers with the server's key in the header the app used.
//!
//! The host verifies with [`verify_registration`], then, inside its write
//! transaction, looks up the key the app id is registered with and runs
//! what [`Registration::plan`] says.

use serde_json::{Map, Value, json};

use crate::auth::access::{Access, is_type};
use crate::auth::apps::{ServerKeys, credentials_record_body};
use crate::auth::{
    AppKey, AuthError, HeaderLookup, Malformed, SignedRequest, check_body_digest, check_timestamp,
};
use crate::model::dialect::{Dialect, HeaderName};
use crate::model::{Entity, RecordDate, RecordId, VersionLink};
use crate::problem::{Problem, ProblemType};
use crate::schema::builtin::BuiltinType;
use crate::store::{Statement, insert_app_sql};
use crate::write::{RecordKey, WriteRequest};

/// The key a registering app offers, and the header it came in (the answer
/// uses the same one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferedKey {
    /// The header the key came in: the dialect's credentials or public-key header.
    pub header: HeaderName,
    /// Standard base64 of the 32-byte Ed25519 public key, as sent.
    pub public_key: String,
    key: AppKey,
}

/// The key a request offers for registration, from either header name;
/// `None` when it carries neither (then it is not a registration).
pub fn offered_key(
    dialect: Dialect,
    headers: &(impl HeaderLookup + ?Sized),
) -> Result<Option<OfferedKey>, AuthError> {
    let names = dialect.names();
    let offered: Vec<(HeaderName, &[u8])> = [names.credentials, names.public_key]
        .into_iter()
        .filter_map(|name| Some((name, headers.header(name.lowercase)?)))
        .collect();
    let (header, value) = match offered.as_slice() {
        [] => return Ok(None),
        [one] => *one,
        _ => return Err(Malformed::KeyHeaders.into()),
    };
    let value = std::str::from_utf8(value).map_err(|_| Malformed::PublicKey)?;
    let public_key = parse_key_value(value)?;
    let key = AppKey::from_base64(public_key)?;
    Ok(Some(OfferedKey {
        header,
        public_key: public_key.to_owned(),
        key,
    }))
}

/// Reads `algorithm="ed25519" public_key="<base64>"` (parameters in any
/// order); both are required.
fn parse_key_value(value: &str) -> Result<&str, Malformed> {
    let (mut algorithm, mut public_key) = (None, None);
    crate::auth::parse_parameters(value.trim_matches([' ', '\t']), |name, value| {
        let (known, slot) = if name.eq_ignore_ascii_case("algorithm") {
            ("algorithm", &mut algorithm)
        } else if name.eq_ignore_ascii_case("public_key") {
            ("public_key", &mut public_key)
        } else {
            return Ok(());
        };
        match slot.replace(value) {
            Some(_) => Err(Malformed::RepeatedParameter(known)),
            None => Ok(()),
        }
    })?;
    match algorithm {
        Some("ed25519") => {}
        Some(_) => return Err(Malformed::UnsupportedAlgorithm),
        None => return Err(Malformed::MissingParameter("algorithm")),
    }
    public_key.ok_or(Malformed::MissingParameter("public_key"))
}

/// The value of the header that answers a registration with the server's key.
pub fn key_header_value(public_key: &str) -> String {
    format!("algorithm=\"ed25519\" public_key=\"{public_key}\"")
}

/// Why a registration is refused. Each variant is one problem type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The signature does not verify, or is not fresh: its `auth/401-*` problem.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The body is not an App record a registration may carry: `request/400-invalid-body`, with
    /// why.
    #[error("{0}")]
    InvalidBody(String),
    /// The app id is registered with another key: `record/409-id-conflict`.
    #[error("this app id is registered with another key")]
    IdConflict,
    /// Storing the App or Credentials record failed (an invalid link, a
    /// schema violation, an id another record holds).
    #[error(transparent)]
    Write(#[from] crate::write::WriteError),
}

impl From<&RegistrationError> for Problem {
    fn from(error: &RegistrationError) -> Self {
        match error {
            RegistrationError::Auth(auth) => Problem::from(auth),
            RegistrationError::InvalidBody(detail) => {
                Problem::new(ProblemType::InvalidBody).with_detail(detail.clone())
            }
            RegistrationError::IdConflict => {
                Problem::new(ProblemType::IdConflict).with_detail(error.to_string())
            }
            RegistrationError::Write(write) => Problem::from(write),
        }
    }
}

/// A registration whose signature verified: the app id, the key, the
/// nonce for the host's replay guard, and the App record to store.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The app's record id, the signature's `id`.
    pub app_id: RecordId,
    /// The key the app offered, with which the signature verified.
    pub key: OfferedKey,
    /// The signature's nonce, for the host's replay guard.
    pub nonce: String,
    /// The signature's timestamp, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// `{id, type, content}`: what the app sent, without permissions (an
    /// App record is private to the user).
    app_record: Map<String, Value>,
}

/// The parts of a registration request.
pub struct RegistrationRequest<'r, H: HeaderLookup + ?Sized> {
    /// The dialect whose names the request uses.
    pub dialect: Dialect,
    /// The `Authorization` header's value, if the request has one.
    pub authorization: Option<&'r str>,
    /// The method, target and authority the signature covers.
    pub signed: SignedRequest<'r>,
    /// The request's headers.
    pub headers: &'r H,
    /// The request's body.
    pub body: &'r [u8],
    /// The SHA-256 of the body, which the signed content digest must match.
    pub body_sha256: &'r [u8; 32],
}

/// Checks a registration: signed with the offered key under the body's id
/// with no authorization, fresh, and carrying an App record. The host still
/// checks the nonce against its replay guard.
pub fn verify_registration<H: HeaderLookup + ?Sized>(
    request: &RegistrationRequest<'_, H>,
    key: OfferedKey,
    now: RecordDate,
) -> Result<Registration, RegistrationError> {
    let value = request
        .authorization
        .ok_or(AuthError::MissingAuthorization)?;
    let header = request.dialect.parse_authorization(value)?;
    check_timestamp(header.ts_ms, now)?;
    header.verify(&key.key, None, &request.signed, request.headers)?;
    check_body_digest(
        header.signed_content_sha256(request.headers)?,
        request.body_sha256,
    )?;
    let app_record = app_record(request.body, &header.app_id)?;
    Ok(Registration {
        app_id: header.app_id,
        key,
        nonce: header.nonce.to_owned(),
        ts_ms: header.ts_ms,
        app_record,
    })
}

/// The App record of a registration body: its `id` is the one the request
/// is signed under and its `type` the built-in App type.
fn app_record(body: &[u8], app_id: &RecordId) -> Result<Map<String, Value>, RegistrationError> {
    let invalid = |detail: &str| RegistrationError::InvalidBody(detail.to_owned());
    let body: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|_| invalid("a registration body is a JSON object: the app's App record"))?;
    if body.get("id").and_then(Value::as_str) != Some(&app_id.to_string()) {
        return Err(invalid(
            "the body's `id` must be the app id the request is signed with",
        ));
    }
    let type_link: Option<VersionLink> = body
        .get("type")
        .and_then(|link| serde_json::from_value(link.clone()).ok());
    if !type_link.is_some_and(|link| is_type(&link, BuiltinType::App)) {
        return Err(invalid("a registration creates an App record"));
    }
    let Some(content) = body.get("content").and_then(Value::as_object) else {
        return Err(invalid("the App record needs its `content`"));
    };
    // Registration writes as the owner, who may link any blob of the store:
    // an icon here would tell a stranger whether the store holds a blob.
    if content.contains_key("icon") {
        return Err(invalid(
            "an app links its icon after it is authorized, not when it registers",
        ));
    }
    Ok(["id", "type", "content"]
        .into_iter()
        .filter_map(|field| Some((field.to_owned(), body.get(field)?.clone())))
        .collect())
}

/// The writes that register a new app.
#[derive(Debug)]
pub struct NewApp {
    /// The write that creates the App record.
    pub app: WriteRequest,
    /// The write that creates the Credentials record, which holds the server's key pair for the
    /// app.
    pub credentials: WriteRequest,
    /// The statement that stores the app's key.
    pub app_row: Statement,
    /// The server's public key for the app, for the answer's key header.
    pub server_public_key: String,
}

/// What a registration writes, once the host has read the key the app id is
/// registered with.
#[derive(Debug)]
pub enum RegistrationPlan {
    /// A new app: its App record, its Credentials record, and its key row.
    New(Box<NewApp>),
    /// The app registers again with the same key: a new version of its App
    /// record; the server key stays the one its Credentials record holds.
    Renewal {
        /// The write that updates the App record.
        app: Box<WriteRequest>,
    },
}

impl Registration {
    /// The writes of this registration in `user`'s store (`user_id`), given
    /// the key the app id is already registered with, if any. The host
    /// draws `credentials_id` and `server` (fresh randomness).
    pub fn plan(
        &self,
        user: &Entity,
        user_id: i64,
        registered_key: Option<&str>,
        credentials_id: RecordId,
        server: &ServerKeys,
    ) -> Result<RegistrationPlan, RegistrationError> {
        let body = |value: &Value| {
            WriteRequest::post(value.to_string().as_bytes())
                .map_err(|e| RegistrationError::InvalidBody(e.to_string()))
        };
        match registered_key {
            None => Ok(RegistrationPlan::New(Box::new(NewApp {
                app: body(&Value::Object(self.app_record.clone()))?,
                credentials: body(&credentials_record_body(
                    &credentials_id,
                    user,
                    &self.app_id,
                    &self.key.public_key,
                    server,
                ))?,
                app_row: insert_app_sql(user_id, &self.app_id, &self.key.public_key, false),
                server_public_key: server.public_key.clone(),
            }))),
            Some(registered) if same_key(registered, &self.key) => {
                let update = json!({
                    "type": self.app_record.get("type"),
                    "content": self.app_record.get("content"),
                });
                let target = RecordKey::new(user.clone(), self.app_id);
                let app = WriteRequest::put(target, update.to_string().as_bytes())
                    .map_err(|e| RegistrationError::InvalidBody(e.to_string()))?;
                Ok(RegistrationPlan::Renewal { app: Box::new(app) })
            }
            Some(_) => Err(RegistrationError::IdConflict),
        }
    }
}

/// Whether a stored key is the offered one (compared as keys, not text).
fn same_key(registered: &str, offered: &OfferedKey) -> bool {
    AppKey::from_base64(registered).is_ok_and(|key| key == offered.key)
}

/// The access registration writes with: the user's own, since the app has
/// no authorization yet and writes only what [`Registration::plan`] built.
pub fn registration_access(user: &Entity) -> Access {
    Access::Owner {
        entity: user.clone(),
    }
}
