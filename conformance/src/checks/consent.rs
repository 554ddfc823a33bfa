//! The consent page `{base_url}/{user}/auth/{app_id}` (PROTOCOL.md §10),
//! driven as a browser without JavaScript would: GET the page, POST its
//! forms with the session cookie, read each `303` without following it.

use serde_json::{Value, json};
use url::Url;

use super::{Check, CheckResult, Needs, check};
use crate::apps::{
    NewApp, REDIRECT, REDIRECT_BARE, ScopeItem, authorization_id, authorize, consent_url, password,
    register, register_body, scope_items, scope_type,
};
use crate::browser::{
    Browser, SESSION_COOKIE, csrf, ensure_session_attributes, html, see_other, session_cookies,
};
use crate::client::{Call, record_id};
use crate::context::Ctx;
use crate::expect::{self, FORBIDDEN, RECORD_NOT_FOUND, ensure, ensure_eq, str_at};
use crate::html::Document;

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "consent/sign-in-page-has-csrf-and-labelled-password",
            sign_in_page
        ),
        check!("consent/session-cookie-secure-httponly-lax", session_cookie),
        check!("consent/wrong-password-401", wrong_password),
        check!(
            "consent/right-password-303-new-session-cookie",
            right_password,
            Needs::Password
        ),
        check!("consent/missing-csrf-403", missing_csrf, Needs::Password),
        check!("consent/wrong-csrf-403", wrong_csrf, Needs::Password),
        check!(
            "consent/csrf-of-another-session-403",
            csrf_of_another_session,
            Needs::Password
        ),
        check!(
            "consent/approve-without-session-redirects-to-sign-in",
            approve_without_session
        ),
        check!(
            "consent/page-shows-app-and-requested-scopes-checked",
            page_shows_app,
            Needs::Password
        ),
        check!(
            "consent/approve-redirects-with-authorization-id",
            approve_redirects,
            Needs::Password
        ),
        check!(
            "consent/grant-is-the-ticked-scopes",
            grant_is_ticked,
            Needs::Password
        ),
        check!(
            "consent/unrequested-scopes-not-granted",
            unrequested_not_granted,
            Needs::Password
        ),
        check!(
            "consent/deny-redirects-access-denied",
            deny_redirects,
            Needs::Password
        ),
        check!(
            "consent/deny-appends-error-with-ampersand",
            deny_with_ampersand,
            Needs::Password
        ),
        check!("consent/unknown-app-404", unknown_app),
        check!("consent/unknown-user-404", unknown_user),
    ]
}

/// A registered app asking to read one fresh type, and its consent page.
async fn registered_app(ctx: &Ctx) -> Result<(NewApp, Vec<ScopeItem>, Url), String> {
    let (ty, _) = scope_type(ctx, "conformance_consent").await?;
    let scope = vec![ScopeItem::of("read", &ty)?];
    let app = NewApp::fresh();
    register(ctx, &app, &scope).await?;
    let url = consent_url(ctx, app.id())?;
    Ok((app, scope, url))
}

/// Fails unless `page` is the sign-in page PROTOCOL.md §10 describes for
/// the app `app_id`.
fn ensure_sign_in_form(ctx: &Ctx, page: &Document, app_id: &str) -> CheckResult {
    let action = format!("/{}/auth/{app_id}", ctx.target.user);
    let form = page
        .tags("form")
        .next()
        .ok_or("the sign-in page has no form")?;
    ensure!(
        form.attribute("method")
            .is_some_and(|method| method.eq_ignore_ascii_case("post")),
        "the form's method is not post: {}",
        form.describe()
    );
    ensure_eq!(
        form.attribute("action"),
        Some(action.as_str()),
        "the form's action"
    );
    csrf(page)?;
    let input = page
        .find("input", &[("id", "password")])
        .ok_or("no input with id=\"password\"")?;
    ensure!(
        input.matches(&[
            ("name", "password"),
            ("type", "password"),
            ("autocomplete", "current-password"),
        ]),
        "the password input is not name=password type=password \
         autocomplete=current-password: {}",
        input.describe()
    );
    ensure!(
        page.find("label", &[("for", "password")]).is_some(),
        "no <label for=\"password\">"
    );
    ensure!(
        page.find(
            "button",
            &[("type", "submit"), ("name", "action"), ("value", "sign_in")]
        )
        .is_some(),
        "no <button type=\"submit\" name=\"action\" value=\"sign_in\">"
    );
    Ok(())
}

