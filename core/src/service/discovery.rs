//! Entity discovery and server description (PROTOCOL.md §12): the content
//! of a user's Entity record with its endpoint templates, the `Link` header
//! that leads a client from the entity's host to that record, and the
//! `server_info` answer.
//!
//! `base_url` is the data directory's setting (`--base-url`); a trailing `/`
//! is ignored. `user` is the `{user}` path segment, percent-encoded here as a
//! path segment (routing decodes it), so a URL built from any user name
//! routes back to that name.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde_json::{Value, json};

use crate::model::dialect::Dialect;
use crate::model::{Entity, Record, RecordId};
use crate::service::limits::Limits;

/// `software` of the `server_info` answer.
pub const SOFTWARE: &str = "folio";
/// `protocol` of the `server_info` answer.
pub const PROTOCOL_VERSION: &str = "1.0";
/// `servers[].version` of an Entity record: the version of the API its
/// endpoints speak.
pub const ENTITY_SERVER_VERSION: &str = "1.0.0";

/// Everything but RFC 3986 `unreserved` is encoded in a `{user}` segment.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `{base_url}/api/{user}`.
/// The path of a user's consent page for an app: the `auth` endpoint of
/// the Entity record, without the base URL (forms post to it).
pub fn consent_path(user: &str, app: &crate::model::RecordId) -> String {
    format!("/{}/auth/{app}", utf8_percent_encode(user, PATH_SEGMENT))
}

fn api_url(base_url: &str, user: &str) -> String {
    format!(
        "{}/api/{}",
        base_url.trim_end_matches('/'),
        utf8_percent_encode(user, PATH_SEGMENT)
    )
}

/// The body that creates a user's Entity record: public, of the built-in
/// Entity type, with [`entity_content`] and the user's name as its
/// profile name.
pub fn entity_record_body(
    entity: &Entity,
    user: &str,
    base_url: &str,
    signing_key: Option<&str>,
) -> Value {
    json!({
        "type": crate::schema::builtin::BuiltinType::Entity.link(),
        "permissions": {"read": "public"},
        "content": entity_content(entity, user, base_url, Some(user), signing_key),
    })
}

/// A new version of a user's Entity record that the server is due: see
/// [`entity_record_update`].
#[derive(Debug, Clone, PartialEq)]
pub struct EntityRecordUpdate {
    /// The update's body (`PUT`), on the stored version.
    pub body: Value,
    /// The top-level content fields it changes, by name
    /// (`servers` after a base-URL change; `signing_keys` when the record
    /// does not list the user's server key): what the server's log says.
    pub changed: Vec<String>,
}

/// The new version of a stored Entity record that a server at
/// `base_url`, signing with `signing_key`, is due (PROTOCOL.md §12: its
/// endpoints name another base URL; `docs/federation.md` §2: it lists
/// another key; issue 40: any server-kept field differs), keeping the
/// profile name; `None` when it is current, or is no live Entity record.
pub fn entity_record_update(
    record: &crate::model::Record,
    entity: &Entity,
    user: &str,
    base_url: &str,
    signing_key: Option<&str>,
) -> Option<EntityRecordUpdate> {
    let content = record.content()?;
    let name = content
        .as_map()
        .get("profile")
        .and_then(|profile| profile.get("name"))
        .and_then(Value::as_str);
    let wanted = entity_content(entity, user, base_url, name, signing_key);
    let stored = content.as_map();
    let changed: Vec<String> = wanted
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(field, value)| stored.get(field.as_str()) != Some(*value))
        .map(|(field, _)| field.clone())
        .chain(
            stored
                .keys()
                .filter(|field| wanted.get(field.as_str()).is_none())
                .cloned(),
        )
        .collect();
    (!changed.is_empty()).then(|| EntityRecordUpdate {
        body: json!({"content": wanted, "version": {"parent_hash": record.version.hash}}),
        changed,
    })
}

