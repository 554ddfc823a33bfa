//! Reading a write request: the method, the path's record, and the JSON body
//! (PROTOCOL.md §5, spec §4.3, §4.4).
//!
//! Fields other than those a write reads are ignored: existing clients send
//! whole records back (`author`, `source`, `received_at`, `version.author`,
//! `no_content.links`).

use serde::Deserialize;

use super::error::WriteError;
use super::needs::RecordKey;
use crate::model::{
    Content, DeletionAction, Entity, Permissions, Record, RecordDate, RecordId, RecordSource,
    VersionHash, VersionLink,
};

/// A parsed write request, ready for [`Write::new`](super::Write::new).
#[derive(Debug, Clone, PartialEq)]
pub struct WriteRequest {
    pub(super) operation: Operation,
    include_links: Option<Vec<String>>,
    /// Made by the user's server itself, not asked for by any caller: see
    /// [`WriteRequest::by_server`].
    pub(super) by_server: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Operation {
    Create(Create),
    Update(Target, Update),
    Delete(Target, Delete),
    /// A version another server's entity wrote, fetched from its server
    /// and checked (federation).
    Receive(Box<Receive>),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Receive {
    pub(super) record: Record,
    pub(super) source: RecordSource,
    /// The oldest version the receiver could fetch: stored without its
    /// parent when the store holds no version of the record.
    pub(super) chain_start: bool,
    /// The version a notification named (not a parent fetched to fill
    /// the chain): see [`WriteRequest::notified`].
    pub(super) notified: bool,
    /// The user may read it again after versions they could not: see
    /// [`WriteRequest::shared_again`].
    pub(super) shared_again: bool,
}

/// The record an update or deletion addresses. A POST body may leave out
/// `author`: the record is then the user's own.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Target {
    pub(super) entity: Option<Entity>,
    pub(super) record_id: RecordId,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Create {
    pub(super) id: Option<RecordId>,
    /// Must be the user's entity, which only the write knows.
    pub(super) author: Option<Entity>,
    pub(super) created_at: Option<RecordDate>,
    pub(super) permissions: Option<Permissions>,
    pub(super) type_link: VersionLink,
    pub(super) content: Content,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Update {
    pub(super) parent_hash: Option<VersionHash>,
    pub(super) created_at: Option<RecordDate>,
    pub(super) permissions: Option<Permissions>,
    pub(super) type_link: Option<VersionLink>,
    pub(super) content: Content,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Delete {
    pub(super) parent_hash: Option<VersionHash>,
    pub(super) created_at: Option<RecordDate>,
    pub(super) action: DeletionAction,
}

impl Update {
    /// Both `version.parent_hash` and `version.created_at` given: the only
    /// requests whose replay can produce the same version hash.
    pub(super) fn replayable_parent(&self) -> Option<VersionHash> {
        self.parent_hash.filter(|_| self.created_at.is_some())
    }
}

impl Delete {
    /// As [`Update::replayable_parent`].
    pub(super) fn replayable_parent(&self) -> Option<VersionHash> {
        self.parent_hash.filter(|_| self.created_at.is_some())
    }
}

impl WriteRequest {
    /// `POST /api/{user}/records`: a create, or, when the body carries `id`
    /// and `version.parent_hash`, an update (with `content`) or a deletion
    /// (without) of the record with that id and the body's `author` (the
    /// user's own record when it names none).
    pub fn post(body: &[u8]) -> Result<Self, WriteError> {
        let body = WireBody::parse(body)?;
        let include_links = body.include_links.clone().map(WireIncludeLinks::into_list);
        let parent_hash = body.version.as_ref().and_then(|v| v.parent_hash);
        let operation = match (body.id, parent_hash) {
            (Some(record_id), Some(_)) => {
                let target = Target {
                    entity: body.author.as_ref().map(|a| a.entity.clone()),
                    record_id,
                };
                if body.content.is_some() {
                    Operation::Update(target, body.into_update()?)
                } else {
                    Operation::Delete(target, body.into_delete())
                }
            }
            _ => Operation::Create(body.into_create()?),
        };
        Ok(Self {
            operation,
            include_links,
            by_server: false,
        })
    }

    /// A version of another entity's record, as its author's server served
    /// it (its hash and author checked by
    /// [`check_record`](crate::service::federation::check_record)), to store with
    /// `source`. It is stored if its type validates it and it continues the
    /// chain the store holds: its parent is the record's latest version, or
    /// it is the first and the store holds none. One already stored is a
    /// replay. Its links are not resolved: they may name what the user
    /// cannot see.
    ///
    /// `chain_start`: the oldest version the receiver could fetch; stored
    /// without its parent when the store holds no version of the record
    /// (a resolved record's latest version, or a chain longer than the
    /// receiver fetches).
    pub fn receive(record: Record, source: RecordSource, chain_start: bool) -> Self {
        Self {
            operation: Operation::Receive(Box::new(Receive {
                record,
                source,
                chain_start,
                notified: false,
                shared_again: false,
            })),
            include_links: None,
            by_server: false,
        }
    }

    /// `PUT /api/{user}/records/{entity}/{record_id}`.
    pub fn put(target: RecordKey, body: &[u8]) -> Result<Self, WriteError> {
        let body = WireBody::parse(body)?;
        body.check_target(&target)?;
        let include_links = body.include_links.clone().map(WireIncludeLinks::into_list);
        Ok(Self {
            operation: Operation::Update(Target::from(target), body.into_update()?),
            include_links,
            by_server: false,
        })
    }

    /// `DELETE /api/{user}/records/{entity}/{record_id}`; an empty body means
    /// every default (parent: the latest version; action: `delete`).
    pub fn delete(target: RecordKey, body: &[u8]) -> Result<Self, WriteError> {
        let body = if body.trim_ascii().is_empty() {
            WireBody::default()
        } else {
            WireBody::parse(body)?
        };
        body.check_target(&target)?;
        let include_links = body.include_links.clone().map(WireIncludeLinks::into_list);
        Ok(Self {
            operation: Operation::Delete(Target::from(target), body.into_delete()),
            include_links,
            by_server: false,
        })
    }

    /// Marks a received version as the one a notification named. From a
    /// stranger's server (`source: "notification_unknown"`: the user never
    /// linked to its entity) it is stored only if it names the user, as
    /// [`recipients`](crate::service::federation::recipients) decides for the
    /// sender: a reader, a notified entity, or a link in its content to
    /// the user or the user's records. Else [`WriteError::Unsolicited`].
    pub fn notified(mut self) -> Self {
        if let Operation::Receive(receive) = &mut self.operation {
            receive.notified = true;
        }
        self
    }

    /// Marks a received version the user may read whose parent they may
    /// not (its author's server said so): the record was shared with the
    /// user again after their access ended. It replaces the user's
    /// deletion of the record here, as the start of its chain, where a
    /// later version of a record the user deleted here is otherwise not
    /// kept (`docs/federation.md` §4).
    pub fn shared_again(mut self) -> Self {
        if let Operation::Receive(receive) = &mut self.operation {
            receive.shared_again = true;
        }
        self
    }

    /// The source a received version is stored with (`None` for any other
    /// write): what the server counts against its quotas.
    pub fn received_source(&self) -> Option<RecordSource> {
        match &self.operation {
            Operation::Receive(receive) => Some(receive.source),
            _ => None,
        }
    }

    /// Marks a write the user's server makes itself (creating a user, a
    /// base-URL change, a key rotation), never one a caller asked for: the
    /// only write that may create the user's own Entity record or change its
    /// server-kept fields ([`SERVER_KEPT_ENTITY_FIELDS`](crate::auth::access::SERVER_KEPT_ENTITY_FIELDS)).
    /// Nothing parsed from a request body sets it.
    pub fn by_server(mut self) -> Self {
        self.by_server = true;
        self
    }

    /// The body's `include_links`, as given (a list, or one comma-separated
    /// string split at its commas). PROTOCOL.md §5: the query string's value
    /// wins; this one is used only when the query has none, which only the
    /// caller knows.
    pub fn include_links(&self) -> Option<&[String]> {
        self.include_links.as_deref()
    }
}

impl From<RecordKey> for Target {
    fn from(key: RecordKey) -> Self {
        Target {
            entity: Some(key.entity),
            record_id: key.record_id,
        }
    }
}

/// The fields of a write body that a write reads; everything else is ignored.
#[derive(Debug, Default, Deserialize)]
struct WireBody {
    #[serde(default)]
    id: Option<RecordId>,
    #[serde(default)]
    author: Option<WireAuthor>,
    #[serde(default)]
    created_at: Option<RecordDate>,
    #[serde(default)]
    version: Option<WireVersion>,
    #[serde(default)]
    permissions: Option<Permissions>,
    #[serde(default, rename = "type")]
    type_link: Option<VersionLink>,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    no_content: Option<WireNoContent>,
    #[serde(default)]
    include_links: Option<WireIncludeLinks>,
}

#[derive(Debug, Deserialize)]
struct WireAuthor {
    entity: Entity,
}

#[derive(Debug, Deserialize)]
struct WireVersion {
    #[serde(default)]
    parent_hash: Option<VersionHash>,
    #[serde(default)]
    created_at: Option<RecordDate>,
}

#[derive(Debug, Deserialize)]
struct WireNoContent {
    #[serde(default)]
    action: Option<DeletionAction>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum WireIncludeLinks {
    List(Vec<String>),
    Text(String),
}

impl WireIncludeLinks {
    fn into_list(self) -> Vec<String> {
        match self {
            WireIncludeLinks::List(list) => list,
            WireIncludeLinks::Text(text) => text.split(',').map(str::to_owned).collect(),
        }
    }
}

impl WireBody {
    fn parse(body: &[u8]) -> Result<Self, WriteError> {
        // serde would also read a struct from a JSON array, field by field.
        if !body.trim_ascii_start().starts_with(b"{") {
            return Err(
                match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                    Ok(_) => WriteError::InvalidBody("the body must be a JSON object".into()),
                    Err(error) => WriteError::InvalidJson(error.to_string()),
                },
            );
        }
        serde_json::from_slice(body).map_err(|error| {
            if error.is_syntax() || error.is_eof() {
                WriteError::InvalidJson(error.to_string())
            } else {
                WriteError::InvalidBody(error.to_string())
            }
        })
    }

    /// A body may repeat the path's record, but not name another.
    fn check_target(&self, target: &RecordKey) -> Result<(), WriteError> {
        if self.id.is_some_and(|id| id != target.record_id) {
            return Err(WriteError::InvalidBody(format!(
                "the body's `id` is not the path's {}",
                target.record_id
            )));
        }
        if self
            .author
            .as_ref()
            .is_some_and(|a| a.entity != target.entity)
        {
            return Err(WriteError::InvalidBody(format!(
                "the body's `author` is not the path's {}",
                target.entity
            )));
        }
        Ok(())
    }

    fn version_created_at(&self) -> Option<RecordDate> {
        self.version.as_ref().and_then(|v| v.created_at)
    }

    fn into_create(self) -> Result<Create, WriteError> {
        let missing: Vec<&'static str> = [
            ("`type`", self.type_link.is_none()),
            ("`content`", self.content.is_none()),
        ]
        .into_iter()
        .filter_map(|(name, missing)| missing.then_some(name))
        .collect();
        let (Some(type_link), Some(content)) = (self.type_link, self.content) else {
            return Err(WriteError::NewRecordMissingProperties(missing));
        };
        Ok(Create {
            id: self.id,
            author: self.author.map(|a| a.entity),
            created_at: self.created_at,
            permissions: self.permissions,
            type_link,
            content,
        })
    }

    fn into_update(self) -> Result<Update, WriteError> {
        let created_at = self.version_created_at();
        Ok(Update {
            parent_hash: self.version.and_then(|v| v.parent_hash),
            created_at,
            permissions: self.permissions,
            type_link: self.type_link,
            content: self.content.ok_or(WriteError::UpdateMissingContent)?,
        })
    }

    fn into_delete(self) -> Delete {
        Delete {
            parent_hash: self.version.as_ref().and_then(|v| v.parent_hash),
            created_at: self.version_created_at(),
            action: self
                .no_content
                .and_then(|n| n.action)
                .unwrap_or(DeletionAction::Delete),
        }
    }
}
