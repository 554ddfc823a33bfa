//! What a host shows an operator about federation (`docs/operations.md`):
//! the receipt of each notification received, which the host counts, and
//! the outbox's summary by state, which it reads when asked.
//!
//! Core decides what each outcome is; a host only counts and renders it,
//! so both hosts count the same things the same way.

use crate::model::RecordDate;
use crate::problem::ProblemType;
use crate::service::federation::NotificationAnswer;
use crate::store::outbox_summary_sql;

use super::Host;
use super::store::RowExt;

/// What became of one notification another server sent
/// (`POST /api/{user}/notifications`), as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotificationOutcome {
    /// Answered `200`: each version stored (or held already), or refused
    /// for good on its own ([`NotificationReceipt::refused`]).
    Accepted,
    /// Refused whole for good (a `4xx`: a bad signature, a malformed body,
    /// every version refused): sending it again is of no use.
    Refused,
    /// Refused because the user's quota for what other servers send is
    /// full (`507`); the sender tries again later.
    QuotaExceeded,
    /// Refused because the sender's server sent too many (`429`).
    RateLimited,
    /// Failed here or at the author's server (another `5xx`); the sender
    /// tries again later.
    Failed,
}

impl NotificationOutcome {
    /// Every outcome, in the order metrics list them.
    pub const ALL: [NotificationOutcome; 5] = [
        NotificationOutcome::Accepted,
        NotificationOutcome::Refused,
        NotificationOutcome::QuotaExceeded,
        NotificationOutcome::RateLimited,
        NotificationOutcome::Failed,
    ];

    /// Its name, as a metric's label value.
    pub fn label(self) -> &'static str {
        match self {
            NotificationOutcome::Accepted => "accepted",
            NotificationOutcome::Refused => "refused",
            NotificationOutcome::QuotaExceeded => "quota_exceeded",
            NotificationOutcome::RateLimited => "rate_limited",
            NotificationOutcome::Failed => "failed",
        }
    }

    /// The outcome of a notification answered `problem`.
    fn of_problem(problem: ProblemType) -> Self {
        match problem {
            ProblemType::QuotaExceeded => NotificationOutcome::QuotaExceeded,
            ProblemType::RateLimited => NotificationOutcome::RateLimited,
            kind if kind.status() >= 500 => NotificationOutcome::Failed,
            _ => NotificationOutcome::Refused,
        }
    }
}

/// What one received notification did: set on the answer to
/// `POST /api/{user}/notifications` ([`Reply::notification`](super::Reply::notification)),
/// for the host's metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationReceipt {
    /// The notification's outcome, as a whole.
    pub outcome: NotificationOutcome,
    /// The versions the store holds now (stored, or held before).
    pub stored: usize,
    /// The problem code of each version refused for good
    /// (`version_conflict`, `unsolicited`, …): core's own codes only.
    pub refused: Vec<&'static str>,
}

impl NotificationReceipt {
    /// A notification answered `answer` (`200`).
    pub(crate) fn answered(answer: &NotificationAnswer) -> Self {
        NotificationReceipt {
            outcome: NotificationOutcome::Accepted,
            stored: answer.received,
            refused: refused_codes(answer),
        }
    }

    /// A notification answered `problem`; `answer` says what its versions
    /// did when they were each refused (none was stored).
    pub(crate) fn failed(problem: ProblemType, answer: Option<&NotificationAnswer>) -> Self {
        NotificationReceipt {
            outcome: NotificationOutcome::of_problem(problem),
            stored: 0,
            refused: answer.map(refused_codes).unwrap_or_default(),
        }
    }
}

/// The code of each version `answer` refused, as core names it (an
/// unknown code, which this server never answers, is `other`).
fn refused_codes(answer: &NotificationAnswer) -> Vec<&'static str> {
    answer
        .refused
        .iter()
        .map(|refused| {
            ProblemType::ALL
                .iter()
                .find(|kind| kind.code() == refused.code)
                .map_or("other", |kind| kind.code())
        })
        .collect()
}

/// A notification's state in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutboxState {
    /// Never tried yet.
    Pending,
    /// Tried, failed, and due again later.
    Retrying,
    /// Given up (`folio outbox retry` makes it due again).
    Failed,
}

impl OutboxState {
    /// Every state, in the order metrics list them.
    pub const ALL: [OutboxState; 3] = [
        OutboxState::Pending,
        OutboxState::Retrying,
        OutboxState::Failed,
    ];

    /// Its name, as a metric's label value and in `outbox_summary_sql`.
    pub fn label(self) -> &'static str {
        match self {
            OutboxState::Pending => "pending",
            OutboxState::Retrying => "retrying",
            OutboxState::Failed => "failed",
        }
    }
}

