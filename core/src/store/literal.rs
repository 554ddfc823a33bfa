//! A statement as literal SQL: its parameters written into its text, for a
//! host that hands a file of SQL to someone else's client (`folio user add
//! --emit-sql`, run by `wrangler d1 execute --file`).
//!
//! Values bound as parameters stay the rule everywhere a request's values
//! meet SQL (see the module docs of [`crate::store`]). Rendering is for SQL
//! the operator produces and reads, and it is still exact: text becomes a
//! single-quoted literal with its quotes doubled, so no value can end the
//! literal early.

use super::{SqlValue, Statement};

/// Why a statement cannot be written as literal SQL. Statements built by
/// this module's functions never fail; a hand-made [`Statement`] may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LiteralSqlError {
    /// `?N` names a parameter the statement does not have.
    #[error("the placeholder ?{0} has no parameter")]
    MissingParameter(u64),
    /// A parameter no placeholder uses: text and parameters disagree.
    #[error("no placeholder uses parameter ?{0}")]
    UnusedParameter(usize),
    /// A bare `?`, or `:name`, `@name`, `$name`: statements number their
    /// parameters (`?1`, `?2`, …), so these are mistakes.
    #[error("an unnumbered placeholder at byte {0} of the SQL text")]
    UnnumberedPlaceholder(usize),
    /// SQLite's tokenizer ends a string literal at a NUL character.
    #[error("parameter ?{0} holds a NUL character, which a SQL literal cannot carry")]
    NulInText(usize),
    /// A quoted string, identifier or comment that never ends.
    #[error("the SQL text ends inside a quoted string, identifier or comment")]
    Unterminated,
}

