//! Whose a record in the owner's store is, as the console says it: its
//! author by their profile name, where the store got it from, what the
//! owner may do with it, and, when a change is refused, why, in words
//! for the owner (never a problem type's title, which speaks to an app).
//!
//! A store holds the owner's own records and copies of other people's
//! (received by notification, fetched to resolve a link). Only the
//! author writes versions of a record that federation carries: a version
//! the owner wrote of another's record would stay on this server alone,
//! and the two stores would differ for good. So the console edits and
//! deletes everywhere only the owner's own records; of another's it
//! offers only a local deletion (PROTOCOL.md §5, action `local`), which
//! removes the copy here and tells nobody.

use crate::auth::access::is_own_entity_record;
use crate::model::{DeletionAction, Entity, Record, RecordSource};
use crate::problem::ProblemType;
use crate::schema::builtin::SYSTEM_ENTITY;
use crate::write::WriteError;

/// A record's author as a page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorView {
    /// The author entity.
    pub entity: String,
    /// The profile name of the author's Entity record, when the store
    /// holds one that has a name.
    pub name: Option<String>,
    /// The console page of the author's Entity record, when the store
    /// holds it.
    pub href: Option<String>,
    /// Whether the author is the owner.
    pub own: bool,
}

impl AuthorView {
    /// The author of a record in `owner`'s store, named by the Entity
    /// record the store holds of them (`profile_name` and its console
    /// page), if any.
    pub fn new(author: &Entity, owner: &Entity, entity_record: Option<(String, String)>) -> Self {
        let (name, href) = match entity_record {
            Some((name, href)) => (Some(name), Some(href)),
            None => (None, None),
        };
        Self {
            entity: author.to_string(),
            name,
            href,
            own: author == owner,
        }
    }

    /// The author in a sentence: `you`, or `Alice (alice.example)`, or the
    /// entity alone when the store knows no name for it; the built-in
    /// records' author is the server.
    pub fn label(&self) -> String {
        match (&self.name, self.own) {
            (_, true) => "you".to_owned(),
            _ if self.entity == SYSTEM_ENTITY => format!("the server (built in: {SYSTEM_ENTITY})"),
            (Some(name), false) if *name != self.entity => format!("{name} ({})", self.entity),
            _ => self.entity.clone(),
        }
    }

    /// The author as a page's "Author" field: `You (bob.example)`, or the
    /// [`label`](Self::label) of another.
    pub fn field(&self) -> String {
        match self.own {
            true => format!("You ({})", self.entity),
            false => self.label(),
        }
    }

    /// Whose the record is, before a noun: `your`, or `Alice’s` (the
    /// profile name, else the entity).
    pub fn possessive(&self) -> String {
        match (&self.name, self.own) {
            (_, true) => "your".to_owned(),
            (Some(name), false) => format!("{name}’s"),
            (None, false) => format!("{}’s", self.entity),
        }
    }

    /// The author's short name: `Alice`, or the entity.
    fn short(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.entity)
    }
}

/// Where the store got a record from, in words (the wire name follows in
/// the page).
pub fn source_words(source: RecordSource, author: &AuthorView) -> String {
    if author.entity == SYSTEM_ENTITY {
        return "Built into this server".to_owned();
    }
    let of = author.label();
    match source {
        RecordSource::Own => "Written on this server".to_owned(),
        RecordSource::Notification => {
            format!("Received from the server of {of}, whom you have linked to")
        }
        RecordSource::NotificationUnknown => {
            format!("Received from the server of {of}, whom you have never linked to")
        }
        RecordSource::Resolution => {
            format!("Fetched from the server of {of}, to resolve a link")
        }
        RecordSource::Subscription => format!("Received through a subscription to {of}"),
        RecordSource::Proxy => format!("Fetched from the server of {of} for one request"),
    }
}

/// A deletion the record page offers: the form's `action` and its label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeletionChoice {
    /// The action posted (`delete`, `local` or `leave`).
    pub action: &'static str,
    /// What the radio button says.
    pub label: &'static str,
}

