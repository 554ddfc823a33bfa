//! The console's HTML (templates in `core/templates/console/`, escaped by
//! askama). No page has a script; each control has a label, the focus
//! order is the reading order, and the layout holds at 390 px.

use askama::Template;

use super::{Differences, FilterProblem, LinkView, ListForm, PermissionWords, SORTS};

/// What every signed-in page knows: whose console, the token of its
/// forms, and which section of the menu it is in.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    pub user: &'a str,
    pub csrf: &'a str,
    pub section: Section,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Overview,
    Records,
    Types,
    Apps,
    Account,
}

impl Frame<'_> {
    /// `/{user}/console` with `rest` after it.
    pub fn href(&self, rest: &str) -> String {
        console_href(self.user, rest)
    }

    fn current(&self, section: Section) -> &'static str {
        if self.section == section {
            "page"
        } else {
            "false"
        }
    }
}

/// `/{user}/console{rest}`, the user's name percent-encoded as a path segment.
pub fn console_href(user: &str, rest: &str) -> String {
    let user: String =
        percent_encoding::utf8_percent_encode(user, percent_encoding::NON_ALPHANUMERIC).collect();
    format!("/{user}/console{rest}")
}

/// A record in a list: enough to recognize it.
#[derive(Debug, Clone)]
pub struct RecordRow {
    pub href: String,
    pub type_name: String,
    pub id: String,
    pub author: String,
    pub received_at: String,
    pub summary: String,
    pub deleted: bool,
    /// The app that wrote the version, where the list knows it.
    pub app: Option<String>,
}

/// A type in the overview: how many live and deleted records it has.
#[derive(Debug, Clone)]
pub struct TypeCount {
    pub name: String,
    pub href: String,
    pub live: i64,
    pub deleted: i64,
}

#[derive(Template)]
#[template(path = "console/overview.html")]
pub struct Overview<'a> {
    pub frame: Frame<'a>,
    /// Live records, every type together.
    pub records: i64,
    pub types: Vec<TypeCount>,
    pub versions: i64,
    pub blobs: i64,
    pub blob_bytes: String,
    pub live_apps: Vec<String>,
    pub recent: Vec<RecordRow>,
}

/// A choice of type: the list's filter value and its name.
#[derive(Debug, Clone)]
pub struct TypeChoice {
    /// `{entity}+{record_id}` (the list) or `{entity}+{record_id}+{hash}` (a new record).
    pub value: String,
    pub name: String,
}

#[derive(Template)]
#[template(path = "console/records.html")]
pub struct Records<'a> {
    pub frame: Frame<'a>,
    pub form: &'a ListForm,
    pub types: Vec<TypeChoice>,
    pub problem: Option<FilterProblem>,
    pub rows: Vec<RecordRow>,
    pub next_href: Option<String>,
    pub first_href: Option<String>,
}

impl Records<'_> {
    fn sorts(&self) -> &'static [(&'static str, &'static str)] {
        &SORTS
    }
}

/// A version in a record's history.
#[derive(Debug, Clone)]
pub struct VersionRow {
    pub href: String,
    pub hash: String,
    pub received_at: String,
    pub created_at: String,
    pub deleted: bool,
    pub current: bool,
}

/// What the record and version pages show of one version.
#[derive(Debug, Clone)]
pub struct VersionView {
    pub title: String,
    pub type_name: String,
    pub type_href: Option<String>,
    pub author: String,
    pub id: String,
    pub source: String,
    pub created_at: String,
    pub received_at: String,
    pub hash: String,
    pub parent_hash: Option<String>,
    /// The tombstone's action, for a deleted record.
    pub deletion: Option<String>,
    pub json: String,
    pub permissions: PermissionWords,
    pub links: Vec<LinkShown>,
}

/// A link with where the console shows it.
#[derive(Debug, Clone)]
pub struct LinkShown {
    pub link: LinkView,
    /// The record's console page, or the blob's download.
    pub href: Option<String>,
}

