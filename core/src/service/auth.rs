//! Who is asking (PROTOCOL.md §10): a signed `Authorization` header, a
//! `bearer` token on a GET, or nobody.

use crate::auth::access::Access;
use crate::auth::apps::app_access;
use crate::auth::{
    AppKey, AuthError, BearerToken, Malformed, NonceUse, ReplayError, check_body_digest,
    check_timestamp,
};
use crate::model::{Record, RecordDate, RecordId};
use crate::problem::{Problem, ProblemType};
use crate::service::jobs::Job;
use crate::service::outbox::RECOVERED_PEER_DELAY_MS;
use crate::store::{
    app_authorizations_sql, app_key_sql, bring_forward_sql, read_version, waiting_for_sql,
};

use super::endpoints::federation::{Federation, Trouble, serving_user};
use super::standing::Standing;
use super::store::{RowExt, version_row};
use super::{Context, Failure, Host, Rate, User};

/// The verified caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// What the caller may read and write.
    pub access: Access,
    /// The app that signed, if any (for its write rate).
    pub app: Option<RecordId>,
    /// The App Authorization record the app's access comes from (none for
    /// the owner's full-access apps and for anonymous callers).
    pub authorization: Option<RecordId>,
    /// A bearer token's expiry, when the request came with one.
    pub bearer_expiry: Option<RecordDate>,
    /// The body digest the signature vouches for, to check a streamed body
    /// against once it is read.
    pub signed_content_sha256: Option<[u8; 32]>,
}

impl Caller {
    fn anonymous() -> Self {
        Caller {
            access: Access::Anonymous,
            app: None,
            authorization: None,
            bearer_expiry: None,
            signed_content_sha256: None,
        }
    }
}

/// The id under which the replay guard keeps a server's nonces: one per
/// entity, apart from every app's (whose ids are random).
fn server_nonce_id(entity: &crate::model::Entity) -> RecordId {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("server nonces of {entity}"));
    let mut bytes = [0; 16];
    bytes.copy_from_slice(&digest[..16]);
    RecordId::from_bytes(bytes)
}

/// The `Retry-After` of an app refused for holding its share of the replay
/// guard: its oldest nonces leave the window within seconds under load.
const APP_FULL_RETRY_AFTER_SECS: u64 = 5;

fn auth(error: &AuthError) -> Failure {
    Problem::from(error).into()
}

/// The digest a signature vouches for, checked against the body's when the
/// body was read already.
fn vouched(
    signed: Result<Option<[u8; 32]>, AuthError>,
    body_sha256: Option<&[u8; 32]>,
) -> Result<Option<[u8; 32]>, Failure> {
    let signed = signed.map_err(|e| auth(&e))?;
    if let Some(digest) = body_sha256 {
        check_body_digest(signed, digest).map_err(|e| auth(&e))?;
    }
    Ok(signed)
}

impl<H: Host> Context<'_, '_, H> {
    /// Authenticates the request to `user`'s store; `body_sha256` is the
    /// digest of a body already read, checked against the signed one.
    ///
    /// A request that fails to authenticate counts against its address's
    /// unauthenticated rate, as an unsigned read would: otherwise any
    /// `Authorization` header, however forged, would buy a signature check
    /// and a store read without limit.
    pub(super) async fn authenticate(
        &self,
        user: &User,
        body_sha256: Option<&[u8; 32]>,
    ) -> Result<Caller, Failure> {
        match self.verify_caller(user, body_sha256).await {
            Err(failure) if failure.internal.is_none() => {
                self.rate(Rate::AnonymousRead(self.request.peer)).await?;
                Err(failure)
            }
            verified => verified,
        }
    }

    async fn verify_caller(
        &self,
        user: &User,
        body_sha256: Option<&[u8; 32]>,
    ) -> Result<Caller, Failure> {
        let host = self.host;
        let dialect = host.settings().dialect;
        let request = &self.request;
        let signed = request.signed();
        if let Some(value) = request.headers.header("authorization") {
            let value = std::str::from_utf8(value)
                .map_err(|_| auth(&AuthError::Malformed(Malformed::Syntax { at: 0 })))?;
            if dialect.is_server_authorization(value) {
                return self.verify_server(user, value, body_sha256).await;
            }
            let header = dialect.parse_authorization(value).map_err(|e| auth(&e))?;
            let now = self.request.now;
            check_timestamp(header.ts_ms, now).map_err(|e| auth(&e))?;
            let Standing {
                key,
                access,
                authorization: authorization_id,
            } = self.standing(user, &header.app_id).await?;
            header
                .verify(&key, authorization_id.as_ref(), &signed, request.headers)
                .map_err(|e| auth(&e))?;
            let signed_content_sha256 =
                vouched(header.signed_content_sha256(request.headers), body_sha256)?;
            self.check_replay(user, header.app_id, header.nonce, header.ts_ms, false)
                .await?;
            return Ok(Caller {
                access,
                app: Some(header.app_id),
                authorization: authorization_id,
                bearer_expiry: None,
                signed_content_sha256,
            });
        }
        if matches!(request.method, "GET" | "HEAD")
            && let Some(token) = BearerToken::from_target(request.target)
        {
            let token = token.map_err(|e| auth(&e))?;
            token.check_expiry(self.request.now).map_err(|e| auth(&e))?;
            let Standing {
                key,
                access,
                authorization: authorization_id,
            } = self.standing(user, &token.app_id).await?;
            token
                .verify(dialect, &key, authorization_id.as_ref(), &signed)
                .map_err(|e| auth(&e))?;
            return Ok(Caller {
                access,
                app: Some(token.app_id),
                authorization: authorization_id,
                bearer_expiry: RecordDate::from_unix_millis(token.expires_at_ms).ok(),
                signed_content_sha256: None,
            });
        }
        Ok(Caller::anonymous())
    }

