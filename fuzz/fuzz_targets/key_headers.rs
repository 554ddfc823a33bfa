//! The key a registration offers, read from `X-Svc-Credentials` or
//! `X-Svc-PublicKey` (or their `X-Baq-` names) with arbitrary values, raw
//! bytes included. The first byte says which headers the request carries
//! and in which dialect; the rest is their values, split at a NUL byte.
//! Reading must be deterministic: no key without either header, an error
//! with both, and a key read from the one that is there, whose text is a
//! valid Ed25519 key and was in the value. The answer's header value
//! (`key_header_value`) for that key must read back as the same key.

#![no_main]

use folio_core::auth::{AppKey, AuthError, HeaderLookup, Malformed};
use folio_core::model::dialect::Dialect;
use folio_core::auth::register::{key_header_value, offered_key};
use libfuzzer_sys::fuzz_target;

/// Request headers with raw byte values, looked up without regard to case.
struct Headers(Vec<(String, Vec<u8>)>);

impl HeaderLookup for Headers {
    fn header(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(lowercase_name))
            .map(|(_, value)| value.as_slice())
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let dialect = if flags & 4 == 0 {
        Dialect::Svc
    } else {
        Dialect::Baq
    };
    let names = dialect.names();
    let mut values = rest.splitn(2, |&b| b == 0);
    let credentials = values.next().unwrap_or_default().to_vec();
    let public_key = values.next().unwrap_or_default().to_vec();
    let name = |display: &str| match flags & 8 {
        0 => display.to_owned(),
        _ => display.to_ascii_uppercase(),
    };
    let mut headers = vec![(
        "x-svc-client-id".to_owned(),
        b"8fbf7696f25b4628bde73f46f4631d3f".to_vec(),
    )];
    if flags & 1 != 0 {
        headers.push((name(names.credentials.display), credentials.clone()));
    }
    if flags & 2 != 0 {
        headers.push((name(names.public_key.display), public_key.clone()));
    }
    let headers = Headers(headers);

    let first = offered_key(dialect, &headers);
    assert_eq!(
        first,
        offered_key(dialect, &headers),
        "reading is deterministic"
    );
    let carried = (flags & 1 != 0, flags & 2 != 0);
    let offered = match (first, carried) {
        (Ok(None), (false, false)) => return,
        (Err(AuthError::Malformed(Malformed::KeyHeaders)), (true, true)) => return,
        (Err(AuthError::Malformed(_)), (true, false) | (false, true)) => return,
        (Ok(Some(offered)), (true, false) | (false, true)) => offered,
        (other, carried) => panic!("with headers {carried:?}: {other:?}"),
    };
    let (expected_header, value) = match carried {
        (true, _) => (names.credentials, &credentials),
        _ => (names.public_key, &public_key),
    };
    assert_eq!(
        offered.header, expected_header,
        "the key is read from the header sent"
    );
    assert!(
        AppKey::from_base64(&offered.public_key).is_ok(),
        "the key is a valid key"
    );
    let value = std::str::from_utf8(value).expect("a key read from text");
    assert!(
        value.contains(&offered.public_key),
        "the key was in the value"
    );

    let answer = key_header_value(&offered.public_key);
    let again = Headers(vec![(
        expected_header.lowercase.to_owned(),
        answer.clone().into_bytes(),
    )]);
    assert_eq!(
        offered_key(dialect, &again),
        Ok(Some(offered)),
        "the answer's value {answer:?} reads back as the same key"
    );
});
