//! The consent page (PROTOCOL.md §10). Core renders the pages, parses the
//! form, signs and checks the session cookie and decides the grant and the
//! redirect; this module reads the cookie and the form, checks the
//! password (argon2id), draws the randomness and runs the writes.

use argon2::PasswordVerifier;
use argon2::password_hash::PasswordHash;
use axum::body::Body;
use axum::response::Response;
use folio_core::access::Access;
use folio_core::consent::{
    AppRequest, ConsentError, Decision, MAX_FORM_BYTES, MAX_ICON_BYTES, PAGE_HEADERS, Session,
    approval_writes, consent_page, decide, icon_data_url, message_page, parse_form, scope_items,
    sign_in_page,
};
use folio_core::discovery::consent_path;
use folio_core::model::{Record, RecordId, RecordLink};
use folio_core::store::{
    WriteOrigin, app_authorizations_sql, latest_version_sql, password_hash_sql, read_version,
};
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sqlx::Row;

use crate::db;
use crate::server::App;
use crate::users::User;
use crate::writer::RecordWrite;

/// A consent page request.
pub struct ConsentRequest<'r> {
    pub app: &'r App,
    pub peer: std::net::IpAddr,
    pub post: bool,
    pub headers: &'r HeaderMap,
    pub user: &'r User,
    pub app_id: RecordId,
}

/// Answers `GET`/`POST {base_url}/{user}/auth/{app_id}`. Every answer is a
/// page (or a redirect), never problem+json: a person reads it.
pub async fn consent(request: ConsentRequest<'_>, body: Body) -> Response {
    match answer(&request, body).await {
        Ok(response) | Err(response) => response,
    }
}

type Page = Result<Response, Response>;

async fn answer(request: &ConsentRequest<'_>, body: Body) -> Page {
    let app = request.app;
    let user = request.user;
    let now = app.clock.now();
    let action = consent_path(&user.name, &request.app_id);
    let app_request = app_request(request).await?.ok_or_else(not_found)?;
    let session = request
        .headers
        .get(header::COOKIE)
        .and_then(|value| value.to_str().ok())
        .and_then(|cookie| Session::from_cookie_header(cookie, &app.session_key, now));
    let form = match request.post {
        true => Some(read_form(body).await.and_then(|body| parse_form(&body))),
        false => None,
    };
    let decision = decide(
        &user.name,
        session,
        form,
        &app.session_key,
        rand::random(),
        now,
    );
    match decision {
        Decision::SignInForm {
            session,
            new_session,
        } => Ok(sign_in(
            request,
            &session,
            &action,
            None,
            StatusCode::OK,
            new_session,
        )),
        Decision::ConsentForm { session } => {
            consent_form(request, &session, &action, &app_request).await
        }
        Decision::Forbidden => Err(forbidden()),
        Decision::CheckPassword { session, password } => {
            if let Err(limited) = app.rates.sign_in(&request.peer) {
                let mut page = message(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too many attempts",
                    "Too many sign-in attempts from your address. Wait a minute, then try again.",
                );
                page.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(limited.retry_after_secs),
                );
                return Err(page);
            }
            if check_password(app, user, password).await? {
                tracing::info!(user = %user.name, "signed in on the consent page");
                let session = Session::signed_in(&user.name, rand::random(), now);
                Ok(see_other(
                    &action,
                    Some(session.set_cookie(&app.session_key, now)),
                ))
            } else {
                tracing::info!(user = %user.name, peer = %request.peer, "wrong consent-page password");
                Ok(sign_in(
                    request,
                    &session,
                    &action,
                    Some("Wrong password"),
                    StatusCode::UNAUTHORIZED,
                    false,
                ))
            }
        }
        Decision::BackToPage => Ok(see_other(&action, None)),
        Decision::Deny => {
            let location = app_request
                .denial_redirect()
                .map_err(|_| invalid_redirect())?;
            tracing::info!(user = %user.name, app = %app_request.id, "consent denied");
            Ok(see_other(&location, None))
        }
        Decision::Approve { ticked } => {
            let location = approve(request, &app_request, &ticked).await?;
            Ok(see_other(&location, None))
        }
    }
}

/// Creates the authorization with what the person left ticked; answers
/// the app's redirect with the authorization id.
async fn approve(
    request: &ConsentRequest<'_>,
    app_request: &AppRequest,
    ticked: &folio_core::apps::Scope,
) -> Result<String, Response> {
    let app = request.app;
    let user = request.user;
    let authorization_id = RecordId::from_bytes(rand::random());
    // Check the redirect before writing anything.
    let location = app_request
        .approval_redirect(&authorization_id)
        .map_err(|_| invalid_redirect())?;
    let superseded = fetch_records(
        app,
        &app_authorizations_sql(user.id, &user.entity, &app_request.id),
    )
    .await?
    .into_iter()
    .map(|record| record.id)
    .collect::<Vec<_>>();
    let granted = app_request.granted(ticked);
    let writes = approval_writes(
        &user.entity,
        &app_request.id,
        &granted,
        &authorization_id,
        &superseded,
    )
    .into_iter()
    .map(|request| RecordWrite {
        user: user.clone(),
        request,
        access: Access::Owner {
            entity: user.entity.clone(),
        },
        origin: WriteOrigin::default(),
    })
    .collect();
    match app.writer.write_group(writes).await {
        Ok(Ok(_)) => {
            tracing::info!(user = %user.name, app = %app_request.id, %authorization_id, "app authorized");
            Ok(location)
        }
        Ok(Err(error)) => {
            tracing::error!(%error, "an approval's writes were refused");
            Err(internal())
        }
        Err(error) => {
            tracing::error!(%error, "an approval could not be written");
            Err(internal())
        }
    }
}

