//! Finding another entity's server (the original protocol's discovery):
//! `HEAD https://{entity}/` answers a `Link` to the entity's Entity record;
//! that record, fetched and checked, names the entity's endpoints and the
//! keys its server signs with.
//!
//! Trust comes from the entity's own host: the `HEAD` goes over HTTPS to
//! the host the entity names, so whoever answers it holds that name's
//! certificate. The record it points to must be authored by the entity,
//! describe the entity, be of the built-in Entity type, be public, and
//! hash to its version hash; every record later fetched through its
//! endpoints must be authored by the entity too ([`super::fetch`]).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use url::Url;

use super::PeerError;
use super::peer::{PeerAnswer, PeerMethod, PeerRequest, SMALL_ANSWER_BYTES};
use crate::auth::AppKey;
use crate::auth::access::is_type;
use crate::model::dialect::Dialect;
use crate::model::{BlobHash, Entity, Record, RecordId, VersionHash};
use crate::schema::builtin::BuiltinType;

/// The largest Entity record answer accepted.
pub const ENTITY_ANSWER_BYTES: usize = 256 * 1024;
/// The most signing keys read from one Entity record.
pub const MAX_SIGNING_KEYS: usize = 8;

/// The discovery request for `entity`: `HEAD https://{entity}/`.
pub fn discovery_request(entity: &Entity) -> PeerRequest {
    PeerRequest {
        method: PeerMethod::Head,
        url: format!("https://{entity}/"),
        headers: Vec::new(),
        body: None,
        max_answer_bytes: SMALL_ANSWER_BYTES,
    }
}

/// The Entity record's URL from a discovery answer: the `Link` whose
/// relation is the dialect's entity relation, resolved against the URL
/// asked. A 2xx answer without one is refused.
pub fn entity_record_location(
    dialect: Dialect,
    asked: &str,
    answer: &PeerAnswer,
) -> Result<String, PeerError> {
    if !(200..300).contains(&answer.status) {
        return Err(PeerError::status(asked, answer.status));
    }
    let relation = dialect.names().entity_relation;
    let target = answer
        .headers_named("link")
        .flat_map(link_values)
        .find(|(_, rels)| rels.split_ascii_whitespace().any(|rel| rel == relation))
        .map(|(target, _)| target)
        .ok_or_else(|| {
            PeerError::Invalid(format!("{asked} answers no `Link` with rel=\"{relation}\""))
        })?;
    let base = Url::parse(asked).map_err(|e| PeerError::Invalid(e.to_string()))?;
    let url = base
        .join(target)
        .map_err(|e| PeerError::Invalid(format!("the Entity record link is not a URL: {e}")))?;
    checked_url(url.as_str())?;
    Ok(url.into())
}

/// The `<target>` and `rel` of each link in one `Link` header value.
fn link_values(header: &str) -> Vec<(&str, &str)> {
    let mut links = Vec::new();
    let mut rest = header;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let target = &rest[open + 1..open + close];
        let after = &rest[open + close + 1..];
        let end = after.find('<').unwrap_or(after.len());
        let params = &after[..end];
        let rel = params
            .split(';')
            .filter_map(|param| param.trim().split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("rel"))
            .map(|(_, value)| value.trim().trim_matches('"'))
            .unwrap_or("");
        links.push((target, rel));
        rest = &after[end..];
    }
    links
}

/// A URL core may ask: absolute, `https` (or `http`, which only a host that
/// allows plain HTTP between local test servers sends), with a host.
pub fn checked_url(url: &str) -> Result<Url, PeerError> {
    let parsed = Url::parse(url).map_err(|e| PeerError::Invalid(format!("{url}: {e}")))?;
    if !matches!(parsed.scheme(), "https" | "http") || parsed.host_str().is_none() {
        return Err(PeerError::Invalid(format!("{url} is not an https URL")));
    }
    Ok(parsed)
}

/// The request for the Entity record at `url` (unsigned: it is public).
pub fn entity_record_request(url: &str) -> PeerRequest {
    PeerRequest {
        method: PeerMethod::Get,
        url: url.to_owned(),
        headers: Vec::new(),
        body: None,
        max_answer_bytes: ENTITY_ANSWER_BYTES,
    }
}

