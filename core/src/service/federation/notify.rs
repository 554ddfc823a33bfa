//! Notifications: which entities a new version concerns, what their
//! servers are sent, and when a failed delivery is tried again.
//!
//! A version the user authored is announced to every entity it concerns
//! (PROTOCOL.md §4): those in `notify`, else everyone in `read` (none when
//! it is public), and every entity its content links to (a mention; the
//! author of a record or version it links to, such as the post a reply
//! answers) that may read it. A deletion with action `local` concerns
//! nobody. The notification names the version only; the receiver fetches
//! it from the author's server and checks it ([`super::fetch`]), so a
//! notification's body is never trusted.
//!
//! Wire format: `POST {new_notification}`, signed by the author's server
//! ([`ServerKey`](crate::auth::ServerKey)) with the body's SHA-256, body
//! `{"versions": [{"entity", "record_id", "version_hash"}, …]}`: 1 to
//! [`MAX_NOTIFIED_VERSIONS`] version links, oldest first, each to a
//! version of a record the signing entity authored. Answer: `200
//! {"received": n, "refused": […]}` once every version is settled, each on
//! its own ([`NotificationAnswer`]); a problem when trying again may help.

use serde::{Deserialize, Serialize};

use std::fmt;

use crate::model::{
    DeletionAction, Entity, Link, Permission, ReadPermission, Record, RecordBody, RecordId,
    VersionHash, VersionLink,
};
use crate::schema::FoundLink;

/// The most versions one notification names.
pub const MAX_NOTIFIED_VERSIONS: usize = 100;
/// The largest notification body a server reads.
pub const MAX_NOTIFICATION_BYTES: usize = 64 * 1024;
/// The first retry of a failed delivery waits this long; each next one
/// twice as long, up to [`MAX_RETRY_DELAY_MS`].
pub const FIRST_RETRY_DELAY_MS: i64 = 30_000;
/// The longest wait between two attempts.
pub const MAX_RETRY_DELAY_MS: i64 = 3_600_000;
/// A delivery is given up once it has failed for this long: a day and two
/// hours, so that a server down for a whole day still receives it.
pub const GIVE_UP_AFTER_MS: i64 = 26 * 3_600_000;

/// Whether the recipients of `record` depend on its content links: only
/// when it is public or names whom to notify. Otherwise a content link's
/// entity hears of it only if it may read it, which its `read` list says
/// already.
pub fn audience_needs_links(record: &Record) -> bool {
    let permissions = &record.permissions;
    permissions.notify.is_some() || matches!(permissions.read, Some(ReadPermission::Public))
}

/// The entities whose servers hear of `record`, a version `user` wrote
/// (with `links`, as validation found them), sorted and without
/// duplicates. Versions of other authors' records concern nobody: their
/// author's server announces them.
pub fn recipients(user: &Entity, record: &Record, links: &[FoundLink]) -> Vec<Entity> {
    if !announces(user, record) {
        return Vec::new();
    }
    let author = &record.author.entity;
    let permissions = &record.permissions;
    let mut entities: Vec<Entity> = match (&permissions.notify, &permissions.read) {
        (Some(notify), _) => notify.iter().map(|link| link.entity.clone()).collect(),
        (None, Some(ReadPermission::Entities(read))) => {
            read.iter().map(|link| link.entity.clone()).collect()
        }
        (None, _) => Vec::new(),
    };
    entities.extend(
        links
            .iter()
            .filter(|found| found.in_content)
            .filter_map(|found| match &found.link {
                Link::Entity(link) => Some(&link.entity),
                Link::Record(link) => Some(&link.entity),
                Link::Version(link) => Some(&link.entity),
                Link::Tag(_) | Link::Blob(_) => None,
            })
            .filter(|entity| permissions.grants(author, entity, Permission::Read))
            .cloned(),
    );
    entities.retain(|entity| entity != author);
    entities.sort_unstable();
    entities.dedup();
    entities
}

/// Whether `record`, a version `user` wrote, is announced to anyone: a
/// version of the user's own record, and not a deletion on this server
/// only. Versions of other authors' records are their author's server's to
/// announce.
pub fn announces(user: &Entity, record: &Record) -> bool {
    let local = matches!(
        &record.body,
        RecordBody::Tombstone(no_content) if no_content.action == DeletionAction::Local
    );
    record.author.entity == *user && record.version.author.entity == *user && !local
}

