//! Folio under load: a `folio serve` of its own (fresh data directory, the
//! CLI's user and full-access app, limits raised above the load), the
//! records the workloads read, and the workloads themselves, every request
//! signed like a real app signs it.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use folio_client::client::{nonce, now_ms};
use folio_client::signer::{AppKey, Layout, SVC, SignedTarget};
use folio_conformance::context::{Ctx, record_link, type_value, version_link};
use folio_conformance::dates::record_date;
use folio_conformance::{AppCredentials, Target};
use http::{Method, Request};
use http_body_util::Full;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::drive::Workload;
use crate::http::{Answer, Conn, Endpoint, request};
use crate::sse::{EventStream, Feed, first_id};
use crate::text::{self, Text};
use crate::{Durability, Heads, free_port};

/// The user the load runs as, and its entity.
const USER: &str = "bench";
const ENTITY: &str = "localhost";
/// How long `folio serve` may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The schema of the records the load writes: about 1 KiB of text and
/// three links (an entity, a record, a tag).
fn note_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "content": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "max_length": 200},
                    "body": {"type": "string", "max_length": 4000},
                    "person": {"type": "entity_link"},
                    "project": {"type": "record_link", "optional": true},
                    "label": {"type": "tag_link", "sort_property": true}
                }
            }
        }
    })
}

/// Text of about 1 KiB that differs from one record to the next.
pub fn note_text(seq: u64) -> (String, String) {
    let title = format!("Load note {seq}");
    let mut body = String::with_capacity(1024);
    while body.len() < 900 {
        body.push_str("The quick brown fox jumps over the lazy dog, record ");
        body.push_str(&seq.to_string());
        body.push_str(". ");
    }
    (title, body)
}

/// A running `folio serve`, killed when dropped.
pub struct Folio {
    child: Child,
    pub pid: u32,
    pub endpoint: Endpoint,
    pub app: Arc<AppKey>,
    durability: Durability,
    /// The user's password, for the console.
    password: String,
    /// `/api/bench/`.
    api: String,
    ctx: Ctx,
    /// The users made besides `bench` for the delivery test (`--users`).
    others: Vec<OtherUser>,
    /// The text of the records the load writes.
    pub text: Text,
}

/// A user of the delivery test besides `bench`: `u2`, `u3`, … at entity
/// `u2.localhost`, …, with a full-access app of its own.
struct OtherUser {
    entity: String,
    api: String,
    app: Arc<AppKey>,
}

/// How many `folio user add` and `folio app add` run at once while the
/// delivery test's users are made: one, since two at once on one data
/// directory failed now and then (`No such file or directory`; not yet
/// looked into).
const PROVISIONING_AT_ONCE: usize = 1;

