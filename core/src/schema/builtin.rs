//! The built-in types (PROTOCOL.md §6): Type, Entity, App, App Authorization
//! and Credentials, authored by the reserved entity `system.folio.dev` with
//! fixed ids and dates, so their version hashes are the same on every Folio
//! server. Their contents live beside this file as JSON.
//!
//! The Type type describes Type records, itself included, so its `type`
//! link would have to hold its own hash. It therefore has two versions with
//! the same content: the first, whose `type` link names the all-zero hash (a
//! hash cannot contain itself), and the latest, whose `type` link names the
//! first. Every other built-in type links to the latest.

use std::sync::OnceLock;

use serde_json::Value;

use crate::model::{
    Content, EntityLink, Permissions, Record, RecordBody, RecordDate, RecordId, RecordSource,
    Version, VersionHash, VersionLink,
};
use crate::schema::RecordType;

/// The reserved entity that authors the built-in types.
pub const SYSTEM_ENTITY: &str = "system.folio.dev";

/// When the built-in types were written: part of their hashes.
const CREATED_AT_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// One of the built-in types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinType {
    /// The Type record type, whose records are record types.
    Type,
    /// The Entity record type, one per entity.
    Entity,
    /// The App record type.
    App,
    /// The App Authorization record type: the types an app may use.
    AppAuthorization,
    /// The Credentials record type, never returned through the API.
    Credentials,
}

impl BuiltinType {
    /// Every built-in type.
    pub const ALL: [BuiltinType; 5] = [
        BuiltinType::Type,
        BuiltinType::Entity,
        BuiltinType::App,
        BuiltinType::AppAuthorization,
        BuiltinType::Credentials,
    ];

    /// The `name` of its content.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinType::Type => "type",
            BuiltinType::Entity => "entity",
            BuiltinType::App => "app",
            BuiltinType::AppAuthorization => "app_authorization",
            BuiltinType::Credentials => "credentials",
        }
    }

    /// Its fixed record id.
    ///
    /// A constant, decoded when the crate is compiled: access checks compare
    /// every record's type with these, on every read and every live event.
    pub const fn record_id(self) -> RecordId {
        const TYPE: RecordId = RecordId::from_hex_const("4f1f0a1c9a6b4d0e8a3c2b7d5e6f7a81");
        const ENTITY: RecordId = RecordId::from_hex_const("6c2d8e4f0a1b4c3d9e8f7a6b5c4d3e21");
        const APP: RecordId = RecordId::from_hex_const("8a7b6c5d4e3f4a2b9c1d0e8f7a6b5c42");
        const APP_AUTHORIZATION: RecordId =
            RecordId::from_hex_const("9b8c7d6e5f4a4b3c8d2e1f0a9b8c7d63");
        const CREDENTIALS: RecordId = RecordId::from_hex_const("1c2d3e4f5a6b4c7d8e9f0a1b2c3d4e84");
        match self {
            BuiltinType::Type => TYPE,
            BuiltinType::Entity => ENTITY,
            BuiltinType::App => APP,
            BuiltinType::AppAuthorization => APP_AUTHORIZATION,
            BuiltinType::Credentials => CREDENTIALS,
        }
    }

    fn content_json(self) -> &'static str {
        match self {
            BuiltinType::Type => include_str!("builtin/type.json"),
            BuiltinType::Entity => include_str!("builtin/entity.json"),
            BuiltinType::App => include_str!("builtin/app.json"),
            BuiltinType::AppAuthorization => include_str!("builtin/app_authorization.json"),
            BuiltinType::Credentials => include_str!("builtin/credentials.json"),
        }
    }

    /// The latest version of this type's record.
    pub fn record(self) -> &'static Record {
        let id = self.record_id();
        let latest = builtin_records()
            .iter()
            .rev()
            .find(|record| record.id == id);
        latest.expect("every built-in type has a record")
    }

    /// A version link to the latest version of this type's record.
    pub fn link(self) -> VersionLink {
        version_link(self.record())
    }
}