/// Who keeps a copy of one of the user's records that a version replaces,
/// as its author's server knows it: the record's *audience*, every entity
/// whose server was sent a version of it and may read the latest. A later
/// version is sent to the whole audience besides its own recipients, so
/// the version that ends someone's access (unshared, a mention dropped,
/// deleted) reaches them, however many versions they were not sent in
/// between (`docs/federation.md` §4). Kept per record in the store
/// ([`crate::store::audience_statements`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// Everyone told may still read it: a public version.
    Everyone,
    /// Only these of those told may still read it (none for a deletion).
    Only(Vec<Entity>),
}

impl Audience {
    /// Who of those told of `record`, a version its author wrote, may
    /// still read it.
    pub fn after(record: &Record) -> Audience {
        let permissions = &record.permissions;
        match (&record.body, &permissions.read) {
            (RecordBody::Tombstone(_), _) | (_, None) => Audience::Only(Vec::new()),
            (_, Some(ReadPermission::Public)) => Audience::Everyone,
            (_, Some(ReadPermission::Entities(read))) => {
                let mut readers: Vec<Entity> =
                    read.iter().map(|link| link.entity.clone()).collect();
                readers.sort_unstable();
                readers.dedup();
                Audience::Only(readers)
            }
        }
    }

    /// Whether `entity` is among those who may still read it.
    pub fn keeps(&self, entity: &Entity) -> bool {
        match self {
            Audience::Everyone => true,
            Audience::Only(readers) => readers.binary_search(entity).is_ok(),
        }
    }
}

/// A notification's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notification {
    /// The versions notified, each of a record of the signer's own entity; 1 to
    /// [`MAX_NOTIFIED_VERSIONS`].
    pub versions: Vec<VersionLink>,
}

/// Why a notification is refused (`federation/400-invalid-notification`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotificationError {
    /// The body is not JSON of a notification; the parser's message.
    #[error("the body is not a notification: {0}")]
    Body(String),
    /// The notification names no version or more than [`MAX_NOTIFIED_VERSIONS`]; how many it names.
    #[error("a notification names 1 to {MAX_NOTIFIED_VERSIONS} versions, not {0}")]
    Count(usize),
    /// A version names another author than the signing entity.
    #[error("{signer} notified a version of {author}'s record; a server notifies its own entity's")]
    NotSigners {
        /// The entity whose server signed.
        signer: Entity,
        /// The author of the version it named.
        author: Entity,
    },
}

impl Notification {
    /// Reads a body signed by `signer`'s server: every version it names must
    /// be of a record `signer` authored.
    pub fn parse(body: &[u8], signer: &Entity) -> Result<Self, NotificationError> {
        let notification: Notification =
            serde_json::from_slice(body).map_err(|e| NotificationError::Body(e.to_string()))?;
        let count = notification.versions.len();
        if count == 0 || count > MAX_NOTIFIED_VERSIONS {
            return Err(NotificationError::Count(count));
        }
        if let Some(other) = notification.versions.iter().find(|v| v.entity != *signer) {
            return Err(NotificationError::NotSigners {
                signer: signer.clone(),
                author: other.entity.clone(),
            });
        }
        Ok(notification)
    }

    /// The body to POST to a peer's `new_notification` endpoint.
    pub fn to_json(&self) -> Vec<u8> {
        // Links of names, ids and hashes: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What a receiving server answers a notification it settled (`200`):
/// how many of its versions the store holds now (stored, stored before,
/// or received for a record the user deleted here), and each it refused
/// for good. A version is settled on its own: one refused never fails the
/// others. A failure that trying again may cure (a peer that did not
/// answer, a full quota, this server failing) is answered as a problem
/// for the whole notification instead, and the sender sends it again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationAnswer {
    /// The versions the store holds now.
    pub received: usize,
    /// The versions refused for good, with why; absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedVersion>,
}

/// One version of a notification the receiver refused for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedVersion {
    /// The record's id (its author is the notification's signer).
    pub record_id: RecordId,
    /// The version's hash.
    pub version_hash: VersionHash,
    /// The problem's HTTP status, as it would have been answered alone.
    pub status: u16,
    /// The problem's code (`version_conflict`, `unsolicited`, …).
    pub code: String,
    /// The problem's detail.
    #[serde(default)]
    pub detail: String,
}