async fn consent_form(
    request: &ConsentRequest<'_>,
    session: &Session,
    action: &str,
    app_request: &AppRequest,
) -> Page {
    let app = request.app;
    let user = request.user;
    let mut names = Vec::new();
    let scope = &app_request.scope;
    for link in scope
        .read
        .iter()
        .chain(&scope.write)
        .chain(&scope.subscribe)
    {
        if names
            .iter()
            .any(|(known, _): &(RecordLink, String)| known == link)
        {
            continue;
        }
        let statement = latest_version_sql(user.id, &link.entity, &link.record_id);
        let name = fetch_records(app, &statement)
            .await?
            .first()
            .and_then(|record| {
                record
                    .content()?
                    .as_map()
                    .get("name")?
                    .as_str()
                    .map(str::to_owned)
            });
        if let Some(name) = name {
            names.push((link.clone(), name));
        }
    }
    let items = scope_items(app_request, |link| {
        names
            .iter()
            .find(|(known, _)| known == link)
            .map(|(_, name)| name.clone())
    });
    let icon = match &app_request.icon {
        Some(link) => icon(app, link).await,
        None => None,
    };
    let csrf = session.csrf_token(&app.session_key);
    let page = consent_page(
        &user.name,
        action,
        &csrf,
        app_request,
        icon.as_deref(),
        &items,
    );
    Ok(html(StatusCode::OK, page))
}

/// The app's icon, inlined; a missing or unreadable file shows no icon.
async fn icon(app: &App, link: &folio_core::model::BlobLink) -> Option<String> {
    let path = app.blobs.path(&link.hash.to_string());
    let size = tokio::fs::metadata(&path).await.ok()?.len();
    if size > MAX_ICON_BYTES as u64 {
        return None;
    }
    let bytes = tokio::fs::read(&path).await.ok()?;
    icon_data_url(link, &bytes)
}

fn sign_in(
    request: &ConsentRequest<'_>,
    session: &Session,
    action: &str,
    error: Option<&str>,
    status: StatusCode,
    set_cookie: bool,
) -> Response {
    let app = request.app;
    let csrf = session.csrf_token(&app.session_key);
    let mut response = html(
        status,
        sign_in_page(&request.user.name, action, &csrf, error),
    );
    if set_cookie {
        let cookie = session.set_cookie(&app.session_key, app.clock.now());
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
    }
    response
}

/// Whether `password` is the user's; argon2 runs off the async workers.
async fn check_password(app: &App, user: &User, password: String) -> Result<bool, Response> {
    let rows = db::fetch(&app.readers, &password_hash_sql(user.id))
        .await
        .map_err(|error| logged(&error))?;
    let stored: Option<String> = match rows.first() {
        Some(row) => row.try_get(0).map_err(|error| logged(&error))?,
        None => None,
    };
    let Some(stored) = stored else {
        return Ok(false);
    };
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&stored).is_ok_and(|hash| {
            argon2::Argon2::default()
                .verify_password(password.as_bytes(), &hash)
                .is_ok()
        })
    })
    .await
    .map_err(|error| logged(&error))
}

async fn app_request(request: &ConsentRequest<'_>) -> Result<Option<AppRequest>, Response> {
    let user = request.user;
    let statement = latest_version_sql(user.id, &user.entity, &request.app_id);
    let records = fetch_records(request.app, &statement).await?;
    Ok(records.first().and_then(AppRequest::from_record))
}

async fn fetch_records(
    app: &App,
    statement: &folio_core::store::Statement,
) -> Result<Vec<Record>, Response> {
    let rows = db::fetch_versions(&app.readers, statement, 0)
        .await
        .map_err(|error| logged(&error))?;
    let mut records = Vec::with_capacity(rows.len());
    for (record, links) in &rows {
        let (record, _) = read_version(record, links).map_err(|error| logged(&error))?;
        records.push(record);
    }
    Ok(records)
}

/// A form body, at most [`MAX_FORM_BYTES`].
async fn read_form(body: Body) -> Result<Vec<u8>, ConsentError> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ConsentError::InvalidForm)?;
        if bytes.len() + chunk.len() > MAX_FORM_BYTES {
            return Err(ConsentError::InvalidForm);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

fn html(status: StatusCode, page: String) -> Response {
    let mut response = Response::new(Body::from(page));
    *response.status_mut() = status;
    for (name, value) in PAGE_HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

fn message(status: StatusCode, title: &str, text: &str) -> Response {
    html(status, message_page(title, text))
}

fn see_other(location: &str, set_cookie: Option<String>) -> Response {
    let mut response = html(StatusCode::SEE_OTHER, String::new());
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, value);
    }
    if let Some(cookie) = set_cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The page for an unknown user or app.
pub fn not_found() -> Response {
    message(
        StatusCode::NOT_FOUND,
        "No such app",
        "No app is registered under this address. Ask the app to start again.",
    )
}

fn forbidden() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "This form has expired",
        "The form was not sent from this page, or it is too old. Go back, reload the page and try again.",
    )
}

fn invalid_redirect() -> Response {
    message(
        StatusCode::BAD_REQUEST,
        "This app cannot be authorized",
        "The app's redirect address is not a web address, so there is nowhere to send you back to. Contact the app's maker.",
    )
}

fn internal() -> Response {
    message(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Something went wrong",
        "The server could not save your decision. Try again in a moment.",
    )
}

fn logged(error: &dyn std::fmt::Display) -> Response {
    tracing::error!(%error, "consent page");
    internal()
}
