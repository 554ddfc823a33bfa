//! Federation's rules for hostile peers and server identity
//! (docs/federation.md §2 and §6): what the server under test refuses of
//! another server's answers, and of requests signed as another server.
//!
//! Most checks need the suite's hostile peer ([`crate::hostile`]), whose
//! entities the server reaches by discovery. A refused answer must leave
//! nothing stored: a link to the record it served still does not resolve.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

use super::{Check, CheckResult, Needs, check};
use crate::browser::{html, see_other};
use crate::client::{Call, Response, nonce, now_ms, record_id, retry_after};
use crate::context::{Ctx, with_query};
use crate::expect::{
    self, INVALID_LINK, INVALID_PARAMETER, INVALID_PEER_ANSWER, INVALID_SIGNATURE, PEER_REFUSED,
    Problem, QUOTA_EXCEEDED, RATE_LIMITED, RECORD_NOT_FOUND, REPLAYED_REQUEST, STALE_TIMESTAMP,
    UNSOLICITED, VERSION_TOO_LARGE, ensure, ensure_eq, str_at,
};
use crate::hostile::{Fault, HostilePeer, SLOW_HOLD};
use crate::server_signature::{CONTENT_SHA256, ServerKey};

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "federation/private-address-refused",
            private_address_refused
        ),
        check!(
            "federation/wrong-hash-refused",
            wrong_hash_refused,
            Needs::HostilePeer
        ),
        check!(
            "federation/wrong-author-refused",
            wrong_author_refused,
            Needs::HostilePeer
        ),
        check!(
            "federation/proxied-records-are-the-proxied-entitys",
            proxied_records_are_the_proxied_entitys,
            Needs::HostilePeer
        ),
        check!(
            "federation/oversized-answer-refused",
            oversized_answer_refused,
            Needs::HostilePeer
        ),
        check!(
            "federation/redirect-not-followed",
            redirect_not_followed,
            Needs::HostilePeer
        ),
        check!(
            "federation/server-signature-forged",
            server_signature_forged,
            Needs::HostilePeer
        ),
        check!(
            "federation/server-request-replayed",
            server_request_replayed,
            Needs::HostilePeer
        ),
        check!(
            "federation/server-request-stale",
            server_request_stale,
            Needs::HostilePeer
        ),
        check!(
            "federation/server-request-cross-path",
            server_request_cross_path,
            Needs::HostilePeer
        ),
        check!(
            "federation/slow-peer-delays-no-other-recipient",
            slow_peer_delays_no_other_recipient,
            Needs::HostilePeer
        ),
        check!(
            "federation/fake-apps-refused",
            fake_apps_refused,
            Needs::HostilePeer
        ),
        check!(
            "federation/stranger-version-naming-the-user-stored",
            stranger_version_stored,
            Needs::HostilePeer
        ),
        check!(
            "federation/console-shows-a-strangers-record-as-theirs",
            console_shows_a_strangers_record_as_theirs,
            Needs::HostilePeer
        ),
        check!(
            "federation/unsolicited-version-refused",
            unsolicited_version_refused,
            Needs::HostilePeer
        ),
        check!(
            "federation/oversized-version-refused",
            oversized_version_refused,
            Needs::HostilePeer
        ),
        // After the others that store a stranger's versions: it fills the quota.
        check!(
            "federation/strangers-quota-exhausted",
            strangers_quota_exhausted,
            Needs::HostilePeer
        ),
        // Next to last: it empties the domain's notification bucket.
        check!(
            "federation/many-names-of-one-domain-share-a-rate",
            many_names_share_a_rate,
            Needs::HostilePeer
        ),
        // Last: it empties the flood entity's notification bucket.
        check!(
            "federation/notification-flood-limited",
            notification_flood_limited,
            Needs::HostilePeer
        ),
    ]
}