/// The Type type, read: the schema every Type record follows.
pub fn type_type() -> &'static RecordType {
    builtin_record_type(&BuiltinType::Type.link()).expect("the Type type is built in")
}

/// The record type a built-in Type record version defines, compiled once;
/// `None` for any other version.
pub fn builtin_record_type(link: &VersionLink) -> Option<&'static RecordType> {
    static TYPES: OnceLock<Vec<(VersionHash, RecordType)>> = OnceLock::new();
    if link.entity.as_str() != SYSTEM_ENTITY {
        return None;
    }
    let types = TYPES.get_or_init(|| {
        builtin_records()
            .iter()
            .map(|record| {
                let content = record.content().expect("built-in types are live");
                let record_type = RecordType::from_content(content.as_value())
                    .expect("built-in types' schemas compile");
                (record.version.hash, record_type)
            })
            .collect()
    });
    types
        .iter()
        .find(|(hash, _)| *hash == link.version_hash)
        .map(|(_, record_type)| record_type)
}

/// Every version of every built-in type, oldest first: the Type type's two
/// versions, then Entity, App, App Authorization and Credentials, received
/// one tick apart in that order.
pub fn builtin_records() -> &'static [Record] {
    static RECORDS: OnceLock<Vec<Record>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let created_at = RecordDate::from_unix_millis(CREATED_AT_MS).expect("a date in range");
        let type_id = BuiltinType::Type.record_id();
        let genesis_type = VersionLink {
            entity: system_entity().entity,
            original_entity: None,
            record_id: type_id,
            version_hash: VersionHash::from_bytes([0; 32]),
        };
        let genesis = builtin_record(BuiltinType::Type, genesis_type, None, created_at);
        let latest_created_at =
            RecordDate::from_unix_millis(CREATED_AT_MS + 1).expect("a date in range");
        let type_type = builtin_record(
            BuiltinType::Type,
            version_link(&genesis),
            Some(&genesis),
            latest_created_at,
        );
        let type_link = version_link(&type_type);
        let mut records = vec![genesis, type_type];
        for builtin in &BuiltinType::ALL[1..] {
            records.push(builtin_record(
                *builtin,
                type_link.clone(),
                None,
                created_at,
            ));
        }
        // `version.received_at` is a total order in every store, and not
        // hashed: one tick apart, in this order.
        for (ticks, record) in (created_at.unix_ticks()..).zip(&mut records) {
            let received_at = RecordDate::from_unix_ticks(ticks).expect("a date in range");
            record.version.received_at = Some(received_at);
            if record.version.parent_hash.is_none() {
                record.received_at = Some(received_at);
            }
        }
        records
    })
}

fn system_entity() -> EntityLink {
    EntityLink::new(
        SYSTEM_ENTITY
            .parse()
            .expect("the reserved entity is a valid entity"),
    )
}

fn version_link(record: &Record) -> VersionLink {
    VersionLink {
        entity: record.author.entity.clone(),
        original_entity: None,
        record_id: record.id,
        version_hash: record.version.hash,
    }
}

fn builtin_record(
    builtin: BuiltinType,
    type_link: VersionLink,
    parent: Option<&Record>,
    version_created_at: RecordDate,
) -> Record {
    let content: Value =
        serde_json::from_str(builtin.content_json()).expect("built-in type contents are JSON");
    let content = Content::try_from(content).expect("built-in type contents are objects");
    let created_at = parent.map_or(version_created_at, |parent| parent.created_at);
    let mut record = Record {
        author: system_entity(),
        id: builtin.record_id(),
        source: RecordSource::Resolution,
        created_at,
        received_at: Some(created_at),
        version: Version {
            author: system_entity(),
            hash: VersionHash::from_bytes([0; 32]),
            parent_hash: parent.map(|parent| parent.version.hash),
            created_at: version_created_at,
            received_at: Some(version_created_at),
        },
        permissions: Permissions::public(),
        type_link,
        body: RecordBody::Live(content),
    };
    record.version.hash = record.hash_input().hash();
    record
}
