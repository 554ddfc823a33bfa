//! The owner's console at `{base_url}/{user}/console`: the pages where the
//! person who owns a store sees what their apps wrote, fixes a record by
//! hand and cuts an app off, without writing code.
//!
//! Everything here is pure: forms and list parameters in, what the pages
//! show out ([`page`] renders them). The service reads and writes through
//! the API's own statements and write transition, as the owner
//! ([`Access::Owner`](crate::auth::access::Access::Owner)).
//!
//! The console signs in with the consent page's session cookie and
//! password, and is usable without JavaScript (it has none): every action
//! is a form that carries the session's CSRF token.

pub mod authorship;
pub mod diff;
pub mod form;
pub mod new_type;
pub mod page;

pub use diff::{DiffLine, Differences, MAX_DIFF_EDITS, MAX_DIFF_LINES, diff_lines};

use serde_json::Value;

use crate::model::{LinkPath, Permissions, ReadPermission, Record};
use crate::query::{IndexEntry, parse_filter};

/// Response headers of every console page: no script at all, styles and
/// images from the server itself only, forms posted to it only, never
/// framed, no referrer, never cached.
pub const PAGE_HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/html; charset=utf-8"),
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

/// The stylesheet of the pages a person reads, served at `/console.css`.
pub const STYLE: &str = include_str!("../../../templates/console/style.css");

/// How long browsers may keep the stylesheet.
pub const STYLE_CACHE_CONTROL: &str = "public, max-age=3600";

/// The largest console form body read: a record's JSON as the largest
/// write body, percent-encoded (at most three bytes per byte).
pub const MAX_FORM_BYTES: usize = 3 * 1024 * 1024;

/// Records per page of the console's list.
pub const PAGE_SIZE: u32 = 50;

/// Versions the overview shows.
pub const RECENT_VERSIONS: u32 = 20;

/// Versions of one record the record page lists (the API's largest page).
pub const MAX_VERSIONS_SHOWN: u32 = 200;

/// The most Type, App and App Authorization records a console page reads,
/// the last received: anyone may register an app and other servers send
/// records, so a page's work must not grow with what strangers store.
pub const MAX_BUILTIN_RECORDS: u32 = 1_000;

/// Entity links whose names the record page looks up.
pub const MAX_NAMED_ENTITIES: usize = 20;

/// The shortest password the console and `folio user passwd` set.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Whether a new password typed twice may be set: the same both times, at
/// least `min_chars` characters and at most
/// [`MAX_PASSWORD_BYTES`](crate::service::consent::MAX_PASSWORD_BYTES) bytes. The
/// reason, as the page says it, when not.
pub fn check_new_password(new: &str, again: &str, min_chars: usize) -> Result<(), &'static str> {
    if new != again {
        return Err("The two new passwords differ: the password was not changed.");
    }
    if new.chars().count() < min_chars {
        return Err("The new password is too short: use at least 8 characters.");
    }
    if new.len() > crate::service::consent::MAX_PASSWORD_BYTES {
        return Err("The new password is too long: use at most 1024 bytes.");
    }
    Ok(())
}

/// What a page says after a form sent the browser there (`?done=…`, the
/// redirect after a post): `None` for anything else.
pub fn notice(done: Option<&str>) -> Option<&'static str> {
    Some(match done? {
        "created" => "The record was created.",
        "saved" => "Your changes were saved.",
        "deleted" => "The record was deleted.",
        "revoked" => "The app’s access was revoked: its next request is refused.",
        "forgotten" => {
            "The app was forgotten: it can no longer use your records, and must register again to ask."
        }
        "password" => "Your password was changed. Every other session was signed out.",
        "sent" => "Sending now: what waited for that server goes within seconds if it answers.",
        _ => return None,
    })
}

/// A posted console form (`application/x-www-form-urlencoded`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Form {
    fields: Vec<(String, String)>,
}

#[cfg(test)]
impl Form {
    /// A form of these pairs, as a browser posts it.
    pub(crate) fn of(pairs: &[(&str, &str)]) -> Form {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        Form::parse(body.as_bytes()).expect("a form within the limit")
    }
}

