//! What every check gets: the target's URLs, the two apps, the HTTP client,
//! and helpers that create the records a check needs. Each check makes its
//! own records under fresh ids, so checks never depend on one another and
//! the suite can run again against the same server.

use std::collections::HashMap;

use serde_json::{Value, json};
use tokio::sync::OnceCell;
use url::Url;

use crate::client::{Call, Http, Response, record_id};
use crate::expect::{self, ensure, str_at};
use crate::faults::FaultSwitch;
use crate::hostile::HostilePeer;
use crate::signer::AppKey;
use crate::target::Target;

/// The schema of the suite's general-purpose type: one property per kind of
/// link, each optional, so a check writes only what it needs.
fn note_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "content": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "max_length": 200},
                    "tags": {"type": "array", "items": {"type": "tag_link"}, "optional": true},
                    "label": {"type": "tag_link", "sort_property": true, "optional": true},
                    "ref": {"type": "record_link", "optional": true},
                    "parent": {"type": "record_link", "existential": true, "optional": true},
                    "pinned": {"type": "version_link", "optional": true},
                    "person": {"type": "entity_link", "optional": true},
                    "file": {"type": "blob_link", "optional": true},
                    "count": {"type": "int", "optional": true}
                }
            }
        }
    })
}

/// The built-in type records, by content name.
#[derive(Debug)]
pub struct Builtins {
    pub by_name: HashMap<String, Value>,
}

/// The two Type records the scoped app's grant names.
#[derive(Debug)]
pub struct ScopedTypes {
    pub read: Value,
    pub write: Value,
}

pub struct Ctx {
    pub target: Target,
    /// Retries a `429` after its `Retry-After`.
    pub http: Http,
    /// The base URL without a trailing slash.
    pub base: String,
    pub full: AppKey,
    pub scoped: AppKey,
    builtins: OnceCell<Result<Builtins, String>>,
    scoped_types: OnceCell<Result<ScopedTypes, String>>,
    server_info: OnceCell<Result<Value, String>>,
    hostile_peer: OnceCell<Result<HostilePeer, String>>,
    record_link_type: OnceCell<Result<Value, String>>,
    /// How the `faults/*` checks make the store fail.
    pub faults: Option<FaultSwitch>,
}

impl Ctx {
    pub fn new(target: &Target) -> Result<Self, String> {
        let base = target.base_url.trim_end_matches('/').to_string();
        Url::parse(&base).map_err(|error| format!("base_url {base:?}: {error}"))?;
        let full = &target.full_app;
        let scoped = &target.scoped_app.app;
        Ok(Self {
            http: Http::new(target)?,
            base,
            full: AppKey::new(&full.app_id, &full.authorization_id, &full.private_key)
                .map_err(|error| format!("full_app: {error}"))?,
            scoped: AppKey::new(
                &scoped.app_id,
                &scoped.authorization_id,
                &scoped.private_key,
            )
            .map_err(|error| format!("scoped_app: {error}"))?,
            target: target.clone(),
            builtins: OnceCell::new(),
            scoped_types: OnceCell::new(),
            server_info: OnceCell::new(),
            hostile_peer: OnceCell::new(),
            record_link_type: OnceCell::new(),
            faults: target
                .fault_hook
                .clone()
                .map(|hook| FaultSwitch(std::sync::Arc::new(crate::faults::HookCommand(hook)))),
        })
    }

    /// The same context, with `faults` (when given) as its fault switch.
    pub fn with_faults(mut self, faults: Option<FaultSwitch>) -> Self {
        if faults.is_some() {
            self.faults = faults;
        }
        self
    }

    pub fn entity(&self) -> &str {
        &self.target.entity
    }

    /// `{"entity": <the user's entity>}`.
    pub fn entity_link(&self) -> Value {
        json!({"entity": self.entity()})
    }

    /// `base_url` followed by `path`.
    pub fn url(&self, path: &str) -> Result<Url, String> {
        Url::parse(&format!("{}{path}", self.base)).map_err(|error| format!("URL {path}: {error}"))
    }

    /// `{base_url}/api/{user}` followed by `path`.
    pub fn api(&self, path: &str) -> Result<Url, String> {
        self.url(&format!("/api/{}{path}", self.target.user))
    }

    pub fn records_url(&self) -> Result<Url, String> {
        self.api("/records")
    }

    /// A record of the user's entity.
    pub fn record_url(&self, id: &str) -> Result<Url, String> {
        self.record_url_at(self.entity(), id)
    }

    pub fn record_url_at(&self, entity: &str, id: &str) -> Result<Url, String> {
        self.api(&format!("/records/{entity}/{id}"))
    }

