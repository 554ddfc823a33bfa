//! Federation in the service (`docs/federation.md`): finding other
//! entities' servers, fetching and storing what they serve, receiving
//! notifications, answering `proxy_to`, and delivering the outbox.
//!
//! Everything here runs for one user of this server, whose server key
//! signs every request sent ([`Federation`]). What another server answers
//! is checked by [`crate::service::federation`] before anything of it is stored,
//! and stored through the same write jobs as the user's own records
//! ([`WriteRequest::receive`]), so a received version is validated against
//! its type, indexed and sent to the user's event streams like any other.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::auth::ServerKey;
use crate::auth::access::Access;
use crate::model::{
    BlobHash, BlobLink, Entity, Record, RecordDate, RecordId, RecordSource, VersionHash,
    VersionLink,
};
use crate::problem::{Problem, ProblemType};
use crate::schema::builtin::SYSTEM_ENTITY;
use crate::service::discovery::entity_served_here;
use crate::service::federation::entity::{
    discovery_request, entity_record_location, entity_record_request,
};
use crate::service::federation::notify::MAX_NOTIFICATION_BYTES;
use crate::service::federation::{
    Expected, Notification, NotificationAnswer, PeerAnswer, PeerError, PeerFailure, PeerMethod,
    PeerRequest, RECORD_ANSWER_BYTES, RefusedVersion, RemoteEntity, SMALL_ANSWER_BYTES, Signer,
    proxied_list, read_record, record_of_answer,
};
use crate::service::fresh::Fresh;
use crate::service::standing::Epoch;
use crate::store::{
    Statement, WriteOrigin, entity_record_sql, knows_entity_sql, latest_version_sql, read_version,
    received_usage_sql, server_key_sql, version_sql,
};
use crate::write::{RecordKey, Unresolved, WriteError, WriteRequest};

use sha2::{Digest, Sha256};

use crate::service::jobs::{Job, RecordWrite, Refused, received_bytes};
use crate::service::observe::NotificationReceipt;
use crate::service::route::RecordPath;
use crate::service::store::{RowExt, version_row};
use crate::service::{
    Caller, Context, Failure, Host, Outcome, Rate, Reply, Request, User, WriteFailure,
};

/// The most versions fetched back from one received version towards one
/// the store holds (`docs/federation.md` §6).
pub(crate) const MAX_PARENTS_FETCHED: usize = 64;
/// The most links resolved for one write, or for storing one received
/// version (its type, that type's own links).
pub(crate) const MAX_RESOLUTIONS_PER_WRITE: usize = 8;
/// How deep resolutions may nest: a received record's type, that type's
/// own type, and so on (a built-in type ends it at once).
pub(crate) const MAX_RESOLUTION_DEPTH: usize = 4;

/// Why federation could not do what it was asked.
#[derive(Debug)]
pub(crate) enum Trouble {
    /// Another server failed, or answered what cannot be used.
    Peer(PeerError),
    /// The store refused what was fetched.
    Refused(WriteError),
    /// This server failed.
    Failure(Failure),
}

impl From<PeerError> for Trouble {
    fn from(error: PeerError) -> Self {
        Trouble::Peer(error)
    }
}

impl From<Failure> for Trouble {
    fn from(failure: Failure) -> Self {
        Trouble::Failure(failure)
    }
}

impl fmt::Display for Trouble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trouble::Peer(error) => error.fmt(f),
            Trouble::Refused(error) => error.fmt(f),
            Trouble::Failure(failure) => match &failure.problem.detail {
                Some(detail) => write!(f, "{}: {detail}", failure.problem.kind.title()),
                None => f.write_str(failure.problem.kind.title()),
            },
        }
    }
}

impl Trouble {
    /// The failure a client sees.
    pub(crate) fn into_failure(self) -> Failure {
        match self {
            Trouble::Peer(error) => Problem::from(&error).into(),
            Trouble::Refused(error) => Problem::from(&error).into(),
            Trouble::Failure(failure) => failure,
        }
    }

    /// Whether what was asked is out of reach right now, and may be
    /// reached later: a server that cannot be reached or answers a `5xx`,
    /// not a name that resolves to no address.
    pub(crate) fn is_out_of_reach(&self) -> bool {
        match self {
            Trouble::Peer(error) => error.is_transient() && !error.names_nothing(),
            Trouble::Refused(_) | Trouble::Failure(_) => false,
        }
    }

    /// Whether trying again later may succeed: not for what the store
    /// refused, nor for a version this server refuses as it is (a `4xx`,
    /// such as one larger than the body limit); yes for this server
    /// failing or full (a `5xx`, a full quota included).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Trouble::Peer(error) => error.is_transient(),
            Trouble::Refused(_) => false,
            Trouble::Failure(failure) => failure.problem.status() >= 500,
        }
    }
}

/// A write failure's problem: busy is `server/503-unavailable`.
pub(in crate::service) fn write_failure(failure: &WriteFailure) -> Failure {
    match failure {
        WriteFailure::Busy => Failure::from(
            Problem::new(ProblemType::Unavailable).with_detail("too many writes are waiting"),
        )
        .with("retry-after", "1".to_owned()),
        WriteFailure::StorageFull(error) => Failure::storage_full(error),
        WriteFailure::Failed(_) => Failure::internal(failure),
    }
}

/// The user of this server who serves `entity`, among `users`: one with
/// that entity whose own Entity record points at this server
/// ([`entity_served_here`]). A user whose record points elsewhere does not
/// shadow the entity's own server: its records and notifications go there.
pub(in crate::service) async fn serving_user<H: Host>(
    host: &H,
    users: &[User],
    entity: &Entity,
) -> Result<Option<User>, Failure> {
    let Some(user) = users.iter().find(|user| user.entity == *entity) else {
        return Ok(None);
    };
    let Some(record) = stored_record(host, &entity_record_sql(user.id, &user.entity)).await? else {
        return Ok(None);
    };
    let base_url = &host.settings().base_url;
    Ok(entity_served_here(&record, entity, &user.name, base_url).then(|| user.clone()))
}

