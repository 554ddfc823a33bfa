//! The record endpoints: list, create (and app registration), read, update,
//! delete, and versions.

use sha2::{Digest, Sha256};

use crate::auth::apps::ServerKeys;
use crate::auth::register::{
    OfferedKey, RegistrationRequest, key_header_value, offered_key, registration_access,
    verify_registration,
};
use crate::auth::{AuthError, Malformed};
use crate::model::{Record, VersionHash};
use crate::problem::{Problem, ProblemType};
use crate::query::{
    Filter, FilterError, FilterFault, IncludeLinks, KnownType, ListQuery, NamedType, QueryError,
    Unfilterable, VersionsQuery, position_of, proxy_to,
};
use crate::schema::builtin::{SYSTEM_ENTITY, builtin_records};
use crate::schema::{RecordType, Schema};
use crate::service::events::parse_client_id;
use crate::service::http::check_json_content_type;
use crate::service::limits::check_body_len;
use crate::service::respond::{self, JsonAnswer, VersionRow};
use crate::service::route::{Method, RecordPath};
use crate::store::{
    WriteOrigin, latest_version_sql, list_sql, read_record, read_version, version_sql, versions_sql,
};
use crate::write::{RecordKey, WriteError, WriteRequest};

use super::federation::{Federation, MAX_RESOLUTIONS_PER_WRITE, Trouble, proxy, write_failure};

/// The `Retry-After` of a write whose link names what a server that
/// cannot be reached right now holds: a server restarting or a network
/// hiccup is usually over within seconds, and the SDK sends the write
/// again after this long.
pub(crate) const LINK_RETRY_AFTER_SECS: u64 = 5;

/// The most versions of a type a filter names that are read to check its
/// content paths; a type with more is not checked.
const MAX_TYPE_VERSIONS_CHECKED: u32 = 64;

/// `federation/503-link-unreachable` for a write `refused` for a link
/// that could not be resolved because of `trouble`: cannot reach is not
/// does not exist, and the same write may succeed later.
fn link_unreachable(refused: &Refused, trouble: &Trouble) -> Failure {
    let detail = match refused {
        Refused::Write(WriteError::InvalidLink {
            path,
            unresolved: Some(unresolved),
            ..
        }) => format!(
            "the link at {path} names {}, whose server cannot be reached now: {trouble}",
            unresolved.entity()
        ),
        _ => trouble.to_string(),
    };
    Failure::from(Problem::new(ProblemType::LinkUnreachable).with_detail(detail))
        .with("retry-after", LINK_RETRY_AFTER_SECS.to_string())
}
use crate::service::jobs::{Done, Job, RecordWrite, Refused, RegistrationJob};
use crate::service::store::version_row;
use crate::service::{
    BodyError, Caller, Context, Failure, Host, Note, Outcome, Rate, Reply, User, WriteFailure,
};

/// `POST …/records`: a create, or an app's registration when the request
/// offers a key.
pub(in crate::service) async fn post<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    body: H::Body,
) -> Outcome<H::Stream> {
    let dialect = cx.host.settings().dialect;
    let offered = match offered_key(dialect, cx.request.headers) {
        Ok(offered) => offered,
        Err(error) => {
            cx.host.discard(body).await;
            return Err(Problem::from(&error).into());
        }
    };
    if let Some(key) = offered {
        return register(cx, user, key, body).await;
    }
    let body = cx.json_body(body).await?;
    let caller = cx.writer(user, Some(&Sha256::digest(&body).into())).await?;
    let request = WriteRequest::post(&body).map_err(|e| Problem::from(&e))?;
    cx.write(user, &caller, request).await
}

/// `PUT` or `DELETE` of a record.
pub(in crate::service) async fn put_or_delete<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    record: RecordPath,
    body: H::Body,
) -> Outcome<H::Stream> {
    let body = cx.json_body(body).await?;
    let caller = cx.writer(user, Some(&Sha256::digest(&body).into())).await?;
    let key = RecordKey {
        entity: record.entity,
        record_id: record.record_id,
    };
    let request = if cx.method == Method::Put {
        WriteRequest::put(key, &body)
    } else {
        WriteRequest::delete(key, &body)
    }
    .map_err(|e| Problem::from(&e))?;
    cx.write(user, &caller, request).await
}

pub(in crate::service) async fn list<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
) -> Outcome<H::Stream> {
    let caller = cx.reader(user).await?;
    let query = ListQuery::from_params(&cx.params, &user.entity).map_err(|e| Problem::from(&e))?;
    if let Some(entity) = &query.proxy_to {
        return proxy(cx, user, &caller, entity, None).await;
    }
    cx.refuse_unmatchable(user, &query.filters).await?;
    let statement = list_sql(user.id, &query, &caller.access).statement;
    let rows = cx.versions(&statement).await?;
    let answer = respond::list_page(&query, &cx.params, rows, &user.entity, &caller.access)?;
    cx.answer(user, answer).await
}

