//! Making the target's store fail and recover, for the `faults/*` checks.
//!
//! The database faults are SQL the suite hands to the target's store as is
//! (the same text on every host): [`STORE_WRITE_FAILS`] makes every insert
//! into `events` and `blobs` fail with an SQLite error inside its
//! transaction, after the write's first statements ran; [`STORE_READ_FAILS`]
//! renames the `records` table away. The blob store's fault depends on where
//! a host keeps bytes, so each host's switch does it its own way.

use std::process::Command;
use std::sync::Arc;

/// Triggers that fail every insert into `events` and `blobs`. abs() of the
/// smallest integer overflows: an SQLite error, not a constraint (which a
/// store could take for a conflict between writes).
pub const STORE_WRITE_FAILS: &str = "\
CREATE TRIGGER folio_fault_events AFTER INSERT ON events \
BEGIN SELECT abs(-9223372036854775808); END; \
CREATE TRIGGER folio_fault_blobs AFTER INSERT ON blobs \
BEGIN SELECT abs(-9223372036854775808); END";

/// Undoes [`STORE_WRITE_FAILS`].
pub const STORE_WRITE_RECOVERS: &str =
    "DROP TRIGGER IF EXISTS folio_fault_events; DROP TRIGGER IF EXISTS folio_fault_blobs";

/// Reads of records fail: the table is renamed away.
pub const STORE_READ_FAILS: &str = "ALTER TABLE records RENAME TO folio_fault_records";

/// Undoes [`STORE_READ_FAILS`].
pub const STORE_READ_RECOVERS: &str = "ALTER TABLE folio_fault_records RENAME TO records";

/// What a host does to fail and recover.
pub trait Switch: Send + Sync {
    /// Runs these statements on the store's database, beside the server.
    fn run_sql(&self, sql: &str) -> Result<(), String>;
    /// Makes the blob store unable to store or read bytes (`failing`), or
    /// able again.
    fn blob_store(&self, failing: bool) -> Result<(), String>;
}

/// A target's switch, shared by the checks.
#[derive(Clone)]
pub struct FaultSwitch(pub Arc<dyn Switch>);

impl std::fmt::Debug for FaultSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultSwitch")
    }
}

/// The target's `fault_hook` command: run with `sql STATEMENTS` or with
/// `blob-store on|off`; it exits 0 once done.
pub struct HookCommand(pub Vec<String>);

impl HookCommand {
    fn run(&self, arguments: &[&str]) -> Result<(), String> {
        let Some((program, fixed)) = self.0.split_first() else {
            return Err("the fault_hook is empty".into());
        };
        let output = Command::new(program)
            .args(fixed)
            .args(arguments)
            .output()
            .map_err(|error| format!("running the fault hook {program}: {error}"))?;
        if !output.status.success() {
            return Err(format!(
                "the fault hook ({}) failed ({}): {}{}",
                arguments.first().unwrap_or(&""),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(())
    }
}

impl Switch for HookCommand {
    fn run_sql(&self, sql: &str) -> Result<(), String> {
        self.run(&["sql", sql])
    }

    fn blob_store(&self, failing: bool) -> Result<(), String> {
        self.run(&["blob-store", if failing { "on" } else { "off" }])
    }
}
