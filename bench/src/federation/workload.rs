//! The soak's actions beside Alice's stream of messages (issue 42): Bob
//! replies in the conversation; either side edits its messages, deletes
//! the other's "on this server only" (and the author edits it afterwards),
//! deletes its own records, shares a note with the other and makes it
//! private, and mentions the other in a public post and drops the mention.
//! A seeded RNG picks each action and its actor; each action is one small
//! function that says what came of it. Every record written is tracked with
//! what was done to it, so that [`super::convergence`] knows what each
//! reader's copy should be at the end.
//!
//! First contact with a server that is down is driven by the faults'
//! task ([`first_contact`]): Alice starts a conversation with a user of
//! Bob's server her server has never heard of while that server is down.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use folio_client::client::{Call, Response, now_ms, record_id, retry_after};
use folio_conformance::dates::record_date;
use rand::rngs::StdRng;
use rand::seq::IteratorRandom;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use serde_json::{Value, json};

use super::{Client, Person, Phase, RETRY_PAUSE, Tracker, WRITE_RETRY_FOR, record_link};

/// Between two actions: about four a second beside Alice's 20 messages.
const ACTION_EVERY: Duration = Duration::from_millis(250);
/// How many records an action looks at before it says there was none to
/// act on.
const PICK_TRIES: usize = 8;
/// How long first contact is tried again: Bob's server is down for at most
/// a minute, then starts in about a second.
const FIRST_CONTACT_FOR: Duration = Duration::from_secs(180);

/// The people of a workload: `people[ALICE]`, `people[BOB]`, then the
/// contacts on Bob's server.
pub(super) const ALICE: usize = 0;
pub(super) const BOB: usize = 1;

/// What Alice published before the soak, and her conversation with Bob.
pub(super) struct Published {
    pub(super) conversation_type: Value,
    pub(super) message_type: Value,
    pub(super) post_type: Value,
    pub(super) note_type: Value,
    /// The conversation record, as Alice's server answered it.
    pub(super) conversation: Value,
}

/// What a tracked record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RecordKind {
    Conversation,
    Message,
    /// Shared with the reader (and maybe made private since).
    Note,
    /// Public, mentioning the reader (maybe no longer).
    Post,
}

impl RecordKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            RecordKind::Conversation => "conversation",
            RecordKind::Message => "message",
            RecordKind::Note => "note",
            RecordKind::Post => "post",
        }
    }
}

/// What was done to a tracked record, as far as its copies are concerned.
#[derive(Debug, Clone, Default)]
pub(super) struct History {
    pub(super) edits: u32,
    /// The author made it private after sharing it with the reader.
    pub(super) unshared: bool,
    /// The author dropped the reader's mention from the public post.
    pub(super) mention_dropped: bool,
    /// The reader deleted it on their server only.
    pub(super) deleted_here: bool,
    /// The author edited it after the reader deleted it here.
    pub(super) edited_after_deleted_here: bool,
}

/// A record the soak wrote, the one other person who should hold a copy,
/// and its author's latest version.
#[derive(Debug, Clone)]
pub(super) struct Tracked {
    pub(super) kind: RecordKind,
    /// Indexes into the people.
    pub(super) author: usize,
    pub(super) reader: usize,
    pub(super) id: String,
    /// The author's latest version hash, as their server answered it.
    pub(super) hash: String,
    /// Not deleted by its author.
    pub(super) live: bool,
    /// A message's conversation link.
    pub(super) conversation: Option<Value>,
    pub(super) text: String,
    pub(super) history: History,
}

impl Tracked {
    /// What happened to it, in words: "note, made private, deleted".
    pub(super) fn flow(&self) -> String {
        let mut steps = vec![self.kind.name().to_owned()];
        if self.history.deleted_here {
            steps.push("deleted here by the reader".to_owned());
        }
        if self.history.edits > 0 {
            steps.push(match self.history.edited_after_deleted_here {
                true => "edited after that".to_owned(),
                false => "edited".to_owned(),
            });
        }
        if self.history.unshared {
            steps.push("made private".to_owned());
        }
        if self.history.mention_dropped {
            steps.push("mention dropped".to_owned());
        }
        if !self.live {
            steps.push("deleted by its author".to_owned());
        }
        steps.join(", ")
    }
}

