//! The filter grammar (spec §4.1, PROTOCOL.md §7, `vectors/README.md` §3).
//!
//! A filter is a comma-separated list of conditions; the top-level list is
//! AND and each level of parentheses flips the operator. A condition is
//! `$['path']=value`, `$['path']=` (no value there), or a bare value (some
//! link has it). Values: `entity`, `entity+record_id`,
//! `entity+record_id+version_hash` (a space may stand for `+`), or a tag as a
//! JSON string literal.

use std::fmt;

use super::filterable::Unfilterable;
use super::json_string_end;
use crate::model::{Entity, LinkPath, RecordId, VersionHash};
use crate::problem::{Problem, ProblemType};

/// The longest filter, in bytes.
pub const MAX_FILTER_LEN: usize = 4096;
/// The most `filter` parameters one request may carry (a record matches
/// any of them): each becomes a condition of one SQL statement.
pub const MAX_FILTERS: usize = 16;
/// The most conditions one filter may hold.
pub const MAX_FILTER_CONDITIONS: usize = 32;
/// The most levels of parentheses one filter may nest.
pub const MAX_FILTER_DEPTH: usize = 8;

/// A parsed filter. Groups of one are their single member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Every member matches.
    And(Vec<Filter>),
    /// Some member matches.
    Or(Vec<Filter>),
    /// One condition.
    Condition(Condition),
}

/// One condition of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `$['path']=value`: the record has this value at the path.
    Equals {
        /// The path.
        path: LinkPath,
        /// The value.
        value: FilterValue,
    },
    /// `$['path']=`: the record has no value at the path.
    Absent {
        /// The path.
        path: LinkPath,
    },
    /// `value`: some link of the record has this value.
    AnyLink(FilterValue),
}

/// The value of a condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterValue {
    /// `entity`: an entity link to it.
    Entity(Entity),
    /// `entity+record_id`: a record link to the record.
    Record {
        /// The record's author entity.
        entity: Entity,
        /// The record's id.
        record_id: RecordId,
    },
    /// `entity+record_id+version_hash`: a version link to the version.
    Version {
        /// The record's author entity.
        entity: Entity,
        /// The record's id.
        record_id: RecordId,
        /// The version's hash.
        version_hash: VersionHash,
    },
    /// A tag, or the JSON-quoted value of `$['id']` or `$['source']`.
    Tag(String),
}

/// Why a filter is invalid, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {position}: {fault}")]
pub struct FilterError {
    /// Byte offset into the filter (after percent-decoding).
    pub position: usize,
    /// What is wrong there.
    pub fault: FilterFault,
}

/// What is wrong with a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterFault {
    /// The filter is longer than [`MAX_FILTER_LEN`] bytes.
    TooLong,
    /// The filter holds more than [`MAX_FILTER_CONDITIONS`] conditions.
    TooManyConditions,
    /// The filter nests more than [`MAX_FILTER_DEPTH`] levels of parentheses.
    TooDeep,
    /// A condition is missing where one was expected.
    EmptyCondition,
    /// A parenthesis is not closed, or closes nothing.
    UnbalancedParenthesis,
    /// Something follows a condition that is not `,`, `)` or the end.
    UnexpectedText,
    /// A quoted value does not end.
    UnterminatedQuote,
    /// A quoted value is not a JSON string.
    InvalidTag,
    /// A path's bracket does not close.
    UnterminatedBracket,
    /// A path is not `$` followed by `['name']` and `[*]` segments.
    InvalidPath,
    /// A path is not followed by `=`.
    PathWithoutEquals,
    /// A value's entity part is not an entity name.
    InvalidEntity,
    /// A value's record id part is not 32 lowercase hex characters.
    InvalidRecordId,
    /// A value's version hash part is not 64 lowercase hex characters.
    InvalidVersionHash,
    /// A value has more than three `+`-separated parts.
    TooManyValueParts,
    /// A bare value holds `=`: a field's condition written without its
    /// path from `$` (`title="x"`).
    NameWithoutPath,
    /// A value in single quotes: a tag is a JSON string, in double quotes.
    SingleQuoted,
    /// A condition no record can match: its path holds no link or tag
    /// ([`Filter::unfilterable`]).
    CannotMatch(Box<Unfilterable>),
}

