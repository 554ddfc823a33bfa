//! The soak's end check, issue 42's rule: once both servers are up and
//! both outboxes are empty, every record both may read is the same on both
//! sides (the same current version hash), but for the differences the
//! protocol intends (docs/federation.md §4): a copy its reader deleted on
//! their server only stays deleted there, and a copy whose reader's access
//! ended (the record made private) is deleted there, or was never stored.
//! Anything else is a divergence, named with what was done to the record.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Semaphore;

use super::Person;
use super::workload::{RecordKind, Tracked};

/// Copies fetched at once.
const FETCHES_AT_ONCE: usize = 16;

/// What a reader's copy is, against its author's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The same live version.
    Same,
    /// The same tombstone.
    SameDeleted,
    /// The reader's own deletion here, kept whatever the author wrote
    /// since (intended).
    DeletedHere,
    /// The reader's access ended: their copy is deleted, or was never
    /// stored (intended).
    AccessEnded,
    /// Anything else: what differs.
    Diverged(String),
}

impl Verdict {
    fn label(&self) -> &'static str {
        match self {
            Verdict::Same => "same version",
            Verdict::SameDeleted => "same tombstone",
            Verdict::DeletedHere => "deleted here by the reader (intended)",
            Verdict::AccessEnded => "access ended, the reader's copy deleted (intended)",
            Verdict::Diverged(_) => "DIVERGED",
        }
    }
}

/// Judges the reader's `copy` of `record` against the author's `held`
/// (each as its server answers a GET of the record, `None` for a 404).
pub(super) fn judge(
    record: &Tracked,
    reader: &str,
    held: Option<&Value>,
    copy: Option<&Value>,
) -> Verdict {
    let Some(held) = held else {
        return Verdict::Diverged("the author's server does not hold it".to_owned());
    };
    if hash(held) != record.hash {
        return Verdict::Diverged(format!(
            "the author's server holds {}, but answered {} to the last write",
            describe(held),
            short(&record.hash)
        ));
    }
    if record.history.deleted_here {
        return match copy {
            Some(copy)
                if copy["no_content"]["action"] == "local"
                    && copy["version"]["author"]["entity"] == reader =>
            {
                Verdict::DeletedHere
            }
            Some(copy) => Verdict::Diverged(format!(
                "the reader deleted it here, and now holds {}",
                describe(copy)
            )),
            None => Verdict::Diverged("the reader deleted it here, and it is gone".to_owned()),
        };
    }
    if record.history.unshared {
        return match copy {
            Some(copy) if copy.get("no_content").is_none() => Verdict::Diverged(format!(
                "the reader's access ended, and their copy is {}",
                describe(copy)
            )),
            _ => Verdict::AccessEnded,
        };
    }
    match copy {
        Some(copy) if hash(copy) == hash(held) => match held.get("no_content") {
            Some(_) => Verdict::SameDeleted,
            None => Verdict::Same,
        },
        Some(copy) => Verdict::Diverged(format!(
            "the author's is {}, the reader's {}",
            describe(held),
            describe(copy)
        )),
        None => Verdict::Diverged(format!(
            "the reader's server does not hold it (the author's is {})",
            describe(held)
        )),
    }
}

