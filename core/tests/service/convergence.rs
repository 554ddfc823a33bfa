//! The convergence rule of issue 42, as a property: after any sequence of
//! actions by Alice and Bob on two servers (`network.rs`: core's fake host
//! and a fake network between two of them, simulated time), once both
//! servers are up and both outboxes are empty, every record both may read
//! is the same on both sides, but for the differences the protocol intends
//! and documents, and nothing is stuck.
//!
//! Actions, in random interleavings: create a note (private, shared with
//! the other, or public; mentioning the other or not; answering a note, an
//! existential link, so that deleting it cascades), edit one (which shares,
//! unshares, mentions and drops a mention), delete it, delete another's note
//! on this server only, run one due delivery of a server's outbox, let time
//! pass, take a server down and bring it back, restart it, move it to a new
//! base URL, lose the answer to the next request a server is sent. Writes
//! refused because the other server could not be reached just then (issue
//! 42's defect 5, another part of it) are counted, not failures. At the end both servers are up and their outboxes are run,
//! the clock moved to each next due time, until nothing is pending (at most
//! [`SETTLE_ROUNDS`] rounds).
//!
//! The rule, for each note R that X wrote and the other user Y (H: X's
//! version of R now; C: Y's copy, if any; "concerns": Y is a reader of the
//! version, or it is one Y may read that mentions Y or answers Y's note,
//! as `docs/federation.md` §4 picks whom to notify):
//! - if H concerns Y, C is H, or a deletion here that Y chose (a local
//!   deletion, or a cascade of one of Y's deletions over X's reply);
//! - else C is absent, H, or a deletion here (Y chose it, or Y's server
//!   wrote it because Y's access ended, or a cascade). A live copy that
//!   is not H breaks the rule: X's server tells every later version to
//!   whoever holds a copy they may read (the record's audience).
//!
//! And both outboxes end empty: nothing pending, nothing given up.
//!
//! Cases: [`DEFAULT_CASES`] per run (`cargo test -p folio-core`), or
//! `FOLIO_CONVERGENCE_CASES`; the actions are drawn from a fixed seed, or
//! from `FOLIO_CONVERGENCE_SEED`.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use folio_core::Fresh;
use folio_core::problem::ProblemType;
use folio_core::service::federation::RetryPolicy;
use folio_core::service::{next_due, plan_deliveries};
use proptest::prelude::*;
use proptest::test_runner::{
    Config as ProptestConfig, RngAlgorithm, TestCaseError, TestRng, TestRunner,
};
use serde_json::{Value, json};

use crate::network::Network;

/// Cases per run when `FOLIO_CONVERGENCE_CASES` is not set.
const DEFAULT_CASES: u32 = 2000;
/// Actions per case, at most.
const MAX_ACTIONS: usize = 24;
/// Outbox rounds at the end, at most, before an outbox that is not empty
/// counts as stuck.
const SETTLE_ROUNDS: usize = 40;
/// Deliveries one plan holds, at most (the native host's `MAX_DELIVERIES_AT_ONCE`).
const MAX_PLANNED: usize = 256;

const USERS: [(&str, &str); 2] = [("alice", "alice.example"), ("bob", "bob.example")];

/// Who may read a note's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Audience {
    /// Its author only.
    Private,
    /// Its author and the other user.
    Shared,
    Public,
}

/// One step of a case.
#[derive(Debug, Clone)]
enum Action {
    /// `by` writes a note; `answers` picks the note it answers among the
    /// live notes `by`'s store holds.
    Create {
        by: usize,
        audience: Audience,
        mention: bool,
        answers: Option<u8>,
    },
    /// `by` edits one of their live notes (`pick`).
    Edit {
        by: usize,
        pick: u8,
        audience: Audience,
        mention: bool,
    },
    /// `by` deletes one of their live notes.
    Delete {
        by: usize,
        pick: u8,
    },
    /// `by` deletes the other's live note on their server only.
    DeleteHere {
        by: usize,
        pick: u8,
    },
    /// Server `server` runs one of its due deliveries.
    Deliver {
        server: usize,
        pick: u8,
    },
    /// Time passes.
    Wait {
        millis: u32,
    },
    Down {
        server: usize,
    },
    Up {
        server: usize,
    },
    Restart {
        server: usize,
    },
    Move {
        server: usize,
    },
    /// The next request to server `server` is answered, but the answer
    /// is lost on the way back (the sender sees it unreachable).
    LoseAnswer {
        server: usize,
    },
}