impl fmt::Display for FilterFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilterFault::CannotMatch(unfilterable) => return unfilterable.fmt(f),
            FilterFault::TooLong => "a filter is at most 4096 bytes",
            FilterFault::TooManyConditions => "a filter holds at most 32 conditions",
            FilterFault::TooDeep => "a filter nests at most 8 levels of parentheses",
            FilterFault::EmptyCondition => "a condition is missing",
            FilterFault::UnbalancedParenthesis => "unbalanced parentheses",
            FilterFault::UnexpectedText => "expected `,`, `)` or the end of the filter",
            FilterFault::UnterminatedQuote => "the quoted value does not end",
            FilterFault::InvalidTag => "not a JSON string",
            FilterFault::UnterminatedBracket => "the path's bracket does not close",
            FilterFault::InvalidPath => "not a path of `['name']` and `[*]` segments",
            FilterFault::PathWithoutEquals => "a path needs `=`",
            FilterFault::InvalidEntity => "not an entity name",
            FilterFault::InvalidRecordId => "a record id is 32 lowercase hex characters",
            FilterFault::InvalidVersionHash => "a version hash is 64 lowercase hex characters",
            FilterFault::TooManyValueParts => "a value has at most 3 parts",
            FilterFault::NameWithoutPath => {
                "a condition on a field names its path from `$`, as \
                 `$['content']['title']=\"…\"`; a value alone is an entity, record or version link"
            }
            FilterFault::SingleQuoted => "a tag is written in double quotes, as a JSON string",
        })
    }
}

impl From<&FilterError> for Problem {
    fn from(error: &FilterError) -> Self {
        Problem::new(ProblemType::InvalidFilter).with_detail(error.to_string())
    }
}

/// Parses one `filter` parameter (already percent-decoded).
pub fn parse_filter(text: &str) -> Result<Filter, FilterError> {
    Ok(parse(text)?.0)
}

/// Where in `text`, a valid filter, each condition's path starts: for
/// pointing at a condition a later check refuses.
pub fn condition_paths(text: &str) -> Vec<(usize, LinkPath)> {
    parse(text).map(|(_, paths)| paths).unwrap_or_default()
}

/// Where the condition on `path` starts in `text` (0 when it is not found).
pub fn position_of(text: &str, path: &LinkPath) -> usize {
    condition_paths(text)
        .into_iter()
        .find(|(_, at)| at == path)
        .map_or(0, |(position, _)| position)
}

fn parse(text: &str) -> Result<(Filter, Vec<(usize, LinkPath)>), FilterError> {
    if text.len() > MAX_FILTER_LEN {
        return Err(FilterError {
            position: MAX_FILTER_LEN,
            fault: FilterFault::TooLong,
        });
    }
    let mut parser = Parser {
        text,
        at: 0,
        conditions: 0,
        paths: Vec::new(),
    };
    let items = parser.list(0)?;
    if parser.at < text.len() {
        return Err(parser.error(FilterFault::UnbalancedParenthesis));
    }
    Ok((group(items, 0), parser.paths))
}

/// A list at `depth` levels of parentheses: AND at even depths, OR at odd.
fn group(mut items: Vec<Filter>, depth: usize) -> Filter {
    match items.len() {
        1 => items.pop().unwrap_or(Filter::And(Vec::new())),
        _ if depth.is_multiple_of(2) => Filter::And(items),
        _ => Filter::Or(items),
    }
}

struct Parser<'t> {
    text: &'t str,
    at: usize,
    conditions: usize,
    /// Each condition's path, and where it starts.
    paths: Vec<(usize, LinkPath)>,
}

