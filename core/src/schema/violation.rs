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
    /// The rule it broke.
    pub rule: Rule,
}

/// The rule a value broke.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rule {
    /// The value is not of the schema's type.
    WrongType {
        /// What the schema expects.
        expected: &'static str,
    },
    /// A property the schema requires, named here, is absent.
    MissingProperty(String),
    /// A property, named here, is one the schema marks `removed`.
    RemovedProperty(String),
    /// A property, named here, is not declared by the schema.
    UndeclaredProperty(String),
    /// The type declares no content, and the content is not `{}`.
    ContentNotEmpty,
    /// The value is not one of the schema's allowed values.
    NotInEnum,
    /// A string is shorter than the schema's minimum.
    TooShort {
        /// The least number of characters.
        min: u64,
    },
    /// A string is longer than the schema's maximum.
    TooLong {
        /// The most characters.
        max: u64,
    },
    /// An array has fewer items than the schema's minimum.
    TooFewItems {
        /// The least number of items.
        min: u64,
    },
    /// An array has more items than the schema's maximum.
    TooManyItems {
        /// The most items.
        max: u64,
    },
    /// An array's items must be distinct, and two are equal.
    DuplicateItems,
    /// The value is below the schema's minimum.
    BelowMinimum,
    /// The value is above the schema's maximum.
    AboveMaximum,
    /// An integer is outside ±(2^53 − 1).
    UnsafeInteger,
    /// A string is not in Unicode normalization form C.
    NotNfc,
    /// A link is not of its form; the reason is given.
    InvalidLink(String),
    /// A blob link's media type, given here, is not among the schema's `content_types`.
    ContentTypeNotAllowed(String),
    /// A blob is larger than the schema's `max_size`.
    BlobTooLarge {
        /// The largest size allowed, in bytes.
        max: u64,
    },
    /// A linked entity lacks a permission on the record that the schema's `min_permissions`
    /// requires.
    MissingPermission {
        /// The linked entity.
        entity: Entity,
        /// The permission it lacks.
        permission: Permission,
    },
    /// The value matches none of a union's schemas.
    NoBranchMatches {
        /// The violation of the schema it came closest to matching.
        closest: Box<Violation>,
    },
    /// The value matches more than one schema of a strict union.
    SeveralBranchesMatch,
    /// A key, named here, belongs to another schema of the strict union than the one that matched.
    SiblingBranchKey(String),
    /// No value is allowed here.
    Never,
    /// Values nest more than [`MAX_VALUE_DEPTH`](crate::schema::MAX_VALUE_DEPTH) levels.
    TooDeep,
    /// Validation takes more than [`MAX_VALIDATION_STEPS`](crate::schema::MAX_VALIDATION_STEPS)
    /// steps.
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
