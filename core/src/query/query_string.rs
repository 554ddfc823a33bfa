//! Query strings, decoded the one way PROTOCOL.md §7 allows: split on `&`,
//! split each part at its first `=`, percent-decode as UTF-8. A `+` stays a
//! `+` (the parsers that expect one also take a space).

use std::borrow::Cow;

use percent_encoding::percent_decode_str;

use crate::problem::{Problem, ProblemType};

/// A query string part that does not decode to UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the query parameter `{name}` is not percent-encoded UTF-8")]
pub struct QueryStringError {
    /// The parameter's name as it was sent.
    pub name: String,
}

impl From<&QueryStringError> for Problem {
    fn from(error: &QueryStringError) -> Self {
        Problem::new(ProblemType::InvalidParameter).with_detail(error.to_string())
    }
}

/// The parameters of a query string (with or without its leading `?`), in
/// order, repeated names kept. A part without `=` has an empty value.
pub fn decode_query_string(query: &str) -> Result<Vec<(String, String)>, QueryStringError> {
    let query = query.strip_prefix('?').unwrap_or(query);
    query
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            let error = || QueryStringError {
                name: name.to_owned(),
            };
            let decode = |text: &str| {
                percent_decode_str(text)
                    .decode_utf8()
                    .map(Cow::into_owned)
                    .map_err(|_| error())
            };
            Ok((decode(name)?, decode(value)?))
        })
        .collect()
}
