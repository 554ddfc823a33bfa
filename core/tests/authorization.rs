//! Parsing and verifying the `Authorization` header and bearer tokens, with
//! requests signed here by a fixed test key.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey};
use folio_core::auth::{
    AppKey, AuthError, AuthorizationHeader, BearerToken, Malformed, SignedRequest,
    TIMESTAMP_WINDOW_MS, check_body_digest, check_timestamp,
};
use folio_core::model::dialect::Dialect;
use folio_core::model::{RecordDate, RecordId};

const APP_ID: &str = "00112233445566778899aabbccddeeff";
const AUTHORIZATION_ID: &str = "ffeeddccbbaa99887766554433221100";
const CLIENT_ID: &str = "8fbf7696f25b4628bde73f46f4631d3f";

fn signing_key() -> SigningKey {
    SigningKey::from_bytes(&[7; 32])
}

fn app_key() -> AppKey {
    AppKey::from_bytes(signing_key().verifying_key().as_bytes()).unwrap()
}

fn authorization_id() -> RecordId {
    AUTHORIZATION_ID.parse().unwrap()
}

fn request() -> SignedRequest<'static> {
    SignedRequest {
        method: "GET",
        path_and_query: "/api/alice/records?page_size=5",
        host: "alice.example",
        port: 443,
    }
}

const HEADERS: &[(&str, &str)] = &[("x-svc-client-id", CLIENT_ID), ("range", "bytes=0-9")];

/// The signature, in base64, of the spec-layout input for `request()` with
/// the two `HEADERS`, signed in the order `x-svc-client-id,range`.
fn signature() -> String {
    let input = format!(
        "svc.request\ned25519\n1710884802348\nabc123\n{AUTHORIZATION_ID}\nGET\n/api/alice/records?page_size=5\n\
         alice.example\n443\nx-svc-client-id={CLIENT_ID}\nrange=bytes=0-9\n"
    );
    STANDARD.encode(signing_key().sign(input.as_bytes()).to_bytes())
}

fn parse(value: &str) -> Result<AuthorizationHeader<'_>, AuthError> {
    Dialect::Svc.parse_authorization(value)
}

fn malformed(value: &str) -> Malformed {
    match parse(value) {
        Err(AuthError::Malformed(reason)) => reason,
        other => panic!("{value:?} should be malformed, got {other:?}"),
    }
}

/// The parameters of a valid header signed with `signature`.
fn valid_params(signature: &str) -> Vec<(&'static str, String)> {
    vec![
        ("algorithm", "ed25519".into()),
        ("ts", "1710884802348".into()),
        ("nonce", "abc123".into()),
        ("id", APP_ID.into()),
        ("headers", "x-svc-client-id,range".into()),
        ("signature", signature.into()),
    ]
}

