//! Signed requests to another entity's server, and the checks every
//! record it serves must pass before anything of it is stored.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::PeerError;
use super::entity::checked_url;
use super::peer::{PeerAnswer, PeerMethod, PeerRequest};
use crate::auth::{ServerKey, SignedRequest};
use crate::model::dialect::Dialect;
use crate::model::{Entity, Record, RecordId, VersionHash};
use crate::service::fresh::Fresh;

/// The largest record answer accepted from a peer: a record is at most
/// the JSON body limit of its author's server; 2 MiB leaves room for its
/// `linked_records`.
pub const RECORD_ANSWER_BYTES: usize = 2 * 1024 * 1024;

/// A user's server, signing what it sends for that user.
#[derive(Debug, Clone, Copy)]
pub struct Signer<'a> {
    /// The dialect whose names the signature uses.
    pub dialect: Dialect,
    /// The user's entity, in whose name the server signs.
    pub entity: &'a Entity,
    /// The user's server key.
    pub key: &'a ServerKey,
    /// The time of the request, in milliseconds since the epoch.
    pub now_ms: i64,
    /// The request's randomness, from which each signature's nonce is drawn.
    pub fresh: &'a Fresh,
}

impl Signer<'_> {
    /// A signed request for `url`, with a JSON `body` for a POST (its
    /// SHA-256 signed too). A URL that does not parse is refused.
    pub fn request(
        &self,
        method: PeerMethod,
        url: &str,
        body: Option<Vec<u8>>,
        max_answer_bytes: usize,
    ) -> Result<PeerRequest, PeerError> {
        let parsed = checked_url(url)?;
        let host = parsed.host_str().unwrap_or_default().to_owned();
        let path_and_query = match parsed.query() {
            Some(query) => format!("{}?{query}", parsed.path()),
            None => parsed.path().to_owned(),
        };
        let signed = SignedRequest {
            method: method.as_str(),
            path_and_query: &path_and_query,
            host: &host,
            port: SignedRequest::port_of(parsed.port()),
        };
        let nonce = URL_SAFE_NO_PAD.encode(self.fresh.bytes::<7>());
        let names = self.dialect.names();
        let digest = body.as_ref().map(|body| hex::encode(Sha256::digest(body)));
        let signed_headers: Vec<(&str, &str)> = digest
            .as_deref()
            .map(|digest| (names.content_sha256.lowercase, digest))
            .into_iter()
            .collect();
        let authorization = self.key.authorization(
            self.dialect,
            self.entity,
            self.now_ms,
            &nonce,
            &signed,
            &signed_headers,
        );
        let mut headers = vec![("authorization", authorization)];
        if let Some(digest) = digest {
            headers.push((names.content_sha256.lowercase, digest));
            headers.push(("content-type", "application/json".to_owned()));
        }
        Ok(PeerRequest {
            method,
            url: parsed.into(),
            headers,
            body,
            max_answer_bytes,
        })
    }
}

/// What a fetched record must be.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The entity whose server was asked: the record's author.
    pub author: &'a Entity,
    /// The record's id.
    pub id: &'a RecordId,
    /// The version asked, if one was.
    pub hash: Option<&'a VersionHash>,
}

/// The record of a `{record, linked_records}` answer, checked: authored by
/// the entity whose server served it, the record and version asked, and
/// hashing to its version hash. Anything else is refused whole.
pub fn read_record(
    asked: &str,
    answer: &PeerAnswer,
    expected: Expected<'_>,
) -> Result<Record, PeerError> {
    let record = record_of_answer(asked, answer)?;
    check_record(&record, expected)?;
    Ok(record)
}

/// The record of a `200 {record, linked_records}` answer, unchecked.
pub fn record_of_answer(asked: &str, answer: &PeerAnswer) -> Result<Record, PeerError> {
    if answer.status != 200 {
        return Err(PeerError::status(asked, answer.status));
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        record: Record,
    }
    let Answer { record } = serde_json::from_slice(&answer.body)
        .map_err(|e| PeerError::Invalid(format!("{asked} answered no record: {e}")))?;
    Ok(record)
}

/// The records of a `200 {records, …, next_page?}` list answer from
/// `proxied`'s server, each checked to hash to its version hash and marked
/// `source: "proxy"`, and the answer's `next_page`.
///
/// Only `proxied`'s own records are kept: a server vouches for its own
/// entity's records alone (its certificate is for that name), so a record
/// it serves under another author, which it may hold or may have made up,
/// is dropped rather than shown to an app as that author's.
pub fn proxied_list(
    asked: &str,
    answer: &PeerAnswer,
    proxied: &Entity,
) -> Result<(Vec<Record>, Option<String>), PeerError> {
    if answer.status != 200 {
        return Err(PeerError::status(asked, answer.status));
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        records: Vec<Record>,
        next_page: Option<String>,
    }
    let Answer {
        mut records,
        next_page,
    } = serde_json::from_slice(&answer.body)
        .map_err(|e| PeerError::Invalid(format!("{asked} answered no records: {e}")))?;
    for record in &mut records {
        let computed = record.hash_input().hash();
        if computed != record.version.hash {
            return Err(PeerError::WrongHash {
                claimed: record.version.hash,
                computed,
            });
        }
        record.source = crate::model::RecordSource::Proxy;
    }
    records.retain(|record| record.author.entity == *proxied);
    Ok((records, next_page))
}

/// The checks of [`read_record`], on a record already parsed.
pub fn check_record(record: &Record, expected: Expected<'_>) -> Result<(), PeerError> {
    if record.author.entity != *expected.author {
        return Err(PeerError::WrongAuthor {
            expected: expected.author.clone(),
            found: record.author.entity.clone(),
        });
    }
    if record.id != *expected.id
        || expected
            .hash
            .is_some_and(|hash| *hash != record.version.hash)
    {
        return Err(PeerError::Invalid(format!(
            "asked for {}/{}, the peer served {}/{} version {}",
            expected.author, expected.id, record.author.entity, record.id, record.version.hash
        )));
    }
    let computed = record.hash_input().hash();
    if computed != record.version.hash {
        return Err(PeerError::WrongHash {
            claimed: record.version.hash,
            computed,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxied_list_keeps_only_the_proxied_entitys_records() {
        let records = crate::schema::builtin::builtin_records();
        let body = serde_json::json!({"records": records, "next_page": null}).to_string();
        let answer = PeerAnswer {
            status: 200,
            headers: Vec::new(),
            body: body.into_bytes(),
        };
        let author: Entity = crate::schema::builtin::SYSTEM_ENTITY.parse().unwrap();
        let (kept, _) = proxied_list("https://x.example/records", &answer, &author).unwrap();
        assert_eq!(kept.len(), records.len());
        assert!(
            kept.iter()
                .all(|r| r.source == crate::model::RecordSource::Proxy)
        );
        // The same records served by another entity's server: none is its own.
        let other: Entity = "mallory.example".parse().unwrap();
        let (kept, _) = proxied_list("https://x.example/records", &answer, &other).unwrap();
        assert!(kept.is_empty(), "{kept:?}");
    }
}
