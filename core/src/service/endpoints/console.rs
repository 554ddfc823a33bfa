//! The owner's console (`{base_url}/{user}/console/…`): pages and forms,
//! never problem+json, since a person reads them. Its reads are the API's
//! statements, run as the owner; its writes are the API's write jobs, as
//! the owner, so they pass the same transition (types, links, parents).

use std::collections::HashMap;

use serde_json::Value;

use crate::auth::access::{Access, is_type};
use crate::auth::apps::Scope;
use crate::model::{Entity, Permissions, Record, RecordId, UserName, VersionLink};
use crate::problem::{Problem, ProblemType};
use crate::query::{IndexEntry, ListQuery, position_of};
use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY, builtin_record_type};
use crate::schema::{FormField, FormInput, RecordType, Rule, provisional_record};
use crate::service::consent::{AppRequest, Session, TypeLabel};
use crate::service::console::authorship::{
    Attempt, AuthorView, Offer, Refusal, refusal_of_write, refuse_before_writing, source_words,
    title_for_owner,
};
use crate::service::console::form::{
    RecordChoices, content_from_form, field_of_path, field_views, record_choice, values_of,
    values_typed,
};
use crate::service::console::new_type::{FIELD_KINDS, NewTypeForm};
use crate::service::console::page::{
    AccountPage, AppView, AppsPage, EditError, EditPage, FilterChoice, Frame, LandingPage,
    LinkShown, MessagePage, Overview, RecordPage, RecordRow, Records, Section, SignInPage,
    TypeChoice, TypeCount, TypeView, TypesPage, VersionPage, VersionRow, VersionView, console_href,
    human_bytes, render,
};
use crate::service::console::{
    self, FilterProblem, Form, LinkKindView, ListForm, MAX_FORM_BYTES, MAX_NAMED_ENTITIES,
    MAX_VERSIONS_SHOWN, PAGE_HEADERS, RECENT_VERSIONS, STYLE, STYLE_CACHE_CONTROL, content_links,
    create_body, delete_body, diff_lines, editable_json, permission_words, pretty, update_body,
};
use crate::service::route::{BlobPath, ConsolePage, Method, RecordPath};
use crate::store::{
    Statement, WriteOrigin, builtin_records_sql, entity_record_sql, latest_version_sql, list_sql,
    read_version, recent_versions_sql, records_per_type_sql, sessions_after_sql, set_password_sql,
    sign_out_everywhere_sql, store_totals_sql, version_sql, versions_sql,
};
use crate::write::{RecordKey, TypeAddition, WriteError, WriteRequest};

use crate::service::jobs::{Done, Job, RecordWrite, Refused};
use crate::service::store::{RowExt, version_row};
use crate::service::{Context, Host, Note, Reply, ReplyBody, User, WriteFailure};

mod outbox;

/// A page, or the page that says why not.
type Page<S> = Result<Reply<S>, Reply<S>>;

/// The policy of a blob the console serves: nothing runs, nothing frames it.
const BLOB_POLICY: &str = "default-src 'none'; frame-ancestors 'none'; sandbox";

/// Answers a console request.
pub(in crate::service) async fn console<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    page: ConsolePage,
    body: H::Body,
) -> Reply<H::Stream> {
    match answer(cx, user, page, body).await {
        Ok(reply) | Err(reply) => reply,
    }
}

/// The page of a console address whose user this server does not have: it
/// names no user, so it tells nothing of who has an account here.
pub(in crate::service) fn no_such_user<S>() -> Reply<S> {
    message(
        404,
        None,
        "No console here",
        "This server has no console at this address. Check the user name in the address.",
    )
}

/// The stylesheet of every page a person reads (`/console.css`).
pub(in crate::service) fn stylesheet<S>() -> Reply<S> {
    Reply::new(200, ReplyBody::Bytes(STYLE.as_bytes().to_vec()))
        .with("content-type", "text/css; charset=utf-8")
        .with("cache-control", STYLE_CACHE_CONTROL)
}

/// The landing page's form (`/console?user=NAME`, as a browser sends a
/// `GET` form: `+` is a space): a redirect to that user's console, whether
/// or not the user exists (the console says so, naming no one); without a
/// name that can be a user's, back to `/`.
pub(in crate::service) fn find_console<S>(query: &str) -> Reply<S> {
    let form = Form::from_query(query);
    let name = (form.get("user")).and_then(|name| name.trim().parse::<UserName>().ok());
    let location = match name {
        Some(name) => console_href(name.as_str(), ""),
        None => "/".to_owned(),
    };
    see_other(&location, None)
}

/// The page of a browser's `GET /`: what this server is, and where a
/// person's console is, naming no user.
pub(in crate::service) fn landing<S>(host_name: &str, version: &str) -> Reply<S> {
    html(
        200,
        render(&LandingPage {
            host: host_name,
            version,
        }),
    )
}

async fn answer<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    page: ConsolePage,
    body: H::Body,
) -> Page<H::Stream> {
    let host = cx.host;
    let key = host.session_key();
    let now = cx.request.now;
    let form = match cx.method {
        Method::Post => match host.read_body(body, MAX_FORM_BYTES).await {
            Ok(bytes) => Some(Form::parse(&bytes).ok_or_else(|| too_large(user))?),
            Err(_) => return Err(too_large(user)),
        },
        _ => {
            host.discard(body).await;
            None
        }
    };
    let cookie = cx
        .request
        .header("cookie")
        .and_then(|cookie| Session::from_cookie_header(cookie, key, now))
        .filter(|session| session.user == user.name);
    let sessions_after = sessions_after(cx, user).await?;
    let signed_in = cookie
        .clone()
        .filter(|session| session.is_current(&user.name, sessions_after));
    if let Some(form) = &form {
        // Every form carries the token of the session it was served with.
        let session_of_form = match page {
            ConsolePage::SignIn => cookie.as_ref(),
            _ => signed_in.as_ref(),
        };
        if !session_of_form.is_some_and(|session| session.check_csrf(key, form.csrf())) {
            return Err(message(
                403,
                Some(&user.name),
                "This form has expired",
                "The form was not sent from this console, or your session ended. Go back, reload the page and try again.",
            ));
        }
    }
    let Some(session) = signed_in else {
        return match (page, form) {
            (ConsolePage::SignIn, Some(form)) => sign_in(cx, user, cookie, &form).await,
            _ => Ok(sign_in_page(cx, user, cookie, None, 200)),
        };
    };
    let csrf = session.csrf_token(key);
    let frame = |section| Frame {
        user: &user.name,
        csrf: &csrf,
        section,
    };
    let console = Console {
        cx,
        user,
        owner: Access::Owner {
            entity: user.entity.clone(),
        },
    };
    let notice = console::notice(console.query_form().get("done"));
    let mut reply = match (page, form) {
        (ConsolePage::Overview, None) => console.overview(frame(Section::Overview)).await,
        (ConsolePage::Records, None) => console.records_page(frame(Section::Records)).await,
        (ConsolePage::Records, Some(form)) => console.create(frame(Section::Records), &form).await,
        (ConsolePage::NewRecord, None) => console.new_record(frame(Section::Records)).await,
        (ConsolePage::Record(record), None) => {
            console
                .record(frame(Section::Records), &record, notice)
                .await
        }
        (ConsolePage::EditRecord(record), None) => {
            console.edit_form(frame(Section::Records), &record).await
        }
        (ConsolePage::EditRecord(record), Some(form)) => {
            console
                .update(frame(Section::Records), &record, &form)
                .await
        }
        (ConsolePage::DeleteRecord(record), Some(form)) => console.delete(&record, &form).await,
        (ConsolePage::Version(record, hash), None) => {
            console
                .version(frame(Section::Records), &record, &hash)
                .await
        }
        (ConsolePage::Blob(record, blob), None) => console.blob(&record, &blob).await,
        (ConsolePage::Types, form) => {
            console
                .types_page(frame(Section::Types), form.as_ref())
                .await
        }
        (ConsolePage::Apps, None) => console.apps(frame(Section::Apps), notice).await,
        (ConsolePage::RevokeApp(app), Some(_)) => console.revoke(&app, false).await,
        (ConsolePage::ForgetApp(app), Some(_)) => console.revoke(&app, true).await,
        (ConsolePage::Outbox, None) => {
            outbox::outbox_page(cx, user, frame(Section::Outbox), notice).await
        }
        (ConsolePage::SendNow, Some(form)) => outbox::send_now(cx, user, &form, now).await,
        (ConsolePage::Account, None) => Ok(html(
            200,
            render(&AccountPage {
                frame: frame(Section::Account),
                notice,
                error: None,
            }),
        )),
        (ConsolePage::ChangePassword, Some(form)) => {
            console
                .change_password(frame(Section::Account), &form)
                .await
        }
        (ConsolePage::EndSessions, Some(_)) => {
            console
                .run_statement(sign_out_everywhere_sql(user.id, now.unix_millis()))
                .await?;
            Ok(see_other(
                &console_href(&user.name, ""),
                Some(Session::clear_cookie()),
            ))
        }
        // Ends this session on the server, not only in this browser: a
        // copy of its cookie is refused from now on, on every page.
        (ConsolePage::SignOut, Some(_)) => {
            console
                .run_statement(sign_out_everywhere_sql(user.id, session.sign_out_mark()))
                .await?;
            Ok(see_other(
                &console_href(&user.name, ""),
                Some(Session::clear_cookie()),
            ))
        }
        (ConsolePage::Unknown, _) => Err(message(
            404,
            Some(&user.name),
            "No such page",
            "The console has no page at this address.",
        )),
        // A signed-in person who signs in again (a second tab) goes on.
        (ConsolePage::SignIn, _) => Ok(see_other(&console_href(&user.name, ""), None)),
        _ => Err(method_not_allowed(user)),
    };
    // A session in use stays open (up to its maximum).
    if let Some(renewed) = session.renewed(now) {
        let cookie = renewed.set_cookie(key, now);
        match &mut reply {
            Ok(reply) | Err(reply) => {
                if reply.header("set-cookie").is_none() {
                    reply.set("set-cookie", cookie);
                }
            }
        }
    }
    reply
}