impl Form {
    /// Parses a form body; `None` when it is longer than [`MAX_FORM_BYTES`].
    pub fn parse(body: &[u8]) -> Option<Form> {
        (body.len() <= MAX_FORM_BYTES).then(|| Form {
            fields: form_urlencoded::parse(body).into_owned().collect(),
        })
    }

    /// Parses a page's query string (what a `GET` form sends): `+` is a space.
    pub fn from_query(query: &str) -> Form {
        Form {
            fields: form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect(),
        }
    }

    /// The first value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }

    /// The CSRF token the form carries ("" when none).
    pub fn csrf(&self) -> &str {
        self.get("csrf").unwrap_or_default()
    }
}

/// What the records page asks for: a type, a filter in the protocol's
/// grammar, a sort, and whether tombstones are listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListForm {
    /// `{entity}+{record_id}` of the Type record ("" for every type).
    pub type_link: String,
    /// The filter as typed.
    pub filter: String,
    /// The words searched for (`docs/search.md`), as typed.
    pub search: String,
    /// One of [`SORTS`]' values, or [`BEST_MATCH`] with a search.
    pub sort: String,
    /// Whether deleted records are listed too.
    pub include_deleted: bool,
    /// Where the page starts, as the previous page's link gave it.
    pub page_start: Option<String>,
}

/// The sorts the records page offers: `(value, label)`, the first the default.
pub const SORTS: [(&str, &str); 4] = [
    ("$['received_at']+desc", "Newest first"),
    ("$['received_at']+asc", "Oldest first"),
    ("$['version.received_at']+desc", "Last changed first"),
    ("$['created_at']+desc", "Created last first"),
];

/// The records page's order for a search ranked by how well each record
/// matches: no API sort, so one page of the best matches.
pub const BEST_MATCH: &str = "best";

/// Whether `sort` is a sort on a path of the content (`$['content']…+asc`
/// or `+desc`), as the records page offers for a type's tags; the list
/// decides whether the path is one it can sort by.
fn is_tag_sort(sort: &str) -> bool {
    let Some((path, order)) = sort.rsplit_once('+') else {
        return false;
    };
    matches!(order, "asc" | "desc")
        && path.starts_with("$['content']")
        && path.parse::<LinkPath>().is_ok()
}

/// The records page's sorts on a type's tags: each tag of the content
/// outside arrays and maps (one value per record), both ways.
pub fn tag_sorts(filterable: &[crate::schema::FilterablePath]) -> Vec<(String, String)> {
    let mut sorts = Vec::new();
    for entry in filterable {
        let path = entry.path.as_str();
        if entry.kind != crate::schema::FieldKind::TagLink || path.contains("[*]") {
            continue;
        }
        let field = path
            .trim_start_matches("$['content']")
            .trim_start_matches("['")
            .trim_end_matches("']")
            .replace("']['", ".");
        sorts.push((format!("{path}+asc"), format!("{field}, A to Z")));
        sorts.push((format!("{path}+desc"), format!("{field}, Z to A")));
    }
    sorts
}

/// A content field's value as a cell of the records table: short text, a
/// link by what it names, a list by its first items.
pub fn cell_text(value: &Value) -> String {
    const MAX_CHARS: usize = 80;
    const MAX_ITEMS: usize = 3;
    let text = match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(text) => text.clone(),
        Value::Array(items) => {
            let mut shown: Vec<String> = items.iter().take(MAX_ITEMS).map(cell_text).collect();
            if items.len() > MAX_ITEMS {
                shown.push(format!("{} more", items.len() - MAX_ITEMS));
            }
            match shown.is_empty() {
                true => "(none)".to_owned(),
                false => shown.join(", "),
            }
        }
        Value::Object(map) => {
            let text = |key: &str| map.get(key).and_then(Value::as_str);
            match (text("entity"), text("record_id"), text("hash")) {
                (Some(entity), Some(id), _) => {
                    // Any object may hold these keys: its last characters, not bytes.
                    let tail: Vec<char> = id.chars().rev().take(6).collect();
                    format!("{entity} …{}", tail.into_iter().rev().collect::<String>())
                }
                (Some(entity), None, _) => entity.to_owned(),
                (_, _, Some(_)) => text("name").unwrap_or("(file)").to_owned(),
                _ => format!("{{{} fields}}", map.len()),
            }
        }
    };
    match text.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// The SDK code of the Types page's "Use it from an app" panel for one
