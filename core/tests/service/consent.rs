//! The consent page through the service (PROTOCOL.md §10): pages, never
//! problem+json; the session cookie and CSRF token drawn from the request's
//! seed; the password checked within the sign-in rate; approval as one job.

use folio_core::model::RecordId;
use folio_core::service::Reply;
use folio_core::service::consent::session::SESSION_COOKIE;
use folio_core::service::consent::{PAGE_HEADERS, Session};
use folio_core::service::discovery::consent_path;
use folio_core::service::fresh::Fresh;

use crate::fake_host::{FakeHost, JobEnd, JobKind};
use crate::kit::{
    Body, Call, Config, Noted, OFF_POLICY_PASSWORD_HASH, PASSWORD, PEER, RateKey, SCHEDULER_NOW,
    SEED, Stream, USER, date, header, now, text,
};
use crate::{app_id, authorization_id, host_with_app, send, signed_get};

fn page() -> String {
    consent_path(USER, &app_id())
}

/// A session cookie and its form's CSRF token.
fn session(host: &FakeHost, signed_in: bool) -> (String, String) {
    let key = host.session_key();
    let session = match signed_in {
        true => Session::signed_in(USER, [3; 16], now()),
        false => Session::visitor(USER, [3; 16], now()),
    };
    (
        format!("{SESSION_COOKIE}={}", session.cookie_value(key)),
        session.csrf_token(key),
    )
}

/// Posts the consent form `form` with `cookie`.
fn post_form(host: &FakeHost, cookie: Option<&str>, form: &str) -> Reply<Stream> {
    let mut call = Call::post(page())
        .header("content-type", "application/x-www-form-urlencoded")
        .header("content-length", form.len().to_string());
    if let Some(cookie) = cookie {
        call = call.header("cookie", cookie);
    }
    send(host, &call, Body::of(form))
}

#[track_caller]
fn assert_page<S>(reply: &Reply<S>, status: u16) {
    assert_eq!(reply.status, status, "{}", text(reply));
    for (name, value) in PAGE_HEADERS {
        assert_eq!(header(reply, name), value, "{name}");
    }
    // A redirect's page is empty; every other is HTML, never problem+json.
    if status != 303 {
        assert!(
            text(reply).starts_with("<!doctype html>"),
            "{}",
            text(reply)
        );
    } else {
        assert_eq!(text(reply), "");
    }
}

#[test]
fn a_visit_without_a_session_shows_the_sign_in_page_with_a_session_drawn_from_the_seed() {
    let (host, _) = host_with_app(Config::default());
    let reply = send(&host, &Call::get(page()), Body::empty());
    assert_page(&reply, 200);
    let key = host.session_key();
    let visitor = Session::visitor(USER, Fresh::from_seed(SEED).bytes(), now());
    assert_eq!(header(&reply, "set-cookie"), visitor.set_cookie(key, now()));
    assert!(text(&reply).contains(&visitor.csrf_token(key)));
    assert!(text(&reply).contains("password"));
    assert_eq!(host.log.borrow().passwords_checked, 0);
}

#[test]
fn a_wrong_password_is_a_401_page_and_a_wrong_password_note() {
    let (host, _) = host_with_app(Config::default());
    let (cookie, csrf) = session(&host, false);
    let reply = post_form(
        &host,
        Some(&cookie),
        &format!("csrf={csrf}&action=sign_in&password=guess"),
    );
    assert_page(&reply, 401);
    assert!(text(&reply).contains("Wrong password"));
    assert_eq!(
        host.notes(),
        [Noted::WrongPassword {
            user: USER.into(),
            peer: Some(PEER)
        }]
    );
    assert_eq!(host.log.borrow().passwords_checked, 1);
    assert_eq!(
        host.counters.rate_keys(),
        [RateKey::SignIn(Some(PEER)), RateKey::AccountSignIn]
    );
    assert!(reply.header("set-cookie").is_none());
}

/// Wrong passwords for one account from ever new addresses (each within
/// its own rate) are refused past the account's budget: a 429 page with
/// a `Retry-After`, and no password is checked, the right one included
/// (issue 40).
#[test]
fn an_accounts_wrong_passwords_from_many_addresses_back_off() {
    use folio_core::service::ACCOUNT_SIGN_IN_ATTEMPTS;
    let (host, _) = host_with_app(Config::default());
    let (cookie, csrf) = session(&host, false);
    let attempt = |n: u8, password: &str| {
        let form = format!("csrf={csrf}&action=sign_in&password={password}");
        let call = Call::post(page())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("content-length", form.len().to_string())
            .header("cookie", &cookie)
            .from(Some(std::net::IpAddr::from([198, 51, 100, n])));
        send(&host, &call, Body::of(form.as_str()))
    };
    for n in 0..ACCOUNT_SIGN_IN_ATTEMPTS as u8 {
        assert_page(&attempt(n, "guess"), 401);
    }
    let checked = host.log.borrow().passwords_checked;
    let refused = attempt(200, "guess");
    assert_page(&refused, 429);
    assert_eq!(header(&refused, "retry-after"), "15");
    assert!(text(&refused).contains("Too many"));
    let right = PASSWORD.replace(' ', "+");
    assert_page(&attempt(201, &right), 429);
    assert_eq!(host.log.borrow().passwords_checked, checked, "none checked");
    let keys = host.counters.rate_keys();
    assert_eq!(keys.last(), Some(&RateKey::AccountSignIn));
}

