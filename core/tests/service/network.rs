//! Two (or more) fake hosts joined by a fake network, on one simulated
//! clock: each is one user's server, with its server key, an app with
//! full access and a `note` type. A request one server's core asks its
//! host to send (`Peers::send`) is routed, by the URL's host name, to the
//! other fake's `service::handle`, as the native host's HTTP client and
//! server would carry it: the same method, target, host, port, headers
//! and body, so signatures are made and checked by core as in production.
//! A server can be down (every request to it is unreachable), restarted
//! (it forgets its rate buckets and nonces; the store stays), and moved
//! (its base URL changes, its Entity record is rewritten by the server as
//! `folio serve` does, and the old address no longer answers).
//!
//! Time is the network's: every request, write job and delivery runs at
//! [`Network::now`], which only the test advances.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::{Rc, Weak};

use folio_core::auth::{MEMORY_ONLY_AHEAD_MS, ServerKey};
use folio_core::model::{Record, RecordDate};
use folio_core::service::discovery::entity_record_update;
use folio_core::service::federation::{PeerAnswer, PeerFailure, PeerMethod, PeerRequest};
use folio_core::service::{Reply, ReplyBody};
use folio_core::write::{RecordKey, WriteRequest};
use serde_json::{Value, json};

use crate::fake_host::FakeHost;
use crate::kit::{Body, Call, Config, REQUEST_NOW, Signer, Stream, date, millis_after};
use crate::{APP_KEY_SEED, app_id, authorization_id, seed_of};

/// One user's server on the network.
pub struct Server {
    /// The user's name (`{user}` in paths) and entity.
    pub user: &'static str,
    pub entity: &'static str,
    /// In a cell: a move changes the host's base URL.
    pub host: RefCell<FakeHost>,
    /// The user's app, with full access.
    pub app: Signer,
    /// The user's `note` Type record.
    pub note_type: Record,
    /// The address the server's requests come from.
    address: IpAddr,
}

impl Server {
    /// The path of the user's records.
    pub fn records(&self) -> String {
        format!("/api/{}/records", self.user)
    }
}

/// What the network does to requests now.
struct State {
    now: RecordDate,
    /// Per server: whether it is down.
    down: Vec<bool>,
    /// Per server: the host name of its base URL now.
    base_hosts: Vec<String>,
    /// Per server: how many times it moved.
    moves: Vec<u32>,
    /// Drawn for each request: its nonce and its seed.
    requests: u64,
    /// Per server: whether the answer to the next request it is sent is lost.
    lose_next: Vec<bool>,
    /// Answers lost so far.
    lost: u64,
    /// Requests that found no server up, or lost their answer, so far.
    unreachable: u64,
}

/// Servers joined by a fake network, on one simulated clock.
pub struct Network {
    pub servers: Vec<Server>,
    config: Config,
    state: RefCell<State>,
}

/// The `note` type of every server: a text, and optionally a mention (an
/// entity link) and a parent note it answers (an existential record link:
/// a reply is deleted with what it answers).
fn note_type_body() -> Value {
    json!({
        "type": folio_core::schema::builtin::BuiltinType::Type.link(),
        "content": {"name": "note", "schema": {"type": "object", "properties": {
            "content": {"type": "object", "properties": {
                "text": {"type": "string"},
                "mention": {"type": "entity_link", "optional": true},
                "parent": {"type": "record_link", "existential": true, "optional": true}
            }}
        }}}
    })
}

impl Network {
    /// A network of one server for each `(user, entity)`, all up, at
    /// [`REQUEST_NOW`]. Server `i`'s first base URL is `https://s{i}-0.example`.
    pub fn new(users: &[(&'static str, &'static str)]) -> Rc<Network> {
        let config = Config::default();
        let servers: Vec<Server> = (users.iter().enumerate())
            .map(|(i, &(user, entity))| {
                let key = ServerKey::from_seed([0x30 + i as u8; 32]);
                let host =
                    FakeHost::serving(config.clone(), user, entity, &base_url(i, 0), Some(&key));
                let app = host.add_app(app_id(), authorization_id(), APP_KEY_SEED, None);
                let note_type = host.owner_post(note_type_body());
                Server {
                    user,
                    entity,
                    host: RefCell::new(host),
                    app,
                    note_type,
                    address: IpAddr::V4(Ipv4Addr::new(203, 0, 113, 10 + i as u8)),
                }
            })
            .collect();
        let n = servers.len();
        let network = Rc::new(Network {
            servers,
            config,
            state: RefCell::new(State {
                now: date(REQUEST_NOW),
                down: vec![false; n],
                base_hosts: (0..n).map(|i| base_host(i, 0)).collect(),
                moves: vec![0; n],
                requests: 0,
                lose_next: vec![false; n],
                lost: 0,
                unreachable: 0,
            }),
        });
        for (from, server) in network.servers.iter().enumerate() {
            let weak: Weak<Network> = Rc::downgrade(&network);
            server.host.borrow().connect(Rc::new(move |request| {
                let network = weak
                    .upgrade()
                    .expect("the network outlives its hosts' requests");
                network.carry(from, request)
            }));
        }
        network.set_now(date(REQUEST_NOW));
        network
    }