impl Folio {
    /// A fresh data directory under `dir`, the user and a full-access app
    /// made with the CLI, and `folio serve` with every rate limit and
    /// connection cap off.
    pub async fn start(
        binary: &Path,
        dir: &Path,
        durability: Durability,
        extra: &[String],
        users: usize,
    ) -> Result<Self, String> {
        let data = dir.join(format!("folio-{}", durability.name()));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).map_err(|error| format!("{}: {error}", data.display()))?;
        let port = free_port()?;
        let base_url = format!("https://localhost:{port}");
        let user = cli(
            binary,
            &data,
            &[
                "user",
                "add",
                USER,
                "--entity",
                ENTITY,
                "--base-url",
                &base_url,
                "--json",
            ],
        )
        .await?;
        let user: Value = serde_json::from_str(&user)
            .map_err(|error| format!("folio user add --json: {error}"))?;
        let password = text(&user, "password")?;
        let seed: [u8; 32] = rand::random();
        let key = AppKey::from_seed("", "", seed);
        let added = cli(
            binary,
            &data,
            &[
                "app",
                "add",
                "--user",
                USER,
                "--public-key",
                &key.public_key(),
                "--full-access",
                "--json",
            ],
        )
        .await?;
        let added: Value = serde_json::from_str(&added)
            .map_err(|error| format!("folio app add --json: {error}"))?;
        let credentials = AppCredentials {
            app_id: text(&added, "app_id")?,
            authorization_id: text(&added, "authorization_id")?,
            private_key: key.private_key(),
        };
        let app = AppKey::new(
            &credentials.app_id,
            &credentials.authorization_id,
            &credentials.private_key,
        )?;
        let others = other_users(binary, &data, &base_url, users).await?;
        let mut child = Command::new(binary)
            .arg("--data-dir")
            .arg(&data)
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--http-listen",
                "off",
            ])
            .args(["--base-url", &base_url, "--durability", durability.name()])
            .args(["--write-rate", "off", "--read-rate", "off"])
            .args(["--sse-per-server", "off", "--sse-per-user", "off"])
            // Every client of the load connects from 127.0.0.1 (2,000 for
            // the delivery step), unless the run sets the cap itself.
            .args(
                (!extra
                    .iter()
                    .any(|arg| arg == "--max-connections-per-address"))
                .then_some(["--max-connections-per-address", "off"])
                .into_iter()
                .flatten(),
            )
            // One app sends the whole load, far past an app's share of the
            // replay guard (about 800 signed requests a second).
            .args(["--replay-nonces-per-app", "off"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("starting {}: {error}", binary.display()))?;
        let pid = child.id().ok_or("folio serve exited at once")?;
        wait_until_listening(&mut child).await?;
        let cert = data.join("tls/cert.pem");
        let endpoint = Endpoint::tls(port, &cert)?;
        let target = Target::one_app(
            base_url.clone(),
            USER,
            ENTITY,
            Some(cert.display().to_string()),
            credentials,
        );
        Ok(Self {
            child,
            pid,
            endpoint,
            app: Arc::new(app),
            durability,
            password,
            api: format!("/api/{USER}/"),
            ctx: Ctx::new(&target)?,
            others,
            text: Text::default(),
        })
    }

    /// The records every workload reads or links to.
    pub async fn fixture(&self) -> Result<Fixture, String> {
        let ty = self.ctx.new_type(note_schema()).await?;
        let project = self
            .ctx
            .note(&ty, note_content(None, 0))
            .await
            .map_err(|error| format!("creating the project record: {error}"))?;
        let project = record_link(&project)?;
        let content = note_content(Some(&project), 1);
        let one = self.ctx.note(&ty, content.clone()).await?;
        let public = self.ctx.public_note(&ty, content).await?;
        let console_list = {
            let mut url = url::Url::parse("https://localhost").expect("a constant URL parses");
            url.set_path(&format!("/{USER}/console/browse"));
            url.query_pairs_mut()
                .append_pair("type", &type_value(&ty)?)
                .append_pair("filter", &format!("$['author']={ENTITY}"));
            url[url::Position::BeforePath..url::Position::AfterQuery].to_owned()
        };
        Ok(Fixture {
            type_filter: format!("$['type']={},$['author']={ENTITY}", type_value(&ty)?),
            console_list,
            console_cookie: self.console_session().await?,
            ty,
            project,
            one: text(&one, "id")?,
            public: text(&public, "id")?,
        })
    }

    /// Signs in to the console with the user's password, as a browser
    /// would; the session's `Cookie` header value.
    async fn console_session(&self) -> Result<String, String> {
        use folio_conformance::browser::{Browser, SESSION_COOKIE, csrf, html};
        let overview = self.ctx.url(&format!("/{USER}/console"))?;
        let action = self.ctx.url(&format!("/{USER}/console/sign-in"))?;
        let mut browser = Browser::new(&self.ctx.http, &overview);
        let token = csrf(&html(&browser.get(&overview).await?, 200)?)?;
        let response = browser
            .post_form(&action, &[("csrf", &token), ("password", &self.password)])
            .await?;
        if response.status != 303 {
            return Err(format!("signing in to the console: {}", response.status));
        }
        let session = browser.session().ok_or("signing in set no session")?;
        Ok(format!("{SESSION_COOKIE}={session}"))
    }

    /// Creates one record for each update chain; returns `(id, hash)`.
    pub async fn chain_heads(
        &self,
        fixture: &Fixture,
        count: usize,
    ) -> Result<Vec<(String, String)>, String> {
        let mut heads = Vec::with_capacity(count);
        for seq in 0..count {
            let record = self
                .ctx
                .note(
                    &fixture.ty,
                    note_content(Some(&fixture.project), seq as u64),
                )
                .await?;
            heads.push((text(&record, "id")?, hash_of(&record)?));
        }
        Ok(heads)
    }

    /// Records the server holds, of any type.
    pub fn records_target(&self) -> String {
        format!("{}records", self.api)
    }

    pub fn record_target(&self, id: &str) -> String {
        format!("{}records/{ENTITY}/{id}", self.api)
    }

    pub fn events_target(&self, query: &str) -> String {
        format!("{}events?{query}", self.api)
    }

    pub fn workload(&self, kind: Kind, fixture: &Fixture, heads: Heads) -> FolioWorkload {
        FolioWorkload {
            kind,
            server: self.shared(),
            body: create_body(&fixture.ty, &fixture.project, self.text),
            one: self.record_target(&fixture.one),
            public: self.record_target(&fixture.public),
            list: list_target(
                &self.records_target(),
                &match kind {
                    Kind::ListTagged => format!("{},{TAG_CONDITION}", fixture.type_filter),
                    _ => fixture.type_filter.clone(),
                },
                kind == Kind::ListSorted,
                if kind == Kind::List50 { 50 } else { 20 },
            ),
            console_list: fixture.console_list.clone(),
            console_cookie: fixture.console_cookie.clone(),
            heads,
            seq: AtomicU64::new(0),
        }
    }

    fn shared(&self) -> Shared {
        Shared {
            endpoint: self.endpoint.clone(),
            app: self.app.clone(),
            api: self.api.clone(),
        }
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// What the workloads read: a type, a record to link to, one record to
/// GET signed and one public record to GET without a signature.
pub struct Fixture {
    pub ty: Value,
    pub project: Value,
    pub type_filter: String,
    pub one: String,
    pub public: String,
    /// The console's records page of the type, filtered by author.
    pub console_list: String,
    /// A signed-in console session: the `Cookie` header's value.
    pub console_cookie: String,
}

/// The workloads that Folio and PocketBase both run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Create a 1 KiB record with three links.
    Create,
    /// GET of one record, signed.
    Get,
    /// GET of one public record, without a signature.
    PublicGet,
    /// A list of 20 filtered by type and author, default order.
    List,
    /// The same list by creation date, newest first.
    ListSorted,
    /// Update one record again and again, each naming its parent.
    Update,
    /// The list of [`Kind::List`] 50 at a time (Folio only): what the
    /// console's records page reads, through the API.
    List50,
    /// The console's records page of the same type and filter, 50 records,
    /// as HTML, with a signed-in session (Folio only).
    ConsoleList,
    /// The list of [`Kind::List`] with a condition on the type's tag too,
    /// as an app filters (Folio only): every note has the tag, so the page
    /// is the same; the server reads the type to check the condition.
    ListTagged,
    /// The list of [`Kind::List`] searching one word, ranked (Folio only).
    Search,
    /// The same for one of the commonest words (Folio only).
    SearchCommon,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Create,
        Kind::Get,
        Kind::PublicGet,
        Kind::List,
        Kind::ListSorted,
        Kind::Update,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Create => "create",
            Kind::Get => "get",
            Kind::PublicGet => "public-get",
            Kind::List => "list",
            Kind::ListSorted => "list-sorted",
            Kind::Update => "update",
            Kind::List50 => "list-50",
            Kind::ListTagged => "list-tagged",
            Kind::Search => "search",
            Kind::SearchCommon => "search-common",
            Kind::ConsoleList => "console-list",
        }
    }
}