#[test]
fn the_right_password_sees_the_page_again_with_a_signed_in_session_drawn_from_the_seed() {
    let (host, _) = host_with_app(Config::default());
    let (cookie, csrf) = session(&host, false);
    let form = format!(
        "csrf={csrf}&action=sign_in&password={}",
        PASSWORD.replace(' ', "+")
    );
    let reply = post_form(&host, Some(&cookie), &form);
    assert_page(&reply, 303);
    assert_eq!(header(&reply, "location"), page());
    let fresh = Fresh::from_seed(SEED);
    let _csrf_nonce: [u8; 16] = fresh.bytes();
    let signed_in = Session::signed_in(USER, fresh.bytes(), now());
    assert_eq!(
        header(&reply, "set-cookie"),
        signed_in.set_cookie(host.session_key(), now())
    );
    assert_eq!(host.notes(), [Noted::SignedIn { user: USER.into() }]);
}

#[test]
fn a_stored_hash_off_the_servers_policy_never_signs_in_and_argon2_does_not_run() {
    // As an archive from a server with other argon2 parameters brings it:
    // the right password, but its hash's parameters would set the cost.
    let (host, _) = host_with_app(Config::default());
    host.execute(&format!(
        "UPDATE users SET password_hash = '{OFF_POLICY_PASSWORD_HASH}'"
    ));
    let (cookie, csrf) = session(&host, false);
    let form = format!(
        "csrf={csrf}&action=sign_in&password={}",
        PASSWORD.replace(' ', "+")
    );
    let reply = post_form(&host, Some(&cookie), &form);
    assert_page(&reply, 401);
    assert_eq!(host.log.borrow().passwords_checked, 0, "argon2 never ran");
    let notes = host.notes();
    assert_eq!(
        notes[0],
        Noted::PasswordHashRefused { user: USER.into() },
        "{notes:?}"
    );
}

#[test]
fn sign_ins_over_the_rate_are_a_429_page_and_the_password_is_not_checked() {
    let mut config = Config::default();
    config.limits.sign_in_attempts_per_minute = Some(1);
    let (host, _) = host_with_app(config);
    let (cookie, csrf) = session(&host, false);
    let form = format!("csrf={csrf}&action=sign_in&password=guess");
    assert_page(&post_form(&host, Some(&cookie), &form), 401);
    let reply = post_form(&host, Some(&cookie), &form);
    assert_page(&reply, 429);
    assert_eq!(header(&reply, "retry-after"), "60");
    assert_eq!(host.log.borrow().passwords_checked, 1);
    assert_eq!(host.notes().len(), 1);
}

#[test]
fn a_sign_in_that_cannot_be_counted_is_a_503_page_not_too_many_attempts() {
    let (host, _) = host_with_app(Config::default());
    let (cookie, csrf) = session(&host, false);
    host.counters.unreachable.set(true);
    let form = format!("csrf={csrf}&action=sign_in&password=guess");
    let reply = post_form(&host, Some(&cookie), &form);
    assert_page(&reply, 503);
    assert_eq!(header(&reply, "retry-after"), "1");
    assert!(text(&reply).contains("Try again in a moment"));
    assert!(!text(&reply).contains("Too many"));
    assert_eq!(host.log.borrow().passwords_checked, 0);
}

#[test]
fn a_form_without_a_session_is_a_403_page() {
    let (host, _) = host_with_app(Config::default());
    let reply = post_form(&host, None, "csrf=00&action=sign_in&password=x");
    assert_page(&reply, 403);
    assert!(text(&reply).contains("This form has expired"));
    assert_eq!(host.log.borrow().passwords_checked, 0);
    assert!(host.counters.rates_counted().is_empty());
}

#[test]
fn an_approval_runs_one_job_at_the_schedulers_time_and_redirects_with_the_drawn_id() {
    let (host, app) = host_with_app(Config::default());
    let (cookie, csrf) = session(&host, true);
    let reply = post_form(&host, Some(&cookie), &format!("csrf={csrf}&action=approve"));
    assert_page(&reply, 303);
    let fresh = Fresh::from_seed(SEED);
    let _csrf_nonce: [u8; 16] = fresh.bytes();
    let granted: RecordId = fresh.record_id();
    assert_eq!(
        header(&reply, "location"),
        format!("https://notes.example/done?authorization_id={granted}")
    );
    let jobs = host.jobs();
    assert_eq!(jobs.len(), 1);
    // The new authorization, and the deletion of the one it replaces.
    assert_eq!(jobs[0].kind, JobKind::Writes(2));
    assert_eq!(jobs[0].now, date(SCHEDULER_NOW));
    assert_eq!(jobs[0].end, JobEnd::Stored);
    assert_eq!(
        host.notes(),
        [Noted::Authorized {
            user: USER.into(),
            app: app_id(),
            authorization: granted
        }]
    );
    // The app now signs under the new authorization; the old one is gone.
    let reply = send(
        &host,
        &Call::get(crate::RECORDS).signed(&app.authorized(granted), "n1", &[]),
        Body::empty(),
    );
    assert_eq!(reply.status, 200);
    assert_ne!(granted, authorization_id());
    let reply = signed_get(&host, crate::RECORDS, &app, "n2");
    assert_eq!(reply.status, 401);
}

#[test]
fn the_page_of_an_unknown_app_is_a_404_page() {
    let host = FakeHost::new();
    let reply = send(&host, &Call::get(page()), Body::empty());
    assert_page(&reply, 404);
    assert!(text(&reply).contains("No such app"));
}