fn audience() -> impl Strategy<Value = Audience> {
    prop_oneof![
        Just(Audience::Private),
        Just(Audience::Shared),
        Just(Audience::Public)
    ]
}

fn action() -> impl Strategy<Value = Action> {
    let user = 0..2usize;
    prop_oneof![
        4 => (user.clone(), audience(), any::<bool>(), prop::option::weighted(0.5, any::<u8>()))
            .prop_map(|(by, audience, mention, answers)| Action::Create { by, audience, mention, answers }),
        4 => (user.clone(), any::<u8>(), audience(), any::<bool>())
            .prop_map(|(by, pick, audience, mention)| Action::Edit { by, pick, audience, mention }),
        2 => (user.clone(), any::<u8>()).prop_map(|(by, pick)| Action::Delete { by, pick }),
        1 => (user.clone(), any::<u8>()).prop_map(|(by, pick)| Action::DeleteHere { by, pick }),
        5 => (user.clone(), any::<u8>()).prop_map(|(server, pick)| Action::Deliver { server, pick }),
        2 => (0u32..120_000).prop_map(|millis| Action::Wait { millis }),
        1 => user.clone().prop_map(|server| Action::Down { server }),
        1 => user.clone().prop_map(|server| Action::Up { server }),
        1 => user.clone().prop_map(|server| Action::Restart { server }),
        1 => user.clone().prop_map(|server| Action::Move { server }),
        1 => user.prop_map(|server| Action::LoseAnswer { server }),
    ]
}

/// A note as one store holds it: its author, id, and current version.
#[derive(Debug, Clone)]
struct Held {
    author: String,
    id: String,
    version: Value,
}

impl Held {
    fn live(&self) -> bool {
        self.version.get("no_content").is_none()
    }
}

/// One run of a sequence of actions.
struct Run {
    network: Rc<Network>,
    /// The notes each user chose to delete on their server only: (user, author, id).
    deleted_here: HashSet<(usize, String, String)>,
    writes: u32,
    counts: Counts,
}

/// What one run did, and what its check found.
#[derive(Debug, Default)]
struct Counts {
    creates: u64,
    edits: u64,
    deletes: u64,
    deletes_here: u64,
    /// Writes refused because another server could not be reached (defect 5).
    refused_unreachable: u64,
    deliveries: std::cell::Cell<u64>,
    downs: u64,
    restarts: u64,
    moves: u64,
    same: std::cell::Cell<u64>,
    deleted_here_at_end: std::cell::Cell<u64>,
    cascades_at_end: std::cell::Cell<u64>,
}

impl Run {
    fn new() -> Self {
        Run {
            network: Network::new(&USERS),
            deleted_here: HashSet::new(),
            writes: 0,
            counts: Counts::default(),
        }
    }

    fn other(user: usize) -> usize {
        1 - user
    }

    /// The notes `user`'s store holds, in the order of their rows.
    fn notes(&self, user: usize) -> Vec<Held> {
        let network = &self.network;
        let types: Vec<String> = (network.servers.iter())
            .map(|server| format!("'{}'", server.note_type.id))
            .collect();
        let host = network.servers[user].host.borrow();
        let rows = host.texts(&format!(
            "SELECT v.record FROM records r JOIN versions v \
             ON v.user_id = r.user_id AND v.hash = r.version_hash \
             WHERE r.type_record_id IN ({}) ORDER BY r.row",
            types.join(", ")
        ));
        rows.iter()
            .map(|row| {
                let version: Value = serde_json::from_str(row).expect("a stored record");
                Held {
                    author: version["author"]["entity"].as_str().unwrap().to_owned(),
                    id: version["id"].as_str().unwrap().to_owned(),
                    version,
                }
            })
            .collect()
    }

    /// Every version of `author`'s note `id` that `user`'s store holds, by hash.
    fn versions(&self, user: usize, author: &str, id: &str) -> HashMap<String, Value> {
        let host = self.network.servers[user].host.borrow();
        let rows = host.texts(&format!(
            "SELECT record FROM versions WHERE author = '{author}' AND record_id = '{id}'"
        ));
        rows.iter()
            .map(|row| {
                let version: Value = serde_json::from_str(row).expect("a stored version");
                let hash = version["version"]["hash"].as_str().unwrap().to_owned();
                (hash, version)
            })
            .collect()
    }

