//! What another server sends, on arbitrary input: a server's
//! `Authorization` header, a notification's body, a discovery answer's
//! `Link` header and an Entity record. Nothing may panic; a header that
//! parses, written again with a real signature over its request, must
//! verify, and must fail for another path; a notification that parses
//! names 1 to 100 versions, all of its signer's; a discovery link that is
//! followed is an absolute http(s) URL; an Entity record that is accepted
//! describes its entity and hashes to its hash.

#![no_main]

use folio_core::auth::{AppKey, ServerKey, SignedRequest};
use folio_core::model::dialect::Dialect;
use folio_core::service::federation::notify::MAX_NOTIFIED_VERSIONS;
use folio_core::service::federation::{
    Notification, PeerAnswer, RemoteEntity, entity::entity_record_location,
};
use folio_core::model::{Entity, Record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let alice: Entity = "alice.example".parse().expect("an entity");
    let text = String::from_utf8_lossy(data);

    for dialect in [Dialect::Svc, Dialect::Baq] {
        let is_server = dialect.is_server_authorization(&text);
        if let Ok(header) = dialect.parse_server_authorization(&text) {
            assert!(is_server, "a parsed server header names an entity");
            let request = SignedRequest {
                method: "POST",
                path_and_query: "/api/bob/notifications",
                host: "bob.example",
                port: 443,
            };
            let key = ServerKey::from_seed([3; 32]);
            let public = AppKey::from_base64(&key.public_base64()).expect("a key");
            let signed = key.authorization(
                dialect,
                &header.entity,
                header.ts_ms,
                header.nonce,
                &request,
                &[],
            );
            let again = dialect
                .parse_server_authorization(&signed)
                .expect("a canonical header parses");
            assert_eq!(again.entity, header.entity);
            again
                .verify(&[public], &request, &[][..])
                .expect("it verifies");
            let elsewhere = SignedRequest {
                path_and_query: "/api/carol/notifications",
                ..request
            };
            assert!(again.verify(&[public], &elsewhere, &[][..]).is_err());
        }
    }

    if let Ok(notification) = Notification::parse(data, &alice) {
        let count = notification.versions.len();
        assert!((1..=MAX_NOTIFIED_VERSIONS).contains(&count));
        assert!(notification.versions.iter().all(|v| v.entity == alice));
        let again = Notification::parse(&notification.to_json(), &alice).expect("its JSON parses");
        assert_eq!(again, notification);
    }

    let answer = PeerAnswer {
        status: 204,
        headers: vec![("link".to_owned(), text.to_string())],
        body: Vec::new(),
    };
    if let Ok(url) = entity_record_location(Dialect::Svc, "https://alice.example/", &answer) {
        assert!(
            url.starts_with("https://") || url.starts_with("http://"),
            "{url}"
        );
    }

    if let Ok(record) = serde_json::from_slice::<Record>(data)
        && let Ok(remote) = RemoteEntity::from_record(&alice, record)
    {
        assert_eq!(remote.record.author.entity, alice);
        assert_eq!(
            remote.record.hash_input().hash(),
            remote.record.version.hash
        );
    }
});
