//! The owner's console `{base_url}/{user}/console` (issue 22): pages that
//! show nothing without a signed-in session of their own user, forms that
//! need the session's CSRF token, the page headers on every answer, and a
//! person's first errand: sign in, find a record, open it, cut an app off.
//! Driven as a browser without JavaScript would, with the session cookie
//! kept by hand.

use serde_json::json;
use url::Url;

use super::{Check, CheckResult, Needs, check};
use crate::apps::{NewApp, ScopeItem, authorize, consent_url, password, register, scope_type};
use crate::browser::{Browser, csrf, ensure_status, html, see_other, summary};
use crate::client::{Call, Response};
use crate::context::{Ctx, type_value};
use crate::expect::{self, UNKNOWN_APP, ensure, ensure_eq, str_at};
use crate::html::Document;

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "console/without-a-session-every-page-is-the-sign-in-form",
            without_session
        ),
        check!(
            "console/browser-get-of-root-is-a-page-naming-no-user",
            landing_page
        ),
        check!(
            "console/every-answer-carries-the-page-headers",
            page_headers,
            Needs::Password
        ),
        check!("console/missing-csrf-403", missing_csrf, Needs::Password),
        check!(
            "console/csrf-of-another-session-403",
            csrf_of_another_session,
            Needs::Password
        ),
        check!(
            "console/session-of-one-user-opens-no-other-users-console",
            other_users_console,
            Needs::OtherUser
        ),
        check!(
            "console/sign-in-list-open-and-revoke-an-app",
            sign_in_list_open_revoke,
            Needs::Password
        ),
        check!(
            "console/forgetting-an-app-deletes-its-records",
            forget_app,
            Needs::Password
        ),
        check!(
            "console/stale-edit-is-refused-and-stores-nothing",
            stale_edit,
            Needs::Password
        ),
        check!(
            "console/forbidden-edit-is-refused-in-the-owners-words",
            forbidden_edit_in_owners_words,
            Needs::Password
        ),
        check!(
            "console/filter-error-is-shown-at-its-position",
            filter_error,
            Needs::Password
        ),
        check!(
            "console/a-types-filter-builder-offers-its-links-and-tags-only",
            filter_builder,
            Needs::Password
        ),
        check!(
            "console/types-of-one-name-are-told-apart",
            types_told_apart,
            Needs::Password
        ),
        check!(
            "console/signed-out-session-is-dead-everywhere",
            signed_out_session_is_dead,
            Needs::Password
        ),
        check!(
            "console/outbox-page-and-retry-now",
            outbox_page,
            Needs::Password
        ),
    ]
}

fn console_url(ctx: &Ctx, user: &str, rest: &str) -> Result<Url, String> {
    ctx.url(&format!("/{user}/console{rest}"))
}

pub(super) fn own(ctx: &Ctx, rest: &str) -> Result<Url, String> {
    console_url(ctx, &ctx.target.user, rest)
}

/// A browser signed in to the user's console.
pub(super) async fn signed_in<'a>(ctx: &'a Ctx) -> Result<Browser<'a>, String> {
    let overview = own(ctx, "")?;
    let mut browser = Browser::new(&ctx.http, &overview);
    let page = html(&browser.get(&overview).await?, 200)?;
    let token = csrf(&page)?;
    let action = own(ctx, "/sign-in")?;
    let response = browser
        .post_form(&action, &[("csrf", &token), ("password", password(ctx)?)])
        .await?;
    let location = see_other(&response, &action).map_err(|e| format!("signing in: {e}"))?;
    ensure_eq!(location, overview, "where signing in leads");
    ensure!(
        browser.session().is_some(),
        "signing in set no session cookie"
    );
    Ok(browser)
}

/// The sign-in form: a password field and no record data.
fn ensure_sign_in(page: &Document, what: &str) -> CheckResult {
    ensure!(
        page.find("input", &[("name", "password"), ("type", "password")])
            .is_some(),
        "{what}: expected the sign-in form, got: {}",
        page.text().chars().take(300).collect::<String>()
    );
    Ok(())
}