    pub fn now(&self) -> RecordDate {
        self.state.borrow().now
    }

    /// Moves the clock to `now` (never back), for requests and every
    /// host's jobs.
    pub fn set_now(&self, now: RecordDate) {
        let now = now.max(self.now());
        self.state.borrow_mut().now = now;
        for server in &self.servers {
            let host = server.host.borrow();
            host.set_scheduler_now(now);
            host.set_provision_now(now);
        }
    }

    pub fn advance(&self, millis: i64) {
        self.set_now(millis_after(self.now(), millis));
    }

    pub fn is_down(&self, server: usize) -> bool {
        self.state.borrow().down[server]
    }

    /// Takes server `server` down (`true`) or brings it back up.
    pub fn set_down(&self, server: usize, down: bool) {
        self.state.borrow_mut().down[server] = down;
    }

    /// The answer to the next request server `server` is sent is lost:
    /// the server handles it, and its sender sees it unreachable, as when
    /// a connection breaks after the request went through.
    pub fn lose_next_answer(&self, server: usize) {
        self.state.borrow_mut().lose_next[server] = true;
    }

    /// How many requests so far found no server up or lost their answer.
    pub fn unreachable_so_far(&self) -> u64 {
        self.state.borrow().unreachable
    }

    /// How many answers were lost.
    pub fn lost_answers(&self) -> u64 {
        self.state.borrow().lost
    }

    /// Restarts server `server`: its store stays, its rate buckets and
    /// the nonces it saw are forgotten (its replay guard starts now). Like
    /// the native host, it serves nothing before its guard's
    /// `serves_from`: the clock moves past it.
    pub fn restart(&self, server: usize) {
        let now = self.now();
        (self.servers[server].host.borrow().counters).restart(&self.config.limits, now);
        self.advance(MEMORY_ONLY_AHEAD_MS);
    }

    /// Moves server `server` to a new base URL, as an operator who changes
    /// `--base-url` and restarts: the server rewrites its user's Entity
    /// record (core's `entity_record_update`, written by the server), and
    /// the old address answers nothing from now on.
    pub fn move_server(&self, server: usize) {
        let moves = {
            let mut state = self.state.borrow_mut();
            state.moves[server] += 1;
            state.base_hosts[server] = base_host(server, state.moves[server]);
            state.moves[server]
        };
        let url = base_url(server, moves);
        let mut host = self.servers[server].host.borrow_mut();
        host.settings.base_url = url.clone();
        host.settings.docs_url = folio_core::problem::default_docs_url(&url);
        let user = host.store.user.clone();
        let record = entity_record(&host, self.servers[server].entity);
        let key = ServerKey::from_seed([0x30 + server as u8; 32]);
        let update = entity_record_update(
            &record,
            &user.entity,
            &user.name,
            &url,
            Some(&key.public_base64()),
        )
        .expect("a new base URL is a new Entity record version");
        let request = WriteRequest::put(RecordKey::of(&record), update.body.to_string().as_bytes())
            .expect("an update body")
            .by_server();
        if let Err(refused) = host.owner_job(vec![request]) {
            panic!("the Entity record update was refused: {refused}");
        }
        drop(host);
        self.restart(server);
    }

    /// The next nonce and seed, unique on the network.
    pub fn draw(&self) -> (String, [u8; 32]) {
        let mut state = self.state.borrow_mut();
        state.requests += 1;
        let nonce = format!("n{}", state.requests);
        let seed = seed_of(&nonce);
        (nonce, seed)
    }