pub(in crate::service) async fn get<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    record: &RecordPath,
) -> Outcome<H::Stream> {
    let caller = cx.reader(user).await?;
    if let Some(entity) = proxy_to(&cx.params, &user.entity).map_err(|e| Problem::from(&e))? {
        return proxy(cx, user, &caller, &entity, Some(record)).await;
    }
    let row = cx.latest(user, record).await?;
    let include = IncludeLinks::from_request(&cx.params, None);
    let answer = respond::one_record(row, include, &user.entity, &caller.access)??;
    cx.answer(user, answer).await
}

pub(in crate::service) async fn version<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    record: &RecordPath,
    hash: &VersionHash,
) -> Outcome<H::Stream> {
    let caller = cx.reader(user).await?;
    let row = cx
        .versions(&version_sql(
            user.id,
            &record.entity,
            &record.record_id,
            hash,
        ))
        .await?
        .into_iter()
        .next();
    let include = IncludeLinks::from_request(&cx.params, None);
    let answer = respond::one_record(row, include, &user.entity, &caller.access)??;
    cx.answer(user, answer).await
}

pub(in crate::service) async fn versions<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    record: &RecordPath,
) -> Outcome<H::Stream> {
    let caller = cx.reader(user).await?;
    let query = VersionsQuery::from_params(&cx.params).map_err(|e| Problem::from(&e))?;
    let latest = match cx.latest(user, record).await? {
        Some((record, links)) => Some(read_version(&record, &links)?.0),
        None => None,
    };
    let rows = cx
        .versions(&query.statement(user.id, &record.entity, &record.record_id))
        .await?;
    let answer = query.page(
        &cx.params,
        latest.as_ref(),
        rows,
        &user.entity,
        &caller.access,
    )??;
    cx.answer(user, answer).await
}

/// An app's registration (PROTOCOL.md §10): verified against the key it
/// offers, stored as one job, answered with the server's key in the header
/// the app used.
async fn register<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    key: OfferedKey,
    body: H::Body,
) -> Outcome<H::Stream> {
    if let Err(limited) = cx.rate(Rate::Registration(cx.request.peer)).await {
        cx.host.discard(body).await;
        return Err(limited.into());
    }
    let limit = cx.host.settings().limits.registration_body_bytes();
    let body = cx.json_body_within(body, limit).await?;
    let host = cx.host;
    let authorization = match cx.request.headers.header("authorization") {
        Some(value) => Some(
            std::str::from_utf8(value)
                .map_err(|_| Problem::from(&AuthError::Malformed(Malformed::Syntax { at: 0 })))?,
        ),
        None => None,
    };
    let body_sha256: [u8; 32] = Sha256::digest(&body).into();
    let request = RegistrationRequest {
        dialect: host.settings().dialect,
        authorization,
        signed: cx.request.signed(),
        headers: cx.request.headers,
        body: &body,
        body_sha256: &body_sha256,
    };
    let now = cx.request.now;
    let registration = verify_registration(&request, key, now).map_err(|e| Problem::from(&e))?;
    cx.check_replay(
        user,
        registration.app_id,
        &registration.nonce,
        registration.ts_ms,
        true,
    )
    .await?;
    let answer_header = registration.key.header;
    let fresh = &cx.request.fresh;
    let job = RegistrationJob {
        registration,
        credentials_id: fresh.record_id(),
        server_keys: ServerKeys::from_seed(fresh.bytes()),
        requested_at: now,
    };
    let Done::Registered(registered) = cx
        .run(Job::Registration {
            user: user.clone(),
            registration: Box::new(job),
        })
        .await?
    else {
        return Err(Failure::internal("a registration stored no App record"));
    };
    let app_record = registered.written.answer;
    host.note(Note::Registered {
        user: &user.name,
        app: &app_record.record.id,
    });
    let answer = respond::written(
        app_record.record,
        app_record.entries,
        IncludeLinks::from_request(&cx.params, None),
        &user.entity,
        &registration_access(&user.entity),
    );
    Ok(cx.answer(user, answer).await?.with(
        answer_header.lowercase,
        key_header_value(&registered.server_public_key),
    ))
}

impl<H: Host> Context<'_, '_, H> {
    /// A JSON body, within the body limit and with a JSON content type.
    pub(in crate::service) async fn json_body(&self, body: H::Body) -> Result<Vec<u8>, Failure> {
        let limit = self.host.settings().limits.json_body_bytes;
        self.json_body_within(body, limit).await
    }