fn ensure_headers(response: &Response, what: &str) -> CheckResult {
    let csp = response
        .header("content-security-policy")
        .unwrap_or_default();
    ensure!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{what}: Content-Security-Policy {csp:?}"
    );
    ensure!(
        !csp.contains("script-src") && !csp.contains("unsafe-inline"),
        "{what}: the policy allows scripts or inline code: {csp:?}"
    );
    ensure_eq!(
        response.header("x-frame-options"),
        Some("DENY"),
        "{what}: X-Frame-Options"
    );
    ensure_eq!(
        response.header("referrer-policy"),
        Some("no-referrer"),
        "{what}: Referrer-Policy"
    );
    Ok(())
}

/// Without a session, each console page (of a record that exists) is the
/// sign-in form, and holds nothing of the record.
async fn without_session(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let secret = format!("console secret {}", crate::client::record_id());
    let note = ctx.note(&ty, json!({"title": secret})).await?;
    let id = str_at(&note, "/id")?;
    let hash = str_at(&note, "/version/hash")?;
    let entity = ctx.entity();
    let record = format!("/browse/{entity}/{id}");
    for rest in [
        String::new(),
        "/browse".into(),
        format!("/browse?type={}", type_value(&ty)?),
        record.clone(),
        format!("{record}/edit"),
        format!("{record}/versions/{hash}"),
        "/types".into(),
        "/apps".into(),
        "/account".into(),
    ] {
        let url = own(ctx, &rest)?;
        let response = ctx.send(Call::get(url.clone())).await?;
        let page = html(&response, 200).map_err(|e| format!("GET {url}: {e}"))?;
        ensure_sign_in(&page, &format!("GET {url}"))?;
        let body = String::from_utf8_lossy(&response.body);
        ensure!(
            !body.contains(&secret) && !body.contains(id),
            "GET {url} without a session shows the record"
        );
        ensure_headers(&response, &format!("GET {url}"))?;
    }
    // A form posted without a session changes nothing and shows nothing.
    let delete = own(ctx, &format!("{record}/delete"))?;
    let response = Browser::new(&ctx.http, &delete)
        .post_form(
            &delete,
            &[("csrf", "00"), ("action", "delete"), ("parent_hash", hash)],
        )
        .await?;
    html(&response, 403).map_err(|e| format!("POST {delete} without a session: {e}"))?;
    let still = expect::json(&ctx.get_record(id).await?, 200)?;
    ensure_eq!(
        str_at(&still, "/record/version/hash")?,
        hash,
        "the record after a deletion posted without a session"
    );
    Ok(())
}