    fn pick(notes: Vec<Held>, pick: u8) -> Option<Held> {
        match notes.len() {
            0 => None,
            n => Some(notes[pick as usize % n].clone()),
        }
    }

    fn body(&self, by: usize, audience: Audience, mention: bool, parent: Option<&Value>) -> Value {
        let (me, other) = (USERS[by].1, USERS[Self::other(by)].1);
        let permissions = match audience {
            Audience::Private => json!({}),
            Audience::Shared => json!({"read": [{"entity": me}, {"entity": other}]}),
            Audience::Public => json!({"read": "public"}),
        };
        let mut content = json!({"text": format!("note {}", self.writes)});
        if mention {
            content["mention"] = json!({"entity": other});
        }
        if let Some(parent) = parent {
            content["parent"] = parent.clone();
        }
        json!({"permissions": permissions, "content": content})
    }

    /// Sends a write of `by`'s app; checks it was taken, unless the other
    /// server could not be reached meanwhile (a link to its entity may
    /// need it: issue 42's defect 5, not this test's).
    fn write(&mut self, by: usize, method: &str, path: &str, body: &Value) -> Option<Value> {
        let taken = self.send_write(by, method, path, body);
        if taken.is_some() {
            let counts = &mut self.counts;
            match (method, body.get("no_content")) {
                ("POST", _) => counts.creates += 1,
                ("PUT", _) => counts.edits += 1,
                (_, Some(_)) => counts.deletes_here += 1,
                _ => counts.deletes += 1,
            }
        }
        taken
    }

    fn send_write(&mut self, by: usize, method: &str, path: &str, body: &Value) -> Option<Value> {
        self.writes += 1;
        let unreachable = self.network.unreachable_so_far();
        let reply = self.network.app_request(by, method, path, Some(body));
        let reached = self.network.unreachable_so_far() == unreachable;
        let text = String::from_utf8_lossy(crate::kit::bytes(&reply)).into_owned();
        // Issue 42's defect 5 (another part of it): a link to an entity whose
        // server could not be reached just now is refused, as invalid or as
        // a problem to try again later (`502`, `503`).
        let peer_trouble = matches!(reply.status, 502 | 503)
            || (reply.problem == Some(ProblemType::InvalidLink)
                && (text.contains("unreachable") || text.contains("answered 5")));
        match reply.status {
            200 | 201 => Some(serde_json::from_str(&text).expect("a JSON answer")),
            _ if !reached || peer_trouble => {
                self.counts.refused_unreachable += 1;
                None
            }
            status => panic!("{method} {path} {body} answered {status}: {text}"),
        }
    }

