//! The console's HTML (templates in `core/templates/console/`, escaped by
//! askama). No page has a script; each control has a label, the focus
//! order is the reading order, and the layout holds at 390 px.

use askama::Template;

use super::authorship::DeletionChoice;
use super::form::FieldView;
use super::new_type::NewTypeForm;
use super::{Differences, FilterProblem, LinkView, ListForm, PermissionWords};
use crate::schema::{FieldKind, FilterablePath};

/// What every signed-in page knows: whose console, the token of its
/// forms, and which section of the menu it is in.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// The `{user}` path segment whose console this is.
    pub user: &'a str,
    /// The CSRF token every form of the page carries, from the session.
    pub csrf: &'a str,
    /// The menu entry the page is under.
    pub section: Section,
}

/// The sections of the console's menu.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The overview: counts and recent versions.
    Overview,
    /// The records list, with its filter.
    Records,
    /// The types page, where a typed record can be checked against a type.
    Types,
    /// The apps, with what each asks for and was granted.
    Apps,
    /// The account page: the password.
    Account,
    /// The outbox: notifications waiting for other servers.
    Outbox,
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
    /// The record's console page.
    pub href: String,
    /// The name of the record's type.
    pub type_name: String,
    /// The record's id.
    pub id: String,
    /// The record's author: `you`, or their profile name and entity.
    pub author: String,
    /// When its latest version was received, as a [`RecordDate`](crate::model::RecordDate); empty
    /// if unknown.
    pub received_at: String,
    /// The start of its content as JSON (at most 160 characters), or `(deleted)`.
    pub summary: String,
    /// Whether the latest version is a tombstone.
    pub deleted: bool,
    /// With a type chosen, a cell per column of the records table.
    pub cells: Vec<String>,
    /// Who wrote the version: the app of the owner's that wrote it, where
    /// the list knows it, else `you`; another's record names its author.
    pub written_by: String,
}

/// A type in the overview: how many live and deleted records it has.
#[derive(Debug, Clone)]
pub struct TypeCount {
    /// The type's name, or its record id when its Type record has none.
    pub name: String,
    /// The records list filtered to this type.
    pub href: String,
    /// How many live records of this type the store holds.
    pub live: i64,
    /// How many deleted records of this type the store holds.
    pub deleted: i64,
}

/// The overview page.
#[derive(Template)]
#[template(path = "console/overview.html")]
pub struct Overview<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// Live records, every type together.
    pub records: i64,
    /// Record counts, one per type the store holds records of.
    pub types: Vec<TypeCount>,
    /// How many versions the store holds.
    pub versions: i64,
    /// How many blobs the store holds.
    pub blobs: i64,
    /// The blobs' total size, as [`human_bytes`] writes it.
    pub blob_bytes: String,
    /// The names of the apps with a live authorization, sorted.
    pub live_apps: Vec<String>,
    /// The most recently received versions.
    pub recent: Vec<RecordRow>,
}

/// A choice of type: the list's filter value and its name.
#[derive(Debug, Clone)]
pub struct TypeChoice {
    /// `{entity}+{record_id}` (the list) or `{entity}+{record_id}+{hash}` (a new record).
    pub value: String,
    /// The type's name.
    pub name: String,
}

/// A condition the records page's builder offers: a path of the chosen
/// type a filter can match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterChoice {
    /// `tag:` or `link:`, then the path: how the builder writes the value.
    pub value: String,
    /// The path and what is there.
    pub label: String,
}

impl FilterChoice {
    /// The choice of one filterable path.
    pub fn new(filterable: &FilterablePath) -> Self {
        let path = filterable.path.as_str();
        let form = match filterable.kind {
            FieldKind::TagLink => "tag",
            _ => "link",
        };
        let kind = filterable.kind;
        let label = match kind.value_form() {
            Some(written) => format!("{path}: {kind}, written {written}"),
            None => format!("{path}: {kind} (empty value: records with none)"),
        };
        FilterChoice {
            value: format!("{form}:{path}"),
            label,
        }
    }
}

/// The records list page.
#[derive(Template)]
#[template(path = "console/records.html")]
pub struct Records<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// The list's form, as its query string gave it.
    pub form: &'a ListForm,
    /// The types the list can be filtered to.
    pub types: Vec<TypeChoice>,
    /// The chosen type's name, when one is chosen.
    pub type_name: Option<String>,
    /// The conditions the builder offers for the chosen type.
    pub filterable: Vec<FilterChoice>,
    /// With a type chosen, its top-level fields: the table's columns.
    pub columns: Vec<String>,
    /// The sorts offered: [`super::SORTS`], then the chosen type's tags.
    pub sorts: Vec<(String, String)>,
    /// Why the filter was refused, if it was.
    pub problem: Option<FilterProblem>,
    /// The page's records.
    pub rows: Vec<RecordRow>,
    /// The next page, if there is one.
    pub next_href: Option<String>,
    /// The first page, when this page is not it.
    pub first_href: Option<String>,
}

