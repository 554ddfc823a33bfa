//! The console's Outbox page (issue 42, item 10): what waits for other
//! servers, for whom, why and until when, and "Retry now", which makes one
//! recipient's notifications due now (those given up too) under the
//! console's session and CSRF rules, and wakes the host's delivery.

use folio_core::service::Reply;
use folio_core::service::consent::Session;
use folio_core::service::consent::session::SESSION_COOKIE;
use folio_core::service::console::page::console_href;

use crate::fake_host::FakeHost;
use crate::kit::{Body, Call, Config, ENTITY, Stream, USER, header, now, text};
use crate::{host_with_app, send};

const RECORD: &str = "0123456789abcdef0123456789abcdef";

/// A signed-in session's cookie and its forms' CSRF token.
fn session(host: &FakeHost) -> (String, String) {
    let key = host.session_key();
    let session = Session::signed_in(USER, [3; 16], now());
    (
        format!("{SESSION_COOKIE}={}", session.cookie_value(key)),
        session.csrf_token(key),
    )
}

/// Bob's notification never tried, Carol's retried twice and due in an
/// hour, Dave's given up.
fn outbox(host: &FakeHost) -> i64 {
    let user = host.count("SELECT id FROM users");
    let now_ms = now().unix_millis();
    let hour = 3_600_000;
    for (n, recipient, attempts, due, error, failed_at) in [
        (1, "bob.example", 0, now_ms, "NULL", "NULL"),
        (
            2,
            "carol.example",
            2,
            now_ms + hour,
            "'carol.example: the server did not answer'",
            "NULL",
        ),
        (
            3,
            "dave.example",
            1,
            now_ms,
            "'dave.example: 409 version_conflict'",
            "1",
        ),
    ] {
        let hash = format!("{n:02x}").repeat(32);
        host.execute(&format!(
            "INSERT INTO outbox (user_id, recipient, record_id, version_hash, queued_at, due_at, \
             attempts, last_error, failed_at) VALUES ({user}, '{recipient}', '{RECORD}', '{hash}', \
             {}, {due}, {attempts}, {error}, {failed_at})",
            now_ms - hour
        ));
    }
    user
}

fn get(host: &FakeHost, cookie: &str) -> Reply<Stream> {
    let call = Call::get(console_href(USER, "/outbox")).header("cookie", cookie);
    send(host, &call, Body::empty())
}

fn retry_now(host: &FakeHost, cookie: &str, form: &str) -> Reply<Stream> {
    let call = Call::post(console_href(USER, "/outbox/send-now"))
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("content-length", form.len().to_string());
    send(host, &call, Body::of(form))
}

#[test]
fn the_outbox_page_shows_each_recipient_why_and_when_and_is_in_the_menu() {
    let (host, _) = host_with_app(Config::default());
    outbox(&host);
    let (cookie, _) = session(&host);
    let reply = get(&host, &cookie);
    assert_eq!(reply.status, 200, "{}", text(&reply));
    assert_eq!(header(&reply, "content-type"), "text/html; charset=utf-8");
    let page = text(&reply);
    assert!(
        page.contains(&format!(
            "href=\"{}\" aria-current=\"page\">Outbox</a>",
            console_href(USER, "/outbox")
        )),
        "{page}"
    );
    for recipient in ["bob.example", "carol.example", "dave.example"] {
        assert!(page.contains(&format!("For {recipient}</h2>")), "{page}");
    }
    assert!(page.contains("Not tried yet."), "{page}");
    assert!(
        page.contains("carol.example: the server did not answer"),
        "{page}"
    );
    assert!(
        page.contains("dave.example: 409 version_conflict"),
        "{page}"
    );
    assert!(page.contains(">retrying</td>"), "{page}");
    assert!(page.contains(">given up</td>"), "{page}");
    assert!(
        page.contains("2026-11-21T11:00:00"),
        "Carol's due time: {page}"
    );
    assert!(
        page.contains(&format!("/browse/{ENTITY}/{RECORD}\"")),
        "each record links to its page: {page}"
    );
    assert_eq!(page.matches(">Retry now</button>").count(), 3, "{page}");

    // Without a session: the sign-in page, nothing of the outbox.
    let reply = send(
        &host,
        &Call::get(console_href(USER, "/outbox")),
        Body::empty(),
    );
    assert!(!text(&reply).contains("carol.example"), "{}", text(&reply));

    // Every other page's menu links to it.
    let overview = send(
        &host,
        &Call::get(console_href(USER, "")).header("cookie", &cookie),
        Body::empty(),
    );
    assert!(
        text(&overview).contains(&format!(
            "href=\"{}\" aria-current=\"false\">Outbox</a>",
            console_href(USER, "/outbox")
        )),
        "{}",
        text(&overview)
    );
}

#[test]
fn retry_now_makes_one_recipients_notifications_due_now_under_the_csrf_rule() {
    let (host, _) = host_with_app(Config::default());
    outbox(&host);
    let (cookie, csrf) = session(&host);
    let now_ms = now().unix_millis();
    let carol = |column: &str| {
        host.count(&format!(
            "SELECT {column} FROM outbox WHERE recipient = 'carol.example'"
        ))
    };

    // A form without the session's token changes nothing.
    let reply = retry_now(&host, &cookie, "csrf=forged&recipient=carol.example");
    assert_eq!(reply.status, 403, "{}", text(&reply));
    assert_eq!(carol("due_at"), now_ms + 3_600_000);

    let reply = retry_now(
        &host,
        &cookie,
        &format!("csrf={csrf}&recipient=carol.example"),
    );
    assert_eq!(reply.status, 303, "{}", text(&reply));
    assert_eq!(
        header(&reply, "location"),
        console_href(USER, "/outbox?done=sent")
    );
    assert_eq!(carol("due_at"), now_ms, "due now");
    assert_eq!(
        carol("attempts"),
        2,
        "its backoff goes on if it fails again"
    );
    assert_eq!(
        host.count("SELECT failed_at FROM outbox WHERE recipient = 'dave.example'"),
        1,
        "another recipient's rows are left as they are"
    );

    // A notification given up starts over.
    let reply = retry_now(
        &host,
        &cookie,
        &format!("csrf={csrf}&recipient=dave.example"),
    );
    assert_eq!(reply.status, 303, "{}", text(&reply));
    assert_eq!(
        host.count(
            "SELECT COUNT(*) FROM outbox WHERE recipient = 'dave.example' \
             AND failed_at IS NULL AND attempts = 0"
        ),
        1
    );

    let reply = retry_now(
        &host,
        &cookie,
        &format!("csrf={csrf}&recipient=not%20an%20entity"),
    );
    assert_eq!(reply.status, 400, "{}", text(&reply));

    let reply = send(
        &host,
        &Call::get(console_href(USER, "/outbox?done=sent")).header("cookie", &cookie),
        Body::empty(),
    );
    let page = text(&reply);
    assert!(page.contains("role=\"status\">Sending now"), "{page}");
}