    /// `…/records/{entity}/{record_id}` followed by more path segments,
    /// each percent-encoded as one segment.
    pub fn record_url_with(&self, id: &str, segments: &[&str]) -> Result<Url, String> {
        let mut url = self.record_url(id)?;
        url.path_segments_mut()
            .map_err(|_| "base URL cannot take a path".to_string())?
            .extend(segments);
        Ok(url)
    }

    pub fn blob_url(&self, id: &str, hash: &str, name: &str) -> Result<Url, String> {
        self.record_url_with(id, &["blobs", hash, name])
    }

    pub fn events_url(&self) -> Result<Url, String> {
        self.api("/events")
    }

    pub fn new_blob_url(&self) -> Result<Url, String> {
        self.api("/blobs")
    }

    /// Sends with the main client.
    pub async fn send(&self, call: Call<'_>) -> Result<Response, String> {
        self.http.send(&call).await
    }

    /// The `limits` object of `server_info`, read once per run.
    pub async fn limits(&self) -> Result<&Value, String> {
        let info = self
            .server_info
            .get_or_init(|| async {
                let call = Call::get(self.api("/server")?).signed(&self.full);
                expect::json(&self.send(call).await?, 200)
            })
            .await
            .as_ref()
            .map_err(|error| format!("reading server_info: {error}"))?;
        Ok(&info["limits"])
    }

    /// A limit as `server_info` reports it, else the protocol's default.
    /// A limit reported as `null` is switched off: checks of it cannot run.
    pub async fn limit(&self, name: &str, default: u64) -> Result<u64, String> {
        let limits = self.limits().await?;
        match limits.get(name) {
            None => Ok(default),
            Some(Value::Null) => Err(format!(
                "server_info reports {name} switched off; exclude this check for this server"
            )),
            Some(value) => value
                .as_u64()
                .ok_or_else(|| format!("server_info limit {name} is not a number: {value}")),
        }
    }

    /// A rate limit `{per_second, burst}` from `server_info`, else the default.
    pub async fn rate_limit(&self, name: &str, default: (u64, u64)) -> Result<(u64, u64), String> {
        let limits = self.limits().await?;
        match limits.get(name) {
            None => Ok(default),
            Some(Value::Null) => Err(format!(
                "server_info reports {name} switched off; exclude this check for this server"
            )),
            Some(rate) => {
                let field = |field: &str| {
                    rate[field].as_u64().ok_or_else(|| {
                        format!("server_info {name}.{field} is not a number: {rate}")
                    })
                };
                Ok((field("per_second")?, field("burst")?))
            }
        }
    }

    /// The built-in type records, read once per run.
    pub async fn builtins(&self) -> Result<&Builtins, String> {
        self.builtins
            .get_or_init(|| self.load_builtins())
            .await
            .as_ref()
            .map_err(|error| format!("reading the built-in types: {error}"))
    }

    async fn load_builtins(&self) -> Result<Builtins, String> {
        let url = with_query(
            self.records_url()?,
            &[("sources", "resolution"), ("page_size", "200")],
        );
        let page = expect::json(&self.send(Call::get(url).signed(&self.full)).await?, 200)?;
        let by_name = expect::array_at(&page, "/records")?
            .iter()
            .filter_map(|record| {
                let name = record.pointer("/content/name")?.as_str()?;
                Some((name.to_string(), record.clone()))
            })
            .collect();
        Ok(Builtins { by_name })
    }

    /// A version link to the latest version of a built-in type.
    pub async fn builtin_type(&self, name: &str) -> Result<Value, String> {
        let record = self
            .builtins()
            .await?
            .by_name
            .get(name)
            .ok_or_else(|| format!("no built-in type named {name:?} in sources=resolution"))?;
        version_link(record)
    }

    /// Creates a Type record with a fresh id; returns a version link to it.
    pub async fn new_type(&self, schema: Value) -> Result<Value, String> {
        let record = self
            .create(
                self.type_body(&record_id(), "conformance_note", schema)
                    .await?,
            )
            .await?;
        version_link(&record)
    }

    /// The body that creates a Type record.
    pub async fn type_body(&self, id: &str, name: &str, schema: Value) -> Result<Value, String> {
        Ok(json!({
            "id": id,
            "type": self.builtin_type("type").await?,
            "content": {"name": name, "schema": schema}
        }))
    }

    /// Starts the suite's hostile peer when the target has one, so that the
    /// server under test reaches a network that answers: a server on the
    /// edge in development reaches every other server through that peer's
    /// relay, and before it listens every name looks unreachable there.
    pub async fn network_up(&self) -> Result<(), String> {
        match self.target.hostile_peer {
            Some(_) => self.hostile_peer().await.map(drop),
            None => Ok(()),
        }
    }