fn header_from(params: &[(&'static str, String)]) -> String {
    let params: Vec<String> = params
        .iter()
        .map(|(name, value)| format!("{name}=\"{value}\""))
        .collect();
    format!("SVC {}", params.join(" "))
}

/// The valid header with one parameter's value replaced.
fn header_with(name: &str, value: &str) -> String {
    let mut params = valid_params(&signature());
    params
        .iter_mut()
        .find(|(known, _)| *known == name)
        .expect("a parameter of valid_params")
        .1 = value.into();
    header_from(&params)
}

fn verify(value: &str) -> Result<(), AuthError> {
    parse(value)?.verify(&app_key(), Some(&authorization_id()), &request(), HEADERS)
}

#[test]
fn a_well_formed_header_verifies_with_parameters_in_any_order() {
    let mut params = valid_params(&signature());
    assert_eq!(verify(&header_from(&params)), Ok(()));
    params.reverse();
    assert_eq!(verify(&header_from(&params)), Ok(()));
    params.swap(0, 3);
    assert_eq!(verify(&header_from(&params)), Ok(()));
}

#[test]
fn scheme_and_parameter_names_are_case_insensitive_and_commas_are_taken() {
    let params = valid_params(&signature());
    let value = header_from(&params)
        .replacen("SVC", "svc", 1)
        .replace("nonce=", "Nonce=");
    assert_eq!(verify(&value), Ok(()));
    let with_commas = header_from(&params).replace("\" ", "\", ");
    assert_eq!(verify(&with_commas), Ok(()));
    let with_tabs_and_spaces = header_from(&params)
        .replacen("SVC ", "SVC   ", 1)
        .replace("\" ", "\"\t ");
    assert_eq!(verify(&with_tabs_and_spaces), Ok(()));
}

#[test]
fn the_wrong_scheme_is_malformed() {
    let value = header_from(&valid_params(&signature()));
    assert_eq!(
        malformed(&value.replacen("SVC", "BAQ", 1)),
        Malformed::Scheme { expected: "SVC" }
    );
    assert_eq!(
        malformed(&value.replacen("SVC ", "Bearer ", 1)),
        Malformed::Scheme { expected: "SVC" }
    );
    assert_eq!(malformed("SVC"), Malformed::Scheme { expected: "SVC" });
    let baq = value.replacen("SVC", "BAQ", 1).replace("x-svc-", "x-baq-");
    assert!(Dialect::Baq.parse_authorization(&baq).is_ok());
    assert!(matches!(
        Dialect::Baq.parse_authorization(&value),
        Err(AuthError::Malformed(Malformed::Scheme { .. }))
    ));
}

#[test]
fn quoting_and_separators_are_checked() {
    let cases = [
        r#"SVC ts=1710884802348 nonce="a""#,
        r#"SVC ts="1710884802348"nonce="a""#,
        r#"SVC ts="1710884802348" nonce="a"#,
        r#"SVC ts="17108\"84802348""#,
        r#"SVC ts="1710884802348",, nonce="a""#,
        r#"SVC ts="1710884802348" nonce="a","#,
        r#"SVC , ts="1710884802348""#,
        r#"SVC ts = "1710884802348""#,
        r#"SVC ="1710884802348""#,
        "SVC ts=\"1710884802348\" nonce=\"a\u{7f}\"",
    ];
    for value in cases {
        assert!(
            matches!(malformed(value), Malformed::Syntax { .. }),
            "{value:?}"
        );
    }
}

#[test]
fn every_required_parameter_must_be_present() {
    for missing in ["id", "ts", "nonce", "headers", "signature"] {
        let params: Vec<_> = valid_params(&signature())
            .into_iter()
            .filter(|(n, _)| *n != missing)
            .collect();
        assert_eq!(
            malformed(&header_from(&params)),
            Malformed::MissingParameter(missing),
            "{missing}"
        );
    }
}

#[test]
fn a_repeated_parameter_is_malformed() {
    let mut params = valid_params(&signature());
    params.push(("nonce", "other".into()));
    assert_eq!(
        malformed(&header_from(&params)),
        Malformed::RepeatedParameter("nonce")
    );
    let value = header_from(&valid_params(&signature())) + " TS=\"1\"";
    assert_eq!(malformed(&value), Malformed::RepeatedParameter("ts"));
}

#[test]
fn unknown_parameters_are_ignored() {
    let value = header_from(&valid_params(&signature())) + " realm=\"folio\"";
    assert_eq!(verify(&value), Ok(()));
}

#[test]
fn the_nonce_has_one_to_ten_characters() {
    assert!(parse(&header_with("nonce", "0123456789")).is_ok());
    assert_eq!(
        malformed(&header_with("nonce", "0123456789a")),
        Malformed::NonceLength
    );
    assert_eq!(malformed(&header_with("nonce", "")), Malformed::NonceLength);
}

#[test]
fn only_ed25519_is_accepted_and_its_absence_selects_the_other_layout() {
    for algorithm in ["rsa-sha256", "ED25519", ""] {
        assert_eq!(
            malformed(&header_with("algorithm", algorithm)),
            Malformed::UnsupportedAlgorithm
        );
    }
    // Without the parameter the input has no algorithm line, so this
    // spec-layout signature no longer matches.
    let without: Vec<_> = valid_params(&signature())
        .into_iter()
        .filter(|(n, _)| *n != "algorithm")
        .collect();
    assert_eq!(
        verify(&header_from(&without)),
        Err(AuthError::InvalidSignature)
    );
}

#[test]
fn signed_header_names_are_checked() {
    let unsignable = |name: &str| Malformed::UnsignableHeader(name.into());
    let cases = [
        ("host", unsignable("host")),
        ("X-Svc-Client-Id", unsignable("X-Svc-Client-Id")),
        ("x-baq-client-id", unsignable("x-baq-client-id")),
        ("range, last-event-id", unsignable(" last-event-id")),
        ("range,", unsignable("")),
        ("range,range", Malformed::RepeatedHeader("range".into())),
    ];
    for (list, reason) in cases {
        assert_eq!(malformed(&header_with("headers", list)), reason, "{list:?}");
    }
    for list in [
        "",
        "x-svc-credentials,x-svc-publickey,x-svc-content-sha256,last-event-id",
    ] {
        assert!(parse(&header_with("headers", list)).is_ok(), "{list:?}");
    }
}

#[test]
fn a_signed_header_missing_from_the_request_is_malformed() {
    let value = header_from(&valid_params(&signature()));
    let header = parse(&value).unwrap();
    let result = header.verify(
        &app_key(),
        Some(&authorization_id()),
        &request(),
        &HEADERS[..1],
    );
    assert_eq!(
        result,
        Err(AuthError::Malformed(Malformed::SignedHeaderAbsent(
            "range".into()
        )))
    );
}

#[test]
fn parameter_values_are_validated() {
    let invalid = [
        ("ts", "-1"),
        ("ts", "01710884802348"),
        ("ts", "17108848023480000000000"),
        ("ts", "1.5"),
        ("ts", ""),
        ("id", "not-an-id"),
        ("id", "00112233445566778899AABBCCDDEEFF"),
        ("signature", "AAAA"),
        ("signature", "!!"),
    ];
    for (name, value) in invalid {
        assert_eq!(
            malformed(&header_with(name, value)),
            Malformed::InvalidParameter(name),
            "{name}={value:?}"
        );
    }
}

#[test]
fn any_change_to_the_request_breaks_the_signature() {
    let value = header_from(&valid_params(&signature()));
    let header = parse(&value).unwrap();
    let auth_id = authorization_id();
    let check = |request: SignedRequest<'_>, headers: &[(&str, &str)], auth: Option<&RecordId>| {
        header.verify(&app_key(), auth, &request, headers)
    };
    assert_eq!(check(request(), HEADERS, Some(&auth_id)), Ok(()));
    let tampered = [
        SignedRequest {
            method: "POST",
            ..request()
        },
        SignedRequest {
            port: 8443,
            ..request()
        },
        SignedRequest {
            host: "bob.example",
            ..request()
        },
        SignedRequest {
            path_and_query: "/api/alice/records?page_size=6",
            ..request()
        },
    ];
    for request in tampered {
        assert_eq!(
            check(request, HEADERS, Some(&auth_id)),
            Err(AuthError::InvalidSignature),
            "{request:?}"
        );
    }
    let other_range = [HEADERS[0], ("range", "bytes=0-10")];
    assert_eq!(
        check(request(), &other_range, Some(&auth_id)),
        Err(AuthError::InvalidSignature)
    );
    assert_eq!(
        check(request(), HEADERS, None),
        Err(AuthError::InvalidSignature)
    );
    let other_key =
        AppKey::from_bytes(SigningKey::from_bytes(&[8; 32]).verifying_key().as_bytes()).unwrap();
    assert!(
        header
            .verify(&other_key, Some(&auth_id), &request(), HEADERS)
            .is_err()
    );
}

#[test]
fn a_signed_content_hash_must_match_the_body() {
    let digest = [0xab; 32];
    let hex_digest = "ab".repeat(32);
    let mut params = valid_params(&signature());
    params[4].1 = "x-svc-content-sha256".into();
    let value = header_from(&params);
    let header = parse(&value).unwrap();
    let headers = [("x-svc-content-sha256", hex_digest.as_str())];
    let check = |header: &AuthorizationHeader, headers: &[(&str, &str)], body: &[u8; 32]| {
        check_body_digest(header.signed_content_sha256(headers)?, body)
    };
    assert_eq!(check(&header, headers.as_slice(), &digest), Ok(()));
    assert_eq!(
        check(&header, headers.as_slice(), &[0; 32]),
        Err(AuthError::InvalidSignature)
    );
    let upper = hex_digest.to_uppercase();
    let upper = [("x-svc-content-sha256", upper.as_str())];
    assert_eq!(check(&header, upper.as_slice(), &digest), Ok(()));

    let unsigned = header_from(&valid_params(&signature()));
    let unsigned = parse(&unsigned).unwrap();
    assert_eq!(check(&unsigned, headers.as_slice(), &[0; 32]), Ok(()));
}

#[test]
fn timestamps_must_be_within_five_minutes() {
    assert_eq!(TIMESTAMP_WINDOW_MS, 5 * 60 * 1000);
    let now = RecordDate::from_unix_millis(1_710_884_802_348).unwrap();
    let ms = now.unix_millis();
    assert_eq!(check_timestamp(ms - TIMESTAMP_WINDOW_MS, now), Ok(()));
    assert_eq!(check_timestamp(ms + TIMESTAMP_WINDOW_MS, now), Ok(()));
    assert_eq!(
        check_timestamp(ms - TIMESTAMP_WINDOW_MS - 1, now),
        Err(AuthError::StaleTimestamp)
    );
    assert_eq!(
        check_timestamp(ms + TIMESTAMP_WINDOW_MS + 1, now),
        Err(AuthError::StaleTimestamp)
    );
}

fn bearer_token(expires_at_ms: i64, signed_target: &str) -> String {
    let input = format!(
        "svc.url\ned25519\n{expires_at_ms}\n\n{AUTHORIZATION_ID}\nGET\n{signed_target}\nalice.example\n443\n"
    );
    let signature = STANDARD.encode(signing_key().sign(input.as_bytes()).to_bytes());
    URL_SAFE_NO_PAD.encode(format!("{APP_ID}\\{expires_at_ms}\\{signature}"))
}

#[test]
fn bearer_tokens_verify_with_or_without_the_query() {
    let expiry = 1_710_892_002_348;
    let blob = "/api/alice/records/alice.example/00112233445566778899aabbccddeeff/blobs/x/a.jpg";
    let verify_target = |target: &str| {
        let token = BearerToken::from_target(target)
            .expect("a token")
            .expect("parses");
        let request = SignedRequest {
            path_and_query: target,
            ..request()
        };
        token.verify(
            Dialect::Svc,
            &app_key(),
            Some(&authorization_id()),
            &request,
        )
    };
    let signed_with_query = format!("{blob}?size=small");
    let token = bearer_token(expiry, &signed_with_query);
    assert_eq!(
        verify_target(&format!("{blob}?size=small&bearer={token}")),
        Ok(())
    );
    assert_eq!(
        verify_target(&format!("{blob}?bearer={token}&size=small")),
        Ok(())
    );
    assert_eq!(
        verify_target(&format!("{blob}?size=large&bearer={token}")),
        Err(AuthError::InvalidSignature)
    );

    let path_only_token = bearer_token(expiry, blob);
    assert_eq!(
        verify_target(&format!("{blob}?bearer={path_only_token}")),
        Ok(())
    );
    assert_eq!(
        verify_target(&format!("{blob}?size=small&bearer={path_only_token}")),
        Ok(())
    );
}

#[test]
fn bearer_tokens_expire_and_may_not_last_over_ninety_days() {
    let now = RecordDate::from_unix_millis(1_700_000_000_000).unwrap();
    let token = |expiry: i64| BearerToken::parse(&bearer_token(expiry, "/x")).unwrap();
    let day = 24 * 3600 * 1000;
    assert_eq!(token(now.unix_millis() + day).check_expiry(now), Ok(()));
    assert_eq!(
        token(now.unix_millis() + 90 * day).check_expiry(now),
        Ok(())
    );
    assert_eq!(
        token(now.unix_millis() - 1).check_expiry(now),
        Err(AuthError::StaleTimestamp)
    );
    assert_eq!(
        token(now.unix_millis() + 90 * day + 1).check_expiry(now),
        Err(AuthError::StaleTimestamp)
    );
}

#[test]
fn malformed_bearer_tokens_are_rejected() {
    assert!(BearerToken::from_target("/x?size=1").is_none());
    let two_parts = URL_SAFE_NO_PAD.encode(format!("{APP_ID}\\1"));
    let four_parts = URL_SAFE_NO_PAD.encode(format!("{APP_ID}\\1\\AAAA\\x"));
    for token in [
        "%%%",
        "not base64!",
        two_parts.as_str(),
        four_parts.as_str(),
    ] {
        let result = BearerToken::from_target(&format!("/x?bearer={token}")).unwrap();
        assert!(matches!(result, Err(AuthError::Malformed(_))), "{token:?}");
    }
}