/// An entity named by a loopback or private address is never asked: both
/// are refused before any connection.
async fn private_address_refused(ctx: &Ctx) -> CheckResult {
    for address in ["127.0.0.1", "10.255.255.1"] {
        let url = with_query(ctx.records_url()?, &[("proxy_to", address)]);
        let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
        expect::problem_response(&response, PEER_REFUSED)
            .map_err(|error| format!("a list with proxy_to={address}: {error}"))?;
    }
    Ok(())
}

async fn wrong_hash_refused(ctx: &Ctx) -> CheckResult {
    refused_record(ctx, Fault::WrongHash, INVALID_PEER_ANSWER).await
}

async fn wrong_author_refused(ctx: &Ctx) -> CheckResult {
    refused_record(ctx, Fault::WrongAuthor, INVALID_PEER_ANSWER).await
}

/// Through `proxy_to`, a peer vouches for its own entity's records only:
/// a record it lists under another author is dropped from the list, and a
/// record of another author is not asked of it at all.
async fn proxied_records_are_the_proxied_entitys(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let entity = peer.entity(Fault::WrongAuthor);
    let honest = peer.entity(Fault::Honest);

    let list = with_query(ctx.records_url()?, &[("proxy_to", &entity)]);
    let response = ctx.send(Call::get(list).signed(&ctx.full)).await?;
    let body = expect::json(&response, 200)
        .map_err(|error| format!("a list with proxy_to={entity}: {error}"))?;
    let authors: Vec<&str> = body["records"]
        .as_array()
        .ok_or_else(|| format!("a list with proxy_to={entity} has no records: {body}"))?
        .iter()
        .map(|record| record["author"]["entity"].as_str().unwrap_or_default())
        .collect();
    ensure!(
        authors == [entity.as_str()],
        "{entity}'s list, which holds a record of its own and one it says is {honest}'s, \
         was answered with records by {authors:?}: only {entity}'s own may be"
    );

    let id = record_id();
    let before = peer.seen().len();
    let url = with_query(ctx.record_url_at(&honest, &id)?, &[("proxy_to", &entity)]);
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    expect::problem_response(&response, INVALID_PARAMETER)
        .map_err(|error| format!("{honest}/{id} with proxy_to={entity}: {error}"))?;
    let asked: Vec<_> = peer
        .seen()
        .split_off(before)
        .into_iter()
        .filter(|request| request.host == entity)
        .collect();
    ensure!(
        asked.is_empty(),
        "{entity} was asked for {honest}'s record: {asked:?}"
    );
    Ok(())
}

async fn oversized_answer_refused(ctx: &Ctx) -> CheckResult {
    refused_record(ctx, Fault::Oversized, PEER_REFUSED).await
}

async fn redirect_not_followed(ctx: &Ctx) -> CheckResult {
    refused_record(ctx, Fault::Redirect, PEER_REFUSED).await?;
    let peer = ctx.hostile_peer().await?;
    let elsewhere = peer.entity(Fault::Elsewhere);
    let followed: Vec<_> = peer
        .seen()
        .into_iter()
        .filter(|request| request.host == elsewhere)
        .collect();
    ensure!(
        followed.is_empty(),
        "the redirect was followed: {elsewhere} was asked {followed:?}"
    );
    Ok(())
}

/// A record of the entity with `fault`, which its server serves wrongly:
/// reading it with `proxy_to` is `problem`; a record linking it is
/// `record/400-invalid-link`; and nothing of it was stored.
async fn refused_record(ctx: &Ctx, fault: Fault, problem: Problem) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let entity = peer.entity(fault);
    let id = record_id();
    let record_path = format!("/records/{entity}/{id}");

    let before = peer.seen().len();
    let proxied = with_query(ctx.record_url_at(&entity, &id)?, &[("proxy_to", &entity)]);
    let response = ctx.send(Call::get(proxied).signed(&ctx.full)).await?;
    expect::problem_response(&response, problem)
        .map_err(|error| format!("reading {entity}/{id} with proxy_to: {error}"))?;
    ensure_asked_since(
        peer,
        before,
        &entity,
        &record_path,
        "the read with proxy_to",
    )?;

    let before = peer.seen().len();
    let body = json!({
        "type": ctx.record_link_type().await?,
        "content": {"see": {"entity": entity, "record_id": id}}
    });
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await?;
    expect::problem_response(&response, INVALID_LINK)
        .map_err(|error| format!("writing a record that links {entity}/{id}: {error}"))?;
    ensure_asked_since(peer, before, &entity, &record_path, "resolving the link")?;

    let response = ctx
        .send(Call::get(ctx.record_url_at(&entity, &id)?).signed(&ctx.full))
        .await?;
    expect::problem_response(&response, RECORD_NOT_FOUND)
        .map_err(|error| format!("{entity}/{id} after the refusals: {error}"))?;
    Ok(())
}

