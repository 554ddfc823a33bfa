//! The user's server identity (issue 40, finding 1): the server-kept
//! fields of the user's own Entity record. An app with every right, the
//! strongest grant there is, may rename the user (`profile`) and nothing
//! else; only the server itself (`WriteRequest::by_server`) creates that
//! record or changes who the entity is, which keys sign for it and where
//! its server is.

use folio_core::auth::{ServerKey, SignedRequest};
use folio_core::model::Record;
use folio_core::model::dialect::Dialect;
use folio_core::schema::builtin::BuiltinType;
use folio_core::write::{RecordKey, WriteRequest};
use serde_json::{Value, json};

use crate::fake_host::FakeHost;
use crate::kit::{Body, Call, Config, ENTITY, Signer, json, problem};
use crate::{RECORDS, host_with_app, record_path, send, write};

/// A key an app would like the user's server to trust.
const APP_KEY: &str = "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=";

fn entity_record(host: &FakeHost) -> Record {
    host.store.entity_record.clone().expect("an Entity record")
}

/// The PUT body that makes `edit` to the Entity record's content.
fn edited(record: &Record, edit: impl FnOnce(&mut Value)) -> Value {
    let mut content = record.content().expect("content").as_value().clone();
    edit(&mut content);
    json!({"content": content, "version": {"parent_hash": record.version.hash}})
}

/// The latest version of the user's Entity record, as the app reads it.
fn latest(host: &FakeHost, app: &Signer, record: &Record) -> Value {
    let call = Call::get(record_path(ENTITY, &record.id)).signed(app, "read", &[]);
    json(&send(host, &call, Body::empty()))["record"].clone()
}

/// An app with every right PUTs `body` on the user's Entity record: 403
/// naming `field`, and nothing stored.
fn refused(field: &str, body: impl FnOnce(&Record) -> Value) {
    let (host, app) = host_with_app(Config::default());
    let record = entity_record(&host);
    let target = record_path(ENTITY, &record.id);
    let reply = write(&host, "PUT", &target, &body(&record), &app, "n1");
    let problem = problem(&reply, "auth/403-forbidden", "forbidden");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(&format!("`{field}`")), "{field}: {detail}");
    assert_eq!(
        latest(&host, &app, &record)["version"]["hash"],
        json!(record.version.hash),
        "{field}: nothing is stored"
    );
}

#[test]
fn an_app_cannot_add_its_key_to_the_users_signing_keys() {
    refused("signing_keys", |record| {
        edited(record, |content| {
            content["signing_keys"]
                .as_array_mut()
                .expect("a list")
                .push(json!({"algorithm": "ed25519", "public_key": APP_KEY}));
        })
    });
    refused("signing_keys", |record| {
        edited(record, |content| {
            content["signing_keys"] = json!([{"algorithm": "ed25519", "public_key": APP_KEY}]);
        })
    });
}

#[test]
fn an_app_cannot_move_the_users_servers_entity_or_previous_entities() {
    refused("servers", |record| {
        edited(record, |content| {
            content["servers"][0]["endpoints"]["new_notification"] =
                json!("https://evil.example/api/bob/notifications");
        })
    });
    refused("previous_entities", |record| {
        edited(record, |content| {
            content["previous_entities"] = json!(["old.example"]);
        })
    });
}

#[test]
fn an_app_cannot_make_the_users_entity_record_private() {
    refused("permissions", |record| {
        let mut body = edited(record, |_| {});
        body["permissions"] = json!({"read": [{"entity": ENTITY}]});
        body
    });
}

#[test]
fn an_app_may_change_the_users_profile() {
    let (host, app) = host_with_app(Config::default());
    let record = entity_record(&host);
    let target = record_path(ENTITY, &record.id);
    let body = edited(&record, |content| {
        content["profile"] = json!({"name": "Alice Liddell"});
    });
    let reply = write(&host, "PUT", &target, &body, &app, "n1");
    assert_eq!(reply.status, 200, "{}", json(&reply));
    let stored = latest(&host, &app, &record);
    assert_eq!(stored["content"]["profile"]["name"], "Alice Liddell");
    assert_eq!(
        stored["content"]["signing_keys"],
        record.content().expect("content").as_value()["signing_keys"]
    );
}

#[test]
fn an_app_cannot_create_a_second_entity_record_describing_the_user() {
    let (host, app) = host_with_app(Config::default());
    let record = entity_record(&host);
    let mut content = record.content().expect("content").as_value().clone();
    content["signing_keys"] = json!([{"algorithm": "ed25519", "public_key": APP_KEY}]);
    let body = json!({
        "type": BuiltinType::Entity.link(),
        "permissions": {"read": "public"},
        "content": content,
    });
    let reply = write(&host, "POST", RECORDS, &body, &app, "n1");
    let problem = problem(&reply, "auth/403-forbidden", "forbidden");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("`entity`"),
        "{problem}"
    );
}

#[test]
fn a_request_signed_as_a_server_for_an_entity_served_here_is_refused() {
    // The Entity record lists a key someone holds, as a takeover made it.
    let host = FakeHost::new();
    let key = ServerKey::from_seed([9; 32]);
    let record = entity_record(&host);
    let body = edited(&record, |content| {
        content["signing_keys"] =
            json!([{"algorithm": "ed25519", "public_key": key.public_base64()}]);
    });
    let update = WriteRequest::put(RecordKey::of(&record), body.to_string().as_bytes())
        .expect("an update")
        .by_server();
    host.owner_job(vec![update]).expect("the key is published");
    let call = Call::get(RECORDS);
    let signed = SignedRequest {
        method: "GET",
        path_and_query: RECORDS,
        host: &call.host,
        port: call.port,
    };
    let entity = ENTITY.parse().expect("an entity");
    let value = key.authorization(
        Dialect::Svc,
        &entity,
        call.now.unix_millis(),
        "n1",
        &signed,
        &[],
    );
    let reply = send(&host, &call.header("authorization", value), Body::empty());
    let problem = problem(&reply, "auth/401-unknown-server", "unknown_server");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("served here"),
        "{problem}"
    );
}