/// The version `statement` reads from the store (its first row), if any.
async fn stored_record<H: Host>(
    host: &H,
    statement: &Statement,
) -> Result<Option<Record>, Failure> {
    let rows = host.fetch(statement).await.map_err(Failure::internal)?;
    match rows.first() {
        None => Ok(None),
        Some(row) => {
            let (record, links) = version_row(row)?;
            Ok(Some(read_version(&record, &links)?.0))
        }
    }
}

/// `author/id` of a record, for messages.
fn record_key(record: &Record) -> String {
    format!("{}/{}", record.author.entity, record.id)
}

/// Where an entity's records are.
enum Author {
    /// A user of this server: read from their store.
    Local(User),
    /// Another server's entity.
    Remote(Box<RemoteEntity>),
}

/// `$call` (an expression of `$server`, awaited) against `$remote`'s
/// server; when it fails as if the entity had left that server
/// ([`as_if_moved`]), once more against the server the entity is found at
/// again ([`Federation::moved`]), if it is another. A macro, not a method
/// taking a closure: the closure's future would borrow its argument, which
/// async closures cannot yet say while keeping the future `Send`.
macro_rules! at_server {
    ($federation:expr, $remote:expr, |$server:ident| $call:expr) => {{
        let $server: &RemoteEntity = $remote;
        match $call {
            Err(trouble) if as_if_moved(&trouble) => match $federation.moved($server).await {
                Some(moved) => {
                    let $server = &moved;
                    $call
                }
                None => Err(trouble),
            },
            done => done,
        }
    }};
}

/// One user's server, talking to other servers at `now`.
pub(crate) struct Federation<'a, H: Host> {
    host: &'a H,
    user: &'a User,
    now: RecordDate,
    fresh: &'a Fresh,
    /// The host's epoch at the request, for its resident memo
    /// ([`Request::epoch`](crate::service::Request::epoch)).
    epoch: Option<Epoch>,
    /// The requests to other servers this may still send, and the bytes
    /// of answer it may still read: what one request (a write, a
    /// notification received) or one recipient's delivery may cost.
    requests_left: AtomicUsize,
    bytes_left: AtomicUsize,
}

/// The most requests to other servers one request or delivery makes.
pub(crate) const MAX_PEER_REQUESTS: usize = 256;
/// The most bytes of answers from other servers one request or delivery
/// reads.
pub(crate) const MAX_PEER_ANSWER_BYTES: usize = 32 * 1024 * 1024;

impl<'a, H: Host> Federation<'a, H> {
    pub(crate) fn new(
        host: &'a H,
        user: &'a User,
        now: RecordDate,
        fresh: &'a Fresh,
        epoch: Option<Epoch>,
    ) -> Self {
        Federation {
            host,
            user,
            now,
            fresh,
            epoch,
            requests_left: AtomicUsize::new(MAX_PEER_REQUESTS),
            bytes_left: AtomicUsize::new(MAX_PEER_ANSWER_BYTES),
        }
    }
}

impl<'a, H: Host> Federation<'a, H> {
    /// The user's server, answering `request`: at its time, with its
    /// randomness and the host's epoch at it.
    pub(crate) fn for_request(host: &'a H, user: &'a User, request: &'a Request<'_>) -> Self {
        Federation::new(host, user, request.now, &request.fresh, request.epoch)
    }
}

