//! The phases of a write: reading the record and its types, replays,
//! validation, link checks and tombstones. Each phase reads the answers so
//! far and either asks for more, moves on, or decides.

use super::build::{self, Fields, Stamp, Types};
use super::cascade::{Cascade, stored_tombstone};
use super::error::{LinkFault, Unresolved, WriteError};
use super::links;
use super::needs::{Asker, Fetched, Need, RecordKey};
use super::request::{Create, Operation, Receive, Update};
use super::{Commit, NewVersion, WriteContext};
use crate::auth::access::{is_own_entity_record, is_type, server_kept_change};
use crate::model::{
    DeletionAction, Entity, EntityLink, LinkPath, Permission, Permissions, ReceivedRecord, Record,
    RecordBody, RecordDate, RecordSource, VersionHash, VersionLink,
};
use crate::schema::builtin::BuiltinType;
use crate::schema::{RecordType, Validated};
use crate::service::federation::notify::audience_needs_links;
use crate::service::federation::recipients;

/// What the phases read: the request, its context, and every answer so far.
#[derive(Debug)]
pub(super) struct Env {
    pub(super) operation: Operation,
    pub(super) context: WriteContext,
    /// The record written.
    pub(super) key: RecordKey,
    pub(super) fetched: Fetched,
    /// The user's server writes this itself ([`WriteRequest::by_server`](super::WriteRequest::by_server)).
    pub(super) by_server: bool,
}

#[derive(Debug)]
pub(super) enum Phase {
    /// Read the record and the types the request names.
    Start,
    /// An update or deletion that may be a replay on `parent_hash`: rebuild
    /// the version it would have made.
    Replay {
        parent_hash: VersionHash,
        otherwise: WriteError,
    },
    /// Is a version with this hash stored? Then it is a replay; else `otherwise`.
    ReplayLookup {
        hash: VersionHash,
        otherwise: WriteError,
    },
    /// Validate a new live version against its type.
    Validate {
        candidate: Box<ReceivedRecord>,
        replaces: Option<VersionHash>,
    },
    /// Run the store checks of a validated version.
    Links(Box<(NewVersion, Validated)>),
    /// Replace the latest version with a tombstone.
    Tombstone(DeletionAction),
    /// Delete the records that depend on the deleted ones.
    Cascade(Box<Cascade>),
    /// The host broke the calling contract; the next step reports it.
    Failed(WriteError),
    /// The write is decided and its result handed out.
    Spent,
}

pub(super) enum Advance {
    Next(Phase),
    Ask(Phase, Vec<Need>),
    Done(Result<Commit, WriteError>),
}

pub(super) fn fail(error: WriteError) -> Advance {
    Advance::Done(Err(error))
}

impl Env {
    pub(super) fn advance(&self, types: &mut Types, phase: Phase) -> Advance {
        match phase {
            Phase::Start => match &self.operation {
                Operation::Create(create) => self.start_create(create),
                Operation::Receive(receive) => self.receive(types, receive),
                _ => self.start_existing(),
            },
            Phase::Replay {
                parent_hash,
                otherwise,
            } => self.replay(types, parent_hash, otherwise),
            Phase::ReplayLookup { hash, otherwise } => self.replay_lookup(hash, otherwise),
            Phase::Validate {
                candidate,
                replaces,
            } => self.validate(types, candidate, replaces),
            Phase::Links(checked) => self.check_links(checked),
            Phase::Tombstone(action) => self.tombstone(types, action),
            Phase::Cascade(cascade) => self.cascade(types, cascade),
            Phase::Failed(error) => fail(error),
            Phase::Spent => fail(WriteError::HostContract("step after Done")),
        }
    }

