//! The consent pages' HTML (templates in `core/templates/consent/`, escaped
//! by askama). They work without JavaScript and read well on a phone; every
//! control has a label, and the focus order is the reading order.

use askama::Template;

use super::{AppRequest, scope_value};
use crate::model::RecordLink;
use crate::schema::RecordType;

/// One checkbox of the consent form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeItem {
    /// The form field: `read`, `write` or `subscribe`.
    pub kind: &'static str,
    /// What the grant lets the app do, as the page says it.
    pub verb: &'static str,
    /// The Type record's name (its record id when the store has no such type).
    pub type_name: String,
    /// Who wrote the type and its fields, so a person can tell it from
    /// another of the same name.
    pub identity: Option<String>,
    /// `{entity} {record_id}` of the Type record.
    pub value: String,
    /// What the grant means, in plain words, where its type's name does not
    /// say it (the built-in types a person has never heard of).
    pub meaning: Option<&'static str>,
}

/// What granting `kind` (`read`, `write` or `subscribe`) on the built-in
/// type `link` names means to the person asked. Entity records are the
/// one that matters: an app that may write them changes the person's
/// public profile, never the identity their server keeps
/// ([`SERVER_KEPT_ENTITY_FIELDS`](crate::auth::access::SERVER_KEPT_ENTITY_FIELDS)).
fn builtin_meaning(kind: &str, link: &RecordLink) -> Option<&'static str> {
    use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY};
    if link.entity.as_str() != SYSTEM_ENTITY {
        return None;
    }
    let builtin = BuiltinType::ALL
        .into_iter()
        .find(|builtin| builtin.record_id() == link.record_id)?;
    Some(match (builtin, kind) {
        (BuiltinType::Entity, "write") => {
            "Entity records are profiles: yours (the name other people and servers see) and those \
             of the people you know. The app could change your name and delete the profiles of \
             others; it could not change who you are, which server speaks for you or the keys it \
             signs with: only your server does."
        }
        (BuiltinType::Entity, _) => {
            "Entity records are public profiles: yours and those of the people you know."
        }
        (BuiltinType::Type, "write") => {
            "Type records describe the kinds of records your apps keep; the app could add and \
             change them, which changes what other apps may store."
        }
        (BuiltinType::Type, _) => "Type records describe the kinds of records your apps keep.",
        (BuiltinType::App, _) => "App records describe the apps you use.",
        (BuiltinType::AppAuthorization, _) => {
            "App Authorization records say what each of your apps may do; only you change them, \
             here."
        }
        (BuiltinType::Credentials, _) => "Credentials records are never shown to apps.",
    })
}

/// A Type record as the consent page names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeLabel {
    /// Its `name`.
    pub name: String,
    /// Who wrote it and its fields (`by alice.example; fields title, body`).
    pub identity: Option<String>,
}

impl TypeLabel {
    /// The label of a Type record: its name, author and top-level fields.
    pub fn of(record: &crate::model::Record) -> Option<Self> {
        let name = record.content_text("/name")?.to_owned();
        let fields = record
            .content()
            .and_then(|content| RecordType::from_content(content.as_value()).ok())
            .map(|record_type| record_type.schema.content_fields().join(", "))
            .unwrap_or_default();
        let author = &record.author.entity;
        let identity = match fields.is_empty() {
            true => format!("by {author}"),
            false => format!("by {author}; fields {fields}"),
        };
        Some(TypeLabel {
            name,
            identity: Some(identity),
        })
    }
}

/// The checkboxes for what an app asks for; `label` names each Type
/// record (the host looked them up).
pub fn scope_items(
    app: &AppRequest,
    label: impl Fn(&RecordLink) -> Option<TypeLabel>,
) -> Vec<ScopeItem> {
    let kinds: [(&'static str, &'static str, &[RecordLink]); 3] = [
        ("read", "Read", &app.scope.read),
        ("write", "Read, create, change and delete", &app.scope.write),
        ("subscribe", "Watch for changes to", &app.scope.subscribe),
    ];
    kinds
        .into_iter()
        .flat_map(|(kind, verb, links)| links.iter().map(move |link| (kind, verb, link)))
        .map(|(kind, verb, link)| {
            let label = label(link);
            ScopeItem {
                kind,
                verb,
                type_name: (label.as_ref().map(|l| l.name.clone()))
                    .unwrap_or_else(|| link.record_id.to_string()),
                identity: label.and_then(|l| l.identity),
                value: scope_value(link),
                meaning: builtin_meaning(kind, link),
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "consent/sign_in.html")]
struct SignInPage<'a> {
    user: &'a str,
    action: &'a str,
    csrf: &'a str,
    error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "consent/consent.html")]