/// A browser's `GET /` is a styled page about the server that names no
/// user, whose form leads to a console by the user name typed; an API
/// client's `HEAD /` is discovery as before.
async fn landing_page(ctx: &Ctx) -> CheckResult {
    let root = ctx.url("/")?;
    let response = ctx
        .send(Call::get(root.clone()).header("accept", "text/html,application/xhtml+xml,*/*;q=0.8"))
        .await?;
    let page = html(&response, 200)?;
    let text = page.text();
    ensure!(
        text.contains("console"),
        "the page does not say where the console is: {text}"
    );
    ensure!(
        !text.contains(&format!("/{}/", ctx.target.user)),
        "the page names the user {:?}",
        ctx.target.user
    );
    // Styled by a stylesheet of its own origin, which the policy allows.
    let sheet = page
        .find("link", &[("rel", "stylesheet")])
        .and_then(|link| link.attribute("href"))
        .ok_or("the page links no stylesheet")?;
    let sheet = root
        .join(sheet)
        .map_err(|e| format!("stylesheet {sheet:?}: {e}"))?;
    ensure!(
        sheet.origin() == root.origin(),
        "the stylesheet is at {sheet}"
    );
    let css = ctx.send(Call::get(sheet.clone())).await?;
    ensure_status(&css, 200)?;
    let content_type = css.header("content-type").unwrap_or_default();
    ensure!(
        content_type.starts_with("text/css"),
        "{sheet} is {content_type:?}"
    );
    // Its form: a GET of the user name, answered with that user's console.
    let form = page
        .find("form", &[("method", "get")])
        .ok_or("the page has no form")?;
    let action = root
        .join(form.attribute("action").unwrap_or_default())
        .map_err(|e| format!("the form's action: {e}"))?;
    ensure!(
        page.find("input", &[("name", "user")]).is_some(),
        "the form asks for no user name"
    );
    let mut to_console = action.clone();
    to_console
        .query_pairs_mut()
        .append_pair("user", &ctx.target.user);
    let console = see_other(&ctx.send(Call::get(to_console.clone())).await?, &to_console)?;
    ensure!(
        console.path() == format!("/{}/console", ctx.target.user),
        "the form leads to {console}"
    );
    let mut nameless = action;
    nameless.query_pairs_mut().append_pair("user", " ");
    let back = see_other(&ctx.send(Call::get(nameless.clone())).await?, &nameless)?;
    ensure!(back.path() == "/", "a form without a name leads to {back}");
    let head = ctx.send(Call::new(reqwest::Method::HEAD, root)).await?;
    ensure!(
        head.status != 200
            || head
                .header("content-type")
                .is_none_or(|t| !t.starts_with("text/html")),
        "HEAD / answers the page, not discovery"
    );
    Ok(())
}

/// Every console answer, signed in or not, page or redirect, carries the
/// policy: no script, no framing, no referrer.
async fn page_headers(ctx: &Ctx) -> CheckResult {
    let mut browser = signed_in(ctx).await?;
    for rest in [
        "",
        "/browse",
        "/types",
        "/apps",
        "/account",
        "/browse/new",
        "/no-such-page",
    ] {
        let url = own(ctx, rest)?;
        let response = browser.get(&url).await?;
        ensure_headers(&response, &format!("GET {url}"))?;
    }
    let url = own(ctx, "/browse?filter=%28")?;
    ensure_headers(&browser.get(&url).await?, &format!("GET {url}"))?;
    let sign_out = own(ctx, "/sign-out")?;
    let response = browser
        .post_form(&sign_out, &[("csrf", "nonsense")])
        .await?;
    ensure_headers(&response, "a refused form")?;
    Ok(())
}

/// Signing out ends the session on the server (issue 40): a copy of its
/// cookie, taken before, opens neither the console nor the consent page
/// afterwards: each is the sign-in form.
async fn signed_out_session_is_dead(ctx: &Ctx) -> CheckResult {
    let app = NewApp::fresh();
    register(ctx, &app, &[]).await?;
    let consent = consent_url(ctx, app.id())?;
    let mut browser = signed_in(ctx).await?;
    let overview = own(ctx, "")?;
    let (page, token) = browser.open(&overview).await?;
    ensure!(
        page.find("input", &[("name", "password")]).is_none(),
        "signed in, the overview asks for a password"
    );
    let copied = browser.session().map(str::to_owned);
    let sign_out = own(ctx, "/sign-out")?;
    let response = browser.post_form(&sign_out, &[("csrf", &token)]).await?;
    see_other(&response, &sign_out).map_err(|e| format!("signing out: {e}"))?;
    ensure!(
        browser.session().is_none(),
        "signing out left the browser a session cookie"
    );
    let mut thief = Browser::new(&ctx.http, &overview);
    for url in [overview, own(ctx, "/account")?, consent] {
        thief.use_session(copied.clone());
        let response = thief.get(&url).await?;
        let page = html(&response, 200)
            .map_err(|e| format!("GET {url} with the signed-out session's cookie: {e}"))?;
        ensure_sign_in(
            &page,
            &format!("GET {url} with a copy of a signed-out session's cookie"),
        )?;
    }
    Ok(())
}