/// type: list with a filter, get, create, update and watch, in the SDK's
/// own calls, with the type's version link and an example of its required
/// fields. `filterable` and `required` are the type's
/// ([`crate::schema::Schema::filterable_paths`],
/// [`crate::schema::Schema::required_fields`]).
pub fn sdk_example(
    name: &str,
    link: &crate::model::VersionLink,
    filterable: &[crate::schema::FilterablePath],
    required: &[(&str, crate::schema::FieldKind)],
) -> String {
    use crate::schema::FieldKind;
    use std::fmt::Write;
    let var = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>();
    let var = match var.starts_with(|c: char| c.is_ascii_digit()) || var.is_empty() {
        true => format!("type_{var}"),
        false => var,
    };
    let placeholder = |kind: FieldKind| match kind {
        FieldKind::String | FieldKind::TagLink => "\"\"",
        FieldKind::Int | FieldKind::Number => "0",
        FieldKind::Boolean => "false",
        FieldKind::Null => "null",
        FieldKind::EntityLink => "{ entity: \"alice.example\" }",
        FieldKind::RecordLink => "recordLink(someRecord)",
        FieldKind::VersionLink => "versionLink(someRecord)",
        FieldKind::BlobLink => {
            "await folio.blobs.upload(bytes, { type: \"image/png\", name: \"a.png\" })"
        }
        FieldKind::Array => "[]",
        FieldKind::Object | FieldKind::Map => "{}",
    };
    let content: Vec<String> = required
        .iter()
        .map(|(field, kind)| format!("{}: {}", js_key(field), placeholder(*kind)))
        .collect();
    let content = format!("{{ {} }}", content.join(", "));
    let condition = filterable
        .iter()
        .find(|p| p.kind == FieldKind::TagLink)
        .map(|tag| {
            format!(
                "filter.and(filter.type({var}), filter.at(\"{}\", filter.value.tag(\"…\")))",
                tag.path.as_str()
            )
        });
    let mut out = String::new();
    let _ = writeln!(
        out,
        "import {{ Folio, filter, recordLink, versionLink }} from \"folio-client\";\n"
    );
    let _ = writeln!(
        out,
        "// const folio = await Folio.connect({{ entity, app: {{ appId, authorizationId, key }} }});"
    );
    let _ = writeln!(
        out,
        "const {var} = {{ entity: \"{}\", record_id: \"{}\", version_hash: \"{}\" }}; // the type `{name}`\n",
        link.entity, link.record_id, link.version_hash
    );
    let list_filter = condition.unwrap_or_else(|| format!("filter.type({var})"));
    let _ = writeln!(out, "// Its records, newest first:");
    let _ = writeln!(
        out,
        "for await (const record of folio.records.list({{ filter: {list_filter} }})) console.log(record.content);\n"
    );
    let _ = writeln!(out, "// One record, by id:");
    let _ = writeln!(
        out,
        "const one = await folio.records.get(\"<record id>\");\n"
    );
    let _ = writeln!(
        out,
        "// A new record, checked against the schema before it is sent:"
    );
    let _ = writeln!(
        out,
        "const made = await folio.records.create({{ type: {var}, content: {content} }});\n"
    );
    let _ = writeln!(
        out,
        "// A new version, refused if someone wrote one meanwhile:"
    );
    let _ = writeln!(
        out,
        "await folio.records.update(made, {{ content: {{ ...made.content }} }});\n"
    );
    let _ = writeln!(out, "// Changes as they happen:");
    let _ = write!(
        out,
        "for await (const changed of folio.events.subscribe({{ filter: filter.type({var}) }})) console.log(changed.id);"
    );
    out
}

/// A JavaScript object key: bare when it is an identifier, else quoted.
fn js_key(name: &str) -> String {
    let bare = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    match bare {
        true => name.to_owned(),
        false => serde_json::Value::from(name).to_string(),
    }
}

