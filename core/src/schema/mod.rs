//! Record types: the strict schema format (spec §2.4) with the semantics of
//! PROTOCOL.md §6.
//!
//! A Type record's schema is compiled once into a [`Schema`]; validating a
//! record against it decides everything the schema alone can decide and, in
//! the same walk, finds every link the record holds. What only the store can
//! decide (that a link's target exists, a linked record's type, a blob's real
//! size) comes back as [`StoreChecks`] for the host to run.

pub mod builtin;

mod compile;
mod fields;
mod links;
mod path;
mod provisional;
mod record_type;
mod tree;
mod typescript;
mod validate;
mod violation;

pub use compile::{MAX_SCHEMA_DEPTH, SchemaError, SchemaFault};
pub use fields::{
    FieldKind, FilterablePath, FormField, FormInput, MAX_FILTERABLE_PATHS, TextRules,
};
pub use links::{BlobCheck, FoundLink, RecordCheck, StoreChecks, Validated, VersionCheck};
pub use provisional::provisional_record;
pub use record_type::{RecordType, TypeRecordError};
pub use tree::{MAX_SAFE_INTEGER, RecordTypeRef, Schema};
pub use validate::{MAX_VALIDATION_STEPS, MAX_VALUE_DEPTH};
pub use violation::{Rule, Violation};

use crate::problem::{Problem, ProblemType};

impl From<&SchemaError> for Problem {
    fn from(error: &SchemaError) -> Self {
        Problem::new(ProblemType::InvalidSchema).with_detail(error.to_string())
    }
}

impl From<&Violation> for Problem {
    fn from(violation: &Violation) -> Self {
        Problem::new(ProblemType::SchemaViolation).with_detail(violation.to_string())
    }
}
