//! Records and their versions (spec §2.1, §2.2).

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::{
    Entity, EntityLink, Link, LinkKind, LinkPath, Permissions, RecordDate, RecordId, VersionHash,
    VersionLink,
};

/// A live record's content: a JSON object shaped by its type. It holds the
/// object as a JSON value, so a schema can be checked against it as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub struct Content(serde_json::Value);

impl Content {
    /// Content of this JSON object.
    pub fn new(object: serde_json::Map<String, serde_json::Value>) -> Self {
        Self(serde_json::Value::Object(object))
    }

    /// The content's fields.
    pub fn as_map(&self) -> &serde_json::Map<String, serde_json::Value> {
        match &self.0 {
            serde_json::Value::Object(object) => object,
            _ => unreachable!("Content holds an object by construction"),
        }
    }

    /// The content as a JSON value, always an object.
    pub fn as_value(&self) -> &serde_json::Value {
        &self.0
    }
}

impl TryFrom<serde_json::Value> for Content {
    type Error = &'static str;

    fn try_from(value: serde_json::Value) -> Result<Self, Self::Error> {
        match value {
            serde_json::Value::Object(_) => Ok(Self(value)),
            _ => Err("content must be a JSON object"),
        }
    }
}

/// One version of a record, as stored and served.
///
/// A live version carries `content`; a tombstone carries `no_content`. The
/// wire form keeps the field order of the spec's table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "WireRecord")]
pub struct Record {
    /// Who wrote the record's first version: its owner.
    pub author: EntityLink,
    /// The record's id, which its host drew at random.
    pub id: RecordId,
    /// Where the record came from.
    pub source: RecordSource,
    /// The record's `created_at`: given by the client, or the time of its first write at
    /// millisecond precision (PROTOCOL.md §2).
    pub created_at: RecordDate,
    /// Set with the record's first version and never changed. Folio sets it
    /// on every record it stores; a record built elsewhere may not have one.
    pub received_at: Option<RecordDate>,
    /// The version this record is at.
    pub version: Version,
    /// Who may read, write and be notified of this version.
    pub permissions: Permissions,
    /// The Type record version that defines the content's schema.
    pub type_link: VersionLink,
    /// The version's content, or its tombstone.
    pub body: RecordBody,
}

/// The `version` object of a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Version {
    /// The entity that wrote this version.
    pub author: EntityLink,
    /// The version's hash (PROTOCOL.md §3).
    pub hash: VersionHash,
    /// The hash of the version this one replaced; `None` for a record's first version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_hash: Option<VersionHash>,
    /// When the version was created: given by the client, or the time of the write at millisecond
    /// precision.
    pub created_at: RecordDate,
    /// Strictly increasing per user on Folio (see [`RecordDate::received_after`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_at: Option<RecordDate>,
}

/// What a version holds: content, or the tombstone that replaced it.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordBody {
    /// A live version's `content`.
    Live(Content),
    /// A tombstone's `no_content`.
    Tombstone(NoContent),
}

/// A tombstone's `no_content`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoContent {
    /// How the record was deleted.
    pub action: DeletionAction,
    /// Every link of the last live version's content, so that link filters
    /// still find the tombstone (PROTOCOL.md §5).
    pub links: Vec<TombstoneLink>,
}

/// How a record was deleted (spec §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeletionAction {
    /// Deleted for everyone; needs write permission.
    Delete,
    /// Removed from this server only; needs read permission.
    Local,
    /// The user leaves the record; needs read permission.
    Leave,
}

impl DeletionAction {
    /// The action as the wire names it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeletionAction::Delete => "delete",
            DeletionAction::Local => "local",
            DeletionAction::Leave => "leave",
        }
    }
}

/// One element of `no_content.links`: `{"path", "type", "link"}`, where
/// `type` is the link's [`LinkKind`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "WireTombstoneLink")]
pub struct TombstoneLink {
    /// Where the link sits in the last live version.
    pub path: LinkPath,
    /// The link.
    pub link: Link,
}

impl Serialize for TombstoneLink {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("TombstoneLink", 3)?;
        s.serialize_field("path", &self.path)?;
        s.serialize_field("type", &self.link.kind())?;
        s.serialize_field("link", &self.link)?;
        s.end()
    }
}

