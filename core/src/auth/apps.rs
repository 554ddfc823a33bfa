//! Apps and what they are granted (PROTOCOL.md §10): the App, Credentials
//! and App Authorization records, and the access an authorization gives.
//!
//! An app signs with its key under its App record's id; the authorization
//! id of the signature names an App Authorization record of the user's
//! store. The app acts within that record's `scope_grant` while the record
//! is live: deleting it revokes the app at once.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::auth::AuthError;
use crate::auth::access::{Access, AppGrant, is_type};
use crate::model::{Entity, Record, RecordId, RecordLink};
use crate::schema::builtin::BuiltinType;

/// The record types an app asks for or is granted, by their Type records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Types whose records the app may read.
    pub read: Vec<RecordLink>,
    /// Types whose records the app may read and write.
    pub write: Vec<RecordLink>,
    /// Types whose records the app may receive events for.
    pub subscribe: Vec<RecordLink>,
}

impl Scope {
    fn to_json(&self) -> Value {
        json!({"read": self.read, "write": self.write, "subscribe": self.subscribe})
    }
}

/// A create body for an app's App record, private to the user.
pub fn app_record_body(id: &RecordId, name: &str, redirect: &str, scope: &Scope) -> Value {
    json!({
        "id": id,
        "type": BuiltinType::App.link(),
        "content": {"name": name, "uris": {"redirect": redirect}, "scope_request": scope.to_json()},
    })
}

/// A create body for the App Authorization record granting `scope` to the
/// app whose App record is `app` in `user`'s store.
pub fn authorization_record_body(
    id: &RecordId,
    user: &Entity,
    app: &RecordId,
    scope: &Scope,
) -> Value {
    json!({
        "id": id,
        "type": BuiltinType::AppAuthorization.link(),
        "content": {
            "app": {"entity": user, "record_id": app},
            "scope_grant": scope.to_json(),
        },
    })
}

/// The types whose records count only in their user's own store, as the
/// user's own: who may act for the user (App Authorization), with which
/// keys (Credentials), and which apps the user has (App). Another server's
/// versions of them are never stored (`docs/federation.md` §4), so a
/// stranger cannot plant an "authorized app" in the user's console.
pub const USERS_OWN_TYPES: [BuiltinType; 3] = [
    BuiltinType::App,
    BuiltinType::AppAuthorization,
    BuiltinType::Credentials,
];

/// Which of [`USERS_OWN_TYPES`] `record` is of, if any.
pub fn users_own_type(record: &Record) -> Option<BuiltinType> {
    USERS_OWN_TYPES
        .into_iter()
        .find(|&builtin| is_type(&record.type_link, builtin))
}

/// The server's key pair for one app, from 32 random bytes the host drew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerKeys {
    /// The Ed25519 public key, base64.
    pub public_key: String,
    /// The 32-byte seed of the private key, base64.
    pub private_key: String,
}

impl ServerKeys {
    /// The key pair whose private key is `seed`.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        let signing = ed25519_dalek::SigningKey::from_bytes(&seed);
        ServerKeys {
            public_key: STANDARD.encode(signing.verifying_key().as_bytes()),
            private_key: STANDARD.encode(seed),
        }
    }
}

/// A create body for the Credentials record of an app: its public key and
/// the server's key pair for it. Credentials records are never served.
pub fn credentials_record_body(
    id: &RecordId,
    user: &Entity,
    app: &RecordId,
    app_public_key: &str,
    server: &ServerKeys,
) -> Value {
    json!({
        "id": id,
        "type": BuiltinType::Credentials.link(),
        "content": {
            "app": {"entity": user, "record_id": app},
            "algorithm": "ed25519",
            "app_public_key": app_public_key,
            "server_public_key": server.public_key,
            "server_private_key": server.private_key,
        },
    })
}