/// An app authorized to read a fresh type: its key.
async fn authorized_app(ctx: &Ctx) -> Result<(NewApp, crate::signer::AppKey), String> {
    let (ty, _) = scope_type(ctx, "conformance_console").await?;
    let scope = [ScopeItem::of("read", &ty)?];
    let app = NewApp::fresh();
    let key = authorize(ctx, &app, &scope, &scope).await?;
    Ok((app, key))
}

async fn probe(ctx: &Ctx, key: &crate::signer::AppKey) -> Result<Response, String> {
    ctx.send(Call::get(ctx.records_url()?).signed(key)).await
}

async fn missing_csrf(ctx: &Ctx) -> CheckResult {
    let (app, key) = authorized_app(ctx).await?;
    let mut browser = signed_in(ctx).await?;
    let revoke = own(ctx, &format!("/apps/{}/revoke", app.id()))?;
    for fields in [vec![], vec![("csrf", "")], vec![("csrf", "0123abcd")]] {
        let response = browser.post_form(&revoke, &fields).await?;
        html(&response, 403).map_err(|e| format!("revoking with {fields:?}: {e}"))?;
    }
    expect::status(&probe(ctx, &key).await?, 200)
        .map_err(|e| format!("the app after refused revocations: {e}"))
}

async fn csrf_of_another_session(ctx: &Ctx) -> CheckResult {
    let (app, key) = authorized_app(ctx).await?;
    let mut mine = signed_in(ctx).await?;
    let theirs = signed_in(ctx).await?;
    // The other session's token, read from its own page.
    let apps = own(ctx, "/apps")?;
    let mut other = theirs;
    let foreign = csrf(&html(&other.get(&apps).await?, 200)?)?;
    let revoke = own(ctx, &format!("/apps/{}/revoke", app.id()))?;
    let response = mine.post_form(&revoke, &[("csrf", &foreign)]).await?;
    html(&response, 403).map_err(|e| format!("revoking with another session's token: {e}"))?;
    expect::status(&probe(ctx, &key).await?, 200)
        .map_err(|e| format!("the app after a refused revocation: {e}"))
}

/// A session of the user is no session on another user's console: its
/// pages are the sign-in form, and its token posts nothing there.
async fn other_users_console(ctx: &Ctx) -> CheckResult {
    let Some(other) = ctx.target.other_user.clone() else {
        return Err("the target has no other_user".into());
    };
    if ctx.target.password.is_none() {
        return Err("the target has no \"password\"".into());
    }
    let mut browser = signed_in(ctx).await?;
    let token = csrf(&html(&browser.get(&own(ctx, "/apps")?).await?, 200)?)?;
    let session = browser.session().map(str::to_owned);
    for rest in ["", "/browse", "/apps", "/account"] {
        let url = console_url(ctx, &other, rest)?;
        browser.use_session(session.clone());
        let page = html(&browser.get(&url).await?, 200)
            .map_err(|e| format!("GET {url} with {}'s session: {e}", ctx.target.user))?;
        ensure_sign_in(&page, &format!("GET {url} with another user's session"))?;
    }
    browser.use_session(session);
    let url = console_url(ctx, &other, "/account/sessions")?;
    let response = browser.post_form(&url, &[("csrf", &token)]).await?;
    html(&response, 403).map_err(|e| format!("POST {url} with another user's session: {e}"))?;
    Ok(())
}