/// The user's `sessions_after` mark.
pub(in crate::service) async fn sessions_after<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
) -> Result<i64, Reply<H::Stream>> {
    let rows = cx
        .host
        .fetch(&sessions_after_sql(user.id))
        .await
        .map_err(|error| logged(cx.host, &error))?;
    match rows.first() {
        Some(row) => row.integer(0).map_err(|error| logged(cx.host, &error)),
        None => Ok(0),
    }
}

/// The sign-in form, with the visitor's session (a new one when the
/// request carries none for this user).
fn sign_in_page<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    session: Option<Session>,
    error: Option<&str>,
    status: u16,
) -> Reply<H::Stream> {
    let key = cx.host.session_key();
    let now = cx.request.now;
    let (session, new) = match session {
        Some(session) => (session, false),
        None => (
            Session::visitor(&user.name, cx.request.fresh.bytes(), now),
            true,
        ),
    };
    let action = console_href(&user.name, "/sign-in");
    let page = render(&SignInPage {
        user: &user.name,
        action: &action,
        csrf: &session.csrf_token(key),
        error,
    });
    let reply = html(status, page);
    match new {
        true => reply.with("set-cookie", session.set_cookie(key, now)),
        false => reply,
    }
}

/// A posted password: counted against the address's sign-in rate, then
/// checked; a new signed-in session on success.
async fn sign_in<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    visitor: Option<Session>,
    form: &Form,
) -> Page<H::Stream> {
    let host = cx.host;
    let password = form.get("password").unwrap_or_default();
    if check_password(cx, user, password).await? {
        host.note(Note::SignedIn { user: &user.name });
        let now = cx.request.now;
        let session = Session::signed_in(&user.name, cx.request.fresh.bytes(), now);
        return Ok(see_other(
            &console_href(&user.name, ""),
            Some(session.set_cookie(host.session_key(), now)),
        ));
    }
    host.note(Note::WrongPassword {
        user: &user.name,
        peer: cx.request.peer,
    });
    Ok(sign_in_page(cx, user, visitor, Some("Wrong password"), 401))
}

/// Whether `password` is the user's, counted as a sign-in attempt
/// ([`attempt_password`](super::consent::attempt_password)); a refused
/// attempt is the page that says so, with its `Retry-After`.
async fn check_password<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    password: &str,
) -> Result<bool, Reply<H::Stream>> {
    match super::consent::attempt_password(cx, user, password).await {
        Ok(Ok(right)) => Ok(right),
        Ok(Err(limited)) => {
            let (title, text) = super::consent::sign_in_refusal(limited.problem.kind);
            Err(message(limited.problem.status(), None, title, text)
                .with("retry-after", limited.retry_after_secs.to_string()))
        }
        Err(error) => Err(logged(cx.host, &error)),
    }
}

/// The Type records of a store, to name types and offer them.
struct Types {
    records: Vec<Record>,
}

impl Types {
    /// The name of the type `link` points to (its record id when the store has no such type).
    fn name(&self, link: &VersionLink) -> String {
        self.records
            .iter()
            .find(|record| record.author.entity == link.entity && record.id == link.record_id)
            .and_then(type_name)
            .or_else(|| builtin_record_type(link).map(|t| t.name.clone()))
            .unwrap_or_else(|| link.record_id.to_string())
    }

    fn live(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|record| !record.is_tombstone())
    }

    /// The choices of the list's type filter: `{entity}+{record_id}`.
    fn list_choices(&self) -> Vec<TypeChoice> {
        self.choices(|record| format!("{}+{}", record.author.entity, record.id))
    }

    /// The compiled type `link` names, when the store holds exactly that
    /// version (a built-in type, or the latest of a Type record): the form
    /// a record of it is edited with.
    fn record_type(&self, link: &VersionLink) -> Option<RecordType> {
        if let Some(builtin) = builtin_record_type(link) {
            return Some(builtin.clone());
        }
        let record = self.live().find(|record| {
            record.author.entity == link.entity
                && record.id == link.record_id
                && record.version.hash == link.version_hash
        })?;
        RecordType::from_content(record.content()?.as_value()).ok()
    }

    /// The live Type record a list's `{entity}+{record_id}` value names.
    fn by_list_value(&self, value: &str) -> Option<&Record> {
        self.live()
            .find(|record| format!("{}+{}", record.author.entity, record.id) == value)
    }

    /// The choices of a new record's type: `{entity}+{record_id}+{hash}`.
    fn version_choices(&self) -> Vec<TypeChoice> {
        self.choices(|record| {
            format!(
                "{}+{}+{}",
                record.author.entity, record.id, record.version.hash
            )
        })
    }

    /// Each live type, named; a name two types share is told apart by
    /// each one's author, id and fields.
    fn choices(&self, value: impl Fn(&Record) -> String) -> Vec<TypeChoice> {
        let named: Vec<(&Record, String)> = self
            .live()
            .map(|record| {
                (
                    record,
                    type_name(record).unwrap_or_else(|| record.id.to_string()),
                )
            })
            .collect();
        let mut choices: Vec<TypeChoice> = named
            .iter()
            .map(|(record, name)| {
                let shared = named.iter().filter(|(_, other)| other == name).count() > 1;
                TypeChoice {
                    value: value(record),
                    name: match shared {
                        true => type_identity(record, name),
                        false => name.clone(),
                    },
                }
            })
            .collect();
        choices.sort_by(|a, b| a.name.cmp(&b.name));
        choices
    }

    /// The live Type record a `{entity}+{record_id}+{hash}` value names, at its latest version.
    fn by_version_value(&self, value: &str) -> Option<&Record> {
        self.live().find(|record| {
            format!(
                "{}+{}+{}",
                record.author.entity, record.id, record.version.hash
            ) == value
        })
    }
}

fn type_name(record: &Record) -> Option<String> {
    record.content_text("/name").map(str::to_owned)
}

/// The most fields the records table shows as columns.
const MAX_COLUMNS: usize = 6;

/// A type as a person tells it from another of the same name, in the
/// consent page's words ([`TypeLabel`]) and by its id: `note (by
/// alice.example; fields title, body; 3f2a1b9c…)`.
fn type_identity(record: &Record, name: &str) -> String {
    let id = record.id.to_string();
    match TypeLabel::of(record).and_then(|label| label.identity) {
        Some(identity) => format!("{name} ({identity}; {}…)", &id[..8]),
        None => format!("{name} ({}…)", &id[..8]),
    }
}

/// Why the owner's write was refused: its problem, and the write
/// transition's own error when the transition refused it.
struct WriteRefused {
    problem: Problem,
    error: Option<WriteError>,
}

/// The profile names a page found, by entity: `(name, Entity record's
/// console page)`, or `None` when the store holds no Entity record of it.
/// A page looks up at most [`MAX_NAMED_ENTITIES`]; the others it names by
/// their entity alone.
#[derive(Default)]
struct EntityNames {
    found: HashMap<Entity, Option<(String, String)>>,
}

/// A signed-in owner's console.
struct Console<'c, 'h, 'r, H: Host> {
    cx: &'c Context<'h, 'r, H>,
    user: &'c User,
    owner: Access,
}

