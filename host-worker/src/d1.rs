//! Core's statements on D1: binding values, reading rows, and a write job's
//! atomic batch.

use folio_core::store::{SqlValue, Statement};
use folio_core::{CommitError, Fetch, Row, Transaction};
use serde_json::Value;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement};

/// A statement ready to run. Integers are exact in a JavaScript number:
/// core binds larger ones as text (see `folio_core::store`).
fn prepare(db: &D1Database, statement: &Statement) -> worker::Result<D1PreparedStatement> {
    let values: Vec<JsValue> = statement
        .params
        .iter()
        .map(|value| match value {
            SqlValue::Null => JsValue::NULL,
            SqlValue::Integer(n) => JsValue::from_f64(*n as f64),
            SqlValue::Text(text) => JsValue::from_str(text),
        })
        .collect();
    db.prepare(&statement.sql).bind(&values)
}

/// A value D1 returned, as core reads it.
fn value(value: Value) -> SqlValue {
    match value {
        Value::Null => SqlValue::Null,
        Value::String(text) => SqlValue::Text(text),
        Value::Number(number) => match number.as_i64() {
            Some(n) => SqlValue::Integer(n),
            // D1 answers integers as doubles; the schema stores no reals.
            None => SqlValue::Integer(number.as_f64().unwrap_or_default() as i64),
        },
        Value::Bool(flag) => SqlValue::Integer(i64::from(flag)),
        other => SqlValue::Text(other.to_string()),
    }
}

/// The rows of a read.
pub async fn fetch(db: &D1Database, statement: &Statement) -> worker::Result<Vec<Row>> {
    let rows: Vec<Vec<Value>> = prepare(db, statement)?.raw().await?;
    Ok(rows
        .into_iter()
        .map(|row| row.into_iter().map(value).collect())
        .collect())
}

/// D1 as a write job's transaction: reads go straight to the database; the
/// commit is one batch, which D1 runs atomically.
pub struct Batch<'d>(pub &'d D1Database);

impl Fetch for Batch<'_> {
    type Error = worker::Error;

    async fn fetch(&mut self, statement: &Statement) -> worker::Result<Vec<Row>> {
        fetch(self.0, statement).await
    }
}

impl Transaction for Batch<'_> {
    async fn commit(
        &mut self,
        statements: &[Statement],
    ) -> Result<Vec<Row>, CommitError<worker::Error>> {
        let prepared = statements
            .iter()
            .map(|statement| prepare(self.0, statement))
            .collect::<worker::Result<Vec<_>>>()
            .map_err(CommitError::Failed)?;
        let results = self.0.batch(prepared).await.map_err(|error| {
            let message = error.to_string();
            CommitError::classify(error, None, &message)
        })?;
        log_commit(&results);
        let Some(last) = results.last() else {
            return Ok(Vec::new());
        };
        // Batch results come as objects; their keys keep the column order.
        let rows: Vec<serde_json::Map<String, Value>> =
            last.results().map_err(CommitError::Failed)?;
        Ok(rows
            .into_iter()
            .map(|row| row.into_iter().map(|(_, v)| value(v)).collect())
            .collect())
    }
}

/// One JSON line per committed batch: its statements and the rows D1
/// wrote for them, index entries included, which is what D1 bills.
fn log_commit(results: &[worker::D1Result]) {
    let rows_written: usize = results
        .iter()
        .filter_map(|result| result.meta().ok().flatten())
        .filter_map(|meta| meta.rows_written)
        .sum();
    let line = serde_json::json!({
        "message": "commit",
        "statements": results.len(),
        "rows_written": rows_written,
    });
    worker::console_log!("{line}");
}
