//! Compiled record types, remembered between writes by the host
//! ([`crate::service::jobs::memo`]): a type is compiled from its Type record's
//! content, which the version hash fixes, so the same version compiles to
//! the same type in every store and every epoch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::RecordKey;
use crate::model::VersionHash;
use crate::schema::RecordType;

/// The most weight ([`weight`]) of Type records whose compiled schemas a
/// [`TypeMemo`] holds at once; past it, it starts again empty.
pub const MAX_REMEMBERED_TYPE_WEIGHT: usize = 1 << 20;
/// The heaviest Type record whose compiled schema is remembered.
pub const MAX_REMEMBERED_TYPE: usize = 64 << 10;

/// Compiled record types by the version of their Type record.
#[derive(Debug, Default)]
pub struct TypeMemo(Mutex<Types>);

#[derive(Debug, Default)]
struct Types {
    weight: usize,
    entries: HashMap<(RecordKey, VersionHash), Arc<RecordType>>,
}

impl TypeMemo {
    /// The type compiled from version `hash` of Type record `record`.
    pub fn get(&self, record: &RecordKey, hash: &VersionHash) -> Option<Arc<RecordType>> {
        let types = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        types.entries.get(&(record.clone(), *hash)).cloned()
    }

    /// Remembers the type compiled from version `hash` of Type record
    /// `record`, whose content weighs `weight` ([`weight`]).
    pub fn remember(
        &self,
        record: RecordKey,
        hash: VersionHash,
        compiled: Arc<RecordType>,
        weight: usize,
    ) {
        if weight > MAX_REMEMBERED_TYPE {
            return;
        }
        let mut types = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if types.weight + weight > MAX_REMEMBERED_TYPE_WEIGHT {
            *types = Types::default();
        }
        if types.entries.insert((record, hash), compiled).is_none() {
            types.weight += weight;
        }
    }
}

/// About the length of `value`'s JSON: its string and key bytes and a few
/// bytes for every value. What the types memo counts against its bound.
pub fn weight(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(weight).sum::<usize>() + 2,
        Value::Object(fields) => {
            fields
                .iter()
                .map(|(key, value)| key.len() + 3 + weight(value))
                .sum::<usize>()
                + 2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_is_about_the_json_length() {
        let value: Value = serde_json::json!({"a": [1, "bc", {"d": null}]});
        let json = serde_json::to_string(&value).expect("json");
        let weight = weight(&value);
        assert!(
            weight >= json.len() && weight <= 2 * json.len(),
            "{weight} for {json}"
        );
    }
}
