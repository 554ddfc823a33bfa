//! What a record that fails its schema is told: where, and which rule.

use std::fmt;

use super::validate::{MAX_VALIDATION_STEPS, MAX_VALUE_DEPTH};
use crate::model::{Entity, Permission};

/// Why a record does not match its schema, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {rule}")]
pub struct Violation {
    /// JSON path of the offending value in the record.
    pub path: String,
    pub rule: Rule,
}

/// The rule a value broke.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rule {
    WrongType {
        expected: &'static str,
    },
    MissingProperty(String),
    RemovedProperty(String),
    UndeclaredProperty(String),
    ContentNotEmpty,
    NotInEnum,
    TooShort {
        min: u64,
    },
    TooLong {
        max: u64,
    },
    TooFewItems {
        min: u64,
    },
    TooManyItems {
        max: u64,
    },
    DuplicateItems,
    BelowMinimum,
    AboveMaximum,
    UnsafeInteger,
    NotNfc,
    InvalidLink(String),
    ContentTypeNotAllowed(String),
    BlobTooLarge {
        max: u64,
    },
    MissingPermission {
        entity: Entity,
        permission: Permission,
    },
    NoBranchMatches {
        closest: Box<Violation>,
    },
    SeveralBranchesMatch,
    SiblingBranchKey(String),
    Never,
    TooDeep,
    TooComplex,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::WrongType { expected } => write!(f, "expected {expected}"),
            Rule::MissingProperty(name) => write!(f, "the property `{name}` is required"),
            Rule::RemovedProperty(name) => {
                write!(f, "the property `{name}` was removed from this type")
            }
            Rule::UndeclaredProperty(name) => {
                write!(f, "the property `{name}` is not declared by the schema")
            }
            Rule::ContentNotEmpty => {
                f.write_str("this type declares no content, so content must be {}")
            }
            Rule::NotInEnum => f.write_str("the value is not one of the allowed values"),
            Rule::TooShort { min } => write!(f, "shorter than {min} characters"),
            Rule::TooLong { max } => write!(f, "longer than {max} characters"),
            Rule::TooFewItems { min } => write!(f, "fewer than {min} items"),
            Rule::TooManyItems { max } => write!(f, "more than {max} items"),
            Rule::DuplicateItems => f.write_str("the items must be distinct"),
            Rule::BelowMinimum => f.write_str("below the minimum"),
            Rule::AboveMaximum => f.write_str("above the maximum"),
            Rule::UnsafeInteger => f.write_str("integers are limited to ±(2^53 − 1)"),
            Rule::NotNfc => f.write_str("strings must be in Unicode normalization form C"),
            Rule::InvalidLink(reason) => write!(f, "not a valid link: {reason}"),
            Rule::ContentTypeNotAllowed(media_type) => {
                write!(f, "the media type `{media_type}` is not allowed here")
            }
            Rule::BlobTooLarge { max } => write!(f, "the blob is larger than {max} bytes"),
            Rule::MissingPermission { entity, permission } => {
                write!(
                    f,
                    "`{entity}` must hold the {permission} permission on this record"
                )
            }
            Rule::NoBranchMatches { closest } => write!(
                f,
                "matches none of the union's schemas (closest: {closest})"
            ),
            Rule::SeveralBranchesMatch => {
                f.write_str("matches more than one schema of a strict union")
            }
            Rule::SiblingBranchKey(key) => {
                write!(f, "`{key}` belongs to another schema of the strict union")
            }
            Rule::Never => f.write_str("no value is allowed here"),
            Rule::TooDeep => write!(f, "values nest at most {MAX_VALUE_DEPTH} levels"),
            Rule::TooComplex => {
                write!(f, "validation needs more than {MAX_VALIDATION_STEPS} steps")
            }
        }
    }
}
