//! The console's line diff (issue 40, finding 3): any two texts, split at
//! the first NUL byte. It is deterministic, and either says the versions
//! are too large to compare or marks every line of both, in order: the
//! kept and removed lines are the first text's, the kept and added lines
//! the second's.

#![no_main]

use folio_core::service::console::diff::{Differences, diff_lines};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let before = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let after = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let found = diff_lines(&before, &after);
    assert_eq!(found, diff_lines(&before, &after), "deterministic");
    let Differences::Lines(lines) = found else {
        return;
    };
    let side = |signs: [char; 2]| -> Vec<&str> {
        lines
            .iter()
            .filter(|line| signs.contains(&line.sign))
            .map(|line| line.text.as_str())
            .collect()
    };
    assert_eq!(side([' ', '-']), lines_of(&before), "the first text, in order");
    assert_eq!(side([' ', '+']), lines_of(&after), "the second text, in order");
});

fn lines_of(text: &str) -> Vec<&str> {
    text.split_terminator('\n').collect()
}