#[derive(Clone)]
struct Shared {
    endpoint: Endpoint,
    app: Arc<AppKey>,
    api: String,
}

pub struct FolioWorkload {
    kind: Kind,
    server: Shared,
    /// The create body with `{seq}` left to fill in.
    body: CreateBody,
    one: String,
    public: String,
    list: String,
    console_list: String,
    console_cookie: String,
    heads: Heads,
    seq: AtomicU64,
}

/// A worker's update chain: the record and its latest version's hash.
pub struct Chain {
    worker: usize,
    target: String,
    parent: String,
}

impl Workload for FolioWorkload {
    type State = Option<Chain>;

    fn state(&self, worker: usize) -> Option<Chain> {
        let head = self.heads.get(worker)?.lock().ok()?;
        let (id, hash) = &*head;
        Some(Chain {
            worker,
            target: format!("{}records/{ENTITY}/{id}", self.server.api),
            parent: hash.clone(),
        })
    }

    fn request(&self, chain: &mut Option<Chain>) -> Result<Request<Full<Bytes>>, String> {
        let server = &self.server;
        let signed =
            |method: Method, target: &str, body: Bytes| server.signed(method, target, body);
        match self.kind {
            Kind::Create => {
                let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                signed(
                    Method::POST,
                    &format!("{}records", server.api),
                    self.body.render(seq),
                )
            }
            Kind::Get => signed(Method::GET, &self.one, Bytes::new()),
            Kind::PublicGet => request(
                &server.endpoint,
                Method::GET,
                &self.public,
                &[],
                Bytes::new(),
            ),
            Kind::List | Kind::ListSorted | Kind::List50 | Kind::ListTagged => {
                signed(Method::GET, &self.list, Bytes::new())
            }
            Kind::Search | Kind::SearchCommon => {
                let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                let word = match self.kind {
                    Kind::Search => text::search_word(seq),
                    _ => text::common_word(seq),
                };
                let target = format!("{}&search={word}", self.list);
                signed(Method::GET, &target, Bytes::new())
            }
            Kind::ConsoleList => request(
                &server.endpoint,
                Method::GET,
                &self.console_list,
                &[("cookie", &self.console_cookie)],
                Bytes::new(),
            ),
            Kind::Update => {
                let chain = chain
                    .as_mut()
                    .ok_or("no record to update for this worker")?;
                let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                let body = self.body.render_update(seq, &chain.parent);
                signed(Method::PUT, &chain.target, body)
            }
        }
    }