async fn sign_in_page(ctx: &Ctx) -> CheckResult {
    let (app, _, url) = registered_app(ctx).await?;
    let mut browser = Browser::new(&ctx.http, &url);
    let page = html(&browser.get(&url).await?, 200)?;
    ensure_sign_in_form(ctx, &page, app.id())
}

async fn session_cookie(ctx: &Ctx) -> CheckResult {
    let (_, _, url) = registered_app(ctx).await?;
    let response = Browser::new(&ctx.http, &url).get(&url).await?;
    html(&response, 200)?;
    let cookie = session_cookies(&response)
        .pop()
        .ok_or_else(|| format!("the sign-in page sets no {SESSION_COOKIE} cookie"))?;
    ensure!(!cookie.value.is_empty(), "the session cookie is empty");
    ensure_session_attributes(&cookie)
}

async fn wrong_password(ctx: &Ctx) -> CheckResult {
    let (app, _, url) = registered_app(ctx).await?;
    let mut browser = Browser::new(&ctx.http, &url);
    let (_, token) = browser.open(&url).await?;
    let wrong = format!("not-the-password-{}", record_id());
    let fields = [
        ("csrf", token.as_str()),
        ("action", "sign_in"),
        ("password", wrong.as_str()),
    ];
    let page = html(&browser.post_form(&url, &fields).await?, 401)?;
    let alert = page
        .find_any(&[("role", "alert")])
        .ok_or("no element with role=\"alert\"")?;
    let message = page.text_inside(alert);
    ensure!(
        message.contains("Wrong password"),
        "the alert says {message:?}, not \"Wrong password\""
    );
    ensure_sign_in_form(ctx, &page, app.id())?;
    // Still signed out: the page is the sign-in page again.
    let again = html(&browser.get(&url).await?, 200)?;
    ensure_sign_in_form(ctx, &again, app.id())
        .map_err(|error| format!("after a wrong password: {error}"))
}

async fn right_password(ctx: &Ctx) -> CheckResult {
    let (_, _, url) = registered_app(ctx).await?;
    let mut browser = Browser::new(&ctx.http, &url);
    let (_, token) = browser.open(&url).await?;
    let before = browser.session().map(str::to_string);
    let fields = [
        ("csrf", token.as_str()),
        ("action", "sign_in"),
        ("password", password(ctx)?),
    ];
    let response = browser.post_form(&url, &fields).await?;
    let location = see_other(&response, &url)?;
    ensure_eq!(location.as_str(), url.as_str(), "the sign-in's Location");
    let cookie = session_cookies(&response)
        .pop()
        .ok_or("signing in sets no new session cookie")?;
    ensure_session_attributes(&cookie)?;
    ensure!(
        Some(&cookie.value) != before.as_ref(),
        "signing in kept the signed-out session's cookie value"
    );
    let page = html(&browser.get(&url).await?, 200)?;
    ensure!(
        page.find("button", &[("name", "action"), ("value", "approve")])
            .is_some(),
        "after signing in, the page has no approve button"
    );
    ensure!(
        page.find("input", &[("id", "password")]).is_none(),
        "after signing in, the page still asks for the password"
    );
    Ok(())
}

async fn missing_csrf(ctx: &Ctx) -> CheckResult {
    let (app, _, url) = registered_app(ctx).await?;
    let mut browser = Browser::new(&ctx.http, &url);
    browser.open(&url).await?;
    let fields = [("action", "sign_in"), ("password", password(ctx)?)];
    html(&browser.post_form(&url, &fields).await?, 403)?;
    let page = html(&browser.get(&url).await?, 200)?;
    ensure_sign_in_form(ctx, &page, app.id())
        .map_err(|error| format!("a sign-in without csrf signed in: {error}"))
}