/// Fails unless the peer was asked for `path` as `entity` since it had
/// seen `before` requests: the refusal came from the peer's answer.
fn ensure_asked_since(
    peer: &HostilePeer,
    before: usize,
    entity: &str,
    path: &str,
    what: &str,
) -> CheckResult {
    let since = peer.seen().split_off(before);
    ensure!(
        since
            .iter()
            .any(|request| request.host == entity && request.path == path),
        "{what} never asked {entity} for {path}; the peer saw {since:?}"
    );
    Ok(())
}

/// A notification body naming one version of a record of `entity`, which
/// its server does not have.
fn notification_body(entity: &str) -> Vec<u8> {
    let version = json!({
        "entity": entity,
        "record_id": record_id(),
        "version_hash": hex::encode(rand::random::<[u8; 32]>()),
    });
    json!({"versions": [version]}).to_string().into_bytes()
}

/// A notification to the user with `body`, signed by `key` as a request
/// to `signed_url` at `ts_ms` with a fresh nonce; it is sent to the user's
/// notification endpoint whatever `signed_url` says.
fn notification(
    ctx: &Ctx,
    key: &ServerKey,
    body: &[u8],
    signed_url: &Url,
    ts_ms: i64,
) -> Result<Call<'static>, String> {
    let digest = hex::encode(Sha256::digest(body));
    let authorization = key.authorization(
        "POST",
        signed_url,
        &[(CONTENT_SHA256, &digest)],
        ts_ms,
        &nonce(),
    );
    Ok(Call::post(ctx.api("/notifications")?)
        .body(body.to_vec(), Some("application/json"))
        .header(CONTENT_SHA256, &digest)
        .authorization(authorization))
}

/// A notification from the honest entity, signed by `key` for `signed_url`
/// at `ts_ms`: its answer, sent once, a `429` included.
async fn send_as_honest(
    ctx: &Ctx,
    key: &ServerKey,
    signed_url: Option<Url>,
    ts_ms: i64,
) -> Result<Response, String> {
    let url = match signed_url {
        Some(url) => url,
        None => ctx.api("/notifications")?,
    };
    let body = notification_body(&key.entity);
    let call = notification(ctx, key, &body, &url, ts_ms)?;
    ctx.http.without_retries().send(&call).await
}

/// Signed as the honest entity with a key it does not publish.
async fn server_signature_forged(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let forged = ServerKey::generate(&peer.entity(Fault::Honest));
    let response = send_as_honest(ctx, &forged, None, now_ms()).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}

/// The same signed notification twice: the second is a replay.
async fn server_request_replayed(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let key = peer.key(Fault::Honest);
    let body = notification_body(&key.entity);
    let call = notification(ctx, &key, &body, &ctx.api("/notifications")?, now_ms())?;
    let http = ctx.http.without_retries();
    // Accepted as the honest entity's: the version it names is then asked
    // of its server, which has no such record.
    expect::problem_response(&http.send(&call).await?, RECORD_NOT_FOUND)
        .map_err(|error| format!("the first notification: {error}"))?;
    expect::problem_response(&http.send(&call).await?, REPLAYED_REQUEST)
        .map_err(|error| format!("the same notification again: {error}"))?;
    Ok(())
}