/// The notifications of one state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxCount {
    /// How many.
    pub notifications: u64,
    /// The age of the oldest, in milliseconds (since it was queued, or
    /// made due again by `folio outbox retry`); 0 when there is none.
    pub oldest_age_ms: u64,
    /// The recipients (entities) they are for.
    pub recipients: u64,
}

/// The outbox of every user of the server, by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxSummary {
    /// Never tried yet.
    pub pending: OutboxCount,
    /// Failed at least once and due again: their recipients are the peers
    /// failing now (their latest attempt failed; one that succeeds takes
    /// every notification waiting for it).
    pub retrying: OutboxCount,
    /// Given up.
    pub failed: OutboxCount,
}

impl OutboxSummary {
    /// The count of `state`.
    pub fn of(&self, state: OutboxState) -> &OutboxCount {
        match state {
            OutboxState::Pending => &self.pending,
            OutboxState::Retrying => &self.retrying,
            OutboxState::Failed => &self.failed,
        }
    }

    /// The recipients whose latest delivery failed and who wait for a
    /// retry.
    pub fn failing_peers(&self) -> u64 {
        self.retrying.recipients
    }

    /// The summary as JSON, for a health answer: each state's count,
    /// oldest age in seconds and recipients, and the failing peers.
    pub fn to_json(&self) -> serde_json::Value {
        let mut outbox = serde_json::Map::new();
        for state in OutboxState::ALL {
            let count = self.of(state);
            outbox.insert(
                state.label().to_owned(),
                serde_json::json!({
                    "notifications": count.notifications,
                    "oldest_age_seconds": count.oldest_age_ms / 1000,
                    "recipients": count.recipients,
                }),
            );
        }
        serde_json::json!({
            "outbox": outbox,
            "failing_peers": self.failing_peers(),
        })
    }
}

/// Reads the outbox's summary as of `now`: one statement, one scan of the
/// outbox's rows (pending and failed together).
pub async fn outbox_summary<H: Host>(host: &H, now: RecordDate) -> Result<OutboxSummary, String> {
    let rows = host
        .fetch(&outbox_summary_sql())
        .await
        .map_err(|e| e.to_string())?;
    let mut summary = OutboxSummary::default();
    let count = |value: i64| u64::try_from(value).unwrap_or(0);
    for row in &rows {
        let state = row.text(0).map_err(|e| e.to_string())?;
        let oldest = row.optional_integer(2).map_err(|e| e.to_string())?;
        let counted = OutboxCount {
            notifications: count(row.integer(1).map_err(|e| e.to_string())?),
            oldest_age_ms: oldest.map_or(0, |at| count(now.unix_millis().saturating_sub(at))),
            recipients: count(row.integer(3).map_err(|e| e.to_string())?),
        };
        match OutboxState::ALL.iter().find(|known| known.label() == state) {
            Some(OutboxState::Pending) => summary.pending = counted,
            Some(OutboxState::Retrying) => summary.retrying = counted,
            Some(OutboxState::Failed) => summary.failed = counted,
            None => return Err(format!("an outbox summary row of state {state:?}")),
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::federation::RefusedVersion;

    #[test]
    fn each_problem_is_one_outcome_and_refused_versions_keep_their_codes() {
        for (problem, outcome) in [
            (
                ProblemType::QuotaExceeded,
                NotificationOutcome::QuotaExceeded,
            ),
            (ProblemType::RateLimited, NotificationOutcome::RateLimited),
            (ProblemType::Internal, NotificationOutcome::Failed),
            (ProblemType::InvalidSignature, NotificationOutcome::Refused),
            (ProblemType::VersionConflict, NotificationOutcome::Refused),
        ] {
            let receipt = NotificationReceipt::failed(problem, None);
            assert_eq!(receipt.outcome, outcome, "{problem:?}");
            assert_eq!((receipt.stored, receipt.refused.len()), (0, 0));
        }
        let refused = |code: &str| RefusedVersion {
            record_id: "0123456789abcdef0123456789abcdef".parse().unwrap(),
            version_hash: "ab".repeat(32).parse().unwrap(),
            status: 409,
            code: code.to_owned(),
            detail: String::new(),
        };
        let answer = NotificationAnswer {
            received: 2,
            refused: vec![refused("version_conflict"), refused("made_up")],
        };
        let receipt = NotificationReceipt::answered(&answer);
        assert_eq!(receipt.outcome, NotificationOutcome::Accepted);
        assert_eq!(receipt.stored, 2);
        assert_eq!(receipt.refused, ["version_conflict", "other"]);
        let whole = NotificationReceipt::failed(ProblemType::VersionConflict, Some(&answer));
        assert_eq!(
            (whole.outcome, whole.stored, whole.refused.len()),
            (NotificationOutcome::Refused, 0, 2)
        );
    }
}