    /// The target's hostile peer, started on first use and kept running
    /// for the rest of the run.
    pub async fn hostile_peer(&self) -> Result<&HostilePeer, String> {
        self.hostile_peer
            .get_or_init(|| async {
                let config = self
                    .target
                    .hostile_peer
                    .as_ref()
                    .ok_or("the target has no \"hostile_peer\"")?;
                HostilePeer::start(config, self.builtin_type("entity").await?).await
            })
            .await
            .as_ref()
            .map_err(|error| format!("starting the hostile peer: {error}"))
    }

    /// A type whose content is one record link, `see`, created once per
    /// run: a version link to it.
    pub async fn record_link_type(&self) -> Result<&Value, String> {
        self.record_link_type
            .get_or_init(|| {
                self.new_type(json!({
                    "type": "object",
                    "properties": {"content": {"type": "object", "properties": {
                        "see": {"type": "record_link"}
                    }}}
                }))
            })
            .await
            .as_ref()
            .map_err(|error| format!("creating the record-link type: {error}"))
    }

    /// A fresh type whose content has one optional property per link kind.
    pub async fn note_type(&self) -> Result<Value, String> {
        self.new_type(note_schema()).await
    }

    /// Creates a public Entity record for `entity`, named `name`, whose
    /// server endpoints are URLs on the entity's own host: the entity is
    /// then known in this store (a link to it resolves). Returns it.
    pub async fn known_entity(&self, entity: &str, name: &str) -> Result<Value, String> {
        let endpoints: serde_json::Map<String, Value> = [
            "auth",
            "records",
            "record",
            "record_versions",
            "record_version",
            "new_record",
            "record_blob",
            "record_version_blob",
            "new_blob",
            "events",
            "new_notification",
            "server_info",
        ]
        .into_iter()
        .map(|endpoint| {
            (
                endpoint.to_string(),
                json!(format!("https://{entity}/{endpoint}")),
            )
        })
        .collect();
        let body = json!({
            "type": self.builtin_type("entity").await?,
            "permissions": {"read": "public"},
            "content": {
                "entity": entity,
                "previous_entities": [],
                "signing_keys": [],
                "profile": {"name": name},
                "servers": [{"version": "1.0.0", "preference": 0, "endpoints": endpoints}]
            }
        });
        self.create(body).await
    }

    /// Creates a record with the full app; returns it.
    pub async fn create(&self, body: Value) -> Result<Value, String> {
        self.create_as(&self.full, body).await
    }

    pub async fn create_as(&self, app: &AppKey, body: Value) -> Result<Value, String> {
        let response = self
            .send(Call::post(self.records_url()?).json(&body).signed(app))
            .await?;
        let created = expect::json(&response, 200)
            .map_err(|error| format!("creating {}: {error}", expect::brief(&body)))?;
        Ok(expect::at(&created, "/record")?.clone())
    }

    /// Creates a record of type `ty` with this content.
    pub async fn note(&self, ty: &Value, content: Value) -> Result<Value, String> {
        self.create(json!({"type": ty, "content": content})).await
    }

    /// A public record of type `ty`.
    pub async fn public_note(&self, ty: &Value, content: Value) -> Result<Value, String> {
        self.create(json!({"type": ty, "content": content, "permissions": {"read": "public"}}))
            .await
    }

    /// GET of one record of the user's entity, signed by the full app.
    pub async fn get_record(&self, id: &str) -> Result<Response, String> {
        self.send(Call::get(self.record_url(id)?).signed(&self.full))
            .await
    }

    /// The list endpoint with these parameters, signed by the full app; the
    /// response must be 200.
    pub async fn list(&self, parameters: &[(&str, &str)]) -> Result<Value, String> {
        let url = with_query(self.records_url()?, parameters);
        expect::json(&self.send(Call::get(url).signed(&self.full)).await?, 200)
    }

    /// Uploads a blob with the full app; returns `{hash, size, expires_at}`.
    pub async fn upload_blob(&self, data: &[u8], content_type: &str) -> Result<Value, String> {
        let call = Call::post(self.new_blob_url()?)
            .body(data.to_vec(), Some(content_type))
            .signed(&self.full);
        expect::json(&self.send(call).await?, 200).map_err(|error| format!("blob upload: {error}"))
    }

    /// The scoped app's two types, created by the full app when missing.
    pub async fn scoped_types(&self) -> Result<&ScopedTypes, String> {
        self.scoped_types
            .get_or_init(|| async {
                let scoped = &self.target.scoped_app;
                Ok(ScopedTypes {
                    read: self
                        .ensure_type(&scoped.read_type, "conformance_read")
                        .await?,
                    write: self
                        .ensure_type(&scoped.write_type, "conformance_write")
                        .await?,
                })
            })
            .await
            .as_ref()
            .map_err(|error| format!("preparing the scoped app's types: {error}"))
    }