/// Signed ten minutes ago, past the ±300 s window.
async fn server_request_stale(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let key = peer.key(Fault::Honest);
    let response = send_as_honest(ctx, &key, None, now_ms() - 600_000).await?;
    expect::problem_response(&response, STALE_TIMESTAMP).map(drop)
}

/// Signed for the user's records endpoint, sent to its notifications.
async fn server_request_cross_path(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let key = peer.key(Fault::Honest);
    let response = send_as_honest(ctx, &key, Some(ctx.records_url()?), now_ms()).await?;
    expect::problem_response(&response, INVALID_SIGNATURE).map(drop)
}

/// More notifications at once than one entity's burst and two seconds of
/// its rate: some are `429` with a `Retry-After`, none fails on the
/// server, and the others are received (their version is then asked of
/// the flood entity's server, which has no such record).
async fn notification_flood_limited(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let key = peer.key(Fault::Flood);
    let (per_second, burst) = ctx.rate_limit("notifications_per_entity", (10, 50)).await?;
    let count = usize::try_from(burst + 2 * per_second).map_err(|error| error.to_string())?;
    let url = ctx.api("/notifications")?;
    let calls = (0..count)
        .map(|_| notification(ctx, &key, &notification_body(&key.entity), &url, now_ms()))
        .collect::<Result<Vec<_>, _>>()?;
    let http = ctx.http.without_retries();
    let responses = join_all(calls.iter().map(|call| http.send(call))).await;
    let responses = responses.into_iter().collect::<Result<Vec<_>, _>>()?;
    if let Some(failed) = responses.iter().find(|response| response.status >= 500) {
        return Err(format!(
            "a notification of the flood failed on the server: {}: {}",
            failed.status,
            failed.excerpt()
        ));
    }
    let (limited, received): (Vec<&Response>, Vec<&Response>) = responses
        .iter()
        .partition(|response| response.status == 429);
    let first = limited.first().ok_or_else(|| {
        format!("none of {count} notifications sent at once by one entity was rate limited")
    })?;
    expect::problem_response(first, RATE_LIMITED)?;
    ensure!(
        retry_after(&first.headers).is_some(),
        "429 without a Retry-After in seconds: {:?}",
        first.header("retry-after")
    );
    for response in received {
        expect::problem_response(response, RECORD_NOT_FOUND)
            .map_err(|error| format!("a notification of the flood not limited: {error}"))?;
    }
    Ok(())
}

/// A type for a stranger's records: `text` of any length.
async fn text_type(ctx: &Ctx) -> Result<Value, String> {
    ctx.new_type(json!({
        "type": "object",
        "properties": {"content": {"type": "object", "properties": {
            "text": {"type": "string"}
        }}}
    }))
    .await
}

/// Permissions that name the user: the stranger shares the record with them.
fn shared_with_user(ctx: &Ctx) -> Value {
    json!({"read": [ctx.entity_link()]})
}

/// The stranger publishes a record of `ty` with `permissions` and `text`
/// and notifies the user of it: the record and the answer.
async fn stranger_notifies(
    ctx: &Ctx,
    peer: &HostilePeer,
    ty: &Value,
    permissions: Value,
    text: String,
) -> Result<(Value, Response), String> {
    let record = peer.publish(Fault::Stranger, ty, permissions, json!({"text": text}));
    let key = peer.key(Fault::Stranger);
    let body = json!({"versions": [{
        "entity": key.entity,
        "record_id": str_at(&record, "/id")?,
        "version_hash": str_at(&record, "/version/hash")?,
    }]})
    .to_string()
    .into_bytes();
    let call = notification(ctx, &key, &body, &ctx.api("/notifications")?, now_ms())?;
    let response = ctx.http.without_retries().send(&call).await?;
    Ok((record, response))
}