const DELETE_EVERYWHERE: DeletionChoice = DeletionChoice {
    action: "delete",
    label: "Delete it everywhere",
};
const DELETE_HERE: DeletionChoice = DeletionChoice {
    action: "local",
    label: "Delete it on this server only",
};
const LEAVE: DeletionChoice = DeletionChoice {
    action: "leave",
    label: "Leave it: stop taking part",
};

/// What the record page offers the owner for a record's latest version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// Whether the record may be edited.
    pub edit: bool,
    /// The deletions offered, the first chosen at first; none for a
    /// deleted record.
    pub deletions: Vec<DeletionChoice>,
}

impl Offer {
    /// What `owner` may do with `record` (its latest version) through the
    /// console: nothing with a tombstone or a built-in record; with their
    /// own Entity record, edit it (the server keeps all but its profile,
    /// and never deletes it); with another record of theirs, everything;
    /// with another entity's record, delete the copy here.
    pub fn for_record(record: &Record, owner: &Entity) -> Offer {
        let nothing = Offer {
            edit: false,
            deletions: Vec::new(),
        };
        if record.is_tombstone() || record.author.entity.as_str() == SYSTEM_ENTITY {
            return nothing;
        }
        if record.author.entity != *owner {
            return Offer {
                edit: false,
                deletions: vec![DELETE_HERE],
            };
        }
        if is_own_entity_record(record, owner) {
            return Offer {
                edit: true,
                deletions: Vec::new(),
            };
        }
        Offer {
            edit: true,
            deletions: vec![DELETE_EVERYWHERE, DELETE_HERE, LEAVE],
        }
    }
}

/// A change the owner asked the console for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Saving the edit form.
    Edit,
    /// Posting the delete form with this action.
    Delete(DeletionAction),
}

impl Attempt {
    /// The deletion a delete form's `action` names; `None` for a value that
    /// is no deletion action (the write refuses it as an invalid body).
    pub fn deletion(action: &str) -> Option<Attempt> {
        Some(Attempt::Delete(match action {
            "delete" => DeletionAction::Delete,
            "local" => DeletionAction::Local,
            "leave" => DeletionAction::Leave,
            _ => return None,
        }))
    }
}

/// Why the console did not make a change, as its page says it: for the
/// owner, naming whose record it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The page's title.
    pub title: String,
    /// What it says: what happened, and what the owner can do instead.
    pub text: String,
}

/// The refusal of `attempt` on a record `author` wrote (`what` names it:
/// its type's name, `message`), before any write: a record of another's
/// is theirs to edit, to delete everywhere and to leave (a version the
/// owner wrote would stay here alone); the copy here may be deleted.
/// `None` when the console lets the write transition decide.
pub fn refuse_before_writing(attempt: Attempt, author: &AuthorView, what: &str) -> Option<Refusal> {
    if author.own || author.entity == SYSTEM_ENTITY {
        return None;
    }
    let whose = author.possessive();
    let verb = match attempt {
        Attempt::Delete(DeletionAction::Local) => return None,
        Attempt::Edit => format!("edit {whose} {what}"),
        Attempt::Delete(DeletionAction::Delete) => format!("delete {whose} {what} everywhere"),
        Attempt::Delete(DeletionAction::Leave) => format!("leave {whose} {what}"),
    };
    let name = author.short();
    Some(Refusal {
        title: format!("You cannot {verb}: only its author can"),
        text: format!(
            "Nothing was changed. {} wrote it, and their server keeps it; this server holds \
             your copy. You can delete your copy on this server only: {name} and everyone \
             else keep theirs.",
            capitalized(&author.label()),
        ),
    })
}