impl<H: Host> Console<'_, '_, '_, H> {
    fn href(&self, rest: &str) -> String {
        console_href(&self.user.name, rest)
    }

    fn record_href(&self, entity: &Entity, id: &RecordId) -> String {
        self.href(&format!("/browse/{entity}/{id}"))
    }

    /// The profile name of `entity` (its entity when its Entity record has
    /// none) and its Entity record's page, when the store holds that
    /// record and `names` has room to look it up.
    async fn entity_name(
        &self,
        entity: &Entity,
        names: &mut EntityNames,
    ) -> Result<Option<(String, String)>, Reply<H::Stream>> {
        if let Some(found) = names.found.get(entity) {
            return Ok(found.clone());
        }
        if names.found.len() >= MAX_NAMED_ENTITIES {
            return Ok(None);
        }
        let found = self
            .versions_of(&entity_record_sql(self.user.id, entity), 0)
            .await?
            .into_iter()
            .next()
            .map(|(found, _)| {
                let name = found
                    .content_text("/profile/name")
                    .map_or_else(|| entity.to_string(), str::to_owned);
                (name, self.record_href(&found.author.entity, &found.id))
            });
        names.found.insert(entity.clone(), found.clone());
        Ok(found)
    }

    /// A record's author, named by the Entity record the store holds of them.
    async fn author(
        &self,
        entity: &Entity,
        names: &mut EntityNames,
    ) -> Result<AuthorView, Reply<H::Stream>> {
        let found = match *entity == self.user.entity {
            true => None,
            false => self.entity_name(entity, names).await?,
        };
        Ok(AuthorView::new(entity, &self.user.entity, found))
    }

    async fn fetch(
        &self,
        statement: &Statement,
    ) -> Result<Vec<crate::service::store::Row>, Reply<H::Stream>> {
        self.cx
            .host
            .fetch(statement)
            .await
            .map_err(|error| logged(self.cx.host, &error))
    }

    /// The `(record, entries)` of every row of `(record, links)` from column `first`.
    async fn versions_of(
        &self,
        statement: &Statement,
        first: usize,
    ) -> Result<Vec<(Record, Vec<IndexEntry>)>, Reply<H::Stream>> {
        let host = self.cx.host;
        let mut records = Vec::new();
        for row in self.fetch(statement).await? {
            let (record, links) =
                version_row(row.get(first..).unwrap_or_default()).map_err(|e| logged(host, &e))?;
            records.push(read_version(&record, &links).map_err(|e| logged(host, &e))?);
        }
        Ok(records)
    }

    /// The records of a built-in type the store holds; of the types that
    /// count only as the user's own (apps, authorizations), the user's
    /// alone, whatever another server's may be stored.
    async fn builtin(&self, builtin: BuiltinType) -> Result<Vec<Record>, Reply<H::Stream>> {
        let author = crate::auth::apps::USERS_OWN_TYPES
            .contains(&builtin)
            .then_some(&self.user.entity);
        Ok(self
            .versions_of(
                &builtin_records_sql(self.user.id, builtin, author, console::MAX_BUILTIN_RECORDS),
                0,
            )
            .await?
            .into_iter()
            .map(|(record, _)| record)
            .collect())
    }

    async fn load_types(&self) -> Result<Types, Reply<H::Stream>> {
        Ok(Types {
            records: self.builtin(BuiltinType::Type).await?,
        })
    }

    /// App names by App record id.
    async fn app_names(&self) -> Result<HashMap<String, String>, Reply<H::Stream>> {
        Ok(self
            .builtin(BuiltinType::App)
            .await?
            .iter()
            .filter_map(|record| {
                let name = AppRequest::name_of(record)?;
                Some((record.id.to_string(), name))
            })
            .collect())
    }

    /// A record in a list; `app` names the owner's app that wrote it, where
    /// the list knows it.
    fn row(
        &self,
        record: &Record,
        types: &Types,
        author: &AuthorView,
        app: Option<String>,
    ) -> RecordRow {
        let summary = match record.content() {
            Some(content) => truncate(&content.as_value().to_string(), 160),
            None => "(deleted)".to_owned(),
        };
        RecordRow {
            href: self.record_href(&record.author.entity, &record.id),
            type_name: types.name(&record.type_link),
            id: record.id.to_string(),
            author: author.label(),
            received_at: date_text(record.version.received_at),
            summary,
            deleted: record.is_tombstone(),
            cells: Vec::new(),
            written_by: match (author.own, app) {
                (true, Some(app)) => app,
                _ => author.label(),
            },
        }
    }

    async fn overview(&self, frame: Frame<'_>) -> Page<H::Stream> {
        let user_id = self.user.id;
        let types = self.load_types().await?;
        let mut counts = Vec::new();
        for row in self.fetch(&records_per_type_sql(user_id)).await? {
            let read = || -> Result<TypeCount, crate::service::store::RowError> {
                let entity = row.text(0)?;
                let record_id = row.text(1)?;
                let link = format!("{entity}+{record_id}");
                let name = match (entity.parse(), record_id.parse()) {
                    (Ok(entity), Ok(record_id)) => types
                        .records
                        .iter()
                        .find(|r| r.author.entity == entity && r.id == record_id)
                        .and_then(type_name)
                        .unwrap_or_else(|| record_id.to_string()),
                    _ => record_id.to_owned(),
                };
                let query = form_urlencoded::Serializer::new(String::new())
                    .append_pair("type", &link)
                    .finish();
                Ok(TypeCount {
                    name,
                    href: self.href(&format!("/browse?{query}")),
                    live: row.integer(2)?,
                    deleted: row.integer(3)?,
                })
            };
            counts.push(read().map_err(|e| logged(self.cx.host, &e))?);
        }
        let totals = self.fetch(&store_totals_sql(user_id)).await?;
        let (versions, blobs, blob_bytes) = match totals.first() {
            Some(row) => (|| Ok((row.integer(0)?, row.integer(1)?, row.integer(2)?)))()
                .map_err(|e: crate::service::store::RowError| logged(self.cx.host, &e))?,
            None => (0, 0, 0),
        };
        let apps = self.app_names().await?;
        let authorizations = self.builtin(BuiltinType::AppAuthorization).await?;
        let mut live_apps: Vec<String> = authorizations
            .iter()
            .filter(|record| !record.is_tombstone())
            .filter_map(|record| {
                crate::auth::apps::authorized_app(record).map(|link| link.record_id)
            })
            .map(|app| {
                apps.get(&app.to_string())
                    .cloned()
                    .unwrap_or_else(|| app.to_string())
            })
            .collect();
        live_apps.sort();
        live_apps.dedup();
        let mut recent = Vec::new();
        let mut names = EntityNames::default();
        for row in self
            .fetch(&recent_versions_sql(user_id, RECENT_VERSIONS))
            .await?
        {
            let app = row
                .optional_text(0)
                .map_err(|e| logged(self.cx.host, &e))?
                .map(|id| apps.get(id).cloned().unwrap_or_else(|| format!("app {id}")));
            let (record, links) = version_row(row.get(1..).unwrap_or_default())
                .map_err(|e| logged(self.cx.host, &e))?;
            let (record, _) =
                read_version(&record, &links).map_err(|e| logged(self.cx.host, &e))?;
            let author = self.author(&record.author.entity, &mut names).await?;
            recent.push(self.row(&record, &types, &author, app));
        }
        let records = counts.iter().map(|count| count.live).sum();
        Ok(html(
            200,
            render(&Overview {
                frame,
                records,
                types: counts,
                versions,
                blobs,
                blob_bytes: human_bytes(blob_bytes),
                live_apps,
                recent,
            }),
        ))
    }

    async fn records_page(&self, frame: Frame<'_>) -> Page<H::Stream> {
        let form = ListForm::from_query(&self.query_form());
        let types = self.load_types().await?;
        let chosen = types.by_list_value(&form.type_link);
        let chosen_type = chosen
            .and_then(|record| record.content())
            .and_then(|content| RecordType::from_content(content.as_value()).ok());
        let filterable = (chosen_type.as_ref())
            .map(|t| t.schema.filterable_paths())
            .unwrap_or_default();
        let mut sorts: Vec<(String, String)> = console::SORTS
            .iter()
            .map(|(value, label)| (value.to_string(), label.to_string()))
            .collect();
        sorts.extend(console::tag_sorts(&filterable));
        sorts.push((
            console::BEST_MATCH.to_owned(),
            "Best match first (with words to find)".to_owned(),
        ));
        let columns: Vec<String> = (chosen_type.as_ref())
            .map(|t| {
                t.schema
                    .content_fields()
                    .into_iter()
                    .take(MAX_COLUMNS)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut page = Records {
            frame,
            form: &form,
            types: types.list_choices(),
            type_name: chosen.and_then(type_name),
            filterable: filterable.iter().map(FilterChoice::new).collect(),
            columns,
            sorts,
            problem: None,
            rows: Vec::new(),
            next_href: None,
            first_href: form
                .page_start
                .as_ref()
                .map(|_| self.href(&format!("/browse?{}", form.query(None)))),
        };
        let params = match form.api_params() {
            Ok(params) => params,
            Err(problem) => {
                page.problem = Some(problem);
                return Ok(html(400, render(&page)));
            }
        };
        let list = match ListQuery::from_params(&params, &self.user.entity) {
            Ok(list) => list,
            Err(error) => {
                page.problem = Some(FilterProblem {
                    message: error.to_string(),
                    before: String::new(),
                    after: String::new(),
                    cannot_match: false,
                });
                return Ok(html(400, render(&page)));
            }
        };
        let unmatchable = match list.filters.first() {
            Some(filter) => {
                let found = self.cx.unmatchable(self.user, filter).await;
                found.map_err(|failure| {
                    let what = failure.internal.as_deref().unwrap_or("a failed store read");
                    logged(self.cx.host, &what)
                })?
            }
            None => None,
        };
        if let Some(unmatchable) = unmatchable {
            page.problem = Some(FilterProblem {
                cannot_match: true,
                ..FilterProblem::at(
                    &form.filter,
                    position_of(&form.filter, &unmatchable.path),
                    unmatchable.to_string(),
                )
            });
            return Ok(html(400, render(&page)));
        }
        let statement = list_sql(self.user.id, &list, &self.owner).statement;
        let (records, start) =
            crate::service::respond::page_of(&list, self.versions_of(&statement, 0).await?);
        page.next_href = start
            .map(|start| self.href(&format!("/browse?{}", form.query(Some(&start.to_param())))));
        let mut names = EntityNames::default();
        for (record, _) in &records {
            let author = self.author(&record.author.entity, &mut names).await?;
            let mut row = self.row(record, &types, &author, None);
            let content = record.content().map(|content| content.as_map());
            row.cells = (page.columns.iter())
                .map(
                    |column| match content.and_then(|map| map.get(column.as_str())) {
                        Some(value) => console::cell_text(value),
                        None => String::new(),
                    },
                )
                .collect();
            page.rows.push(row);
        }
        Ok(html(200, render(&page)))
    }

    /// The latest version of a record, or the not-found page.
    async fn latest(
        &self,
        record: &RecordPath,
    ) -> Result<(Record, Vec<IndexEntry>), Reply<H::Stream>> {
        self.versions_of(
            &latest_version_sql(self.user.id, &record.entity, &record.record_id),
            0,
        )
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
            message(
                404,
                Some(&self.user.name),
                "No such record",
                "This store has no record at this address.",
            )
        })
    }

    async fn view(
        &self,
        record: &Record,
        entries: &[IndexEntry],
        types: &Types,
        names: &mut EntityNames,
    ) -> Result<VersionView, Reply<H::Stream>> {
        let author = self.author(&record.author.entity, names).await?;
        let mut links = Vec::new();
        for link in content_links(entries) {
            let href = match link.kind {
                LinkKindView::Entity => {
                    let Ok(entity) = link.entity.parse::<Entity>() else {
                        continue;
                    };
                    match self.entity_name(&entity, names).await? {
                        Some((name, href)) => {
                            links.push(LinkShown {
                                link: console::LinkView {
                                    label: format!("{name} ({entity})"),
                                    ..link
                                },
                                href: Some(href),
                            });
                            continue;
                        }
                        None => None,
                    }
                }
                LinkKindView::Record => link
                    .record_id
                    .as_ref()
                    .map(|id| self.href(&format!("/browse/{}/{id}", link.entity))),
                LinkKindView::Version => match (&link.record_id, &link.hash) {
                    (Some(id), Some(hash)) => {
                        Some(self.href(&format!("/browse/{}/{id}/versions/{hash}", link.entity)))
                    }
                    _ => None,
                },
                LinkKindView::Blob => link.hash.as_ref().map(|hash| {
                    let name: String = percent_encoding::utf8_percent_encode(
                        &link.label,
                        percent_encoding::NON_ALPHANUMERIC,
                    )
                    .collect();
                    self.href(&format!(
                        "/browse/{}/{}/blobs/{hash}/{name}",
                        record.author.entity, record.id
                    ))
                }),
            };
            links.push(LinkShown { link, href });
        }
        let type_name = types.name(&record.type_link);
        let type_href =
            Some(self.record_href(&record.type_link.entity, &record.type_link.record_id));
        Ok(VersionView {
            title: format!("{type_name} {}", record.id),
            type_name,
            type_href,
            author: author.field(),
            author_href: author.href.clone(),
            id: record.id.to_string(),
            source: record.source.as_str().to_owned(),
            source_words: source_words(record.source, &author),
            created_at: record.created_at.to_string(),
            received_at: date_text(record.version.received_at),
            hash: record.version.hash.to_string(),
            parent_hash: record.version.parent_hash.map(|hash| hash.to_string()),
            deletion: match &record.body {
                crate::model::RecordBody::Tombstone(tombstone) => {
                    Some(tombstone.action.as_str().to_owned())
                }
                crate::model::RecordBody::Live(_) => None,
            },
            json: pretty(&editable_json(record)),
            permissions: permission_words(&record.permissions),
            links,
        })
    }

    async fn record(
        &self,
        frame: Frame<'_>,
        path: &RecordPath,
        notice: Option<&str>,
    ) -> Page<H::Stream> {
        let (record, entries) = self.latest(path).await?;
        let types = self.load_types().await?;
        let mut names = EntityNames::default();
        let view = self.view(&record, &entries, &types, &mut names).await?;
        let author = self.author(&record.author.entity, &mut names).await?;
        let mut versions = self
            .versions_of(
                &versions_sql(
                    self.user.id,
                    &path.entity,
                    &path.record_id,
                    None,
                    MAX_VERSIONS_SHOWN,
                ),
                0,
            )
            .await?;
        let more_versions = versions.len() > MAX_VERSIONS_SHOWN as usize;
        versions.truncate(MAX_VERSIONS_SHOWN as usize);
        let base = self.record_href(&path.entity, &path.record_id);
        let versions = versions
            .iter()
            .map(|(version, _)| VersionRow {
                href: format!("{base}/versions/{}", version.version.hash),
                hash: version.version.hash.to_string(),
                received_at: date_text(version.version.received_at),
                created_at: version.version.created_at.to_string(),
                deleted: version.is_tombstone(),
                current: version.version.hash == record.version.hash,
            })
            .collect();
        let offer = Offer::for_record(&record, &self.user.entity);
        let whose = (!author.own && author.entity != SYSTEM_ENTITY).then(|| author.possessive());
        Ok(html(
            200,
            render(&RecordPage {
                frame,
                versions,
                more_versions,
                edit_href: offer.edit.then(|| format!("{base}/edit")),
                delete_action: (!offer.deletions.is_empty()).then(|| format!("{base}/delete")),
                deletions: offer.deletions,
                whose,
                parent_hash: record.version.hash.to_string(),
                notice,
                view,
            }),
        ))
    }

    async fn version(
        &self,
        frame: Frame<'_>,
        path: &RecordPath,
        hash: &crate::model::VersionHash,
    ) -> Page<H::Stream> {
        let not_found = || {
            message(
                404,
                Some(&self.user.name),
                "No such version",
                "This record has no version with this hash.",
            )
        };
        let (record, entries) = self
            .versions_of(
                &version_sql(self.user.id, &path.entity, &path.record_id, hash),
                0,
            )
            .await?
            .into_iter()
            .next()
            .ok_or_else(not_found)?;
        let parent = match record.version.parent_hash {
            Some(parent) => self
                .versions_of(
                    &version_sql(self.user.id, &path.entity, &path.record_id, &parent),
                    0,
                )
                .await?
                .into_iter()
                .next()
                .map(|(parent, _)| parent),
            None => None,
        };
        let types = self.load_types().await?;
        let view = self
            .view(&record, &entries, &types, &mut EntityNames::default())
            .await?;
        // Bounded work whatever the two versions hold (console::diff).
        let diff = parent.as_ref().map(|parent| {
            diff_lines(
                &format!("{}\n", pretty(&editable_json(parent))),
                &format!("{}\n", view.json),
            )
        });
        Ok(html(
            200,
            render(&VersionPage {
                frame,
                record_href: self.record_href(&path.entity, &path.record_id),
                view,
                diff,
            }),
        ))
    }

    async fn blob(&self, path: &RecordPath, blob: &BlobPath) -> Page<H::Stream> {
        match super::blobs::download_as(self.cx, self.user, &self.owner, None, path, None, blob)
            .await
        {
            // A download (never shown as a page of this origin), sandboxed
            // should a browser show it anyway.
            Ok(reply) => Ok(reply
                .with("content-security-policy", BLOB_POLICY)
                .with("x-frame-options", "DENY")
                .with("referrer-policy", "no-referrer")),
            Err(failure) => {
                if let Some(error) = &failure.internal {
                    self.cx.host.report(error);
                }
                Err(message(
                    failure.problem.status(),
                    Some(&self.user.name),
                    title_for_owner(failure.problem.kind),
                    failure.problem.detail.as_deref().unwrap_or(""),
                ))
            }
        }
    }

    /// The query of this request as a form (`?done=…`, a list's
    /// parameters, `?type=…&json=1`).
    fn query_form(&self) -> Form {
        let target = &self.cx.request.target;
        Form::from_query(target.split_once('?').map_or("", |(_, query)| query))
    }

    /// A new record's page: its type chosen (`?type=`), a form of that
    /// type's fields; otherwise, or with `?json=1`, the JSON editor.
    async fn new_record(&self, frame: Frame<'_>) -> Page<H::Stream> {
        let types = self.load_types().await?;
        let query = self.query_form();
        let chosen = query.get("type").unwrap_or_default().to_owned();
        let record_type = (types.by_version_value(&chosen))
            .and_then(|record| RecordType::from_content(record.content()?.as_value()).ok());
        let fields = (record_type.as_ref())
            .map(|t| t.schema.form_fields())
            .unwrap_or_default();
        let as_json = query.get("json") == Some("1");
        let mut page = self.new_page(frame, &types, &chosen);
        match (as_json, fields.is_empty()) {
            (true, _) => {
                page.form_href = (!fields.is_empty()).then(|| self.new_href(&chosen, false))
            }
            // No type chosen yet (or one with no field): the choice, and the JSON editor a link away.
            (false, true) => {
                page.choose_type = true;
                page.json_href = Some(self.new_href(&chosen, true));
            }
            (false, false) => {
                page.fields = field_views(&fields, &[], &[], &self.record_choices(&fields).await?);
                page.json_href = Some(self.new_href(&chosen, true));
            }
        }
        Ok(html(200, render(&page)))
    }

    /// `/browse/new` with a type chosen, as a form or as JSON.
    fn new_href(&self, chosen: &str, json: bool) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("type", chosen);
        if json {
            query.append_pair("json", "1");
        }
        self.href(&format!("/browse/new?{}", query.finish()))
    }

    /// A new record's page, with the JSON editor.
    fn new_page<'p>(&self, frame: Frame<'p>, types: &Types, chosen: &str) -> EditPage<'p> {
        EditPage {
            frame,
            record_title: None,
            action: self.href("/browse"),
            back_href: self.href("/browse"),
            json: "{\n  \"content\": {}\n}".to_owned(),
            parent_hash: String::new(),
            types: types.version_choices(),
            chosen_type: chosen.to_owned(),
            error: None,
            fields: Vec::new(),
            json_href: None,
            form_href: None,
            new_href: self.href("/browse/new"),
            choose_type: false,
        }
    }

    /// A record's edit page: a form of its type's fields, or with
    /// `?json=1` (or a type without a form here) the JSON editor.
    async fn edit_form(&self, frame: Frame<'_>, path: &RecordPath) -> Page<H::Stream> {
        let (record, _) = self.latest(path).await?;
        let types = self.load_types().await?;
        let what = types.name(&record.type_link);
        self.check_authorship(Attempt::Edit, path, &what).await?;
        let fields = self.form_fields_of(&types, &record);
        let as_json = self.query_form().get("json") == Some("1") || fields.is_empty();
        let mut page = self.edit_page(frame, path, &what, &record);
        match as_json {
            true => page.form_href = (!fields.is_empty()).then(|| self.edit_href(path, false)),
            false => {
                let content = record
                    .content()
                    .map(|c| c.as_map().clone())
                    .unwrap_or_default();
                page.fields = field_views(
                    &fields,
                    &values_of(&fields, &content),
                    &[],
                    &self.record_choices(&fields).await?,
                );
                page.json_href = Some(self.edit_href(path, true));
            }
        }
        Ok(html(200, render(&page)))
    }

    /// The newest records of each record-link field's types, for its
    /// picker: at most [`RECORD_CHOICES`] a field.
    async fn record_choices(
        &self,
        fields: &[FormField],
    ) -> Result<RecordChoices, Reply<H::Stream>> {
        let mut choices = Vec::new();
        for field in fields {
            let FormInput::Record { types } = &field.input else {
                continue;
            };
            let conditions: Vec<String> = (types.iter())
                .map(|t| format!("$['type']={}+{}", t.entity, t.record_id))
                .collect();
            let filter = match conditions.as_slice() {
                [one] => one.clone(),
                _ => format!("({})", conditions.join(",")),
            };
            let params = [
                ("filter".to_owned(), filter),
                ("page_size".to_owned(), RECORD_CHOICES.to_string()),
                ("include_links".to_owned(), String::new()),
            ];
            let Ok(list) = ListQuery::from_params(&params, &self.user.entity) else {
                continue;
            };
            let statement = list_sql(self.user.id, &list, &self.owner).statement;
            let records = self.versions_of(&statement, 0).await?;
            let offered = (records.iter().take(RECORD_CHOICES))
                .map(|(record, _)| record_choice(record))
                .collect();
            choices.push((field.name.clone(), offered));
        }
        Ok(choices)
    }

    /// The form fields of `record`'s type; none for a tombstone or a type
    /// the store does not hold as that version.
    fn form_fields_of(&self, types: &Types, record: &Record) -> Vec<FormField> {
        match record.content() {
            Some(_) => (types.record_type(&record.type_link))
                .map(|t| t.schema.form_fields())
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    fn edit_href(&self, path: &RecordPath, json: bool) -> String {
        let href = format!("{}/edit", self.record_href(&path.entity, &path.record_id));
        match json {
            true => format!("{href}?json=1"),
            false => href,
        }
    }

    /// A record's edit page, with the JSON editor holding the record.
    fn edit_page<'p>(
        &self,
        frame: Frame<'p>,
        path: &RecordPath,
        what: &str,
        record: &Record,
    ) -> EditPage<'p> {
        EditPage {
            frame,
            record_title: Some(format!("{what} {}", path.record_id)),
            action: self.edit_href(path, false),
            back_href: self.record_href(&path.entity, &path.record_id),
            json: pretty(&editable_json(record)),
            parent_hash: record.version.hash.to_string(),
            types: Vec::new(),
            chosen_type: String::new(),
            error: None,
            fields: Vec::new(),
            json_href: None,
            form_href: None,
            new_href: self.href("/browse/new"),
            choose_type: false,
        }
    }

    /// The page that refuses `attempt` on the record at `path` (of type
    /// `what`) before any write, when the record is another's and the
    /// attempt is not a local deletion.
    async fn check_authorship(
        &self,
        attempt: Attempt,
        path: &RecordPath,
        what: &str,
    ) -> Result<(), Reply<H::Stream>> {
        let author = self
            .author(&path.entity, &mut EntityNames::default())
            .await?;
        match refuse_before_writing(attempt, &author, what) {
            Some(refusal) => Err(self.refusal_page(403, path, &refusal)),
            None => Ok(()),
        }
    }

    /// A refusal's page, with the way back to the record.
    fn refusal_page(&self, status: u16, path: &RecordPath, refusal: &Refusal) -> Reply<H::Stream> {
        let record_href = self.record_href(&path.entity, &path.record_id);
        html(
            status,
            render(&MessagePage {
                user: Some(&self.user.name),
                title: &refusal.title,
                message: &refusal.text,
                next: Some((&record_href, "Back to the record")),
            }),
        )
    }

    /// Why the write transition refused `attempt`, in words for the owner,
    /// when its problem's title would speak to an app (the
    /// `auth/403-forbidden` family); `None` for the other refusals.
    async fn owner_refusal(
        &self,
        attempt: Attempt,
        refused: &WriteRefused,
        path: &RecordPath,
        what: &str,
    ) -> Result<Option<Refusal>, Reply<H::Stream>> {
        let Some(error) = &refused.error else {
            return Ok(None);
        };
        let author = self
            .author(&path.entity, &mut EntityNames::default())
            .await?;
        Ok(refusal_of_write(attempt, error, &author, what))
    }

    /// Runs the owner's write; the stored version, or why it was refused.
    async fn write(
        &self,
        request: Result<WriteRequest, Problem>,
    ) -> Result<Result<Record, WriteRefused>, Reply<H::Stream>> {
        let request = match request {
            Ok(request) => request,
            Err(problem) => {
                return Ok(Err(WriteRefused {
                    problem,
                    error: None,
                }));
            }
        };
        let job = Job::Writes {
            user: self.user.clone(),
            writes: vec![RecordWrite {
                request,
                access: self.owner.clone(),
                origin: WriteOrigin::default(),
                fresh_id: self.cx.request.fresh.record_id(),
                requested_at: self.cx.request.now,
            }],
        };
        match self.cx.run_job(job).await {
            Ok(Ok(Done::Written(written))) => Ok(Ok(written.answer.record)),
            Ok(Ok(_)) => Err(logged(self.cx.host, &"a console write stored no version")),
            Ok(Err(refused)) => Ok(Err(WriteRefused {
                problem: Problem::from(&refused),
                error: match refused {
                    Refused::Write(error) => Some(error),
                    Refused::Registration(_) => None,
                },
            })),
            Err(failure) => Err(write_failed(self.cx.host, &self.user.name, &failure)),
        }
    }

    /// A body within the API's JSON body limit, made into a write request.
    fn request(
        &self,
        body: Result<Vec<u8>, String>,
        make: impl FnOnce(&[u8]) -> Result<WriteRequest, crate::write::WriteError>,
    ) -> Result<WriteRequest, Problem> {
        let body =
            body.map_err(|reason| Problem::new(ProblemType::InvalidBody).with_detail(reason))?;
        let limit = self.cx.host.settings().limits.json_body_bytes;
        crate::service::limits::check_body_len(body.len() as u64, limit)?;
        make(&body).map_err(|error| Problem::from(&error))
    }

    async fn create(&self, frame: Frame<'_>, form: &Form) -> Page<H::Stream> {
        let chosen = form.get("type").unwrap_or_default();
        let types = self.load_types().await?;
        let fields = match form.get("mode") == Some(FIELDS_MODE) {
            true => (types.by_version_value(chosen))
                .and_then(|record| RecordType::from_content(record.content()?.as_value()).ok())
                .map(|t| t.schema.form_fields())
                .unwrap_or_default(),
            false => Vec::new(),
        };
        let records = self.record_choices(&fields).await?;
        let again = |error: Option<EditError>, errors: Vec<(String, String)>, typed: &str| {
            let mut page = self.new_page(frame, &types, chosen);
            page.error = error;
            let json_href = self.new_href(chosen, true);
            refill(&mut page, &fields, form, errors, typed, json_href, &records);
            page
        };
        let typed = match typed_record(&fields, form, None) {
            Ok(typed) => typed,
            Err(errors) => return Ok(html(422, render(&again(None, errors, "")))),
        };
        let request = self.request(create_body(&typed, chosen), WriteRequest::post);
        match self.write(request).await? {
            Ok(record) => Ok(see_other(
                &format!(
                    "{}?done=created",
                    self.record_href(&record.author.entity, &record.id)
                ),
                None,
            )),
            Err(refused) => {
                let errors = violation_fields(&refused, &fields);
                let error = Some(edit_error(&refused.problem, None));
                Ok(html(422, render(&again(error, errors, &typed))))
            }
        }
    }

    /// Saves the edit form. Another's record is refused before any write
    /// (only its author writes versions that reach others).
    async fn update(&self, frame: Frame<'_>, path: &RecordPath, form: &Form) -> Page<H::Stream> {
        let parent = form.get("parent_hash").unwrap_or_default();
        let (record, _) = self.latest(path).await?;
        let types = self.load_types().await?;
        let what = types.name(&record.type_link);
        self.check_authorship(Attempt::Edit, path, &what).await?;
        let fields = match form.get("mode") == Some(FIELDS_MODE) {
            true => self.form_fields_of(&types, &record),
            false => Vec::new(),
        };
        let records = self.record_choices(&fields).await?;
        let again = |error: EditError, errors: Vec<(String, String)>, typed: &str| {
            let mut page = self.edit_page(frame, path, &what, &record);
            page.parent_hash = parent.to_owned();
            page.error = Some(error);
            let json_href = self.edit_href(path, true);
            refill(&mut page, &fields, form, errors, typed, json_href, &records);
            page
        };
        // A form keeps the record's permissions: only the JSON editor shows them.
        let typed = match typed_record(&fields, form, Some(&record)) {
            Ok(typed) => typed,
            Err(errors) => {
                let error = EditError {
                    title: "Some fields could not be read".to_owned(),
                    detail: None,
                    latest_href: None,
                };
                return Ok(html(422, render(&again(error, errors, ""))));
            }
        };
        let key = RecordKey::new(path.entity.clone(), path.record_id);
        let request = self.request(update_body(&typed, parent), |body| {
            WriteRequest::put(key, body)
        });
        let record_href = self.record_href(&path.entity, &path.record_id);
        match self.write(request).await? {
            Ok(_) => Ok(see_other(&format!("{record_href}?done=saved"), None)),
            Err(refused) => {
                // A refusal in the owner's words keeps the form, so that
                // what was typed can be corrected (a field of the owner's
                // profile the server keeps).
                let for_owner = self
                    .owner_refusal(Attempt::Edit, &refused, path, &what)
                    .await?;
                let errors = violation_fields(&refused, &fields);
                let problem = &refused.problem;
                let stale = matches!(
                    problem.kind,
                    ProblemType::VersionConflict | ProblemType::RecordDeleted
                );
                let status = match (&for_owner, stale) {
                    (Some(_), _) => problem.status(),
                    (None, true) => 409,
                    (None, false) => 422,
                };
                let error = match for_owner {
                    Some(refusal) => EditError {
                        title: refusal.title,
                        detail: Some(refusal.text),
                        latest_href: None,
                    },
                    None => edit_error(problem, stale.then_some(record_href.as_str())),
                };
                Ok(html(status, render(&again(error, errors, &typed))))
            }
        }
    }

    /// Deletes a record with the form's action. Of another's record, only
    /// the copy here may be deleted (`local`); the rest is refused before
    /// any write.
    async fn delete(&self, path: &RecordPath, form: &Form) -> Page<H::Stream> {
        let action = form.get("action").unwrap_or("delete");
        let parent = form.get("parent_hash").unwrap_or_default();
        let attempt = Attempt::deletion(action);
        let (record, _) = self.latest(path).await?;
        let what = self.load_types().await?.name(&record.type_link);
        if let Some(attempt) = attempt {
            self.check_authorship(attempt, path, &what).await?;
        }
        let key = RecordKey::new(path.entity.clone(), path.record_id);
        let request = self.request(Ok(delete_body(action, parent)), |body| {
            WriteRequest::delete(key, body)
        });
        match self.write(request).await? {
            Ok(_) => Ok(see_other(
                &format!(
                    "{}?done=deleted",
                    self.record_href(&path.entity, &path.record_id)
                ),
                None,
            )),
            Err(refused) => {
                if let Some(attempt) = attempt
                    && let Some(refusal) =
                        self.owner_refusal(attempt, &refused, path, &what).await?
                {
                    return Err(self.refusal_page(refused.problem.status(), path, &refusal));
                }
                let problem = refused.problem;
                Err(message(
                    problem.status(),
                    Some(&self.user.name),
                    if problem.kind == ProblemType::VersionConflict {
                        "The record changed meanwhile"
                    } else {
                        title_for_owner(problem.kind)
                    },
                    &match problem.kind {
                        ProblemType::VersionConflict => "Nothing was deleted: the record has a newer version than the page you deleted it from. Open it again and decide on what it holds now.".to_owned(),
                        _ => problem.detail.unwrap_or_default(),
                    },
                ))
            }
        }
    }

    async fn types_page(&self, frame: Frame<'_>, form: Option<&Form>) -> Page<H::Stream> {
        let types = self.load_types().await?;
        // The New-type form, or the check of a record against a type.
        let new_type_post = form.filter(|f| f.get("form") == Some("new_type"));
        let new_type = new_type_post.map_or_else(NewTypeForm::empty, NewTypeForm::from_form);
        let (new_type_schema, new_type_result) = match new_type_post {
            None => (None, None),
            Some(posted) => match self.add_type(&types, &new_type, posted).await? {
                NewTypeOutcome::Saved(href) => return Ok(see_other(&href, None)),
                NewTypeOutcome::Shown(schema, result) => (schema, result),
            },
        };
        let check = form.filter(|_| new_type_post.is_none());
        let chosen = check
            .and_then(|f| f.get("type"))
            .unwrap_or_default()
            .to_owned();
        let json = check
            .and_then(|f| f.get("json"))
            .unwrap_or("{\n  \"content\": {}\n}")
            .to_owned();
        let result = check.map(|_| self.validate(&types, &chosen, &json));
        let mut views: Vec<TypeView> = types
            .live()
            .map(|record| TypeView {
                name: type_name(record).unwrap_or_else(|| record.id.to_string()),
                href: self.record_href(&record.author.entity, &record.id),
                value: format!(
                    "{}+{}+{}",
                    record.author.entity, record.id, record.version.hash
                ),
                builtin: record.author.entity.as_str() == SYSTEM_ENTITY,
                schema: record
                    .content()
                    .and_then(|content| content.as_map().get("schema"))
                    .map(pretty)
                    .unwrap_or_default(),
                sdk: String::new(),
                typescript: String::new(),
            })
            .collect();
        for (view, record) in views.iter_mut().zip(types.live()) {
            let Some(record_type) = record
                .content()
                .and_then(|content| RecordType::from_content(content.as_value()).ok())
            else {
                continue;
            };
            view.typescript = record_type.typescript();
            if !view.builtin {
                let link = crate::model::VersionLink {
                    entity: record.author.entity.clone(),
                    original_entity: None,
                    record_id: record.id,
                    version_hash: record.version.hash,
                };
                view.sdk = console::sdk_example(
                    &record_type.name,
                    &link,
                    &record_type.schema.filterable_paths(),
                    &record_type.schema.required_fields(),
                );
            }
        }
        views.sort_by(|a, b| (a.builtin, &a.name).cmp(&(b.builtin, &b.name)));
        let status = match (&result, &new_type_result) {
            (Some(Err(_)), _) | (_, Some(Err(_))) => 422,
            _ => 200,
        };
        Ok(html(
            status,
            render(&TypesPage {
                frame,
                types: views,
                chosen,
                json,
                result,
                new_type,
                kinds: &FIELD_KINDS,
                new_type_schema,
                new_type_result,
            }),
        ))
    }

    /// The New-type form posted: its schema shown (`step=preview`), or the
    /// type added as `folio type add` adds one (`step=create`).
    async fn add_type(
        &self,
        types: &Types,
        new_type: &NewTypeForm,
        form: &Form,
    ) -> Result<NewTypeOutcome, Reply<H::Stream>> {
        let content = match new_type.content() {
            Ok(content) => content,
            Err(message) => return Ok(NewTypeOutcome::Shown(None, Some(Err(message)))),
        };
        let schema = content.get("schema").map(pretty);
        if form.get("step") != Some("create") {
            return Ok(NewTypeOutcome::Shown(schema, None));
        }
        let same_name: Vec<Record> = types
            .live()
            .filter(|record| record.author.entity == self.user.entity)
            .filter(|record| type_name(record).as_deref() == Some(new_type.name.as_str()))
            .cloned()
            .collect();
        let addition = TypeAddition::decide(&same_name, &content);
        let request = match addition.request(&content) {
            Some(request) => request.map_err(|error| Problem::from(&error)),
            None => {
                let said = match addition {
                    TypeAddition::Ambiguous(_) => Err(format!(
                        "Several of your types are named `{}`: edit the one you mean \
                         from its record.",
                        new_type.name
                    )),
                    _ => Ok(format!(
                        "Your type `{}` has these fields already: nothing changed.",
                        new_type.name
                    )),
                };
                return Ok(NewTypeOutcome::Shown(schema, Some(said)));
            }
        };
        match self.write(request).await? {
            Ok(record) => Ok(NewTypeOutcome::Saved(format!(
                "{}?done=created",
                self.record_href(&record.author.entity, &record.id)
            ))),
            Err(refused) => {
                let message = refused
                    .problem
                    .detail
                    .unwrap_or_else(|| title_for_owner(refused.problem.kind).to_owned());
                Ok(NewTypeOutcome::Shown(schema, Some(Err(message))))
            }
        }
    }

    /// Checks a typed record against a type, as a write would check it.
    fn validate(&self, types: &Types, chosen: &str, typed: &str) -> Result<String, String> {
        let type_record = types.by_version_value(chosen).ok_or("Choose a type.")?;
        let record_type = RecordType::from_record(type_record)
            .map_err(|error| format!("This type cannot check records: {error}"))?;
        let value: Value =
            serde_json::from_str(typed).map_err(|error| format!("This is not JSON: {error}"))?;
        let content = value
            .get("content")
            .and_then(Value::as_object)
            .cloned()
            .ok_or("The record needs `content`, an object.")?;
        let permissions: Permissions = match value.get("permissions") {
            Some(permissions) => serde_json::from_value(permissions.clone())
                .map_err(|error| format!("$['permissions']: {error}"))?,
            None => Permissions::default(),
        };
        let type_link = VersionLink {
            original_entity: None,
            entity: type_record.author.entity.clone(),
            record_id: type_record.id,
            version_hash: type_record.version.hash,
        };
        let record = provisional_record(self.user.entity.clone(), type_link, permissions, content);
        match record_type.schema.validate(&record) {
            Ok(_) => Ok(format!("This record is a valid {}.", record_type.name)),
            Err(violation) => Err(Problem::from(&violation)
                .detail
                .unwrap_or_else(|| violation.to_string())),
        }
    }

    async fn apps(&self, frame: Frame<'_>, notice: Option<&str>) -> Page<H::Stream> {
        let types = self.load_types().await?;
        let apps = self.builtin(BuiltinType::App).await?;
        let authorizations = self.builtin(BuiltinType::AppAuthorization).await?;
        let scope_words = |scope: &Scope| -> Vec<String> {
            let kinds: [(&str, &[crate::model::RecordLink]); 3] = [
                ("read", &scope.read),
                ("read and write", &scope.write),
                ("watch", &scope.subscribe),
            ];
            kinds
                .into_iter()
                .flat_map(|(verb, links)| links.iter().map(move |link| (verb, link)))
                .map(|(verb, link)| {
                    let name = types
                        .records
                        .iter()
                        .find(|r| r.author.entity == link.entity && r.id == link.record_id)
                        .and_then(type_name)
                        .unwrap_or_else(|| link.record_id.to_string());
                    format!("{verb} {name}")
                })
                .collect()
        };
        // Apps made on the server with `--full-access` may use every type.
        let mut full_access = Vec::new();
        for row in self.fetch(&crate::store::apps_sql(self.user.id)).await? {
            let full = (|| Ok((row.text(0)?.to_owned(), row.integer(2)? != 0)))()
                .map_err(|e: crate::service::store::RowError| logged(self.cx.host, &e))?;
            if full.1 {
                full_access.push(full.0);
            }
        }
        let mut views = Vec::new();
        for app in &apps {
            let request = AppRequest::from_record(app);
            let authorization = authorizations.iter().find(|record| {
                !record.is_tombstone()
                    && crate::auth::apps::authorized_app(record)
                        .is_some_and(|link| link.record_id == app.id)
            });
            let every_type = full_access.contains(&app.id.to_string());
            let granted = authorization.map(|record| match every_type {
                true => vec![
                    "read, write and watch every type (full access, given on the server)"
                        .to_owned(),
                ],
                false => scope_words(&crate::auth::apps::granted_scope(record)),
            });
            views.push(AppView {
                id: app.id.to_string(),
                name: AppRequest::name_of(app).unwrap_or_else(|| format!("App {}", app.id)),
                description: request.as_ref().and_then(|r| r.description.clone()),
                website: request
                    .as_ref()
                    .and_then(|r| r.website_link().map(str::to_owned)),
                href: self.record_href(&app.author.entity, &app.id),
                requested: request
                    .as_ref()
                    .map(|r| scope_words(&r.scope))
                    .unwrap_or_default(),
                granted,
                authorized_at: authorization.map(|record| record.created_at.to_string()),
                deleted: app.is_tombstone(),
            });
        }
        Ok(html(
            200,
            render(&AppsPage {
                frame,
                apps: views,
                notice,
            }),
        ))
    }

    /// Revokes an app (deletes its live authorizations) or forgets it
    /// (deletes its App record: its authorizations and its Credentials
    /// record link it existentially, so the same write deletes them).
    async fn revoke(&self, app: &RecordId, forget: bool) -> Page<H::Stream> {
        let entity = &self.user.entity;
        let targets: Vec<RecordId> = if forget {
            let (app_record, _) = self
                .latest(&RecordPath {
                    entity: entity.clone(),
                    record_id: *app,
                })
                .await?;
            let live_app =
                !app_record.is_tombstone() && is_type(&app_record.type_link, BuiltinType::App);
            live_app.then_some(app_record.id).into_iter().collect()
        } else {
            self.versions_of(
                &crate::store::app_authorizations_sql(self.user.id, entity, app),
                0,
            )
            .await?
            .into_iter()
            .map(|(record, _)| record.id)
            .collect()
        };
        if !targets.is_empty() {
            let writes = targets
                .iter()
                .map(|id| {
                    WriteRequest::delete(RecordKey::new(entity.clone(), *id), b"").map(|request| {
                        RecordWrite {
                            request,
                            access: self.owner.clone(),
                            origin: WriteOrigin::default(),
                            fresh_id: self.cx.request.fresh.record_id(),
                            requested_at: self.cx.request.now,
                        }
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| logged(self.cx.host, &error))?;
            match self
                .cx
                .run_job(Job::Writes {
                    user: self.user.clone(),
                    writes,
                })
                .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(refused)) => {
                    return Err(message(
                        409,
                        Some(&self.user.name),
                        "Nothing was changed",
                        &format!(
                            "{}. Reload the page and try again.",
                            title_for_owner(Problem::from(&refused).kind)
                        ),
                    ));
                }
                Err(failure) => return Err(write_failed(self.cx.host, &self.user.name, &failure)),
            }
        }
        let done = if forget { "forgotten" } else { "revoked" };
        Ok(see_other(&self.href(&format!("/apps?done={done}")), None))
    }

    async fn change_password(&self, frame: Frame<'_>, form: &Form) -> Page<H::Stream> {
        let refuse = |error: &'static str| {
            Err(html(
                422,
                render(&AccountPage {
                    frame: frame.clone(),
                    notice: None,
                    error: Some(error),
                }),
            ))
        };
        let (current, new, again) = (
            form.get("current").unwrap_or_default(),
            form.get("new").unwrap_or_default(),
            form.get("again").unwrap_or_default(),
        );
        if let Err(error) = console::check_new_password(new, again, console::MIN_PASSWORD_CHARS) {
            return refuse(error);
        }
        // The current password is a sign-in: counted, then checked.
        if !check_password(self.cx, self.user, current).await? {
            return refuse("The current password is wrong: the password was not changed.");
        }
        let Some(hash) = self
            .cx
            .host
            .hash_password(new.to_owned(), self.cx.request.fresh.bytes())
            .await
        else {
            return Err(logged(self.cx.host, &"a new password could not be hashed"));
        };
        let now = self.cx.request.now;
        // Every session before this moment ends; this one goes on, anew.
        self.run_statement(set_password_sql(self.user.id, &hash, now.unix_millis()))
            .await?;
        self.cx.host.note(Note::PasswordChanged {
            user: &self.user.name,
        });
        // This browser's new session begins just after the mark.
        let since = crate::model::RecordDate::from_unix_millis(now.unix_millis() + 1)
            .map_err(|error| logged(self.cx.host, &error))?;
        let session = Session::signed_in(&self.user.name, self.cx.request.fresh.bytes(), since);
        let cookie = session.set_cookie(self.cx.host.session_key(), now);
        Ok(see_other(
            &self.href("/account?done=password"),
            Some(cookie),
        ))
    }

    async fn run_statement(&self, statement: Statement) -> Result<(), Reply<H::Stream>> {
        match self.cx.run_job(Job::Statements(vec![statement])).await {
            Ok(_) => Ok(()),
            Err(failure) => Err(write_failed(self.cx.host, &self.user.name, &failure)),
        }
    }
}

