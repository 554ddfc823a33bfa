//! Who is asking, and what they may see and do (PROTOCOL.md §4, §10).
//!
//! A request reaches a user's store as one of three callers: the owner
//! (the user's own entity, with every right), an authorized app (acting as
//! the user's entity, limited to the record types its grant names), or an
//! unauthenticated caller (public records only). Lists and events silently
//! leave out what the caller may not read; a single read answers not found.

use crate::model::{Entity, Permission, Record, RecordId, RecordLink, VersionLink};
use crate::schema::builtin::BuiltinType;

/// The caller of one request, as the host verified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// No signature, or a bearer token for a public resource: public records only.
    Anonymous,
    /// The user's own entity with every right (the consent page, the CLI).
    Owner {
        /// The user's entity, which the caller acts as.
        entity: Entity,
    },
    /// An authorized app, acting as the user's entity within its grant.
    App {
        /// The user's entity, which the app acts as.
        entity: Entity,
        /// The record types the app's authorization grants.
        grant: AppGrant,
    },
    /// Another entity's server, acting for that entity (federation): it
    /// reads what the records' permissions let the entity read, and
    /// writes nothing.
    Server {
        /// The entity whose server signed the request.
        entity: Entity,
    },
}

/// What an app authorization grants: record types, by their Type records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppGrant {
    /// The app's own App record, which it may always read.
    pub app_record: Option<RecordId>,
    /// Types the app may read.
    pub read: Vec<RecordLink>,
    /// Types the app may read and write.
    pub write: Vec<RecordLink>,
    /// Types the app may watch through events.
    pub subscribe: Vec<RecordLink>,
    /// Every type, for read, write and subscribe alike: an app the owner
    /// created on the server itself with full access.
    pub every_type: bool,
}

/// Types only the owner writes (the consent page, the CLI): an app that
/// could write them could authorize itself.
pub const SERVER_KEPT_TYPES: [BuiltinType; 2] =
    [BuiltinType::AppAuthorization, BuiltinType::Credentials];

/// Types every caller that may read at all may read, whatever its grant.
pub const ALWAYS_READABLE_TYPES: [BuiltinType; 2] = [BuiltinType::Entity, BuiltinType::Type];

impl Access {
    /// The entity the caller acts as, if any.
    pub fn entity(&self) -> Option<&Entity> {
        match self {
            Access::Anonymous => None,
            Access::Owner { entity } | Access::App { entity, .. } | Access::Server { entity } => {
                Some(entity)
            }
        }
    }

    /// The app's grant, when the caller is an app.
    pub fn grant(&self) -> Option<&AppGrant> {
        match self {
            Access::App { grant, .. } => Some(grant),
            _ => None,
        }
    }

    /// Whether the caller may read this version: the record's permissions
    /// let its entity read it, and an app's grant covers its type (or it is
    /// public, an Entity or Type record, or the app's own App record).
    /// Credentials records are never readable through the API.
    pub fn can_read(&self, record: &Record) -> bool {
        if is_type(&record.type_link, BuiltinType::Credentials) {
            return false;
        }
        let public = record.permissions.is_public();
        let permitted = public
            || self.entity().is_some_and(|entity| {
                record
                    .permissions
                    .grants(&record.author.entity, entity, Permission::Read)
            });
        permitted
            && match self {
                Access::Anonymous | Access::Owner { .. } | Access::Server { .. } => true,
                Access::App { grant, .. } => {
                    public
                        || ALWAYS_READABLE_TYPES
                            .iter()
                            .any(|&builtin| is_type(&record.type_link, builtin))
                        || (is_type(&record.type_link, BuiltinType::App)
                            && grant.app_record == Some(record.id))
                        || grant.covers_read(&record.type_link)
                }
            }
    }

    /// Whether the caller may delete this record with `local` or `leave`
    /// (PROTOCOL.md §5): it may read it and, for an app, its grant covers
    /// the record's type. What every app may read (public records, Entity
    /// and Type records) is not thereby the app's to delete.
    pub fn can_forget(&self, record: &Record) -> bool {
        self.can_read(record)
            && match self {
                Access::Anonymous | Access::Server { .. } => false,
                Access::Owner { .. } => true,
                Access::App { grant, .. } => grant.covers_read(&record.type_link),
            }
    }

