//! The `Authorization` header parser of both dialects on arbitrary text,
//! and the checks of a signed request that read only what it parsed.
//! Parsing must be deterministic and keep what it promises (a nonce of 1
//! to 10 characters, a timestamp, only signable headers, each once). The
//! signature input rebuilt from a parsed header must be exactly the lines
//! PROTOCOL.md §10 lists; a signed header missing from the request and the
//! signed body digest must be reported as documented. Finally the header,
//! written again in canonical form with a real Ed25519 signature over that
//! input, must parse to the same fields and verify, and must fail to verify
//! for another request target.

#![no_main]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer, SigningKey};
use folio_core::auth::{
    AppKey, AuthError, AuthorizationHeader, MAX_NONCE_LEN, Malformed, SignatureLayout,
    SignedRequest, check_body_digest, check_timestamp,
};
use folio_core::model::dialect::{Dialect, LAST_EVENT_ID, RANGE};
use folio_core::model::{RecordDate, RecordId};
use libfuzzer_sys::fuzz_target;

const CONTENT_SHA256: &str = "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for dialect in [Dialect::Svc, Dialect::Baq] {
        let first = dialect.parse_authorization(text);
        let second = dialect.parse_authorization(text);
        assert_eq!(
            format!("{first:?}"),
            format!("{second:?}"),
            "parsing is deterministic"
        );
        match first {
            Ok(header) => check_header(dialect, &header),
            Err(AuthError::Malformed(Malformed::Syntax { at })) => {
                assert!(at <= text.len(), "a syntax error points inside the header");
            }
            Err(AuthError::Malformed(_)) => {}
            Err(other) => panic!("parsing a header fails only as malformed: {other:?}"),
        }
    }
});

/// Every header a signature may cover, with a value.
fn request_headers(dialect: Dialect) -> Vec<(&'static str, String)> {
    let names = dialect.names();
    vec![
        (RANGE.lowercase, "bytes=0-1023".to_owned()),
        (
            names.client_id.lowercase,
            "8fbf7696f25b4628bde73f46f4631d3f".to_owned(),
        ),
        (names.content_sha256.lowercase, CONTENT_SHA256.to_owned()),
        (
            names.public_key.lowercase,
            "algorithm=\"ed25519\" public_key=\"QNt1o4ZitcXjBM2VYT3tNwWoIMhD5NCGXjgcdY72aqI=\""
                .to_owned(),
        ),
        (LAST_EVENT_ID.lowercase, "42".to_owned()),
        (
            names.credentials.lowercase,
            "algorithm=\"ed25519\" public_key=\"pkmz0PoSlU6qvK9fC52RVDbxGv6kpXi0ZP+f4f6Iakw=\""
                .to_owned(),
        ),
    ]
}

fn lookup<'a>(headers: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect()
}