    /// Another entity's server, signing for that entity
    /// (`docs/federation.md` §2): verified with a key the entity's Entity
    /// record lists, found by discovery (again, if the stored record is not
    /// fresh and its keys fail: the entity may have a new key).
    async fn verify_server(
        &self,
        user: &User,
        value: &str,
        body_sha256: Option<&[u8; 32]>,
    ) -> Result<Caller, Failure> {
        let request = &self.request;
        let header = self
            .host
            .settings()
            .dialect
            .parse_server_authorization(value)
            .map_err(|e| auth(&e))?;
        check_timestamp(header.ts_ms, request.now).map_err(|e| auth(&e))?;
        // No server but this one signs for the entities it hosts, and this
        // one never signs to itself: it delivers to its own users in-process.
        // Whatever key an Entity record here lists, a request signed as one
        // of them is not this server's.
        let users = self.host.users().await.map_err(Failure::internal)?;
        if serving_user(self.host, &users, &header.entity)
            .await?
            .is_some()
        {
            return Err(Problem::new(ProblemType::UnknownServer)
                .with_detail(format!(
                    "{} is served here, and this server never signs requests to itself",
                    header.entity
                ))
                .into());
        }
        let federation = Federation::for_request(self.host, user, request);
        // A server that cannot be reached now may be later: its
        // notification is retried, not refused for good.
        let unknown = |trouble: Trouble| -> Failure {
            match trouble {
                Trouble::Failure(failure) => failure,
                trouble if trouble.is_transient() => trouble.into_failure(),
                trouble => Problem::new(ProblemType::UnknownServer)
                    .with_detail(format!("{}: {trouble}", header.entity))
                    .into(),
            }
        };
        let signed = request.signed();
        // The keys the store knows for the entity; else discovery, counted
        // against the address's unauthenticated rate first (anyone may
        // name any entity) and against the few discoveries an unverified
        // request may cause (each asks a host the requester chose), and
        // stored only once the signature verifies.
        let (mut remote, mut discovered) = match federation.stored_entity(&header.entity).await? {
            Some(remote) => (remote, false),
            None => {
                self.rate(Rate::AnonymousRead(request.peer)).await?;
                self.rate(Rate::UnverifiedDiscovery(request.peer)).await?;
                self.rate(Rate::AnyUnverifiedDiscovery).await?;
                let remote = federation.discover(&header.entity).await.map_err(unknown)?;
                (remote, true)
            }
        };
        // Keys the stored record lists may be old: discover again, at most
        // once a minute per entity, so that forged signatures cannot make
        // this server ask the entity's server again and again.
        if !discovered
            && header
                .verify(&remote.keys, &signed, request.headers)
                .is_err()
            && self.rate(Rate::Rediscovery(&header.entity)).await.is_ok()
        {
            remote = federation.discover(&header.entity).await.map_err(unknown)?;
            discovered = true;
        }
        if remote.keys.is_empty() {
            return Err(Problem::new(ProblemType::UnknownServer)
                .with_detail(format!(
                    "{}'s Entity record lists no signing key",
                    header.entity
                ))
                .into());
        }
        header
            .verify(&remote.keys, &signed, request.headers)
            .map_err(|e| auth(&e))?;
        let signed_content_sha256 =
            vouched(header.signed_content_sha256(request.headers), body_sha256)?;
        if discovered {
            federation.keep(&remote).await.map_err(unknown)?;
        }
        let nonces = server_nonce_id(&header.entity);
        self.check_replay(user, nonces, header.nonce, header.ts_ms, false)
            .await?;
        self.server_is_up(user, &header.entity).await;
        Ok(Caller {
            access: Access::Server {
                entity: header.entity.clone(),
            },
            app: None,
            authorization: None,
            bearer_expiry: None,
            signed_content_sha256,
        })
    }