    fn check(&self, chain: &mut Option<Chain>, answer: &Answer) -> Result<(), String> {
        if answer.status != http::StatusCode::OK {
            return Err(format!(
                "{} answered {}: {}",
                self.kind.name(),
                answer.status,
                String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
            ));
        }
        if let (Kind::Update, Some(chain)) = (self.kind, chain) {
            let answer: Value = serde_json::from_slice(&answer.body)
                .map_err(|error| format!("update answer: {error}"))?;
            chain.parent = hash_of(&answer["record"])?;
            if let Some(Ok(mut head)) = self.heads.get(chain.worker).map(|head| head.lock()) {
                head.1.clone_from(&chain.parent);
            }
        }
        Ok(())
    }
}

/// The JSON of a create (or update) body, pre-rendered around the parts
/// that change.
struct CreateBody {
    ty: String,
    project: String,
    text: Text,
}

impl CreateBody {
    fn content(&self, seq: u64) -> String {
        let (title, body) = match self.text {
            Text::Repeated => note_text(seq),
            Text::Varied => (format!("Load note {seq}"), text::varied(seq, 900)),
        };
        format!(
            r#"{{"title":"{title}","body":"{body}","person":{{"entity":"{ENTITY}"}},"project":{},"label":"bench"}}"#,
            self.project
        )
    }

    fn render(&self, seq: u64) -> Bytes {
        Bytes::from(format!(
            r#"{{"type":{},"content":{}}}"#,
            self.ty,
            self.content(seq)
        ))
    }

    fn render_update(&self, seq: u64, parent: &str) -> Bytes {
        Bytes::from(format!(
            r#"{{"content":{},"version":{{"parent_hash":"{parent}"}}}}"#,
            self.content(seq)
        ))
    }
}

fn create_body(ty: &Value, project: &Value, text: Text) -> CreateBody {
    CreateBody {
        ty: ty.to_string(),
        project: project.to_string(),
        text,
    }
}

/// The content of a load record; the project record itself links to none.
fn note_content(project: Option<&Value>, seq: u64) -> Value {
    let (title, body) = note_text(seq);
    let mut content = json!({
        "title": title,
        "body": body,
        "person": {"entity": ENTITY},
        "label": "bench"
    });
    if let Some(project) = project {
        content["project"] = project.clone();
    }
    content
}

/// The condition [`Kind::ListTagged`] adds: every benchmark note's label.
const TAG_CONDITION: &str = "$['content']['label']=\"bench\"";

/// The list target: filtered by type and author, 20 a page, in the default
/// order or by creation date, newest first.
fn list_target(records: &str, filter: &str, sorted: bool, page_size: u32) -> String {
    let mut url = url::Url::parse("https://localhost").expect("a constant URL parses");
    url.set_path(records);
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("filter", filter)
            .append_pair("page_size", &page_size.to_string());
        if sorted {
            query.append_pair("sort", "$['created_at']+desc");
        }
    }
    url[url::Position::BeforePath..url::Position::AfterQuery].to_owned()
}