impl<H: Host> Federation<'_, H> {
    /// The user's server key.
    async fn key(&self) -> Result<ServerKey, Failure> {
        let rows = self
            .host
            .fetch(&server_key_sql(self.user.id))
            .await
            .map_err(Failure::internal)?;
        let row = rows.first().ok_or_else(|| {
            Failure::internal(format!("user {} has no server key", self.user.name))
        })?;
        ServerKey::from_base64(row.text(0)?)
            .ok_or_else(|| Failure::internal("a stored server key does not decode"))
    }

    /// Sends a request within the budget; a redirect is refused, never
    /// followed.
    async fn send(&self, mut request: PeerRequest) -> Result<PeerAnswer, PeerError> {
        let (requests, bytes) = (
            self.requests_left.load(Ordering::Relaxed),
            self.bytes_left.load(Ordering::Relaxed),
        );
        if requests == 0 || bytes == 0 {
            return Err(PeerError::Invalid(format!(
                "more than {MAX_PEER_REQUESTS} requests or {MAX_PEER_ANSWER_BYTES} bytes of \
                 answers from other servers for one request"
            )));
        }
        request.max_answer_bytes = request.max_answer_bytes.min(bytes);
        let answer = self.host.send(request).await;
        let read = answer.as_ref().map_or(0, |answer| answer.body.len());
        self.requests_left.store(requests - 1, Ordering::Relaxed);
        self.bytes_left
            .store(bytes.saturating_sub(read), Ordering::Relaxed);
        let answer = answer?;
        if (300..400).contains(&answer.status) {
            let location = answer.header("location").unwrap_or_default().to_owned();
            return Err(PeerFailure::Redirected { location }.into());
        }
        Ok(answer)
    }

    /// Sends a request signed as the user.
    async fn send_signed(
        &self,
        method: PeerMethod,
        url: &str,
        body: Option<Vec<u8>>,
        max_answer_bytes: usize,
    ) -> Result<PeerAnswer, Trouble> {
        let key = self.key().await?;
        let signer = Signer {
            dialect: self.host.settings().dialect,
            entity: &self.user.entity,
            key: &key,
            now_ms: self.now.unix_millis(),
            fresh: self.fresh,
        };
        let request = signer.request(method, url, body, max_answer_bytes)?;
        Ok(self.send(request).await?)
    }

    /// `entity`'s server, as its Entity record describes it: the one the
    /// store holds, else (or with `rediscover`) found by discovery and
    /// stored with `source: "resolution"`.
    pub(crate) async fn entity(
        &self,
        entity: &Entity,
        rediscover: bool,
    ) -> Result<RemoteEntity, Trouble> {
        if !rediscover && let Some(remote) = self.stored_entity(entity).await? {
            return Ok(remote);
        }
        let remote = self.discover(entity).await?;
        self.keep(&remote).await?;
        Ok(remote)
    }

    /// `entity`'s server as the Entity record the store holds describes it.
    pub(crate) async fn stored_entity(
        &self,
        entity: &Entity,
    ) -> Result<Option<RemoteEntity>, Failure> {
        Ok(self
            .stored_entity_record(entity)
            .await?
            .and_then(|record| RemoteEntity::from_record(entity, record).ok()))
    }

    /// `entity`'s server, found by discovery now; nothing is stored.
    pub(crate) async fn discover(&self, entity: &Entity) -> Result<RemoteEntity, Trouble> {
        let asked = discovery_request(entity);
        let url = asked.url.clone();
        let answer = self.send(asked).await?;
        let location = entity_record_location(self.host.settings().dialect, &url, &answer)?;
        let answer = self.send(entity_record_request(&location)).await?;
        let record = record_of_answer(&location, &answer)?;
        Ok(RemoteEntity::from_record(entity, record)?)
    }

    /// Stores a discovered Entity record with the versions the store lacks
    /// before it. One that does not continue the stored chain (the entity
    /// started its Entity record again) is used, not stored.
    pub(crate) async fn keep(&self, remote: &RemoteEntity) -> Result<(), Trouble> {
        let author = Author::Remote(Box::new(remote.clone()));
        match self
            .store_chain(
                &author,
                remote.record.clone(),
                RecordSource::Resolution,
                0,
                false,
            )
            .await
        {
            Ok(()) | Err(Trouble::Refused(WriteError::VersionConflict { .. })) => Ok(()),
            Err(trouble) => Err(trouble),
        }
    }

    /// The Entity record the user's store holds for `entity`.
    async fn stored_entity_record(&self, entity: &Entity) -> Result<Option<Record>, Failure> {
        stored_record(self.host, &entity_record_sql(self.user.id, entity)).await
    }

    /// Stores versions of one record received from its author's server,
    /// oldest first, in one job: all or none.
    async fn store(
        &self,
        versions: Vec<Record>,
        source: RecordSource,
        chain_start: bool,
        shared_again: bool,
    ) -> Result<(), Trouble> {
        if source.is_notification() {
            self.check_quota(source, &versions).await?;
        }
        let access = Access::Owner {
            entity: self.user.entity.clone(),
        };
        let last = versions.len().saturating_sub(1);
        let writes = versions
            .into_iter()
            .enumerate()
            .map(|(i, record)| {
                let mut request = WriteRequest::receive(record, source, chain_start && i == 0);
                // The oldest version replaces the deletion; the rest follow it.
                if i == 0 && shared_again {
                    request = request.shared_again();
                }
                RecordWrite {
                    // The version notified is the last; those before it
                    // fill its chain.
                    request: match i == last && source.is_notification() {
                        true => request.notified(),
                        false => request,
                    },
                    access: access.clone(),
                    origin: WriteOrigin::default(),
                    fresh_id: self.fresh.record_id(),
                    requested_at: self.now,
                }
            })
            .collect();
        let job = Job::Writes {
            user: self.user.clone(),
            writes,
        };
        match crate::service::resident::run(self.host, job, self.epoch).await {
            Err(failure) => Err(write_failure(&failure).into()),
            Ok(Err(Refused::Write(error))) => Err(Trouble::Refused(error)),
            Ok(Err(refused)) => Err(Failure::internal(refused).into()),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// Refuses `versions`, received with `source`, if storing them would
    /// pass the user's quota for that source: `federation/507-quota-exceeded`.
    /// The usage is read before the job that stores them, which counts them
    /// in its commit: deliveries to one user that run at once may each pass
    /// the check, so a quota can be passed by what they carry together (a
    /// notification's versions and their chains, each version within the
    /// JSON body limit).
    async fn check_quota(&self, source: RecordSource, versions: &[Record]) -> Result<(), Trouble> {
        let limits = &self.host.settings().limits;
        let quota = match source {
            RecordSource::Notification => limits.received_from_known,
            _ => limits.received_from_strangers,
        };
        let Some(quota) = quota else {
            return Ok(());
        };
        let rows = self
            .host
            .fetch(&received_usage_sql(self.user.id, source))
            .await
            .map_err(Failure::internal)?;
        let (stored_versions, stored_bytes) = match rows.first() {
            Some(row) => (
                u64::try_from(row.integer(0).map_err(Failure::from)?).unwrap_or_default(),
                u64::try_from(row.integer(1).map_err(Failure::from)?).unwrap_or_default(),
            ),
            None => (0, 0),
        };
        let incoming = (
            versions.len() as u64,
            versions.iter().map(received_bytes).sum(),
        );
        if quota.admits((stored_versions, stored_bytes), incoming) {
            return Ok(());
        }
        let whom = match source {
            RecordSource::Notification => "people it knows",
            _ => "servers it has never linked to",
        };
        Err(Failure::from(
            Problem::new(ProblemType::QuotaExceeded).with_detail(format!(
                "{}'s store holds {stored_versions} versions ({stored_bytes} bytes) from {whom}; \
             its quota is {} versions ({} bytes)",
                self.user.entity, quota.versions, quota.bytes
            )),
        )
        .into())
    }

    /// Refuses a fetched version larger than this server's JSON body limit:
    /// no app here could have written it (`federation/413-version-too-large`).
    fn check_size(&self, record: &Record) -> Result<(), Trouble> {
        let Some(max) = self.host.settings().limits.json_body_bytes else {
            return Ok(());
        };
        let bytes = received_bytes(record);
        if bytes <= max {
            return Ok(());
        }
        Err(Failure::from(
            Problem::new(ProblemType::VersionTooLarge).with_detail(format!(
                "{} version {} is {bytes} bytes; this server takes at most {max}",
                record_key(record),
                record.version.hash
            )),
        )
        .into())
    }

    /// Where `entity`'s records are: the store of the user of this server
    /// who serves it ([`serving_user`]), or another server.
    async fn author(&self, entity: &Entity) -> Result<Author, Trouble> {
        let users = self.host.users().await.map_err(Failure::internal)?;
        match serving_user(self.host, &users, entity).await? {
            Some(user) => Ok(Author::Local(user)),
            None => Ok(Author::Remote(Box::new(self.entity(entity, false).await?))),
        }
    }

    /// The bytes of the blob `link` names, as `record` (a version of
    /// another server's entity's record) links it, read from the author's
    /// server with the user's signature, as an app of theirs would read it
    /// there, at most `max` bytes; checked against the link: its SHA-256,
    /// and its size when the link gives one. `None` when the author is a
    /// user of this server (their blobs are kept here already).
    pub(crate) async fn fetch_blob(
        &self,
        record: &Record,
        link: &BlobLink,
        max: usize,
    ) -> Result<Option<Vec<u8>>, Trouble> {
        let Author::Remote(remote) = self.author(&record.author.entity).await? else {
            return Ok(None);
        };
        let bytes = at_server!(self, &*remote, |server| self
            .fetch_blob_from(server, record, link, max)
            .await)?;
        Ok(Some(bytes))
    }

    /// [`fetch_blob`](Self::fetch_blob) from `remote`'s server as its
    /// Entity record says.
    async fn fetch_blob_from(
        &self,
        remote: &RemoteEntity,
        record: &Record,
        link: &BlobLink,
        max: usize,
    ) -> Result<Vec<u8>, Trouble> {
        let url = remote
            .version_blob_url(
                &record.author.entity,
                &record.id,
                &record.version.hash,
                &link.hash,
                link.name.as_str(),
            )
            .ok_or_else(|| {
                PeerError::Invalid(format!(
                    "{}'s server lists no `record_version_blob` endpoint",
                    remote.entity
                ))
            })?;
        let answer = self.send_signed(PeerMethod::Get, &url, None, max).await?;
        if answer.status != 200 {
            return Err(PeerError::status(&url, answer.status).into());
        }
        let size = answer.body.len() as u64;
        if link.size.is_some_and(|declared| declared != size) {
            return Err(PeerError::Invalid(format!(
                "{url} answered {size} bytes; the link says {}",
                link.size.unwrap_or_default()
            ))
            .into());
        }
        if BlobHash::from_bytes(Sha256::digest(&answer.body).into()) != link.hash {
            return Err(PeerError::Invalid(format!(
                "{url} answered bytes whose SHA-256 is not the link's"
            ))
            .into());
        }
        Ok(answer.body)
    }

    /// `author`'s record `id` from the author's store: version `hash`, or
    /// without one its latest.
    async fn fetch(
        &self,
        author: &Author,
        id: &RecordId,
        hash: Option<&VersionHash>,
    ) -> Result<Record, Trouble> {
        let remote = match author {
            Author::Remote(remote) => remote,
            Author::Local(owner) => {
                let statement = match hash {
                    Some(hash) => version_sql(owner.id, &owner.entity, id, hash),
                    None => latest_version_sql(owner.id, &owner.entity, id),
                };
                return self.local_record(owner, statement).await;
            }
        };
        at_server!(self, &**remote, |server| self
            .fetch_from(server, id, hash)
            .await)
    }

    /// [`fetch`](Self::fetch) from `remote`'s server as its Entity record says.
    async fn fetch_from(
        &self,
        remote: &RemoteEntity,
        id: &RecordId,
        hash: Option<&VersionHash>,
    ) -> Result<Record, Trouble> {
        let url = match hash {
            Some(hash) => remote.version_url(&remote.entity, id, hash),
            None => remote.record_url(&remote.entity, id),
        };
        // The entity's Entity record is public, and read unsigned as
        // discovery reads it (its versions before the latest too): a signed
        // read makes its server discover this user's entity first, which
        // may ask the same of this server, and so on, when neither knows
        // the other's current record yet.
        let answer = match *id == remote.record.id {
            true => self.send(entity_record_request(&url)).await?,
            false => {
                self.send_signed(PeerMethod::Get, &url, None, RECORD_ANSWER_BYTES)
                    .await?
            }
        };
        let expected = Expected {
            author: &remote.entity,
            id,
            hash,
        };
        let record = read_record(&url, &answer, expected)?;
        self.check_size(&record)?;
        Ok(record)
    }

    /// `known`'s entity discovered again, when its server failed or
    /// answered as if it did not know the entity ([`as_if_moved`]): the
    /// entity may have moved to another server, whose Entity record says
    /// where. At most once a minute per entity ([`Rate::Rediscovery`]).
    /// The newer Entity record is stored and answered; `None` when the
    /// entity cannot be discovered again now or its record is unchanged.
    async fn moved(&self, known: &RemoteEntity) -> Option<RemoteEntity> {
        let entity = &known.entity;
        crate::service::resident::count(self.host, Rate::Rediscovery(entity), self.now)
            .await
            .ok()?;
        let found = self.discover(entity).await.ok()?;
        if found.record.version.hash == known.record.version.hash {
            return None;
        }
        // Keeping it fetches what its chain lacks: a fetch within a fetch.
        Box::pin(self.keep(&found)).await.ok()?;
        Some(found)
    }

    /// A record of `owner`, another user of this server, read from their
    /// store as this user's entity may read it.
    async fn local_record(&self, owner: &User, statement: Statement) -> Result<Record, Trouble> {
        let reader = Access::Server {
            entity: self.user.entity.clone(),
        };
        stored_record(self.host, &statement)
            .await?
            .filter(|record| record.author.entity == owner.entity && reader.can_read(record))
            .ok_or_else(|| {
                Trouble::Peer(PeerError::NotFound {
                    url: format!("{} (a user of this server)", owner.entity),
                })
            })
    }

    /// Receives the versions of one notification, oldest first, each on
    /// its own: a version refused for good is listed in the answer and the
    /// rest go on; a failure that trying again may cure ends the whole
    /// notification, to be sent again (what was stored stays stored, and
    /// is found so then). Also answers the first refusal's failure whole.
    pub(crate) async fn receive_all(
        &self,
        links: &[VersionLink],
        source: RecordSource,
    ) -> Result<(NotificationAnswer, Option<Failure>), Trouble> {
        let mut answer = NotificationAnswer::default();
        let mut first_refusal = None;
        for link in links {
            match self.receive(link, source).await {
                Ok(()) => answer.received += 1,
                Err(trouble) if trouble.is_transient() => return Err(trouble),
                Err(trouble) => {
                    let failure = trouble.into_failure();
                    answer
                        .refused
                        .push(RefusedVersion::new(link, &failure.problem));
                    first_refusal.get_or_insert(failure);
                }
            }
        }
        Ok((answer, first_refusal))
    }

    /// Receives the version `link` names from its author's server, with
    /// what the store lacks to hold it (§4 of the design).
    async fn receive(&self, link: &VersionLink, source: RecordSource) -> Result<(), Trouble> {
        let stored = version_sql(
            self.user.id,
            &link.entity,
            &link.record_id,
            &link.version_hash,
        );
        if !self
            .host
            .fetch(&stored)
            .await
            .map_err(Failure::internal)?
            .is_empty()
        {
            // Delivered before: nothing to fetch.
            return Ok(());
        }
        let author = self.author(&link.entity).await?;
        let held = self.held(&link.entity, &link.record_id).await?;
        let record = match self
            .fetch(&author, &link.record_id, Some(&link.version_hash))
            .await
        {
            // The author's server does not show this user the version it
            // announced. Either the user's access ended (unshared, no
            // longer mentioned), and the copy here goes with it (a copy
            // deleted here already stays as it is); or this notification
            // came again after a later version that shared the record again
            // was stored (a retried delivery whose answer was lost), and
            // nothing is to be done.
            Err(Trouble::Peer(PeerError::NotFound { .. })) if held.is_some() => {
                if self.holds_current(&author, &link.record_id).await? {
                    return Ok(());
                }
                return self.access_ended(&link.entity, &link.record_id).await;
            }
            fetched => fetched?,
        };
        // What the user may not read is of no use here: a server could
        // fill the store with it.
        let reader = Access::Server {
            entity: self.user.entity.clone(),
        };
        if !reader.can_read(&record) {
            return Err(PeerError::Invalid(format!(
                "{} is not readable by {}",
                record_key(&record),
                self.user.entity
            ))
            .into());
        }
        let shared_again = match &held {
            Some(deleted) if deleted.is_deleted_here_by(&self.user.entity) => {
                self.shared_again(&author, &record).await?
            }
            _ => false,
        };
        self.store_chain(&author, record, source, 0, shared_again)
            .await
    }

    /// Whether the store holds the version of `author`'s record `id` that
    /// their server shows this user now (`false` when it shows none).
    async fn holds_current(&self, author: &Author, id: &RecordId) -> Result<bool, Trouble> {
        let current = match self.fetch(author, id, None).await {
            Ok(current) => current,
            Err(Trouble::Peer(PeerError::NotFound { .. })) => return Ok(false),
            Err(trouble) => return Err(trouble),
        };
        let stored = version_sql(
            self.user.id,
            &current.author.entity,
            id,
            &current.version.hash,
        );
        let rows = self.host.fetch(&stored).await.map_err(Failure::internal)?;
        Ok(!rows.is_empty())
    }

    /// The latest version of another entity's record the store holds.
    async fn held(&self, entity: &Entity, id: &RecordId) -> Result<Option<Record>, Trouble> {
        let statement = latest_version_sql(self.user.id, entity, id);
        Ok(stored_record(self.host, &statement).await?)
    }

    /// Deletes the store's copy of `entity`'s record `id` here only (a
    /// `local` deletion by the user): its author's server said the user
    /// may no longer read it. If it is shared with the user again, the
    /// version that does so replaces this deletion
    /// ([`WriteRequest::shared_again`]).
    async fn access_ended(&self, entity: &Entity, id: &RecordId) -> Result<(), Trouble> {
        let key = RecordKey {
            entity: entity.clone(),
            record_id: *id,
        };
        let request = WriteRequest::delete(key, br#"{"no_content": {"action": "local"}}"#)
            .map_err(Trouble::Refused)?;
        let job = Job::Writes {
            user: self.user.clone(),
            writes: vec![RecordWrite {
                request,
                access: Access::Owner {
                    entity: self.user.entity.clone(),
                },
                origin: WriteOrigin::default(),
                fresh_id: self.fresh.record_id(),
                requested_at: self.now,
            }],
        };
        match crate::service::resident::run(self.host, job, self.epoch).await {
            Err(failure) => Err(write_failure(&failure).into()),
            // Deleted meanwhile, by the user or another delivery: so be it.
            Ok(Err(Refused::Write(WriteError::Deleted(_) | WriteError::NotFound(_)))) => Ok(()),
            Ok(Err(Refused::Write(error))) => Err(Trouble::Refused(error)),
            Ok(Err(refused)) => Err(Failure::internal(refused).into()),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// Whether `record`, a version the user may read of a record they
    /// deleted here (`deleted`), was shared with them again: between it and
    /// the versions the store holds lies one the author's server does not
    /// show them, so their access ended on the way, whether they were told
    /// (their server's deletion) or not (versions they were not sent in
    /// between, such as a public one that names nobody). A chain that goes
    /// back to a version the store holds while staying readable only went
    /// on, and the record stays deleted here, as the user chose. Costs a
    /// request per version walked back, at most [`MAX_PARENTS_FETCHED`]
    /// (past that, it stays deleted).
    async fn shared_again(&self, author: &Author, record: &Record) -> Result<bool, Trouble> {
        let mut parent = record.version.parent_hash;
        for _ in 0..MAX_PARENTS_FETCHED {
            let Some(hash) = parent else {
                return Ok(false);
            };
            let stored = version_sql(self.user.id, &record.author.entity, &record.id, &hash);
            if !(self.host.fetch(&stored).await)
                .map_err(Failure::internal)?
                .is_empty()
            {
                return Ok(false);
            }
            parent = match self.fetch(author, &record.id, Some(&hash)).await {
                Ok(older) => older.version.parent_hash,
                Err(Trouble::Peer(PeerError::NotFound { .. })) => return Ok(true),
                Err(trouble) => return Err(trouble),
            };
        }
        Ok(false)
    }

    /// Stores `record`, fetching the versions between it and the latest
    /// the store holds, and resolving its type, as the store asks.
    ///
    /// A record the store holds none of starts at the oldest version the
    /// user may read: one shared with the user after versions that were
    /// not is stored from there. `shared_again` marks `record` as the
    /// version that shares a record the user lost access to again
    /// ([`WriteRequest::shared_again`]). A live copy the chain cannot reach
    /// (versions between it and `record` the user may not read) is deleted
    /// here, as access that ended, and the versions fetched replace it.
    async fn store_chain(
        &self,
        author: &Author,
        record: Record,
        source: RecordSource,
        depth: usize,
        mut shared_again: bool,
    ) -> Result<(), Trouble> {
        let (entity, id) = (record.author.entity.clone(), record.id);
        let mut chain = vec![record];
        let mut chain_start = false;
        let mut resolutions = 0;
        loop {
            match self
                .store(chain.clone(), source, chain_start, shared_again)
                .await
            {
                Err(Trouble::Refused(WriteError::MissingParent { parent })) => {
                    if chain.len() > MAX_PARENTS_FETCHED {
                        if chain_start {
                            // The store holds older versions than the gap:
                            // the chain cannot start where it was cut.
                            return Err(PeerError::Invalid(format!(
                                "more than {MAX_PARENTS_FETCHED} versions of {} are missing here",
                                record_key(&chain[0])
                            ))
                            .into());
                        }
                        chain_start = true;
                        continue;
                    }
                    match self.fetch(author, &id, Some(&parent)).await {
                        Ok(older) => chain.insert(0, older),
                        // The user may not read the versions before: the
                        // chain starts here, if the store holds none.
                        Err(Trouble::Peer(PeerError::NotFound { .. })) if !chain_start => {
                            chain_start = true;
                        }
                        // It holds an older copy, and versions since are not
                        // shown to the user: their access ended meanwhile,
                        // unannounced (the version that ended it followed
                        // one that concerned nobody here, such as a public
                        // one), and the record was shared with them again.
                        // The copy goes as if they had been told, and the
                        // versions fetched replace it.
                        Err(Trouble::Peer(PeerError::NotFound { .. })) if !shared_again => {
                            self.access_ended(&entity, &id).await?;
                            shared_again = true;
                        }
                        Err(trouble) => return Err(trouble),
                    }
                }
                Err(Trouble::Refused(WriteError::InvalidLink {
                    unresolved: Some(unresolved),
                    ..
                })) if resolutions < MAX_RESOLUTIONS_PER_WRITE => {
                    resolutions += 1;
                    Box::pin(self.resolve_at(&unresolved, depth + 1)).await?;
                }
                done => return done,
            }
        }
    }

    /// Fetches from its author's server, checks and stores what a link
    /// names that the store lacks: an entity's Entity record, a record's
    /// latest version, or a version. Only another entity's can be.
    pub(crate) async fn resolve(&self, unresolved: &Unresolved) -> Result<(), Trouble> {
        self.resolve_at(unresolved, 0).await
    }

    /// [`resolve`](Self::resolve) `depth` resolutions deep.
    async fn resolve_at(&self, unresolved: &Unresolved, depth: usize) -> Result<(), Trouble> {
        if depth > MAX_RESOLUTION_DEPTH {
            return Err(PeerError::Invalid(format!(
                "resolutions nest more than {MAX_RESOLUTION_DEPTH} deep"
            ))
            .into());
        }
        let foreign = |entity: &Entity| {
            (*entity != self.user.entity && entity.as_str() != SYSTEM_ENTITY)
                .then_some(())
                .ok_or_else(|| {
                    Trouble::Peer(PeerError::NotFound {
                        url: format!("{entity}: not another server's"),
                    })
                })
        };
        match unresolved {
            Unresolved::Entity(entity) => {
                foreign(entity)?;
                self.entity(entity, false).await.map(drop)
            }
            Unresolved::Record(key) => {
                foreign(&key.entity)?;
                let author = self.author(&key.entity).await?;
                let record = self.fetch(&author, &key.record_id, None).await?;
                self.store_chain(&author, record, RecordSource::Resolution, depth, false)
                    .await
            }
            Unresolved::Version(link) => {
                foreign(&link.entity)?;
                let author = self.author(&link.entity).await?;
                let record = self
                    .fetch(&author, &link.record_id, Some(&link.version_hash))
                    .await?;
                self.store_chain(&author, record, RecordSource::Resolution, depth, false)
                    .await
            }
        }
    }

    /// POSTs a notification's `body` to `remote`'s notification endpoint:
    /// the URL and the answer. An answer `404` (the server does not know
    /// the recipient) or `5xx` is an error here, so that the recipient is
    /// looked for again ([`as_if_moved`]).
    async fn send_notification(
        &self,
        remote: &RemoteEntity,
        body: Vec<u8>,
    ) -> Result<(String, PeerAnswer), Trouble> {
        let url = remote.endpoints.new_notification.clone();
        let answer = self
            .send_signed(PeerMethod::Post, &url, Some(body), SMALL_ANSWER_BYTES)
            .await?;
        // As if the entity had left that server: it answers that it does
        // not know the user (`404`), or fails (`5xx`: a proxy in front of
        // a server that is gone answers `502`).
        match answer.status {
            404 => Err(PeerError::NotFound { url }.into()),
            status @ 500.. => Err(PeerError::Status { url, status }.into()),
            _ => Ok((url, answer)),
        }
    }

    /// Sends `versions` of the user's records to `recipient`'s server:
    /// its answer says which it refused for good.
    pub(crate) async fn notify(
        &self,
        recipient: &Entity,
        versions: Vec<VersionLink>,
    ) -> Result<NotificationAnswer, Trouble> {
        let remote = self.entity(recipient, false).await?;
        let body = Notification { versions }.to_json();
        let (url, answer) = at_server!(self, &remote, |server| self
            .send_notification(server, body.clone())
            .await)?;
        match answer.status {
            200..=299 => Ok(NotificationAnswer::parse(&answer.body)),
            429 => Err(PeerError::of_answer(&url, 429, answer.header("retry-after")).into()),
            status => {
                let detail = serde_json::from_slice::<serde_json::Value>(&answer.body)
                    .ok()
                    .and_then(|problem| problem.get("detail")?.as_str().map(str::to_owned));
                Err(match detail {
                    Some(detail) if status == 401 => PeerError::Unauthenticated { url, detail },
                    Some(detail) if (400..500).contains(&status) => {
                        PeerError::Invalid(format!("{url} refused the notification: {detail}"))
                    }
                    _ => PeerError::Status { url, status },
                }
                .into())
            }
        }
    }
}

/// Whether `trouble` is what a server the entity left would cause: it
/// cannot be reached, or answers that it has no such record or user
/// (`404`). Such a failure is worth discovering the entity again
/// ([`Federation::moved`]).
fn as_if_moved(trouble: &Trouble) -> bool {
    match trouble {
        Trouble::Peer(error) => error.is_transient() || matches!(error, PeerError::NotFound { .. }),
        Trouble::Refused(_) | Trouble::Failure(_) => false,
    }
}

/// `POST …/notifications`: another entity's server announces versions of
/// its entity's records (`docs/federation.md` §4). Each is fetched from
/// that server and checked before it is stored; the answer comes once
/// every one is stored (or was already).
pub(in crate::service) async fn new_notification<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    body: H::Body,
) -> Outcome<H::Stream> {
    let body = cx
        .json_body_within(body, Some(MAX_NOTIFICATION_BYTES as u64))
        .await?;
    let caller = cx
        .authenticate(user, Some(&Sha256::digest(&body).into()))
        .await?;
    let sender = match caller.access {
        Access::Server { entity } => entity,
        Access::Anonymous => {
            return Err(Problem::new(ProblemType::MissingAuthorization)
                .with_detail("a notification is signed by the sending entity's server")
                .into());
        }
        Access::Owner { .. } | Access::App { .. } => {
            return Err(Problem::new(ProblemType::Forbidden)
                .with_detail("only another entity's server sends notifications, not an app")
                .into());
        }
    };
    if caller.signed_content_sha256.is_none() {
        return Err(Problem::new(ProblemType::InvalidSignature)
            .with_detail("a server signs its notification's body (x-svc-content-sha256)")
            .into());
    }
    cx.rate(Rate::Notification {
        sender: &sender,
        user: user.id,
    })
    .await?;
    let notification = Notification::parse(&body, &sender).map_err(|e| Problem::from(&e))?;
    let knows = cx
        .fetch(&knows_entity_sql(user.id, &user.entity, &sender))
        .await?;
    let source = match knows.is_empty() {
        true => RecordSource::NotificationUnknown,
        false => RecordSource::Notification,
    };
    let federation = Federation::for_request(cx.host, user, cx.request);
    let (answer, first_refusal) = federation
        .receive_all(&notification.versions, source)
        .await
        .map_err(Trouble::into_failure)?;
    match first_refusal {
        // Nothing was taken: the problem, as a single version's would be.
        Some(failure) if answer.received == 0 => Err(failure.with_refused_notification(answer)),
        _ => {
            let mut reply = Reply::json(200, answer.to_json());
            reply.notification = Some(NotificationReceipt::answered(&answer));
            Ok(reply)
        }
    }
}

/// Delivers versions of `author`'s records to `recipient`, another user of
/// this server: what receiving them over HTTP would do, without the HTTP.
/// Run where `recipient`'s writes run ([`Peers::hand_over`](crate::service::Peers::hand_over)).
pub async fn receive_locally<H: Host>(
    host: &H,
    author: &User,
    recipient: &User,
    links: &[VersionLink],
    now: RecordDate,
    fresh: &Fresh,
) -> Result<NotificationAnswer, String> {
    receive_here(host, author, recipient, links, now, fresh)
        .await
        .map_err(|trouble| trouble.to_string())
}

/// [`receive_locally`], its failure as it is.
pub(in crate::service) async fn receive_here<H: Host>(
    host: &H,
    author: &User,
    recipient: &User,
    links: &[VersionLink],
    now: RecordDate,
    fresh: &Fresh,
) -> Result<NotificationAnswer, Trouble> {
    let knows = host
        .fetch(&knows_entity_sql(
            recipient.id,
            &recipient.entity,
            &author.entity,
        ))
        .await
        .map_err(Failure::internal)?;
    let source = match knows.is_empty() {
        true => RecordSource::NotificationUnknown,
        false => RecordSource::Notification,
    };
    let (answer, _) = Federation::new(host, recipient, now, fresh, None)
        .receive_all(links, source)
        .await?;
    Ok(answer)
}

/// A read with `proxy_to` (`docs/federation.md` §5): answered by
/// `entity`'s server, asked as the user; `record` for a single record,
/// else the list with the request's other parameters. Only the user's own
/// callers (the owner, an authorized app) may proxy, and an app sees only
/// what its grant covers; nothing is stored. Only `entity`'s own records
/// are answered: a record of another author is asked of that author's
/// server, and one in a list is dropped.
pub(in crate::service) async fn proxy<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    caller: &Caller,
    entity: &Entity,
    record: Option<&RecordPath>,
) -> Outcome<H::Stream> {
    match &caller.access {
        Access::Owner { .. } | Access::App { .. } => {}
        Access::Anonymous => {
            return Err(Problem::new(ProblemType::MissingAuthorization)
                .with_detail("`proxy_to` asks another server as the user: sign the request")
                .into());
        }
        Access::Server { .. } => {
            return Err(Problem::new(ProblemType::Forbidden)
                .with_detail("a server's request is not proxied further")
                .into());
        }
    }
    // A server vouches for its own entity's records only: another author's
    // record is asked of that author's server (`proxy_to={author}`).
    if let Some(path) = record
        && path.entity != *entity
    {
        return Err(Problem::new(ProblemType::InvalidParameter)
            .with_detail(format!(
                "proxy_to={entity} answers only {entity}'s own records; for a record of {}, \
                 use proxy_to={}",
                path.entity, path.entity
            ))
            .into());
    }
    let federation = Federation::for_request(cx.host, user, cx.request);
    let remote = federation
        .entity(entity, false)
        .await
        .map_err(Trouble::into_failure)?;
    let query: Vec<&str> = cx
        .request
        .target
        .split_once('?')
        .map_or("", |(_, query)| query)
        .split('&')
        // Neither `proxy_to` nor a bearer token (the user's credential,
        // never the other server's) goes on.
        .filter(|pair| {
            let name = pair.split('=').next().unwrap_or_default();
            !pair.is_empty() && !matches!(name, "proxy_to" | "bearer")
        })
        .collect();
    let with_query = |url: String| match query.is_empty() {
        true => url,
        false => format!("{url}?{}", query.join("&")),
    };
    let proxied = |mut record: Record| {
        record.source = RecordSource::Proxy;
        record
    };
    let body = match record {
        Some(path) => {
            let url = with_query(remote.record_url(&path.entity, &path.record_id));
            let answer = federation
                .send_signed(PeerMethod::Get, &url, None, RECORD_ANSWER_BYTES)
                .await
                .map_err(Trouble::into_failure)?;
            let expected = Expected {
                author: &path.entity,
                id: &path.record_id,
                hash: None,
            };
            let record = read_record(&url, &answer, expected)
                .map_err(|e| Failure::from(Problem::from(&e)))?;
            if !caller.access.can_read(&record) {
                return Err(Problem::new(ProblemType::RecordNotFound).into());
            }
            serde_json::json!({"record": proxied(record), "linked_records": []})
        }
        None => {
            let url = with_query(remote.endpoints.records.clone());
            let answer = federation
                .send_signed(PeerMethod::Get, &url, None, PROXIED_LIST_BYTES)
                .await
                .map_err(Trouble::into_failure)?;
            let (records, next_page) = proxied_list(&url, &answer, entity)
                .map_err(|e| Failure::from(Problem::from(&e)))?;
            let records: Vec<Record> = records
                .into_iter()
                .filter(|record| caller.access.can_read(record))
                .collect();
            let page_size = records.len();
            let mut body = serde_json::json!({
                "records": records,
                "linked_records": [],
                "page_size": page_size,
            });
            if let Some(next) = next_page {
                let separator = if next.contains('?') { "&" } else { "?" };
                body["next_page"] = format!("{next}{separator}proxy_to={entity}").into();
            }
            body
        }
    };
    Ok(Reply::json(200, body.to_string()))
}

/// The largest list answer accepted from another server for `proxy_to`:
/// 200 records of the 1 MiB body limit would not fit; lists of that size
/// are refused (`federation/502-peer-refused`) and the client pages with a
/// smaller `page_size`.
pub(crate) const PROXIED_LIST_BYTES: usize = 8 * 1024 * 1024;