/// A filter the parser refused, shown at its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterProblem {
    /// What the parser said.
    pub message: String,
    /// The filter up to the fault, and from it.
    pub before: String,
    /// The rest of the filter, from the fault.
    pub after: String,
    /// Whether the filter reads, but no record can match it (a condition
    /// on a text field, a field the type lacks).
    pub cannot_match: bool,
}

impl FilterProblem {
    /// `message` about `filter`, pointing at byte `position`.
    pub fn at(filter: &str, position: usize, message: String) -> Self {
        let at = floor_char_boundary(filter, position);
        FilterProblem {
            message,
            before: filter[..at].to_owned(),
            after: filter[at..].to_owned(),
            cannot_match: false,
        }
    }
}

/// The condition the records page's builder adds: `add_path` is a
/// [`page::FilterChoice`]'s value (`tag:` or `link:`, then the path), and
/// `value` is written as the path's kind needs: a tag quoted as a JSON
/// string unless it already is, a link as typed, nothing for "no value
/// there". `None` for a choice the page never offers.
fn added_condition(choice: &str, value: &str) -> Option<String> {
    let (kind, path) = choice.split_once(':')?;
    let path: LinkPath = path.parse().ok()?;
    let value = value.trim();
    let value = match kind {
        _ if value.is_empty() => String::new(),
        "tag" if !value.starts_with('"') => serde_json::Value::from(value).to_string(),
        "tag" | "link" => value.to_owned(),
        _ => return None,
    };
    Some(format!("{}={value}", path.as_str()))
}

impl ListForm {
    /// The form a records page's query string holds; an unknown sort is
    /// the first of [`SORTS`]. A condition from the page's builder
    /// (`add_path`, `add_value`) joins the filter's top level.
    pub fn from_query(form: &Form) -> ListForm {
        let search = form.get("search").unwrap_or_default().trim().to_owned();
        let sort = form
            .get("sort")
            .filter(|sort| {
                SORTS.iter().any(|(value, _)| value == sort)
                    || is_tag_sort(sort)
                    || (*sort == BEST_MATCH && !search.is_empty())
            })
            .unwrap_or(SORTS[0].0);
        let mut filter = form.get("filter").unwrap_or_default().trim().to_owned();
        let added = form
            .get("add_path")
            .and_then(|choice| added_condition(choice, form.get("add_value").unwrap_or_default()));
        if let Some(condition) = added {
            filter = match filter.is_empty() {
                true => condition,
                false => format!("{filter},{condition}"),
            };
        }
        ListForm {
            type_link: form.get("type").unwrap_or_default().trim().to_owned(),
            filter,
            search,
            sort: sort.to_owned(),
            include_deleted: form.get("include_deleted") == Some("true"),
            page_start: form.get("page_start").map(str::to_owned),
        }
    }

    /// The API's list parameters for this page, or the problem of the
    /// typed filter, at its position in what was typed. The type's
    /// condition joins the filter's top level, whose `,` is "and" (each
    /// level of parentheses flips it), so the filter means what it meant.
    pub fn api_params(&self) -> Result<Vec<(String, String)>, FilterProblem> {
        let mut params = vec![
            ("page_size".to_owned(), PAGE_SIZE.to_string()),
            ("include_links".to_owned(), String::new()),
        ];
        if self.sort != BEST_MATCH {
            params.push(("sort".to_owned(), self.sort.clone()));
        }
        if !self.search.is_empty() {
            params.push(("search".to_owned(), self.search.clone()));
        }
        if !self.filter.is_empty() {
            parse_filter(&self.filter).map_err(|error| {
                FilterProblem::at(&self.filter, error.position, error.to_string())
            })?;
        }
        // The type comes from the page's own list; a value that is no
        // record link (a hand-made address) selects every type.
        let type_filter = Some(format!("$['type']={}", self.type_link))
            .filter(|filter| !self.type_link.is_empty() && parse_filter(filter).is_ok());
        let filter = match (type_filter, self.filter.is_empty()) {
            (Some(type_filter), true) => Some(type_filter),
            (Some(type_filter), false) => Some(format!("{type_filter},{}", self.filter)),
            (None, false) => Some(self.filter.clone()),
            (None, true) => None,
        };
        if let Some(filter) = filter {
            params.push(("filter".to_owned(), filter));
        }
        if self.include_deleted {
            params.push(("include_deleted".to_owned(), "true".to_owned()));
        }
        if let Some(start) = &self.page_start {
            params.push(("page_start".to_owned(), start.clone()));
        }
        Ok(params)
    }

