//! Version hashes (PROTOCOL.md §3, `vectors/README.md` §2).
//!
//! A version's hash is the SHA-256 of the canonical JSON of a projection of
//! it: `author`, `id`, `created_at`, `version` {`author`, `created_at`,
//! `parent_hash`}, `permissions`, `type`, and `content` or `no_content`.
//! Inside that projection the envelope dates are written at millisecond
//! precision, and every object below the top level that names an
//! `original_entity` is written with that entity instead.

use sha2::{Digest, Sha256};

use crate::model::canonical::{ObjectRule, ObjectWriter, write_object, write_string, write_value};
use crate::model::{
    EntityLink, Permissions, ReadPermission, Record, RecordBody, RecordDate, RecordId, VersionHash,
    VersionLink,
};

/// The hashed fields of a version, borrowed from wherever they live: a
/// stored [`Record`], or a write that has no hash yet.
#[derive(Debug, Clone, Copy)]
pub struct VersionHashInput<'a> {
    /// The record's `author`.
    pub author: &'a EntityLink,
    /// The record's `id`.
    pub id: &'a RecordId,
    /// The record's `created_at`.
    pub created_at: RecordDate,
    /// The version's `version.author`.
    pub version_author: &'a EntityLink,
    /// The version's `version.created_at`.
    pub version_created_at: RecordDate,
    /// The version's `version.parent_hash`; `None` for a first version.
    pub parent_hash: Option<&'a VersionHash>,
    /// The version's `permissions`, as stored.
    pub permissions: &'a Permissions,
    /// The record's `type`.
    pub type_link: &'a VersionLink,
    /// The version's `content`, or its `no_content` for a tombstone.
    pub body: &'a RecordBody,
}

impl Record {
    /// The fields of this record that its version hash covers.
    pub fn hash_input(&self) -> VersionHashInput<'_> {
        VersionHashInput {
            author: &self.author,
            id: &self.id,
            created_at: self.created_at,
            version_author: &self.version.author,
            version_created_at: self.version.created_at,
            parent_hash: self.version.parent_hash.as_ref(),
            permissions: &self.permissions,
            type_link: &self.type_link,
            body: &self.body,
        }
    }
}

impl VersionHashInput<'_> {
    /// The version hash: SHA-256 of [`Self::canonical_json`].
    pub fn hash(&self) -> VersionHash {
        VersionHash::from_bytes(Sha256::digest(self.canonical_json()).into())
    }

    /// The exact bytes that are hashed.
    pub fn canonical_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1024);
        let mut top = ObjectWriter::begin(&mut out);
        write_entity_link(top.key("author"), self.author);
        if let RecordBody::Live(content) = self.body {
            // `content` sits below the top level, like everything in it.
            write_object(
                top.key("content"),
                content.as_map(),
                ObjectRule::OriginalEntity,
            );
        }
        write_date(top.key("created_at"), self.created_at);
        write_string(top.key("id"), self.id.encode(&mut [0; RecordId::HEX_LEN]));
        if let RecordBody::Tombstone(no_content) = self.body {
            // Tombstone links are hashed as the plain JSON of their wire form.
            let value = serde_json::to_value(no_content).unwrap_or_default();
            write_value(top.key("no_content"), &value, ObjectRule::OriginalEntity);
        }
        write_permissions(top.key("permissions"), self.permissions);
        write_version_link(top.key("type"), self.type_link);

        let mut version = ObjectWriter::begin(top.key("version"));
        write_entity_link(version.key("author"), self.version_author);
        write_date(version.key("created_at"), self.version_created_at);
        if let Some(parent_hash) = self.parent_hash {
            write_string(
                version.key("parent_hash"),
                parent_hash.encode(&mut [0; VersionHash::HEX_LEN]),
            );
        }
        version.end();
        top.end();
        out
    }
}

fn write_date(out: &mut Vec<u8>, date: RecordDate) {
    write_string(out, date.write_millis_form(&mut [0; 28]));
}

fn write_entity_link(out: &mut Vec<u8>, link: &EntityLink) {
    let mut object = ObjectWriter::begin(out);
    write_string(
        object.key("entity"),
        link.original_entity
            .as_ref()
            .unwrap_or(&link.entity)
            .as_str(),
    );
    if let Some(date) = link.version_created_at {
        write_date(object.key("version_created_at"), date);
    }
    object.end();
}

fn write_entity_links(out: &mut Vec<u8>, links: &[EntityLink]) {
    out.push(b'[');
    for (i, link) in links.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_entity_link(out, link);
    }
    out.push(b']');
}

fn write_version_link(out: &mut Vec<u8>, link: &VersionLink) {
    let mut object = ObjectWriter::begin(out);
    write_string(
        object.key("entity"),
        link.original_entity
            .as_ref()
            .unwrap_or(&link.entity)
            .as_str(),
    );
    write_string(
        object.key("record_id"),
        link.record_id.encode(&mut [0; RecordId::HEX_LEN]),
    );
    write_string(
        object.key("version_hash"),
        link.version_hash.encode(&mut [0; VersionHash::HEX_LEN]),
    );
    object.end();
}

fn write_permissions(out: &mut Vec<u8>, permissions: &Permissions) {
    let mut object = ObjectWriter::begin(out);
    if let Some(notify) = &permissions.notify {
        write_entity_links(object.key("notify"), notify);
    }
    match &permissions.read {
        Some(ReadPermission::Public) => write_string(object.key("read"), "public"),
        Some(ReadPermission::Entities(read)) => write_entity_links(object.key("read"), read),
        None => {}
    }
    if let Some(write) = &permissions.write {
        write_entity_links(object.key("write"), write);
    }
    object.end();
}