struct ConsentPage<'a> {
    user: &'a str,
    action: &'a str,
    csrf: &'a str,
    app: &'a AppRequest,
    website: Option<&'a str>,
    icon_url: Option<&'a str>,
    items: &'a [ScopeItem],
}

#[derive(Template)]
#[template(path = "consent/message.html")]
struct MessagePage<'a> {
    title: &'a str,
    message: &'a str,
}

/// Rendering fails only if writing to a `String` fails, which it does not;
/// the fallback keeps that impossible case from becoming a panic.
fn render(page: &impl Template) -> String {
    page.render().unwrap_or_else(|_| {
        String::from("<!doctype html><title>Folio</title><p>This page could not be shown.")
    })
}

/// The sign-in page: the password field, and `error` above it after a failed attempt.
/// `action` is the page's own path.
pub fn sign_in_page(user: &str, action: &str, csrf: &str, error: Option<&str>) -> String {
    render(&SignInPage {
        user,
        action,
        csrf,
        error,
    })
}

/// The consent page of a signed-in owner.
pub fn consent_page(
    user: &str,
    action: &str,
    csrf: &str,
    app: &AppRequest,
    icon_url: Option<&str>,
    items: &[ScopeItem],
) -> String {
    render(&ConsentPage {
        user,
        action,
        csrf,
        app,
        website: app.website_link(),
        icon_url,
        items,
    })
}

/// A page that only says something: not found, refused, too many attempts.
pub fn message_page(title: &str, message: &str) -> String {
    render(&MessagePage { title, message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::apps::Scope;
    use crate::model::RecordId;

    #[test]
    fn the_sign_in_page_escapes_and_labels() {
        let page = sign_in_page("<me>", "/me/auth/x", "tok\"en", Some("Wrong password"));
        assert!(page.contains("&#60;me&#62;") || page.contains("&lt;me&gt;"));
        assert!(!page.contains("tok\"en"));
        assert!(page.contains(r#"<label for="password">Password</label>"#));
        assert!(page.contains(r#"role="alert""#));
    }

    #[test]
    fn the_consent_page_lists_each_item_checked() {
        let link = RecordLink {
            entity: "alice.example".parse().expect("an entity"),
            original_entity: None,
            record_id: RecordId::from_bytes([2; 16]),
        };
        let app = AppRequest {
            id: RecordId::from_bytes([1; 16]),
            name: "Notes <b>".into(),
            description: Some("Takes notes".into()),
            website: Some("javascript:alert(1)".into()),
            icon: None,
            redirect: "https://app.example/".into(),
            scope: Scope {
                read: vec![link.clone()],
                write: vec![],
                subscribe: vec![link],
            },
        };
        let items = scope_items(&app, |_| {
            Some(TypeLabel {
                name: "note".into(),
                identity: None,
            })
        });
        let page = consent_page("alice", "/alice/auth/x", "t", &app, None, &items);
        assert_eq!(page.matches(r#"type="checkbox""#).count(), 2);
        assert!(page.contains(&format!(
            r#"name="read" value="alice.example {}" checked"#,
            RecordId::from_bytes([2; 16])
        )));
        assert!(page.contains(&format!(
            r#"name="subscribe" value="alice.example {}" checked"#,
            RecordId::from_bytes([2; 16])
        )));
        assert_eq!(page.matches(r#"" checked>"#).count(), 2);
        assert!(!page.contains("<b>"));
        assert!(!page.contains("javascript:"), "only web links are shown");
        assert!(page.contains(r#"value="approve">Allow</button>"#));
        assert!(page.contains(r#"value="deny">Deny</button>"#));
    }

    #[test]
    fn a_grant_to_write_entity_records_says_it_cannot_change_who_you_are() {
        use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY};
        let entity = RecordLink {
            entity: SYSTEM_ENTITY.parse().expect("an entity"),
            original_entity: None,
            record_id: BuiltinType::Entity.record_id(),
        };
        let app = AppRequest {
            id: RecordId::from_bytes([1; 16]),
            name: "Profile editor".into(),
            description: None,
            website: None,
            icon: None,
            redirect: "https://app.example/".into(),
            scope: Scope {
                read: vec![],
                write: vec![entity],
                subscribe: vec![],
            },
        };
        let items = scope_items(&app, |_| {
            Some(TypeLabel {
                name: "entity".into(),
                identity: None,
            })
        });
        let page = consent_page("alice", "/alice/auth/x", "t", &app, None, &items);
        assert!(page.contains("could change your name"), "{page}");
        assert!(
            page.contains("could not change who you are, which server speaks for you or the keys it signs with"),
            "{page}"
        );
    }
}