/// Where a record came from. Folio itself writes `self` (through this server)
/// and `resolution` (built-in types); the other values name records that
/// reached a user from elsewhere, and belong to federation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordSource {
    /// `self`: written through this server.
    Own,
    /// `notification`: notified by the server of an entity the user knows.
    Notification,
    /// `notification_unknown`: notified by the server of an entity the user does not know.
    NotificationUnknown,
    /// `subscription`: received through a subscription to another entity's records.
    Subscription,
    /// `proxy`: fetched from another entity's server to answer a request proxied there.
    Proxy,
    /// `resolution`: one of the built-in types.
    Resolution,
}

impl RecordSource {
    /// Every source.
    pub const ALL: [RecordSource; 6] = [
        RecordSource::Own,
        RecordSource::Notification,
        RecordSource::NotificationUnknown,
        RecordSource::Subscription,
        RecordSource::Proxy,
        RecordSource::Resolution,
    ];

    /// How strongly the source holds a record, highest first: `self`,
    /// `resolution`, `notification`, `notification_unknown`,
    /// `subscription`, `proxy`. When two apply, the higher wins.
    pub fn priority(self) -> u8 {
        match self {
            RecordSource::Own => 5,
            RecordSource::Resolution => 4,
            RecordSource::Notification => 3,
            RecordSource::NotificationUnknown => 2,
            RecordSource::Subscription => 1,
            RecordSource::Proxy => 0,
        }
    }

    /// The higher of two sources.
    pub fn max(self, other: RecordSource) -> RecordSource {
        match self.priority() >= other.priority() {
            true => self,
            false => other,
        }
    }

    /// Whether a version with this source came by notification from
    /// another entity's server: what the received quotas count.
    pub fn is_notification(self) -> bool {
        matches!(
            self,
            RecordSource::Notification | RecordSource::NotificationUnknown
        )
    }

    /// The wire name, as `source` and the `sources` parameter write it.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordSource::Own => "self",
            RecordSource::Notification => "notification",
            RecordSource::NotificationUnknown => "notification_unknown",
            RecordSource::Subscription => "subscription",
            RecordSource::Proxy => "proxy",
            RecordSource::Resolution => "resolution",
        }
    }
}

/// A source name this server does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a record source")]
pub struct RecordSourceError;

impl std::str::FromStr for RecordSource {
    type Err = RecordSourceError;

    fn from_str(name: &str) -> Result<Self, RecordSourceError> {
        Self::ALL
            .into_iter()
            .find(|source| source.as_str() == name)
            .ok_or(RecordSourceError)
    }
}

impl Serialize for RecordSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RecordSource {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::deserialize_from_str(deserializer)
    }
}

impl Record {
    /// A live version's content; `None` for a tombstone.
    pub fn content(&self) -> Option<&Content> {
        match &self.body {
            RecordBody::Live(content) => Some(content),
            RecordBody::Tombstone(_) => None,
        }
    }

    /// The string at `pointer` (RFC 6901, from the content: `/name`,
    /// `/profile/name`) of a live version; `None` for a tombstone and for
    /// anything but a string there.
    pub fn content_text(&self, pointer: &str) -> Option<&str> {
        self.content()?.as_value().pointer(pointer)?.as_str()
    }

    /// Whether the version is a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self.body, RecordBody::Tombstone(_))
    }

    /// Whether this version is `user`'s deletion, for their store only
    /// (action `local` or `leave`), of a record another entity authored:
    /// the user chose not to keep it, whatever its author writes next
    /// (`docs/federation.md` §4).
    pub fn is_deleted_here_by(&self, user: &Entity) -> bool {
        self.author.entity != *user
            && self.version.author.entity == *user
            && matches!(
                &self.body,
                RecordBody::Tombstone(no_content)
                    if matches!(no_content.action, DeletionAction::Local | DeletionAction::Leave)
            )
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = 8 + usize::from(self.received_at.is_some());
        let mut s = serializer.serialize_struct("Record", fields)?;
        s.serialize_field("author", &self.author)?;
        s.serialize_field("id", &self.id)?;
        s.serialize_field("source", &self.source)?;
        s.serialize_field("created_at", &self.created_at)?;
        if let Some(received_at) = &self.received_at {
            s.serialize_field("received_at", received_at)?;
        }
        s.serialize_field("version", &self.version)?;
        s.serialize_field("permissions", &self.permissions)?;
        s.serialize_field("type", &self.type_link)?;
        match &self.body {
            RecordBody::Live(content) => s.serialize_field("content", content)?,
            RecordBody::Tombstone(no_content) => s.serialize_field("no_content", no_content)?,
        }
        s.end()
    }
}

