//! `docs/protocol-index.md`: which files cite each section of
//! `../shared/PROTOCOL.md`, made from the comments of every `.rs` file in
//! the repository, and held equal to them here. A citation of a section
//! the document has no heading for fails the test. With
//! `FOLIO_WRITE_PROTOCOL_INDEX=1` the test writes the index instead.
//!
//! A citation is the document's name in a comment followed by a section
//! sign and a number, and the numbers listed right after it: `§4, §7`,
//! `§4, and §5`, and ranges such as `§2–§5` (each section in between
//! counts). A list ends at anything else, so in `§7, spec §4.1` only 7 is
//! the document's. A mention with no section number after it (`PROTOCOL:`
//! or the name alone) cites the whole document. Comments continued on the
//! next line are read as one text; string literals are not comments.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const REGENERATE: &str =
    "FOLIO_WRITE_PROTOCOL_INDEX=1 cargo test -p folio-core --test protocol_index";

/// The index, relative to the repository's root.
const INDEX: &str = "docs/protocol-index.md";

/// This file: its comments describe citations without making any.
const THIS_FILE: &str = "core/tests/protocol_index.rs";

/// Folders never scanned: build output, installed packages, and hidden
/// folders (`.git`, `.wrangler`).
fn skipped(name: &str) -> bool {
    name == "target" || name == "node_modules" || name.starts_with('.')
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn protocol_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/PROTOCOL.md");
    std::fs::read_to_string(&path).expect("../shared/PROTOCOL.md must sit beside the repository")
}

/// A section number as its parts: `4.1` is `[4, 1]`, ordered as numbers.
type Section = Vec<u32>;

fn section_text(section: &Section) -> String {
    let parts: Vec<String> = section.iter().map(u32::to_string).collect();
    parts.join(".")
}

/// The numbered headings of the document (`## 4. Records, links,
/// permissions`): each section's number and title.
fn headings(document: &str) -> BTreeMap<Section, String> {
    let mut found = BTreeMap::new();
    for line in document.lines() {
        let Some(rest) = line.strip_prefix("##") else {
            continue;
        };
        let rest = rest.trim_start_matches('#').trim_start();
        let (number, title) = rest.split_once(' ').unwrap_or((rest, ""));
        let number = number.trim_end_matches('.');
        let parts: Option<Section> = number.split('.').map(|p| p.parse().ok()).collect();
        if let Some(parts) = parts.filter(|parts| !parts.is_empty()) {
            found.insert(parts, title.trim().to_owned());
        }
    }
    found
}

/// The text of a file's comments: runs of comments on consecutive lines
/// joined by spaces (a citation may wrap), separate runs by a newline,
/// which ends any list. Each piece is kept with its offset in the text and
/// its line, to report where a citation is.
struct CommentText {
    text: String,
    lines: Vec<(usize, usize)>,
}

impl CommentText {
    fn push(&mut self, line: usize, piece: &str) {
        let joined = self.lines.last().is_some_and(|&(_, last)| last + 1 >= line);
        if !self.text.is_empty() {
            self.text.push(if joined { ' ' } else { '\n' });
        }
        self.lines.push((self.text.len(), line));
        self.text.push_str(piece.trim());
    }

    fn line_at(&self, offset: usize) -> usize {
        let index = self.lines.partition_point(|&(start, _)| start <= offset);
        self.lines[index.saturating_sub(1)].1
    }
}