impl RefusedVersion {
    /// `link` refused with `problem`.
    pub fn new(link: &VersionLink, problem: &crate::problem::Problem) -> Self {
        RefusedVersion {
            record_id: link.record_id,
            version_hash: link.version_hash,
            status: problem.status(),
            code: problem.kind.code().to_owned(),
            detail: problem.detail.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for RefusedVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} version {} refused ({} {}): {}",
            self.record_id, self.version_hash, self.status, self.code, self.detail
        )
    }
}

impl NotificationAnswer {
    /// The body of a `200` answer.
    pub fn to_json(&self) -> String {
        // Counts, ids, hashes and strings: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a receiver's `200` body. A receiver that answers only
    /// `{"received": n}` (or anything else) refused nothing.
    pub fn parse(body: &[u8]) -> Self {
        serde_json::from_slice(body).unwrap_or_default()
    }
}

impl From<&NotificationError> for crate::problem::Problem {
    fn from(error: &NotificationError) -> Self {
        crate::problem::Problem::new(crate::problem::ProblemType::InvalidNotification)
            .with_detail(error.to_string())
    }
}

/// When failed deliveries are tried again: after
/// [`first_delay_ms`](Self::first_delay_ms), then twice as long each time
/// up to [`max_delay_ms`](Self::max_delay_ms), until a delivery has failed
/// for [`give_up_after_ms`](Self::give_up_after_ms). The default is the
/// protocol's ([`FIRST_RETRY_DELAY_MS`], [`MAX_RETRY_DELAY_MS`],
/// [`GIVE_UP_AFTER_MS`]); tests shorten the delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The delay before the first retry, in milliseconds.
    pub first_delay_ms: i64,
    /// The longest delay between two retries, in milliseconds.
    pub max_delay_ms: i64,
    /// How long after its first attempt a delivery is given up, in milliseconds.
    pub give_up_after_ms: i64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            first_delay_ms: FIRST_RETRY_DELAY_MS,
            max_delay_ms: MAX_RETRY_DELAY_MS,
            give_up_after_ms: GIVE_UP_AFTER_MS,
        }
    }
}

impl RetryPolicy {
    /// When to try a delivery again after its `attempts`-th failure (1 for
    /// the first), at `now_ms`, for a version queued at `queued_at_ms`:
    /// `None` once it has failed for long enough. `jitter` (0 to 1) spreads
    /// the retries of deliveries that failed together by up to a fifth.
    pub fn retry_at(
        &self,
        attempts: u32,
        queued_at_ms: i64,
        now_ms: i64,
        jitter: f64,
    ) -> Option<i64> {
        if now_ms.saturating_sub(queued_at_ms) >= self.give_up_after_ms {
            return None;
        }
        let doublings = attempts.saturating_sub(1).min(20);
        let delay = self
            .first_delay_ms
            .saturating_mul(1 << doublings)
            .min(self.max_delay_ms)
            .max(1);
        let spread = (delay as f64 * 0.2 * jitter.clamp(0.0, 1.0)) as i64;
        Some(now_ms + delay + spread)
    }
}