/// The endpoints of another entity's server that federation uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// The `records` endpoint: a URL template, its `{…}` variables kept.
    pub records: String,
    /// The `record` endpoint: a URL template, its `{…}` variables kept.
    pub record: String,
    /// The `record_versions` endpoint: a URL template, its `{…}` variables kept.
    pub record_versions: String,
    /// The `record_version` endpoint: a URL template, its `{…}` variables kept.
    pub record_version: String,
    /// The `new_notification` endpoint: a URL template, its `{…}` variables kept.
    pub new_notification: String,
    /// The `record_version_blob` endpoint, if the server lists one: where a
    /// blob a version links is read.
    pub record_version_blob: Option<String>,
}

/// Another entity, as its Entity record describes it.
#[derive(Debug, Clone)]
pub struct RemoteEntity {
    /// The entity.
    pub entity: Entity,
    /// The Entity record it was read from.
    pub record: Record,
    /// The endpoints of its server, from the record's `servers`.
    pub endpoints: Endpoints,
    /// The keys its server signs with.
    pub keys: Vec<AppKey>,
}

impl RemoteEntity {
    /// Reads `entity`'s Entity record: refused unless it is authored by the
    /// entity, describes it, is a live public record of the built-in
    /// Entity type whose hash recomputes, and lists a server of protocol
    /// 1 with every endpoint federation needs as an absolute URL.
    pub fn from_record(entity: &Entity, record: Record) -> Result<Self, PeerError> {
        if record.author.entity != *entity {
            return Err(PeerError::WrongAuthor {
                expected: entity.clone(),
                found: record.author.entity.clone(),
            });
        }
        let computed = record.hash_input().hash();
        if computed != record.version.hash {
            return Err(PeerError::WrongHash {
                claimed: record.version.hash,
                computed,
            });
        }
        if !is_type(&record.type_link, BuiltinType::Entity) || !record.permissions.is_public() {
            return Err(PeerError::Invalid(format!(
                "{entity}'s Entity record is not a public Entity record"
            )));
        }
        let content = record
            .content()
            .ok_or_else(|| PeerError::Invalid(format!("{entity}'s Entity record is deleted")))?
            .as_value()
            .clone();
        if content.get("entity").and_then(|e| e.as_str()) != Some(entity.as_str()) {
            return Err(PeerError::Invalid(format!(
                "the Entity record describes another entity than {entity}"
            )));
        }
        let server = content
            .get("servers")
            .and_then(|s| s.as_array())
            .into_iter()
            .flatten()
            .filter(|s| {
                s.get("version")
                    .and_then(|v| v.as_str())
                    .is_some_and(|v| v.starts_with("1."))
            })
            .min_by_key(|s| {
                s.get("preference")
                    .and_then(|p| p.as_i64())
                    .unwrap_or(i64::MAX)
            })
            .ok_or_else(|| {
                PeerError::Invalid(format!(
                    "{entity}'s Entity record lists no server of protocol 1"
                ))
            })?;
        let endpoint = |name: &str| -> Result<String, PeerError> {
            let url = server
                .get("endpoints")
                .and_then(|e| e.get(name))
                .and_then(|u| u.as_str())
                .ok_or_else(|| {
                    PeerError::Invalid(format!("{entity}'s server lists no `{name}` endpoint"))
                })?;
            // Templates keep their `{…}` variables; check the URL with them filled.
            checked_url(&fill(
                url,
                &[
                    ("entity", "e"),
                    ("record_id", "r"),
                    ("version_hash", "h"),
                    ("blob_hash", "b"),
                    ("file_name", "f"),
                ],
            ))?;
            Ok(url.to_owned())
        };
        let endpoints = Endpoints {
            records: endpoint("records")?,
            record: endpoint("record")?,
            record_versions: endpoint("record_versions")?,
            record_version: endpoint("record_version")?,
            new_notification: endpoint("new_notification")?,
            record_version_blob: endpoint("record_version_blob").ok(),
        };
        let keys = content
            .get("signing_keys")
            .and_then(|k| k.as_array())
            .into_iter()
            .flatten()
            .filter(|k| k.get("algorithm").and_then(|a| a.as_str()) == Some("ed25519"))
            .filter_map(|k| k.get("public_key").and_then(|p| p.as_str()))
            .filter_map(|key| AppKey::from_base64(key).ok())
            .take(MAX_SIGNING_KEYS)
            .collect();
        Ok(RemoteEntity {
            entity: entity.clone(),
            record,
            endpoints,
            keys,
        })
    }

