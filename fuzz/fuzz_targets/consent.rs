//! The consent page's inputs: its form body and the session cookie. The
//! input is a form body, then (after a NUL byte) the text around a cookie.
//!
//! Form: parsing is deterministic, keeps its limits, and a form that parses
//! written again (`application/x-www-form-urlencoded`) parses to the same
//! form. Deciding on it is forbidden without the session's CSRF token and
//! follows the action with it.
//!
//! The console's forms and records query: parsing is deterministic; a
//! list query written again reads back the same; the API parameters it
//! makes hold a filter the parser accepts and a list the API reads, or
//! the typed filter's problem splits exactly what was typed.
//!
//! Cookie: reading an arbitrary `Cookie` header is deterministic and finds
//! only a session that has not expired. A session made for any user name,
//! set among arbitrary other cookies, must read back as itself until it
//! expires, and not at all once its value is tampered with or under
//! another key; its CSRF token is its own.

#![no_main]

use folio_core::service::consent::session::{SESSION_COOKIE, SIGNED_IN_LIFETIME_MS, VISITOR_LIFETIME_MS};
use folio_core::service::consent::{
    ConsentForm, Decision, FormAction, MAX_FORM_BYTES, MAX_PASSWORD_BYTES, Session, SessionKey,
    decide, parse_form,
};
use folio_core::model::{RecordDate, RecordLink};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let form = parts.next().unwrap_or_default();
    let cookie = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let key = SessionKey::from_bytes([7; 32]);
    let now = RecordDate::from_unix_millis(1_795_000_000_000).expect("a date");
    check_form(form, &key, now);
    check_console_form(form);
    check_cookie(&cookie, &key, now);
});

fn check_console_form(body: &[u8]) {
    use folio_core::service::console::{Form, ListForm, check_new_password};
    assert_eq!(
        Form::parse(body),
        Form::parse(body),
        "parsing is deterministic"
    );
    let Ok(text) = std::str::from_utf8(body) else {
        return;
    };
    let list = ListForm::from_query(&Form::from_query(text));
    let written = list.query(None);
    let again = ListForm::from_query(&Form::from_query(&written));
    assert_eq!(
        again,
        ListForm {
            page_start: None,
            ..list.clone()
        },
        "{written:?} reads back"
    );
    match list.api_params() {
        Ok(params) => {
            if let Some((_, filter)) = params.iter().find(|(name, _)| name == "filter") {
                assert!(
                    folio_core::query::parse_filter(filter).is_ok(),
                    "the console made a filter the parser refuses: {filter:?}"
                );
            }
            let user = "alice.example".parse().expect("an entity");
            let _ = folio_core::query::ListQuery::from_params(&params, &user);
        }
        Err(problem) => assert_eq!(
            format!("{}{}", problem.before, problem.after),
            list.filter,
            "the problem splits the filter as typed"
        ),
    }
    let form = Form::from_query(text);
    let (new, again) = (
        form.get("new").unwrap_or_default(),
        form.get("again").unwrap_or_default(),
    );
    assert_eq!(
        check_new_password(new, again, 8),
        check_new_password(new, again, 8)
    );
}

fn check_form(body: &[u8], key: &SessionKey, now: RecordDate) {
    let parsed = parse_form(body);
    assert_eq!(parsed, parse_form(body), "parsing a form is deterministic");
    let Ok(form) = parsed else { return };
    assert!(body.len() <= MAX_FORM_BYTES);
    if let FormAction::SignIn { password } = &form.action {
        assert!(password.len() <= MAX_PASSWORD_BYTES);
    }

    let written = write_form(&form);
    if written.len() <= MAX_FORM_BYTES {
        assert_eq!(
            parse_form(written.as_bytes()),
            Ok(form.clone()),
            "the form written again as {written:?} reads back"
        );
    }

    for signed_in in [false, true] {
        let session = match signed_in {
            false => Session::visitor("me", [3; 16], now),
            true => Session::signed_in("me", [3; 16], now),
        };
        let token = session.csrf_token(key);
        let decision = decide(
            "me",
            Some(session.clone()),
            Some(Ok(form.clone())),
            key,
            [4; 16],
            now,
        );
        // Hex compares without regard to case.
        if !form.csrf.eq_ignore_ascii_case(&token) {
            assert_eq!(
                decision,
                Decision::Forbidden,
                "a form without the session's token"
            );
        }
        let with_token = ConsentForm {
            csrf: token,
            ..form.clone()
        };
        let decision = decide(
            "me",
            Some(session.clone()),
            Some(Ok(with_token)),
            key,
            [4; 16],
            now,
        );
        let expected = match (&form.action, signed_in) {
            (FormAction::SignIn { password }, _) => Decision::CheckPassword {
                session: session.clone(),
                password: password.clone(),
            },
            (_, false) => Decision::BackToPage,
            (FormAction::Approve { ticked }, true) => Decision::Approve {
                ticked: ticked.clone(),
            },
            (FormAction::Deny, true) => Decision::Deny,
        };
        assert_eq!(decision, expected, "the decision follows the action");
        let stranger = decide(
            "you",
            Some(session),
            Some(Ok(form.clone())),
            key,
            [4; 16],
            now,
        );
        assert_eq!(
            stranger,
            Decision::Forbidden,
            "a session of another user is none"
        );
    }
}