fn is_identifier(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every comment of a Rust source: line comments (`//`, `///`, `//!`) and
/// block comments, skipping string, raw string and character literals.
fn comments(source: &str) -> CommentText {
    let chars: Vec<char> = source.chars().collect();
    let mut out = CommentText {
        text: String::new(),
        lines: Vec::new(),
    };
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if at(i + 1) == '/' => {
                let mut start = i + 2;
                while matches!(at(start), '/' | '!') {
                    start += 1;
                }
                let mut end = start;
                while end < chars.len() && chars[end] != '\n' {
                    end += 1;
                }
                out.push(line, &chars[start..end].iter().collect::<String>());
                i = end;
            }
            '/' if at(i + 1) == '*' => {
                let (mut depth, mut j) = (1, i + 2);
                let (mut piece, mut piece_line) = (String::new(), line);
                while j < chars.len() && depth > 0 {
                    match (chars[j], at(j + 1)) {
                        ('*', '/') => {
                            depth -= 1;
                            j += 2;
                        }
                        ('/', '*') => {
                            depth += 1;
                            j += 2;
                        }
                        ('\n', _) => {
                            let text = std::mem::take(&mut piece);
                            out.push(piece_line, text.trim().trim_start_matches(['*', '!']));
                            line += 1;
                            piece_line = line;
                            j += 1;
                        }
                        (other, _) => {
                            piece.push(other);
                            j += 1;
                        }
                    }
                }
                out.push(piece_line, piece.trim().trim_start_matches(['*', '!']));
                i = j;
            }
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    if at(i) == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            'r' if !is_identifier(at(i.wrapping_sub(1)))
                || (at(i.wrapping_sub(1)) == 'b' && !is_identifier(at(i.wrapping_sub(2)))) =>
            {
                let mut hashes = 0;
                while at(i + 1 + hashes) == '#' {
                    hashes += 1;
                }
                if at(i + 1 + hashes) != '"' {
                    i += 1;
                    continue;
                }
                i += hashes + 2;
                loop {
                    if i >= chars.len() {
                        break;
                    }
                    if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                        i += hashes + 1;
                        break;
                    }
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            '\'' if at(i + 1) == '\\' => {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            }
            // A character literal such as '"'; otherwise a lifetime.
            '\'' if at(i + 2) == '\'' => i += 3,
            _ => i += 1,
        }
    }
    out
}

/// One citation found: the sections it names (none: the whole document)
/// and the line it is on.
#[derive(Debug, PartialEq)]
struct Citation {
    sections: Vec<Section>,
    line: usize,
}

/// A section number at the start of `text` (`13`, `4.1`; a full stop
/// after it ends a sentence), and the bytes it took.
fn number(text: &str) -> Option<(Section, usize)> {
    let mut parts = Vec::new();
    let mut taken = 0;
    loop {
        let digits = text[taken..].len()
            - text[taken..]
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .len();
        if digits == 0 {
            break;
        }
        parts.push(text[taken..taken + digits].parse().ok()?);
        taken += digits;
        let next_is_digit = text[taken..]
            .strip_prefix('.')
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        if !next_is_digit {
            break;
        }
        taken += 1;
    }
    (!parts.is_empty()).then_some((parts, taken))
}

/// The citations of the document in one file's comments.
fn citations(source: &str) -> Vec<Citation> {
    let comments = comments(source);
    let text = comments.text.as_str();
    let mut found = Vec::new();
    for (start, _) in text.match_indices("PROTOCOL") {
        let before = text[..start].chars().next_back();
        if before.is_some_and(is_identifier) {
            continue;
        }
        let after = &text[start + "PROTOCOL".len()..];
        let rest = match (after.strip_prefix(".md"), after.strip_prefix(':')) {
            (Some(rest), _) => rest,
            (None, Some(_)) => "",
            (None, None) => continue,
        };
        if rest.starts_with(is_identifier) {
            continue;
        }
        found.push(Citation {
            sections: sections_listed(rest.trim_start_matches([' ', '\t'])),
            line: comments.line_at(start),
        });
    }
    found
}