/// The `Authorization` header for one request.
pub fn sign(app: &AppKey, endpoint: &Endpoint, method: &str, target: &str) -> String {
    let signed = SignedTarget {
        method,
        path_and_query: target,
        host: ENTITY,
        port: endpoint.port(),
        headers: &[],
    };
    app.authorization_header(SVC, Layout::WithAlgorithmLine, now_ms(), &nonce(), &signed)
}

fn hash_of(record: &Value) -> Result<String, String> {
    version_link(record).and_then(|link| text(&link, "version_hash"))
}

pub(crate) fn text(value: &Value, field: &str) -> Result<String, String> {
    value[field]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no {field} in {value}"))
}

/// Runs a `folio` CLI command on `data`; its stdout.
pub(crate) async fn cli(binary: &Path, data: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(binary)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .await
        .map_err(|error| format!("running {}: {error}", binary.display()))?;
    if !output.status.success() {
        return Err(format!(
            "folio {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout).map_err(|error| error.to_string())
}

/// Makes users `u2` … `u<users>` with the CLI, each with a full-access app.
async fn other_users(
    binary: &Path,
    data: &Path,
    base_url: &str,
    users: usize,
) -> Result<Vec<OtherUser>, String> {
    let numbers: Vec<usize> = (2..=users).collect();
    if !numbers.is_empty() {
        eprintln!("folio: making {} more users", numbers.len());
    }
    let mut others = Vec::with_capacity(numbers.len());
    for chunk in numbers.chunks(PROVISIONING_AT_ONCE) {
        let made: Vec<_> = chunk
            .iter()
            .map(|&n| {
                let (binary, data, base_url) =
                    (binary.to_owned(), data.to_owned(), base_url.to_owned());
                tokio::spawn(async move { other_user(&binary, &data, &base_url, n).await })
            })
            .collect();
        for user in made {
            others.push(user.await.map_err(|error| error.to_string())??);
        }
    }
    Ok(others)
}

async fn other_user(
    binary: &Path,
    data: &Path,
    base_url: &str,
    n: usize,
) -> Result<OtherUser, String> {
    let name = format!("u{n}");
    let entity = format!("u{n}.{ENTITY}");
    let add = [
        "user",
        "add",
        &name,
        "--entity",
        &entity,
        "--base-url",
        base_url,
        "--json",
    ];
    cli(binary, data, &add).await?;
    let key = AppKey::from_seed("", "", rand::random());
    let public_key = key.public_key();
    let app = [
        "app",
        "add",
        "--user",
        &name,
        "--public-key",
        &public_key,
        "--full-access",
        "--json",
    ];
    let added: Value = serde_json::from_str(&cli(binary, data, &app).await?)
        .map_err(|error| format!("folio app add --json: {error}"))?;
    let app = AppKey::new(
        &text(&added, "app_id")?,
        &text(&added, "authorization_id")?,
        &key.private_key(),
    )?;
    Ok(OtherUser {
        api: format!("/api/{name}/"),
        entity,
        app: Arc::new(app),
    })
}

async fn wait_until_listening(child: &mut Child) -> Result<(), String> {
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let listening = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("listening on https://") {
                return Ok(());
            }
        }
        Err("folio serve exited before listening".to_owned())
    };
    tokio::time::timeout(START_TIMEOUT, listening)
        .await
        .map_err(|_| "folio serve did not listen within 60 s".to_owned())??;
    // Keep reading its log so the pipe never fills.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(())
}

/// Folio's side of the delivery test: subscribers signed by their user's
/// app, filtered to their user's load type, from now on; writes to that
/// user's store.
pub struct FolioFeed {
    endpoint: Endpoint,
    users: Vec<FeedUser>,
}

/// One user of the delivery test.
struct FeedUser {
    server: Shared,
    body: CreateBody,
    type_filter: String,
}

impl Folio {
    /// The feed over `bench` and, with `users` above 1, the users made at
    /// start, each given the load type and a project record of its own.
    pub async fn feed(&self, fixture: &Fixture, users: usize) -> Result<FolioFeed, String> {
        let mut feed_users = vec![FeedUser {
            server: self.shared(),
            body: create_body(&fixture.ty, &fixture.project, self.text),
            type_filter: fixture.type_filter.clone(),
        }];
        if users > 1 {
            let type_type = self.ctx.builtin_type("type").await?;
            let mut conn = self.endpoint.connect().await?;
            for other in self.others.iter().take(users - 1) {
                let server = Shared {
                    endpoint: self.endpoint.clone(),
                    app: other.app.clone(),
                    api: other.api.clone(),
                };
                let ty = json!({"type": type_type, "content": {"name": "load_note", "schema": note_schema()}});
                let ty = version_link(&server.create(&mut conn, &ty).await?)?;
                let content = note_content(None, 0);
                let project = json!({"type": ty, "content": content});
                let project = record_link(&server.create(&mut conn, &project).await?)?;
                feed_users.push(FeedUser {
                    body: create_body(&ty, &project, Text::default()),
                    type_filter: format!(
                        "$['type']={},$['author']={}",
                        type_value(&ty)?,
                        other.entity
                    ),
                    server,
                });
            }
        }
        Ok(FolioFeed {
            endpoint: self.endpoint.clone(),
            users: feed_users,
        })
    }
}

impl Shared {
    /// A request signed by this user's app.
    fn signed(
        &self,
        method: Method,
        target: &str,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, String> {
        let authorization = sign(&self.app, &self.endpoint, method.as_str(), target);
        request(
            &self.endpoint,
            method,
            target,
            &[("authorization", &authorization)],
            body,
        )
    }

    /// Creates a record from `body` on `conn`, signed; the stored record.
    async fn create(&self, conn: &mut Conn, body: &Value) -> Result<Value, String> {
        let target = format!("{}records", self.api);
        let request = self.signed(Method::POST, &target, Bytes::from(body.to_string()))?;
        let answer = conn.send(request).await?;
        if answer.status != http::StatusCode::OK {
            return Err(format!(
                "creating a record answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
        let created: Value = serde_json::from_slice(&answer.body)
            .map_err(|error| format!("a create's answer: {error}"))?;
        Ok(created["record"].clone())
    }
}

impl Feed for FolioFeed {
    fn users(&self) -> usize {
        self.users.len()
    }

    async fn subscribe(&self, user: usize) -> Result<EventStream, String> {
        let user = &self.users[user];
        let server = &user.server;
        let mut conn = self.endpoint.connect().await?;
        let mut url = url::Url::parse("https://localhost").expect("a constant URL parses");
        url.set_path(&format!("{}events", server.api));
        let min = format!("\"{}\"", record_date(now_ms()));
        url.query_pairs_mut()
            .append_pair("min", &min)
            .append_pair("filter", &user.type_filter);
        let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
        let response = conn
            .open(server.signed(Method::GET, target, Bytes::new())?)
            .await?;
        if response.status() != http::StatusCode::OK {
            return Err(format!("subscribing answered {}", response.status()));
        }
        Ok(EventStream::new(conn, response.into_body()))
    }

    async fn write(&self, conn: &mut Conn, seq: u64, user: usize) -> Result<String, String> {
        let user = &self.users[user];
        let server = &user.server;
        let target = format!("{}records", server.api);
        let request = server.signed(Method::POST, &target, user.body.render(seq))?;
        let answer = conn.send(request).await?;
        if answer.status != http::StatusCode::OK {
            return Err(format!("a write answered {}", answer.status));
        }
        first_id(&answer.body)
            .and_then(|id| std::str::from_utf8(id).ok())
            .map(str::to_owned)
            .ok_or_else(|| "a write's answer has no record id".to_owned())
    }

    fn record_id<'a>(&self, event: &[u8], data: &'a [u8]) -> Option<&'a [u8]> {
        (event == b"record").then(|| first_id(data)).flatten()
    }
}

impl crate::Subject for Folio {
    type Fixture = Fixture;
    type Load = FolioWorkload;
    type Feed = FolioFeed;

    fn name(&self) -> &'static str {
        "folio"
    }

    fn durability(&self) -> String {
        self.durability.name().to_owned()
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn fixture(&self) -> Result<Fixture, String> {
        Folio::fixture(self).await
    }

    async fn chain_heads(
        &self,
        fixture: &Fixture,
        count: usize,
    ) -> Result<Vec<(String, String)>, String> {
        Folio::chain_heads(self, fixture, count).await
    }

    fn workload(&self, kind: Kind, fixture: &Fixture, heads: Heads) -> FolioWorkload {
        Folio::workload(self, kind, fixture, heads)
    }

    async fn feed(&self, fixture: &Fixture, users: usize) -> Result<FolioFeed, String> {
        Folio::feed(self, fixture, users).await
    }
}