    fn act(&mut self, action: &Action) {
        let network = Rc::clone(&self.network);
        network.advance(1_000);
        match *action {
            Action::Create {
                by,
                audience,
                mention,
                answers,
            } if !network.is_down(by) => {
                let parent = answers.and_then(|pick| {
                    let live = self.notes(by).into_iter().filter(Held::live).collect();
                    Self::pick(live, pick)
                });
                let parent =
                    parent.map(|held| json!({"entity": held.author, "record_id": held.id}));
                let mut body = self.body(by, audience, mention, parent.as_ref());
                body["type"] = crate::link(&network.servers[by].note_type);
                let path = network.servers[by].records();
                self.write(by, "POST", &path, &body);
            }
            Action::Edit {
                by,
                pick,
                audience,
                mention,
            } if !network.is_down(by) => {
                // A reply to a note deleted here keeps a link that no
                // longer resolves: it is refused (`invalid_link`), rightly,
                // and is not tried.
                let answered_live: HashSet<String> = (self.notes(by).into_iter())
                    .filter(Held::live)
                    .map(|held| format!("{}/{}", held.author, held.id))
                    .collect();
                let own: Vec<Held> = (self.own_live(by).into_iter())
                    .filter(|held| match &held.version["content"]["parent"] {
                        Value::Null => true,
                        parent => answered_live.contains(&format!(
                            "{}/{}",
                            parent["entity"].as_str().unwrap_or_default(),
                            parent["record_id"].as_str().unwrap_or_default()
                        )),
                    })
                    .collect();
                if let Some(held) = Self::pick(own, pick) {
                    let parent = held.version["content"].get("parent").cloned();
                    let body = self.body(by, audience, mention, parent.as_ref());
                    let path = format!(
                        "{}/{}/{}",
                        network.servers[by].records(),
                        held.author,
                        held.id
                    );
                    self.write(by, "PUT", &path, &body);
                }
            }
            Action::Delete { by, pick } if !network.is_down(by) => {
                if let Some(held) = Self::pick(self.own_live(by), pick) {
                    let path = format!(
                        "{}/{}/{}",
                        network.servers[by].records(),
                        held.author,
                        held.id
                    );
                    self.write(by, "DELETE", &path, &json!({}));
                }
            }
            Action::DeleteHere { by, pick } if !network.is_down(by) => {
                let others: Vec<Held> = (self.notes(by).into_iter())
                    .filter(|held| held.live() && held.author != USERS[by].1)
                    .collect();
                if let Some(held) = Self::pick(others, pick) {
                    let path = format!(
                        "{}/{}/{}",
                        network.servers[by].records(),
                        held.author,
                        held.id
                    );
                    let body = json!({"no_content": {"action": "local"}});
                    if self.write(by, "DELETE", &path, &body).is_some() {
                        self.deleted_here.insert((by, held.author, held.id));
                    }
                }
            }
            Action::Deliver { server, pick } if !network.is_down(server) => {
                self.deliver(server, Some(pick));
            }
            Action::Wait { millis } => network.advance(i64::from(millis)),
            Action::Down { server } => {
                if !network.is_down(server) {
                    self.counts.downs += 1;
                }
                network.set_down(server, true);
            }
            Action::Up { server } if network.is_down(server) => {
                network.set_down(server, false);
                network.restart(server);
            }
            Action::Restart { server } => {
                self.counts.restarts += 1;
                network.restart(server);
            }
            Action::Move { server } => {
                self.counts.moves += 1;
                network.move_server(server);
            }
            Action::LoseAnswer { server } => network.lose_next_answer(server),
            // An action of a user whose server is down, or bringing up a
            // server that is up: nothing happens.
            _ => {}
        }
    }

    fn own_live(&self, by: usize) -> Vec<Held> {
        (self.notes(by).into_iter())
            .filter(|held| held.live() && held.author == USERS[by].1)
            .collect()
    }

    /// Runs the deliveries due on `server`: the `pick`th of them, or all
    /// in the order planned. Answers how many ran.
    fn deliver(&self, server: usize, pick: Option<u8>) -> usize {
        let network = &self.network;
        let now = network.now();
        let host = network.servers[server].host.borrow();
        let planned = pollster::block_on(plan_deliveries(&*host, now, None, &[], MAX_PLANNED))
            .expect("a plan");
        let chosen: Vec<_> = match pick {
            Some(_) if planned.is_empty() => Vec::new(),
            Some(pick) => vec![&planned[pick as usize % planned.len()]],
            None => planned.iter().collect(),
        };
        for delivery in &chosen {
            self.counts.deliveries.set(self.counts.deliveries.get() + 1);
            let (_, seed) = network.draw();
            let fresh = Fresh::from_seed(seed);
            pollster::block_on(delivery.run(&*host, now, &fresh, &RetryPolicy::default()));
        }
        chosen.len()
    }

    /// Outbox rows of `server`: pending, and given up.
    fn outbox(&self, server: usize) -> (i64, i64) {
        let host = self.network.servers[server].host.borrow();
        (
            host.count("SELECT COUNT(*) FROM outbox WHERE failed_at IS NULL"),
            host.count("SELECT COUNT(*) FROM outbox WHERE failed_at IS NOT NULL"),
        )
    }

    /// Brings every server up and runs their outboxes until nothing is
    /// pending, moving the clock to the next due time between rounds.
    fn settle(&self) {
        let network = &self.network;
        for server in 0..network.servers.len() {
            if network.is_down(server) {
                network.set_down(server, false);
                network.restart(server);
            }
        }
        for _ in 0..SETTLE_ROUNDS {
            for server in 0..network.servers.len() {
                self.deliver(server, None);
            }
            let pending: i64 = (0..network.servers.len()).map(|s| self.outbox(s).0).sum();
            if pending == 0 {
                return;
            }
            let next = (network.servers.iter())
                .filter_map(|server| {
                    let host = server.host.borrow();
                    pollster::block_on(next_due(&*host, None, &[])).expect("the next due")
                })
                .min()
                .expect("a pending notification is due some time");
            let now = network.now().unix_millis();
            network.advance((next - now).max(1));
        }
    }