    /// The query string of this list from `page_start` (`None`: the first page).
    pub fn query(&self, page_start: Option<&str>) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if !self.type_link.is_empty() {
            query.append_pair("type", &self.type_link);
        }
        if !self.filter.is_empty() {
            query.append_pair("filter", &self.filter);
        }
        if !self.search.is_empty() {
            query.append_pair("search", &self.search);
        }
        query.append_pair("sort", &self.sort);
        if self.include_deleted {
            query.append_pair("include_deleted", "true");
        }
        if let Some(start) = page_start {
            query.append_pair("page_start", start);
        }
        query.finish()
    }
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// One link a record's content holds, as the record page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    /// Where in the content: `$['content']['note']`.
    pub path: String,
    /// What the link points to.
    pub kind: LinkKindView,
    /// The entity's name, the record's `entity / id`, the blob's file name.
    pub label: String,
    /// The linked entity.
    pub entity: String,
    /// The linked record's id (record and version links).
    pub record_id: Option<String>,
    /// The blob's hash, or the version's hash.
    pub hash: Option<String>,
    /// The blob's media type.
    pub media_type: Option<String>,
}

/// What kind of link a [`LinkView`] shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKindView {
    /// A link to an entity.
    Entity,
    /// A link to a record.
    Record,
    /// A link to one version of a record.
    Version,
    /// A link to a blob.
    Blob,
}

impl LinkView {
    /// The blob is an image a page may show (`<img>` runs no script, SVG included).
    pub fn is_image(&self) -> bool {
        self.kind == LinkKindView::Blob
            && self.media_type.as_deref().is_some_and(|media_type| {
                [
                    "image/png",
                    "image/jpeg",
                    "image/gif",
                    "image/webp",
                    "image/svg+xml",
                ]
                .contains(&media_type.split(';').next().unwrap_or_default().trim())
            })
    }
}

/// The links in a version's content (its envelope's links, the author and
/// the type, are shown apart), in path order, from its index entries.
pub fn content_links(entries: &[IndexEntry]) -> Vec<LinkView> {
    let in_content = |entry: &&IndexEntry| {
        entry.path.starts_with("$['content']") || entry.path.starts_with("$['no_content']")
    };
    let tag_at = |path: &str| {
        entries
            .iter()
            .find(|entry| entry.path == path)
            .and_then(|entry| entry.key.strip_prefix("t:"))
            .map(str::to_owned)
    };
    let mut links = Vec::new();
    for entry in entries.iter().filter(in_content) {
        let Some((kind, value)) = entry.key.split_once(':') else {
            continue;
        };
        let mut parts = value.split(' ');
        let (first, second, third) = (parts.next(), parts.next(), parts.next());
        let view = match (kind, first, second, third) {
            ("e", Some(entity), None, None) => LinkView {
                path: entry.path.clone(),
                kind: LinkKindView::Entity,
                label: entity.to_owned(),
                entity: entity.to_owned(),
                record_id: None,
                hash: None,
                media_type: None,
            },
            // A version link is indexed under `r:` too: shown once, as a version.
            ("r", Some(entity), Some(id), None)
                if !entries
                    .iter()
                    .any(|other| other.path == entry.path && other.key.starts_with("v:")) =>
            {
                LinkView {
                    path: entry.path.clone(),
                    kind: LinkKindView::Record,
                    label: format!("{entity} / {id}"),
                    entity: entity.to_owned(),
                    record_id: Some(id.to_owned()),
                    hash: None,
                    media_type: None,
                }
            }
            ("v", Some(entity), Some(id), Some(hash)) => LinkView {
                path: entry.path.clone(),
                kind: LinkKindView::Version,
                label: format!("{entity} / {id} at {}", &hash[..hash.len().min(12)]),
                entity: entity.to_owned(),
                record_id: Some(id.to_owned()),
                hash: Some(hash.to_owned()),
                media_type: None,
            },
            ("b", Some(hash), None, None) => LinkView {
                path: entry.path.clone(),
                kind: LinkKindView::Blob,
                label: tag_at(&format!("{}['name']", entry.path))
                    .unwrap_or_else(|| hash.to_owned()),
                entity: String::new(),
                record_id: None,
                hash: Some(hash.to_owned()),
                media_type: tag_at(&format!("{}['type']", entry.path)),
            },
            _ => continue,
        };
        links.push(view);
    }
    links
}

