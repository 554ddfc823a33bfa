//! Building new versions (a create's first version, an update's next one, a
//! tombstone) and reading the type a version follows.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::NewVersion;
use super::needs::RecordKey;
use super::type_memo::{TypeMemo, weight};
use crate::auth::access::is_type;
use crate::model::{
    Content, DeletionAction, EntityLink, NoContent, Permissions, ReceivedRecord, Record,
    RecordBody, RecordDate, RecordId, RecordSource, TombstoneLink, Version, VersionHash,
    VersionLink,
};
use crate::schema::builtin::{BuiltinType, builtin_record_type};
use crate::schema::{RecordType, Violation};

/// What the server stamps on every version it writes.
#[derive(Debug, Clone)]
pub(super) struct Stamp {
    /// `version.author`: the user's entity.
    pub(super) author: EntityLink,
    /// `version.created_at`: the client's, or the server's at millisecond precision.
    pub(super) created_at: RecordDate,
    /// `version.received_at`: strictly after the user's previous version.
    pub(super) received_at: RecordDate,
}

/// The fields of a version that the writer chooses.
pub(super) struct Fields {
    pub(super) permissions: Permissions,
    pub(super) type_link: VersionLink,
    pub(super) body: RecordBody,
}

/// A record's first version, authored by the stamp's author, whose
/// `created_at` is the version's.
pub(super) fn first_version(id: RecordId, stamp: &Stamp, fields: Fields) -> ReceivedRecord {
    sealed(
        stamp,
        Record {
            author: stamp.author.clone(),
            id,
            source: RecordSource::Own,
            created_at: stamp.created_at,
            received_at: Some(stamp.received_at),
            version: Version {
                author: stamp.author.clone(),
                hash: VersionHash::from_bytes([0; 32]),
                parent_hash: None,
                created_at: stamp.created_at,
                received_at: Some(stamp.received_at),
            },
            permissions: fields.permissions,
            type_link: fields.type_link,
            body: fields.body,
        },
    )
}

/// The version that follows `parent`. The record keeps its author, id,
/// `created_at` and `received_at` (set with its first version), and its
/// source unless the user authored it: another entity's record the user
/// edits or deletes here still came from elsewhere.
pub(super) fn next_version(parent: &Record, stamp: &Stamp, fields: Fields) -> ReceivedRecord {
    let source = match parent.author == stamp.author {
        true => RecordSource::Own,
        false => parent.source,
    };
    sealed(
        stamp,
        Record {
            author: parent.author.clone(),
            id: parent.id,
            source,
            created_at: parent.created_at,
            received_at: parent.received_at.or(Some(stamp.received_at)),
            version: Version {
                author: stamp.author.clone(),
                hash: VersionHash::from_bytes([0; 32]),
                parent_hash: Some(parent.version.hash),
                created_at: stamp.created_at,
                received_at: Some(stamp.received_at),
            },
            permissions: fields.permissions,
            type_link: fields.type_link,
            body: fields.body,
        },
    )
}

/// The version with its hash, as received at the stamp's time.
fn sealed(stamp: &Stamp, mut record: Record) -> ReceivedRecord {
    record.version.hash = record.hash_input().hash();
    ReceivedRecord::stamp(record, stamp.received_at)
}

/// The tombstone that replaces the live version `live` of a record of type
/// `record_type`: its `no_content.links` are the content links of `live`,
/// and its links (envelope and `no_content`) are what the index stores.
pub(super) fn tombstone(
    live: &Record,
    record_type: &RecordType,
    stamp: &Stamp,
    action: DeletionAction,
) -> Result<NewVersion, Violation> {
    let links = record_type
        .schema
        .validate(live)?
        .content_links()
        .map(|found| TombstoneLink {
            path: found.path.clone(),
            link: found.link.clone(),
        })
        .collect();
    let fields = Fields {
        permissions: live.permissions.clone(),
        type_link: live.type_link.clone(),
        body: RecordBody::Tombstone(NoContent { action, links }),
    };
    let record = next_version(live, stamp, fields);
    let links = record_type.schema.validate(&record)?.links;
    Ok(NewVersion {
        record,
        links,
        // A tombstone has no text.
        search_text: String::new(),
        replaces: Some(live.version.hash),
        // A tombstone concerns whom the live version did: the same
        // permissions, its content links kept as `no_content` links.
        former_audience: Vec::new(),
    })
}

/// The content of a live body, from the request.
pub(super) fn live(content: &Content) -> RecordBody {
    RecordBody::Live(content.clone())
}

/// The record types of one write, compiled once each. The built-in types are
/// compiled once per process; the others are also looked up in, and added
/// to, the host's [`TypeMemo`] when the write has one.
#[derive(Debug, Default)]
pub(crate) struct Types {
    compiled: HashMap<(RecordKey, VersionHash), Arc<RecordType>>,
    memo: Option<Arc<TypeMemo>>,
}

impl Types {
    pub(super) fn remembering(memo: Arc<TypeMemo>) -> Self {
        Types {
            compiled: HashMap::new(),
            memo: Some(memo),
        }
    }

    /// The type that `link` names, given the version fetched for it
    /// (`None`: the store has no such version). It must be a live Type
    /// record whose schema compiles; the error says why not.
    pub(crate) fn get(
        &mut self,
        link: &VersionLink,
        type_record: Option<&Record>,
    ) -> Result<&RecordType, String> {
        if let Some(builtin) = builtin_record_type(link) {
            return Ok(builtin);
        }
        let key = (
            RecordKey::new(link.entity.clone(), link.record_id),
            link.version_hash,
        );
        let entry = match self.compiled.entry(key) {
            Entry::Occupied(entry) => return Ok(entry.into_mut()),
            Entry::Vacant(entry) => entry,
        };
        let (record, hash) = entry.key();
        // Only for a version the store has just supplied: the memo says
        // what it compiles to, never whether the store holds it.
        let remembered = match (&self.memo, type_record) {
            (Some(memo), Some(_)) => memo.get(record, hash),
            _ => None,
        };
        let compiled = match remembered {
            Some(compiled) => compiled,
            None => {
                let compiled = Arc::new(compile(type_record)?);
                if let (Some(memo), Some(content)) =
                    (&self.memo, type_record.and_then(Record::content))
                {
                    let weight = weight(content.as_value());
                    memo.remember(record.clone(), *hash, compiled.clone(), weight);
                }
                compiled
            }
        };
        Ok(entry.insert(compiled))
    }
}

fn compile(type_record: Option<&Record>) -> Result<RecordType, String> {
    let record = type_record.ok_or("no such version")?;
    if !is_type(&record.type_link, BuiltinType::Type) {
        return Err("the linked record is not a Type record".into());
    }
    let content = record.content().ok_or("the Type record is deleted")?;
    RecordType::from_content(content.as_value()).map_err(|fault| fault.to_string())
}