    /// Checks the rule; answers what breaks it.
    fn check(&self) -> Result<(), String> {
        let mut broken = Vec::new();
        for (server, (user, _)) in USERS.iter().enumerate() {
            let (pending, failed) = self.outbox(server);
            if pending + failed > 0 {
                let host = self.network.servers[server].host.borrow();
                let rows = host.texts(
                    "SELECT recipient || ' ' || record_id || ' ' || version_hash || ' attempts=' \
                     || attempts || ' failed=' || IFNULL(failed_at, '-') || ' ' \
                     || IFNULL(last_error, '') FROM outbox",
                );
                broken.push(format!(
                    "{user}'s outbox is not empty after {SETTLE_ROUNDS} rounds: {rows:#?}"
                ));
            }
        }
        for (x, (_, author)) in USERS.iter().enumerate() {
            let y = Self::other(x);
            let reader = USERS[y].1;
            let theirs: HashMap<(String, String), Held> = (self.notes(y).into_iter())
                .map(|held| ((held.author.clone(), held.id.clone()), held))
                .collect();
            let y_deleted: HashSet<String> = (self.notes(y).into_iter())
                .filter(|held| !held.live())
                .map(|held| format!("{}/{}", held.author, held.id))
                .collect();
            for held in self.notes(x).into_iter().filter(|h| h.author == *author) {
                let head = &held.version;
                if head["version"]["author"]["entity"] != *author {
                    broken.push(format!(
                        "{author}'s note {} ends in another's version: {head}",
                        held.id
                    ));
                }
                let copy = theirs.get(&(held.author.clone(), held.id.clone()));
                let chain = self.versions(x, author, &held.id);
                let verdict = judge(
                    head,
                    copy.map(|c| &c.version),
                    &chain,
                    reader,
                    self.deleted_here
                        .contains(&(y, held.author.clone(), held.id.clone())),
                    &y_deleted,
                );
                let counted = match verdict {
                    Ok(Verdict::Same) => Some(&self.counts.same),
                    Ok(Verdict::DeletedHere { cascade }) => {
                        let counts = &self.counts;
                        if cascade {
                            counts.cascades_at_end.set(counts.cascades_at_end.get() + 1);
                        }
                        Some(&counts.deleted_here_at_end)
                    }
                    Ok(Verdict::NotHeld) | Err(_) => None,
                };
                if let Some(count) = counted {
                    count.set(count.get() + 1);
                }
                if let Err(why) = verdict {
                    broken.push(format!(
                        "{author}'s note {} on {reader}'s server: {why}\n  {author}'s: {head}\n  {reader}'s: {}",
                        held.id,
                        copy.map_or("none".to_owned(), |c| c.version.to_string())
                    ));
                }
            }
        }
        match broken.is_empty() {
            true => Ok(()),
            false => Err(broken.join("\n")),
        }
    }
}

fn live(version: &Value) -> bool {
    version.get("no_content").is_none()
}

fn hash(version: &Value) -> &str {
    version["version"]["hash"].as_str().unwrap_or_default()
}

/// Whether `reader` may read `version`.
fn readable(version: &Value, reader: &str) -> bool {
    live(version)
        && match &version["permissions"]["read"] {
            Value::String(public) => public == "public",
            Value::Array(readers) => readers.iter().any(|r| r["entity"] == reader),
            _ => false,
        }
}

/// Whether `version` is owed to `reader` (`docs/federation.md` §4): they
/// are a reader, or may read it and it mentions them or answers theirs.
fn concerns(version: &Value, reader: &str) -> bool {
    let listed = match &version["permissions"]["read"] {
        Value::Array(readers) => readers.iter().any(|r| r["entity"] == reader),
        _ => false,
    };
    let content = &version["content"];
    let links = content["mention"]["entity"] == reader || content["parent"]["entity"] == reader;
    live(version) && (listed || (readable(version, reader) && links))
}

/// How a reader's copy of a note passed the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The author's version.
    Same,
    /// None, and none owed.
    NotHeld,
    /// Deleted on the reader's server only: chosen, a cascade, or access ended.
    DeletedHere {
        /// By a cascade of the reader's deletion of the note it answers.
        cascade: bool,
    },
}