    /// The URL of the latest version of record `id` of `author`.
    pub fn record_url(&self, author: &Entity, id: &RecordId) -> String {
        let id = id.to_string();
        fill(
            &self.endpoints.record,
            &[("entity", author.as_str()), ("record_id", &id)],
        )
    }

    /// The URL of version `hash` of record `id` of `author`.
    pub fn version_url(&self, author: &Entity, id: &RecordId, hash: &VersionHash) -> String {
        let (id, hash) = (id.to_string(), hash.to_string());
        fill(
            &self.endpoints.record_version,
            &[
                ("entity", author.as_str()),
                ("record_id", &id),
                ("version_hash", &hash),
            ],
        )
    }
}

/// What a file name keeps unencoded in a URL's path segment: RFC 3986's
/// unreserved characters.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl RemoteEntity {
    /// The URL of blob `blob` as version `hash` of record `id` of `author`
    /// links it, if the server lists where blobs are read. The file name is
    /// percent-encoded as a path segment.
    pub fn version_blob_url(
        &self,
        author: &Entity,
        id: &RecordId,
        hash: &VersionHash,
        blob: &BlobHash,
        file_name: &str,
    ) -> Option<String> {
        let template = self.endpoints.record_version_blob.as_deref()?;
        let (id, hash, blob) = (id.to_string(), hash.to_string(), blob.to_string());
        let file_name = utf8_percent_encode(file_name, PATH_SEGMENT).to_string();
        Some(fill(
            template,
            &[
                ("entity", author.as_str()),
                ("record_id", &id),
                ("version_hash", &hash),
                ("blob_hash", &blob),
                ("file_name", &file_name),
            ],
        ))
    }
}

/// A URL template with its `{name}` variables replaced. The values are
/// entity names, ids and hashes: nothing in them needs encoding.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut url = template.to_owned();
    for (name, value) in values {
        url = url.replace(&format!("{{{name}}}"), value);
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, links: &[&str]) -> PeerAnswer {
        PeerAnswer {
            status,
            headers: links
                .iter()
                .map(|l| ("link".to_owned(), (*l).to_owned()))
                .collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn the_link_with_the_dialects_relation_is_followed() {
        let rel = "https://folio.dev/rels/entity-record";
        let found = entity_record_location(
            Dialect::Svc,
            "https://alice.example/",
            &answer(204, &[&format!("<https://x.example/a>; rel=\"other\", </api/alice/records/alice.example/00>; rel=\"{rel}\"")]),
        )
        .unwrap();
        assert_eq!(
            found,
            "https://alice.example/api/alice/records/alice.example/00"
        );
        assert!(
            entity_record_location(
                Dialect::Svc,
                "https://alice.example/",
                &answer(204, &["<https://x/>; rel=\"other\""])
            )
            .is_err()
        );
        assert!(
            entity_record_location(Dialect::Svc, "https://alice.example/", &answer(404, &[]))
                .is_err()
        );
        assert!(
            entity_record_location(
                Dialect::Baq,
                "https://alice.example/",
                &answer(204, &[&format!("<https://x/>; rel=\"{rel}\"")])
            )
            .is_err()
        );
        assert!(
            entity_record_location(
                Dialect::Svc,
                "https://a.example/",
                &answer(204, &[&format!("<ftp://x/>; rel=\"{rel}\"")])
            )
            .is_err()
        );
    }

    #[test]
    fn templates_fill_in() {
        assert_eq!(
            fill(
                "https://h/api/u/records/{entity}/{record_id}",
                &[("entity", "a.example"), ("record_id", "0f")]
            ),
            "https://h/api/u/records/a.example/0f"
        );
    }
}
