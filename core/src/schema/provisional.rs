//! A record as a store would store it, built from what a writer has before
//! writing (`content`, `type`, `permissions`), so that its schema can be
//! checked first: by `folio schema validate`, and by client SDKs before a
//! request. The parts a store fills in (id, dates, the version hash) are
//! placeholders no schema rule reads.

use serde_json::{Map, Value};

use crate::model::{
    Content, Entity, EntityLink, Permissions, Record, RecordBody, RecordDate, RecordId,
    RecordSource, Version, VersionHash, VersionLink,
};

/// The record `author` would write with this content, type and permissions.
pub fn provisional_record(
    author: Entity,
    type_link: VersionLink,
    permissions: Permissions,
    content: Map<String, Value>,
) -> Record {
    let date = RecordDate::from_unix_ticks(0).expect("the epoch is a date");
    Record {
        author: EntityLink::new(author.clone()),
        id: RecordId::from_bytes([0; 16]),
        source: RecordSource::Own,
        created_at: date,
        received_at: Some(date),
        version: Version {
            author: EntityLink::new(author),
            hash: VersionHash::from_bytes([0; 32]),
            parent_hash: None,
            created_at: date,
            received_at: Some(date),
        },
        permissions,
        type_link,
        body: RecordBody::Live(Content::new(content)),
    }
}