/// The actions, and how often each is picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Reply,
    Edit,
    DeleteHere,
    EditDeletedHere,
    Delete,
    Share,
    Unshare,
    Mention,
    DropMention,
}

const MIX: [(Action, u32); 9] = [
    (Action::Reply, 3),
    (Action::Edit, 3),
    (Action::DeleteHere, 2),
    (Action::EditDeletedHere, 2),
    (Action::Delete, 2),
    (Action::Share, 2),
    (Action::Unshare, 2),
    (Action::Mention, 1),
    (Action::DropMention, 1),
];

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Reply => "reply in the conversation",
            Action::Edit => "edit an own message",
            Action::DeleteHere => "delete the other's message here only",
            Action::EditDeletedHere => "edit a message the reader deleted here",
            Action::Delete => "delete an own record everywhere",
            Action::Share => "share a note with the other",
            Action::Unshare => "make a shared note private",
            Action::Mention => "public post mentioning the other",
            Action::DropMention => "drop the other's mention from a post",
        }
    }
}

/// Action name → outcome → how many times.
pub(super) type ActionCounts = BTreeMap<String, BTreeMap<String, u64>>;

/// What an action came to: a word for the counts, or an error (a request
/// that never got an answer it could use).
type Outcome = Result<&'static str, String>;

/// The actions' state: the people, what was written and what came of it.
pub(super) struct Workload {
    rng: StdRng,
    people: Vec<Person>,
    published: Published,
    /// Alice's stream of messages, which the actions also act on.
    tracker: Arc<Tracker>,
    /// Whether Bob's server is up (the faults' task says): Bob acts only
    /// then.
    bob_up: Arc<AtomicBool>,
    pub(super) records: Vec<Tracked>,
    /// Alice's stream messages an action took up, by id.
    adopted: HashMap<String, usize>,
    pub(super) counts: ActionCounts,
    /// The first few errors, for the report.
    pub(super) errors: Vec<String>,
    pub(super) failed: u64,
}