fn hash(record: &Value) -> &str {
    record["version"]["hash"].as_str().unwrap_or_default()
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// "live 1a2b…" or "deleted (local, by bob.test) 1a2b…".
fn describe(record: &Value) -> String {
    match record.get("no_content") {
        None => format!("live {}", short(hash(record))),
        Some(no_content) => format!(
            "deleted ({}, by {}) {}",
            no_content["action"].as_str().unwrap_or("?"),
            record["version"]["author"]["entity"]
                .as_str()
                .unwrap_or("?"),
            short(hash(record))
        ),
    }
}

/// Every record judged.
pub(super) struct Judged {
    /// "flow: verdict" → records.
    pub(super) verdicts: BTreeMap<String, u64>,
    pub(super) diverged: u64,
    /// The first few divergences, each with its record and flow.
    pub(super) divergences: Vec<String>,
    /// What Bob's listing of the conversation `conversation_id` should
    /// show: id → version hash of every live message in his store.
    pub(super) bobs_conversation: HashMap<String, String>,
}

/// Reads every record's copy from its author's and its reader's servers,
/// and judges each.
pub(super) async fn judge_all(
    people: &[Person],
    records: &[Tracked],
    conversation_id: &str,
) -> Result<Judged, String> {
    let permits = Arc::new(Semaphore::new(FETCHES_AT_ONCE));
    let mut fetches = tokio::task::JoinSet::new();
    for (index, record) in records.iter().enumerate() {
        let author = people[record.author].clone();
        let reader = people[record.reader].client.clone();
        let id = record.id.clone();
        let permits = permits.clone();
        fetches.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let held = author.client.record(&author.entity, &id).await?;
            let copy = reader.record(&author.entity, &id).await?;
            Ok::<_, String>((index, held, copy))
        });
    }
    let mut copies = vec![(None, None); records.len()];
    while let Some(fetched) = fetches.join_next().await {
        let (index, held, copy) = fetched.map_err(|error| error.to_string())??;
        copies[index] = (held, copy);
    }

    let mut judged = Judged {
        verdicts: BTreeMap::new(),
        diverged: 0,
        divergences: Vec::new(),
        bobs_conversation: HashMap::new(),
    };
    for (record, (held, copy)) in records.iter().zip(&copies) {
        let reader = &people[record.reader].entity;
        let verdict = judge(record, reader, held.as_ref(), copy.as_ref());
        *judged
            .verdicts
            .entry(format!("{}: {}", record.flow(), verdict.label()))
            .or_default() += 1;
        if let Verdict::Diverged(detail) = &verdict {
            judged.diverged += 1;
            if judged.divergences.len() < 10 {
                judged.divergences.push(format!(
                    "{} ({}/{}, {}'s copy): {detail}",
                    record.flow(),
                    people[record.author].entity,
                    record.id,
                    reader
                ));
            }
        }
        let in_conversation = record.kind == RecordKind::Message
            && record.conversation.as_ref().map(|c| &c["record_id"])
                == Some(&Value::from(conversation_id));
        let bobs = match (record.author, record.reader) {
            (_, super::workload::BOB) => copy.as_ref(),
            (super::workload::BOB, _) => held.as_ref(),
            _ => None,
        };
        if let Some(live) = bobs.filter(|bobs| in_conversation && bobs.get("no_content").is_none())
        {
            judged
                .bobs_conversation
                .insert(record.id.clone(), hash(live).to_owned());
        }
    }
    Ok(judged)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::federation::workload::History;

    fn record(history: History, live: bool) -> Tracked {
        Tracked {
            kind: RecordKind::Note,
            author: 0,
            reader: 1,
            id: "a".repeat(32),
            hash: "h2".to_owned(),
            live,
            conversation: None,
            text: String::new(),
            history,
        }
    }

    fn live(hash: &str) -> Value {
        json!({"version": {"hash": hash, "author": {"entity": "alice.test"}}})
    }

    fn deleted(hash: &str, action: &str, by: &str) -> Value {
        json!({"version": {"hash": hash, "author": {"entity": by}}, "no_content": {"action": action}})
    }

    #[test]
    fn the_same_version_or_tombstone_converged() {
        let plain = record(History::default(), true);
        let held = live("h2");
        assert_eq!(
            judge(&plain, "bob.test", Some(&held), Some(&held)),
            Verdict::Same
        );
        let tombstone = deleted("h2", "delete", "alice.test");
        assert_eq!(
            judge(
                &record(History::default(), false),
                "bob.test",
                Some(&tombstone),
                Some(&tombstone)
            ),
            Verdict::SameDeleted
        );
    }

    #[test]
    fn an_older_version_or_a_missing_copy_diverged() {
        let plain = record(History::default(), false);
        let held = deleted("h2", "delete", "alice.test");
        for copy in [Some(live("h1")), None] {
            assert!(matches!(
                judge(&plain, "bob.test", Some(&held), copy.as_ref()),
                Verdict::Diverged(_)
            ));
        }
    }

    #[test]
    fn a_deletion_here_must_stay_the_readers() {
        let history = History {
            deleted_here: true,
            ..History::default()
        };
        let held = live("h2");
        let kept = deleted("h9", "local", "bob.test");
        assert_eq!(
            judge(
                &record(history.clone(), true),
                "bob.test",
                Some(&held),
                Some(&kept)
            ),
            Verdict::DeletedHere
        );
        assert!(matches!(
            judge(&record(history, true), "bob.test", Some(&held), Some(&held)),
            Verdict::Diverged(_)
        ));
    }

    #[test]
    fn a_reader_whose_access_ended_holds_no_live_copy() {
        let history = History {
            unshared: true,
            ..History::default()
        };
        let held = deleted("h2", "delete", "alice.test");
        let ended = deleted("h9", "local", "bob.test");
        for copy in [Some(&ended), None] {
            assert_eq!(
                judge(
                    &record(history.clone(), false),
                    "bob.test",
                    Some(&held),
                    copy
                ),
                Verdict::AccessEnded
            );
        }
        assert!(matches!(
            judge(
                &record(history, false),
                "bob.test",
                Some(&held),
                Some(&live("h1"))
            ),
            Verdict::Diverged(_)
        ));
    }

    #[test]
    fn a_dropped_mention_does_not_excuse_a_live_copy_of_a_deleted_post() {
        let history = History {
            mention_dropped: true,
            ..History::default()
        };
        let held = deleted("h2", "delete", "alice.test");
        assert!(matches!(
            judge(
                &record(history, false),
                "bob.test",
                Some(&held),
                Some(&live("h1"))
            ),
            Verdict::Diverged(_)
        ));
    }
}
