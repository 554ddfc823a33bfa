//! Why a write fails: one variant per reason, each mapped to exactly one
//! problem type of the catalogue (PROTOCOL.md §11).

use std::fmt;

use super::MAX_RECORDS_PER_WRITE;
use super::needs::RecordKey;
use crate::model::{Entity, LinkPath, RecordId, VersionHash, VersionLink};
use crate::problem::{Problem, ProblemType};
use crate::schema::{SchemaError, Violation};

/// Why a write request fails.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The body is not JSON at all (`request/400-invalid-json`).
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    /// The body is JSON but not a write body: not an object, a field of the
    /// wrong shape, an `id` or `author` that disagrees with the path, an
    /// unknown deletion action (`request/400-invalid-body`).
    #[error("{0}")]
    InvalidBody(String),
    /// A create lacks `type` or `content` (`new-record/400-missing-properties`).
    #[error("a new record needs {}", .0.join(" and "))]
    NewRecordMissingProperties(Vec<&'static str>),
    /// An update lacks `content` (`update-record/400-missing-properties`).
    #[error("an update needs `content`")]
    UpdateMissingContent,
    /// Nobody signed the request (`auth/401-missing-authorization`).
    #[error("writing needs a signed request")]
    Unauthenticated,
    /// The built-in records belong to `system.folio.dev`, whose records
    /// nobody may write (`auth/403-forbidden`: they are public, so "not
    /// found" would be false, and no permission could ever allow it).
    #[error("the built-in records cannot be written")]
    BuiltinRecord,
    /// The record's permissions do not let the user write it
    /// (`auth/403-forbidden`); it can read it, or this would be not found.
    #[error("the record's permissions do not let `{0}` write it")]
    WriteNotPermitted(RecordKey),
    /// The app's grant does not cover this type (`auth/403-forbidden`).
    #[error("the app's grant does not cover records of this type")]
    TypeNotGranted,
    /// The write would delete the user's own Entity record, or make it
    /// describe another entity: discovery serves it (`auth/403-forbidden`).
    #[error("the user's own Entity record cannot be deleted or describe another entity")]
    OwnEntityRecord,
    /// A caller's write would create the user's own Entity record, or
    /// change one of its fields that only the user's server changes
    /// ([`SERVER_KEPT_ENTITY_FIELDS`](crate::auth::access::SERVER_KEPT_ENTITY_FIELDS),
    /// its permissions or type): `auth/403-forbidden`.
    #[error(
        "`{0}` of the user's own Entity record is kept by the server; a write may change `profile` only"
    )]
    ServerKept(&'static str),
    /// A stranger's server notified a version that does not name the user
    /// ([`WriteRequest::notified`](super::WriteRequest::notified)):
    /// `federation/403-unsolicited`.
    #[error("the version names nobody here, and the user has never linked to its author")]
    Unsolicited,
    /// No record the writer can read has this key (`record/404-not-found`).
    #[error("no record {0}")]
    NotFound(RecordKey),
    /// The record's latest version is a tombstone (`record/410-deleted`).
    #[error("the record {0} is deleted")]
    Deleted(RecordKey),
    /// The given `parent_hash` is not the latest version
    /// (`record/409-version-conflict`); the detail names the latest.
    #[error("the latest version is {latest}")]
    VersionConflict {
        /// The latest version's hash.
        latest: VersionHash,
    },
    /// A create names an id the user's store already holds, and is not a
    /// replay of the version stored under it (`record/409-id-conflict`).
    #[error("a record with id {0} already exists")]
    IdConflict(RecordId),
    /// A link does not resolve (`record/400-invalid-link`). `unresolved`
    /// names what the store lacks, when another server might hold it
    /// (federation resolves it, then runs the write again).
    #[error("{path}: {fault}")]
    InvalidLink {
        /// Where the link sits.
        path: LinkPath,
        /// Why it does not resolve.
        fault: LinkFault,
        /// What the store lacks, when another server might hold it.
        unresolved: Option<Box<Unresolved>>,
    },
    /// A Type record's schema does not compile (`record/400-invalid-schema`).
    #[error("{0}")]
    InvalidSchema(SchemaError),
    /// The record does not follow its type (`record/400-schema-violation`).
    #[error("{0}")]
    SchemaViolation(Violation),
    /// A deletion would cascade to more records than one write may hold
    /// (`request/400-invalid-body`, PROTOCOL.md §4).
    #[error("the deletion would delete more than {MAX_RECORDS_PER_WRITE} records")]
    CascadeTooLarge,
    /// A received version's parent is not in the store: the receiver
    /// fetches it from the author's server first
    /// (`federation/502-invalid-peer-answer` if it still lacks it).
    #[error("the parent version {parent} is not stored here")]
    MissingParent {
        /// The hash of the missing parent.
        parent: VersionHash,
    },
    /// A received version cannot be stored as it is: the record is this
    /// user's own or built-in, its version has another author, or it is of
    /// a type that counts only as the user's own
    /// ([`USERS_OWN_TYPES`](crate::auth::apps::USERS_OWN_TYPES))
    /// (`federation/502-invalid-peer-answer`).
    #[error("{0}")]
    NotReceivable(String),
    /// A stored version the write depends on cannot be read with its type
    /// (`server/500-internal`): versions are immutable and were validated
    /// when stored, so the store is inconsistent.
    #[error("the stored record {record} cannot be read with its type: {reason}")]
    StoredRecordUnusable {
        /// The record.
        record: RecordKey,
        /// Why it cannot be read.
        reason: String,
    },
    /// The host broke the calling contract of [`Write`](super::Write)
    /// (`server/500-internal`).
    #[error("the write was driven out of order: {0}")]
    HostContract(&'static str),
}

/// What a link names that the store does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// An entity the server does not know.
    Entity(Entity),
    /// A record, by its latest version.
    Record(RecordKey),
    /// One exact version.
    Version(VersionLink),
}

