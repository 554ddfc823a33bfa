//! Entity discovery, the Entity record, server_info and new_notification
//! (PROTOCOL.md §12).

use reqwest::Method;
use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::{Call, Response};
use crate::context::{Ctx, ensure_listed, type_filter};
use base64::Engine;

use crate::expect::{
    self, FORBIDDEN, MISSING_AUTHORIZATION, at, ensure, ensure_eq, is_hex, str_at,
};

pub fn checks() -> Vec<Check> {
    vec![
        check!("discovery/head-root-204", head_root_204),
        check!("discovery/get-root-204", get_root_204),
        check!("discovery/root-link-relation", root_link_relation),
        check!(
            "discovery/root-link-names-entity-record-url",
            root_link_target
        ),
        check!(
            "discovery/entity-record-readable-unsigned",
            entity_record_unsigned
        ),
        check!(
            "discovery/entity-record-names-entity",
            entity_record_names_entity
        ),
        check!("discovery/entity-record-is-public", entity_record_public),
        check!(
            "discovery/entity-record-has-entity-type",
            entity_record_type
        ),
        check!(
            "discovery/entity-record-empty-key-lists",
            entity_record_lists
        ),
        check!(
            "discovery/entity-record-profile-name",
            entity_record_profile
        ),
        check!("discovery/entity-record-one-server", entity_record_server),
        check!(
            "discovery/entity-record-endpoint-templates",
            entity_record_endpoints
        ),
        check!("discovery/entity-record-listed", entity_record_listed),
        check!("discovery/server-info-shape", server_info_shape),
        check!("discovery/server-info-limits", server_info_limits),
        check!(
            "discovery/new-notification-refuses-apps",
            new_notification_refuses_apps
        ),
    ]
}

/// The relation of the discovery link (PROTOCOL.md §1).
const ENTITY_RECORD_RELATION: &str = "https://folio.dev/rels/entity-record";

pub(super) async fn root(ctx: &Ctx, method: Method) -> Result<Response, String> {
    ctx.send(Call::new(method, ctx.url("/")?)).await
}

/// `<url>; rel="relation"` from a `Link` header.
fn parse_link(response: &Response) -> Result<(String, String), String> {
    let link = response.header("link").ok_or("no Link header")?;
    let (target, parameters) = link
        .split_once(';')
        .ok_or_else(|| format!("Link without parameters: {link:?}"))?;
    let url = target
        .trim()
        .strip_prefix('<')
        .and_then(|t| t.strip_suffix('>'));
    let url = url.ok_or_else(|| format!("Link target not in <>: {link:?}"))?;
    let relation = parameters
        .split(';')
        .find_map(|parameter| parameter.trim().strip_prefix("rel="))
        .ok_or_else(|| format!("Link without rel: {link:?}"))?;
    Ok((url.to_string(), relation.trim_matches('"').to_string()))
}

/// The user's Entity record, found through `HEAD /`, read unsigned.
pub(super) async fn entity_record(ctx: &Ctx) -> Result<Value, String> {
    let (url, _) = parse_link(&root(ctx, Method::HEAD).await?)?;
    let url = url::Url::parse(&url).map_err(|error| format!("Link URL {url:?}: {error}"))?;
    let response = ctx.send(Call::get(url)).await?;
    Ok(at(&expect::json(&response, 200)?, "/record")?.clone())
}

async fn head_root_204(ctx: &Ctx) -> CheckResult {
    let response = root(ctx, Method::HEAD).await?;
    expect::status(&response, 204)?;
    parse_link(&response).map(drop)
}

async fn get_root_204(ctx: &Ctx) -> CheckResult {
    let response = root(ctx, Method::GET).await?;
    expect::status(&response, 204)?;
    let (_, relation) = parse_link(&response)?;
    ensure_eq!(relation, ENTITY_RECORD_RELATION, "rel");
    Ok(())
}

async fn root_link_relation(ctx: &Ctx) -> CheckResult {
    let (_, relation) = parse_link(&root(ctx, Method::HEAD).await?)?;
    ensure_eq!(relation, ENTITY_RECORD_RELATION, "rel");
    Ok(())
}

async fn root_link_target(ctx: &Ctx) -> CheckResult {
    let (url, _) = parse_link(&root(ctx, Method::HEAD).await?)?;
    let prefix = format!(
        "{}/api/{}/records/{}/",
        ctx.base,
        ctx.target.user,
        ctx.entity()
    );
    let id = url
        .strip_prefix(&prefix)
        .ok_or_else(|| format!("Link target {url:?} does not start with {prefix:?}"))?;
    ensure!(
        is_hex(id, 32),
        "Link target does not end in a record id: {url:?}"
    );
    Ok(())
}

async fn entity_record_unsigned(ctx: &Ctx) -> CheckResult {
    entity_record(ctx).await.map(drop)
}

async fn entity_record_names_entity(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    ensure_eq!(
        str_at(&record, "/content/entity")?,
        ctx.entity(),
        "content.entity"
    );
    ensure_eq!(
        str_at(&record, "/author/entity")?,
        ctx.entity(),
        "author.entity"
    );
    Ok(())
}