async fn wrong_csrf(ctx: &Ctx) -> CheckResult {
    let (_, scope, url) = registered_app(ctx).await?;
    let mut browser = Browser::new(&ctx.http, &url);
    browser.sign_in(&url, password(ctx)?).await?;
    let (_, token) = browser.open(&url).await?;
    let wrong = format!("{token}x");
    let tick = scope[0].ticked();
    let fields = [
        ("csrf", wrong.as_str()),
        ("action", "approve"),
        (tick.0, tick.1.as_str()),
    ];
    html(&browser.post_form(&url, &fields).await?, 403)?;
    Ok(())
}

async fn csrf_of_another_session(ctx: &Ctx) -> CheckResult {
    let (_, _, url) = registered_app(ctx).await?;
    let mut first = Browser::new(&ctx.http, &url);
    let (_, token) = first.open(&url).await?;
    let mut second = Browser::new(&ctx.http, &url);
    second.open(&url).await?;
    ensure!(
        second.session().is_some() && second.session() != first.session(),
        "two browsers were given the same session cookie"
    );
    let fields = [
        ("csrf", token.as_str()),
        ("action", "sign_in"),
        ("password", password(ctx)?),
    ];
    html(&second.post_form(&url, &fields).await?, 403)?;
    Ok(())
}

async fn approve_without_session(ctx: &Ctx) -> CheckResult {
    let (_, scope, url) = registered_app(ctx).await?;
    for action in ["approve", "deny"] {
        let mut browser = Browser::new(&ctx.http, &url);
        let (_, token) = browser.open(&url).await?;
        let tick = scope[0].ticked();
        let fields = [
            ("csrf", token.as_str()),
            ("action", action),
            (tick.0, tick.1.as_str()),
        ];
        let response = browser.post_form(&url, &fields).await?;
        let location = see_other(&response, &url).map_err(|error| format!("{action}: {error}"))?;
        ensure_eq!(
            location.as_str(),
            url.as_str(),
            format!("the Location of {action} without signing in")
        );
    }
    Ok(())
}

async fn page_shows_app(ctx: &Ctx) -> CheckResult {
    let (read, read_name) = scope_type(ctx, "conformance_shown_read").await?;
    let (write, write_name) = scope_type(ctx, "conformance_shown_write").await?;
    let scope = vec![
        ScopeItem::of("read", &read)?,
        ScopeItem::of("write", &write)?,
        ScopeItem::of("subscribe", &write)?,
    ];
    let app = NewApp::fresh();
    let body = app.body(ctx, &scope).await?;
    register(ctx, &app, &scope).await?;
    let url = consent_url(ctx, app.id())?;
    let mut browser = Browser::new(&ctx.http, &url);
    browser.sign_in(&url, password(ctx)?).await?;
    let (page, _) = browser.open(&url).await?;
    let h1 = page
        .tags("h1")
        .next()
        .ok_or("the consent page has no <h1>")?;
    let heading = page.text_inside(h1);
    ensure!(
        heading.contains(&app.name),
        "the <h1> says {heading:?}, not the app's name {:?}",
        app.name
    );
    let text = page.text();
    let description = str_at(&body, "/content/description")?;
    ensure!(
        text.contains(description),
        "the page does not show the description {description:?}"
    );
    let website = str_at(&body, "/content/uris/website")?;
    ensure!(
        page.find("a", &[("href", website)]).is_some(),
        "the page has no link to the website {website:?}"
    );
    for item in &scope {
        let value = item.checkbox_value();
        let checkbox = page
            .find(
                "input",
                &[
                    ("type", "checkbox"),
                    ("name", item.grant),
                    ("value", &value),
                ],
            )
            .ok_or_else(|| format!("no checkbox name={:?} value={value:?}", item.grant))?;
        ensure!(
            checkbox.has("checked"),
            "the {} checkbox for {value:?} is not checked",
            item.grant
        );
    }
    let checkboxes = page
        .tags("input")
        .filter(|tag| tag.attribute("type") == Some("checkbox"))
        .count();
    ensure_eq!(checkboxes, scope.len(), "checkboxes on the page");
    for name in [&read_name, &write_name] {
        ensure!(
            text.contains(name.as_str()),
            "no label names the type {name:?}"
        );
    }
    // Each type is told apart from another of its name: its author and fields.
    let identity = format!("by {}; fields title", ctx.entity());
    ensure!(
        text.contains(&identity),
        "the page does not say whose type each is and its fields ({identity:?})"
    );
    for (value, label) in [("approve", "Allow"), ("deny", "Deny")] {
        let button = page
            .find(
                "button",
                &[("type", "submit"), ("name", "action"), ("value", value)],
            )
            .ok_or_else(|| format!("no {value} button"))?;
        let shown = page.text_inside(button);
        ensure_eq!(shown.as_str(), label, format!("the {value} button's text"));
    }
    Ok(())
}