    /// Whether the caller's grant lets it write this record, by its type and
    /// id (the record's own permissions are checked apart). An app writes
    /// the types its grant names, and its own App record; it never writes
    /// another app's App record, an App Authorization (it would grant
    /// itself more) or Credentials, unless the owner gave it every type.
    pub fn can_write(&self, type_link: &VersionLink, record_id: &RecordId) -> bool {
        match self {
            Access::Anonymous | Access::Server { .. } => false,
            Access::Owner { .. } => true,
            Access::App { grant, .. } if grant.every_type => true,
            Access::App { grant, .. } => {
                if is_type(type_link, BuiltinType::App) {
                    grant.app_record == Some(*record_id)
                } else if SERVER_KEPT_TYPES
                    .iter()
                    .any(|&builtin| is_type(type_link, builtin))
                {
                    false
                } else {
                    names_type(&grant.write, type_link)
                }
            }
        }
    }

    /// Whether the caller may watch records of this type through events
    /// (before the per-record read check). Anonymous callers see public records.
    pub fn can_subscribe_type(&self, type_link: &VersionLink) -> bool {
        match self {
            Access::Anonymous | Access::Owner { .. } => true,
            Access::Server { .. } => false,
            Access::App { grant, .. } => {
                grant.every_type || names_type(&grant.subscribe, type_link)
            }
        }
    }
}

impl AppGrant {
    /// Whether the grant lets the app read records of this type.
    pub fn covers_read(&self, type_link: &VersionLink) -> bool {
        self.every_type || names_type(&self.read, type_link) || names_type(&self.write, type_link)
    }
}

/// Whether a record of this type is of the built-in type `builtin` (any version of it).
pub fn is_type(type_link: &VersionLink, builtin: BuiltinType) -> bool {
    type_link.record_id == builtin.record_id()
        && type_link.entity.as_str() == crate::schema::builtin::SYSTEM_ENTITY
}

/// The entity an Entity record describes: its `content.entity`. `None` for
/// any other record and for tombstones. This, not the author, is what makes
/// an entity known here (PROTOCOL.md §4) and what `include_links=entity`
/// looks up: a user may keep Entity records of the people they know.
pub fn described_entity(record: &Record) -> Option<&str> {
    if !is_type(&record.type_link, BuiltinType::Entity) {
        return None;
    }
    record.content()?.as_map().get("entity")?.as_str()
}

/// Whether `record` is `user`'s own Entity record: authored by the user and
/// describing them. Discovery (`HEAD /`) serves it, so no write may delete
/// it or make it describe anything else.
pub fn is_own_entity_record(record: &Record, user: &Entity) -> bool {
    record.author.entity == *user && described_entity(record) == Some(user.as_str())
}

/// The content fields of a user's own Entity record that only the user's
/// server changes (when it creates the user, on a base-URL change, on a key
/// rotation): which entity it is, which entities it was, the keys that sign
/// for it as a server and where its server is. Whoever could change them
/// could sign as the user's server, or send the user's federation
/// elsewhere. A caller (an app with a grant for the Entity type, or the
/// owner) may change `profile` only.
pub const SERVER_KEPT_ENTITY_FIELDS: [&str; 4] =
    ["entity", "previous_entities", "signing_keys", "servers"];

/// What `next`, a caller's new version of the user's own Entity record
/// `latest` ([`is_own_entity_record`]), would change that only the server
/// may: the first of [`SERVER_KEPT_ENTITY_FIELDS`] whose value differs,
/// else `"permissions"` or `"type"` (discovery needs the record public and
/// of the Entity type); `None` when it changes `profile` at most.
pub fn server_kept_change(latest: &Record, next: &Record) -> Option<&'static str> {
    let field = |record: &Record, name: &str| {
        record
            .content()
            .and_then(|content| content.as_map().get(name).cloned())
    };
    SERVER_KEPT_ENTITY_FIELDS
        .into_iter()
        .find(|name| field(latest, name) != field(next, name))
        .or_else(|| (latest.permissions != next.permissions).then_some("permissions"))
        .or_else(|| (latest.type_link != next.type_link).then_some("type"))
}

/// Whether `types` names the Type record that `type_link` points into.
fn names_type(types: &[RecordLink], type_link: &VersionLink) -> bool {
    types
        .iter()
        .any(|t| t.entity == type_link.entity && t.record_id == type_link.record_id)
}
