//! PocketBase under the same load: a `pocketbase serve` of its own, a
//! `notes` collection equivalent to Folio's load type (text, a relation to
//! the author, a relation to a project, a label; rules that let only the
//! author list and write, and anyone view a public note), a user whose
//! auth token every request carries, and its realtime subscriptions.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::drive::Workload;
use crate::folio::{Kind, note_text};
use crate::http::{Answer, Conn, Endpoint, request};
use crate::sse::{EventStream, Feed, first_id};
use crate::{Heads, free_port};

const SUPERUSER: &str = "bench@folio.invalid";
const USER: &str = "user@folio.invalid";
/// Not a secret: the server lives for one run on loopback.
const PASSWORD: &str = "bench-password-1234";
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `pocketbase serve`, killed when dropped.
pub struct PocketBase {
    child: Child,
    pid: u32,
    endpoint: Endpoint,
    /// The user's auth token, sent as `Authorization` on every request.
    token: String,
    user_id: String,
}

/// The records the workloads read or link to.
pub struct Fixture {
    project: String,
    one: String,
    public: String,
}

impl PocketBase {
    /// A fresh data directory under `dir`, a superuser, the collections, rate
    /// limits off and request logs off, and a user signed in.
    pub async fn start(binary: &Path, dir: &Path) -> Result<Self, String> {
        let data = dir.join("pocketbase");
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).map_err(|error| format!("{}: {error}", data.display()))?;
        let data_arg = format!("--dir={}", data.display());
        let output = Command::new(binary)
            .args(["superuser", "upsert", SUPERUSER, PASSWORD, &data_arg])
            .output()
            .await
            .map_err(|error| format!("running {}: {error}", binary.display()))?;
        if !output.status.success() {
            return Err(format!(
                "pocketbase superuser upsert: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let port = free_port()?;
        let child = Command::new(binary)
            // Without `--automigrate=false` it writes every collection change
            // as a migration file beside the data directory.
            .args([
                "serve",
                &format!("--http=127.0.0.1:{port}"),
                &data_arg,
                "--automigrate=false",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("starting {}: {error}", binary.display()))?;
        let pid = child.id().ok_or("pocketbase exited at once")?;
        let endpoint = Endpoint::plain(port);
        wait_until_healthy(&endpoint).await?;

        let admin = call(
            &endpoint,
            Method::POST,
            "/api/collections/_superusers/auth-with-password",
            None,
            json!({"identity": SUPERUSER, "password": PASSWORD}),
        )
        .await?;
        let admin = text(&admin, "token")?;
        call(
            &endpoint,
            Method::PATCH,
            "/api/settings",
            Some(&admin),
            json!({"rateLimits": {"enabled": false}, "logs": {"maxDays": 0}}),
        )
        .await?;
        let projects = call(
            &endpoint,
            Method::POST,
            "/api/collections",
            Some(&admin),
            json!({
                "name": "projects",
                "type": "base",
                "fields": [{"name": "name", "type": "text"}],
                "listRule": "", "viewRule": "", "createRule": "@request.auth.id != ''"
            }),
        )
        .await?;
        let projects = text(&projects, "id")?;
        call(
            &endpoint,
            Method::POST,
            "/api/collections",
            Some(&admin),
            notes_collection(&projects),
        )
        .await?;
        call(
            &endpoint,
            Method::POST,
            "/api/collections/users/records",
            Some(&admin),
            json!({"email": USER, "password": PASSWORD, "passwordConfirm": PASSWORD}),
        )
        .await?;
        let user = call(
            &endpoint,
            Method::POST,
            "/api/collections/users/auth-with-password",
            None,
            json!({"identity": USER, "password": PASSWORD}),
        )
        .await?;
        Ok(Self {
            child,
            pid,
            endpoint,
            token: text(&user, "token")?,
            user_id: text(&user["record"], "id")?,
        })
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }

    fn note(&self, fixture_project: Option<&str>, public: bool, seq: u64) -> Value {
        let (title, body) = note_text(seq);
        let mut note = json!({
            "title": title, "body": body, "label": "bench", "public": public, "author": self.user_id
        });
        if let Some(project) = fixture_project {
            note["project"] = json!(project);
        }
        note
    }
}

/// The equivalent of Folio's load type, with the index a PocketBase user
/// adds for "my notes, newest first".
fn notes_collection(projects: &str) -> Value {
    json!({
        "name": "notes",
        "type": "base",
        "fields": [
            {"name": "title", "type": "text", "max": 200},
            {"name": "body", "type": "text", "max": 4000},
            {"name": "label", "type": "text", "max": 100},
            {"name": "public", "type": "bool"},
            {"name": "author", "type": "relation", "collectionId": "_pb_users_auth_", "maxSelect": 1, "required": true},
            {"name": "project", "type": "relation", "collectionId": projects, "maxSelect": 1},
            {"name": "created", "type": "autodate", "onCreate": true, "onUpdate": false},
            {"name": "updated", "type": "autodate", "onCreate": true, "onUpdate": true}
        ],
        "indexes": ["CREATE INDEX idx_notes_author_created ON notes (author, created)"],
        "listRule": "author = @request.auth.id",
        "viewRule": "public = true || author = @request.auth.id",
        "createRule": "@request.auth.id != '' && author = @request.auth.id",
        "updateRule": "author = @request.auth.id",
        "deleteRule": "author = @request.auth.id"
    })
}

/// One JSON call on a fresh connection; the answer must be 2xx.
async fn call(
    endpoint: &Endpoint,
    method: Method,
    target: &str,
    token: Option<&str>,
    body: Value,
) -> Result<Value, String> {
    let mut conn = endpoint.connect().await?;
    let headers: Vec<(&str, &str)> = token
        .map(|token| ("authorization", token))
        .into_iter()
        .collect();
    let answer = conn
        .send(request(
            endpoint,
            method.clone(),
            target,
            &headers,
            Bytes::from(body.to_string()),
        )?)
        .await?;
    if !answer.status.is_success() {
        return Err(format!(
            "PocketBase {method} {target} answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    if answer.body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&answer.body).map_err(|error| format!("{method} {target}: {error}"))
}

async fn wait_until_healthy(endpoint: &Endpoint) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(mut conn) = endpoint.connect().await
            && let Ok(request) = request(endpoint, Method::GET, "/api/health", &[], Bytes::new())
            && let Ok(answer) = conn.send(request).await
            && answer.status == StatusCode::OK
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("pocketbase did not answer /api/health within 60 s".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn text(value: &Value, field: &str) -> Result<String, String> {
    value[field]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no {field} in {value}"))
}

pub struct PocketBaseWorkload {
    kind: Kind,
    endpoint: Endpoint,
    token: String,
    user_id: String,
    project: String,
    one: String,
    public: String,
    heads: Heads,
    seq: AtomicU64,
}

fn note_json(user_id: &str, project: &str, seq: u64) -> Bytes {
    let (title, body) = note_text(seq);
    Bytes::from(format!(
        r#"{{"title":"{title}","body":"{body}","label":"bench","public":false,"author":"{user_id}","project":"{project}"}}"#
    ))
}

impl Workload for PocketBaseWorkload {
    /// The record this worker updates.
    type State = Option<String>;

    fn state(&self, worker: usize) -> Option<String> {
        let head = self.heads.get(worker)?.lock().ok()?;
        Some(format!("/api/collections/notes/records/{}", head.0))
    }

    fn request(&self, state: &mut Option<String>) -> Result<Request<Full<Bytes>>, String> {
        let auth = [("authorization", self.token.as_str())];
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        match self.kind {
            Kind::Create => request(
                &self.endpoint,
                Method::POST,
                "/api/collections/notes/records",
                &auth,
                note_json(&self.user_id, &self.project, seq),
            ),
            Kind::Get => request(&self.endpoint, Method::GET, &self.one, &auth, Bytes::new()),
            Kind::List50
            | Kind::ConsoleList
            | Kind::ListTagged
            | Kind::Search
            | Kind::SearchCommon => Err(format!(
                "{} is a workload of Folio's alone",
                self.kind.name()
            )),
            Kind::PublicGet => {
                request(&self.endpoint, Method::GET, &self.public, &[], Bytes::new())
            }
            Kind::List | Kind::ListSorted => {
                let mut target = format!(
                    "/api/collections/notes/records?filter={}&perPage=20&skipTotal=1",
                    percent(&format!("(author='{}')", self.user_id))
                );
                if self.kind == Kind::ListSorted {
                    target.push_str("&sort=-created");
                }
                request(&self.endpoint, Method::GET, &target, &auth, Bytes::new())
            }
            Kind::Update => {
                let target = state
                    .as_deref()
                    .ok_or("no record to update for this worker")?;
                request(
                    &self.endpoint,
                    Method::PATCH,
                    target,
                    &auth,
                    note_json(&self.user_id, &self.project, seq),
                )
            }
        }
    }

    fn check(&self, _: &mut Option<String>, answer: &Answer) -> Result<(), String> {
        if answer.status == StatusCode::OK {
            Ok(())
        } else {
            Err(format!(
                "{} answered {}: {}",
                self.kind.name(),
                answer.status,
                String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
            ))
        }
    }
}

/// Percent-encodes a query value.
fn percent(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// PocketBase's side of the delivery test: a realtime client subscribed to
/// `notes` with the user's token.
pub struct PocketBaseFeed {
    endpoint: Endpoint,
    token: String,
    user_id: String,
    project: String,
}

impl Feed for PocketBaseFeed {
    async fn subscribe(&self, _user: usize) -> Result<EventStream, String> {
        let mut conn = self.endpoint.connect().await?;
        let response = conn
            .open(request(
                &self.endpoint,
                Method::GET,
                "/api/realtime",
                &[],
                Bytes::new(),
            )?)
            .await?;
        if response.status() != StatusCode::OK {
            return Err(format!("/api/realtime answered {}", response.status()));
        }
        let mut stream = EventStream::new(conn, response.into_body());
        let connect = stream
            .next()
            .await?
            .ok_or("the realtime stream ended before PB_CONNECT")?;
        let hello: Value = serde_json::from_slice(&connect.data())
            .map_err(|error| format!("PB_CONNECT data: {error}"))?;
        let client_id = text(&hello, "clientId")?;
        call(
            &self.endpoint,
            Method::POST,
            "/api/realtime",
            Some(&self.token),
            json!({"clientId": client_id, "subscriptions": ["notes"]}),
        )
        .await?;
        Ok(stream)
    }

    async fn write(&self, conn: &mut Conn, seq: u64, _user: usize) -> Result<String, String> {
        let answer = conn
            .send(request(
                &self.endpoint,
                Method::POST,
                "/api/collections/notes/records",
                &[("authorization", &self.token)],
                note_json(&self.user_id, &self.project, seq),
            )?)
            .await?;
        if answer.status != StatusCode::OK {
            return Err(format!("a write answered {}", answer.status));
        }
        let record: Value = serde_json::from_slice(&answer.body)
            .map_err(|error| format!("a write's answer: {error}"))?;
        text(&record, "id")
    }

    fn record_id<'a>(&self, event: &[u8], data: &'a [u8]) -> Option<&'a [u8]> {
        // `{"action":"create","record":{…,"id":"…",…}}`
        (event == b"notes").then(|| first_id(data)).flatten()
    }
}

impl crate::Subject for PocketBase {
    type Fixture = Fixture;
    type Load = PocketBaseWorkload;
    type Feed = PocketBaseFeed;

    fn name(&self) -> &'static str {
        "pocketbase"
    }

    fn durability(&self) -> String {
        "default (WAL, NORMAL)".to_owned()
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn fixture(&self) -> Result<Fixture, String> {
        let notes = "/api/collections/notes/records";
        let project = call(
            &self.endpoint,
            Method::POST,
            "/api/collections/projects/records",
            Some(&self.token),
            json!({"name": "bench"}),
        )
        .await?;
        let project = text(&project, "id")?;
        let one = call(
            &self.endpoint,
            Method::POST,
            notes,
            Some(&self.token),
            self.note(Some(&project), false, 1),
        )
        .await?;
        let public = call(
            &self.endpoint,
            Method::POST,
            notes,
            Some(&self.token),
            self.note(Some(&project), true, 1),
        )
        .await?;
        Ok(Fixture {
            one: format!("{notes}/{}", text(&one, "id")?),
            public: format!("{notes}/{}", text(&public, "id")?),
            project,
        })
    }

    async fn chain_heads(
        &self,
        fixture: &Fixture,
        count: usize,
    ) -> Result<Vec<(String, String)>, String> {
        let mut heads = Vec::with_capacity(count);
        for seq in 0..count {
            let note = call(
                &self.endpoint,
                Method::POST,
                "/api/collections/notes/records",
                Some(&self.token),
                self.note(Some(&fixture.project), false, seq as u64),
            )
            .await?;
            heads.push((text(&note, "id")?, String::new()));
        }
        Ok(heads)
    }

    fn workload(&self, kind: Kind, fixture: &Fixture, heads: Heads) -> PocketBaseWorkload {
        PocketBaseWorkload {
            kind,
            endpoint: self.endpoint.clone(),
            token: self.token.clone(),
            user_id: self.user_id.clone(),
            project: fixture.project.clone(),
            one: fixture.one.clone(),
            public: fixture.public.clone(),
            heads,
            seq: AtomicU64::new(0),
        }
    }

    async fn feed(&self, fixture: &Fixture, users: usize) -> Result<PocketBaseFeed, String> {
        if users > 1 {
            return Err("PocketBase's delivery test has one user (--users 1)".to_owned());
        }
        Ok(PocketBaseFeed {
            endpoint: self.endpoint.clone(),
            token: self.token.clone(),
            user_id: self.user_id.clone(),
            project: fixture.project.clone(),
        })
    }
}