    pub(super) fn ask(&self) -> Asker<'_> {
        Asker::new(&self.fetched, &self.context.user)
    }

    /// The stamp of the version this request writes.
    fn stamp(&self) -> Stamp {
        let now = self.context.now;
        let given = match &self.operation {
            Operation::Create(create) => create.created_at,
            Operation::Update(_, update) => update.created_at,
            Operation::Delete(_, delete) => delete.created_at,
            Operation::Receive(receive) => Some(receive.record.version.created_at),
        };
        Stamp {
            author: EntityLink::new(self.context.user.clone()),
            created_at: given.unwrap_or(now.truncated_to_millis()),
            received_at: RecordDate::received_after(
                self.context.received_at,
                self.context.last_received_at,
            ),
        }
    }

    /// The latest version of the record written, once fetched.
    fn latest(&self) -> Option<&Record> {
        self.ask().latest(&self.key).flatten()
    }

    fn start_create(&self, create: &Create) -> Advance {
        let access = &self.context.access;
        if access.entity().is_none() {
            return fail(WriteError::Unauthenticated);
        }
        if create
            .author
            .as_ref()
            .is_some_and(|a| *a != self.context.user)
        {
            let user = &self.context.user;
            return fail(WriteError::InvalidBody(format!(
                "the body's `author` is not the user's entity {user}"
            )));
        }
        if !access.can_write(&create.type_link, &self.key.record_id) {
            return fail(WriteError::TypeNotGranted);
        }
        let mut ask = self.ask();
        // A fresh id is 128 random bits: only a chosen one can be taken.
        let existing = match create.id {
            Some(_) => ask.latest(&self.key),
            None => Some(None),
        };
        // Asked now so that validation need not wait another round.
        ask.linked_version(&create.type_link);
        if ask.has_missing() {
            return Advance::Ask(Phase::Start, ask.into_missing());
        }
        let permissions = new_record_permissions(&create.type_link, create.permissions.clone());
        let fields = Fields {
            permissions,
            type_link: create.type_link.clone(),
            body: build::live(&create.content),
        };
        let candidate = build::first_version(self.key.record_id, &self.stamp(), fields);
        // Only the server creates the record discovery serves: a second
        // one from an app would put its `signing_keys` beside the server's.
        if !self.by_server && is_own_entity_record(&candidate, &self.context.user) {
            return fail(WriteError::ServerKept("entity"));
        }
        match existing.flatten() {
            None => Advance::Next(Phase::Validate {
                candidate: Box::new(candidate),
                replaces: None,
            }),
            // Without `created_at`, the version hash holds the current time:
            // no replay can match.
            Some(_) if create.created_at.is_none() => {
                fail(WriteError::IdConflict(self.key.record_id))
            }
            Some(_) => Advance::Next(Phase::ReplayLookup {
                hash: candidate.version.hash,
                otherwise: WriteError::IdConflict(self.key.record_id),
            }),
        }
    }

    /// The first phase of an update or deletion.
    fn start_existing(&self) -> Advance {
        let access = &self.context.access;
        if access.entity().is_none() {
            return fail(WriteError::Unauthenticated);
        }
        if self.key.is_builtin() {
            return fail(WriteError::BuiltinRecord);
        }
        let mut ask = self.ask();
        let latest = ask.latest(&self.key);
        if let Operation::Update(
            _,
            Update {
                type_link: Some(type_link),
                ..
            },
        ) = &self.operation
        {
            ask.linked_version(type_link);
        }
        if ask.has_missing() {
            return Advance::Ask(Phase::Start, ask.into_missing());
        }
        let Some(latest) = latest.flatten().filter(|r| access.can_read(r)) else {
            return fail(WriteError::NotFound(self.key.clone()));
        };

        let (parent_hash, replayable) = match &self.operation {
            Operation::Update(_, update) => (update.parent_hash, update.replayable_parent()),
            Operation::Delete(_, delete) => (delete.parent_hash, delete.replayable_parent()),
            Operation::Create(_) | Operation::Receive(_) => (None, None),
        };
        let not_a_replay = if latest.is_tombstone() {
            WriteError::Deleted(self.key.clone())
        } else {
            WriteError::VersionConflict {
                latest: latest.version.hash,
            }
        };
        if let Some(parent_hash) = replayable.filter(|&p| p != latest.version.hash) {
            return Advance::Next(Phase::Replay {
                parent_hash,
                otherwise: not_a_replay,
            });
        }
        if latest.is_tombstone() || parent_hash.is_some_and(|p| p != latest.version.hash) {
            return fail(not_a_replay);
        }

        match &self.operation {
            Operation::Update(_, update) => {
                let candidate = self.updated(latest, update);
                if let Err(error) = self.check_write(latest, &candidate) {
                    return fail(error);
                }
                let user = &self.context.user;
                if is_own_entity_record(latest, user) {
                    if !is_own_entity_record(&candidate, user) {
                        return fail(WriteError::OwnEntityRecord);
                    }
                    if let Some(field) =
                        server_kept_change(latest, &candidate).filter(|_| !self.by_server)
                    {
                        return fail(WriteError::ServerKept(field));
                    }
                }
                Advance::Next(Phase::Validate {
                    candidate: Box::new(candidate),
                    replaces: Some(latest.version.hash),
                })
            }
            Operation::Delete(_, delete) => {
                if is_own_entity_record(latest, &self.context.user) {
                    return fail(WriteError::OwnEntityRecord);
                }
                let allowed = match delete.action {
                    DeletionAction::Delete => self.check_write(latest, latest),
                    DeletionAction::Local | DeletionAction::Leave if access.can_forget(latest) => {
                        Ok(())
                    }
                    DeletionAction::Local | DeletionAction::Leave => {
                        Err(WriteError::TypeNotGranted)
                    }
                };
                match allowed {
                    Ok(()) => Advance::Next(Phase::Tombstone(delete.action)),
                    Err(error) => fail(error),
                }
            }
            Operation::Create(_) | Operation::Receive(_) => {
                fail(WriteError::HostContract("a create past its start"))
            }
        }
    }

    /// May the user replace `latest` with `next`? The record's permissions
    /// must let it write, and an app's grant must cover both types.
    fn check_write(&self, latest: &Record, next: &Record) -> Result<(), WriteError> {
        let access = &self.context.access;
        if !latest
            .permissions
            .grants(&latest.author.entity, &self.context.user, Permission::Write)
        {
            return Err(WriteError::WriteNotPermitted(self.key.clone()));
        }
        let id = &self.key.record_id;
        if !access.can_write(&latest.type_link, id) || !access.can_write(&next.type_link, id) {
            return Err(WriteError::TypeNotGranted);
        }
        Ok(())
    }

    /// The version an update makes on `parent`: its permissions and type
    /// unless the body gives others.
    fn updated(&self, parent: &Record, update: &Update) -> ReceivedRecord {
        let fields = Fields {
            permissions: (update.permissions.clone()).unwrap_or_else(|| parent.permissions.clone()),
            type_link: (update.type_link.clone()).unwrap_or_else(|| parent.type_link.clone()),
            body: build::live(&update.content),
        };
        build::next_version(parent, &self.stamp(), fields)
    }

    fn replay(
        &self,
        types: &mut Types,
        parent_hash: VersionHash,
        otherwise: WriteError,
    ) -> Advance {
        let mut ask = self.ask();
        let parent = ask.version(&self.key, &parent_hash);
        if ask.has_missing() {
            let phase = Phase::Replay {
                parent_hash,
                otherwise,
            };
            return Advance::Ask(phase, ask.into_missing());
        }
        let Some(parent) = parent.flatten() else {
            return fail(otherwise);
        };
        let candidate = match &self.operation {
            Operation::Update(_, update) => self.updated(parent, update),
            Operation::Delete(_, delete) if !parent.is_tombstone() => {
                let type_record = ask.linked_version(&parent.type_link);
                if ask.has_missing() {
                    let phase = Phase::Replay {
                        parent_hash,
                        otherwise,
                    };
                    return Advance::Ask(phase, ask.into_missing());
                }
                let tombstone = types
                    .get(&parent.type_link, type_record.flatten())
                    .ok()
                    .and_then(|t| build::tombstone(parent, t, &self.stamp(), delete.action).ok());
                match tombstone {
                    Some(tombstone) => tombstone.record,
                    None => return fail(otherwise),
                }
            }
            _ => return fail(otherwise),
        };
        Advance::Next(Phase::ReplayLookup {
            hash: candidate.version.hash,
            otherwise,
        })
    }

    fn replay_lookup(&self, hash: VersionHash, otherwise: WriteError) -> Advance {
        if let Some(latest) = self.latest().filter(|r| r.version.hash == hash) {
            return Advance::Done(Ok(Commit::Replay(Box::new(latest.clone()))));
        }
        let mut ask = self.ask();
        match ask.version(&self.key, &hash) {
            None => Advance::Ask(Phase::ReplayLookup { hash, otherwise }, ask.into_missing()),
            Some(Some(stored)) => Advance::Done(Ok(Commit::Replay(Box::new(stored.clone())))),
            Some(None) => fail(otherwise),
        }
    }

    fn validate(
        &self,
        types: &mut Types,
        candidate: Box<ReceivedRecord>,
        replaces: Option<VersionHash>,
    ) -> Advance {
        let mut ask = self.ask();
        let type_record = ask.linked_version(&candidate.type_link);
        // The version an update replaces, when its recipients depend on its
        // content links: validated with its own type to find them.
        let parent = replaces
            .and_then(|_| self.latest())
            .filter(|parent| audience_needs_links(parent));
        let parent_type = parent.map(|parent| ask.linked_version(&parent.type_link));
        if ask.has_missing() {
            let phase = Phase::Validate {
                candidate,
                replaces,
            };
            return Advance::Ask(phase, ask.into_missing());
        }
        let Some(type_record) = type_record else {
            return fail(WriteError::HostContract(
                "a type asked for was not supplied",
            ));
        };
        let former_audience = match replaces.and_then(|_| self.latest()) {
            None => Vec::new(),
            Some(parent) => match self.audience(types, parent, parent_type.flatten().flatten()) {
                Ok(audience) => audience,
                Err(error) => return fail(error),
            },
        };
        let record_type = match type_of(types, &candidate.type_link, type_record) {
            Ok(record_type) => record_type,
            Err(error) => return fail(error),
        };
        // A Type record's own schema must compile (its shape and public
        // permissions are the Type type's schema, checked below).
        if is_type(&candidate.type_link, BuiltinType::Type)
            && let Some(content) = candidate.content()
            && let Err(fault) = RecordType::from_content(content.as_value())
        {
            return fail(WriteError::InvalidSchema(fault));
        }
        match record_type.schema.validate(&candidate) {
            Ok(validated) => {
                let version = NewVersion {
                    record: *candidate,
                    links: Vec::new(),
                    search_text: String::new(),
                    replaces,
                    former_audience,
                };
                Advance::Next(Phase::Links(Box::new((version, validated))))
            }
            Err(violation) => fail(WriteError::SchemaViolation(violation)),
        }
    }

    /// The entities `parent`, a stored version the user wrote, concerned
    /// ([`recipients`]); `parent_type` is its Type record when its
    /// content links count ([`audience_needs_links`]), found by the store.
    fn audience(
        &self,
        types: &mut Types,
        parent: &Record,
        parent_type: Option<&Record>,
    ) -> Result<Vec<Entity>, WriteError> {
        let user = &self.context.user;
        if !audience_needs_links(parent) {
            return Ok(recipients(user, parent, &[]));
        }
        let unusable = |reason: String| WriteError::StoredRecordUnusable {
            record: RecordKey::of(parent),
            reason,
        };
        let parent_type = types
            .get(&parent.type_link, parent_type)
            .map_err(unusable)?;
        let validated = parent_type
            .schema
            .validate(parent)
            .map_err(|violation| unusable(violation.to_string()))?;
        Ok(recipients(user, parent, &validated.links))
    }

    fn check_links(&self, checked: Box<(NewVersion, Validated)>) -> Advance {
        let mut ask = self.ask();
        match links::check_links(&mut ask, &self.context.access, &checked.1) {
            None => Advance::Ask(Phase::Links(checked), ask.into_missing()),
            Some(Err(error)) => fail(error),
            Some(Ok(())) => {
                let (mut written, validated) = *checked;
                written.links = validated.links;
                written.search_text = validated.search_text;
                Advance::Done(Ok(Commit::Store {
                    written: Box::new(written),
                    cascaded: Vec::new(),
                }))
            }
        }
    }

    /// A tombstone's links are not checked against the store: they repeat
    /// the last live version's, whose targets may be gone by now (a cascade
    /// deletes the target before its dependants).
    fn tombstone(&self, types: &mut Types, action: DeletionAction) -> Advance {
        let mut ask = self.ask();
        let Some(Some(latest)) = ask.latest(&self.key) else {
            return fail(WriteError::HostContract("the latest version vanished"));
        };
        let type_record = ask.linked_version(&latest.type_link);
        if action == DeletionAction::Delete {
            // Asked now so that the cascade need not wait another round.
            ask.dependants(&self.key);
        }
        if ask.has_missing() {
            return Advance::Ask(Phase::Tombstone(action), ask.into_missing());
        }
        let written =
            match stored_tombstone(types, latest, type_record.flatten(), &self.stamp(), action) {
                Ok(written) => written,
                Err(error) => return fail(error),
            };
        if action != DeletionAction::Delete {
            return Advance::Done(Ok(Commit::Store {
                written: Box::new(written),
                cascaded: Vec::new(),
            }));
        }
        let cascade = Cascade::new(written, self.key.clone(), &self.context.user, false);
        Advance::Next(Phase::Cascade(Box::new(cascade)))
    }
}