impl Statement {
    /// The statement with each `?N` replaced by its parameter as a literal:
    /// `NULL`, a decimal integer, or a single-quoted text with every `'`
    /// doubled. Placeholders are found by SQLite's own rules: never inside
    /// a string literal, a quoted identifier or a comment, and `?10` is
    /// parameter 10, not `?1` followed by `0`. A placeholder may appear more
    /// than once; every parameter must be used.
    ///
    /// Integers are exact at any magnitude: SQLite parses an integer literal
    /// into a 64-bit integer itself. That matters on D1, whose JavaScript
    /// side reads a bound number as a double (inexact beyond 2^53, and a
    /// date in ticks of 100 ns is beyond it); a literal never passes
    /// through JavaScript.
    pub fn to_literal_sql(&self) -> Result<String, LiteralSqlError> {
        let sql = self.sql.as_bytes();
        let mut out = String::with_capacity(self.sql.len());
        let mut used = vec![false; self.params.len()];
        // Every byte the scanner stops at is ASCII, so each `copied..i`
        // slice starts and ends on a character boundary.
        let mut copied = 0;
        let mut i = 0;
        while i < sql.len() {
            match sql[i] {
                quote @ (b'\'' | b'"' | b'`') => i = quoted_end(sql, i, quote)?,
                b'[' => i = find(sql, i + 1, b"]")? + 1,
                b'-' if sql.get(i + 1) == Some(&b'-') => {
                    i = find(sql, i, b"\n").map_or(sql.len(), |end| end + 1);
                }
                b'/' if sql.get(i + 1) == Some(&b'*') => i = find(sql, i + 2, b"*/")? + 2,
                b'?' => {
                    let digits = sql[i + 1..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    if digits == 0 {
                        return Err(LiteralSqlError::UnnumberedPlaceholder(i));
                    }
                    let number: u64 = self.sql[i + 1..i + 1 + digits].parse().unwrap_or(u64::MAX);
                    let index = usize::try_from(number)
                        .ok()
                        .and_then(|n| n.checked_sub(1))
                        .filter(|&n| n < self.params.len())
                        .ok_or(LiteralSqlError::MissingParameter(number))?;
                    out.push_str(&self.sql[copied..i]);
                    push_literal(&mut out, &self.params[index], index + 1)?;
                    used[index] = true;
                    i += 1 + digits;
                    copied = i;
                }
                b':' | b'@' | b'$'
                    if sql
                        .get(i + 1)
                        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') =>
                {
                    return Err(LiteralSqlError::UnnumberedPlaceholder(i));
                }
                _ => i += 1,
            }
        }
        if let Some(unused) = used.iter().position(|used| !used) {
            return Err(LiteralSqlError::UnusedParameter(unused + 1));
        }
        out.push_str(&self.sql[copied..]);
        Ok(out)
    }
}

/// The index just past a quoted string or identifier opening at `start`;
/// a doubled quote inside it is an escaped quote.
fn quoted_end(sql: &[u8], start: usize, quote: u8) -> Result<usize, LiteralSqlError> {
    let mut i = start + 1;
    loop {
        let close = find(sql, i, &[quote])?;
        if sql.get(close + 1) == Some(&quote) {
            i = close + 2;
        } else {
            return Ok(close + 1);
        }
    }
}

/// Where `needle` next occurs at or after `from`.
fn find(sql: &[u8], from: usize, needle: &[u8]) -> Result<usize, LiteralSqlError> {
    sql.get(from..)
        .and_then(|rest| rest.windows(needle.len()).position(|w| w == needle))
        .map(|at| from + at)
        .ok_or(LiteralSqlError::Unterminated)
}

fn push_literal(out: &mut String, value: &SqlValue, number: usize) -> Result<(), LiteralSqlError> {
    match value {
        SqlValue::Null => out.push_str("NULL"),
        // In parentheses, so that a negative number after a `-` in the
        // text never reads as the start of a `--` comment.
        SqlValue::Integer(n) if *n < 0 => out.push_str(&format!("({n})")),
        SqlValue::Integer(n) => out.push_str(&n.to_string()),
        SqlValue::Text(text) if text.contains('\0') => {
            return Err(LiteralSqlError::NulInText(number));
        }
        SqlValue::Text(text) => {
            out.push('\'');
            out.push_str(&text.replace('\'', "''"));
            out.push('\'');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(sql: &str, params: Vec<SqlValue>) -> Statement {
        Statement {
            sql: sql.to_owned(),
            params,
        }
    }

    fn render(sql: &str, params: Vec<SqlValue>) -> Result<String, LiteralSqlError> {
        statement(sql, params).to_literal_sql()
    }

    #[test]
    fn values_become_literals() {
        assert_eq!(
            render(
                "INSERT INTO t VALUES (?1, ?2, ?3, ?4)",
                vec![
                    SqlValue::Null,
                    SqlValue::Integer(17_900_000_000_000_001),
                    SqlValue::Integer(-5),
                    SqlValue::Text("plain".into()),
                ]
            ),
            Ok("INSERT INTO t VALUES (NULL, 17900000000000001, (-5), 'plain')".into())
        );
        assert_eq!(
            render("SELECT 1 - ?1", vec![SqlValue::Integer(i64::MIN)]),
            Ok("SELECT 1 - (-9223372036854775808)".into())
        );
    }

    #[test]
    fn quotes_are_doubled() {
        assert_eq!(
            render("SELECT ?1", vec![SqlValue::Text("it's '' ok'".into())]),
            Ok("SELECT 'it''s '''' ok'''".into())
        );
        assert_eq!(
            render("SELECT ?1", vec![SqlValue::Text(String::new())]),
            Ok("SELECT ''".into())
        );
    }

    #[test]
    fn unicode_is_kept_as_it_is() {
        assert_eq!(
            render(
                "SELECT 'é ?1 ✓', ?1",
                vec![SqlValue::Text("Zoë's 🗂 \u{2028}\n\"x\"".into())]
            ),
            Ok("SELECT 'é ?1 ✓', 'Zoë''s 🗂 \u{2028}\n\"x\"'".into())
        );
    }

    #[test]
    fn placeholders_are_numbered_whole() {
        let params: Vec<SqlValue> = (1..=11).map(SqlValue::Integer).collect();
        let sql = (1..=11)
            .map(|n| format!("?{n}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            render(&format!("SELECT {sql}, ?10"), params),
            Ok("SELECT 1,2,3,4,5,6,7,8,9,10,11, 10".into())
        );
        assert_eq!(
            render("SELECT ?1, ?1", vec![SqlValue::Integer(7)]),
            Ok("SELECT 7, 7".into())
        );
    }

    #[test]
    fn text_holding_a_placeholder_is_not_substituted_again() {
        assert_eq!(
            render(
                "SELECT ?1, ?2",
                vec![SqlValue::Text("?2 and ?1".into()), SqlValue::Integer(3)]
            ),
            Ok("SELECT '?2 and ?1', 3".into())
        );
    }

    #[test]
    fn quoted_parts_and_comments_of_the_text_are_left_alone() {
        let sql = "SELECT json_extract(?1, '$[0]'), 'it''s ?2', \"col?1\", [a?1], `b?1` \
                   /* ?1 :x */ -- ?9\nFROM t WHERE x = ?2";
        assert_eq!(
            render(sql, vec![SqlValue::Text("[]".into()), SqlValue::Integer(2)]),
            Ok(
                "SELECT json_extract('[]', '$[0]'), 'it''s ?2', \"col?1\", [a?1], `b?1` \
                /* ?1 :x */ -- ?9\nFROM t WHERE x = 2"
                    .into()
            )
        );
    }

    #[test]
    fn mismatches_are_refused() {
        assert_eq!(
            render("SELECT ?2", vec![SqlValue::Null]),
            Err(LiteralSqlError::MissingParameter(2))
        );
        assert_eq!(
            render("SELECT ?0", vec![SqlValue::Null]),
            Err(LiteralSqlError::MissingParameter(0))
        );
        assert_eq!(
            render("SELECT ?99999999999999999999999", vec![]),
            Err(LiteralSqlError::MissingParameter(u64::MAX))
        );
        assert_eq!(
            render("SELECT ?1", vec![SqlValue::Null, SqlValue::Null]),
            Err(LiteralSqlError::UnusedParameter(2))
        );
        assert_eq!(
            render("SELECT ?", vec![]),
            Err(LiteralSqlError::UnnumberedPlaceholder(7))
        );
        assert_eq!(
            render("SELECT :name", vec![]),
            Err(LiteralSqlError::UnnumberedPlaceholder(7))
        );
        assert_eq!(
            render("SELECT 'open", vec![]),
            Err(LiteralSqlError::Unterminated)
        );
        assert_eq!(
            render("SELECT ?1", vec![SqlValue::Text("a\0b".into())]),
            Err(LiteralSqlError::NulInText(1))
        );
    }
}