/// The sections listed at the start of `text`: `§4`, then `, §7`,
/// `, and §7`, ` and §7`, or a range `–§7` (or `-§7`) after each.
fn sections_listed(text: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let Some(mut rest) = text.strip_prefix('§') else {
        return sections;
    };
    let mut range = false;
    while let Some((section, taken)) = number(rest.trim_start_matches(' ')) {
        rest = &rest.trim_start_matches(' ')[taken..];
        match sections.last() {
            Some(first) if range && first.len() == 1 && section.len() == 1 => {
                let from = first[0] + 1;
                sections.extend((from..=section[0]).map(|n| vec![n]));
            }
            _ => sections.push(section),
        }
        let next = [", and §", ", §", " and §", "–§", "-§"]
            .iter()
            .find_map(|separator| rest.strip_prefix(separator).map(|r| (separator, r)));
        let Some((separator, after)) = next else {
            break;
        };
        range = !separator.starts_with([',', ' ']);
        rest = after;
    }
    sections
}

/// Every `.rs` file under `dir`, as paths relative to `root` with `/`.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).expect("a readable folder");
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().expect("a name").to_string_lossy();
        if path.is_dir() {
            if !skipped(&name) {
                rust_files(root, &path, out);
            }
        } else if name.ends_with(".rs") {
            let relative = path.strip_prefix(root).expect("under the root");
            let parts: Vec<_> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(parts.join("/"));
        }
    }
}

/// What the repository cites: for each section (`None`: the whole
/// document), how many citations each file makes; and the citations of
/// sections the document does not have.
struct Cited {
    files: BTreeMap<Option<Section>, BTreeMap<String, usize>>,
    unknown: Vec<String>,
}

fn cited(root: &Path, known: &BTreeMap<Section, String>) -> Cited {
    let mut files = Vec::new();
    rust_files(root, root, &mut files);
    files.sort();
    let mut cited = Cited {
        files: BTreeMap::new(),
        unknown: Vec::new(),
    };
    for file in files.iter().filter(|file| *file != THIS_FILE) {
        let source = std::fs::read_to_string(root.join(file)).expect("a readable source file");
        for citation in citations(&source) {
            let sections = match citation.sections.is_empty() {
                true => vec![None],
                false => citation.sections.into_iter().map(Some).collect(),
            };
            for section in sections {
                if let Some(missing) = section.as_ref().filter(|s| !known.contains_key(*s)) {
                    cited.unknown.push(format!(
                        "{file}:{} cites §{}, which PROTOCOL.md has no heading for",
                        citation.line,
                        section_text(missing)
                    ));
                    continue;
                }
                *cited
                    .files
                    .entry(section)
                    .or_default()
                    .entry(file.clone())
                    .or_default() += 1;
            }
        }
    }
    cited
}

fn file_list(files: Option<&BTreeMap<String, usize>>) -> (usize, String) {
    let Some(files) = files else {
        return (0, "none".to_owned());
    };
    let listed: Vec<String> = files
        .iter()
        .map(|(file, count)| format!("`{file}` ({count})"))
        .collect();
    (files.values().sum(), listed.join(", "))
}

fn index(known: &BTreeMap<Section, String>, cited: &Cited) -> String {
    let mut out = String::new();
    out.push_str(
        "# PROTOCOL.md, section by section: the files that cite it\n\n\
         Generated by `core/tests/protocol_index.rs` from the comments of every `.rs` file in \
         this repository; do not edit. Regenerate:\n\n",
    );
    let _ = writeln!(out, "```sh\n{REGENERATE}\n```\n");
    out.push_str(
        "A citation is `PROTOCOL.md §N` in a comment, with the sections listed right after it \
         (`§4, §7`; a range `§2–§5` cites each section in it). Each file is listed with how \
         many times it cites the section.\n\n\
         | § | Section | Citations | Files |\n|---|---|---|---|\n",
    );
    for (section, title) in known {
        let (count, files) = file_list(cited.files.get(&Some(section.clone())));
        let _ = writeln!(
            out,
            "| {} | {title} | {count} | {files} |",
            section_text(section)
        );
    }
    let (count, files) = file_list(cited.files.get(&None));
    let _ = writeln!(
        out,
        "\nCiting the whole document, no section named ({count}): {files}."
    );
    out
}

