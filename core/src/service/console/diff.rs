//! The differences between a version and its parent, line by line, as the
//! console's version page shows them, with a bounded amount of work.
//!
//! A version page is served on the request path, and anyone who may write
//! a record here (an app, another server's notification) chooses both
//! sides. So the comparison never costs more than its limits allow,
//! whatever the two texts are: past [`MAX_DIFF_LINES`] changed lines on a
//! side, or [`MAX_DIFF_EDITS`] lines added and removed, the answer is
//! [`Differences::TooLarge`] ("too large to compare"), found within the
//! same bound.
//!
//! The comparison is Myers' O(ND) algorithm ("An O(ND) Difference
//! Algorithm and Its Variations", 1986) on the lines between the common
//! beginning and the common end, each line first numbered so that a step
//! compares two integers. Its cost is at most
//! `2 × MAX_DIFF_LINES × (MAX_DIFF_EDITS + 1)` comparisons (about 20
//! million) and `(MAX_DIFF_EDITS + 1)²` remembered positions (4 MB), plus
//! one pass over both texts. Core has no clock, so the bound is on work,
//! not on time. Measured (`cargo bench -p folio-core --bench core --
//! console_diff`, release, on a shared 2-core machine): the review's
//! 40,000 changed lines are refused in 1.4 ms (10.15 s before), every line
//! of 10,000 changed in 8.6 ms, and 500 changes spread over 10,000 lines
//! (the most edits still compared) in 9.8 ms.

use std::collections::HashMap;

/// The most lines each side may have between the part both versions begin
/// with and the part both end with; past it the versions are
/// [`Differences::TooLarge`]. A long record with a few changes is compared
/// whatever its length.
pub const MAX_DIFF_LINES: usize = 10_000;

/// The most lines added and removed together (the edit distance D of the
/// O(ND) algorithm) a comparison looks for; past it the versions are
/// [`Differences::TooLarge`].
pub const MAX_DIFF_EDITS: usize = 1_000;

/// One line of the difference between a version and its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// `+` added, `-` removed, ` ` kept.
    pub sign: char,
    /// The line's text, without its sign or line break.
    pub text: String,
}

/// What comparing two versions found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Differences {
    /// Every line of both, in order, each marked.
    Lines(Vec<DiffLine>),
    /// Past [`MAX_DIFF_LINES`] or [`MAX_DIFF_EDITS`]: not compared.
    TooLarge,
}

/// The lines of `after` against `before` (both pretty JSON, one line per
/// `\n`), within the limits of this module.
pub fn diff_lines(before: &str, after: &str) -> Differences {
    let old: Vec<&str> = before.split_terminator('\n').collect();
    let new: Vec<&str> = after.split_terminator('\n').collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_middle, new_middle) = (
        &old[prefix..old.len() - suffix],
        &new[prefix..new.len() - suffix],
    );
    if old_middle.len() > MAX_DIFF_LINES || new_middle.len() > MAX_DIFF_LINES {
        return Differences::TooLarge;
    }
    let mut numbers: HashMap<&str, u32> = HashMap::new();
    let (a, b) = (
        numbered(old_middle, &mut numbers),
        numbered(new_middle, &mut numbers),
    );
    let Some(edits) = shortest_edit(&a, &b, MAX_DIFF_EDITS) else {
        return Differences::TooLarge;
    };
    let line = |sign: char, text: &str| DiffLine {
        sign,
        text: text.to_owned(),
    };
    let mut lines: Vec<DiffLine> = old[..prefix].iter().map(|text| line(' ', text)).collect();
    for edit in edits {
        lines.push(match edit {
            Edit::Keep(at) => line(' ', old_middle[at]),
            Edit::Remove(at) => line('-', old_middle[at]),
            Edit::Add(at) => line('+', new_middle[at]),
        });
    }
    lines.extend(old[old.len() - suffix..].iter().map(|text| line(' ', text)));
    Differences::Lines(lines)
}

