//! The router on arbitrary request paths, and on every endpoint of a user
//! named by the input. Routing must be deterministic. Path values are
//! percent-decoded segment by segment, so a decoded value must still be
//! one segment: a user name never holds `/`, `?`, `#`, `%` or a control
//! character, and a blob's file name never holds `/`, `\` or a control
//! character (the types' own rules; an escaped `%2F` must not smuggle a
//! `/` past them). An endpoint's path, written again with its values
//! percent-encoded, must route to the same endpoint, and every endpoint of
//! any valid user name must be reachable at the path the server gives it.

#![no_main]

use folio_core::model::UserName;
use folio_core::service::route::{ConsolePage, ERROR_TYPES_PREFIX, Endpoint, Method, RecordPath, route};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but RFC 3986's unreserved characters, as the server encodes a
/// `{user}` segment (core's discovery does the same).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    let routed = route(path);
    assert_eq!(routed, route(path), "routing is deterministic");
    if let Ok(endpoint) = &routed {
        check_endpoint(endpoint);
        let again = write_path(endpoint);
        assert_eq!(
            route(&again).as_ref(),
            Ok(endpoint),
            "{path:?} written again as {again:?}"
        );
    }

    // Every endpoint of a user with this name.
    let Ok(user) = path.parse::<UserName>() else {
        return;
    };
    for endpoint in endpoints(&user) {
        let written = write_path(&endpoint);
        assert_eq!(
            route(&written).as_ref(),
            Ok(&endpoint),
            "the path {written:?} of user {user:?} routes elsewhere"
        );
    }
});

fn check_endpoint(endpoint: &Endpoint) {
    if let Some(user) = endpoint.user() {
        let name = user.as_str();
        assert!(!name.is_empty(), "an empty user name");
        assert!(
            !name.contains(['/', '?', '#', '%']) && !name.chars().any(char::is_control),
            "the user name {name:?} is more than one segment"
        );
    }
    if let Endpoint::RecordBlob { blob, .. } = endpoint {
        let name = blob.file_name.as_str();
        let chars = name.chars().count();
        assert!(
            (1..=255).contains(&chars),
            "a file name of {chars} characters"
        );
        assert!(
            !name.contains(['/', '\\']) && !name.chars().any(char::is_control),
            "the file name {name:?} is more than one segment"
        );
    }
    assert!(!endpoint.methods().is_empty());
    assert!(
        endpoint.check_method(Method::Options).is_ok(),
        "OPTIONS is answered everywhere"
    );
    let allow = endpoint.allow();
    for method in endpoint.methods() {
        assert!(endpoint.check_method(*method).is_ok());
        assert!(
            allow.split(", ").any(|m| m == method.as_str()),
            "{allow} lists {method:?}"
        );
    }
    if endpoint.methods().contains(&Method::Get) {
        assert!(
            endpoint.methods().contains(&Method::Head),
            "HEAD wherever GET"
        );
    }
}

fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// The path of a console page after `/{user}/console`.
fn console_rest(page: &ConsolePage) -> String {
    let record = |r: &RecordPath| format!("/browse/{}/{}", r.entity, r.record_id);
    match page {
        ConsolePage::Overview => String::new(),
        ConsolePage::SignIn => "/sign-in".into(),
        ConsolePage::SignOut => "/sign-out".into(),
        ConsolePage::Records => "/browse".into(),
        ConsolePage::NewRecord => "/browse/new".into(),
        ConsolePage::Record(r) => record(r),
        ConsolePage::EditRecord(r) => format!("{}/edit", record(r)),
        ConsolePage::DeleteRecord(r) => format!("{}/delete", record(r)),
        ConsolePage::Version(r, hash) => format!("{}/versions/{hash}", record(r)),
        ConsolePage::Blob(r, blob) => format!(
            "{}/blobs/{}/{}",
            record(r),
            blob.hash,
            segment(blob.file_name.as_str())
        ),
        ConsolePage::Types => "/types".into(),
        ConsolePage::Apps => "/apps".into(),
        ConsolePage::RevokeApp(id) => format!("/apps/{id}/revoke"),
        ConsolePage::ForgetApp(id) => format!("/apps/{id}/forget"),
        ConsolePage::Account => "/account".into(),
        ConsolePage::ChangePassword => "/account/password".into(),
        ConsolePage::EndSessions => "/account/sessions".into(),
        ConsolePage::Outbox => "/outbox".into(),
        ConsolePage::SendNow => "/outbox/send-now".into(),
        ConsolePage::Unknown => "/no-such-page".into(),
    }
}