/// The errand the console is for: sign in, list a type's records with a
/// filter, open one, and revoke an app, whose next request is refused.
async fn sign_in_list_open_revoke(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let label = format!("console-{}", crate::client::record_id());
    let title = format!("A note labelled {label}");
    let note = ctx
        .note(&ty, json!({"title": title, "label": label}))
        .await?;
    ctx.note(&ty, json!({"title": "another", "label": "another"}))
        .await?;
    let id = str_at(&note, "/id")?;
    let (app, key) = authorized_app(ctx).await?;
    expect::status(&probe(ctx, &key).await?, 200)?;
    let mut browser = signed_in(ctx).await?;

    let overview = own(ctx, "")?;
    let page = html(&browser.get(&overview).await?, 200)?;
    ensure!(
        page.text().contains("Overview"),
        "the overview: {}",
        page.text().chars().take(300).collect::<String>()
    );

    let filter = format!("$['content']['label']=\"{label}\"");
    let mut list = own(ctx, "/browse")?;
    list.query_pairs_mut()
        .append_pair("type", &type_value(&ty)?)
        .append_pair("filter", &filter);
    let response = browser.get(&list).await?;
    let page = html(&response, 200).map_err(|e| format!("GET {list}: {e}"))?;
    let record_path = format!("/{}/console/browse/{}/{id}", ctx.target.user, ctx.entity());
    let links: Vec<&str> = page
        .tags("a")
        .filter_map(|a| a.attribute("href"))
        .filter(|href| href.contains("/console/browse/") && !href.ends_with("/new"))
        .collect();
    ensure!(
        links == vec![record_path.as_str()],
        "GET {list}: the records the filtered list links: expected [{record_path}], got {links:?}: {}",
        summary(&response)
    );

    let record = ctx.url(&record_path)?;
    let response = browser.get(&record).await?;
    let page = html(&response, 200).map_err(|e| format!("GET {record}: {e}"))?;
    ensure!(
        page.text().contains(&title),
        "the record page does not show its content: {}",
        summary(&response)
    );
    ensure!(
        page.text().contains(str_at(&note, "/version/hash")?),
        "the record page does not list its version"
    );

    let apps = own(ctx, "/apps")?;
    let page = html(&browser.get(&apps).await?, 200)?;
    let token = csrf(&page)?;
    let revoke = own(ctx, &format!("/apps/{}/revoke", app.id()))?;
    let response = browser.post_form(&revoke, &[("csrf", &token)]).await?;
    let location = see_other(&response, &revoke).map_err(|e| format!("revoking: {e}"))?;
    let page = html(&browser.get(&location).await?, 200)?;
    ensure!(
        page.text().contains("revoked"),
        "the apps page after revoking does not say so: {}",
        page.text().chars().take(300).collect::<String>()
    );
    expect::problem_response(&probe(ctx, &key).await?, UNKNOWN_APP)
        .map_err(|e| format!("the app's first request after the console revoked it: {e}"))?;
    Ok(())
}

/// Forgetting an app deletes its App record, its authorizations and its
/// Credentials record in one go: the app is refused, and its App record
/// is a tombstone.
async fn forget_app(ctx: &Ctx) -> CheckResult {
    let (app, key) = authorized_app(ctx).await?;
    let mut browser = signed_in(ctx).await?;
    let token = csrf(&html(&browser.get(&own(ctx, "/apps")?).await?, 200)?)?;
    let forget = own(ctx, &format!("/apps/{}/forget", app.id()))?;
    let response = browser.post_form(&forget, &[("csrf", &token)]).await?;
    see_other(&response, &forget).map_err(|e| format!("forgetting: {e}"))?;
    expect::problem_response(&probe(ctx, &key).await?, UNKNOWN_APP)
        .map_err(|e| format!("the app's first request after it was forgotten: {e}"))?;
    let record = expect::json(&ctx.get_record(app.id()).await?, 200)?;
    ensure!(
        record["record"]["no_content"].is_object(),
        "the forgotten app's App record is not a tombstone: {}",
        expect::brief(&record)
    );
    Ok(())
}

