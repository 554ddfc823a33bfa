//! Search over records' text: a Folio extension (`docs/search.md`) that a
//! client not using it never sees.
//!
//! A record's **words** come from the strings of its content that its
//! schema types as strings or tags (links' parts, numbers and envelope
//! fields are not text). A word is a run of letters and digits, lowercased,
//! with its accents dropped, so that `Café` and `cafe` are one word. Each
//! word of a record has a weight: every occurrence in a string of `n` words
//! adds `1/√n`, so a word of a short title outweighs the same word once in
//! a long body. A weight depends on the record alone, never on the rest of
//! the store, so a record's rank does not move when other records change.
//!
//! The store keeps the latest version's words in `record_words`
//! (`store::search`), and a search lists the records that hold every word
//! it asks for, ranked by the sum of their weights, or in the list's sort
//! order when the request names one.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// The longest word indexed or searched for, in bytes: longer runs are
/// identifiers, hashes or noise, not words a person types.
pub const MAX_WORD_BYTES: usize = 64;
/// The most distinct words indexed per record: its heaviest. A write's
/// cost grows with its words, and a record's rank with its best few.
pub const MAX_INDEXED_WORDS: usize = 500;
/// The longest `search` parameter, in bytes.
pub const MAX_SEARCH_BYTES: usize = 256;
/// The most distinct words in one search.
pub const MAX_SEARCH_WORDS: usize = 8;

/// What a weight of 1.0 is stored as: weights are integers in the store.
const WEIGHT_SCALE: f64 = 1000.0;

/// One word of a record and its weight.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Word {
    /// The word, lowercased and without accents.
    pub word: String,
    /// Its weight in the record, ×1000.
    pub weight: u32,
}

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

/// The words of a record whose text is `texts` (each string of its
/// content that holds text), weighted, sorted by word, at most
/// [`MAX_INDEXED_WORDS`] of them (the heaviest).
pub fn record_words<'t>(texts: impl IntoIterator<Item = &'t str>) -> Vec<Word> {
    let mut weights: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for text in texts {
        let found: Vec<String> = words(text).collect();
        if found.is_empty() {
            continue;
        }
        let each = 1.0 / (found.len() as f64).sqrt();
        for word in found {
            *weights.entry(word).or_default() += each;
        }
    }
    let mut words: Vec<Word> = weights
        .into_iter()
        .map(|(word, weight)| Word {
            word,
            // At least 1: a word that is there always counts.
            weight: (weight * WEIGHT_SCALE)
                .round()
                .clamp(1.0, f64::from(u32::MAX)) as u32,
        })
        .collect();
    if words.len() > MAX_INDEXED_WORDS {
        words.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.word.cmp(&b.word)));
        words.truncate(MAX_INDEXED_WORDS);
        words.sort_unstable_by(|a, b| a.word.cmp(&b.word));
    }
    words
}

/// Words as stored in `versions.words`: `[[word, weight], …]`.
pub fn words_json(words: &[Word]) -> String {
    let pairs: Vec<(&str, u32)> = words.iter().map(|w| (w.word.as_str(), w.weight)).collect();
    serde_json::to_string(&pairs).expect("words serialize")
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
    fn a_word_in_a_short_string_weighs_more_than_once_in_a_long_one() {
        let title = record_words(["Pinned thing"]);
        let body = record_words(["one two three four five six seven eight pinned"]);
        let weight = |words: &[Word]| words.iter().find(|w| w.word == "pinned").unwrap().weight;
        assert_eq!(weight(&title), 707);
        assert_eq!(weight(&body), 333);
        // Occurrences add up, across strings too.
        let both = record_words(["pinned", "pinned"]);
        assert_eq!(
            both,
            [Word {
                word: "pinned".into(),
                weight: 2000
            }]
        );
    }

    #[test]
    fn a_record_keeps_its_heaviest_words() {
        let text: String = (0..MAX_INDEXED_WORDS + 10)
            .map(|i| format!("w{i} "))
            .chain(["heavy ".repeat(20)])
            .collect();
        let words = record_words([text.as_str()]);
        assert_eq!(words.len(), MAX_INDEXED_WORDS);
        assert!(words.iter().any(|w| w.word == "heavy"));
        assert!(words.windows(2).all(|pair| pair[0].word < pair[1].word));
    }

    #[test]
    fn a_search_is_its_distinct_words() {
        let search = Search::parse("Pinned, pinned THING", true).unwrap();
        assert_eq!(search.words, ["pinned", "thing"]);
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
