//! The consent page (PROTOCOL.md §10) at `{base_url}/{user}/auth/{app_id}`.
//! Every answer is a page or a redirect, never problem+json: a person
//! reads it.

use crate::auth::access::Access;
use crate::model::{Record, RecordId, RecordLink};
use crate::problem::ProblemType;
use crate::service::consent::{
    AppRequest, ConsentError, Decision, MAX_FORM_BYTES, MAX_ICON_BYTES, PAGE_HEADERS, Session,
    TypeLabel, approval_writes, consent_page, decide, icon_data_url, message_page, parse_form,
    scope_items, sign_in_page,
};
use crate::service::discovery::consent_path;
use crate::store::{
    Statement, WriteOrigin, app_authorizations_sql, latest_version_sql, password_hash_sql,
    read_version,
};

use crate::service::jobs::{Job, RecordWrite};
use crate::service::store::{RowExt, version_row};
use crate::service::{Context, Host, Note, Rate, Reply, ReplyBody, User};

type Page<S> = Result<Reply<S>, Reply<S>>;

/// Answers `GET`/`POST` of the consent page.
pub(in crate::service) async fn consent<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    app_id: RecordId,
    body: H::Body,
) -> Reply<H::Stream> {
    match answer(cx, user, app_id, body).await {
        Ok(reply) | Err(reply) => reply,
    }
}

async fn answer<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    app_id: RecordId,
    body: H::Body,
) -> Page<H::Stream> {
    let host = cx.host;
    let key = host.session_key();
    let now = cx.request.now;
    let action = consent_path(&user.name, &app_id);
    let records = fetch_records(cx, &latest_version_sql(user.id, &user.entity, &app_id)).await?;
    let Some(app) = records.first().and_then(AppRequest::from_record) else {
        host.discard(body).await;
        return Err(not_found());
    };
    // A signed-in session that signing out everywhere ended counts for nothing.
    let sessions_after = super::console::sessions_after(cx, user).await?;
    let session = cx
        .request
        .header("cookie")
        .and_then(|cookie| Session::from_cookie_header(cookie, key, now))
        .filter(|session| !session.signed_in || session.is_current(&user.name, sessions_after));
    let form = match cx.method == crate::service::route::Method::Post {
        true => Some(match host.read_body(body, MAX_FORM_BYTES).await {
            Ok(bytes) => parse_form(&bytes),
            Err(_) => Err(ConsentError::InvalidForm),
        }),
        false => None,
    };
    let nonce = cx.request.fresh.bytes();
    match decide(&user.name, session, form, key, nonce, now) {
        Decision::SignInForm {
            session,
            new_session,
        } => Ok(sign_in(cx, user, &session, &action, None, 200, new_session)),
        Decision::ConsentForm { session } => consent_form(cx, user, &session, &action, &app).await,
        Decision::Forbidden => Err(message(
            403,
            "This form has expired",
            "The form was not sent from this page, or it is too old. Go back, reload the page and try again.",
        )),
        Decision::CheckPassword { session, password } => {
            let matches = match attempt_password(cx, user, &password).await {
                Ok(Ok(matches)) => matches,
                Ok(Err(limited)) => {
                    let (title, text) = sign_in_refusal(limited.problem.kind);
                    return Err(message(limited.problem.status(), title, text)
                        .with("retry-after", limited.retry_after_secs.to_string()));
                }
                Err(error) => return Err(logged(host, &error)),
            };
            if matches {
                host.note(Note::SignedIn { user: &user.name });
                let session = Session::signed_in(&user.name, cx.request.fresh.bytes(), now);
                Ok(see_other(&action, Some(session.set_cookie(key, now))))
            } else {
                host.note(Note::WrongPassword {
                    user: &user.name,
                    peer: cx.request.peer,
                });
                Ok(sign_in(
                    cx,
                    user,
                    &session,
                    &action,
                    Some("Wrong password"),
                    401,
                    false,
                ))
            }
        }
        Decision::BackToPage => Ok(see_other(&action, None)),
        Decision::Deny => {
            let location = app.denial_redirect().map_err(|_| invalid_redirect())?;
            host.note(Note::Denied {
                user: &user.name,
                app: &app.id,
            });
            Ok(see_other(&location, None))
        }
        Decision::Approve { ticked } => {
            let location = approve(cx, user, &app, &ticked).await?;
            Ok(see_other(&location, None))
        }
    }
}