/// Each line as a number, equal lines as equal numbers (`numbers` holds
/// those given so far), so that comparing two lines costs one comparison.
fn numbered<'t>(lines: &[&'t str], numbers: &mut HashMap<&'t str, u32>) -> Vec<u32> {
    let mut numbered = Vec::with_capacity(lines.len());
    for line in lines {
        let next = u32::try_from(numbers.len()).unwrap_or(u32::MAX);
        numbered.push(*numbers.entry(line).or_insert(next));
    }
    numbered
}

/// One step of an edit script: the index of its line in the old (keep,
/// remove) or the new (add) sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    Keep(usize),
    Remove(usize),
    Add(usize),
}

/// A shortest edit script from `a` to `b` (removals before additions where
/// both fit), or `None` when it needs more than `max_edits` additions and
/// removals. Myers' greedy forward search, keeping the furthest point of
/// each diagonal after each round to walk the path back.
fn shortest_edit(a: &[u32], b: &[u32], max_edits: usize) -> Option<Vec<Edit>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (a.len() + b.len()).min(max_edits) as isize;
    // Diagonal k = x - y is at `furthest[k + offset]`, for k in -max-1..=max+1.
    let offset = max + 1;
    let mut furthest = vec![0isize; 2 * max as usize + 3];
    // Round d's furthest points, diagonals -d..=d.
    let mut rounds: Vec<Vec<u32>> = Vec::new();
    for d in 0..=max {
        for k in (-d..=d).step_by(2) {
            let at = |k: isize| furthest[(k + offset) as usize];
            let mut x = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
                at(k + 1)
            } else {
                at(k - 1) + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            furthest[(k + offset) as usize] = x;
            if x >= n && y >= m {
                rounds.push(Vec::new());
                return Some(walk_back(&rounds, k, n, m));
            }
        }
        rounds.push(
            (-d..=d)
                .map(|k| furthest[(k + offset) as usize] as u32)
                .collect(),
        );
    }
    None
}

