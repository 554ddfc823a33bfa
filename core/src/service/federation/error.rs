//! What core makes of another server's failure or answer.

use std::fmt;

use super::peer::PeerFailure;
use crate::model::{Entity, VersionHash};
use crate::problem::{Problem, ProblemType};

/// Why core could not use what another server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerError {
    /// The exchange failed before there was an answer to judge.
    Failed(PeerFailure),
    /// The peer answered with a status core did not expect.
    Status {
        /// The URL asked.
        url: String,
        /// The status it answered with.
        status: u16,
    },
    /// The peer is limiting this server's rate: try again after
    /// `retry_after_secs`.
    RateLimited {
        /// The URL asked.
        url: String,
        /// The seconds its `Retry-After` asks this server to wait.
        retry_after_secs: u64,
    },
    /// The peer did not take this server's signature (`401`): its copy of
    /// the signer's Entity record may list another key, rotated since, or
    /// a clock drifted. Time may cure it.
    Unauthenticated {
        /// The URL asked.
        url: String,
        /// The problem's detail, as the peer gave it.
        detail: String,
    },
    /// The record asked is not there, or not readable by who asked.
    NotFound {
        /// The URL asked.
        url: String,
    },
    /// The answer is not what the protocol allows.
    Invalid(String),
    /// A record served under an author the server does not host.
    WrongAuthor {
        /// The entity whose server was asked.
        expected: Entity,
        /// The author the record names.
        found: Entity,
    },
    /// A version whose content does not hash to its hash.
    WrongHash {
        /// The hash the version carries.
        claimed: VersionHash,
        /// The hash its content computes to.
        computed: VersionHash,
    },
}

impl PeerError {
    /// The error of an answer with an unexpected `status`; `retry_after`
    /// is its `Retry-After` header, for a 429.
    pub fn of_answer(url: &str, status: u16, retry_after: Option<&str>) -> Self {
        match (
            status,
            retry_after.and_then(|secs| secs.trim().parse().ok()),
        ) {
            (429, Some(retry_after_secs)) => PeerError::RateLimited {
                url: url.to_owned(),
                retry_after_secs,
            },
            _ => PeerError::status(url, status),
        }
    }

    pub(crate) fn status(url: &str, status: u16) -> Self {
        match status {
            404 | 410 => PeerError::NotFound {
                url: url.to_owned(),
            },
            300..=399 => PeerError::Failed(PeerFailure::Redirected {
                location: url.to_owned(),
            }),
            _ => PeerError::Status {
                url: url.to_owned(),
                status,
            },
        }
    }

    /// Whether trying again later may succeed: the peer was unreachable,
    /// timed out, or failed on its side, or it did not take this server's
    /// signature: a `401` says that its copy of the signer's Entity record
    /// lists another key (rotated within the minute it waits between two
    /// lookups), or that a clock drifted, which time cures.
    pub fn is_transient(&self) -> bool {
        match self {
            PeerError::Failed(failure) => {
                // A name that does not resolve may again: a delivery is
                // tried later ([`PeerError::names_nothing`] tells a write).
                matches!(
                    failure,
                    PeerFailure::Unreachable(_)
                        | PeerFailure::TimedOut
                        | PeerFailure::NoSuchName(_)
                )
            }
            PeerError::Status { status, .. } => matches!(*status, 401 | 429) || *status >= 500,
            PeerError::RateLimited { .. } | PeerError::Unauthenticated { .. } => true,
            _ => false,
        }
    }

    /// Whether the name asked resolves to no address: what it names does
    /// not exist now, where other failures to reach it say nothing of that.
    pub fn names_nothing(&self) -> bool {
        matches!(self, PeerError::Failed(PeerFailure::NoSuchName(_)))
    }

    /// The problem type a client sees for this failure.
    pub fn problem_type(&self) -> ProblemType {
        match self {
            PeerError::Failed(
                PeerFailure::Unreachable(_) | PeerFailure::TimedOut | PeerFailure::NoSuchName(_),
            ) => ProblemType::PeerUnreachable,
            PeerError::Status { status, .. } if *status == 429 || *status >= 500 => {
                ProblemType::PeerUnreachable
            }
            PeerError::RateLimited { .. } => ProblemType::RateLimited,
            PeerError::Failed(_) | PeerError::Unauthenticated { .. } => ProblemType::PeerRefused,
            PeerError::NotFound { .. } => ProblemType::RecordNotFound,
            PeerError::Status { .. }
            | PeerError::Invalid(_)
            | PeerError::WrongAuthor { .. }
            | PeerError::WrongHash { .. } => ProblemType::InvalidPeerAnswer,
        }
    }
}

impl From<PeerFailure> for PeerError {
    fn from(failure: PeerFailure) -> Self {
        PeerError::Failed(failure)
    }
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerError::Failed(failure) => failure.fmt(f),
            PeerError::Status { url, status } => write!(f, "{url} answered {status}"),
            PeerError::RateLimited {
                url,
                retry_after_secs,
            } => write!(
                f,
                "{url} limits this server's rate: retry in {retry_after_secs} s"
            ),
            PeerError::Unauthenticated { url, detail } => {
                write!(f, "{url} did not take this server's signature: {detail}")
            }
            PeerError::NotFound { url } => write!(f, "{url} has no such record for this server"),
            PeerError::Invalid(reason) => f.write_str(reason),
            PeerError::WrongAuthor { expected, found } => {
                write!(f, "{expected}'s server served a record authored by {found}")
            }
            PeerError::WrongHash { claimed, computed } => write!(
                f,
                "a version claims hash {claimed} but its content hashes to {computed}"
            ),
        }
    }
}

impl From<&PeerError> for Problem {
    fn from(error: &PeerError) -> Self {
        Problem::new(error.problem_type()).with_detail(error.to_string())
    }
}