    /// A version link to the Type record `id`, created if it does not exist.
    async fn ensure_type(&self, id: &str, name: &str) -> Result<Value, String> {
        let existing = self.get_record(id).await?;
        if existing.status == 200 {
            return version_link(expect::at(&existing.json()?, "/record")?);
        }
        let schema = json!({
            "type": "object",
            "properties": {"content": {"type": "object", "properties": {
                "title": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "tag_link"}, "optional": true}
            }}}
        });
        let body = self.type_body(id, name, schema).await?;
        let response = self
            .send(
                Call::post(self.records_url()?)
                    .json(&body)
                    .signed(&self.full),
            )
            .await?;
        match response.status {
            200 => version_link(expect::at(&response.json()?, "/record")?),
            409 => {
                let again = expect::json(&self.get_record(id).await?, 200)?;
                version_link(expect::at(&again, "/record")?)
            }
            _ => Err(format!(
                "creating Type record {id}: status {}: {}",
                response.status,
                response.excerpt()
            )),
        }
    }
}

/// A record whose `file` links a freshly uploaded blob.
#[derive(Debug, Clone)]
pub struct BlobRecord {
    pub record: Value,
    pub id: String,
    pub hash: String,
    pub name: String,
    pub content_type: String,
    pub data: Vec<u8>,
}

impl Ctx {
    /// Uploads 1,024 random bytes and creates a record linking them as
    /// `name` with `content_type`; public or private to the user.
    pub async fn blob_record(
        &self,
        name: &str,
        content_type: &str,
        public: bool,
    ) -> Result<BlobRecord, String> {
        let data: Vec<u8> = (0..1024).map(|_| rand::random::<u8>()).collect();
        let uploaded = self.upload_blob(&data, content_type).await?;
        let hash = str_at(&uploaded, "/hash")?.to_string();
        let file = json!({"hash": hash, "type": content_type, "name": name, "size": data.len()});
        let mut body =
            json!({"type": self.note_type().await?, "content": {"title": "blob", "file": file}});
        if public {
            body["permissions"] = json!({"read": "public"});
        }
        let record = self.create(body).await?;
        Ok(BlobRecord {
            id: str_at(&record, "/id")?.to_string(),
            record,
            hash,
            name: name.to_string(),
            content_type: content_type.to_string(),
            data,
        })
    }

    /// The download URL of a blob record's blob.
    pub fn blob_record_url(&self, blob: &BlobRecord) -> Result<Url, String> {
        self.blob_url(&blob.id, &blob.hash, &blob.name)
    }
}

/// `{entity, record_id, version_hash}` of a record's version.
pub fn version_link(record: &Value) -> Result<Value, String> {
    Ok(json!({
        "entity": str_at(record, "/author/entity")?,
        "record_id": str_at(record, "/id")?,
        "version_hash": str_at(record, "/version/hash")?,
    }))
}

/// `{entity, record_id}` of a record.
pub fn record_link(record: &Value) -> Result<Value, String> {
    Ok(json!({
        "entity": str_at(record, "/author/entity")?,
        "record_id": str_at(record, "/id")?,
    }))
}

/// The filter value of a record: `<entity>+<record_id>`.
pub fn record_value(record: &Value) -> Result<String, String> {
    Ok(format!(
        "{}+{}",
        str_at(record, "/author/entity")?,
        str_at(record, "/id")?
    ))
}

/// The filter value of a version link to a type: `<entity>+<record_id>`.
pub fn type_value(link: &Value) -> Result<String, String> {
    Ok(format!(
        "{}+{}",
        str_at(link, "/entity")?,
        str_at(link, "/record_id")?
    ))
}

/// The filter that selects the records of one type.
pub fn type_filter(link: &Value) -> Result<String, String> {
    Ok(format!("$['type']={}", type_value(link)?))
}

/// `url` with these query parameters appended, form-encoded as a WHATWG
/// serializer writes them.
pub fn with_query(mut url: Url, parameters: &[(&str, &str)]) -> Url {
    if !parameters.is_empty() {
        url.query_pairs_mut().extend_pairs(parameters);
    }
    url
}

/// The ids of the records in a list response, in order.
pub fn ids(page: &Value) -> Result<Vec<String>, String> {
    expect::array_at(page, "/records")?
        .iter()
        .map(|record| str_at(record, "/id").map(str::to_string))
        .collect()
}

/// Fails unless `record` is present.
pub fn ensure_listed(page: &Value, id: &str) -> Result<(), String> {
    let listed = ids(page)?;
    ensure!(
        listed.iter().any(|listed| listed == id),
        "record {id} is not in the list ({} records)",
        listed.len()
    );
    Ok(())
}