/// A version as a server keeps it: a [`Record`] whose `received_at` and
/// `version.received_at` are set. The write transition makes one of every
/// version it commits, and nothing else is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRecord {
    record: Record,
    received_at: RecordDate,
    version_received_at: RecordDate,
}

impl ReceivedRecord {
    /// `record`, if both of its receipt dates are set.
    pub fn new(record: Record) -> Option<Self> {
        Some(ReceivedRecord {
            received_at: record.received_at?,
            version_received_at: record.version.received_at?,
            record,
        })
    }

    /// `record`'s version received `at`; the record keeps the
    /// `received_at` of its first version, or takes `at` for a first one.
    pub fn stamp(mut record: Record, at: RecordDate) -> Self {
        let received_at = *record.received_at.get_or_insert(at);
        record.version.received_at = Some(at);
        ReceivedRecord {
            record,
            received_at,
            version_received_at: at,
        }
    }

    /// Receives the version at `at` instead; the record's own
    /// `received_at` becomes `first` when given (the version, or an
    /// earlier one of the same write, was its first). Neither is hashed.
    pub fn restamp(&mut self, at: RecordDate, first: Option<RecordDate>) {
        if let Some(first) = first {
            self.received_at = first;
            self.record.received_at = Some(first);
        }
        self.version_received_at = at;
        self.record.version.received_at = Some(at);
    }

    /// When the record's first version was received.
    pub fn received_at(&self) -> RecordDate {
        self.received_at
    }

    /// When this version was received.
    pub fn version_received_at(&self) -> RecordDate {
        self.version_received_at
    }

    /// The record, its receipt dates set.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The record, its receipt dates set.
    pub fn into_record(self) -> Record {
        self.record
    }
}

/// Its wire JSON is the record's.
impl Serialize for ReceivedRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.record.serialize(serializer)
    }
}

impl PartialEq<ReceivedRecord> for Record {
    fn eq(&self, other: &ReceivedRecord) -> bool {
        *self == other.record
    }
}

impl std::ops::Deref for ReceivedRecord {
    type Target = Record;

    fn deref(&self) -> &Record {
        &self.record
    }
}

/// The wire shape, before the one-of `content` / `no_content` rule is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRecord {
    author: EntityLink,
    id: RecordId,
    source: RecordSource,
    created_at: RecordDate,
    #[serde(default)]
    received_at: Option<RecordDate>,
    version: Version,
    permissions: Permissions,
    #[serde(rename = "type")]
    type_link: VersionLink,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    no_content: Option<NoContent>,
}

impl TryFrom<WireRecord> for Record {
    type Error = &'static str;

    fn try_from(wire: WireRecord) -> Result<Self, Self::Error> {
        let body = match (wire.content, wire.no_content) {
            (Some(content), None) => RecordBody::Live(content),
            (None, Some(no_content)) => RecordBody::Tombstone(no_content),
            _ => return Err("a record has exactly one of `content` and `no_content`"),
        };
        Ok(Record {
            author: wire.author,
            id: wire.id,
            source: wire.source,
            created_at: wire.created_at,
            received_at: wire.received_at,
            version: wire.version,
            permissions: wire.permissions,
            type_link: wire.type_link,
            body,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireTombstoneLink {
    path: LinkPath,
    #[serde(rename = "type")]
    kind: LinkKind,
    link: serde_json::Value,
}

impl TryFrom<WireTombstoneLink> for TombstoneLink {
    type Error = serde_json::Error;

    fn try_from(wire: WireTombstoneLink) -> Result<Self, Self::Error> {
        let link = Link::from_value(wire.kind, wire.link)?;
        Ok(TombstoneLink {
            path: wire.path,
            link,
        })
    }
}
