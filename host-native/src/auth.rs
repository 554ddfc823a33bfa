//! Who is asking (PROTOCOL.md §10): a signed `Authorization` header, a
//! `bearer` token on a GET, or nobody. Core parses and verifies; this
//! module fetches the app's key and authorization and keeps the nonces.

use folio_core::access::Access;
use folio_core::apps::app_access;
use folio_core::auth::{
    AppKey, AuthError, BearerToken, HeaderLookup, ReplayError, SignedRequest, check_body_digest,
    check_timestamp,
};
use folio_core::model::{Record, RecordDate, RecordId};
use folio_core::problem::{Problem, ProblemType};
use folio_core::store::{app_authorizations_sql, app_key_sql, read_version};
use http::HeaderMap;
use sqlx::Row;

use crate::db;
use crate::server::App;
use crate::users::User;

/// The verified caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub access: Access,
    /// The app that signed, if any (for its write rate).
    pub app: Option<RecordId>,
    /// A bearer token's expiry, when the request came with one.
    pub bearer_expiry: Option<RecordDate>,
    /// The body digest the signature vouches for, to check a streamed body
    /// against once it is read.
    pub signed_content_sha256: Option<[u8; 32]>,
}

impl Caller {
    pub fn anonymous() -> Self {
        Caller {
            access: Access::Anonymous,
            app: None,
            bearer_expiry: None,
            signed_content_sha256: None,
        }
    }
}

/// A request's headers, as core reads them.
pub struct Headers<'h>(pub &'h HeaderMap);

impl HeaderLookup for Headers<'_> {
    fn header(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.0.get(lowercase_name).map(|value| value.as_bytes())
    }
}

/// What a request offers to authenticate.
pub struct Presented<'r> {
    pub method: &'r str,
    pub path_and_query: &'r str,
    pub host: &'r str,
    pub port: u16,
    pub headers: &'r HeaderMap,
    /// The SHA-256 of the body, for a signed `x-svc-content-sha256`.
    pub body_sha256: Option<[u8; 32]>,
}

fn auth_problem(error: &AuthError) -> Problem {
    Problem::from(error)
}

/// Authenticates a request to `user`'s store.
pub async fn authenticate(
    app: &App,
    user: &User,
    request: &Presented<'_>,
) -> Result<Caller, Problem> {
    let signed = SignedRequest {
        method: request.method,
        path_and_query: request.path_and_query,
        host: request.host,
        port: request.port,
    };
    if let Some(value) = request.headers.get(http::header::AUTHORIZATION) {
        let value = value.to_str().map_err(|_| {
            auth_problem(&AuthError::Malformed(folio_core::auth::Malformed::Syntax {
                at: 0,
            }))
        })?;
        let header = app
            .dialect
            .parse_authorization(value)
            .map_err(|e| auth_problem(&e))?;
        let now = app.clock.now();
        check_timestamp(header.ts_ms, now).map_err(|e| auth_problem(&e))?;
        let (key, full_access) = app_key(app, user, &header.app_id).await?;
        let authorization = authorization(app, user, &header.app_id).await?;
        let access = app_access(
            &user.entity,
            &header.app_id,
            full_access,
            authorization.as_ref(),
        )
        .map_err(|e| auth_problem(&e))?;
        let authorization_id = authorization.as_ref().map(|r| r.id);
        header
            .verify(
                &key,
                authorization_id.as_ref(),
                &signed,
                &Headers(request.headers),
            )
            .map_err(|e| auth_problem(&e))?;
        let signed_content_sha256 = header
            .signed_content_sha256(&Headers(request.headers))
            .map_err(|e| auth_problem(&e))?;
        if let Some(digest) = &request.body_sha256 {
            check_body_digest(signed_content_sha256, digest).map_err(|e| auth_problem(&e))?;
        }
        check_replay(app, header.app_id, header.nonce, header.ts_ms, now)?;
        return Ok(Caller {
            access,
            app: Some(header.app_id),
            bearer_expiry: None,
            signed_content_sha256,
        });
    }
    if matches!(request.method, "GET" | "HEAD")
        && let Some(token) = BearerToken::from_target(request.path_and_query)
    {
        let token = token.map_err(|e| auth_problem(&e))?;
        let now = app.clock.now();
        token.check_expiry(now).map_err(|e| auth_problem(&e))?;
        let (key, full_access) = app_key(app, user, &token.app_id).await?;
        let authorization = authorization(app, user, &token.app_id).await?;
        let access = app_access(
            &user.entity,
            &token.app_id,
            full_access,
            authorization.as_ref(),
        )
        .map_err(|e| auth_problem(&e))?;
        let authorization_id = authorization.as_ref().map(|r| r.id);
        token
            .verify(app.dialect, &key, authorization_id.as_ref(), &signed)
            .map_err(|e| auth_problem(&e))?;
        return Ok(Caller {
            access,
            app: Some(token.app_id),
            bearer_expiry: RecordDate::from_unix_millis(token.expires_at_ms).ok(),
            signed_content_sha256: None,
        });
    }
    Ok(Caller::anonymous())
}

/// Refuses a nonce this app already used within the window (or before
/// the server started).
pub fn check_replay(
    app: &App,
    app_id: RecordId,
    nonce: &str,
    ts_ms: i64,
    now: RecordDate,
) -> Result<(), Problem> {
    app.replay
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .check(app_id, nonce, ts_ms, now)
        .map_err(|error| match error {
            ReplayError::Auth(e) => auth_problem(&e),
            ReplayError::Full => Problem::new(ProblemType::Unavailable)
                .with_detail("too many requests in the replay window"),
        })
}

async fn app_key(app: &App, user: &User, app_id: &RecordId) -> Result<(AppKey, bool), Problem> {
    let rows = db::fetch(&app.readers, &app_key_sql(user.id, app_id))
        .await
        .map_err(|e| app.internal(&e))?;
    let row = rows
        .first()
        .ok_or_else(|| auth_problem(&AuthError::UnknownApp))?;
    let key: String = row.try_get(0).map_err(|e| app.internal(&e))?;
    let full: i64 = row.try_get(1).map_err(|e| app.internal(&e))?;
    let key =
        AppKey::from_base64(&key).map_err(|_| app.internal(&"a stored app key does not decode"))?;
    Ok((key, full != 0))
}

async fn authorization(
    app: &App,
    user: &User,
    app_id: &RecordId,
) -> Result<Option<Record>, Problem> {
    let rows = db::fetch_versions(
        &app.readers,
        &app_authorizations_sql(user.id, &user.entity, app_id),
        0,
    )
    .await
    .map_err(|e| app.internal(&e))?;
    match rows.first() {
        None => Ok(None),
        Some((record, links)) => read_version(record, links)
            .map(|(record, _)| Some(record))
            .map_err(|e| app.internal(&e)),
    }
}