/// The refusal of `attempt` by the write transition, in words for the
/// owner, for the errors that would otherwise be titled for an app (the
/// `auth/403-forbidden` family). `None` for the others, whose problem
/// titles read well to anyone.
pub fn refusal_of_write(
    attempt: Attempt,
    error: &WriteError,
    author: &AuthorView,
    what: &str,
) -> Option<Refusal> {
    let whose = author.possessive();
    let doing = match attempt {
        Attempt::Edit => format!("edit {whose} {what}"),
        Attempt::Delete(DeletionAction::Delete) => format!("delete {whose} {what} everywhere"),
        Attempt::Delete(DeletionAction::Local) => format!("delete {whose} {what} here"),
        Attempt::Delete(DeletionAction::Leave) => format!("leave {whose} {what}"),
    };
    let (title, text) = match error {
        WriteError::WriteNotPermitted(_) => (
            format!("You cannot {doing}: its permissions do not let you"),
            format!(
                "Nothing was changed. Only {} and those its permissions name may change it.",
                author.label()
            ),
        ),
        WriteError::OwnEntityRecord => (
            "Your profile stays yours".to_owned(),
            "Nothing was changed. Your Entity record tells other people and servers who you \
             are and where to reach you: it cannot be deleted, nor describe anyone else."
                .to_owned(),
        ),
        WriteError::ServerKept(field) => (
            format!("The server keeps `{field}` of your profile"),
            "Nothing was changed. You may change your profile's `profile` (your name); the \
             server writes the rest of your Entity record itself."
                .to_owned(),
        ),
        WriteError::BuiltinRecord => (
            "Built-in records cannot be changed".to_owned(),
            "Nothing was changed. This record comes with the server, the same on every server."
                .to_owned(),
        ),
        WriteError::TypeNotGranted => (
            format!("You cannot {doing}"),
            "Nothing was changed: this server does not let the console do this.".to_owned(),
        ),
        _ => return None,
    };
    Some(Refusal { title, text })
}

