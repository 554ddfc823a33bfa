//! Apps the checks make themselves (PROTOCOL.md §10): an App record
//! registered with a fresh key, then taken through the consent page to an
//! App Authorization, as an app and its user would.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};
use url::Url;

use crate::browser::{Browser, see_other};
use crate::client::{Call, Response, record_id};
use crate::context::Ctx;
use crate::expect::{self, ensure, ensure_eq, is_hex, str_at};
use crate::signer::AppKey;

/// The key header a browser app sends (the spec's CORS list allows it).
pub const PUBLIC_KEY_HEADER: &str = "x-svc-publickey";
/// The key header PROTOCOL.md §10 adds; same value.
pub const CREDENTIALS_HEADER: &str = "x-svc-credentials";

/// Where the consent page sends the user back: nothing listens there, and
/// the checks only read the `Location` that points at it.
pub const REDIRECT: &str = "http://127.0.0.1:9/callback{?authorization_id}";
/// [`REDIRECT`] expanded with the variable undefined.
pub const REDIRECT_BARE: &str = "http://127.0.0.1:9/callback";

/// A key header's value: `algorithm="ed25519" public_key="<base64>"`.
pub fn key_header(public_key: &str) -> String {
    format!("algorithm=\"ed25519\" public_key=\"{public_key}\"")
}

/// The public key a key header carries, checked to be `ed25519` and 32
/// bytes of standard base64.
pub fn parse_key_header(value: &str) -> Result<String, String> {
    let mut algorithm = None;
    let mut key = None;
    let mut rest = value.trim();
    while !rest.is_empty() {
        let (name, after) = rest
            .split_once("=\"")
            .ok_or_else(|| format!("not k=\"v\" pairs: {value:?}"))?;
        let (parameter, after) = after
            .split_once('"')
            .ok_or_else(|| format!("unterminated quote: {value:?}"))?;
        match name.trim().trim_start_matches(',').trim() {
            "algorithm" => algorithm = Some(parameter),
            "public_key" => key = Some(parameter),
            _ => {}
        }
        rest = after.trim_start_matches([' ', ',']);
    }
    ensure_eq!(algorithm, Some("ed25519"), "the key header's algorithm");
    let key = key.ok_or_else(|| format!("no public_key in {value:?}"))?;
    let bytes = STANDARD
        .decode(key)
        .map_err(|error| format!("public_key {key:?} is not standard base64: {error}"))?;
    ensure!(
        bytes.len() == 32,
        "public_key {key:?} is {} bytes, not 32",
        bytes.len()
    );
    Ok(key.to_string())
}

/// One requested (or granted) scope item: a grant name and a Type record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScopeItem {
    /// `read`, `write` or `subscribe`.
    pub grant: &'static str,
    pub entity: String,
    pub record_id: String,
}

impl ScopeItem {
    /// An item naming the Type record a version link points at.
    pub fn of(grant: &'static str, type_link: &Value) -> Result<Self, String> {
        Ok(Self {
            grant,
            entity: str_at(type_link, "/entity")?.to_string(),
            record_id: str_at(type_link, "/record_id")?.to_string(),
        })
    }

    /// The consent page's checkbox value: entity and id, one space apart.
    pub fn checkbox_value(&self) -> String {
        format!("{} {}", self.entity, self.record_id)
    }

    /// The `(name, value)` a ticked checkbox posts.
    pub fn ticked(&self) -> (&'static str, String) {
        (self.grant, self.checkbox_value())
    }
}

/// `{read: [...], write: [...], subscribe: [...]}`, empty grants left out.
pub fn scope_object(items: &[ScopeItem]) -> Value {
    let mut scope = Map::new();
    for item in items {
        let links = scope
            .entry(item.grant)
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(links) = links {
            links.push(json!({"entity": item.entity, "record_id": item.record_id}));
        }
    }
    Value::Object(scope)
}

/// The items of a `scope_grant` (or `scope_request`), sorted.
pub fn scope_items(scope: &Value) -> Result<Vec<ScopeItem>, String> {
    let mut items = Vec::new();
    for grant in ["read", "write", "subscribe"] {
        let Some(links) = scope.get(grant) else {
            continue;
        };
        let links = links
            .as_array()
            .ok_or_else(|| format!("{grant} is not an array in {}", expect::brief(scope)))?;
        for link in links {
            items.push(ScopeItem {
                grant,
                entity: str_at(link, "/entity")?.to_string(),
                record_id: str_at(link, "/record_id")?.to_string(),
            });
        }
    }
    items.sort();
    Ok(items)
}

/// An app the suite registers: a fresh id and key pair.
pub struct NewApp {
    /// Signs with the empty authorization-id line until authorized.
    pub key: AppKey,
    pub name: String,
}

impl NewApp {
    pub fn fresh() -> Self {
        let id = record_id();
        Self {
            name: format!("Conformance app {}", &id[..8]),
            key: AppKey::generate(&id),
        }
    }

    pub fn id(&self) -> &str {
        &self.key.app_id
    }

    /// The App record the app registers, asking for `scope`.
    pub async fn body(&self, ctx: &Ctx, scope: &[ScopeItem]) -> Result<Value, String> {
        Ok(json!({
            "id": self.id(),
            "type": ctx.builtin_type("app").await?,
            "content": {
                "name": self.name,
                "description": "Registered by the conformance suite.",
                "uris": {"redirect": REDIRECT, "website": "https://conformance.example/"},
                "scope_request": scope_object(scope),
            }
        }))
    }
}