#[test]
fn the_protocol_index_is_the_codes_citations() {
    let known = headings(&protocol_text());
    assert!(!known.is_empty(), "PROTOCOL.md has no numbered headings");
    let root = repository_root();
    let cited = cited(&root, &known);
    assert!(
        cited.unknown.is_empty(),
        "citations of sections PROTOCOL.md does not have:\n{}\n",
        cited.unknown.join("\n")
    );
    let expected = index(&known, &cited);
    let path = root.join(INDEX);
    if std::env::var_os("FOLIO_WRITE_PROTOCOL_INDEX").is_some_and(|value| value == "1") {
        std::fs::write(&path, &expected).expect("docs/protocol-index.md is written");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != expected {
        let first = committed
            .lines()
            .zip(expected.lines())
            .position(|(old, new)| old != new)
            .unwrap_or_else(|| committed.lines().count().min(expected.lines().count()));
        panic!(
            "{INDEX} is not what the code cites (first difference at line {}: expected\n  {}\n\
             found\n  {}\n). Regenerate it with\n  {REGENERATE}\n",
            first + 1,
            expected.lines().nth(first).unwrap_or("(the end)"),
            committed.lines().nth(first).unwrap_or("(the end)"),
        );
    }
}

#[test]
fn citations_are_read_in_every_form_the_code_uses() {
    let sections = |source: &str| -> Vec<Vec<Section>> {
        citations(source).into_iter().map(|c| c.sections).collect()
    };
    assert_eq!(sections("// (PROTOCOL.md §13)."), [vec![vec![13]]]);
    assert_eq!(
        sections("/// PROTOCOL.md §4, §7, and §8: x"),
        [vec![vec![4], vec![7], vec![8]]]
    );
    assert_eq!(
        sections("//! PROTOCOL.md §2–§4 and §9"),
        [vec![vec![2], vec![3], vec![4], vec![9]]]
    );
    assert_eq!(sections("// PROTOCOL.md §4-§5."), [vec![vec![4], vec![5]]]);
    assert_eq!(
        sections("// (PROTOCOL.md §7, spec §4.1, §6)"),
        [vec![vec![7]]]
    );
    assert_eq!(sections("// PROTOCOL.md §13's defaults"), [vec![vec![13]]]);
    assert_eq!(sections("// PROTOCOL.md §4.2 x"), [vec![vec![4, 2]]]);
    assert_eq!(
        sections("/// a body (PROTOCOL.md\n/// §5): x"),
        [vec![vec![5]]]
    );
    assert_eq!(
        sections("// PROTOCOL: writes survive\n\n// §5 of another text"),
        [Vec::<Section>::new()]
    );
    assert_eq!(sections("// as PROTOCOL.md says"), [Vec::<Section>::new()]);
    assert_eq!(
        sections("/// [`PROTOCOL_VERSION`]"),
        Vec::<Vec<Section>>::new()
    );
    assert_eq!(
        sections(
            "let s = \"// PROTOCOL.md §9\"; let c = '\"'; let r = r#\"/* PROTOCOL.md §9 */\"#;"
        ),
        Vec::<Vec<Section>>::new()
    );
    assert_eq!(
        sections("fn f<'a>() {} /* PROTOCOL.md §3 */"),
        [vec![vec![3]]]
    );
    let lines: Vec<usize> = citations("fn f() {}\n\n// x\n// PROTOCOL.md §1")
        .iter()
        .map(|c| c.line)
        .collect();
    assert_eq!(lines, [4]);
}

#[test]
fn headings_give_each_sections_number_and_title() {
    let known = headings("# Title\n\n## 4. Records, links\n\n### 4.1 Ids\n\n## Notes\n");
    let listed: Vec<(String, &str)> = known
        .iter()
        .map(|(section, title)| (section_text(section), title.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            ("4".to_owned(), "Records, links"),
            ("4.1".to_owned(), "Ids")
        ]
    );
}