/// [`RetryPolicy::retry_at`] of the default policy.
pub fn retry_at(attempts: u32, queued_at_ms: i64, now_ms: i64, jitter: f64) -> Option<i64> {
    RetryPolicy::default().retry_at(attempts, queued_at_ms, now_ms, jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(name: &str) -> Entity {
        name.parse().unwrap()
    }

    #[test]
    fn retries_back_off_to_an_hour_and_stop_after_a_day() {
        let at = |attempts| retry_at(attempts, 0, 1_000, 0.0).unwrap() - 1_000;
        assert_eq!(at(1), 30_000);
        assert_eq!(at(2), 60_000);
        assert_eq!(at(8), MAX_RETRY_DELAY_MS);
        assert_eq!(at(40), MAX_RETRY_DELAY_MS);
        assert!(retry_at(3, 0, GIVE_UP_AFTER_MS, 0.5).is_none());
        // Enough attempts fit in a day for a server down all day to be reached.
        let mut now = 0;
        let mut attempts = 0;
        while let Some(next) = retry_at(attempts + 1, 0, now, 1.0) {
            attempts += 1;
            now = next;
        }
        assert!(now >= 24 * 3_600_000, "retried until {now}");
        assert!(attempts > 20);
    }

    #[test]
    fn notifications_name_only_the_signers_versions() {
        let alice = entity("alice.example");
        let link = |e: &str| serde_json::json!({"entity": e, "record_id": "0".repeat(32), "version_hash": "a".repeat(64)});
        let body =
            serde_json::to_vec(&serde_json::json!({"versions": [link("alice.example")]})).unwrap();
        assert_eq!(
            Notification::parse(&body, &alice).unwrap().versions.len(),
            1
        );
        let body =
            serde_json::to_vec(&serde_json::json!({"versions": [link("carol.example")]})).unwrap();
        assert!(matches!(
            Notification::parse(&body, &alice),
            Err(NotificationError::NotSigners { .. })
        ));
        let body = serde_json::to_vec(&serde_json::json!({"versions": []})).unwrap();
        assert!(matches!(
            Notification::parse(&body, &alice),
            Err(NotificationError::Count(0))
        ));
        let many: Vec<_> = (0..=MAX_NOTIFIED_VERSIONS)
            .map(|_| link("alice.example"))
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({"versions": many})).unwrap();
        assert!(matches!(
            Notification::parse(&body, &alice),
            Err(NotificationError::Count(_))
        ));
        assert!(Notification::parse(b"[1]", &alice).is_err());
    }

    fn record(permissions: serde_json::Value, body: serde_json::Value) -> Record {
        let mut json = serde_json::json!({
            "author": {"entity": "alice.example"},
            "id": "0".repeat(32),
            "source": "self",
            "created_at": "2024-02-19T15:20:51.3590000Z",
            "version": {
                "author": {"entity": "alice.example"},
                "hash": "a".repeat(64),
                "created_at": "2024-02-19T15:20:51.3590000Z"
            },
            "permissions": permissions,
            "type": {"entity": "alice.example", "record_id": "1".repeat(32), "version_hash": "b".repeat(64)},
        });
        json.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        serde_json::from_value(json).unwrap()
    }

    fn mention(name: &str) -> FoundLink {
        FoundLink {
            path: crate::model::LinkPath::from_walk("$['content']['mentions'][*]".to_owned()),
            link: Link::Entity(crate::model::EntityLink::new(entity(name))),
            in_content: true,
            existential: false,
        }
    }

    fn names(entities: Vec<Entity>) -> Vec<String> {
        entities.into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn read_or_notify_and_readable_mentions_name_the_recipients() {
        let alice = entity("alice.example");
        let read = serde_json::json!({"read": [
            {"entity": "alice.example"}, {"entity": "bob.example"}, {"entity": "carol.example"}
        ]});
        let live = serde_json::json!({"content": {}});
        let message = record(read.clone(), live.clone());
        assert_eq!(
            names(recipients(&alice, &message, &[])),
            ["bob.example", "carol.example"]
        );
        // `notify` narrows it; a mention of someone who cannot read adds nobody.
        let mut narrowed = read.clone();
        narrowed["notify"] = serde_json::json!([{"entity": "bob.example"}]);
        let links = [mention("carol.example"), mention("dave.example")];
        assert_eq!(
            names(recipients(&alice, &record(narrowed, live.clone()), &links)),
            ["bob.example", "carol.example"]
        );
        // A public post notifies whom it mentions; a private one nobody.
        let public = record(serde_json::json!({"read": "public"}), live.clone());
        assert_eq!(
            names(recipients(&alice, &public, &[mention("dave.example")])),
            ["dave.example"]
        );
        assert!(
            recipients(
                &alice,
                &record(serde_json::json!({}), live.clone()),
                &[mention("bob.example")]
            )
            .is_empty()
        );
        // Another author's record, or a local deletion, concerns nobody here.
        assert!(recipients(&entity("bob.example"), &message, &[]).is_empty());
        let local = record(
            read.clone(),
            serde_json::json!({"no_content": {"action": "local", "links": []}}),
        );
        assert!(recipients(&alice, &local, &[]).is_empty());
        let deleted = record(
            read,
            serde_json::json!({"no_content": {"action": "delete", "links": []}}),
        );
        assert_eq!(recipients(&alice, &deleted, &[]).len(), 2);
    }
}