/// The user's store holds the stranger's `record` (`Some` of it), or not.
async fn stored(ctx: &Ctx, record: &Value) -> Result<Option<Value>, String> {
    let url = ctx.record_url_at(str_at(record, "/author/entity")?, str_at(record, "/id")?)?;
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    match response.status {
        404 => Ok(None),
        _ => Ok(Some(expect::json(&response, 200)?["record"].clone())),
    }
}

/// A stranger (an entity the user never linked to) shares a record with
/// the user: it is stored, as `notification_unknown`.
async fn stranger_version_stored(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let ty = text_type(ctx).await?;
    let (record, response) =
        stranger_notifies(ctx, peer, &ty, shared_with_user(ctx), "hello".into()).await?;
    ensure_eq!(
        expect::json(&response, 200)?,
        json!({"received": 1}),
        "the answer"
    );
    let kept = stored(ctx, &record)
        .await?
        .ok_or("the shared record is not stored")?;
    ensure_eq!(kept["source"], json!("notification_unknown"), "its source");
    Ok(())
}

/// A stranger's record shared with the user, in the owner's console
/// (issue 42): the record page names its author by the profile name of
/// their Entity record and says it was received; it offers no Edit and no
/// deletion everywhere, only a local deletion. An edit forced anyway is
/// refused with a page titled for the owner, not for an app, and changes
/// nothing; the local deletion turns the copy here into a tombstone.
async fn console_shows_a_strangers_record_as_theirs(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let ty = text_type(ctx).await?;
    let (record, response) =
        stranger_notifies(ctx, peer, &ty, shared_with_user(ctx), "hello".into()).await?;
    expect::json(&response, 200)?;
    let (author, id) = (str_at(&record, "/author/entity")?, str_at(&record, "/id")?);
    let hash = str_at(&record, "/version/hash")?;
    let mut browser = super::console::signed_in(ctx).await?;
    let page_url = super::console::own(ctx, &format!("/browse/{author}/{id}"))?;
    let (page, token) = browser.open(&page_url).await?;
    let text = page.text();
    ensure!(
        text.contains(&format!("Author Mallory ({author})")),
        "the record page does not name its author Mallory ({author}): {text}"
    );
    ensure!(
        text.contains("Received from the server of Mallory")
            && text.contains("notification_unknown"),
        "the record page does not say the record was received: {text}"
    );
    let edit = super::console::own(ctx, &format!("/browse/{author}/{id}/edit"))?;
    ensure!(
        page.find("a", &[("href", edit.path())]).is_none(),
        "the page offers to edit {author}'s record"
    );
    for action in ["delete", "leave"] {
        ensure!(
            page.find("input", &[("name", "action"), ("value", action)])
                .is_none(),
            "the page offers the deletion {action:?} of {author}'s record"
        );
    }
    ensure!(
        page.find("input", &[("name", "action"), ("value", "local")])
            .is_some(),
        "the page offers no local deletion"
    );
    let typed = json!({"content": {"text": "changed here"}}).to_string();
    let forced = browser
        .post_form(
            &edit,
            &[("csrf", &token), ("parent_hash", hash), ("json", &typed)],
        )
        .await?;
    let refusal = html(&forced, 403).map_err(|error| format!("a forced edit: {error}"))?;
    let heading = refusal
        .find("h1", &[])
        .ok_or("the refusal has no heading")?;
    let title = refusal.text_inside(heading);
    ensure!(
        title.starts_with("You cannot edit Mallory’s") && title.ends_with("only its author can"),
        "the refusal of a forced edit is titled {title:?}"
    );
    ensure!(
        !refusal.text().contains("app"),
        "the refusal speaks of an app: {}",
        refusal.text()
    );
    let kept = stored(ctx, &record).await?.ok_or("the record is gone")?;
    ensure_eq!(
        str_at(&kept, "/version/hash")?,
        hash,
        "the record after a forced edit"
    );
    let delete = super::console::own(ctx, &format!("/browse/{author}/{id}/delete"))?;
    let deleted = browser
        .post_form(
            &delete,
            &[("csrf", &token), ("parent_hash", hash), ("action", "local")],
        )
        .await?;
    see_other(&deleted, &delete).map_err(|error| format!("the local deletion: {error}"))?;
    let tombstone = stored(ctx, &record).await?.ok_or("the tombstone is gone")?;
    ensure_eq!(
        tombstone.pointer("/no_content/action"),
        Some(&json!("local")),
        "the record after the local deletion"
    );
    Ok(())
}

