//! The store checks of a new version (PROTOCOL.md §4): every link must
//! resolve for the writer, or the write fails naming the link's path.

use super::error::{LinkFault, Unresolved, WriteError};
use super::needs::{Asker, RecordKey};
use crate::auth::access::Access;
use crate::model::{Link, LinkPath, Record};
use crate::schema::{RecordTypeRef, Validated};

/// Runs every check of `validated`: `None` while some answer is missing (the
/// asker holds the needs), else the verdict. The first fault is reported:
/// entities first, then records, versions and blobs, each in document order.
pub(super) fn check_links(
    ask: &mut Asker<'_>,
    access: &Access,
    validated: &Validated,
) -> Option<Result<(), WriteError>> {
    let mut first_fault: Option<WriteError> = None;
    let mut missing = |path: &LinkPath, fault: LinkFault, unresolved: Option<Unresolved>| {
        let unresolved = unresolved.map(Box::new);
        first_fault.get_or_insert_with(|| WriteError::InvalidLink {
            path: path.clone(),
            fault,
            unresolved,
        });
    };
    macro_rules! fault {
        ($path:expr, $fault:expr) => {
            missing($path, $fault, None)
        };
    }

    // The checks name entities without paths; the links carry them.
    for found in &validated.links {
        if let Link::Entity(link) = &found.link
            && ask.entity_known(&link.entity) == Some(false)
        {
            let unresolved = Unresolved::Entity(link.entity.clone());
            missing(&found.path, LinkFault::UnknownEntity, Some(unresolved));
        }
    }
    for check in &validated.checks.records {
        let key = RecordKey::new(check.link.entity.clone(), check.link.record_id);
        if let Some(target) = ask.latest(&key) {
            // A record the writer cannot read is reported as missing, so
            // that a failed link tells nothing about it. One the store does
            // not hold at all may be on its author's server.
            let unresolved = target.is_none().then(|| Unresolved::Record(key.clone()));
            match target.filter(|r| !r.is_tombstone() && access.can_read(r)) {
                None => missing(&check.path, LinkFault::RecordNotFound, unresolved),
                Some(r) if !of_types(r, check.record_types.as_deref()) => {
                    fault!(&check.path, LinkFault::WrongRecordType);
                }
                Some(_) => {}
            }
        }
    }
    for check in &validated.checks.versions {
        match ask.linked_version(&check.link) {
            Some(None) => {
                let unresolved = Some(Unresolved::Version(check.link.clone()));
                missing(&check.path, LinkFault::VersionNotFound, unresolved);
            }
            Some(Some(r)) if !of_types(r, check.record_types.as_deref()) => {
                fault!(&check.path, LinkFault::WrongRecordType);
            }
            _ => {}
        }
    }
    for check in &validated.checks.blobs {
        let Some(facts) = ask.blob(&check.hash) else {
            continue;
        };
        let available = match facts {
            None => Some(false),
            Some(facts) if facts.uploaded => Some(true),
            // Linked already: by a record the writer can read, or a stranger
            // who knows a hash could link (and so download) what it holds.
            Some(_) => ask.blob_linkers(&check.hash).map(|linkers| {
                linkers
                    .iter()
                    .any(|r| !r.is_tombstone() && access.can_read(r))
            }),
        };
        let Some(available) = available else {
            continue;
        };
        match facts.filter(|_| available) {
            None => fault!(&check.path, LinkFault::BlobUnavailable),
            Some(facts) => {
                if let Some(stated) = check.size.filter(|&size| size != facts.size) {
                    let actual = facts.size;
                    fault!(&check.path, LinkFault::BlobSizeMismatch { stated, actual });
                }
                if let Some(max) = check.max_size.filter(|&max| facts.size > max) {
                    let actual = facts.size;
                    fault!(&check.path, LinkFault::BlobTooLarge { max, actual });
                }
            }
        }
    }

    if ask.has_missing() {
        None
    } else {
        Some(first_fault.map_or(Ok(()), Err))
    }
}

/// Whether `record`'s type is one of `types` (any type when there is no list).
fn of_types(record: &Record, types: Option<&[RecordTypeRef]>) -> bool {
    types.is_none_or(|types| {
        types.iter().any(|t| {
            t.entity == record.type_link.entity && t.record_id == record.type_link.record_id
        })
    })
}