async fn entity_record_public(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    ensure_eq!(
        record["permissions"],
        json!({"read": "public"}),
        "permissions"
    );
    Ok(())
}

async fn entity_record_type(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    let entity_type = ctx.builtin_type("entity").await?;
    ensure_eq!(record["type"], entity_type, "type");
    Ok(())
}

async fn entity_record_lists(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    ensure_eq!(
        record.pointer("/content/previous_entities"),
        Some(&json!([])),
        "previous_entities"
    );
    // The user's server key (docs/federation.md §2): one Ed25519 key.
    let keys = record
        .pointer("/content/signing_keys")
        .and_then(|keys| keys.as_array())
        .ok_or_else(|| format!("signing_keys is not an array: {record}"))?;
    ensure!(
        keys.len() == 1,
        "signing_keys holds {} keys, not one",
        keys.len()
    );
    ensure_eq!(
        keys[0]["algorithm"],
        json!("ed25519"),
        "the key's algorithm"
    );
    let key = str_at(&keys[0], "/public_key")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(key)
        .map_err(|e| format!("the public key is not base64: {e}"))?;
    ensure!(
        decoded.len() == 32,
        "the public key has {} bytes, not 32",
        decoded.len()
    );
    Ok(())
}

async fn entity_record_profile(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    let name = str_at(&record, "/content/profile/name")?;
    ensure!(!name.is_empty(), "profile.name is empty");
    Ok(())
}

async fn entity_record_server(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    let servers = expect::array_at(&record, "/content/servers")?;
    ensure_eq!(servers.len(), 1, "number of servers");
    ensure_eq!(servers[0]["version"], json!("1.0.0"), "servers[0].version");
    ensure_eq!(servers[0]["preference"], json!(0), "servers[0].preference");
    Ok(())
}

async fn entity_record_endpoints(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    let (b, u) = (&ctx.base, &ctx.target.user);
    let record_url = format!("{b}/api/{u}/records/{{entity}}/{{record_id}}");
    let expected = json!({
        "auth": format!("{b}/{u}/auth/{{record_id}}"),
        "records": format!("{b}/api/{u}/records"),
        "new_record": format!("{b}/api/{u}/records"),
        "record": record_url,
        "record_versions": format!("{record_url}/versions"),
        "record_version": format!("{record_url}/versions/{{version_hash}}"),
        "record_blob": format!("{record_url}/blobs/{{blob_hash}}/{{file_name}}"),
        "record_version_blob":
            format!("{record_url}/versions/{{version_hash}}/blobs/{{blob_hash}}/{{file_name}}"),
        "new_blob": format!("{b}/api/{u}/blobs"),
        "events": format!("{b}/api/{u}/events"),
        "new_notification": format!("{b}/api/{u}/notifications"),
        "server_info": format!("{b}/api/{u}/server"),
    });
    ensure_eq!(
        record.pointer("/content/servers/0/endpoints"),
        Some(&expected),
        "endpoints"
    );
    Ok(())
}

async fn entity_record_listed(ctx: &Ctx) -> CheckResult {
    let record = entity_record(ctx).await?;
    let entity_type = ctx.builtin_type("entity").await?;
    let filter = type_filter(&entity_type)?;
    let page = ctx
        .list(&[("filter", &filter), ("page_size", "200")])
        .await?;
    ensure_listed(&page, str_at(&record, "/id")?)
}

async fn server_info(ctx: &Ctx) -> Result<Value, String> {
    let response = ctx
        .send(Call::get(ctx.api("/server")?).signed(&ctx.full))
        .await?;
    expect::json(&response, 200)
}

async fn server_info_shape(ctx: &Ctx) -> CheckResult {
    let info = server_info(ctx).await?;
    ensure_eq!(info["software"], json!("folio"), "software");
    ensure_eq!(info["protocol"], json!("1.0"), "protocol");
    ensure!(
        info["version"].is_string(),
        "version is not a string: {info}"
    );
    Ok(())
}

async fn server_info_limits(ctx: &Ctx) -> CheckResult {
    let info = server_info(ctx).await?;
    let limits = info["limits"]
        .as_object()
        .ok_or_else(|| format!("limits is not an object: {info}"))?;
    ensure!(!limits.is_empty(), "limits is empty");
    Ok(())
}

/// Only another entity's server sends notifications (docs/federation.md §4):
/// an app's is forbidden, an unsigned one unauthenticated.
async fn new_notification_refuses_apps(ctx: &Ctx) -> CheckResult {
    let call = Call::post(ctx.api("/notifications")?)
        .json(&json!({"versions": []}))
        .signed(&ctx.full);
    expect::problem_response(&ctx.send(call).await?, FORBIDDEN)?;
    let call = Call::post(ctx.api("/notifications")?).json(&json!({"versions": []}));
    expect::problem_response(&ctx.send(call).await?, MISSING_AUTHORIZATION).map(drop)
}