impl<'t> Parser<'t> {
    fn error(&self, fault: FilterFault) -> FilterError {
        FilterError {
            position: self.at,
            fault,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn list(&mut self, depth: usize) -> Result<Vec<Filter>, FilterError> {
        let mut items = Vec::new();
        loop {
            items.push(self.item(depth)?);
            match self.peek() {
                Some(b',') => self.at += 1,
                None | Some(b')') => return Ok(items),
                Some(_) => return Err(self.error(FilterFault::UnexpectedText)),
            }
        }
    }

    fn item(&mut self, depth: usize) -> Result<Filter, FilterError> {
        match self.peek() {
            Some(b'(') => {
                if depth + 1 > MAX_FILTER_DEPTH {
                    return Err(self.error(FilterFault::TooDeep));
                }
                self.at += 1;
                let items = self.list(depth + 1)?;
                if self.peek() != Some(b')') {
                    return Err(self.error(FilterFault::UnbalancedParenthesis));
                }
                self.at += 1;
                Ok(group(items, depth + 1))
            }
            None | Some(b',' | b')') => Err(self.error(FilterFault::EmptyCondition)),
            Some(_) => {
                self.conditions += 1;
                if self.conditions > MAX_FILTER_CONDITIONS {
                    return Err(self.error(FilterFault::TooManyConditions));
                }
                self.condition().map(Filter::Condition)
            }
        }
    }

    fn condition(&mut self) -> Result<Condition, FilterError> {
        if self.peek() != Some(b'$') {
            return self.value().map(Condition::AnyLink);
        }
        let start = self.at;
        let path = self.path()?;
        self.paths.push((start, path.clone()));
        match self.peek() {
            None | Some(b',' | b')') => Ok(Condition::Absent { path }),
            Some(_) => Ok(Condition::Equals {
                path,
                value: self.value()?,
            }),
        }
    }

    /// A path in bracket or dot notation, normalised to bracket form, and the `=` after it.
    fn path(&mut self) -> Result<LinkPath, FilterError> {
        let start = self.at;
        self.at += 1; // `$`
        let mut normalised = String::from("$");
        loop {
            let rest = &self.text[self.at..];
            if let Some(after) = rest.strip_prefix("[*]") {
                normalised.push_str("[*]");
                self.at = self.text.len() - after.len();
            } else if let Some(inner) = rest.strip_prefix("['") {
                let end = inner
                    .find("']")
                    .ok_or_else(|| self.error(FilterFault::UnterminatedBracket))?;
                normalised.push_str(&rest[..end + 4]);
                self.at += end + 4;
            } else if let Some(after) = rest.strip_prefix('.') {
                let name_len = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                if name_len == 0 {
                    return Err(self.error(FilterFault::InvalidPath));
                }
                normalised.push_str("['");
                normalised.push_str(&after[..name_len]);
                normalised.push_str("']");
                self.at += 1 + name_len;
            } else if rest.starts_with('=') {
                self.at += 1;
                return normalised.parse().map_err(|_| FilterError {
                    position: start,
                    fault: FilterFault::InvalidPath,
                });
            } else if rest.is_empty() || rest.starts_with([',', ')']) {
                return Err(self.error(FilterFault::PathWithoutEquals));
            } else {
                return Err(self.error(FilterFault::InvalidPath));
            }
        }
    }

    fn value(&mut self) -> Result<FilterValue, FilterError> {
        if self.peek() == Some(b'"') {
            return self.tag();
        }
        let start = self.at;
        let len = self.text[start..]
            .find([',', ')'])
            .unwrap_or(self.text.len() - start);
        let text = &self.text[start..start + len];
        if text.starts_with('\'') {
            return Err(self.error(FilterFault::SingleQuoted));
        }
        if text.contains('=') {
            return Err(self.error(FilterFault::NameWithoutPath));
        }
        self.at += len;
        let mut parts = text.split(['+', ' ']);
        let mut offset = start;
        let mut next_part = || {
            let part = parts.next()?;
            let position = offset;
            offset += part.len() + 1;
            Some((part, position))
        };
        let fail = |position, fault| FilterError { position, fault };
        let (entity, at) = next_part().unwrap_or(("", start));
        let entity: Entity = entity
            .parse()
            .map_err(|_| fail(at, FilterFault::InvalidEntity))?;
        let Some((record_id, at)) = next_part() else {
            return Ok(FilterValue::Entity(entity));
        };
        let record_id: RecordId = record_id
            .parse()
            .map_err(|_| fail(at, FilterFault::InvalidRecordId))?;
        let Some((version_hash, at)) = next_part() else {
            return Ok(FilterValue::Record { entity, record_id });
        };
        let version_hash: VersionHash = version_hash
            .parse()
            .map_err(|_| fail(at, FilterFault::InvalidVersionHash))?;
        if let Some((_, at)) = next_part() {
            return Err(fail(at, FilterFault::TooManyValueParts));
        }
        Ok(FilterValue::Version {
            entity,
            record_id,
            version_hash,
        })
    }

    /// A JSON string literal; inside it `,`, `(` and `)` are ordinary characters.
    fn tag(&mut self) -> Result<FilterValue, FilterError> {
        let start = self.at;
        let end = start
            + json_string_end(&self.text[start..])
                .ok_or_else(|| self.error(FilterFault::UnterminatedQuote))?;
        let literal = &self.text[start..=end];
        let tag: String =
            serde_json::from_str(literal).map_err(|_| self.error(FilterFault::InvalidTag))?;
        self.at = end + 1;
        Ok(FilterValue::Tag(tag))
    }
}