/// A record's permissions, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionWords {
    /// Who may read the record.
    pub read: String,
    /// Who may update or delete the record.
    pub write: String,
    /// Who is notified of its versions.
    pub notify: String,
}

/// What `permissions` let others do with a record of `author`'s.
pub fn permission_words(permissions: &Permissions) -> PermissionWords {
    let names = |links: &[crate::model::EntityLink]| -> String {
        links
            .iter()
            .map(|link| link.entity.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let with_author = |links: &[crate::model::EntityLink]| match links.is_empty() {
        true => "Only the author".to_owned(),
        false => format!("The author and {}", names(links)),
    };
    PermissionWords {
        read: match &permissions.read {
            None => "Only the author".to_owned(),
            Some(ReadPermission::Public) => "Everyone: the record is public".to_owned(),
            Some(ReadPermission::Entities(links)) => with_author(links),
        },
        write: match &permissions.write {
            None => "Only the author".to_owned(),
            Some(links) => with_author(links),
        },
        notify: match &permissions.notify {
            None => "Everyone who may read it".to_owned(),
            Some(links) if links.is_empty() => "No one".to_owned(),
            Some(links) => names(links),
        },
    }
}

/// What a version holds besides its envelope, as the edit form and the
/// differences show it: `permissions` and `content` (or `no_content`).
pub fn editable_json(record: &Record) -> Value {
    let mut object = serde_json::Map::new();
    let value = serde_json::to_value(record).unwrap_or(Value::Null);
    for name in ["permissions", "content", "no_content"] {
        if let Some(field) = value.get(name) {
            object.insert(name.to_owned(), field.clone());
        }
    }
    Value::Object(object)
}

/// JSON as the console shows it: two-space indents.
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The write body of the console's edit form: the typed JSON (an object
/// with `content`, and optionally `permissions`), with the parent the
/// form was made from as `version.parent_hash`, so that an edit made
/// meanwhile is a version conflict rather than overwritten.
pub fn update_body(typed: &str, parent_hash: &str) -> Result<Vec<u8>, String> {
    let mut value: Value =
        serde_json::from_str(typed).map_err(|error| format!("This is not JSON: {error}"))?;
    let Some(object) = value.as_object_mut() else {
        return Err("The record must be a JSON object with `content`.".to_owned());
    };
    object.remove("no_content");
    object.insert(
        "version".to_owned(),
        serde_json::json!({ "parent_hash": parent_hash }),
    );
    Ok(value.to_string().into_bytes())
}

/// The write body of a new record: the typed JSON object (`content`, and
/// optionally `permissions`) with the chosen type, `{entity}+{id}+{hash}`.
pub fn create_body(typed: &str, type_link: &str) -> Result<Vec<u8>, String> {
    let mut value: Value =
        serde_json::from_str(typed).map_err(|error| format!("This is not JSON: {error}"))?;
    let Some(object) = value.as_object_mut() else {
        return Err("The record must be a JSON object with `content`.".to_owned());
    };
    let mut parts = type_link.split('+');
    let (Some(entity), Some(record_id), Some(version_hash), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("Choose the record's type.".to_owned());
    };
    object.insert(
        "type".to_owned(),
        serde_json::json!({ "entity": entity, "record_id": record_id, "version_hash": version_hash }),
    );
    Ok(value.to_string().into_bytes())
}

/// The write body of a deletion with `action` (`delete`, `local` or
/// `leave`) from `parent_hash`.
pub fn delete_body(action: &str, parent_hash: &str) -> Vec<u8> {
    serde_json::json!({
        "version": { "parent_hash": parent_hash },
        "no_content": { "action": action },
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_filter_is_anded_with_the_type_and_its_errors_point_into_it() {
        let form = ListForm {
            type_link: "system.folio.dev+0123456789abcdef0123456789abcdef".into(),
            filter: "$['author']=alice.example".into(),
            sort: SORTS[0].0.into(),
            ..ListForm::default()
        };
        let params = form.api_params().expect("valid");
        let filter = params
            .iter()
            .find(|(name, _)| name == "filter")
            .expect("a filter");
        assert_eq!(
            filter.1,
            "$['type']=system.folio.dev+0123456789abcdef0123456789abcdef,$['author']=alice.example"
        );
        assert!(parse_filter(&filter.1).is_ok());
        // An "or" the person typed stays an "or" under the type's "and".
        let either = ListForm {
            filter: "($['author']=a.example,$['author']=b.example)".into(),
            ..form.clone()
        };
        let params = either.api_params().expect("valid");
        let filter = params
            .iter()
            .find(|(name, _)| name == "filter")
            .expect("a filter");
        let parsed = parse_filter(&filter.1).expect("parses");
        let crate::query::Filter::And(parts) = parsed else {
            panic!("an and: {parsed:?}")
        };
        assert!(matches!(parts[1], crate::query::Filter::Or(_)), "{parts:?}");
        let bad = ListForm {
            filter: "$['author']=alice.example,(".into(),
            ..form
        };
        let problem = bad.api_params().expect_err("refused");
        assert_eq!(
            format!("{}{}", problem.before, problem.after),
            "$['author']=alice.example,("
        );
        assert!(!problem.message.is_empty());
    }

    #[test]
    fn the_builders_condition_joins_the_filter_written_as_its_kind_needs() {
        let with = |filter: &str, path: &str, value: &str| {
            let query = form_urlencoded::Serializer::new(String::new())
                .append_pair("filter", filter)
                .append_pair("add_path", path)
                .append_pair("add_value", value)
                .finish();
            ListForm::from_query(&Form::from_query(&query)).filter
        };
        let label = "tag:$['content']['label']";
        assert_eq!(
            with("", label, "pinned"),
            "$['content']['label']=\"pinned\""
        );
        assert_eq!(
            with("", label, "\"as typed\""),
            "$['content']['label']=\"as typed\""
        );
        assert_eq!(
            with(
                "$['author']=a.example",
                "link:$['content']['person']",
                " bob.example "
            ),
            "$['author']=a.example,$['content']['person']=bob.example"
        );
        assert_eq!(
            with("", "link:$['content']['ref']", ""),
            "$['content']['ref']="
        );
        // A choice the page never offers adds nothing.
        assert_eq!(with("", "sql:$['content']['x']", "y"), "");
        assert_eq!(with("", "tag:title", "y"), "");
        assert_eq!(with("x", "", "y"), "x");
    }

    #[test]
    fn cells_show_text_links_and_lists_shortly() {
        use serde_json::json;
        assert_eq!(cell_text(&json!("a note")), "a note");
        assert_eq!(cell_text(&json!(7)), "7");
        assert_eq!(cell_text(&json!({"entity": "bob.example"})), "bob.example");
        assert_eq!(
            cell_text(
                &json!({"entity": "a.example", "record_id": "0123456789abcdef0123456789abcdef"})
            ),
            "a.example …abcdef"
        );
        assert_eq!(
            cell_text(&json!({"hash": "00", "type": "image/png", "name": "cat.png", "size": 3})),
            "cat.png"
        );
        assert_eq!(
            cell_text(&json!(["a", "b", "c", "d", "e"])),
            "a, b, c, 2 more"
        );
        assert_eq!(
            cell_text(&json!({"entity": "a.example", "record_id": "éééééé€"})),
            "a.example …ééééé€",
            "an object that only looks like a link is cut by characters"
        );
        assert_eq!(cell_text(&json!([])), "(none)");
        assert_eq!(cell_text(&json!("x".repeat(100))).chars().count(), 81);
        assert!(is_tag_sort("$['content']['label']+desc"));
        assert!(!is_tag_sort("$['content']['label']+sideways"));
        assert!(!is_tag_sort("title+asc"));
    }

    #[test]
    fn list_queries_round_trip_through_a_form() {
        let form = ListForm {
            type_link: "a.example+0123456789abcdef0123456789abcdef".into(),
            filter: "$['content']['tag']=a b+c".into(),
            search: "café + crème".into(),
            sort: BEST_MATCH.into(),
            include_deleted: true,
            page_start: None,
        };
        let query = form.query(Some("\"2026-01-01T00:00:00.000Z\"+00"));
        let back = ListForm::from_query(&Form::from_query(&query));
        assert_eq!(
            back.page_start.as_deref(),
            Some("\"2026-01-01T00:00:00.000Z\"+00")
        );
        assert_eq!(
            ListForm {
                page_start: None,
                ..back
            },
            form
        );
    }

    #[test]
    fn best_match_is_a_search_without_a_sort_and_nothing_without_words() {
        let form = |query: &str| ListForm::from_query(&Form::from_query(query));
        let params = form("search=milk&sort=best").api_params().expect("reads");
        assert!(params.iter().all(|(name, _)| name != "sort"), "{params:?}");
        assert!(params.contains(&("search".into(), "milk".into())));
        // Without words, best match is the default order.
        assert_eq!(form("sort=best").sort, SORTS[0].0);
    }

    #[test]
    fn a_type_that_is_no_record_link_selects_every_type() {
        let form = ListForm::from_query(&Form::from_query("type=abab%27"));
        let params = form.api_params().expect("no typed filter to refuse");
        assert!(
            params.iter().all(|(name, _)| name != "filter"),
            "{params:?}"
        );
    }

    #[test]
    fn an_unknown_sort_is_the_default() {
        let form = ListForm::from_query(&Form::from_query("sort=DROP"));
        assert_eq!(form.sort, SORTS[0].0);
    }

    #[test]
    fn content_links_name_each_link_once() {
        let entry = |path: &str, key: &str| IndexEntry {
            path: path.into(),
            key: key.into(),
        };
        let hash = "ab".repeat(32);
        let entries = vec![
            entry("$['author']", "e:alice.example"),
            entry("$['content']['friend']", "e:bob.example"),
            entry("$['content']['note']", "r:alice.example 0123"),
            entry("$['content']['note']", "x:alice.example 0123"),
            entry(
                "$['content']['pin']",
                &format!("v:alice.example 0123 {hash}"),
            ),
            entry("$['content']['pin']", "r:alice.example 0123"),
            entry("$['content']['photo']", &format!("b:{hash}")),
            entry("$['content']['photo']['name']", "t:cat.png"),
            entry("$['content']['photo']['type']", "t:image/png"),
            entry("$['content']['title']", "t:hello"),
        ];
        let links = content_links(&entries);
        let kinds: Vec<_> = links
            .iter()
            .map(|link| (link.path.as_str(), link.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("$['content']['friend']", LinkKindView::Entity),
                ("$['content']['note']", LinkKindView::Record),
                ("$['content']['pin']", LinkKindView::Version),
                ("$['content']['photo']", LinkKindView::Blob),
            ]
        );
        assert_eq!(links[3].label, "cat.png");
        assert!(links[3].is_image());
    }

    #[test]
    fn bodies_carry_the_parent_and_the_type() {
        let body =
            update_body(r#"{"content": {"a": 1}, "no_content": null}"#, "ff").expect("a body");
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["version"]["parent_hash"], "ff");
        assert!(body.get("no_content").is_none());
        assert!(update_body("[1]", "ff").is_err());
        assert!(update_body("{", "ff").is_err());
        let body = create_body(r#"{"content": {}}"#, "a.example+01+ff").expect("a body");
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["type"]["record_id"], "01");
        assert!(create_body(r#"{"content": {}}"#, "").is_err());
    }
}