    /// A request of server `server`'s app, signed, with a JSON body when
    /// given, answered by its server at the network's time.
    pub fn app_request(
        &self,
        server: usize,
        method: &str,
        target: &str,
        body: Option<&Value>,
    ) -> Reply<Stream> {
        let (nonce, seed) = self.draw();
        let side = &self.servers[server];
        let mut call = Call::new(method, target).at(self.now()).seed(seed);
        call.host = side.entity.to_owned();
        let body = match body {
            Some(value) => {
                let body = Body::json(value);
                call = call.json_headers(&body);
                body
            }
            None => Body::empty(),
        };
        let call = call.signed(&side.app, &nonce, &[]);
        pollster::block_on(call.send(&*side.host.borrow(), body))
    }

    /// Carries a request server `from` sends: to the server whose entity or
    /// base URL its host names, if that server is up.
    fn carry(&self, from: usize, request: PeerRequest) -> Result<PeerAnswer, PeerFailure> {
        let carried = self.carry_to(from, request);
        if let Err(PeerFailure::Unreachable(_)) = &carried {
            self.state.borrow_mut().unreachable += 1;
        }
        carried
    }

    fn carry_to(&self, from: usize, request: PeerRequest) -> Result<PeerAnswer, PeerFailure> {
        let url = url::Url::parse(&request.url)
            .map_err(|error| PeerFailure::BadUrl(format!("{}: {error}", request.url)))?;
        let name = url.host_str().unwrap_or_default().to_owned();
        let to = {
            let state = self.state.borrow();
            let to = (self.servers.iter().enumerate())
                .find(|(i, server)| server.entity == name || state.base_hosts[*i] == name)
                .map(|(i, _)| i);
            match to {
                Some(to) if !state.down[to] => to,
                Some(_) => return Err(PeerFailure::Unreachable(format!("{name} is down"))),
                None => return Err(PeerFailure::Unreachable(format!("no server at {name}"))),
            }
        };
        let (_, seed) = self.draw();
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let method = match request.method {
            PeerMethod::Head => "HEAD",
            PeerMethod::Get => "GET",
            PeerMethod::Post => "POST",
        };
        let mut call = Call::new(method, target)
            .at(self.now())
            .seed(seed)
            .from(Some(self.servers[from].address));
        call.host = name;
        call.port = url.port().unwrap_or(443);
        for (header, value) in &request.headers {
            call = call.header(header, value.clone());
        }
        let body = match request.body {
            Some(bytes) => {
                call = call.header("content-length", bytes.len().to_string());
                Body::of(bytes)
            }
            None => Body::empty(),
        };
        let reply = pollster::block_on(call.send(&*self.servers[to].host.borrow(), body));
        let body = match reply.body {
            ReplyBody::Empty => Vec::new(),
            ReplyBody::Bytes(bytes) => bytes,
            ReplyBody::Stream(_) => panic!("a peer request answered with a stream"),
        };
        {
            let mut state = self.state.borrow_mut();
            if std::mem::take(&mut state.lose_next[to]) {
                state.lost += 1;
                return Err(PeerFailure::Unreachable(format!(
                    "the answer of {} was lost",
                    request.url
                )));
            }
        }
        if body.len() > request.max_answer_bytes {
            return Err(PeerFailure::TooLarge {
                max: request.max_answer_bytes,
            });
        }
        Ok(PeerAnswer {
            status: reply.status,
            headers: (reply.headers.into_iter())
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
            body: match method {
                "HEAD" => Vec::new(),
                _ => body,
            },
        })
    }
}

fn base_host(server: usize, moves: u32) -> String {
    format!("s{server}-{moves}.example")
}

fn base_url(server: usize, moves: u32) -> String {
    format!("https://{}", base_host(server, moves))
}

/// The user's own Entity record, as their store holds it now.
fn entity_record(host: &FakeHost, entity: &str) -> Record {
    let json = host
        .texts(&format!(
            "SELECT v.record FROM records r JOIN versions v \
             ON v.user_id = r.user_id AND v.hash = r.version_hash \
             WHERE r.author = '{entity}' AND r.type_record_id = '{}' AND r.deleted = 0",
            folio_core::schema::builtin::BuiltinType::Entity
                .link()
                .record_id
        ))
        .pop()
        .expect("the user's Entity record");
    folio_core::store::read_record(&json).expect("a stored record")
}