/// A form as the consent page's own HTML would post it.
fn write_form(form: &ConsentForm) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    out.append_pair("csrf", &form.csrf);
    let scope_value = |link: &RecordLink| format!("{} {}", link.entity, link.record_id);
    match &form.action {
        FormAction::SignIn { password } => {
            out.append_pair("action", "sign_in");
            out.append_pair("password", password);
        }
        FormAction::Approve { ticked } => {
            out.append_pair("action", "approve");
            for (name, links) in [
                ("read", &ticked.read),
                ("write", &ticked.write),
                ("subscribe", &ticked.subscribe),
            ] {
                for link in links {
                    out.append_pair(name, &scope_value(link));
                }
            }
        }
        FormAction::Deny => {
            out.append_pair("action", "deny");
        }
    }
    out.finish()
}

fn check_cookie(text: &str, key: &SessionKey, now: RecordDate) {
    let found = Session::from_cookie_header(text, key, now);
    assert_eq!(
        found,
        Session::from_cookie_header(text, key, now),
        "reading is deterministic"
    );
    if let Some(session) = &found {
        assert!(
            session.expires_ms > now.unix_millis(),
            "an expired session is none"
        );
    }

    // A session for a user named by the input, among the input's cookies.
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle -= 1;
    }
    let (before, after) = text.split_at(middle);
    let user = text;
    let nonce = {
        let mut nonce = [0u8; 16];
        for (i, b) in text.bytes().enumerate() {
            nonce[i % 16] ^= b;
        }
        nonce
    };
    for (session, lifetime) in [
        (Session::visitor(user, nonce, now), VISITOR_LIFETIME_MS),
        (Session::signed_in(user, nonce, now), SIGNED_IN_LIFETIME_MS),
    ] {
        let value = session.cookie_value(key);
        let header = format!("{before}; {SESSION_COOKIE}={value}; {after}");
        assert_eq!(
            Session::from_cookie_header(&header, key, now),
            Some(session.clone()),
            "a session reads back from {header:?}"
        );
        let token = session.csrf_token(key);
        assert!(session.check_csrf(key, &token), "the session's own token");
        let other = Session::visitor(user, [!nonce[0]; 16], now);
        assert!(
            !session.check_csrf(key, &other.csrf_token(key)),
            "another session's token"
        );

        let later = RecordDate::from_unix_millis(now.unix_millis() + lifetime).expect("a date");
        assert_eq!(
            Session::from_cookie_header(&header, key, later),
            None,
            "it expires"
        );
        let other_key = SessionKey::from_bytes([8; 32]);
        assert_eq!(
            Session::from_cookie_header(&header, &other_key, now),
            None,
            "another key"
        );
        // Change one character of the payload (before the MAC).
        let payload_len = value.rfind('.').expect("payload.mac");
        let at = (text.len() % payload_len.max(1)).min(payload_len.saturating_sub(1));
        let mut tampered = value.clone().into_bytes();
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).expect("ASCII");
        let header = format!("{SESSION_COOKIE}={tampered}");
        assert_eq!(
            Session::from_cookie_header(&header, key, now),
            None,
            "tampered: {tampered}"
        );
    }
}