/// Fills a page again after a refused save: the form's fields with what
/// was typed and the errors beside them, or the JSON editor with its
/// text.
fn refill(
    page: &mut EditPage<'_>,
    fields: &[FormField],
    form: &Form,
    errors: Vec<(String, String)>,
    typed: &str,
    json_href: String,
    records: &RecordChoices,
) {
    match fields.is_empty() {
        true => page.json = typed.to_owned(),
        false => {
            page.fields = field_views(fields, &values_typed(fields, form), &errors, records);
            page.json_href = Some(json_href);
        }
    }
}

/// What the New-type form came to.
enum NewTypeOutcome {
    /// The type was written: the page of its Type record.
    Saved(String),
    /// The page again: the schema the form makes, and what became of it.
    Shown(Option<String>, Option<Result<String, String>>),
}

/// The most records a record-link field's picker offers: the newest.
const RECORD_CHOICES: usize = 50;

/// The `mode` of a form whose fields make the record's content.
const FIELDS_MODE: &str = "fields";

/// The record a save writes, as the JSON editor's text: the editor's own,
/// or with `fields`, the content the form's fields make (and the record's
/// permissions, which the form keeps); or what the fields could not read.
fn typed_record(
    fields: &[FormField],
    form: &Form,
    record: Option<&Record>,
) -> Result<String, Vec<(String, String)>> {
    if fields.is_empty() {
        return Ok(form.get("json").unwrap_or_default().to_owned());
    }
    let content = content_from_form(fields, form)?;
    let mut object = serde_json::Map::new();
    if let Some(permissions) = record.and_then(|r| editable_json(r).get("permissions").cloned()) {
        object.insert("permissions".to_owned(), permissions);
    }
    object.insert("content".to_owned(), Value::Object(content));
    Ok(pretty(&Value::Object(object)))
}