/// The path of an endpoint, each value percent-encoded as one segment.
fn write_path(endpoint: &Endpoint) -> String {
    let record = |r: &RecordPath| format!("{}/{}", r.entity, r.record_id);
    match endpoint {
        Endpoint::Discovery => "/".to_owned(),
        Endpoint::Stylesheet => "/console.css".to_owned(),
        Endpoint::FindConsole => "/console".to_owned(),
        Endpoint::ErrorType { type_path } => format!("{ERROR_TYPES_PREFIX}{type_path}"),
        Endpoint::Consent { user, app } => format!("/{}/auth/{app}", segment(user.as_str())),
        Endpoint::Console { user, page } => {
            format!("/{}/console{}", segment(user.as_str()), console_rest(page))
        }
        Endpoint::Records { user } => format!("/api/{}/records", segment(user.as_str())),
        Endpoint::Record { user, record: r } => {
            format!("/api/{}/records/{}", segment(user.as_str()), record(r))
        }
        Endpoint::RecordVersions { user, record: r } => {
            format!(
                "/api/{}/records/{}/versions",
                segment(user.as_str()),
                record(r)
            )
        }
        Endpoint::RecordVersion {
            user,
            record: r,
            hash,
        } => {
            format!(
                "/api/{}/records/{}/versions/{hash}",
                segment(user.as_str()),
                record(r)
            )
        }
        Endpoint::RecordBlob {
            user,
            record: r,
            version,
            blob,
        } => {
            let version = version
                .map(|v| format!("/versions/{v}"))
                .unwrap_or_default();
            format!(
                "/api/{}/records/{}{version}/blobs/{}/{}",
                segment(user.as_str()),
                record(r),
                blob.hash,
                segment(blob.file_name.as_str())
            )
        }
        Endpoint::NewBlob { user } => format!("/api/{}/blobs", segment(user.as_str())),
        Endpoint::Events { user } => format!("/api/{}/events", segment(user.as_str())),
        Endpoint::NewNotification { user } => {
            format!("/api/{}/notifications", segment(user.as_str()))
        }
        Endpoint::ServerInfo { user } => format!("/api/{}/server", segment(user.as_str())),
    }
}

/// One endpoint of each kind for `user`.
fn endpoints(user: &UserName) -> Vec<Endpoint> {
    let id = "0123456789abcdef0123456789abcdef";
    let hash = "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99";
    let record = || RecordPath {
        entity: "alice.example".parse().expect("an entity"),
        record_id: id.parse().expect("an id"),
    };
    let blob = || folio_core::service::route::BlobPath {
        hash: hash.parse().expect("a hash"),
        file_name: "a b.txt".parse().expect("a file name"),
    };
    let user = || user.clone();
    vec![
        Endpoint::Consent {
            user: user(),
            app: id.parse().expect("an id"),
        },
        Endpoint::Console {
            user: user(),
            page: ConsolePage::Version(record(), hash.parse().expect("a hash")),
        },
        Endpoint::Console {
            user: user(),
            page: ConsolePage::Blob(record(), blob()),
        },
        Endpoint::Records { user: user() },
        Endpoint::Record {
            user: user(),
            record: record(),
        },
        Endpoint::RecordVersions {
            user: user(),
            record: record(),
        },
        Endpoint::RecordVersion {
            user: user(),
            record: record(),
            hash: hash.parse().expect("a hash"),
        },
        Endpoint::RecordBlob {
            user: user(),
            record: record(),
            version: None,
            blob: blob(),
        },
        Endpoint::RecordBlob {
            user: user(),
            record: record(),
            version: Some(hash.parse().expect("a hash")),
            blob: blob(),
        },
        Endpoint::NewBlob { user: user() },
        Endpoint::Events { user: user() },
        Endpoint::NewNotification { user: user() },
        Endpoint::ServerInfo { user: user() },
    ]
}