/// A version in a record's history.
#[derive(Debug, Clone)]
pub struct VersionRow {
    /// The version's console page.
    pub href: String,
    /// The version's hash.
    pub hash: String,
    /// When the version was received.
    pub received_at: String,
    /// The version's `version.created_at`.
    pub created_at: String,
    /// Whether the version is a tombstone.
    pub deleted: bool,
    /// Whether it is the record's latest version.
    pub current: bool,
}

/// What the record and version pages show of one version.
#[derive(Debug, Clone)]
pub struct VersionView {
    /// The heading: the type's name and the record's id.
    pub title: String,
    /// The name of the record's type.
    pub type_name: String,
    /// The console page of the record's Type record.
    pub type_href: Option<String>,
    /// The record's author: `You (entity)`, or their profile name and entity.
    pub author: String,
    /// The console page of the author's Entity record, when the store holds it.
    pub author_href: Option<String>,
    /// The record's id.
    pub id: String,
    /// The record's `source`.
    pub source: String,
    /// Where the store got the record from, in words.
    pub source_words: String,
    /// The record's `created_at`.
    pub created_at: String,
    /// When the version was received.
    pub received_at: String,
    /// The version's hash.
    pub hash: String,
    /// The hash of the version's parent; `None` for a first version.
    pub parent_hash: Option<String>,
    /// The tombstone's action, for a deleted record.
    pub deletion: Option<String>,
    /// Its `permissions` and `content` (or `no_content`) as pretty JSON.
    pub json: String,
    /// Its permissions, in words.
    pub permissions: PermissionWords,
    /// The links its content holds.
    pub links: Vec<LinkShown>,
}

/// A link with where the console shows it.
#[derive(Debug, Clone)]
pub struct LinkShown {
    /// The link, as the record page shows it.
    pub link: LinkView,
    /// The record's console page, or the blob's download.
    pub href: Option<String>,
}

/// A record's page: its latest version and its history.
#[derive(Template)]
#[template(path = "console/record.html")]
pub struct RecordPage<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// The latest version.
    pub view: VersionView,
    /// The record's latest versions, newest first.
    pub versions: Vec<VersionRow>,
    /// Whether the record has more versions than the page shows.
    pub more_versions: bool,
    /// The edit form; `None` when the owner may not edit the record
    /// (deleted, built in, or another's).
    pub edit_href: Option<String>,
    /// Where the delete form posts; `None` when nothing may be deleted.
    pub delete_action: Option<String>,
    /// The deletions the form offers, the first checked.
    pub deletions: Vec<DeletionChoice>,
    /// Whose the record is, before a noun (`Alice’s`), for another's record.
    pub whose: Option<String>,
    /// The latest version's hash, which the delete form sends as the tombstone's parent.
    pub parent_hash: String,
    /// What the last action did, if the page follows one.
    pub notice: Option<&'a str>,
}

/// One version's page, with its differences from its parent.
#[derive(Template)]
#[template(path = "console/version.html")]
pub struct VersionPage<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// The version.
    pub view: VersionView,
    /// The record's page.
    pub record_href: String,
    /// `None` for a record's first version.
    pub diff: Option<Differences>,
}

/// The form that creates a record or updates one.
#[derive(Template)]
#[template(path = "console/edit.html")]
pub struct EditPage<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// `None` for a new record.
    pub record_title: Option<String>,
    /// Where the form posts.
    pub action: String,
    /// Where cancelling goes.
    pub back_href: String,
    /// The JSON in the text area: `permissions` and `content`.
    pub json: String,
    /// The hash of the version being edited; empty for a new record.
    pub parent_hash: String,
    /// The types a new record may take.
    pub types: Vec<TypeChoice>,
    /// The type value chosen for a new record; empty at first.
    pub chosen_type: String,
    /// Why the last save was refused, if it was.
    pub error: Option<EditError>,
    /// The form's fields, from the type's schema; empty: the JSON editor.
    pub fields: Vec<FieldView>,
    /// With fields: the same page as the JSON editor.
    pub json_href: Option<String>,
    /// With the JSON editor: the same page as a form, when the type has one.
    pub form_href: Option<String>,
    /// A new record's page, to choose its type (GET).
    pub new_href: String,
    /// A new record's page before its type is chosen: the choice alone.
    pub choose_type: bool,
}

/// Why a save was refused, as the edit page says it.
#[derive(Debug, Clone)]
pub struct EditError {
    /// The problem type's title, or what a stale edit means.
    pub title: String,
    /// The problem's detail, if it has one.
    pub detail: Option<String>,
    /// A stale edit: the page links the current version.
    pub latest_href: Option<String>,
}