impl Env {
    /// A version another server's entity wrote: stored if it continues the
    /// chain the store holds and its type validates it.
    fn receive(&self, types: &mut Types, receive: &Receive) -> Advance {
        let record = &receive.record;
        if self.key.is_builtin() {
            return fail(WriteError::NotReceivable(
                "built-in records are never received".into(),
            ));
        }
        if record.author.entity == self.context.user {
            return fail(WriteError::NotReceivable(format!(
                "{} is this user's own entity",
                record.author.entity
            )));
        }
        if record.version.author != record.author {
            return fail(WriteError::NotReceivable(format!(
                "version {} is by {}, not the record's author",
                record.version.hash, record.version.author.entity
            )));
        }
        if let Some(kind) = crate::auth::apps::users_own_type(record) {
            return fail(WriteError::NotReceivable(format!(
                "{} records count only as the user's own; {}'s is not stored",
                kind.name(),
                record.author.entity
            )));
        }
        let mut ask = self.ask();
        let latest = ask.latest(&self.key);
        let stored = ask.version(&self.key, &record.version.hash);
        let type_record = ask.linked_version(&record.type_link);
        let parent = match (record.version.parent_hash, latest) {
            (Some(parent), Some(Some(latest))) if latest.version.hash != parent => {
                Some(ask.version(&self.key, &parent))
            }
            _ => None,
        };
        if ask.has_missing() {
            return Advance::Ask(Phase::Start, ask.into_missing());
        }
        if let Some(stored) = stored.flatten() {
            return Advance::Done(Ok(Commit::Replay(Box::new(stored.clone()))));
        }
        let latest = latest.flatten();
        // The user deleted the record here: whatever its author writes
        // next is received and not kept, and the record stays deleted;
        // unless the record was shared again after the user's access ended.
        let deleted_here = latest.filter(|l| l.is_deleted_here_by(&self.context.user));
        let replaces = match (deleted_here, receive.shared_again) {
            (Some(deleted), false) => {
                return Advance::Done(Ok(Commit::Replay(Box::new(deleted.clone()))));
            }
            (Some(deleted), true) => Some(deleted.version.hash),
            (None, _) => match replaced_by_received(receive, latest, parent) {
                Ok(replaces) => replaces,
                Err(error) => return fail(error),
            },
        };
        let record_type = match type_of(types, &record.type_link, type_record.flatten()) {
            Ok(record_type) => record_type,
            Err(error) => return fail(error),
        };
        let (links, search_text) = match record_type.schema.validate(record) {
            Ok(validated) => (validated.links, validated.search_text),
            Err(violation) => return fail(WriteError::SchemaViolation(violation)),
        };
        // A version of a record the store holds continues what the user
        // was sent before: its author's server owes it to the readers of
        // the version it replaces (`NewVersion::former_audience`), named in
        // it or not (`docs/federation.md` §4).
        if receive.notified
            && receive.source == RecordSource::NotificationUnknown
            && latest.is_none()
            && !recipients(&record.author.entity, record, &links).contains(&self.context.user)
        {
            return fail(WriteError::Unsolicited);
        }
        let mut received = record.clone();
        received.source = latest.map_or(receive.source, |l| l.source.max(receive.source));
        received.received_at = latest.and_then(|l| l.received_at);
        received.version.received_at = None;
        let at =
            RecordDate::received_after(self.context.received_at, self.context.last_received_at);
        let deletes = matches!(
            &record.body,
            RecordBody::Tombstone(no_content) if no_content.action == DeletionAction::Delete
        );
        let written = NewVersion {
            record: ReceivedRecord::stamp(received, at),
            links,
            search_text,
            replaces,
            former_audience: Vec::new(),
        };
        match deletes {
            // The record is gone here too, and what depends on it.
            true => {
                let cascade = Cascade::new(written, self.key.clone(), &self.context.user, true);
                Advance::Next(Phase::Cascade(Box::new(cascade)))
            }
            false => Advance::Done(Ok(Commit::Store {
                written: Box::new(written),
                cascaded: Vec::new(),
            })),
        }
    }
}