/// A stranger's public record that names nobody here is refused and not
/// stored: anyone could otherwise fill the user's store with the public
/// records of the whole network (docs/federation.md §4).
async fn unsolicited_version_refused(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let ty = text_type(ctx).await?;
    let public = json!({"read": "public"});
    let (record, response) = stranger_notifies(ctx, peer, &ty, public, "buy now".into()).await?;
    expect::problem_response(&response, UNSOLICITED)?;
    ensure!(
        stored(ctx, &record).await?.is_none(),
        "the unsolicited record was stored"
    );
    Ok(())
}

/// A version larger than the server's own JSON body limit, shared with
/// the user: refused, not stored.
async fn oversized_version_refused(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let limit = ctx.limit("json_body_bytes", 1 << 20).await?;
    // A record answer may have 2 MiB: past that the answer itself is refused.
    ensure!(
        limit + (64 << 10) < 2 << 20,
        "the JSON body limit ({limit} bytes) leaves no room below a record answer's 2 MiB"
    );
    let text = "a".repeat(usize::try_from(limit).map_err(|error| error.to_string())? + 1);
    let ty = text_type(ctx).await?;
    let (record, response) = stranger_notifies(ctx, peer, &ty, shared_with_user(ctx), text).await?;
    expect::problem_response(&response, VERSION_TOO_LARGE)?;
    ensure!(
        stored(ctx, &record).await?.is_none(),
        "the oversized version was stored"
    );
    Ok(())
}

/// A stranger shares records of 256 KiB with the user until the quota
/// for strangers is full: the next is `507 quota_exceeded` and is not
/// stored; none fails otherwise.
async fn strangers_quota_exhausted(ctx: &Ctx) -> CheckResult {
    const SIZE: u64 = 256 << 10;
    let peer = ctx.hostile_peer().await?;
    let quota = ctx.limits().await?["received_from_strangers"].clone();
    let (versions, bytes) = match (quota["versions"].as_u64(), quota["bytes"].as_u64()) {
        (Some(versions), Some(bytes)) => (versions, bytes),
        _ => {
            return Err(format!(
                "server_info reports no quota for strangers: {quota}"
            ));
        }
    };
    let sends = versions.min(bytes / SIZE + 1) + 1;
    ensure!(
        sends <= 64,
        "the quota for strangers ({versions} versions, {bytes} bytes) is too large to fill here: \
         run the suite against a server with at most 64 versions or 16 MiB for them"
    );
    let ty = text_type(ctx).await?;
    let text = "q".repeat(usize::try_from(SIZE).map_err(|error| error.to_string())?);
    for sent in 1..=sends {
        let (record, response) =
            stranger_notifies(ctx, peer, &ty, shared_with_user(ctx), text.clone()).await?;
        if response.status == 507 {
            expect::problem_response(&response, QUOTA_EXCEEDED)?;
            ensure!(
                stored(ctx, &record).await?.is_none(),
                "the version refused for the quota was stored"
            );
            return Ok(());
        }
        expect::json(&response, 200).map_err(|error| format!("shared version {sent}: {error}"))?;
    }
    Err(format!(
        "{sends} versions of {SIZE} bytes were all stored: the quota for strangers \
         ({versions} versions, {bytes} bytes) was never applied"
    ))
}