/// The rule for one note: `head` its author's version, `copy` the reader's.
fn judge(
    head: &Value,
    copy: Option<&Value>,
    chain: &HashMap<String, Value>,
    reader: &str,
    chosen: bool,
    deleted_at_reader: &HashSet<String>,
) -> Result<Verdict, String> {
    let owed = concerns(head, reader);
    let Some(copy) = copy else {
        return match owed {
            true => Err("missing: the reader may read it and was owed it".into()),
            false => Ok(Verdict::NotHeld),
        };
    };
    if hash(copy) == hash(head) {
        return Ok(Verdict::Same);
    }
    let deleted_here = !live(copy)
        && copy["version"]["author"]["entity"] == reader
        && matches!(
            copy["no_content"]["action"].as_str(),
            Some("local" | "leave")
        );
    if deleted_here {
        let parent = (chain.values())
            .find_map(|v| v["content"]["parent"].as_object())
            .map(|p| {
                format!(
                    "{}/{}",
                    p["entity"].as_str().unwrap_or(""),
                    p["record_id"].as_str().unwrap_or("")
                )
            });
        let cascade = parent.is_some_and(|p| deleted_at_reader.contains(&p));
        return match chosen || cascade || !owed {
            true => Ok(Verdict::DeletedHere { cascade }),
            false => Err(
                "deleted on the reader's server, neither chosen nor a cascade, though owed".into(),
            ),
        };
    }
    if owed {
        return Err("stale: the reader was owed the author's version".into());
    }
    match live(copy) {
        true => Err("stale: a live copy of a version the author's server went on from".into()),
        false => Err("a tombstone the author's chain does not end with".into()),
    }
}

/// The seed of the run's random actions: fixed, so that a run that passed
/// passes again, unless `FOLIO_CONVERGENCE_SEED` names another (any text,
/// hashed).
fn seed() -> [u8; 32] {
    let text = std::env::var("FOLIO_CONVERGENCE_SEED").unwrap_or_default();
    crate::seed_of(&format!("convergence {text}"))
}

