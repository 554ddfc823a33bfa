//! What the commands of `folio` share: their result, where one that
//! writes SQL reports, and the user a command names.

use std::io::Write;
use std::path::Path;

use folio_core::model::Entity;

use crate::users;

/// What a command ends with: an error is printed after `folio: `.
pub type CliResult = Result<(), Box<dyn std::error::Error>>;

/// Where a command that wrote SQL to `file` reports: stderr when the SQL
/// went to stdout, so that stdout holds SQL alone.
pub fn report_to(file: &Path) -> Box<dyn Write> {
    if file == Path::new("-") {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    }
}

/// The user named `name`; when `entity` is given, it must be the user's.
pub fn find_user(
    conn: &rusqlite::Connection,
    name: &str,
    entity: Option<Entity>,
) -> Result<users::User, String> {
    let found = users::list_users(conn)
        .map_err(|error| error.to_string())?
        .into_iter()
        .find(|u| u.name == name)
        .ok_or_else(|| format!("no user `{name}`"))?;
    if let Some(entity) = entity.filter(|entity| *entity != found.entity) {
        let at = &found.entity;
        return Err(format!("user `{name}` is at entity `{at}`, not `{entity}`"));
    }
    Ok(found)
}