impl Unresolved {
    /// The entity whose server holds what the link names.
    pub fn entity(&self) -> &Entity {
        match self {
            Unresolved::Entity(entity) => entity,
            Unresolved::Record(key) => &key.entity,
            Unresolved::Version(link) => &link.entity,
        }
    }
}

/// Why a link does not resolve.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LinkFault {
    /// The server knows no such entity.
    UnknownEntity,
    /// No record the writer can read (or no live one) has this key.
    RecordNotFound,
    /// The store holds no such version.
    VersionNotFound,
    /// The linked record's type is not one of the schema's `record_types`.
    WrongRecordType,
    /// The `type` names no live Type record whose schema compiles.
    NotAType(String),
    /// The writer may not link this blob (never uploaded here, expired, or
    /// linked only by records it cannot read).
    BlobUnavailable,
    /// The link states a size that is not the blob's.
    BlobSizeMismatch {
        /// The size the link states, in bytes.
        stated: u64,
        /// The blob's size, in bytes.
        actual: u64,
    },
    /// The blob is larger than the schema's `max_size`.
    BlobTooLarge {
        /// The schema's `max_size`, in bytes.
        max: u64,
        /// The blob's size, in bytes.
        actual: u64,
    },
}

impl fmt::Display for LinkFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkFault::UnknownEntity => f.write_str("this server knows no such entity"),
            LinkFault::RecordNotFound => f.write_str("no such record"),
            LinkFault::VersionNotFound => f.write_str("no such version"),
            LinkFault::WrongRecordType => {
                f.write_str("the linked record is not of a type the schema allows here")
            }
            LinkFault::NotAType(reason) => write!(f, "not a valid Type record: {reason}"),
            LinkFault::BlobUnavailable => f.write_str("no such blob available to the writer"),
            LinkFault::BlobSizeMismatch { stated, actual } => {
                write!(f, "the link states {stated} bytes; the blob has {actual}")
            }
            LinkFault::BlobTooLarge { max, actual } => {
                write!(f, "the blob has {actual} bytes, more than {max}")
            }
        }
    }
}

impl WriteError {
    /// The catalogue entry this error is reported as.
    pub fn problem_type(&self) -> ProblemType {
        match self {
            WriteError::InvalidJson(_) => ProblemType::InvalidJson,
            WriteError::InvalidBody(_) | WriteError::CascadeTooLarge => ProblemType::InvalidBody,
            WriteError::NewRecordMissingProperties(_) => ProblemType::NewRecordMissingProperties,
            WriteError::UpdateMissingContent => ProblemType::UpdateRecordMissingProperties,
            WriteError::Unauthenticated => ProblemType::MissingAuthorization,
            WriteError::BuiltinRecord
            | WriteError::WriteNotPermitted(_)
            | WriteError::TypeNotGranted
            | WriteError::OwnEntityRecord
            | WriteError::ServerKept(_) => ProblemType::Forbidden,
            WriteError::Unsolicited => ProblemType::Unsolicited,
            WriteError::NotFound(_) => ProblemType::RecordNotFound,
            WriteError::Deleted(_) => ProblemType::RecordDeleted,
            WriteError::VersionConflict { .. } => ProblemType::VersionConflict,
            WriteError::IdConflict(_) => ProblemType::IdConflict,
            WriteError::InvalidLink { .. } => ProblemType::InvalidLink,
            WriteError::InvalidSchema(_) => ProblemType::InvalidSchema,
            WriteError::SchemaViolation(_) => ProblemType::SchemaViolation,
            WriteError::MissingParent { .. } | WriteError::NotReceivable(_) => {
                ProblemType::InvalidPeerAnswer
            }
            WriteError::StoredRecordUnusable { .. } | WriteError::HostContract(_) => {
                ProblemType::Internal
            }
        }
    }
}