fn cases() -> u32 {
    std::env::var("FOLIO_CONVERGENCE_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Runs `actions`, settles, and checks the rule.
fn run_case(actions: &[Action], tally: &mut Tally) -> Result<(), String> {
    let mut run = Run::new();
    for action in actions {
        run.act(action);
    }
    run.settle();
    let checked = run.check();
    tally.add(&run);
    checked
}

/// What the cases of a run did, summed: so that a run that passes shows
/// it exercised what it claims.
#[derive(Debug, Default)]
struct Tally {
    cases: u64,
    /// Writes the servers took, by kind.
    creates: u64,
    edits: u64,
    deletes: u64,
    deletes_here: u64,
    /// Writes refused because another server could not be reached (defect 5).
    refused_unreachable: u64,
    /// Deliveries run, between actions and at the end.
    deliveries: u64,
    downs: u64,
    restarts: u64,
    moves: u64,
    lost_answers: u64,
    /// Notes whose copy on the other server is the author's version.
    same: u64,
    /// Notes the other server holds deleted here (chosen, access ended, cascade).
    deleted_here_at_end: u64,
    /// Of those, by a cascade.
    cascades_at_end: u64,
}

impl Tally {
    fn merge(&mut self, other: &Tally) {
        self.cases += other.cases;
        self.creates += other.creates;
        self.edits += other.edits;
        self.deletes += other.deletes;
        self.deletes_here += other.deletes_here;
        self.refused_unreachable += other.refused_unreachable;
        self.deliveries += other.deliveries;
        self.downs += other.downs;
        self.restarts += other.restarts;
        self.moves += other.moves;
        self.lost_answers += other.lost_answers;
        self.same += other.same;
        self.deleted_here_at_end += other.deleted_here_at_end;
        self.cascades_at_end += other.cascades_at_end;
    }

    fn add(&mut self, run: &Run) {
        self.cases += 1;
        let counts = &run.counts;
        self.creates += counts.creates;
        self.edits += counts.edits;
        self.deletes += counts.deletes;
        self.deletes_here += counts.deletes_here;
        self.refused_unreachable += counts.refused_unreachable;
        self.deliveries += counts.deliveries.get();
        self.downs += counts.downs;
        self.restarts += counts.restarts;
        self.moves += counts.moves;
        self.lost_answers += run.network.lost_answers();
        self.same += counts.same.get();
        self.deleted_here_at_end += counts.deleted_here_at_end.get();
        self.cascades_at_end += counts.cascades_at_end.get();
    }
}

/// The stack of a thread that runs cases.
const LARGE_STACK: usize = 256 << 20;

/// Runs `f` on a thread of its own with a large stack: a notification's
/// request runs the other server's whole request path inside the
/// sender's, so the nested futures of a debug build need more than a test
/// thread's stack.
fn on_large_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let worker = std::thread::Builder::new()
        .name("convergence".into())
        .stack_size(LARGE_STACK)
        .spawn(f)
        .expect("a thread");
    match worker.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The property, for `cases` sequences of actions drawn from `seed`, on
/// as many threads as the machine runs at once (at most four), each with
/// its share of the cases and a seed of its own drawn from `seed`.
fn check_property(cases: u32, seed: [u8; 32]) -> Tally {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4)) as u32;
    let workers: Vec<_> = (0..threads)
        .map(|worker| {
            let share = cases / threads + u32::from(worker < cases % threads);
            let seed = crate::seed_of(&format!("{} {worker}", hex::encode(seed)));
            std::thread::Builder::new()
                .name(format!("convergence {worker}"))
                .stack_size(LARGE_STACK)
                .spawn(move || check_cases(share, seed))
                .expect("a thread")
        })
        .collect();
    let mut tally = Tally::default();
    for worker in workers {
        match worker.join() {
            Ok(done) => tally.merge(&done),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    tally
}

/// `cases` sequences of actions drawn from `seed`, on this thread.
fn check_cases(cases: u32, seed: [u8; 32]) -> Tally {
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let tally = std::cell::RefCell::new(Tally::default());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
    let result = TestRunner::new_with_rng(config, rng).run(
        &prop::collection::vec(action(), 1..=MAX_ACTIONS),
        |actions| run_case(&actions, &mut tally.borrow_mut()).map_err(TestCaseError::fail),
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
    tally.into_inner()
}

/// One sequence of actions, checked: what it did.
fn check_case(actions: Vec<Action>) -> Tally {
    on_large_stack(move || {
        let mut tally = Tally::default();
        if let Err(broken) = run_case(&actions, &mut tally) {
            panic!("{broken}");
        }
        tally
    })
}

/// A note created by user `by` for `audience`, mentioning nobody and
/// answering nothing: the first action of most cases below.
fn create(by: usize, audience: Audience) -> Action {
    Action::Create {
        by,
        audience,
        mention: false,
        answers: None,
    }
}

/// User `by`'s edit of the first note for `audience`, mentioning nobody.
fn edit(by: usize, audience: Audience) -> Action {
    Action::Edit {
        by,
        pick: 0,
        audience,
        mention: false,
    }
}

#[test]
fn two_servers_converge_after_any_actions() {
    let started = std::time::Instant::now();
    let (cases, seed) = (cases(), seed());
    let tally = check_property(cases, seed);
    eprintln!(
        "convergence: {cases} cases (seed {}) in {:.1} s: {tally:?}",
        hex::encode(seed),
        started.elapsed().as_secs_f64()
    );
    // The run did what it claims: every kind of action, and both ends of the rule.
    for (what, count) in [
        ("creates", tally.creates),
        ("edits", tally.edits),
        ("deletions", tally.deletes),
        ("local deletions", tally.deletes_here),
        ("deliveries", tally.deliveries),
        ("servers down", tally.downs),
        ("restarts", tally.restarts),
        ("moves", tally.moves),
        ("lost answers", tally.lost_answers),
        ("copies the same", tally.same),
        ("copies deleted here", tally.deleted_here_at_end),
        ("copies deleted here by a cascade", tally.cascades_at_end),
    ] {
        assert!(count > 0, "no {what} in {cases} cases: {tally:?}");
    }
}

/// The first divergence the property found (fixed in the write machine):
/// Alice shares a note with Bob (who never linked to her), then makes it
/// public. Bob's server is sent the public version (he could read the one
/// it replaces) and refused it as unsolicited (it names nobody there), so
/// Bob's copy stayed at the shared version and Alice's outbox held a
/// notification given up.
#[test]
fn an_update_that_drops_a_stranger_reader_still_reaches_them() {
    let actions = [create(0, Audience::Shared), edit(0, Audience::Public)];
    let tally = check_case(actions.to_vec());
    assert_eq!(tally.same, 1, "{tally:?}");
}

/// The second: Alice shares a note with Bob, then makes it private; Bob
/// deletes his copy on his server only before the private version reaches
/// him. His server cannot fetch that version (he may not read it) and,
/// holding the record deleted, answered the whole notification 404, which
/// Alice's server gave up for good: a failed row in her outbox for ever.
#[test]
fn an_unshared_version_for_a_copy_deleted_here_is_settled() {
    let actions = [
        create(0, Audience::Shared),
        Action::Deliver { server: 0, pick: 0 },
        edit(0, Audience::Private),
        Action::DeleteHere { by: 1, pick: 0 },
    ];
    let tally = check_case(actions.to_vec());
    assert_eq!(tally.deleted_here_at_end, 1, "{tally:?}");
}

/// The third: Bob writes a private note, shares it with Alice, makes it
/// private, shares it again; the answer to the notification of those
/// three versions is lost, and Bob's server sends it again. Alice's server
/// had stored the last; again, it could not fetch the private one and took
/// that for her access ending: it deleted her copy of a note shared with
/// her.
#[test]
fn a_notification_sent_again_keeps_a_copy_shared_again() {
    let actions = [
        create(1, Audience::Private),
        edit(1, Audience::Shared),
        edit(1, Audience::Private),
        edit(1, Audience::Shared),
        Action::LoseAnswer { server: 0 },
    ];
    let tally = check_case(actions.to_vec());
    assert_eq!((tally.lost_answers, tally.same), (1, 1), "{tally:?}");
}

/// The fourth: both servers moved (their users' Entity records have two
/// versions each), then Alice mentions Bob. Her server discovers Bob and
/// read his record's first version signed as Alice; to check that
/// signature Bob's server discovered Alice and read her first version
/// signed as Bob; to check that, Alice's server discovered Bob again, and
/// so on until a rate stopped it: the write was refused (`invalid_link`).
#[test]
fn servers_that_moved_meet_for_the_first_time() {
    let actions = [
        Action::Move { server: 1 },
        Action::Move { server: 0 },
        Action::Create {
            by: 0,
            audience: Audience::Private,
            mention: true,
            answers: None,
        },
    ];
    let tally = check_case(actions.to_vec());
    assert_eq!(
        (tally.creates, tally.refused_unreachable),
        (1, 0),
        "{tally:?}"
    );
}

/// The fifth: Bob shares a note with Alice, makes it public (Alice is
/// sent that version: she could read the one it replaces), then private
/// (sent to nobody: the public version concerned nobody), then shares it
/// with her again. Alice's server held the public version, could not
/// fetch the private one between, and refused the shared version for
/// good (404): her copy stayed at the public version.
#[test]
fn a_copy_whose_access_ended_unannounced_is_shared_again() {
    let actions = [
        create(1, Audience::Shared),
        edit(1, Audience::Public),
        edit(1, Audience::Private),
        edit(1, Audience::Shared),
    ];
    let tally = check_case(actions.to_vec());
    assert_eq!(tally.same, 1, "{tally:?}");
}

/// A defect the property found (issue 42): Bob shares a note with Alice,
/// makes it private (her server deletes its copy here: her access ended),
/// then public (not sent to her: she is no longer among those who keep a
/// copy), then shares it with her again. That version's parent is one she
/// may read, and her server took the record for one she chose to delete,
/// and kept it deleted. Now it walks the chain back to the versions it
/// holds and finds the private one between: shared again.
#[test]
fn a_copy_reshared_after_a_readable_version_comes_back() {
    let actions = [
        create(1, Audience::Shared),
        edit(1, Audience::Private),
        edit(1, Audience::Public),
        edit(1, Audience::Shared),
    ];
    let tally = check_case(actions.to_vec());
    assert_eq!(tally.same, 1, "{tally:?}");
}

/// The sixth: as the fifth, but a public version follows the private one
/// before Alice shares the note with Bob again (neither sent to him).
/// Bob's server held the first public version; the chain back from the
/// shared version reached the private one, which it could not fetch, and
/// the shared version was refused for good (404).
#[test]
fn a_copy_whose_access_ended_unannounced_further_back_is_shared_again() {
    let actions = [
        create(0, Audience::Shared),
        edit(0, Audience::Public),
        edit(0, Audience::Private),
        edit(0, Audience::Public),
        edit(0, Audience::Shared),
    ];
    let tally = check_case(actions.to_vec());
    assert_eq!(tally.same, 1, "{tally:?}");
}