/// Creates the authorization with what the person left ticked (and
/// deletes the app's earlier ones); answers the app's redirect with the
/// authorization id.
async fn approve<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    app: &AppRequest,
    ticked: &crate::auth::apps::Scope,
) -> Result<String, Reply<H::Stream>> {
    let host = cx.host;
    let authorization_id = cx.request.fresh.record_id();
    // Check the redirect before writing anything.
    let location = app
        .approval_redirect(&authorization_id)
        .map_err(|_| invalid_redirect())?;
    let superseded = fetch_records(cx, &app_authorizations_sql(user.id, &user.entity, &app.id))
        .await?
        .into_iter()
        .map(|record| record.id)
        .collect::<Vec<_>>();
    let granted = app.granted(ticked);
    let writes = approval_writes(
        &user.entity,
        &app.id,
        &granted,
        &authorization_id,
        &superseded,
    )
    .into_iter()
    .map(|request| RecordWrite {
        request,
        access: Access::Owner {
            entity: user.entity.clone(),
        },
        origin: WriteOrigin::default(),
        fresh_id: cx.request.fresh.record_id(),
        requested_at: cx.request.now,
    })
    .collect();
    match cx
        .run_job(Job::Writes {
            user: user.clone(),
            writes,
        })
        .await
    {
        Ok(Ok(_)) => {
            host.note(Note::Authorized {
                user: &user.name,
                app: &app.id,
                authorization: &authorization_id,
            });
            Ok(location)
        }
        Ok(Err(error)) => Err(logged(
            host,
            &format!("an approval's writes were refused: {error}"),
        )),
        Err(error) => Err(logged(
            host,
            &format!("an approval could not be written: {error}"),
        )),
    }
}

async fn consent_form<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    session: &Session,
    action: &str,
    app: &AppRequest,
) -> Page<H::Stream> {
    let host = cx.host;
    let mut labels: Vec<(RecordLink, TypeLabel)> = Vec::new();
    let scope = &app.scope;
    for link in scope
        .read
        .iter()
        .chain(&scope.write)
        .chain(&scope.subscribe)
    {
        if labels.iter().any(|(known, _)| known == link) {
            continue;
        }
        let statement = latest_version_sql(user.id, &link.entity, &link.record_id);
        let label = fetch_records(cx, &statement)
            .await?
            .first()
            .and_then(TypeLabel::of);
        if let Some(label) = label {
            labels.push((link.clone(), label));
        }
    }
    let items = scope_items(app, |link| {
        labels
            .iter()
            .find(|(known, _)| known == link)
            .map(|(_, label)| label.clone())
    });
    // The icon, inlined; a missing or unreadable file shows no icon.
    let icon = match &app.icon {
        Some(link) => host
            .small_blob(&link.hash, MAX_ICON_BYTES)
            .await
            .and_then(|bytes| icon_data_url(link, &bytes)),
        None => None,
    };
    let csrf = session.csrf_token(host.session_key());
    let page = consent_page(&user.name, action, &csrf, app, icon.as_deref(), &items);
    Ok(html(200, page))
}

fn sign_in<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    session: &Session,
    action: &str,
    error: Option<&str>,
    status: u16,
    set_cookie: bool,
) -> Reply<H::Stream> {
    let key = cx.host.session_key();
    let csrf = session.csrf_token(key);
    let reply = html(status, sign_in_page(&user.name, action, &csrf, error));
    match set_cookie {
        true => reply.with("set-cookie", session.set_cookie(key, cx.request.now)),
        false => reply,
    }
}