/// A Type record on the types page.
#[derive(Debug, Clone)]
pub struct TypeView {
    /// The type's name, or its record id when its Type record has none.
    pub name: String,
    /// The Type record's console page.
    pub href: String,
    /// `{entity}+{record_id}+{hash}` of its latest version: the form's value for it.
    pub value: String,
    /// Whether it is a built-in type.
    pub builtin: bool,
    /// Its `schema`, as pretty JSON.
    pub schema: String,
    /// The SDK code that uses it (`console::sdk_example`); empty for a
    /// built-in type.
    pub sdk: String,
    /// Its records' TypeScript types, as `folio schema typescript` writes them.
    pub typescript: String,
}

/// The types page, with its form to check a record against a type.
#[derive(Template)]
#[template(path = "console/types.html")]
pub struct TypesPage<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// The live types, the store's own before the built-in ones, by name.
    pub types: Vec<TypeView>,
    /// The type value the form was posted with; empty at first.
    pub chosen: String,
    /// The JSON typed in the form.
    pub json: String,
    /// The result of a validation: `Ok(message)` or `Err(violation)`.
    pub result: Option<Result<String, String>>,
    /// The New-type form, as typed.
    pub new_type: NewTypeForm,
    /// The kinds a new type's field may be: `(value, label)`.
    pub kinds: &'static [(&'static str, &'static str)],
    /// The schema the New-type form makes, once previewed.
    pub new_type_schema: Option<String>,
    /// What became of the New-type form: a message, or why it cannot be saved.
    pub new_type_result: Option<Result<String, String>>,
}

/// An app on the apps page.
#[derive(Debug, Clone)]
pub struct AppView {
    /// The App record's id.
    pub id: String,
    /// The app's name, or `App {id}` when its record has none.
    pub name: String,
    /// The app's description, if its record has one.
    pub description: Option<String>,
    /// The app's website, if its record has a web address.
    pub website: Option<String>,
    /// The App record's console page.
    pub href: String,
    /// What the app asks for, one phrase per type (`read Note`).
    pub requested: Vec<String>,
    /// What its live authorization grants, in the same words; `None` if it has none.
    pub granted: Option<Vec<String>>,
    /// When its live authorization was created.
    pub authorized_at: Option<String>,
    /// Whether the App record is deleted.
    pub deleted: bool,
}

/// The apps page.
#[derive(Template)]
#[template(path = "console/apps.html")]
pub struct AppsPage<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// Every App record of the store.
    pub apps: Vec<AppView>,
    /// What the last action did, if the page follows one.
    pub notice: Option<&'a str>,
}

/// The account page, where the owner changes the password.
#[derive(Template)]
#[template(path = "console/account.html")]
pub struct AccountPage<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// What the last action did, if the page follows one.
    pub notice: Option<&'a str>,
    /// Why the last password change was refused, if it was.
    pub error: Option<&'a str>,
}

/// A notification of the outbox page.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    /// The record's id.
    pub id: String,
    /// The record's console page.
    pub href: String,
    /// `pending`, `retrying` or `failed`.
    pub state: &'static str,
    /// When it is sent; `None` for one given up.
    pub due_at: Option<String>,
    /// The attempts that failed.
    pub attempts: i64,
}

/// The notifications waiting for one recipient.
#[derive(Debug, Clone)]
pub struct OutboxPeer {
    /// The recipient's entity.
    pub recipient: String,
    /// Its place on the page, for the page's anchors and labels.
    pub anchor: String,
    /// Why the latest attempt failed, if one did.
    pub last_error: Option<String>,
    /// The notifications, oldest first.
    pub rows: Vec<OutboxRow>,
}

/// The outbox page: what waits to be sent to other servers, and why.
#[derive(Template)]
#[template(path = "console/outbox.html")]
pub struct OutboxPage<'a> {
    /// The page's frame.
    pub frame: Frame<'a>,
    /// Each recipient with notifications waiting or given up.
    pub peers: Vec<OutboxPeer>,
    /// Whether there were more notifications than the page shows.
    pub truncated: bool,
    /// What the last action did, if the page follows one.
    pub notice: Option<&'a str>,
}

/// The console's sign-in page.
#[derive(Template)]
#[template(path = "console/sign_in.html")]
pub struct SignInPage<'a> {
    /// The `{user}` path segment.
    pub user: &'a str,
    /// Where the form posts.
    pub action: &'a str,
    /// The CSRF token of the visitor's session.
    pub csrf: &'a str,
    /// Why the last sign-in failed, if it did.
    pub error: Option<&'a str>,
}

/// A page that only says something: an error, or a result with nowhere else to go.
#[derive(Template)]
#[template(path = "console/message.html")]
pub struct MessagePage<'a> {
    /// The `{user}` path segment, when the page is under a user's console.
    pub user: Option<&'a str>,
    /// The page's title.
    pub title: &'a str,
    /// What it says.
    pub message: &'a str,
    /// Where to go from here besides the console's overview: `(href, label)`.
    pub next: Option<(&'a str, &'a str)>,
}

/// The page of a browser's `GET /`: what this server is, naming no user.
#[derive(Template)]
#[template(path = "console/landing.html")]
pub struct LandingPage<'a> {
    /// The server's host name.
    pub host: &'a str,
    /// The server's version.
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