/// The field a schema violation is in, with what it says, when the form
/// has that field.
fn violation_fields(refused: &WriteRefused, fields: &[FormField]) -> Vec<(String, String)> {
    let Some(WriteError::SchemaViolation(violation)) = &refused.error else {
        return Vec::new();
    };
    let field = match (&violation.rule, field_of_path(&violation.path)) {
        (_, Some(field)) => field.to_owned(),
        (Rule::MissingProperty(name), None) if violation.path == "$['content']" => name.clone(),
        _ => return Vec::new(),
    };
    match fields.iter().any(|f| f.name == field) {
        true => vec![(field, format!("{}.", violation.rule))],
        false => Vec::new(),
    }
}

fn edit_error(problem: &Problem, latest_href: Option<&str>) -> EditError {
    match (problem.kind, latest_href) {
        (ProblemType::VersionConflict, Some(href)) => EditError {
            title: "Someone changed this record while you edited it".to_owned(),
            detail: None,
            latest_href: Some(href.to_owned()),
        },
        (ProblemType::RecordDeleted, Some(href)) => EditError {
            title: "This record was deleted while you edited it".to_owned(),
            detail: None,
            latest_href: Some(href.to_owned()),
        },
        _ => EditError {
            title: title_for_owner(problem.kind).to_owned(),
            detail: problem.detail.clone(),
            latest_href: None,
        },
    }
}