/// An edit the write transition forbids (the owner's own Entity record
/// pointing their notifications elsewhere: the server keeps `servers`) is
/// refused on the edit form, which keeps what was typed, in words for the
/// owner: never the `auth/403-forbidden` title, which speaks to an app.
async fn forbidden_edit_in_owners_words(ctx: &Ctx) -> CheckResult {
    let profile = super::discovery::entity_record(ctx).await?;
    let id = str_at(&profile, "/id")?;
    let hash = str_at(&profile, "/version/hash")?;
    let mut browser = signed_in(ctx).await?;
    let edit = own(ctx, &format!("/browse/{}/{id}/edit", ctx.entity()))?;
    let page = html(&browser.get(&edit).await?, 200)?;
    let token = csrf(&page)?;
    let mut content = profile["content"].clone();
    content["servers"][0]["endpoints"]["new_notification"] =
        json!("https://attacker.example/notifications");
    let typed = json!({"permissions": profile["permissions"], "content": content}).to_string();
    let response = browser
        .post_form(
            &edit,
            &[("csrf", &token), ("parent_hash", hash), ("json", &typed)],
        )
        .await?;
    let page = html(&response, 403).map_err(|e| format!("the forbidden edit: {e}"))?;
    let alert = page
        .find_any(&[("role", "alert")])
        .ok_or("the refused edit says nothing")?;
    let said = page.text_inside(alert);
    ensure!(
        said.contains("The server keeps `servers` of your profile"),
        "the refusal does not say why, for the owner: {said}"
    );
    ensure!(
        !said.contains("app"),
        "the refusal speaks of an app: {said}"
    );
    ensure!(
        page.find("textarea", &[("name", "json")])
            .is_some_and(|area| page.text_inside(area).contains("attacker.example")),
        "the form lost what was typed"
    );
    let after = super::discovery::entity_record(ctx).await?;
    ensure_eq!(
        str_at(&after, "/version/hash")?,
        hash,
        "the Entity record after the refused edit"
    );
    Ok(())
}

/// An edit made from a version that is no longer the latest is refused
/// (409, saying so) and the record keeps the newer version.
async fn stale_edit(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let note = ctx.note(&ty, json!({"title": "first"})).await?;
    let id = str_at(&note, "/id")?;
    let mut browser = signed_in(ctx).await?;
    let edit = own(ctx, &format!("/browse/{}/{id}/edit", ctx.entity()))?;
    let page = html(&browser.get(&edit).await?, 200)?;
    let token = csrf(&page)?;
    let parent = page
        .find("input", &[("name", "parent_hash")])
        .and_then(|input| input.attribute("value"))
        .ok_or("the edit form has no parent_hash")?
        .to_owned();
    ensure_eq!(
        parent.as_str(),
        str_at(&note, "/version/hash")?,
        "the edit form's parent"
    );
    // Meanwhile, an app changes the record.
    let update = json!({"content": {"title": "changed meanwhile"}});
    let changed = expect::json(
        &ctx.send(
            Call::put(ctx.record_url(id)?)
                .json(&update)
                .signed(&ctx.full),
        )
        .await?,
        200,
    )?;
    let typed = json!({"content": {"title": "the console's edit"}}).to_string();
    let response = browser
        .post_form(
            &edit,
            &[("csrf", &token), ("parent_hash", &parent), ("json", &typed)],
        )
        .await?;
    let page = html(&response, 409).map_err(|e| format!("the stale edit: {e}"))?;
    ensure!(
        page.text()
            .contains("changed this record while you edited it"),
        "the refusal does not say why: {}",
        summary(&response)
    );
    let now = expect::json(&ctx.get_record(id).await?, 200)?;
    ensure_eq!(
        str_at(&now, "/record/version/hash")?,
        str_at(&changed, "/record/version/hash")?,
        "the record after the stale edit"
    );
    // From the latest version, the same edit goes through.
    let latest = str_at(&changed, "/record/version/hash")?;
    let response = browser
        .post_form(
            &edit,
            &[("csrf", &token), ("parent_hash", latest), ("json", &typed)],
        )
        .await?;
    see_other(&response, &edit).map_err(|e| format!("the edit from the latest version: {e}"))?;
    let now = expect::json(&ctx.get_record(id).await?, 200)?;
    ensure_eq!(
        str_at(&now, "/record/content/title")?,
        "the console's edit",
        "the record after the console's edit"
    );
    ensure_eq!(
        str_at(&now, "/record/version/parent_hash")?,
        latest,
        "the console's version's parent"
    );
    Ok(())
}

