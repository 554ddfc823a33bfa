//! Core's statements on D1: binding values, reading rows, and a write job's
//! atomic batch.

use folio_core::model::RecordDate;
use folio_core::store::{SqlValue, Statement};
use folio_core::{CommitError, Effects, Job, JobOutcome, JobStep, Row, WriteJob};
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

/// Runs a job whole on D1 at `at` (core's [`WriteJob`]): its reads go
/// straight to the database, one after another; its commit is one batch,
/// which D1 runs atomically.
pub async fn run_job(
    db: &D1Database,
    job: Job,
    at: RecordDate,
) -> worker::Result<(JobOutcome, Effects)> {
    let mut job = WriteJob::start(job, at);
    loop {
        match job.step() {
            JobStep::Read(statements) => {
                let mut rows = Vec::with_capacity(statements.len());
                for statement in statements {
                    rows.push(fetch(db, statement).await?);
                }
                job.supply(rows);
            }
            JobStep::Commit(statements) => match commit(db, statements).await {
                Ok(rows) => job.committed(rows),
                Err(CommitError::Conflict(_)) => job.conflicted(),
                Err(CommitError::Failed(error)) => return Err(error),
            },
            JobStep::Done(finished) => return Ok((finished.outcome, finished.effects)),
            JobStep::Failed(failure) => return Err(worker::Error::RustError(failure.to_string())),
            JobStep::Decided => {
                return Err(worker::Error::RustError(
                    "a job started whole stepped to decided".into(),
                ));
            }
        }
    }
}

/// Runs `statements` as one batch, atomically; the rows of the last one.
async fn commit(
    db: &D1Database,
    statements: &[Statement],
) -> Result<Vec<Row>, CommitError<worker::Error>> {
    let prepared = statements
        .iter()
        .map(|statement| prepare(db, statement))
        .collect::<worker::Result<Vec<_>>>()
        .map_err(CommitError::Failed)?;
    let results = db.batch(prepared).await.map_err(|error| {
        let message = error.to_string();
        CommitError::classify(error, None, &message)
    })?;
    log_commit(&results);
    let Some(last) = results.last() else {
        return Ok(Vec::new());
    };
    // Batch results come as objects; their keys keep the column order.
    let rows: Vec<serde_json::Map<String, Value>> = last.results().map_err(CommitError::Failed)?;
    Ok(rows
        .into_iter()
        .map(|row| row.into_iter().map(|(_, v)| value(v)).collect())
        .collect())
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
