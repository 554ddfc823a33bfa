//! A Type record's content: `name`, `icon_name`, `schema`, `unique_by`
//! (PROTOCOL.md §6).

use serde_json::Value;

use super::compile::{SchemaError, SchemaFault};
use super::path::JsonPath;
use super::tree::Schema;
use super::violation::Violation;
use crate::model::Record;
use crate::problem::Problem;
use crate::schema::builtin::type_type;

/// A record type, read from a Type record's content with its schema compiled.
#[derive(Debug, Clone)]
pub struct RecordType {
    /// snake_case, e.g. `post`.
    pub name: String,
    /// The name of the icon apps show for the type, if the Type record gives one.
    pub icon_name: Option<String>,
    /// The compiled schema its records' content is checked against.
    pub schema: Schema,
}

impl RecordType {
    /// Reads a Type record's content. Faults carry paths from the record
    /// (`$['content']['schema']['properties']…`). `unique_by` is accepted and
    /// not enforced yet.
    pub fn from_content(content: &Value) -> Result<Self, SchemaError> {
        Self::read(content, false).map_err(|mut faults| faults.swap_remove(0))
    }

    /// Every fault of a Type record's content, in document order; empty when
    /// it is valid. For people writing types.
    pub fn faults(content: &Value) -> Vec<SchemaError> {
        Self::read(content, true).err().unwrap_or_default()
    }

    /// Reads a Type record as a write must: its schema compiles, and the
    /// record follows the Type type's own schema (its shape, and public
    /// permissions).
    pub fn from_record(record: &Record) -> Result<Self, TypeRecordError> {
        let content = record.content().ok_or(TypeRecordError::Deleted)?;
        let record_type =
            Self::from_content(content.as_value()).map_err(TypeRecordError::Schema)?;
        type_type()
            .schema
            .validate(record)
            .map_err(TypeRecordError::Violation)?;
        Ok(record_type)
    }

    /// Every fault of a Type record, schema faults first; empty when it is
    /// valid. For people writing types.
    pub fn record_faults(record: &Record) -> Vec<TypeRecordError> {
        let Some(content) = record.content() else {
            return vec![TypeRecordError::Deleted];
        };
        let faults = Self::faults(content.as_value());
        if !faults.is_empty() {
            return faults.into_iter().map(TypeRecordError::Schema).collect();
        }
        type_type()
            .schema
            .validate(record)
            .err()
            .map(TypeRecordError::Violation)
            .into_iter()
            .collect()
    }

    fn read(content: &Value, every_fault: bool) -> Result<Self, Vec<SchemaError>> {
        let fault = |keys: &[&str], fault| {
            vec![SchemaError {
                path: JsonPath::of_keys(keys).to_string(),
                fault,
            }]
        };
        let content = content
            .as_object()
            .ok_or_else(|| fault(&["content"], SchemaFault::NotAnObject))?;
        let known = ["name", "icon_name", "schema", "unique_by"];
        if let Some(key) = content.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(fault(
                &["content", key],
                SchemaFault::UnknownProperty(key.clone()),
            ));
        }
        let name = match content.get("name") {
            Some(Value::String(name)) if is_snake_case(name) => name.clone(),
            Some(_) => {
                return Err(fault(
                    &["content", "name"],
                    SchemaFault::Expected("a snake_case name"),
                ));
            }
            None => return Err(fault(&["content"], SchemaFault::MissingProperty("name"))),
        };
        let icon_name = match content.get("icon_name") {
            None => None,
            Some(Value::String(icon)) => Some(icon.clone()),
            Some(_) => {
                return Err(fault(
                    &["content", "icon_name"],
                    SchemaFault::Expected("a string"),
                ));
            }
        };
        let schema = content
            .get("schema")
            .ok_or_else(|| fault(&["content"], SchemaFault::MissingProperty("schema")))?;
        let schema = Schema::compile_at(
            schema,
            JsonPath::of_keys(&["content", "schema"]),
            every_fault,
        )?;
        Ok(RecordType {
            name,
            icon_name,
            schema,
        })
    }
}

/// Why a record is not a valid Type record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TypeRecordError {
    /// Its schema does not compile (`record/400-invalid-schema`).
    #[error("{0}")]
    Schema(SchemaError),
    /// It does not follow the Type type's schema (`record/400-schema-violation`).
    #[error("{0}")]
    Violation(Violation),
    /// A tombstone defines no type (`record/400-schema-violation`).
    #[error("$['content']: a deleted Type record defines no type")]
    Deleted,
}

impl From<&TypeRecordError> for Problem {
    fn from(error: &TypeRecordError) -> Self {
        match error {
            TypeRecordError::Schema(fault) => fault.into(),
            TypeRecordError::Violation(violation) => violation.into(),
            TypeRecordError::Deleted => Problem::new(crate::problem::ProblemType::SchemaViolation)
                .with_detail(error.to_string()),
        }
    }
}

/// `a-z` first, then `a-z`, `0-9` and single underscores between words.
fn is_snake_case(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('_')
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