    /// A JSON body of at most `limit` bytes (`None`: any size).
    pub(in crate::service) async fn json_body_within(
        &self,
        body: H::Body,
        limit: Option<u64>,
    ) -> Result<Vec<u8>, Failure> {
        let host = self.host;
        let declared = self
            .request
            .header("content-length")
            .and_then(|value| value.parse::<u64>().ok());
        if let Some(Err(problem)) = declared.map(|declared| check_body_len(declared, limit)) {
            host.discard(body).await;
            return Err(problem.into());
        }
        let max = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let bytes = host
            .read_body(body, max)
            .await
            .map_err(|error| match error {
                BodyError::TooLarge => Problem::new(ProblemType::BodyTooLarge)
                    .with_detail(format!("a JSON body may hold at most {max} bytes")),
                BodyError::Broken => {
                    Problem::new(ProblemType::InvalidBody).with_detail("the body ended early")
                }
            })?;
        check_json_content_type(self.request.header("content-type"), !bytes.is_empty())?;
        Ok(bytes)
    }

    /// Rows of `(record, links)`.
    pub(in crate::service) async fn versions(
        &self,
        statement: &crate::store::Statement,
    ) -> Result<Vec<VersionRow>, Failure> {
        let rows = self.fetch(statement).await?;
        Ok(rows
            .iter()
            .map(|row| version_row(row))
            .collect::<Result<_, _>>()?)
    }

    /// The latest version of a record, whatever its state.
    pub(in crate::service) async fn latest(
        &self,
        user: &User,
        record: &RecordPath,
    ) -> Result<Option<VersionRow>, Failure> {
        Ok(self
            .versions(&latest_version_sql(
                user.id,
                &record.entity,
                &record.record_id,
            ))
            .await?
            .into_iter()
            .next())
    }

    /// Refuses the first filter with a condition no record can match
    /// (`query::Filter::unfilterable`, PROTOCOL.md §7) as
    /// `request/400-invalid-filter`, pointing at the condition and saying
    /// what can be filtered. A filter's content paths are checked against
    /// the types it names, read from the store only when it names a type and
    /// a content path.
    pub(in crate::service) async fn refuse_unmatchable(
        &self,
        user: &User,
        filters: &[Filter],
    ) -> Result<(), Failure> {
        for (index, filter) in filters.iter().enumerate() {
            let Some(unfilterable) = self.unmatchable(user, filter).await? else {
                continue;
            };
            let text = self
                .params
                .iter()
                .filter(|(name, _)| name == "filter")
                .nth(index)
                .map_or("", |(_, text)| text.as_str());
            let error = QueryError::InvalidFilter {
                index,
                error: FilterError {
                    position: position_of(text, &unfilterable.path),
                    fault: FilterFault::CannotMatch(Box::new(unfilterable)),
                },
            };
            return Err(Problem::from(&error).into());
        }
        Ok(())
    }

    /// The first condition of `filter` no record of `user`'s store can
    /// match (`query::Filter::unfilterable`).
    pub(in crate::service) async fn unmatchable(
        &self,
        user: &User,
        filter: &Filter,
    ) -> Result<Option<Unfilterable>, Failure> {
        if let Some(found) = filter.unfilterable(&[]) {
            return Ok(Some(found));
        }
        let Some(named) = filter.named_types().filter(|_| filter.names_content()) else {
            return Ok(None);
        };
        let mut types = Vec::with_capacity(named.len());
        for named in &named {
            match self.named_type(user, named).await? {
                Some(known) => types.push(known),
                None => return Ok(None),
            }
        }
        let known: Vec<KnownType<'_>> = types
            .iter()
            .map(|(name, schemas)| KnownType { name, schemas })
            .collect();
        Ok(filter.unfilterable(&known))
    }