/// A filter the grammar refuses is shown with the place it fails at.
async fn filter_error(ctx: &Ctx) -> CheckResult {
    let mut browser = signed_in(ctx).await?;
    let mut url = own(ctx, "/browse")?;
    url.query_pairs_mut()
        .append_pair("filter", "$['author']=a.example,(");
    let response = browser.get(&url).await?;
    let page = html(&response, 400).map_err(|e| format!("GET {url}: {e}"))?;
    ensure!(
        page.find("mark", &[]).is_some(),
        "the error does not mark its position: {}",
        summary(&response)
    );
    ensure!(
        page.find("input", &[("name", "filter"), ("aria-invalid", "true")])
            .is_some(),
        "the filter field is not marked invalid"
    );
    Ok(())
}

/// With a type chosen, the records page offers a condition on each of its
/// links and tags (and on no text field), writes the one picked into the
/// filter as the grammar wants it (a tag quoted), and refuses a typed
/// condition on a text field at its position, saying what the field is.
async fn filter_builder(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let labelled = ctx
        .note(&ty, json!({"title": "pinned thing", "label": "pinned"}))
        .await?;
    let type_link = type_value(&ty)?;
    let mut browser = signed_in(ctx).await?;
    let mut url = own(ctx, "/browse")?;
    url.query_pairs_mut().append_pair("type", &type_link);
    let page = html(&browser.get(&url).await?, 200)?;
    let offered: Vec<&str> = page
        .tags("option")
        .filter_map(|option| option.attribute("value"))
        .filter(|value| value.contains("$['content']"))
        .collect();
    for expected in ["tag:$['content']['label']", "link:$['content']['person']"] {
        ensure!(
            offered.contains(&expected),
            "{expected} is not offered: {offered:?}"
        );
    }
    ensure!(
        !offered.iter().any(|value| value.contains("['title']")),
        "a text field is offered: {offered:?}"
    );

    // A table with a column per field of the type, and its tags to sort by.
    ensure!(
        page.find("table", &[("id", "type-table")]).is_some(),
        "no table of the type's fields"
    );
    let headers: Vec<String> = page.tags("th").map(|th| page.text_inside(th)).collect();
    for field in ["title", "label"] {
        ensure!(
            headers.iter().any(|h| h == field),
            "no column {field}: {headers:?}"
        );
    }
    let label_sort = "$['content']['label']+asc";
    ensure!(
        page.find("option", &[("value", label_sort)]).is_some(),
        "no sort by the label tag"
    );
    let mut sorted = url.clone();
    sorted.query_pairs_mut().append_pair("sort", label_sort);
    let response = browser.get(&sorted).await?;
    let page_sorted = html(&response, 200).map_err(|e| format!("GET {sorted}: {e}"))?;
    ensure!(
        page_sorted.text().contains("pinned thing"),
        "the sorted table does not show the note's title: {}",
        summary(&response)
    );

    let mut picked = url.clone();
    picked
        .query_pairs_mut()
        .append_pair("add_path", "tag:$['content']['label']")
        .append_pair("add_value", "pinned");
    let response = browser.get(&picked).await?;
    let page = html(&response, 200)?;
    let written = page
        .find("input", &[("name", "filter")])
        .and_then(|input| input.attribute("value"))
        .unwrap_or_default();
    ensure_eq!(
        written,
        "$['content']['label']=\"pinned\"",
        "the filter written"
    );
    let id = str_at(&labelled, "/id")?;
    ensure!(
        page.find("a", &[("title", id)]).is_some(),
        "the labelled record is not listed: {}",
        summary(&response)
    );

    let mut typed = url.clone();
    typed
        .query_pairs_mut()
        .append_pair("filter", "$['content']['title']=\"pinned thing\"");
    let response = browser.get(&typed).await?;
    let page = html(&response, 400).map_err(|e| format!("GET {typed}: {e}"))?;
    let marked = page
        .find("mark", &[])
        .map(|mark| page.text_inside(mark))
        .unwrap_or_default();
    ensure!(
        marked.starts_with("$['content']['title']"),
        "the refused condition is not marked: {marked:?}"
    );
    ensure!(
        page.text().contains("is a string in type"),
        "the page does not say what the field is: {}",
        summary(&response)
    );
    Ok(())
}

