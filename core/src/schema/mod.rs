//! Record types: the strict schema format (spec §2.4) with the semantics of
//! PROTOCOL.md §6.
//!
//! A Type record's schema is compiled once into a [`Schema`]; validating a
//! record against it decides everything the schema alone can decide and, in
//! the same walk, finds every link the record holds. What only the store can
//! decide (that a link's target exists, a linked record's type, a blob's real
//! size) comes back as [`StoreChecks`] for the host to run.

mod compile;
mod path;
mod record_type;
mod validate;

pub use compile::{
    MAX_SAFE_INTEGER, MAX_SCHEMA_DEPTH, RecordTypeRef, Schema, SchemaError, SchemaFault,
};
pub use record_type::RecordType;
pub use validate::{
    BlobCheck, FoundLink, MAX_VALIDATION_STEPS, MAX_VALUE_DEPTH, RecordCheck, Rule, StoreChecks,
    Validated, VersionCheck, Violation,
};
