//! Which server answers for an entity: a user of this server serves their
//! entity only while their own Entity record points here
//! (`docs/federation.md` §1); any other entity, a user's included whose
//! record points elsewhere, is asked of its own server, found by discovery.

use serde_json::json;

use crate::kit::{BASE_URL, Config};
use crate::{RECORDS, host_with_app, write};

/// A record link to `entity`'s record, written by alice's app: the write
/// resolves it from the entity's store. Answers the write's status and
/// the requests the fake was asked to send to other servers.
fn link_to(entity: &str, nonce: &str) -> (u16, Vec<String>) {
    let (host, app) = host_with_app(Config::default());
    // Another server's user, imported here with their Entity record (which
    // names their own server), and a user this server serves.
    host.add_user("imposter", "bob.example", "https://bob-server.example");
    host.add_user("carol", "carol.example", BASE_URL);
    let see = host.owner_post(json!({
        "type": folio_core::schema::builtin::BuiltinType::Type.link(),
        "content": {"name": "see", "schema": {"type": "object", "properties": {
            "content": {"type": "object", "properties": {"see": {"type": "record_link"}}}
        }}}
    }));
    host.clear_log();
    let body = json!({
        "type": crate::link(&see),
        "content": {"see": {"entity": entity, "record_id": "ab".repeat(16)}},
    });
    let reply = write(&host, "POST", RECORDS, &body, &app, nonce);
    (reply.status, host.peer_requests())
}

#[test]
fn a_local_user_whose_entity_record_points_elsewhere_does_not_shadow_the_entity() {
    let (_, asked) = link_to("bob.example", "n1");
    assert_eq!(
        asked.first().map(String::as_str),
        Some("https://bob.example/"),
        "bob.example is discovered, not read from the imposter's store: {asked:?}"
    );
}

#[test]
fn a_local_user_whose_entity_record_points_here_is_read_here() {
    let (status, asked) = link_to("carol.example", "n2");
    assert!(asked.is_empty(), "carol is served here: {asked:?}");
    assert_eq!(status, 400, "carol has no such record");
}