/// The edit script that ends at `(n, m)` on diagonal `k` in the last of
/// `rounds`, walked back through the earlier rounds' furthest points.
fn walk_back(rounds: &[Vec<u32>], mut k: isize, n: isize, m: isize) -> Vec<Edit> {
    let (mut x, mut y) = (n, m);
    let mut edits = Vec::new();
    for d in (0..rounds.len() as isize).rev() {
        if d == 0 {
            while x > 0 && y > 0 {
                x -= 1;
                y -= 1;
                edits.push(Edit::Keep(x as usize));
            }
            break;
        }
        let previous = &rounds[d as usize - 1];
        // Round d-1 holds diagonals -(d-1)..=d-1.
        let at = |k: isize| previous[(k + d - 1) as usize] as isize;
        let down = k == -d || (k != d && at(k - 1) < at(k + 1));
        let previous_k = if down { k + 1 } else { k - 1 };
        let previous_x = at(previous_k);
        let previous_y = previous_x - previous_k;
        let (start_x, start_y) = match down {
            true => (previous_x, previous_y + 1),
            false => (previous_x + 1, previous_y),
        };
        while x > start_x && y > start_y {
            x -= 1;
            y -= 1;
            edits.push(Edit::Keep(x as usize));
        }
        edits.push(match down {
            true => Edit::Add(previous_y as usize),
            false => Edit::Remove(previous_x as usize),
        });
        (x, y, k) = (previous_x, previous_y, previous_k);
    }
    edits.reverse();
    edits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signs(differences: &Differences) -> String {
        match differences {
            Differences::Lines(lines) => lines.iter().map(|line| line.sign).collect(),
            Differences::TooLarge => "too large".to_owned(),
        }
    }

    /// Both sides again from a script: the kept and removed lines are
    /// `before`, the kept and added ones `after`.
    fn sides(differences: &Differences) -> (String, String) {
        let Differences::Lines(lines) = differences else {
            panic!("compared")
        };
        let side = |skip: char| {
            lines
                .iter()
                .filter(|line| line.sign != skip)
                .map(|line| format!("{}\n", line.text))
                .collect()
        };
        (side('+'), side('-'))
    }

    #[test]
    fn differences_mark_each_line() {
        let lines = diff_lines("{\n  \"a\": 1\n}\n", "{\n  \"a\": 2\n}\n");
        assert_eq!(signs(&lines), " -+ ");
        assert_eq!(signs(&diff_lines("a\n", "a\n")), " ");
        assert_eq!(signs(&diff_lines("", "a\nb\n")), "++");
        assert_eq!(signs(&diff_lines("a\nb\n", "")), "--");
        assert_eq!(signs(&diff_lines("a\nb\nc\n", "a\nc\n")), " - ");
    }

    #[test]
    fn a_script_is_shortest_and_gives_back_both_sides() {
        // Myers' own example: ABCABBA to CBABAC takes 5 edits.
        let before = "A\nB\nC\nA\nB\nB\nA\n";
        let after = "C\nB\nA\nB\nA\nC\n";
        let differences = diff_lines(before, after);
        let edits = signs(&differences).chars().filter(|s| *s != ' ').count();
        assert_eq!(edits, 5);
        assert_eq!(sides(&differences), (before.to_owned(), after.to_owned()));
        // Pseudo-random line sequences over a small alphabet.
        let mut seed = 0x2545_f491_u32;
        let mut text = |len: usize| -> String {
            (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    format!("{}\n", seed % 4)
                })
                .collect()
        };
        for len in [0, 1, 2, 7, 40, 200] {
            let (before, after) = (text(len), text(len / 2 + 3));
            let differences = diff_lines(&before, &after);
            assert_eq!(sides(&differences), (before, after));
        }
    }

    #[test]
    fn a_long_record_with_few_changes_is_compared() {
        let before: String = (0..40_000).map(|i| format!("  \"{i}\": {i},\n")).collect();
        let after = before.replacen("\"20000\": 20000", "\"20000\": 1", 1);
        let differences = diff_lines(&before, &after);
        let Differences::Lines(lines) = &differences else {
            panic!("compared")
        };
        assert_eq!(lines.len(), 40_001);
        assert_eq!(signs(&differences).matches(['+', '-']).count(), 2);
    }

    /// The review's 40,000-line record (10 s on the request path before):
    /// refused by the line limit, in one pass.
    #[test]
    fn forty_thousand_changed_lines_are_too_large_to_compare() {
        let before: String = (0..40_000).map(|i| format!("  \"a{i}\": {i},\n")).collect();
        let after: String = (0..40_000).map(|i| format!("  \"b{i}\": {i},\n")).collect();
        assert_eq!(diff_lines(&before, &after), Differences::TooLarge);
    }

    /// Within the line limit, more edits than [`MAX_DIFF_EDITS`] stop the
    /// search after that many rounds.
    #[test]
    fn more_edits_than_the_budget_are_too_large_to_compare() {
        let lines = MAX_DIFF_LINES;
        let before: String = (0..lines).map(|i| format!("{i}\n")).collect();
        let after: String = (0..lines).map(|i| format!("{i}'\n")).collect();
        assert_eq!(diff_lines(&before, &after), Differences::TooLarge);
        // Just within the budget: every change found.
        let half = MAX_DIFF_EDITS / 2;
        let after: String = (0..lines)
            .map(|i| match i % (lines / half) {
                0 => format!("{i}'\n"),
                _ => format!("{i}\n"),
            })
            .collect();
        let differences = diff_lines(&before, &after);
        assert_eq!(
            signs(&differences).matches(['+', '-']).count(),
            MAX_DIFF_EDITS
        );
        assert_eq!(sides(&differences), (before, after));
    }
}
