//! The storage schema, as numbered migrations. A host applies, in order and
//! each in one transaction, every migration above the version its database
//! records, then records the new version: the native host itself, in
//! `PRAGMA user_version`; for the worker, `wrangler d1 migrations apply`
//! runs `migrations/*.sql` (these, written out; core's test `d1_migrations`
//! keeps them equal) and records their file names in `d1_migrations`.
//! Migrations are only ever appended.

/// One step of the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// 1, 2, …: the schema version after this step.
    pub version: u32,
    /// A short name for the step, for logs.
    pub name: &'static str,
    /// Statements separated by `;` at line ends (triggers hold inner `;`s,
    /// so split with [`Migration::statements`], not on every `;`).
    pub sql: &'static str,
}

/// Every migration, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "records",
        sql: include_str!("sql/0001_records.sql"),
    },
    Migration {
        version: 2,
        name: "app_access",
        sql: include_str!("sql/0002_app_access.sql"),
    },
    Migration {
        version: 3,
        name: "described_entity",
        sql: include_str!("sql/0003_described_entity.sql"),
    },
    Migration {
        version: 4,
        name: "console",
        sql: include_str!("sql/0004_console.sql"),
    },
    Migration {
        version: 5,
        name: "storage_v2",
        sql: include_str!("sql/0005_storage_v2.sql"),
    },
    Migration {
        version: 6,
        name: "versions_by_record",
        sql: include_str!("sql/0006_versions_by_record.sql"),
    },
    Migration {
        version: 7,
        name: "versions_by_record_hash",
        sql: include_str!("sql/0007_versions_by_record_hash.sql"),
    },
    Migration {
        version: 8,
        name: "federation",
        sql: include_str!("sql/0008_federation.sql"),
    },
    Migration {
        version: 9,
        name: "received",
        sql: include_str!("sql/0009_received.sql"),
    },
    Migration {
        version: 10,
        name: "audiences",
        sql: include_str!("sql/0010_audiences.sql"),
    },
    Migration {
        version: 11,
        name: "search",
        sql: include_str!("sql/0011_search.sql"),
    },
];

impl Migration {
    /// The migration's statements, one at a time, for hosts whose driver runs
    /// one statement per call (D1's `prepare`). A statement ends at a line
    /// that ends with `;` outside a `BEGIN … END` block; comments are dropped.
    pub fn statements(&self) -> Vec<String> {
        let mut statements = Vec::new();
        let mut current = String::new();
        let mut in_block = false;
        for line in self.sql.lines() {
            let code = line.split("--").next().unwrap_or_default().trim_end();
            if code.trim().is_empty() {
                continue;
            }
            current.push_str(code);
            current.push('\n');
            let trimmed = code.trim();
            if trimmed == "BEGIN" {
                in_block = true;
            } else if trimmed == "END;" {
                in_block = false;
            }
            if !in_block && trimmed.ends_with(';') {
                statements.push(std::mem::take(&mut current).trim().to_owned());
            }
        }
        statements
    }
}