    /// `entity`'s server just signed a request to `user`: it is up. The
    /// user's notifications for it that wait for a later retry are made
    /// due within [`RECOVERED_PEER_DELAY_MS`] (`docs/federation.md` §4),
    /// so that a server back from an outage hears what it missed within
    /// seconds, not at the end of its backoff. One read when none waits.
    async fn server_is_up(&self, user: &User, entity: &crate::model::Entity) {
        let soon = self
            .request
            .now
            .unix_millis()
            .saturating_add(RECOVERED_PEER_DELAY_MS);
        let waiting = self
            .host
            .fetch(&waiting_for_sql(user.id, entity, soon))
            .await;
        if !matches!(waiting, Ok(rows) if !rows.is_empty()) {
            return;
        }
        let job = Job::Reschedule {
            user: user.id,
            statements: vec![bring_forward_sql(user.id, entity, soon)],
        };
        match self.run_job(job).await {
            Ok(Ok(_)) => {}
            Ok(Err(refused)) => self.host.report(&refused),
            Err(failure) => self.host.report(&failure),
        }
    }

    /// The caller of a read; unauthenticated reads count against their
    /// address's rate.
    pub(super) async fn reader(&self, user: &User) -> Result<Caller, Failure> {
        let caller = self.authenticate(user, None).await?;
        if matches!(caller.access, Access::Anonymous) {
            self.rate(Rate::AnonymousRead(self.request.peer)).await?;
        }
        Ok(caller)
    }

    /// The caller of a write: an app that signed, within its write rate.
    pub(super) async fn writer(
        &self,
        user: &User,
        body_sha256: Option<&[u8; 32]>,
    ) -> Result<Caller, Failure> {
        let caller = self.authenticate(user, body_sha256).await?;
        // A bearer token authenticates GETs only, so a writer always signed.
        let Some(app_id) = caller.app else {
            return Err(Problem::new(ProblemType::MissingAuthorization).into());
        };
        self.rate(Rate::Write(&app_id)).await?;
        Ok(caller)
    }

    /// Refuses a nonce this app already used within the window.
    pub(super) async fn check_replay(
        &self,
        user: &User,
        app_id: RecordId,
        nonce: &str,
        ts_ms: i64,
        registration: bool,
    ) -> Result<(), Failure> {
        let used = NonceUse {
            app: app_id,
            nonce,
            ts_ms,
            now: self.request.now,
            registration,
        };
        super::resident::check_nonce(self.host, user, &used)
            .await
            .map_err(|error| match error {
                ReplayError::Auth(e) => auth(&e),
                ReplayError::AppFull => Failure::from(
                    Problem::new(ProblemType::RateLimited)
                        .with_detail("too many signed requests from this app in the replay window"),
                )
                .with("retry-after", APP_FULL_RETRY_AFTER_SECS.to_string()),
                ReplayError::Full => Problem::new(ProblemType::Unavailable)
                    .with_detail("too many requests in the replay window")
                    .into(),
            })
    }

    /// An app's key, the access its authorization grants, and that
    /// authorization's id (signed over, so a revoked one fails).
    /// What authenticating as `app_id` in `user`'s store finds, remembered
    /// between requests where the host can tell when it changes
    /// ([`standing`](super::standing)).
    async fn standing(&self, user: &User, app_id: &RecordId) -> Result<Standing, Failure> {
        let remembered = (self.host.resident())
            .map(|resident| &resident.standings)
            .zip(self.request.epoch);
        if let Some((cache, epoch)) = remembered
            && let Some(standing) = cache.get(user.id, app_id, epoch)
        {
            return Ok(standing);
        }
        let (key, full_access) = self.app_key(user, app_id).await?;
        let authorization = self.authorization(user, app_id).await?;
        let access = app_access(&user.entity, app_id, full_access, authorization.as_ref())
            .map_err(|e| auth(&e))?;
        let standing = Standing {
            key,
            access,
            authorization: authorization.map(|record| record.id),
        };
        if let Some((cache, epoch)) = remembered {
            cache.put(user.id, *app_id, epoch, standing.clone());
        }
        Ok(standing)
    }

    async fn app_key(&self, user: &User, app_id: &RecordId) -> Result<(AppKey, bool), Failure> {
        let rows = self.fetch(&app_key_sql(user.id, app_id)).await?;
        let row = rows.first().ok_or_else(|| auth(&AuthError::UnknownApp))?;
        let key = row.text(0)?;
        let full = row.integer(1)?;
        let key = AppKey::from_base64(key)
            .map_err(|_| Failure::internal("a stored app key does not decode"))?;
        Ok((key, full != 0))
    }

    async fn authorization(
        &self,
        user: &User,
        app_id: &RecordId,
    ) -> Result<Option<Record>, Failure> {
        let rows = self
            .fetch(&app_authorizations_sql(user.id, &user.entity, app_id))
            .await?;
        match rows.first() {
            None => Ok(None),
            Some(row) => {
                let (record, links) = version_row(row)?;
                Ok(Some(read_version(&record, &links)?.0))
            }
        }
    }
}
