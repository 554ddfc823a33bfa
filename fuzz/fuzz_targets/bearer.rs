//! `BearerToken::from_target` on arbitrary request targets. It must be
//! deterministic; it finds a token only in a query's `bearer=` parameter,
//! and a token it reads has an expiry with no sign. Then a real token for
//! the same app and expiry, signed over the target without its `bearer`
//! parameter (and over the path alone, as SDK clients sign), travels in
//! that target in both base64 alphabets: it must parse back to the same
//! app and expiry and verify, and must not verify for another path.

#![no_main]

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey};
use folio_core::auth::{AppKey, AuthError, BearerToken, SignedRequest};
use folio_core::model::dialect::Dialect;
use folio_core::model::RecordId;
use libfuzzer_sys::fuzz_target;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

fuzz_target!(|data: &[u8]| {
    let Ok(target) = std::str::from_utf8(data) else {
        return;
    };
    let first = BearerToken::from_target(target);
    let second = BearerToken::from_target(target);
    assert_eq!(
        format!("{first:?}"),
        format!("{second:?}"),
        "parsing is deterministic"
    );

    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let carries = target.contains('?') && query.split('&').any(|pair| pair.starts_with("bearer="));
    assert_eq!(
        first.is_some(),
        carries,
        "a token only in a `bearer=` parameter"
    );

    let (app_id, expires) = match first {
        Some(Ok(token)) => {
            assert!(token.expires_at_ms >= 0, "an expiry has no sign");
            (token.app_id, token.expires_at_ms)
        }
        Some(Err(AuthError::Malformed(_))) | None => (
            "4bae3e86828a44fc96b78cd0d5a4b7ae".parse().expect("an id"),
            1_795_000_000_000 + target.len() as i64,
        ),
        Some(Err(other)) => panic!("a token fails to parse only as malformed: {other:?}"),
    };

    // The other parameters, kept as they are, after the path.
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.is_empty() && pair.split('=').next() != Some("bearer"))
        .collect();
    let without_bearer = match kept.is_empty() {
        true => path.to_owned(),
        false => format!("{path}?{}", kept.join("&")),
    };
    for (dialect, signed) in [
        (Dialect::Svc, without_bearer.as_str()),
        (Dialect::Baq, path),
    ] {
        round_trip(dialect, app_id, expires, path, &kept, signed);
    }
});

fn round_trip(
    dialect: Dialect,
    app_id: RecordId,
    expires: i64,
    path: &str,
    kept: &[&str],
    signed: &str,
) {
    let key = SigningKey::from_bytes(&[9; 32]);
    let app_key = AppKey::from_bytes(&key.verifying_key().to_bytes()).expect("a valid key");
    let authorization: RecordId = "430aaa3623da40c9a548182b80453656".parse().expect("an id");
    let input = format!(
        "{}\ned25519\n{expires}\n\n{authorization}\nGET\n{signed}\nalice.example\n443\n",
        dialect.names().url_prefix
    );
    let signature = STANDARD.encode(key.sign(input.as_bytes()).to_bytes());
    let text = format!("{app_id}\\{expires}\\{signature}");
    let standard = STANDARD.encode(&text);
    // As written, and percent-encoded as a client's URL serializer would.
    let values = [
        standard.clone(),
        utf8_percent_encode(&standard, NON_ALPHANUMERIC).to_string(),
        URL_SAFE_NO_PAD.encode(&text),
    ];
    for value in values {
        let mut pairs = kept.to_vec();
        let parameter = format!("bearer={value}");
        pairs.push(&parameter);
        let target = format!("{path}?{}", pairs.join("&"));
        let parsed = match BearerToken::from_target(&target) {
            Some(Ok(parsed)) => parsed,
            other => panic!("the token in {target:?} parses: {other:?}"),
        };
        assert_eq!(parsed.app_id, app_id);
        assert_eq!(parsed.expires_at_ms, expires);
        assert_eq!(
            parsed.signature_input(dialect, Some(&authorization), &request(signed)),
            input.as_bytes(),
            "the documented bearer input"
        );
        assert_eq!(
            parsed.verify(dialect, &app_key, Some(&authorization), &request(&target)),
            Ok(()),
            "a token signed for {signed:?} verifies in {target:?}"
        );
        let elsewhere = format!("{path}/elsewhere?{parameter}");
        assert_eq!(
            parsed.verify(
                dialect,
                &app_key,
                Some(&authorization),
                &request(&elsewhere)
            ),
            Err(AuthError::InvalidSignature),
            "the token does not open another path"
        );
    }
}

/// A GET of `path_and_query` at `alice.example`, on the default port.
fn request(path_and_query: &str) -> SignedRequest<'_> {
    SignedRequest {
        method: "GET",
        path_and_query,
        host: "alice.example",
        port: 443,
    }
}