/// Three names under one domain (`honest.`, `swarm.` and `stranger.` of
/// the peer's domain) notify together more than the domain's burst and two
/// seconds of its rate, each staying below its own burst: some are `429`,
/// for the domain, with a `Retry-After`.
async fn many_names_share_a_rate(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let (per_second, burst) = ctx
        .rate_limit("notifications_per_domain", (100, 200))
        .await?;
    let (_, entity_burst) = ctx
        .rate_limit("notifications_per_entity", (100, 200))
        .await?;
    let senders = [Fault::Honest, Fault::Swarm, Fault::Stranger];
    let each = (burst + 2 * per_second).div_ceil(senders.len() as u64);
    ensure!(
        each < entity_burst,
        "the domain's rate ({per_second}/{burst}) is too far above one entity's burst \
         ({entity_burst}) for three names to exceed it"
    );
    let url = ctx.api("/notifications")?;
    // One from each first, alone: the server knows every sender before the
    // burst (an unknown one is discovered, on a budget of its own).
    let http = ctx.http.without_retries();
    for fault in senders {
        let key = peer.key(fault);
        let call = notification(ctx, &key, &notification_body(&key.entity), &url, now_ms())?;
        expect::problem_response(&http.send(&call).await?, RECORD_NOT_FOUND)
            .map_err(|error| format!("{}'s first notification: {error}", key.entity))?;
    }
    let mut calls = Vec::new();
    for fault in senders {
        let key = peer.key(fault);
        for _ in 0..each {
            calls.push(notification(
                ctx,
                &key,
                &notification_body(&key.entity),
                &url,
                now_ms(),
            )?);
        }
    }
    let responses = join_all(calls.iter().map(|call| http.send(call))).await;
    let responses = responses.into_iter().collect::<Result<Vec<_>, _>>()?;
    if let Some(failed) = responses.iter().find(|response| response.status >= 500) {
        return Err(format!(
            "a notification failed on the server: {}: {}",
            failed.status,
            failed.excerpt()
        ));
    }
    let limited: Vec<&Response> = responses
        .iter()
        .filter(|response| response.status == 429)
        .collect();
    let first = limited.first().ok_or_else(|| {
        format!(
            "none of {} notifications from three names of one domain was rate limited",
            responses.len()
        )
    })?;
    let problem = expect::problem_response(first, RATE_LIMITED)?;
    ensure!(
        limited
            .iter()
            .any(|response| response.excerpt().contains("domain")),
        "no 429 names the domain's rate: {problem}"
    );
    ensure!(
        retry_after(&first.headers).is_some(),
        "429 without a Retry-After in seconds: {:?}",
        first.header("retry-after")
    );
    Ok(())
}

/// How much later a notification may reach a recipient while another
/// recipient holds its own open than it did before (issue 40: a slow peer
/// never delays another recipient by more than this).
const DELIVERY_BOUND: Duration = Duration::from_secs(1);