/// Two types of one name (an app and the owner each added `note`) are told
/// apart in the records page's type list by author, id and fields.
async fn types_told_apart(ctx: &Ctx) -> CheckResult {
    let name = format!("twin_{}", &crate::client::record_id()[..8]);
    let mut ids = Vec::new();
    for field in ["title", "body"] {
        let id = crate::client::record_id();
        let schema = json!({"type": "object", "properties": {"content": {
            "type": "object", "properties": {field: {"type": "string"}}}}});
        ctx.create(ctx.type_body(&id, &name, schema).await?).await?;
        ids.push((id, field));
    }
    let mut browser = signed_in(ctx).await?;
    let page = html(&browser.get(&own(ctx, "/browse")?).await?, 200)?;
    let labels: Vec<String> = page
        .tags("option")
        .map(|option| page.text_inside(option))
        .filter(|label| label.starts_with(&name))
        .collect();
    ensure_eq!(labels.len(), 2, format!("options for {name}: {labels:?}"));
    for (id, field) in &ids {
        let expected = format!(
            "{name} (by {}; fields {field}; {}…)",
            ctx.entity(),
            &id[..8]
        );
        ensure!(
            labels.contains(&expected),
            "no option reads {expected:?}: {labels:?}"
        );
    }
    Ok(())
}

/// The Outbox page (issue 42, item 10): in the menu, with the page
/// headers; its "Retry now" form takes the session's token (403 without
/// it) and with it leads back to the page, which says that sending
/// started. The recipient named has nothing waiting: nothing changes.
async fn outbox_page(ctx: &Ctx) -> CheckResult {
    let mut browser = signed_in(ctx).await?;
    let outbox = own(ctx, "/outbox")?;
    let response = browser.get(&outbox).await?;
    ensure_headers(&response, "the outbox page")?;
    let page = html(&response, 200)?;
    ensure!(
        page.find("a", &[("href", outbox.path()), ("aria-current", "page")])
            .is_some(),
        "the menu has no current Outbox entry: {}",
        page.text().chars().take(300).collect::<String>()
    );
    let token = csrf(&page)?;
    let send_now = own(ctx, "/outbox/send-now")?;
    let recipient = ("recipient", "nobody.example");
    let response = browser
        .post_form(&send_now, &[("csrf", "0123abcd"), recipient])
        .await?;
    html(&response, 403).map_err(|e| format!("retry now with a wrong token: {e}"))?;
    let response = browser
        .post_form(&send_now, &[("csrf", &token), recipient])
        .await?;
    let location = see_other(&response, &send_now).map_err(|e| format!("retry now: {e}"))?;
    ensure_eq!(location.path(), outbox.path(), "where retry now leads");
    let page = html(&browser.get(&location).await?, 200)?;
    ensure!(
        page.text().contains("Sending now"),
        "the outbox page after retry now does not say so: {}",
        page.text().chars().take(300).collect::<String>()
    );
    Ok(())
}
