//! The text of the records the load writes.
//!
//! `repeated` is the load's note since the first benchmark: one sentence
//! again and again, about 13 distinct words a record. `varied` is text as
//! people write it: words drawn from a vocabulary of [`VOCABULARY`] with
//! Zipf's law (the word of rank r about 1/r as often as the commonest), so
//! a few words are in nearly every record and most in few: about 100
//! distinct words a record. The search step asks for a word of the
//! vocabulary, each as likely; the common-word step for one of the 20
//! commonest, in nearly every record.

use clap::ValueEnum;

/// What text the load's records hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Text {
    /// One sentence repeated, with the record's number.
    #[default]
    Repeated,
    /// Words of a vocabulary by Zipf's law.
    Varied,
}

/// How many words the varied text draws from.
pub const VOCABULARY: u64 = 5_000;

/// SplitMix64's output function: a well-mixed 64 bits from any input.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A rank in `0..VOCABULARY`, log-uniform (rank r about 1/(r+1) as likely
/// as rank 0), from 64 random bits.
fn zipf_rank(bits: u64) -> u64 {
    let unit = (bits >> 11) as f64 / (1u64 << 53) as f64;
    ((VOCABULARY as f64).powf(unit) - 1.0).floor() as u64
}

/// The word of a rank: two syllables under 4,900, three above, so every
/// rank has its own word.
pub fn word(rank: u64) -> String {
    const CONSONANTS: &[u8] = b"bdfgklmnprstvz";
    const VOWELS: &[u8] = b"aeiou";
    let syllable = |n: u64| {
        let n = n as usize % 70;
        [CONSONANTS[n / 5] as char, VOWELS[n % 5] as char]
    };
    let (count, mut n) = if rank < 4_900 {
        (2, rank)
    } else {
        (3, rank - 4_900)
    };
    let mut word = String::with_capacity(6);
    for _ in 0..count {
        word.extend(syllable(n));
        n /= 70;
    }
    word
}

/// The word a search with this number asks for: any of the vocabulary,
/// each as likely.
pub fn search_word(seq: u64) -> String {
    word(mix(seq ^ 0x005E_A2C4) % VOCABULARY)
}

/// The word a common-word search with this number asks for: one of the 20
/// commonest, each in most records.
pub fn common_word(seq: u64) -> String {
    word(mix(seq ^ 0x00C0_4404) % 20)
}

/// About `bytes` of varied text for record `seq`.
pub fn varied(seq: u64, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 8);
    let mut state = seq.wrapping_mul(0x2545_F491_4F6C_DD1D);
    while text.len() < bytes {
        state = mix(state);
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&word(zipf_rank(state)));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_distinct_per_rank() {
        let words: std::collections::HashSet<String> = (0..VOCABULARY).map(word).collect();
        assert_eq!(words.len() as u64, VOCABULARY);
    }

    #[test]
    fn varied_text_has_common_and_rare_words() {
        let text = varied(7, 900);
        let distinct: std::collections::HashSet<&str> = text.split(' ').collect();
        assert!(text.len() >= 900 && text.len() < 910);
        assert!((60..160).contains(&distinct.len()), "{}", distinct.len());
        assert_eq!(varied(7, 900), text, "the same for the same record");
    }
}
