//! Search over records' text: a Folio extension (`docs/search.md`) that a
//! client not using it never sees.
//!
//! A record's **text** is the strings of its content that its schema types
//! as strings or tags (links' parts, numbers and envelope fields are not
//! text), as **words**: runs of letters and digits, lowercased, their
//! accents dropped, so that `Café` and `cafe` are one word. The store keeps
//! the latest version's words in SQLite's full-text index, FTS5, on both
//! hosts (`record_text`, migration 11; D1 runs SQLite), and a search lists
//! the records holding every word it asks for: ranked by BM25 (how often
//! the words occur in the record, against how long it is and how common
//! they are), or in the list's sort when the request names one.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// The longest word indexed or searched for, in bytes: longer runs are
/// identifiers, hashes or noise, not words a person types.
pub const MAX_WORD_BYTES: usize = 64;
/// The most words of one version indexed: its first. A write's cost
/// grows with its words.
pub const MAX_INDEXED_WORDS: usize = 20_000;
/// The longest `search` parameter, in bytes.
pub const MAX_SEARCH_BYTES: usize = 256;
/// The most distinct words in one search.
pub const MAX_SEARCH_WORDS: usize = 8;
/// How many matches a ranked search ranks: the newest that the caller may
/// list. BM25 costs about 3 µs a match, and a common word is in most
/// records: ranking them all would read every one (`bench/README.md`,
/// "Search"). A person looking for a record wants the best of the recent.
pub const RANKED_MATCHES: u32 = 100;

/// The words of `text`, as the index and a search both read them.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|run| !run.is_empty())
        .map(fold)
        .filter(|word| !word.is_empty() && word.len() <= MAX_WORD_BYTES)
}

/// A run of letters and digits as a word: decomposed, accents dropped,
/// lowercased, composed again.
fn fold(run: &str) -> String {
    if run.is_ascii() {
        return run.to_ascii_lowercase();
    }
    let bare: String = run.nfd().filter(|&c| !is_combining_mark(c)).collect();
    bare.to_lowercase().nfc().collect()
}

/// The text a record is found by, from its content's strings and tags:
/// their words in order, separated by spaces, at most
/// [`MAX_INDEXED_WORDS`] of them. Empty for a record with no text.
pub fn record_text<'t>(texts: impl IntoIterator<Item = &'t str>) -> String {
    let mut text = String::new();
    for word in texts.into_iter().flat_map(words).take(MAX_INDEXED_WORDS) {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&word);
    }
    text
}

/// A list's `search` parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// The distinct words asked for, in the order given: a record must
    /// hold every one.
    pub words: Vec<String>,
    /// Whether the list is ranked by weight (no `sort` was given): a
    /// ranked list is one page, its best matches.
    pub ranked: bool,
}

/// Why a `search` parameter cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchError {
    /// Longer than [`MAX_SEARCH_BYTES`].
    TooLong,
    /// No letter or digit.
    NoWord,
    /// More than [`MAX_SEARCH_WORDS`] distinct words.
    TooManyWords,
    /// A word longer than [`MAX_WORD_BYTES`], which nothing can hold.
    WordTooLong,
}

impl SearchError {
    /// What is wrong, after "the `search` parameter".
    pub fn reason(self) -> &'static str {
        match self {
            SearchError::TooLong => "is longer than 256 bytes",
            SearchError::NoWord => "has no word (a word is letters and digits)",
            SearchError::TooManyWords => "has more than 8 words",
            SearchError::WordTooLong => "has a word longer than 64 bytes",
        }
    }
}

impl Search {
    /// The FTS5 query: every word, each a quoted string (a word holds
    /// letters and digits only, so nothing in it is FTS5 syntax).
    pub fn match_expression(&self) -> String {
        let quoted: Vec<String> = self
            .words
            .iter()
            .map(|word| format!("\"{word}\""))
            .collect();
        quoted.join(" AND ")
    }

    /// Reads a `search` parameter; `ranked` when the request names no sort.
    pub fn parse(text: &str, ranked: bool) -> Result<Search, SearchError> {
        if text.len() > MAX_SEARCH_BYTES {
            return Err(SearchError::TooLong);
        }
        let mut found: Vec<String> = Vec::new();
        for run in text.split(|c: char| !c.is_alphanumeric()) {
            if run.is_empty() {
                continue;
            }
            let word = fold(run);
            if word.len() > MAX_WORD_BYTES {
                return Err(SearchError::WordTooLong);
            }
            if !word.is_empty() && !found.contains(&word) {
                found.push(word);
            }
        }
        match found.len() {
            0 => Err(SearchError::NoWord),
            n if n > MAX_SEARCH_WORDS => Err(SearchError::TooManyWords),
            _ => Ok(Search {
                words: found,
                ranked,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercased_runs_of_letters_and_digits_without_accents() {
        let found: Vec<String> = words("Café au LAIT, 2× — naïve_test déjà-vu").collect();
        assert_eq!(
            found,
            ["cafe", "au", "lait", "2", "naive", "test", "deja", "vu"]
        );
    }

    #[test]
    fn a_records_text_is_its_words_in_order() {
        assert_eq!(
            record_text(["Pinned: thing!", "", "Déjà vu"]),
            "pinned thing deja vu"
        );
        let long = "word ".repeat(MAX_INDEXED_WORDS + 5);
        assert_eq!(
            record_text([long.as_str()]).split(' ').count(),
            MAX_INDEXED_WORDS
        );
    }

    #[test]
    fn a_search_is_its_distinct_words() {
        let search = Search::parse("Pinned, pinned THING", true).unwrap();
        assert_eq!(search.words, ["pinned", "thing"]);
        assert_eq!(search.match_expression(), "\"pinned\" AND \"thing\"");
        assert_eq!(Search::parse(" !? ", true), Err(SearchError::NoWord));
        assert_eq!(
            Search::parse(&"x".repeat(65), true),
            Err(SearchError::WordTooLong)
        );
        assert_eq!(
            Search::parse("a b c d e f g h i", false),
            Err(SearchError::TooManyWords)
        );
        assert_eq!(
            Search::parse(&"a ".repeat(200), false),
            Err(SearchError::TooLong)
        );
    }
}