/// The access of an app whose signature verified: `authorization` is the
/// latest version of the record its authorization id names, if the store
/// has one. An app with `full_access` (created on the server itself) may
/// use every type; others get their authorization's grant. No live App
/// Authorization record for this app is `auth/401-unknown-app`.
pub fn app_access(
    user: &Entity,
    app: &RecordId,
    full_access: bool,
    authorization: Option<&Record>,
) -> Result<Access, AuthError> {
    let record = authorization
        .filter(|record| {
            is_type(&record.type_link, BuiltinType::AppAuthorization)
                && &record.author.entity == user
        })
        .ok_or(AuthError::UnknownApp)?;
    if authorized_app(record).is_none_or(|link| &link.entity != user || &link.record_id != app) {
        return Err(AuthError::UnknownApp);
    }
    let scope = granted_scope(record);
    Ok(Access::App {
        entity: user.clone(),
        grant: AppGrant {
            app_record: Some(*app),
            read: scope.read,
            write: scope.write,
            subscribe: scope.subscribe,
            every_type: full_access,
        },
    })
}

/// The app an App Authorization record names (`content.app`); `None` for
/// a tombstone or a record without one.
pub fn authorized_app(authorization: &Record) -> Option<RecordLink> {
    let link = authorization.content()?.as_map().get("app")?;
    serde_json::from_value(link.clone()).ok()
}

/// The `scope_grant` of an App Authorization record (empty lists where it
/// names none, and for a tombstone).
pub fn granted_scope(authorization: &Record) -> Scope {
    let grant = authorization
        .content()
        .and_then(|content| content.as_map().get("scope_grant"));
    let list = |name: &str| -> Vec<RecordLink> {
        grant
            .and_then(|g| g.get(name))
            .and_then(|list| serde_json::from_value(list.clone()).ok())
            .unwrap_or_default()
    };
    Scope {
        read: list("read"),
        write: list("write"),
        subscribe: list("subscribe"),
    }
}

/// The server's public key for an app, from its Credentials record.
pub fn server_public_key(credentials: &Record) -> Option<&str> {
    if !is_type(&credentials.type_link, BuiltinType::Credentials) {
        return None;
    }
    credentials
        .content()?
        .as_map()
        .get("server_public_key")?
        .as_str()
}

/// Which App Authorization records revoking `id` deletes: every live one of
/// the app whose id is `id` (`authorizations`, as the store lists them), or
/// else `id` itself when it is a live App Authorization record (`latest`,
/// its latest version). An id that is neither revokes nothing.
pub fn revocation(
    id: &RecordId,
    authorizations: &[Record],
    latest: Option<&Record>,
) -> Vec<RecordId> {
    if !authorizations.is_empty() {
        return authorizations.iter().map(|record| record.id).collect();
    }
    let is_authorization = latest.is_some_and(|record| {
        record.id == *id
            && !record.is_tombstone()
            && is_type(&record.type_link, BuiltinType::AppAuthorization)
    });
    match is_authorization {
        true => vec![*id],
        false => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version of record `id` of type `kind` (a built-in record,
    /// re-typed), live or a tombstone.
    fn record(id: u8, kind: BuiltinType, tombstone: bool) -> Record {
        let mut record = BuiltinType::Entity.record().clone();
        record.id = RecordId::from_bytes([id; 16]);
        record.type_link = kind.link();
        if tombstone {
            record.body = crate::model::RecordBody::Tombstone(crate::model::NoContent {
                action: crate::model::DeletionAction::Delete,
                links: Vec::new(),
            });
        }
        record
    }

    #[test]
    fn revoking_an_app_deletes_its_live_authorizations() {
        let app = RecordId::from_bytes([1; 16]);
        let live = [
            record(2, BuiltinType::AppAuthorization, false),
            record(3, BuiltinType::AppAuthorization, false),
        ];
        let app_record = record(1, BuiltinType::App, false);
        assert_eq!(
            revocation(&app, &live, Some(&app_record)),
            [RecordId::from_bytes([2; 16]), RecordId::from_bytes([3; 16])]
        );
    }

    #[test]
    fn revoking_an_authorization_by_its_own_id_deletes_it_while_live() {
        let id = RecordId::from_bytes([2; 16]);
        let live = record(2, BuiltinType::AppAuthorization, false);
        let deleted = record(2, BuiltinType::AppAuthorization, true);
        let app = record(2, BuiltinType::App, false);
        assert_eq!(revocation(&id, &[], Some(&live)), [id]);
        assert!(revocation(&id, &[], Some(&deleted)).is_empty());
        assert!(revocation(&id, &[], Some(&app)).is_empty());
        assert!(revocation(&id, &[], None).is_empty());
    }
}