/// A problem type's title as a console page's title: the
/// `auth/403-forbidden` title speaks to an app, so the owner reads
/// another.
pub fn title_for_owner(kind: ProblemType) -> &'static str {
    match kind {
        ProblemType::Forbidden => "You cannot do this here",
        kind => kind.title(),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(name: &str) -> Entity {
        name.parse().expect("an entity")
    }

    fn alice_seen_by_bob(name: Option<&str>) -> AuthorView {
        AuthorView::new(
            &entity("alice.example"),
            &entity("bob.example"),
            name.map(|name| (name.to_owned(), "/bob/console/browse/x".to_owned())),
        )
    }

    #[test]
    fn another_author_is_named_by_profile_and_entity() {
        let alice = alice_seen_by_bob(Some("Alice"));
        assert_eq!(alice.label(), "Alice (alice.example)");
        assert_eq!(alice.field(), "Alice (alice.example)");
        assert_eq!(alice.possessive(), "Alice’s");
        let unnamed = alice_seen_by_bob(None);
        assert_eq!(unnamed.label(), "alice.example");
        assert_eq!(unnamed.possessive(), "alice.example’s");
        let bob = AuthorView::new(&entity("bob.example"), &entity("bob.example"), None);
        assert_eq!(bob.label(), "you");
        assert_eq!(bob.field(), "You (bob.example)");
    }

    #[test]
    fn sources_say_where_a_record_came_from() {
        let alice = alice_seen_by_bob(Some("Alice"));
        assert_eq!(
            source_words(RecordSource::NotificationUnknown, &alice),
            "Received from the server of Alice (alice.example), whom you have never linked to"
        );
        let bob = AuthorView::new(&entity("bob.example"), &entity("bob.example"), None);
        assert_eq!(
            source_words(RecordSource::Own, &bob),
            "Written on this server"
        );
        let system = AuthorView::new(&entity(SYSTEM_ENTITY), &entity("bob.example"), None);
        assert_eq!(system.label(), "the server (built in: system.folio.dev)");
        assert_eq!(
            source_words(RecordSource::Resolution, &system),
            "Built into this server"
        );
    }

    #[test]
    fn the_record_page_offers_what_the_owner_may_do() {
        use crate::model::{NoContent, Permissions, RecordBody};
        use crate::schema::builtin::BuiltinType;
        use crate::schema::provisional_record;
        let bob = entity("bob.example");
        let record = |author: &str, builtin: BuiltinType, content: serde_json::Value| {
            let content = content.as_object().cloned().unwrap_or_default();
            provisional_record(
                entity(author),
                builtin.link(),
                Permissions::default(),
                content,
            )
        };
        let actions = |offer: &Offer| -> Vec<&str> {
            offer.deletions.iter().map(|choice| choice.action).collect()
        };
        let own = Offer::for_record(
            &record("bob.example", BuiltinType::Type, serde_json::json!({})),
            &bob,
        );
        assert!(own.edit);
        assert_eq!(actions(&own), ["delete", "local", "leave"]);
        let alices = Offer::for_record(
            &record("alice.example", BuiltinType::Type, serde_json::json!({})),
            &bob,
        );
        assert!(!alices.edit);
        assert_eq!(actions(&alices), ["local"]);
        let profile = Offer::for_record(
            &record(
                "bob.example",
                BuiltinType::Entity,
                serde_json::json!({"entity": "bob.example"}),
            ),
            &bob,
        );
        assert!(profile.edit);
        assert!(profile.deletions.is_empty());
        let builtin = Offer::for_record(
            &record(SYSTEM_ENTITY, BuiltinType::Type, serde_json::json!({})),
            &bob,
        );
        assert_eq!(
            builtin,
            Offer {
                edit: false,
                deletions: Vec::new()
            }
        );
        let mut deleted = record("alice.example", BuiltinType::Type, serde_json::json!({}));
        deleted.body = RecordBody::Tombstone(NoContent {
            action: DeletionAction::Local,
            links: Vec::new(),
        });
        assert_eq!(Offer::for_record(&deleted, &bob), builtin);
    }

    #[test]
    fn another_entitys_record_is_only_deleted_here() {
        let alice = alice_seen_by_bob(Some("Alice"));
        for attempt in [
            Attempt::Edit,
            Attempt::Delete(DeletionAction::Delete),
            Attempt::Delete(DeletionAction::Leave),
        ] {
            let refusal = refuse_before_writing(attempt, &alice, "message").expect("refused");
            assert!(
                refusal.title.ends_with(": only its author can"),
                "{refusal:?}"
            );
            assert!(!refusal.title.contains("app"), "{refusal:?}");
        }
        assert_eq!(
            refuse_before_writing(Attempt::Edit, &alice, "message")
                .expect("refused")
                .title,
            "You cannot edit Alice’s message: only its author can"
        );
        assert_eq!(
            refuse_before_writing(Attempt::Delete(DeletionAction::Local), &alice, "message"),
            None
        );
        let own = AuthorView::new(&entity("bob.example"), &entity("bob.example"), None);
        assert_eq!(refuse_before_writing(Attempt::Edit, &own, "message"), None);
    }

    #[test]
    fn forbidden_writes_are_titled_for_the_owner() {
        let alice = alice_seen_by_bob(Some("Alice"));
        let key = crate::write::RecordKey::new(
            entity("alice.example"),
            crate::model::RecordId::from_bytes([7; 16]),
        );
        for error in [
            WriteError::WriteNotPermitted(key),
            WriteError::OwnEntityRecord,
            WriteError::ServerKept("servers"),
            WriteError::BuiltinRecord,
            WriteError::TypeNotGranted,
        ] {
            let refusal =
                refusal_of_write(Attempt::Edit, &error, &alice, "message").expect("in words");
            assert!(
                !refusal.title.contains("app") && !refusal.text.contains("app"),
                "{error:?}: {refusal:?}"
            );
        }
        assert_eq!(
            refusal_of_write(
                Attempt::Edit,
                &WriteError::UpdateMissingContent,
                &alice,
                "message"
            ),
            None
        );
    }
}