/// The version a received one replaces: the store's latest, when it is
/// the received one's parent; none for a record's first version, or the
/// oldest version the receiver could fetch. `parent` is the received
/// one's parent as the store holds it, when it was asked.
fn replaced_by_received(
    receive: &Receive,
    latest: Option<&Record>,
    parent: Option<Option<Option<&Record>>>,
) -> Result<Option<VersionHash>, WriteError> {
    match (receive.record.version.parent_hash, latest) {
        (None, None) => Ok(None),
        (Some(parent), Some(latest)) if latest.version.hash == parent => Ok(Some(parent)),
        (Some(_), None) if receive.chain_start => Ok(None),
        (Some(parent), None) => Err(WriteError::MissingParent { parent }),
        // The parent is stored but has another child: the chains forked.
        (Some(_), Some(latest)) if parent.flatten().flatten().is_some() => {
            Err(WriteError::VersionConflict {
                latest: latest.version.hash,
            })
        }
        // Versions between the latest and this one are missing.
        (Some(parent), Some(_)) => Err(WriteError::MissingParent { parent }),
        (None, Some(latest)) => Err(WriteError::VersionConflict {
            latest: latest.version.hash,
        }),
    }
}

/// The compiled type `type_link` names, given its Type record as the store
/// holds it (`None`: the store lacks it, which another server may hold).
fn type_of<'t>(
    types: &'t mut Types,
    type_link: &VersionLink,
    type_record: Option<&Record>,
) -> Result<&'t RecordType, WriteError> {
    let unresolved = type_record
        .is_none()
        .then(|| Box::new(Unresolved::Version(type_link.clone())));
    types
        .get(type_link, type_record)
        .map_err(|reason| WriteError::InvalidLink {
            path: type_path(),
            fault: LinkFault::NotAType(reason),
            unresolved,
        })
}

fn type_path() -> LinkPath {
    LinkPath::from_walk("$['type']".to_owned())
}
/// The permissions a new record of type `type_link` is stored with: those
/// its body gives, else the default, which for Type records is public
/// (PROTOCOL.md §3, §6). Client SDKs validate a record as it will be stored
/// with the same rule.
pub fn new_record_permissions(type_link: &VersionLink, given: Option<Permissions>) -> Permissions {
    given.unwrap_or_else(|| match is_type(type_link, BuiltinType::Type) {
        true => Permissions::public(),
        false => Permissions::default(),
    })
}