/// The App Authorization record `id`, read by the full app.
async fn authorization_record(ctx: &Ctx, id: &str) -> Result<Value, String> {
    let response = ctx.get_record(id).await?;
    let record = expect::json(&response, 200)
        .map_err(|error| format!("reading App Authorization {id}: {error}"))?;
    Ok(expect::at(&record, "/record")?.clone())
}

/// Fails unless `record` is the App Authorization of `app_id` granting
/// exactly `granted`.
async fn ensure_authorization(
    ctx: &Ctx,
    record: &Value,
    app_id: &str,
    granted: &[ScopeItem],
) -> CheckResult {
    let ty = ctx.builtin_type("app_authorization").await?;
    ensure_eq!(
        record.pointer("/type/record_id"),
        ty.pointer("/record_id"),
        "the authorization record's type"
    );
    ensure_eq!(
        record
            .pointer("/content/app/record_id")
            .and_then(Value::as_str),
        Some(app_id),
        "the authorization's app"
    );
    ensure_eq!(
        record
            .pointer("/content/app/entity")
            .and_then(Value::as_str),
        Some(ctx.entity()),
        "the authorization's app entity"
    );
    let grant = scope_items(expect::at(record, "/content/scope_grant")?)?;
    let mut expected = granted.to_vec();
    expected.sort();
    ensure_eq!(grant, expected, "the scope_grant");
    Ok(())
}

async fn approve_redirects(ctx: &Ctx) -> CheckResult {
    let (app, scope, url) = registered_app(ctx).await?;
    let mut browser = Browser::new(&ctx.http, &url);
    browser.sign_in(&url, password(ctx)?).await?;
    let ticks: Vec<(&str, String)> = scope.iter().map(ScopeItem::ticked).collect();
    let response = browser.decide(&url, "approve", &ticks).await?;
    let location = see_other(&response, &url)?;
    let id = authorization_id(&location)?;
    let record = authorization_record(ctx, &id).await?;
    ensure_authorization(ctx, &record, app.id(), &scope).await?;
    let key = app.key.authorized(&id);
    let signed = ctx.send(Call::get(ctx.records_url()?).signed(&key)).await?;
    expect::status(&signed, 200).map_err(|error| format!("the authorized app's GET: {error}"))
}