fn date_text(date: Option<crate::model::RecordDate>) -> String {
    date.map(|date| date.to_string()).unwrap_or_default()
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn html<S>(status: u16, page: String) -> Reply<S> {
    let mut reply = Reply::new(status, ReplyBody::Bytes(page.into_bytes()));
    for (name, value) in PAGE_HEADERS {
        reply.set(name, value);
    }
    reply
}

fn message<S>(status: u16, user: Option<&str>, title: &str, text: &str) -> Reply<S> {
    html(
        status,
        render(&MessagePage {
            user,
            title,
            message: text,
            next: None,
        }),
    )
}

fn see_other<S>(location: &str, set_cookie: Option<String>) -> Reply<S> {
    let reply = html(303, String::new()).with("location", location);
    match set_cookie {
        Some(cookie) => reply.with("set-cookie", cookie),
        None => reply,
    }
}

fn method_not_allowed<S>(user: &User) -> Reply<S> {
    message(
        405,
        Some(&user.name),
        "Not here",
        "This page does not take that request. Use the console's own links and buttons.",
    )
    .with("allow", "GET, HEAD, POST")
}

fn too_large<S>(user: &User) -> Reply<S> {
    message(
        413,
        Some(&user.name),
        "Too much to save",
        "What you sent is larger than the console takes.",
    )
}

fn logged<H: Host>(host: &H, error: &dyn std::fmt::Display) -> Reply<H::Stream> {
    host.report(error);
    message(
        500,
        None,
        "Something went wrong",
        "The server could not do this just now. Try again in a moment.",
    )
}

fn write_failed<H: Host>(host: &H, user: &str, failure: &WriteFailure) -> Reply<H::Stream> {
    match failure {
        WriteFailure::Failed(_) => logged(host, failure),
        WriteFailure::Busy | WriteFailure::StorageFull(_) => {
            if let WriteFailure::StorageFull(_) = failure {
                host.report(failure);
            }
            message(
                503,
                Some(user),
                "Nothing was saved",
                "The server cannot store anything just now. Try again in a moment.",
            )
            .with("retry-after", "5")
        }
    }
}
