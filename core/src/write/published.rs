//! Installing a Type record another entity publishes under a fixed record
//! id (the real apps' types, published by `types.baq.dev`), so that records
//! whose `type` names that entity and id can be written here without
//! reaching the publisher's server.
//!
//! The installed record is what a resolution from the publisher would
//! store (`docs/federation.md` §3): authored by the publishing entity, with
//! `source: "resolution"`, received through [`WriteRequest::receive`] and so
//! held to the same checks (its hash recomputes, its type validates it, it
//! continues the chain the store holds). Only its content comes from the
//! operator: every other field is fixed here, so that every server that
//! installs the same content holds the same version, with the same version
//! hash, and a record written on one of them links a type version the
//! others hold too (`docs/apps.md`, "Shared record types").

use serde_json::Value;

use super::WriteRequest;
use crate::model::{
    Content, Entity, EntityLink, Permissions, Record, RecordBody, RecordDate, RecordId,
    RecordSource, Version, VersionHash,
};
use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY};
use crate::schema::{RecordType, TypeRecordError};

/// `created_at` and `version.created_at` of every published Type record
/// installed from its content (2026-01-01T00:00:00Z, in Unix milliseconds).
/// It is hashed: changing it would give every installed type another
/// version hash, so it never changes.
pub const PUBLISHED_TYPE_CREATED_AT_MS: i64 = 1_767_225_600_000;

/// Why a published Type record cannot be built from what was given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishedTypeError {
    /// The reserved entity of the built-in types publishes nothing else.
    #[error("{SYSTEM_ENTITY} is reserved for the built-in types")]
    ReservedEntity,
    /// The content is not a JSON object.
    #[error("a Type record's content is a JSON object")]
    NotAnObject,
    /// The content is not a Type record's: its schema does not compile, or
    /// it does not follow the Type type's schema.
    #[error("not a Type record: {0}")]
    NotATypeRecord(#[from] TypeRecordError),
}

/// A Type record `publisher` publishes under `record_id`, as this server
/// installs it from its content alone.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedType {
    record: Record,
}

impl PublishedType {
    /// The first version of `publisher`'s Type record `record_id` with
    /// `content` (`name`, `schema`, …): authored and versioned by
    /// `publisher`, created at [`PUBLISHED_TYPE_CREATED_AT_MS`], public, of
    /// the built-in Type type. The same arguments always make the same
    /// version (the same hash). It must be a valid Type record, as a write
    /// checks one ([`RecordType::from_record`]).
    pub fn new(
        publisher: &Entity,
        record_id: RecordId,
        content: Value,
    ) -> Result<Self, PublishedTypeError> {
        if publisher.as_str() == SYSTEM_ENTITY {
            return Err(PublishedTypeError::ReservedEntity);
        }
        let content = Content::try_from(content).map_err(|_| PublishedTypeError::NotAnObject)?;
        let created_at =
            RecordDate::from_unix_millis(PUBLISHED_TYPE_CREATED_AT_MS).expect("a date in range");
        let author = EntityLink::new(publisher.clone());
        let mut record = Record {
            author: author.clone(),
            id: record_id,
            source: RecordSource::Resolution,
            created_at,
            received_at: None,
            version: Version {
                author,
                hash: VersionHash::from_bytes([0; 32]),
                parent_hash: None,
                created_at,
                received_at: None,
            },
            permissions: Permissions::public(),
            type_link: BuiltinType::Type.link(),
            body: RecordBody::Live(content),
        };
        record.version.hash = record.hash_input().hash();
        RecordType::from_record(&record)?;
        Ok(Self { record })
    }

    /// The version to install, as [`new`](Self::new) made it.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The write that installs it in a user's store, run as the owner
    /// (`Access::Owner`): the record received as a resolution from its
    /// publisher. Run again with the same version, it stores nothing and
    /// answers the stored version (a replay). When the store holds another
    /// version of that record (other content installed, or the publisher's
    /// own version resolved), it is refused with
    /// [`WriteError::VersionConflict`](super::WriteError::VersionConflict)
    /// naming the stored version; and for the user's own entity with
    /// [`WriteError::NotReceivable`](super::WriteError::NotReceivable).
    pub fn install(self) -> WriteRequest {
        WriteRequest::receive(self.record, RecordSource::Resolution, false)
    }
}
