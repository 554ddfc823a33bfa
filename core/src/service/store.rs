//! The storage a host gives the service: statements in, rows out.
//!
//! Both hosts run the same statements (from [`crate::store`]); the native
//! host on SQLite through rusqlite, the worker on D1. A row is a list of values
//! in the statement's column order.

use crate::store::SqlValue;

/// One result row, its values in column order.
pub type Row = Vec<SqlValue>;

/// Why a commit stored nothing.
#[derive(Debug)]
pub enum CommitError<E> {
    /// A constraint refused a statement: a concurrent write won.
    Conflict(E),
    /// Anything else.
    Failed(E),
}

/// SQLite's primary result code for a constraint violation.
const SQLITE_CONSTRAINT: i32 = 19;

impl<E> CommitError<E> {
    /// Sorts a failed commit: a constraint (a unique index, a foreign key,
    /// a check, or a trigger's abort, which the store's schema uses to
    /// refuse a write that lost a race) is a [`CommitError::Conflict`].
    /// `primary_code` is SQLite's result code when the driver gives it;
    /// `message` is the error as the driver words it (D1 gives only that,
    /// ending in the code's name).
    pub fn classify(error: E, primary_code: Option<i32>, message: &str) -> Self {
        let constraint = primary_code == Some(SQLITE_CONSTRAINT)
            || message.contains("SQLITE_CONSTRAINT")
            || message.contains("constraint failed");
        match constraint {
            true => CommitError::Conflict(error),
            false => CommitError::Failed(error),
        }
    }
}

/// A value of a row that is not what the statement selects: the stored data
/// or the host's driver is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column} of a row is not {expected}")]
pub struct RowError {
    /// The column, from 0.
    pub column: usize,
    /// What the statement selects there.
    pub expected: &'static str,
}

/// Typed access to a row's columns.
pub trait RowExt {
    /// The integer at `column` (an integer, or its decimal text: D1 reads
    /// integers beyond 2^53 as text, see [`crate::store`]).
    fn integer(&self, column: usize) -> Result<i64, RowError>;
    /// The integer at `column`, or `None` for NULL.
    fn optional_integer(&self, column: usize) -> Result<Option<i64>, RowError>;
    /// The text at `column`.
    fn text(&self, column: usize) -> Result<&str, RowError>;
    /// The text at `column`, or `None` for NULL.
    fn optional_text(&self, column: usize) -> Result<Option<&str>, RowError>;
}

impl RowExt for [SqlValue] {
    fn integer(&self, column: usize) -> Result<i64, RowError> {
        self.optional_integer(column)?.ok_or(RowError {
            column,
            expected: "an integer",
        })
    }

    fn optional_integer(&self, column: usize) -> Result<Option<i64>, RowError> {
        let wrong = RowError {
            column,
            expected: "an integer",
        };
        match self.get(column) {
            Some(SqlValue::Integer(value)) => Ok(Some(*value)),
            Some(SqlValue::Text(text)) => text.parse().map(Some).map_err(|_| wrong),
            Some(SqlValue::Null) => Ok(None),
            None => Err(wrong),
        }
    }

    fn text(&self, column: usize) -> Result<&str, RowError> {
        self.optional_text(column)?.ok_or(RowError {
            column,
            expected: "text",
        })
    }

    fn optional_text(&self, column: usize) -> Result<Option<&str>, RowError> {
        match self.get(column) {
            Some(SqlValue::Text(text)) => Ok(Some(text)),
            Some(SqlValue::Null) => Ok(None),
            _ => Err(RowError {
                column,
                expected: "text",
            }),
        }
    }
}

/// A `(record, links)` row: a stored version.
pub fn version_row(row: &[SqlValue]) -> Result<(String, String), RowError> {
    Ok((row.text(0)?.to_owned(), row.text(1)?.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraints_are_conflicts_by_code_or_by_message() {
        let conflict = |code, message| {
            matches!(
                CommitError::classify((), code, message),
                CommitError::Conflict(())
            )
        };
        assert!(conflict(
            Some(19),
            "folio: version.received_at must increase"
        ));
        assert!(conflict(
            None,
            "D1_ERROR: folio: version.received_at must increase: SQLITE_CONSTRAINT"
        ));
        assert!(conflict(None, "UNIQUE constraint failed: records.id"));
        assert!(!conflict(Some(5), "database is locked"));
        assert!(!conflict(
            None,
            "D1_ERROR: no such table: records: SQLITE_ERROR"
        ));
    }

    #[test]
    fn integers_read_from_numbers_and_decimal_text() {
        let row = [
            SqlValue::Integer(7),
            SqlValue::Text("17900000000000000".into()),
            SqlValue::Null,
            SqlValue::Text("x".into()),
        ];
        assert_eq!(row.integer(0), Ok(7));
        assert_eq!(row.integer(1), Ok(17_900_000_000_000_000));
        assert_eq!(row.optional_integer(2), Ok(None));
        assert!(row.integer(2).is_err());
        assert!(row.integer(3).is_err());
        assert!(row.integer(4).is_err());
        assert_eq!(row.text(3), Ok("x"));
        assert!(row.text(0).is_err());
    }
}