/// The content of `user`'s Entity record (built-in Entity type):
/// `{entity, previous_entities: [], signing_keys, profile, servers}`,
/// with one server whose `endpoints` are the URL templates of every
/// endpoint. `signing_keys` lists the user's server key (base64 Ed25519,
/// `docs/federation.md` §2) when there is one. The templates keep `{entity}`, `{record_id}`, `{version_hash}`,
/// `{blob_hash}` and `{file_name}` literally, for clients to fill in.
///
/// `profile` is `{"name": profile_name}`, or `{}` without a name. The Entity
/// type's schema wants a name of 1 to 100 characters in NFC: a host passes
/// only such a name (the write that stores the record checks it anyway).
///
/// The content is a pure function of its arguments: a host compares it with
/// the stored record's content to decide whether a new version is due (a
/// changed base URL, PROTOCOL.md §12).
pub fn entity_content(
    entity: &Entity,
    user: &str,
    base_url: &str,
    profile_name: Option<&str>,
    signing_key: Option<&str>,
) -> Value {
    let api = api_url(base_url, user);
    let records = format!("{api}/records");
    let record = format!("{records}/{{entity}}/{{record_id}}");
    let record_version = format!("{record}/versions/{{version_hash}}");
    let auth = format!(
        "{}/{}/auth/{{record_id}}",
        base_url.trim_end_matches('/'),
        utf8_percent_encode(user, PATH_SEGMENT)
    );
    let profile = match profile_name {
        Some(name) => json!({ "name": name }),
        None => json!({}),
    };
    json!({
        "entity": entity,
        "previous_entities": [],
        "signing_keys": signing_key
            .map(|key| vec![json!({"algorithm": "ed25519", "public_key": key})])
            .unwrap_or_default(),
        "profile": profile,
        "servers": [{
            "version": ENTITY_SERVER_VERSION,
            "preference": 0,
            "endpoints": {
                "auth": auth,
                "records": records,
                "record": record,
                "record_versions": format!("{record}/versions"),
                "record_version": record_version,
                "new_record": records,
                "record_blob": format!("{record}/blobs/{{blob_hash}}/{{file_name}}"),
                "record_version_blob": format!("{record_version}/blobs/{{blob_hash}}/{{file_name}}"),
                "new_blob": format!("{api}/blobs"),
                "events": format!("{api}/events"),
                "new_notification": format!("{api}/notifications"),
                "server_info": format!("{api}/server"),
            },
        }],
    })
}

/// Whether `entity` is a name of the server at `base_url`: its host, or a
/// subdomain of it. Only such an entity can be made a user here without
/// the operator saying so (`--allow-foreign-entity`): another name may be
/// some other server's entity, which a user here would shadow for this
/// server's other users (`docs/federation.md` §1).
pub fn entity_under_base_url(entity: &Entity, base_url: &str) -> bool {
    let Some(host) = url::Url::parse(base_url)
        .ok()
        .and_then(|url| url.host_str().map(|host| host.to_ascii_lowercase()))
    else {
        return false;
    };
    let entity = entity.as_str();
    entity == host
        || entity
            .strip_suffix(host.as_str())
            .is_some_and(|label| label.ends_with('.'))
}

/// Whether `record`, `user`'s own Entity record for `entity`, says that
/// this server (at `base_url`) serves the entity: a live Entity record of
/// the entity whose first server's `records` endpoint is this server's for
/// `user`. Only then does this server answer for the entity itself (local
/// delivery, local reads); a user whose record points elsewhere (an
/// archive of another server's entity, imported here) does not shadow the
/// entity's own server, which is found by discovery as any other's.
pub fn entity_served_here(record: &Record, entity: &Entity, user: &str, base_url: &str) -> bool {
    crate::service::federation::RemoteEntity::from_record(entity, record.clone()).is_ok_and(
        |served| served.endpoints.records == format!("{}/records", api_url(base_url, user)),
    )
}

/// The URL of a user's Entity record: the `record` template of
/// [`entity_content`], filled in with the entity and the record's id.
pub fn entity_record_url(
    base_url: &str,
    user: &str,
    entity: &Entity,
    record_id: &RecordId,
) -> String {
    format!("{}/records/{entity}/{record_id}", api_url(base_url, user))
}

/// The `Link` header of a discovery answer (`HEAD /` or `GET /` on a user's
/// entity host, 204): `<url>; rel="<relation>"`, with the dialect's entity
/// relation. `entity_record_url` comes from [`entity_record_url`], which
/// never holds `>`.
pub fn discovery_link(dialect: Dialect, entity_record_url: &str) -> String {
    format!(
        "<{entity_record_url}>; rel=\"{}\"",
        dialect.names().entity_relation
    )
}