impl Workload {
    pub(super) fn new(
        seed: u64,
        people: Vec<Person>,
        published: Published,
        tracker: Arc<Tracker>,
        bob_up: Arc<AtomicBool>,
    ) -> Workload {
        let conversation = Tracked {
            kind: RecordKind::Conversation,
            author: ALICE,
            reader: BOB,
            id: published.conversation["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            hash: published.conversation["version"]["hash"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            live: true,
            conversation: None,
            text: String::new(),
            history: History::default(),
        };
        Workload {
            rng: StdRng::seed_from_u64(seed),
            people,
            published,
            tracker,
            bob_up,
            records: vec![conversation],
            adopted: HashMap::new(),
            counts: ActionCounts::new(),
            errors: Vec::new(),
            failed: 0,
        }
    }

    /// Every record to compare at the end: those the actions wrote or
    /// took up, and the rest of Alice's stream (`acknowledged`: id, hash).
    pub(super) fn records_with(&self, acknowledged: &[(String, String)]) -> Vec<Tracked> {
        let mut records = self.records.clone();
        for (id, hash) in acknowledged {
            if !self.adopted.contains_key(id) {
                records.push(Tracked {
                    kind: RecordKind::Message,
                    author: ALICE,
                    reader: BOB,
                    id: id.clone(),
                    hash: hash.clone(),
                    live: true,
                    conversation: Some(record_link(&self.published.conversation)),
                    text: "Message".to_owned(),
                    history: History::default(),
                });
            }
        }
        records
    }

    /// Acts every [`ACTION_EVERY`] until `until`.
    pub(super) async fn run(mut self, until: Instant) -> Workload {
        let mut tick = tokio::time::interval(ACTION_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while Instant::now() < until {
            tick.tick().await;
            let action = self.pick_action();
            let actor = match action {
                Action::Reply => BOB,
                _ => self.pick_actor(),
            };
            let outcome = self.act(action, actor).await;
            let name = format!("{}: {}", self.people[actor].entity, action.name());
            self.count(&name, outcome);
        }
        self
    }

    fn count(&mut self, action: &str, outcome: Outcome) {
        let word = match outcome {
            Ok(word) => word,
            Err(error) => {
                self.failed += 1;
                if self.errors.len() < 5 {
                    self.errors.push(format!("{action}: {error}"));
                }
                "FAILED"
            }
        };
        *self
            .counts
            .entry(action.to_owned())
            .or_default()
            .entry(word.to_owned())
            .or_default() += 1;
    }

    fn pick_action(&mut self) -> Action {
        let total: u32 = MIX.iter().map(|(_, weight)| weight).sum();
        let mut at = self.rng.random_range(0..total);
        for (action, weight) in MIX {
            if at < weight {
                return action;
            }
            at -= weight;
        }
        MIX[0].0
    }

    /// Alice or Bob, at even odds; Alice while Bob's server is down.
    fn pick_actor(&mut self) -> usize {
        match self.bob_up.load(Ordering::SeqCst) && self.rng.random_bool(0.5) {
            true => BOB,
            false => ALICE,
        }
    }

    async fn act(&mut self, action: Action, actor: usize) -> Outcome {
        let other = 1 - actor;
        match action {
            Action::Reply if self.bob_up.load(Ordering::SeqCst) => self.reply().await,
            Action::Reply => Ok("skipped: Bob's server is down"),
            Action::Edit => match self.pick_message(actor, |r| r.live && !r.history.deleted_here) {
                Some(index) => self.edit(index).await,
                None => Ok("no message to act on"),
            },
            Action::DeleteHere => {
                match self.pick_message(other, |r| r.live && !r.history.deleted_here) {
                    Some(index) => self.delete_here(index).await,
                    None => Ok("no message to act on"),
                }
            }
            Action::EditDeletedHere => {
                match self.pick(actor, |r| r.live && r.history.deleted_here) {
                    Some(index) => {
                        let outcome = self.edit(index).await;
                        if outcome.is_ok() {
                            self.records[index].history.edited_after_deleted_here = true;
                        }
                        outcome
                    }
                    None => Ok("no message to act on"),
                }
            }
            Action::Delete => {
                let kind = [RecordKind::Message, RecordKind::Note, RecordKind::Post]
                    [self.rng.random_range(0..3)];
                let index = match kind {
                    RecordKind::Message => self.pick_message(actor, |r| r.live),
                    _ => self.pick(actor, |r| r.live && r.kind == kind),
                };
                match index {
                    Some(index) => self.delete(index).await,
                    None => Ok("no record to act on"),
                }
            }
            Action::Share => self.share(actor).await,
            Action::Unshare => {
                match self.pick(actor, |r| {
                    r.live && r.kind == RecordKind::Note && !r.history.unshared
                }) {
                    Some(index) => self.unshare(index).await,
                    None => Ok("no shared note"),
                }
            }
            Action::Mention => self.mention(actor).await,
            Action::DropMention => {
                match self.pick(actor, |r| {
                    r.live && r.kind == RecordKind::Post && !r.history.mention_dropped
                }) {
                    Some(index) => self.drop_mention(index).await,
                    None => Ok("no post mentioning the other"),
                }
            }
        }
    }

    /// A tracked record `author` wrote that `wanted`, at random.
    fn pick(&mut self, author: usize, wanted: impl Fn(&Tracked) -> bool) -> Option<usize> {
        (0..self.records.len())
            .filter(|&index| {
                let record = &self.records[index];
                record.author == author && wanted(record)
            })
            .choose(&mut self.rng)
    }

    /// A message `author` wrote that `wanted`: for Alice, one of her
    /// stream's that Bob's stream has shown (taken up into the tracked
    /// records), at random; for Bob, one of his replies.
    fn pick_message(&mut self, author: usize, wanted: impl Fn(&Tracked) -> bool) -> Option<usize> {
        if author == BOB {
            return self.pick(BOB, |r| r.kind == RecordKind::Message && wanted(r));
        }
        let seen = self.tracker.seen_by_bob(Phase::Messages);
        for _ in 0..PICK_TRIES {
            let (id, hash) = seen.iter().choose(&mut self.rng)?;
            let index = match self.adopted.get(id) {
                Some(&index) => index,
                None => {
                    self.records.push(Tracked {
                        kind: RecordKind::Message,
                        author: ALICE,
                        reader: BOB,
                        id: id.clone(),
                        hash: hash.clone(),
                        live: true,
                        conversation: Some(record_link(&self.published.conversation)),
                        text: "Message".to_owned(),
                        history: History::default(),
                    });
                    self.adopted.insert(id.clone(), self.records.len() - 1);
                    self.records.len() - 1
                }
            };
            if wanted(&self.records[index]) {
                return Some(index);
            }
        }
        None
    }

    /// Bob writes a message in Alice's conversation.
    async fn reply(&mut self) -> Outcome {
        let text = format!("Bob's reply {}", self.records.len());
        let read =
            json!([{"entity": self.people[ALICE].entity}, {"entity": self.people[BOB].entity}]);
        let conversation = record_link(&self.published.conversation);
        let body = json!({
            "type": self.published.message_type,
            "permissions": {"read": read},
            "content": {"conversation": conversation, "text": text},
        });
        let created = self.create(BOB, body).await?;
        self.track(
            RecordKind::Message,
            BOB,
            ALICE,
            created,
            Some(conversation),
            text,
        );
        Ok("replied")
    }

    /// The author of `index` edits its text.
    async fn edit(&mut self, index: usize) -> Outcome {
        let record = &self.records[index];
        let text = format!("{} (edit {})", record.text, record.history.edits + 1);
        let content = match &record.conversation {
            Some(conversation) => json!({"conversation": conversation, "text": text}),
            None => json!({"text": text}),
        };
        let outcome = self.update(index, json!({"content": content})).await?;
        let record = &mut self.records[index];
        record.history.edits += 1;
        record.text = text;
        Ok(outcome)
    }

    /// The reader of `index` deletes their copy on their server only.
    async fn delete_here(&mut self, index: usize) -> Outcome {
        let record = &self.records[index];
        let reader = &self.people[record.reader];
        let author = self.people[record.author].entity.clone();
        let path = format!("/records/{author}/{}", record.id);
        // A version that arrives between the read and the deletion is a
        // conflict: read again.
        for _ in 0..3 {
            let Some(copy) = reader.client.record(&author, &record.id).await? else {
                return Ok("not on the reader's server yet");
            };
            if copy.get("no_content").is_some() {
                return Ok("already deleted there");
            }
            let body = json!({
                "version": {"parent_hash": copy["version"]["hash"], "created_at": record_date(now_ms())},
                "no_content": {"action": "local"},
            });
            let response = answered(&reader.client, Verb::Delete, &path, &body).await?;
            match response.status {
                200 => {
                    self.records[index].history.deleted_here = true;
                    return Ok("deleted here");
                }
                409 => continue,
                410 => return Ok("already deleted there"),
                status => return Err(format!("DELETE {path}: {status} {}", response.excerpt())),
            }
        }
        Ok("kept changing: left alone")
    }

    /// The author of `index` deletes it everywhere.
    async fn delete(&mut self, index: usize) -> Outcome {
        self.update(index, json!({})).await?;
        self.records[index].live = false;
        Ok("deleted")
    }

    /// `author` shares a new note with the other.
    async fn share(&mut self, author: usize) -> Outcome {
        let reader = 1 - author;
        let text = format!("A note for {}", self.people[reader].entity);
        let read =
            json!([{"entity": self.people[author].entity}, {"entity": self.people[reader].entity}]);
        let body = json!({
            "type": self.published.note_type,
            "permissions": {"read": read},
            "content": {"text": text},
        });
        let created = self.create(author, body).await?;
        self.track(RecordKind::Note, author, reader, created, None, text);
        Ok("shared")
    }

    /// The author of the note `index` makes it private.
    async fn unshare(&mut self, index: usize) -> Outcome {
        let text = format!("{} (private now)", self.records[index].text);
        let body = json!({"permissions": {}, "content": {"text": text}});
        let outcome = self.update(index, body).await?;
        let record = &mut self.records[index];
        record.history.unshared = true;
        record.text = text;
        Ok(outcome)
    }

    /// `author` writes a public post that mentions the other.
    async fn mention(&mut self, author: usize) -> Outcome {
        let reader = 1 - author;
        let text = format!("Hi {}", self.people[reader].entity);
        let body = json!({
            "type": self.published.post_type,
            "permissions": {"read": "public"},
            "content": {"text": text, "text_facets": [mention_facet(&self.people[reader].entity)]},
        });
        let created = self.create(author, body).await?;
        self.track(RecordKind::Post, author, reader, created, None, text);
        Ok("posted")
    }

    /// The author of the post `index` edits it to mention nobody.
    async fn drop_mention(&mut self, index: usize) -> Outcome {
        let text = format!("{} (to everyone)", self.records[index].text);
        let outcome = self
            .update(index, json!({"content": {"text": text}}))
            .await?;
        let record = &mut self.records[index];
        record.history.mention_dropped = true;
        record.text = text;
        Ok(outcome)
    }

    /// Creates `body` as `author` (with an id and date, so that sending it
    /// again is a replay); its id and version hash.
    async fn create(&mut self, author: usize, mut body: Value) -> Result<(String, String), String> {
        body["id"] = json!(record_id());
        body["created_at"] = json!(record_date(now_ms()));
        let client = &self.people[author].client;
        let response = answered(client, Verb::Post, "/records", &body).await?;
        answered_hash(&response, "POST /records")
    }

    /// An update (with `content`) or a deletion (without) of `index` by its
    /// author, after their latest version (so that sending it again is a
    /// replay); the record's hash follows.
    async fn update(&mut self, index: usize, mut body: Value) -> Outcome {
        let record = &self.records[index];
        let client = &self.people[record.author].client;
        let path = format!(
            "/records/{}/{}",
            self.people[record.author].entity, record.id
        );
        body["version"] = json!({"parent_hash": record.hash, "created_at": record_date(now_ms())});
        let verb = match body.get("content") {
            Some(_) => Verb::Put,
            None => Verb::Delete,
        };
        let response = answered(client, verb, &path, &body).await?;
        self.records[index].hash = answered_hash(&response, &path)?.1;
        Ok(match verb {
            Verb::Delete => "deleted",
            _ => "updated",
        })
    }

    fn track(
        &mut self,
        kind: RecordKind,
        author: usize,
        reader: usize,
        (id, hash): (String, String),
        conversation: Option<Value>,
        text: String,
    ) {
        self.records.push(Tracked {
            kind,
            author,
            reader,
            id,
            hash,
            live: true,
            conversation,
            text,
            history: History::default(),
        });
    }
}

/// A post's facet that mentions `entity` (the post type's `text_facets`).
fn mention_facet(entity: &str) -> Value {
    json!({"index": 0, "length": 2, "type": "mention", "mention": {"entity": entity}})
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Post,
    Put,
    Delete,
}

/// Sends `body` with `verb` to `path` of the client's user until it is
/// answered other than with a 5xx (or a broken connection) or
/// [`WRITE_RETRY_FOR`] has passed: a server killed meanwhile comes back.
/// The body is the same each time, so the write happens once.
async fn answered(
    client: &Client,
    verb: Verb,
    path: &str,
    body: &Value,
) -> Result<Response, String> {
    let url = client.url(path)?;
    let start = Instant::now();
    loop {
        let call = match verb {
            Verb::Post => Call::post(url.clone()),
            Verb::Put => Call::put(url.clone()),
            Verb::Delete => Call::delete(url.clone()),
        };
        let call = call.json(body).signed(&client.key);
        let error = match client.http.send(&call).await {
            Ok(response) if response.status < 500 => return Ok(response),
            Ok(response) => format!("{} {}", response.status, response.excerpt()),
            Err(error) => error,
        };
        if start.elapsed() > WRITE_RETRY_FOR {
            return Err(format!("{verb:?} {path}: {error}"));
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// The record id and version hash of a write's 200; anything else is an
/// error.
fn answered_hash(response: &Response, what: &str) -> Result<(String, String), String> {
    if response.status != 200 {
        return Err(format!(
            "{what}: {} {}",
            response.status,
            response.excerpt()
        ));
    }
    let answer = response.json()?;
    match (
        answer["record"]["id"].as_str(),
        answer["record"]["version"]["hash"].as_str(),
    ) {
        (Some(id), Some(hash)) => Ok((id.to_owned(), hash.to_owned())),
        _ => Err(format!("{what}: an answer without id or hash: {answer}")),
    }
}

/// How one first contact went.
#[derive(Debug, Clone, Serialize)]
pub struct FirstContact {
    pub entity: String,
    /// Seconds after the first write that Alice first wrote to them.
    pub at_seconds: f64,
    /// The first answer: `503 link_unreachable, Retry-After 5` is the one
    /// wanted while their server is down.
    pub first_answer: String,
    /// Answers `503 link_unreachable` with a `Retry-After`.
    pub unreachable_answers: u32,
    /// Attempts that got no answer (Alice's server down meanwhile).
    pub unanswered: u32,
    pub attempts: u32,
    /// Seconds from the first attempt to the conversation's 200.
    pub created_after_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FirstContact {
    /// Whether it went as wanted: refused as retryable while the server
    /// was down, then written.
    pub(super) fn ok(&self) -> bool {
        self.error.is_none()
            && self.unreachable_answers > 0
            && self.first_answer.starts_with("503 link_unreachable")
            && self.created_after_seconds.is_some()
    }
}

/// Alice starts a conversation with `contact` (`people[index]`), whose
/// server is down and whom her server never heard of, trying again after
/// each `503 link_unreachable`'s `Retry-After` until it is written; then
/// writes a message in it. What it did, and the records to check.
pub(super) async fn first_contact(
    alice: Person,
    contact: Person,
    index: usize,
    published: (Value, Value),
    at_seconds: f64,
) -> (FirstContact, Vec<Tracked>) {
    let (conversation_type, message_type) = published;
    let read = json!([{"entity": alice.entity}, {"entity": contact.entity}]);
    let mut body = json!({
        "id": record_id(),
        "created_at": record_date(now_ms()),
        "type": conversation_type,
        "permissions": {"read": read, "write": []},
        "content": {},
    });
    let mut report = FirstContact {
        entity: contact.entity.clone(),
        at_seconds,
        first_answer: String::new(),
        unreachable_answers: 0,
        unanswered: 0,
        attempts: 0,
        created_after_seconds: None,
        error: None,
    };
    let start = Instant::now();
    let url = match alice.client.url("/records") {
        Ok(url) => url,
        Err(error) => {
            report.error = Some(error);
            return (report, Vec::new());
        }
    };
    let created = loop {
        report.attempts += 1;
        let call = Call::post(url.clone())
            .json(&body)
            .signed(&alice.client.key);
        let (answer, wait) = match alice.client.http.send(&call).await {
            Ok(response) if response.status == 200 => {
                break answered_hash(&response, "POST /records");
            }
            Ok(response) => {
                let code = response
                    .json()
                    .ok()
                    .and_then(|problem| problem["code"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                let wait = retry_after(&response.headers);
                if response.status == 503 && code == "link_unreachable" && wait.is_some() {
                    report.unreachable_answers += 1;
                }
                let answer = match response.header("retry-after") {
                    Some(seconds) => format!("{} {code}, Retry-After {seconds}", response.status),
                    None => format!("{} {code}: {}", response.status, response.excerpt()),
                };
                if response.status < 500 {
                    break Err(answer);
                }
                (answer, wait.unwrap_or(RETRY_PAUSE))
            }
            Err(error) => {
                report.unanswered += 1;
                (error, RETRY_PAUSE)
            }
        };
        if report.first_answer.is_empty() {
            report.first_answer = answer.clone();
        }
        if start.elapsed() > FIRST_CONTACT_FOR {
            break Err(format!(
                "still {answer} after {} s",
                FIRST_CONTACT_FOR.as_secs()
            ));
        }
        tokio::time::sleep(wait).await;
    };
    if report.first_answer.is_empty() {
        report.first_answer = "200 at once".to_owned();
    }
    let (id, hash) = match created {
        Ok(created) => created,
        Err(error) => {
            report.error = Some(error);
            return (report, Vec::new());
        }
    };
    report.created_after_seconds = Some(start.elapsed().as_secs_f64());
    let conversation = json!({"entity": alice.entity, "record_id": id});
    let mut records = vec![Tracked {
        kind: RecordKind::Conversation,
        author: ALICE,
        reader: index,
        id,
        hash,
        live: true,
        conversation: None,
        text: String::new(),
        history: History::default(),
    }];
    let text = format!("Hello {}", contact.entity);
    body = json!({
        "id": record_id(),
        "created_at": record_date(now_ms()),
        "type": message_type,
        "permissions": {"read": read},
        "content": {"conversation": conversation, "text": text},
    });
    let message = match answered(&alice.client, Verb::Post, "/records", &body).await {
        Ok(response) => answered_hash(&response, "POST /records"),
        Err(error) => Err(error),
    };
    match message {
        Ok((id, hash)) => records.push(Tracked {
            kind: RecordKind::Message,
            author: ALICE,
            reader: index,
            id,
            hash,
            live: true,
            conversation: Some(conversation),
            text,
            history: History::default(),
        }),
        Err(error) => report.error = Some(format!("the first message: {error}")),
    }
    (report, records)
}