async fn grant_is_ticked(ctx: &Ctx) -> CheckResult {
    let (ticked_type, _) = scope_type(ctx, "conformance_ticked").await?;
    let (unticked_type, _) = scope_type(ctx, "conformance_unticked").await?;
    let ticked = ScopeItem::of("read", &ticked_type)?;
    let requested = vec![
        ticked.clone(),
        ScopeItem::of("read", &unticked_type)?,
        ScopeItem::of("write", &unticked_type)?,
        ScopeItem::of("subscribe", &unticked_type)?,
    ];
    let app = NewApp::fresh();
    let key = authorize(ctx, &app, &requested, std::slice::from_ref(&ticked)).await?;
    let record = authorization_record(ctx, &key.authorization_id).await?;
    ensure_authorization(ctx, &record, app.id(), std::slice::from_ref(&ticked)).await?;
    // PROTOCOL.md §10 "Scopes": the ticked type reads; the unticked one is
    // out of the grant, so a single GET is record/404-not-found and a create
    // is auth/403-forbidden.
    let readable = ctx
        .note(&ticked_type, json!({"title": "in the grant"}))
        .await?;
    let hidden = ctx
        .note(&unticked_type, json!({"title": "out of the grant"}))
        .await?;
    let get = |record: &Value| -> Result<Call<'_>, String> {
        Ok(Call::get(ctx.record_url(str_at(record, "/id")?)?).signed(&key))
    };
    expect::status(&ctx.send(get(&readable)?).await?, 200)
        .map_err(|error| format!("reading the ticked type: {error}"))?;
    expect::problem_response(&ctx.send(get(&hidden)?).await?, RECORD_NOT_FOUND)
        .map_err(|error| format!("reading the unticked type: {error}"))?;
    let body = json!({"type": unticked_type, "content": {"title": "not granted"}});
    let create = Call::post(ctx.records_url()?).json(&body).signed(&key);
    expect::problem_response(&ctx.send(create).await?, FORBIDDEN)
        .map_err(|error| format!("creating a record of the unticked type: {error}"))?;
    Ok(())
}

async fn unrequested_not_granted(ctx: &Ctx) -> CheckResult {
    let (requested_type, _) = scope_type(ctx, "conformance_requested").await?;
    let (other_type, _) = scope_type(ctx, "conformance_unrequested").await?;
    let requested = ScopeItem::of("read", &requested_type)?;
    let smuggled = [
        requested.clone(),
        ScopeItem::of("read", &other_type)?,
        ScopeItem::of("write", &requested_type)?,
    ];
    let app = NewApp::fresh();
    let key = authorize(ctx, &app, std::slice::from_ref(&requested), &smuggled).await?;
    let record = authorization_record(ctx, &key.authorization_id).await?;
    ensure_authorization(ctx, &record, app.id(), std::slice::from_ref(&requested)).await
}

/// Signs in on a fresh app's page and denies; returns the `Location`.
async fn deny(ctx: &Ctx, redirect: &str) -> Result<Url, String> {
    let (ty, _) = scope_type(ctx, "conformance_denied").await?;
    let scope = vec![ScopeItem::of("read", &ty)?];
    let app = NewApp::fresh();
    let mut body = app.body(ctx, &scope).await?;
    body["content"]["uris"]["redirect"] = json!(redirect);
    register_body(ctx, &app, &body).await?;
    let url = consent_url(ctx, app.id())?;
    let mut browser = Browser::new(&ctx.http, &url);
    browser.sign_in(&url, password(ctx)?).await?;
    let response = browser.decide(&url, "deny", &[]).await?;
    see_other(&response, &url)
}

async fn deny_redirects(ctx: &Ctx) -> CheckResult {
    let location = deny(ctx, REDIRECT).await?;
    ensure_eq!(
        location.as_str(),
        format!("{REDIRECT_BARE}?error=access_denied"),
        "the denial's Location"
    );
    Ok(())
}

async fn deny_with_ampersand(ctx: &Ctx) -> CheckResult {
    let location = deny(
        ctx,
        "http://127.0.0.1:9/callback?state=xyz{&authorization_id}",
    )
    .await?;
    ensure_eq!(
        location.as_str(),
        "http://127.0.0.1:9/callback?state=xyz&error=access_denied",
        "the denial's Location"
    );
    Ok(())
}

async fn unknown_app(ctx: &Ctx) -> CheckResult {
    let url = consent_url(ctx, &record_id())?;
    html(&Browser::new(&ctx.http, &url).get(&url).await?, 404).map(drop)
}

async fn unknown_user(ctx: &Ctx) -> CheckResult {
    let (app, _, _) = registered_app(ctx).await?;
    let user = format!("nobody{}", &record_id()[..8]);
    let url = ctx.url(&format!("/{user}/auth/{}", app.id()))?;
    html(&Browser::new(&ctx.http, &url).get(&url).await?, 404).map(drop)
}