/// The signature input as PROTOCOL.md §10 and `vectors/README.md` list its
/// lines, written here independently of core.
fn expected_input(
    dialect: Dialect,
    header: &AuthorizationHeader<'_>,
    authorization_id: Option<&RecordId>,
    request: &SignedRequest<'_>,
    headers: &[(&str, &str)],
) -> Vec<u8> {
    let mut lines = vec![dialect.names().request_prefix.to_owned()];
    if header.layout == SignatureLayout::WithAlgorithmLine {
        lines.push("ed25519".to_owned());
    }
    lines.push(header.ts_ms.to_string());
    lines.push(header.nonce.to_owned());
    lines.push(
        authorization_id
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    lines.push(request.method.to_owned());
    lines.push(request.path_and_query.to_owned());
    lines.push(request.host.to_owned());
    lines.push(request.port.to_string());
    for name in header.signed_headers() {
        let value = headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        lines.push(format!(
            "{name}={}",
            value.expect("every signable header is present")
        ));
    }
    let mut input = lines.join("\n").into_bytes();
    input.push(b'\n');
    input
}

fn check_header(dialect: Dialect, header: &AuthorizationHeader<'_>) {
    let nonce_chars = header.nonce.chars().count();
    assert!(
        (1..=MAX_NONCE_LEN).contains(&nonce_chars),
        "nonce length {nonce_chars}"
    );
    assert!(header.ts_ms >= 0, "a timestamp has no sign");
    let signable = dialect.signable_headers();
    let listed: Vec<&str> = header.signed_headers().collect();
    for (i, name) in listed.iter().enumerate() {
        assert!(
            signable.iter().any(|h| h.lowercase == *name),
            "{name} is signable"
        );
        assert!(!listed[..i].contains(name), "{name} is listed once");
        assert!(header.signs(name));
    }
    assert!(!header.signs("authorization"));

    let now = RecordDate::from_unix_millis(1_795_000_000_000).expect("a date");
    let fresh = header.ts_ms.abs_diff(now.unix_millis()) <= 300_000;
    assert_eq!(
        check_timestamp(header.ts_ms, now).is_ok(),
        fresh,
        "the clock window"
    );

    let owned = request_headers(dialect);
    let headers = lookup(&owned);
    let request = SignedRequest {
        method: "GET",
        path_and_query: "/api/alice/records?filter=%24%5B%27author%27%5D%3Dalice.example",
        host: "alice.example",
        port: 443,
    };
    let authorization: RecordId = "430aaa3623da40c9a548182b80453656".parse().expect("an id");
    for authorization_id in [None, Some(&authorization)] {
        let input = header
            .signature_input(authorization_id, &request, headers.as_slice())
            .expect("every signed header is in the request");
        let expected = expected_input(dialect, header, authorization_id, &request, &headers);
        assert_eq!(
            input, expected,
            "the signature input is the documented lines"
        );
    }
    let none: [(&str, &str); 0] = [];
    match (
        header.signature_input(None, &request, &none[..]),
        listed.first(),
    ) {
        (Ok(_), None) => {}
        (Err(AuthError::Malformed(Malformed::SignedHeaderAbsent(name))), Some(first)) => {
            assert_eq!(name, *first, "the first absent signed header is named");
        }
        (other, _) => panic!("a request without the signed headers: {other:?}"),
    }

    let content = dialect.names().content_sha256.lowercase;
    let signs_content = header.signs(content);
    let digest = header.signed_content_sha256(headers.as_slice());
    let mut claimed = [0u8; 32];
    for (i, byte) in claimed.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&CONTENT_SHA256[2 * i..2 * i + 2], 16).expect("hex");
    }
    assert_eq!(
        digest,
        Ok(signs_content.then_some(claimed)),
        "the signed body digest"
    );
    let bad = [(content, "not a digest")];
    let expected = if signs_content {
        Err(AuthError::InvalidSignature)
    } else {
        Ok(None)
    };
    assert_eq!(
        header.signed_content_sha256(&bad[..]),
        expected,
        "a malformed digest"
    );
    if let Ok(signed) = digest {
        assert_eq!(check_body_digest(signed, &claimed), Ok(()));
        let other = [0u8; 32];
        assert_eq!(check_body_digest(signed, &other).is_ok(), signed.is_none());
    }

    resign(
        dialect,
        header,
        &request,
        headers.as_slice(),
        &authorization,
    );
}

/// The header written again, canonically, with a real signature.
fn resign(
    dialect: Dialect,
    header: &AuthorizationHeader<'_>,
    request: &SignedRequest<'_>,
    headers: &[(&str, &str)],
    authorization: &RecordId,
) {
    let key = SigningKey::from_bytes(&[7; 32]);
    let app_key = AppKey::from_bytes(&key.verifying_key().to_bytes()).expect("a valid key");
    let input = header
        .signature_input(Some(authorization), request, headers)
        .expect("every signed header is in the request");
    let signature = STANDARD.encode(key.sign(&input).to_bytes());
    let algorithm = match header.layout {
        SignatureLayout::WithAlgorithmLine => "algorithm=\"ed25519\" ",
        SignatureLayout::WithoutAlgorithmLine => "",
    };
    let list: Vec<&str> = header.signed_headers().collect();
    let text = format!(
        "{} {algorithm}id=\"{}\" ts=\"{}\" nonce=\"{}\" headers=\"{}\" signature=\"{signature}\"",
        dialect.names().auth_scheme,
        header.app_id,
        header.ts_ms,
        header.nonce,
        list.join(","),
    );
    let again = dialect
        .parse_authorization(&text)
        .unwrap_or_else(|e| panic!("the canonical header {text:?} parses: {e:?}"));
    assert_eq!(again.app_id, header.app_id);
    assert_eq!(again.layout, header.layout);
    assert_eq!(again.ts_ms, header.ts_ms);
    assert_eq!(again.nonce, header.nonce);
    assert_eq!(again.signed_headers().collect::<Vec<_>>(), list);
    assert_eq!(
        again.verify(&app_key, Some(authorization), request, headers),
        Ok(()),
        "a header signed over its own input verifies: {text:?}"
    );
    let elsewhere = SignedRequest {
        path_and_query: "/api/alice/records?filter=%24%5B%27author%27%5D%3Dbob.example",
        ..*request
    };
    assert_eq!(
        again.verify(&app_key, Some(authorization), &elsewhere, headers),
        Err(AuthError::InvalidSignature),
        "the signature does not cover another target"
    );
    assert_eq!(
        again.verify(&app_key, None, request, headers),
        Err(AuthError::InvalidSignature),
        "the signature covers the authorization id"
    );
}
