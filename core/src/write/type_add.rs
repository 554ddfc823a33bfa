//! Adding a record type by name, as a person means it: the same content
//! again is the type already there, changed content is a new version of
//! that type (its records keep their links to the versions they were
//! written under), and only a name no type of the user's has yet makes a
//! new Type record. `folio type add` and the README's example, run twice,
//! leave one type, where each run used to add another `note`.

use serde_json::{Value, json};

use super::{RecordKey, WriteError, WriteRequest};
use crate::model::Record;
use crate::schema::builtin::BuiltinType;

/// What adding a type's content to a store does, given the user's own live
/// Type records of the same name ([`crate::store::types_by_name_sql`]).
#[derive(Debug, Clone, Copy)]
pub enum TypeAddition<'r> {
    /// No type of that name: a new Type record.
    New,
    /// A type of that name with this very content: nothing to write.
    Same(&'r Record),
    /// One type of that name with other content: a new version of it.
    NewVersion(&'r Record),
    /// Several types of that name (stores from before this rule): which
    /// one is meant cannot be told.
    Ambiguous(&'r [Record]),
}

impl<'r> TypeAddition<'r> {
    /// Decides for `content`, given the user's live Type records named as
    /// it is (tombstones and other authors' types do not count).
    pub fn decide(same_name: &'r [Record], content: &Value) -> Self {
        if let Some(same) = same_name
            .iter()
            .find(|record| record.content().is_some_and(|c| c.as_value() == content))
        {
            return TypeAddition::Same(same);
        }
        match same_name {
            [] => TypeAddition::New,
            [only] => TypeAddition::NewVersion(only),
            several => TypeAddition::Ambiguous(several),
        }
    }

    /// The owner's write that carries it out: a create, or an update on
    /// the latest version; `None` when there is nothing to write or no way
    /// to tell what to write.
    pub fn request(&self, content: &Value) -> Option<Result<WriteRequest, WriteError>> {
        match self {
            TypeAddition::New => {
                let body = json!({"type": BuiltinType::Type.link(), "content": content});
                Some(WriteRequest::post(body.to_string().as_bytes()))
            }
            TypeAddition::NewVersion(latest) => {
                let key = RecordKey {
                    entity: latest.author.entity.clone(),
                    record_id: latest.id,
                };
                let body = json!({
                    "content": content,
                    "version": {"parent_hash": latest.version.hash},
                });
                Some(WriteRequest::put(key, body.to_string().as_bytes()))
            }
            TypeAddition::Same(_) | TypeAddition::Ambiguous(_) => None,
        }
    }
}