/// A password typed for `user`, on the consent page, the console's
/// sign-in or a password change: counted against the address's sign-in
/// rate, then against the account's budget
/// ([`AccountBackoff`](crate::service::rates::AccountBackoff)), and only then
/// checked; a right one starts the account's count again. `Err` is the
/// refusal to show (nothing was checked); the host's failure is its text.
pub(in crate::service) async fn attempt_password<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    password: &str,
) -> Result<Result<bool, crate::service::Limited>, String> {
    // An address over its rate does not spend the account's budget.
    if let Err(limited) = cx.rate(Rate::SignIn(cx.request.peer)).await {
        return Ok(Err(limited));
    }
    if let Err(limited) = cx.rate(Rate::AccountSignIn(&user.name)).await {
        return Ok(Err(limited));
    }
    if password.len() > crate::service::consent::MAX_PASSWORD_BYTES {
        return Ok(Ok(false));
    }
    let right = password_matches(cx.host, user, password.to_owned()).await?;
    if right {
        // Never refused: clearing a count has nothing to limit.
        cx.rate(Rate::AccountSignedIn(&user.name))
            .await
            .map_err(|limited| limited.problem.kind.title().to_owned())?;
    }
    Ok(Ok(right))
}

/// Whether `password` is the user's (the consent page's and the
/// console's check); the host's failure as its text.
async fn password_matches<H: Host>(
    host: &H,
    user: &User,
    password: String,
) -> Result<bool, String> {
    let rows = host
        .fetch(&password_hash_sql(user.id))
        .await
        .map_err(|error| error.to_string())?;
    let stored = match rows.first() {
        Some(row) => row
            .optional_text(0)
            .map_err(|error| error.to_string())?
            .map(str::to_owned),
        None => None,
    };
    let Some(stored) = stored else {
        return Ok(false);
    };
    // Another server's parameters (an imported hash) would set the cost of
    // every attempt: refused before argon2 runs, and the owner told why.
    if let Err(reason) = crate::service::consent::check_password_hash(&stored) {
        host.note(Note::PasswordHashRefused {
            user: &user.name,
            reason: &reason,
        });
        return Ok(false);
    }
    Ok(host.verify_password(stored, password).await)
}

/// What a refused sign-in attempt's page says: `(title, text)`.
pub(in crate::service) fn sign_in_refusal(kind: ProblemType) -> (&'static str, &'static str) {
    match kind {
        ProblemType::RateLimited => (
            "Too many attempts",
            "Too many sign-in attempts from your address or for this account. Wait a while, then try again.",
        ),
        // The attempt could not be counted (the edge's rate object did not
        // answer): refused, but not as too many.
        _ => (
            "Try again in a moment",
            "The server could not take your sign-in just now. Try again in a moment.",
        ),
    }
}

async fn fetch_records<H: Host>(
    cx: &Context<'_, '_, H>,
    statement: &Statement,
) -> Result<Vec<Record>, Reply<H::Stream>> {
    let host = cx.host;
    let rows = host
        .fetch(statement)
        .await
        .map_err(|error| logged(host, &error))?;
    let mut records = Vec::with_capacity(rows.len());
    for row in &rows {
        let (record, links) = version_row(row).map_err(|error| logged(host, &error))?;
        let (record, _) = read_version(&record, &links).map_err(|error| logged(host, &error))?;
        records.push(record);
    }
    Ok(records)
}

fn html<S>(status: u16, page: String) -> Reply<S> {
    let mut reply = Reply::new(status, ReplyBody::Bytes(page.into_bytes()));
    for (name, value) in PAGE_HEADERS {
        reply.set(name, value);
    }
    reply
}

fn message<S>(status: u16, title: &str, text: &str) -> Reply<S> {
    html(status, message_page(title, text))
}

fn see_other<S>(location: &str, set_cookie: Option<String>) -> Reply<S> {
    let reply = html(303, String::new()).with("location", location);
    match set_cookie {
        Some(cookie) => reply.with("set-cookie", cookie),
        None => reply,
    }
}

/// The page for an unknown user or app.
pub(in crate::service) fn not_found<S>() -> Reply<S> {
    message(
        404,
        "No such app",
        "No app is registered under this address. Ask the app to start again.",
    )
}

fn invalid_redirect<S>() -> Reply<S> {
    message(
        400,
        "This app cannot be authorized",
        "The app's redirect address is not a web address, so there is nowhere to send you back to. Contact the app's maker.",
    )
}

fn logged<H: Host>(host: &H, error: &dyn std::fmt::Display) -> Reply<H::Stream> {
    host.report(error);
    message(
        500,
        "Something went wrong",
        "The server could not save your decision. Try again in a moment.",
    )
}