    /// A type a filter names: its name and the schema of each version whose
    /// records the filter can match (the one named, or every one); `None`
    /// when the store does not hold them all (an unknown type, one with more
    /// than [`MAX_TYPE_VERSIONS_CHECKED`] versions).
    async fn named_type(
        &self,
        user: &User,
        named: &NamedType,
    ) -> Result<Option<(String, Vec<Schema>)>, Failure> {
        let records: Vec<Record> = if named.entity.as_str() == SYSTEM_ENTITY {
            builtin_records()
                .iter()
                .filter(|r| r.id == named.record_id)
                .filter(|r| named.version_hash.is_none_or(|h| h == r.version.hash))
                .cloned()
                .collect()
        } else {
            let statement = match named.version_hash {
                Some(hash) => version_sql(user.id, &named.entity, &named.record_id, &hash),
                None => versions_sql(
                    user.id,
                    &named.entity,
                    &named.record_id,
                    None,
                    MAX_TYPE_VERSIONS_CHECKED,
                ),
            };
            let rows = self.versions(&statement).await?;
            if rows.len() > MAX_TYPE_VERSIONS_CHECKED as usize {
                return Ok(None);
            }
            rows.iter()
                .map(|(record, _)| read_record(record))
                .collect::<Result<_, _>>()?
        };
        let mut name = None;
        let mut schemas = Vec::with_capacity(records.len());
        for record in &records {
            let Some(content) = record.content() else {
                continue;
            };
            let Ok(record_type) = RecordType::from_content(content.as_value()) else {
                return Ok(None);
            };
            name = Some(record_type.name);
            schemas.push(record_type.schema);
        }
        Ok(name.map(|name| (name, schemas)))
    }

    /// The JSON answer of a read or write, with the linked records it includes.
    async fn answer(&self, user: &User, answer: JsonAnswer) -> Outcome<H::Stream> {
        let linked = match answer.links_statement(user.id) {
            Some(statement) => self.versions(&statement).await?,
            None => Vec::new(),
        };
        let body = answer.finish(linked)?;
        Ok(Reply::json(200, body))
    }

    /// A write failure's problem: busy is `server/503-unavailable`.
    pub(in crate::service) fn write_failure(&self, failure: &WriteFailure) -> Failure {
        write_failure(failure)
    }

    /// Runs a record write; when it fails only because the store lacks
    /// another entity's entity, record or version that a link names, that
    /// is fetched from its server and the write runs again, at most
    /// [`MAX_RESOLUTIONS_PER_WRITE`] times (`docs/federation.md` §3). A
    /// link that still does not resolve is `record/400-invalid-link`, its
    /// detail saying what the other server answered; one whose server
    /// cannot be reached right now is `federation/503-link-unreachable`.
    async fn run_resolving(&self, user: &User, job: Job) -> Result<Done, Failure> {
        let federation = Federation::for_request(self.host, user, self.request);
        let mut resolutions = 0;
        loop {
            let refused = match self.run_job(job.clone()).await {
                Err(failure) => return Err(self.write_failure(&failure)),
                Ok(Ok(done)) => return Ok(done),
                Ok(Err(refused)) => refused,
            };
            let Refused::Write(WriteError::InvalidLink {
                unresolved: Some(unresolved),
                ..
            }) = &refused
            else {
                return Err(Problem::from(&refused).into());
            };
            if resolutions == MAX_RESOLUTIONS_PER_WRITE {
                return Err(Problem::from(&refused).into());
            }
            resolutions += 1;
            if let Err(trouble) = federation.resolve(unresolved).await {
                if let Trouble::Failure(failure) = trouble {
                    return Err(failure);
                }
                if trouble.is_out_of_reach() {
                    return Err(link_unreachable(&refused, &trouble));
                }
                let problem = Problem::from(&refused);
                let detail = match problem.detail.as_deref() {
                    Some(detail) => format!("{detail} ({trouble})"),
                    None => trouble.to_string(),
                };
                return Err(problem.with_detail(detail).into());
            }
        }
    }

    /// Runs the request's one job: what it stored, or the problem of a
    /// refusal or a failure.
    pub(in crate::service) async fn run(&self, job: Job) -> Result<Done, Failure> {
        self.run_job(job)
            .await
            .map_err(|e| self.write_failure(&e))?
            .map_err(|refused| Problem::from(&refused).into())
    }

    async fn write(
        &self,
        user: &User,
        caller: &Caller,
        request: WriteRequest,
    ) -> Outcome<H::Stream> {
        let dialect = self.host.settings().dialect;
        let client_id = parse_client_id(
            self.request
                .headers
                .header(dialect.names().client_id.lowercase),
        )?;
        let include = IncludeLinks::from_request(&self.params, request.include_links());
        let write = RecordWrite {
            request,
            access: caller.access.clone(),
            origin: WriteOrigin {
                client_id,
                app: caller.access.grant().and_then(|grant| grant.app_record),
            },
            fresh_id: self.request.fresh.record_id(),
            requested_at: self.request.now,
        };
        let job = Job::Writes {
            user: user.clone(),
            writes: vec![write],
        };
        let Done::Written(written) = self.run_resolving(user, job).await? else {
            return Err(Failure::internal("a record write stored no version"));
        };
        let answer = respond::written(
            written.answer.record,
            written.answer.entries,
            include,
            &user.entity,
            &caller.access,
        );
        self.answer(user, answer).await
    }
}