/// The registration request: `body` POSTed with `header` carrying
/// `public_key`, signed by `signer` (normally the app's own new key).
pub fn registration<'a>(
    ctx: &Ctx,
    signer: &'a AppKey,
    header: &'static str,
    public_key: &str,
    body: &Value,
) -> Result<Call<'a>, String> {
    Ok(Call::post(ctx.records_url()?)
        .json(body)
        .header(header, &key_header(public_key))
        .signed(signer))
}

/// A successful registration: the App record and the server's key for the app.
pub struct Registered {
    pub record: Value,
    pub server_key: String,
}

/// Fails unless `response` is a successful registration answered in
/// `header`; returns what it carries.
pub fn registered(response: &Response, header: &str) -> Result<Registered, String> {
    let answer = expect::json(response, 200)?;
    let value = response.header(header).ok_or_else(|| {
        format!("the registration's answer has no {header} header carrying the server's key")
    })?;
    Ok(Registered {
        record: expect::at(&answer, "/record")?.clone(),
        server_key: parse_key_header(value).map_err(|error| format!("{header}: {error}"))?,
    })
}

/// Registers `app` asking for `scope`, with `X-Svc-PublicKey`.
pub async fn register(ctx: &Ctx, app: &NewApp, scope: &[ScopeItem]) -> Result<Registered, String> {
    register_body(ctx, app, &app.body(ctx, scope).await?).await
}

/// Registers `app` with this App record body, with `X-Svc-PublicKey`.
pub async fn register_body(ctx: &Ctx, app: &NewApp, body: &Value) -> Result<Registered, String> {
    let call = registration(
        ctx,
        &app.key,
        PUBLIC_KEY_HEADER,
        &app.key.public_key(),
        body,
    )?;
    registered(&ctx.send(call).await?, PUBLIC_KEY_HEADER)
        .map_err(|error| format!("registering app {}: {error}", app.id()))
}

/// The consent page of an app.
pub fn consent_url(ctx: &Ctx, app_id: &str) -> Result<Url, String> {
    ctx.url(&format!("/{}/auth/{app_id}", ctx.target.user))
}

/// The user's password, for checks that sign in.
pub fn password(ctx: &Ctx) -> Result<&str, String> {
    ctx.target
        .password
        .as_deref()
        .ok_or_else(|| "the target has no \"password\"".to_string())
}

/// The `authorization_id` an approval's redirect carries: the redirect
/// template expanded, nothing else.
pub fn authorization_id(location: &Url) -> Result<String, String> {
    let id = location
        .query_pairs()
        .find(|(name, _)| name == "authorization_id")
        .map(|(_, value)| value.into_owned())
        .ok_or_else(|| format!("no authorization_id in {location}"))?;
    ensure!(
        is_hex(&id, 32),
        "authorization_id {id:?} is not 32 lowercase hex"
    );
    ensure_eq!(
        location.as_str(),
        format!("{REDIRECT_BARE}?authorization_id={id}"),
        "the approval's Location"
    );
    Ok(id)
}

/// Registers `app` asking for `requested`, signs in as the user and
/// approves with `ticked` checked; returns the app's key signing as the new
/// authorization.
pub async fn authorize(
    ctx: &Ctx,
    app: &NewApp,
    requested: &[ScopeItem],
    ticked: &[ScopeItem],
) -> Result<AppKey, String> {
    register(ctx, app, requested).await?;
    let url = consent_url(ctx, app.id())?;
    let mut browser = Browser::new(&ctx.http, &url);
    browser.sign_in(&url, password(ctx)?).await?;
    let ticks: Vec<(&str, String)> = ticked.iter().map(ScopeItem::ticked).collect();
    let response = browser.decide(&url, "approve", &ticks).await?;
    let location = see_other(&response, &url).map_err(|error| format!("approving: {error}"))?;
    let id = authorization_id(&location)?;
    Ok(app.key.authorized(&id))
}

/// A Type record named `name_<8 hex>` for scope items; its version link.
pub async fn scope_type(ctx: &Ctx, name: &str) -> Result<(Value, String), String> {
    let id = record_id();
    let name = format!("{name}_{}", &id[..8]);
    let schema = json!({
        "type": "object",
        "properties": {"content": {"type": "object", "properties": {"title": {"type": "string"}}}}
    });
    let record = ctx.create(ctx.type_body(&id, &name, schema).await?).await?;
    Ok((crate::context::version_link(&record)?, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_headers_round_trip_and_bad_ones_fail() {
        let key = AppKey::generate(&record_id()).public_key();
        assert_eq!(parse_key_header(&key_header(&key)), Ok(key.clone()));
        let reordered = format!("public_key=\"{key}\", algorithm=\"ed25519\"");
        assert_eq!(parse_key_header(&reordered), Ok(key.clone()));
        let short = STANDARD.encode([0u8; 31]);
        for bad in [
            key_header(&short),
            key_header("not base64!"),
            format!("algorithm=\"rsa\" public_key=\"{key}\""),
            format!("algorithm=\"ed25519\" public_key=\"{key}"),
            "ed25519".to_string(),
        ] {
            assert!(parse_key_header(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn scopes_round_trip() {
        let item = |grant, id: &str| ScopeItem {
            grant,
            entity: "localhost".into(),
            record_id: id.into(),
        };
        let items = vec![item("read", "b"), item("read", "a"), item("subscribe", "a")];
        let scope = scope_object(&items);
        assert_eq!(
            scope,
            json!({"read": [{"entity": "localhost", "record_id": "b"},
                            {"entity": "localhost", "record_id": "a"}],
                   "subscribe": [{"entity": "localhost", "record_id": "a"}]})
        );
        let mut sorted = items.clone();
        sorted.sort();
        assert_eq!(scope_items(&scope), Ok(sorted));
        assert_eq!(item("write", "a").checkbox_value(), "localhost a");
    }
}