/// Writes a note of type `ty` that `entity` may read (so the server notifies it), and
/// waits until the peer has received one more notification for `entity`
/// than `before`: when the write was answered, and when it arrived.
async fn notify_and_wait(
    ctx: &Ctx,
    peer: &HostilePeer,
    ty: &Value,
    entity: &str,
    before: usize,
) -> Result<(Instant, Instant), String> {
    let body = json!({
        "type": ty,
        "content": {"title": format!("for {entity}")},
        "permissions": {"read": [{"entity": entity}]},
    });
    ctx.create(body).await?;
    let written = Instant::now();
    let waited = written + SLOW_HOLD + Duration::from_secs(10);
    loop {
        let arrived: Vec<Instant> = notifications_to(peer, entity)
            .into_iter()
            .skip(before)
            .collect();
        if let Some(&at) = arrived.first() {
            return Ok((written, at));
        }
        ensure!(
            Instant::now() < waited,
            "no notification reached {entity} within {:?} of the write",
            waited - written
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// When each notification the peer received for `entity` arrived.
fn notifications_to(peer: &HostilePeer, entity: &str) -> Vec<Instant> {
    peer.seen()
        .into_iter()
        .filter(|request| {
            request.host == entity && request.method == "POST" && request.path == "/notifications"
        })
        .map(|request| request.at)
        .collect()
}

/// While the slow entity holds a notification open, a notification of the
/// same user to another entity is delivered at once, not after it
/// (outbox head-of-line blocking).
async fn slow_peer_delays_no_other_recipient(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let (honest, slow) = (peer.entity(Fault::Honest), peer.entity(Fault::Slow));
    // The honest entity known and delivered to once, so what is timed
    // below is one delivery; how long that took is the baseline.
    let ty = ctx.note_type().await?;
    let before = notifications_to(peer, &honest).len();
    let (written, arrived) = notify_and_wait(ctx, peer, &ty, &honest, before).await?;
    let baseline = arrived.saturating_duration_since(written);
    let held = notifications_to(peer, &slow).len();
    let (_, slow_arrived) = notify_and_wait(ctx, peer, &ty, &slow, held).await?;
    let before = notifications_to(peer, &honest).len();
    let (written, arrived) = notify_and_wait(ctx, peer, &ty, &honest, before).await?;
    ensure!(
        written.saturating_duration_since(slow_arrived) < SLOW_HOLD,
        "the note for {honest} was written after {slow} answered; the timing says nothing"
    );
    let waited = arrived.saturating_duration_since(written);
    ensure!(
        waited <= baseline + DELIVERY_BOUND,
        "while {slow} held a notification open, one to {honest} arrived {waited:?} after its \
         write (at most {DELIVERY_BOUND:?} more than the {baseline:?} it took before)"
    );
    Ok(())
}

/// A stranger's server notifies an App record and an App Authorization
/// record of its own naming the user: neither is stored (another's never
/// count), and the console lists no such app.
async fn fake_apps_refused(ctx: &Ctx) -> CheckResult {
    let peer = ctx.hostile_peer().await?;
    let planter = peer.entity(Fault::Stranger);
    let name = format!("Your trusted app {}", record_id());
    let scope = json!({"read": [], "write": [], "subscribe": []});
    let readable = json!({"read": [ctx.entity_link()]});
    let app = peer.publish(
        Fault::Stranger,
        &ctx.builtin_type("app").await?,
        readable.clone(),
        json!({"name": name, "uris": {"redirect": format!("https://{planter}/done")},
               "scope_request": scope}),
    );
    let app_id = str_at(&app, "/id")?;
    let authorization = peer.publish(
        Fault::Stranger,
        &ctx.builtin_type("app_authorization").await?,
        readable,
        json!({"app": {"entity": planter, "record_id": app_id}, "scope_grant": scope}),
    );
    let link = |record: &Value| -> Result<Value, String> {
        Ok(json!({
            "entity": planter,
            "record_id": str_at(record, "/id")?,
            "version_hash": str_at(record, "/version/hash")?,
        }))
    };
    let body = json!({"versions": [link(&app)?, link(&authorization)?]})
        .to_string()
        .into_bytes();
    let key = peer.key(Fault::Stranger);
    let call = notification(ctx, &key, &body, &ctx.api("/notifications")?, now_ms())?;
    let response = ctx.http.without_retries().send(&call).await?;
    expect::problem_response(&response, INVALID_PEER_ANSWER)
        .map_err(|error| format!("a notification of another's App record: {error}"))?;
    for (what, record) in [("App", &app), ("App Authorization", &authorization)] {
        let id = str_at(record, "/id")?;
        let response = ctx
            .send(Call::get(ctx.record_url_at(&planter, id)?).signed(&ctx.full))
            .await?;
        expect::problem_response(&response, RECORD_NOT_FOUND).map_err(|error| {
            format!("{planter}'s {what} record after the notification: {error}")
        })?;
    }
    let mut browser = super::console::signed_in(ctx).await?;
    let apps = super::console::own(ctx, "/apps")?;
    let page = html(&browser.get(&apps).await?, 200)?;
    ensure!(
        !page.text().contains(&name) && !page.text().contains(app_id),
        "the console lists {planter}'s app {name:?}"
    );
    Ok(())
}