/// The `server_info` answer: which software and protocol this is, and the
/// limits in force.
#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo<'a> {
    /// Always [`SOFTWARE`].
    pub software: &'static str,
    /// The server's release (the host's crate version).
    pub version: &'a str,
    /// Always [`PROTOCOL_VERSION`].
    pub protocol: &'static str,
    /// The limits this server enforces.
    pub limits: &'a Limits,
}

impl<'a> ServerInfo<'a> {
    /// The answer of a server of release `version` with these limits.
    pub fn new(version: &'a str, limits: &'a Limits) -> Self {
        Self {
            software: SOFTWARE,
            version,
            protocol: PROTOCOL_VERSION,
            limits,
        }
    }
}

/// The JSON body of `server_info`:
/// `{"software": "folio", "version", "protocol": "1.0", "limits"}`, every
/// limit listed, a switched-off one as `null` (see [`Limits`]).
pub fn server_info_json(version: &str, limits: &Limits) -> String {
    // Strings, integers and nulls: serializing cannot fail.
    serde_json::to_string(&ServerInfo::new(version, limits)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entity_under_the_base_url_is_its_host_or_a_subdomain() {
        let under = |entity: &str, base_url: &str| {
            entity_under_base_url(&entity.parse().unwrap(), base_url)
        };
        assert!(under("localhost", "https://localhost:8443"));
        assert!(under("you.localhost", "https://localhost:8443/"));
        assert!(under("alice.example", "https://alice.example"));
        assert!(under("alice.folio.example", "https://folio.example"));
        assert!(!under("bob.test", "https://a.test"));
        assert!(!under("evilfolio.example", "https://folio.example"));
        assert!(!under("folio.example", "https://alice.folio.example"));
        assert!(!under("alice.example", "not a url"));
    }

    #[test]
    fn user_segments_are_encoded_and_trailing_slashes_dropped() {
        let entity: Entity = "alice.example".parse().unwrap();
        let id: RecordId = "0123456789abcdef0123456789abcdef".parse().unwrap();
        assert_eq!(
            entity_record_url("https://h.example/", "a b/c", &entity, &id),
            "https://h.example/api/a%20b%2Fc/records/alice.example/0123456789abcdef0123456789abcdef"
        );
        assert_eq!(
            entity_record_url("https://h.example//", "a b/c", &entity, &id),
            entity_record_url("https://h.example", "a b/c", &entity, &id)
        );
    }

    #[test]
    fn the_link_names_the_dialects_relation() {
        assert_eq!(
            discovery_link(Dialect::Svc, "https://h.example/x"),
            "<https://h.example/x>; rel=\"https://folio.dev/rels/entity-record\""
        );
        assert_eq!(
            discovery_link(Dialect::Baq, "https://h.example/x"),
            "<https://h.example/x>; rel=\"https://baq.dev/rels/entity-record\""
        );
    }
}

/// The user an entity host serves (PROTOCOL.md §12): the one whose entity
/// the host names; else the only user, when exactly one exists; else none
/// (`request/404-not-found`).
pub fn user_for_host<'u, U>(
    host: &str,
    users: &'u [U],
    entity: impl Fn(&U) -> &Entity,
) -> Option<&'u U> {
    users
        .iter()
        .find(|user| entity(user).as_str() == host)
        .or(match users {
            [only] => Some(only),
            _ => None,
        })
}

#[cfg(test)]
mod user_for_host_tests {
    use super::*;

    #[test]
    fn the_host_names_the_user_else_the_only_one() {
        let alice: Entity = "alice.example".parse().expect("an entity");
        let bob: Entity = "bob.example".parse().expect("an entity");
        let both = [alice.clone(), bob.clone()];
        assert_eq!(user_for_host("bob.example", &both, |e| e), Some(&bob));
        assert_eq!(user_for_host("127.0.0.1", &both, |e| e), None);
        assert_eq!(user_for_host("127.0.0.1", &both[..1], |e| e), Some(&alice));
        assert_eq!(user_for_host("x", &[] as &[Entity], |e| e), None);
    }
}