impl From<&WriteError> for Problem {
    fn from(error: &WriteError) -> Self {
        match error {
            WriteError::InvalidSchema(fault) => fault.into(),
            WriteError::SchemaViolation(violation) => violation.into(),
            // What went wrong inside the server is for its log, not the client.
            WriteError::StoredRecordUnusable { .. } | WriteError::HostContract(_) => {
                Problem::new(error.problem_type())
            }
            _ => Problem::new(error.problem_type()).with_detail(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Entity;
    use crate::schema::{Rule, SchemaFault};

    /// PROTOCOL.md §11's type of each write error, as the table writes
    /// it, stated here apart from [`WriteError::problem_type`]. No
    /// wildcard: a new variant does not compile until it is mapped here too.
    fn documented(error: &WriteError) -> &'static str {
        match error {
            WriteError::InvalidJson(_) => "request/400-invalid-json",
            WriteError::InvalidBody(_) | WriteError::CascadeTooLarge => "request/400-invalid-body",
            WriteError::NewRecordMissingProperties(_) => "new-record/400-missing-properties",
            WriteError::UpdateMissingContent => "update-record/400-missing-properties",
            WriteError::Unauthenticated => "auth/401-missing-authorization",
            WriteError::BuiltinRecord
            | WriteError::WriteNotPermitted(_)
            | WriteError::TypeNotGranted
            | WriteError::OwnEntityRecord
            | WriteError::ServerKept(_) => "auth/403-forbidden",
            WriteError::Unsolicited => "federation/403-unsolicited",
            WriteError::NotFound(_) => "record/404-not-found",
            WriteError::Deleted(_) => "record/410-deleted",
            WriteError::VersionConflict { .. } => "record/409-version-conflict",
            WriteError::IdConflict(_) => "record/409-id-conflict",
            WriteError::InvalidLink { .. } => "record/400-invalid-link",
            WriteError::InvalidSchema(_) => "record/400-invalid-schema",
            WriteError::SchemaViolation(_) => "record/400-schema-violation",
            WriteError::MissingParent { .. } | WriteError::NotReceivable(_) => {
                "federation/502-invalid-peer-answer"
            }
            WriteError::StoredRecordUnusable { .. } | WriteError::HostContract(_) => {
                "server/500-internal"
            }
        }
    }

    /// One error of every variant.
    fn every_variant() -> Vec<WriteError> {
        let entity: Entity = "alice.example".parse().expect("an entity");
        let key = RecordKey::new(entity, RecordId::from_bytes([0xa; 16]));
        vec![
            WriteError::InvalidJson("eof".into()),
            WriteError::InvalidBody("no".into()),
            WriteError::NewRecordMissingProperties(vec!["`type`"]),
            WriteError::UpdateMissingContent,
            WriteError::Unauthenticated,
            WriteError::BuiltinRecord,
            WriteError::WriteNotPermitted(key.clone()),
            WriteError::TypeNotGranted,
            WriteError::OwnEntityRecord,
            WriteError::ServerKept("signing_keys"),
            WriteError::Unsolicited,
            WriteError::NotFound(key.clone()),
            WriteError::Deleted(key.clone()),
            WriteError::VersionConflict {
                latest: VersionHash::from_bytes([0xb; 32]),
            },
            WriteError::IdConflict(key.record_id),
            WriteError::MissingParent {
                parent: VersionHash::from_bytes([0xc; 32]),
            },
            WriteError::NotReceivable("own record".into()),
            WriteError::InvalidLink {
                path: "$['to']".parse().expect("a link path"),
                fault: LinkFault::RecordNotFound,
                unresolved: None,
            },
            WriteError::InvalidSchema(SchemaError {
                path: "$".into(),
                fault: SchemaFault::MissingType,
            }),
            WriteError::SchemaViolation(Violation {
                path: "$.title".into(),
                rule: Rule::MissingProperty("title".into()),
            }),
            WriteError::CascadeTooLarge,
            WriteError::StoredRecordUnusable {
                record: key,
                reason: "test".into(),
            },
            WriteError::HostContract("test"),
        ]
    }

    #[test]
    fn each_write_error_maps_to_its_documented_problem_type() {
        let errors = every_variant();
        assert_eq!(errors.len(), 23, "one sample per variant");
        for error in errors {
            let problem = Problem::from(&error);
            assert_eq!(problem.kind, error.problem_type(), "{error:?}");
            assert_eq!(problem.kind.type_path(), documented(&error), "{error:?}");
            // What went wrong inside the server stays in its log.
            let internal = problem.kind == ProblemType::Internal;
            assert_eq!(problem.detail.is_some(), !internal, "{error:?}");
        }
    }
}