#[derive(Template)]
#[template(path = "console/record.html")]
pub struct RecordPage<'a> {
    pub frame: Frame<'a>,
    pub view: VersionView,
    pub versions: Vec<VersionRow>,
    pub more_versions: bool,
    pub edit_href: Option<String>,
    pub delete_action: Option<String>,
    pub parent_hash: String,
    pub notice: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "console/version.html")]
pub struct VersionPage<'a> {
    pub frame: Frame<'a>,
    pub view: VersionView,
    pub record_href: String,
    /// `None` for a record's first version.
    pub diff: Option<Differences>,
}

#[derive(Template)]
#[template(path = "console/edit.html")]
pub struct EditPage<'a> {
    pub frame: Frame<'a>,
    /// `None` for a new record.
    pub record_title: Option<String>,
    pub action: String,
    pub back_href: String,
    pub json: String,
    pub parent_hash: String,
    /// The types a new record may take.
    pub types: Vec<TypeChoice>,
    pub chosen_type: String,
    pub error: Option<EditError>,
}

/// Why a save was refused, as the edit page says it.
#[derive(Debug, Clone)]
pub struct EditError {
    pub title: String,
    pub detail: Option<String>,
    /// A stale edit: the page links the current version.
    pub latest_href: Option<String>,
}

/// A Type record on the types page.
#[derive(Debug, Clone)]
pub struct TypeView {
    pub name: String,
    pub href: String,
    pub value: String,
    pub builtin: bool,
    pub schema: String,
}

#[derive(Template)]
#[template(path = "console/types.html")]
pub struct TypesPage<'a> {
    pub frame: Frame<'a>,
    pub types: Vec<TypeView>,
    pub chosen: String,
    pub json: String,
    /// The result of a validation: `Ok(message)` or `Err(violation)`.
    pub result: Option<Result<String, String>>,
}

/// An app on the apps page.
#[derive(Debug, Clone)]
pub struct AppView {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub website: Option<String>,
    pub href: String,
    pub requested: Vec<String>,
    pub granted: Option<Vec<String>>,
    pub authorized_at: Option<String>,
    pub deleted: bool,
}

#[derive(Template)]
#[template(path = "console/apps.html")]
pub struct AppsPage<'a> {
    pub frame: Frame<'a>,
    pub apps: Vec<AppView>,
    pub notice: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "console/account.html")]
pub struct AccountPage<'a> {
    pub frame: Frame<'a>,
    pub notice: Option<&'a str>,
    pub error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "console/sign_in.html")]
pub struct SignInPage<'a> {
    pub user: &'a str,
    pub action: &'a str,
    pub csrf: &'a str,
    pub error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "console/message.html")]
pub struct MessagePage<'a> {
    pub user: Option<&'a str>,
    pub title: &'a str,
    pub message: &'a str,
}

#[derive(Template)]
#[template(path = "console/landing.html")]
pub struct LandingPage<'a> {
    pub host: &'a str,
    pub version: &'a str,
}

/// Renders a page. Rendering fails only if writing to a `String` fails,
/// which it does not; the fallback keeps that impossible case from
/// becoming a panic.
pub fn render(page: &impl Template) -> String {
    page.render().unwrap_or_else(|_| {
        String::from("<!doctype html><title>Folio</title><p>This page could not be shown.")
    })
}

/// `bytes` as people read sizes: `1.5 MB`.
pub fn human_bytes(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["bytes", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} bytes"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(999), "999 bytes");
        assert_eq!(human_bytes(1_500_000), "1.5 MB");
    }

    #[test]
    fn the_sign_in_page_escapes_and_labels() {
        let page = render(&SignInPage {
            user: "<me>",
            action: "/me/console/sign-in",
            csrf: "tok\"en",
            error: Some("Wrong password"),
        });
        assert!(!page.contains("<me>"));
        assert!(!page.contains("tok\"en"));
        assert!(page.contains(r#"<label for="password">Password</label>"#));
        assert!(page.contains(r#"role="alert""#));
        assert!(!page.contains("<script"));
    }

    #[test]
    fn console_links_encode_the_user() {
        assert_eq!(console_href("a b", "/records"), "/a%20b/console/records");
    }
}
