//! The worker's D1 schema is `migrations/*.sql` at the repository root, the
//! folder wrangler.toml names as `migrations_dir`: wrangler applies them
//! (`wrangler d1 migrations apply DB`), recording each by file name. They are
//! folio_core::store::MIGRATIONS written out, one file per migration, and
//! this test keeps them so. With `FOLIO_WRITE_MIGRATIONS=1` it writes them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use folio_core::store::{MIGRATIONS, Migration};

const REGENERATE: &str = "FOLIO_WRITE_MIGRATIONS=1 cargo test -p folio-core --test d1_migrations";

fn migrations_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations")
}

/// `0001_records.sql`: D1 applies the files in name order.
fn file_name(migration: &Migration) -> String {
    format!("{:04}_{}.sql", migration.version, migration.name)
}

fn file_text(migration: &Migration) -> String {
    format!(
        "-- Generated from folio_core::store::MIGRATIONS (version {}) for D1; do not edit.\n\
         -- Regenerate: {REGENERATE}\n\n{}",
        migration.version, migration.sql
    )
}

/// The `.sql` files in the folder, by name.
fn committed() -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(migrations_dir()) else {
        return BTreeMap::new();
    };
    entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .map(|path| {
            let name = path.file_name().expect("a file name").to_string_lossy();
            let text = std::fs::read_to_string(&path).expect("a readable migration file");
            (name.into_owned(), text)
        })
        .collect()
}

#[test]
fn d1_migration_files_are_the_core_migrations() {
    let expected: BTreeMap<String, String> = MIGRATIONS
        .iter()
        .map(|migration| (file_name(migration), file_text(migration)))
        .collect();
    let found = committed();
    if std::env::var_os("FOLIO_WRITE_MIGRATIONS").is_some_and(|value| value == "1") {
        std::fs::create_dir_all(migrations_dir()).expect("migrations/ is created");
        for name in found.keys().filter(|name| !expected.contains_key(*name)) {
            std::fs::remove_file(migrations_dir().join(name)).expect("a stale file is removed");
        }
        for (name, text) in &expected {
            std::fs::write(migrations_dir().join(name), text).expect("a migration file is written");
        }
        return;
    }
    let mut faults = Vec::new();
    for (name, text) in &expected {
        match found.get(name) {
            None => faults.push(format!("migrations/{name} is missing")),
            Some(committed) if committed != text => {
                faults.push(format!("migrations/{name} differs from MIGRATIONS"))
            }
            Some(_) => {}
        }
    }
    for name in found.keys().filter(|name| !expected.contains_key(*name)) {
        faults.push(format!("migrations/{name} is no migration of MIGRATIONS"));
    }
    assert!(
        faults.is_empty(),
        "{}\nThe D1 migration files must be folio_core::store::MIGRATIONS; regenerate them with\n  {REGENERATE}\n",
        faults.join("\n")
    );
}

#[test]
fn migration_versions_count_up_from_one() {
    // D1 orders the files by name, so the names must sort as the versions do.
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        assert_eq!(migration.version as usize, index + 1, "{}", migration.name);
    }
    assert!(MIGRATIONS.len() < 10_000, "four digits name every version");
}
