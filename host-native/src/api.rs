//! The API: one handler that routes every request through core's table,
//! authenticates it, runs the endpoint and adds the headers every response
//! carries. Each endpoint is glue: it fetches what core asks for and sends
//! what core answers.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::Response;
use folio_core::access::Access;
use folio_core::apps::ServerKeys;
use folio_core::auth::{AuthError, Malformed, SignedRequest, check_body_digest};
use folio_core::blob::{
    ACCEPT_RANGES, RangeAnswer, UploadResponse, blob_audience, check_upload_content_type,
    check_upload_length, content_disposition, content_range, find_indexed_blob_link, parse_range,
    unsatisfied_content_range,
};
use folio_core::discovery::{discovery_link, entity_record_url, server_info_json, user_for_host};
use folio_core::docs::{ERROR_TYPE_PAGE_CONTENT_TYPE, error_type_page};
use folio_core::events::parse_client_id;
use folio_core::http::{NO_CACHE, blob_cache_control, check_json_content_type};
use folio_core::limits::{
    check_body_len, check_header_bytes, check_request_target, header_section_len,
};
use folio_core::model::{BlobHash, RecordId};
use folio_core::problem::{Problem, ProblemType};
use folio_core::query::{IncludeLinks, ListQuery, VersionsQuery, decode_query_string};
use folio_core::register::{
    OfferedKey, RegistrationRequest, key_header_value, offered_key, registration_access,
    verify_registration,
};
use folio_core::respond::{self, Answer};
use folio_core::route::{BlobPath, Endpoint, Method, RecordPath, route};
use folio_core::store::{
    WriteOrigin, entity_record_sql, latest_version_sql, list_sql, read_version, upload_blob_sql,
    version_sql,
};
use folio_core::write::{RecordKey, WriteError, WriteRequest};
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::auth::{Caller, Headers, Presented, authenticate, check_replay};
use crate::db;
use crate::server::App;
use crate::users::{User, list_users};
use crate::writer::{RecordWrite, RegistrationJob, WriterError};

/// A failed request: its problem, and the headers some problems carry.
pub struct Failure {
    problem: Problem,
    headers: Vec<(header::HeaderName, HeaderValue)>,
}

impl From<Problem> for Failure {
    fn from(problem: Problem) -> Self {
        Failure {
            problem,
            headers: Vec::new(),
        }
    }
}

impl Failure {
    pub fn with_header(mut self, name: header::HeaderName, value: impl ToString) -> Self {
        if let Ok(value) = HeaderValue::from_str(&value.to_string()) {
            self.headers.push((name, value));
        }
        self
    }
}

type Outcome = Result<Response, Failure>;

/// Every request of the HTTPS listener.
pub async fn handle(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let preflight = request.method() == http::Method::OPTIONS;
    let mut response = match dispatch(&app, peer, request).await {
        Ok(response) => response,
        Err(failure) => {
            let mut response = app.problem(&failure.problem);
            response.headers_mut().extend(failure.headers);
            response
        }
    };
    let headers = response.headers_mut();
    if !preflight {
        for (name, value) in app.dialect.cors_headers() {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static(NO_CACHE));
    response
}

/// What every endpoint knows of its request.
struct Context<'r> {
    app: &'r App,
    peer: SocketAddr,
    method: Method,
    target: String,
    host: String,
    port: u16,
    headers: HeaderMap,
    params: Vec<(String, String)>,
}

async fn dispatch(app: &App, peer: SocketAddr, request: Request) -> Outcome {
    let (parts, body) = request.into_parts();
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
    check_request_target(target.len(), &app.limits)?;
    check_header_bytes(
        header_section_len(
            parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_bytes())),
        ),
        &app.limits,
    )?;
    if parts.method == http::Method::OPTIONS {
        let mut response = empty(StatusCode::NO_CONTENT);
        for (name, value) in app.dialect.preflight_headers() {
            response
                .headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        return Ok(response);
    }
    let endpoint = route(parts.uri.path())?;
    let method = Method::parse(parts.method.as_str()).ok_or_else(|| {
        Failure::from(Problem::new(ProblemType::MethodNotAllowed))
            .with_header(header::ALLOW, endpoint.allow())
    })?;
    endpoint
        .check_method(method)
        .map_err(|p| Failure::from(p).with_header(header::ALLOW, endpoint.allow()))?;
    let (host, port) = host_and_port(&parts.uri, &parts.headers);
    let params = decode_query_string(parts.uri.query().unwrap_or_default())
        .map_err(|e| Problem::from(&e))?;
    let cx = Context {
        app,
        peer,
        method,
        target,
        host,
        port,
        headers: parts.headers,
        params,
    };
    let user = match endpoint.user() {
        Some(name) => {
            let found = app
                .users
                .get(&app.readers, name)
                .await
                .map_err(|e| app.internal(&e))?;
            if found.is_none() && matches!(endpoint, Endpoint::Consent { .. }) {
                // A person reads this one: a page, not problem+json.
                return Ok(crate::consent::not_found());
            }
            Some(found.ok_or_else(|| {
                Problem::new(ProblemType::NotFound).with_detail(format!("no user `{name}` here"))
            })?)
        }
        None => None,
    };
    let head = method == Method::Head;
    let response = match (endpoint, user) {
        (Endpoint::Discovery, _) => discovery(&cx).await,
        (Endpoint::ErrorType { type_path }, _) => error_type(&type_path),
        (Endpoint::Consent { app: app_id, .. }, Some(user)) => {
            let request = crate::consent::ConsentRequest {
                app,
                peer: cx.peer.ip(),
                post: method == Method::Post,
                headers: &cx.headers,
                user: &user,
                app_id,
            };
            Ok(crate::consent::consent(request, body).await)
        }
        (Endpoint::NewNotification { .. }, Some(_)) => {
            Err(Problem::new(ProblemType::NotImplemented).into())
        }
        (Endpoint::ServerInfo { .. }, Some(_)) => Ok(json(
            StatusCode::OK,
            server_info_json(env!("CARGO_PKG_VERSION"), &app.limits),
        )),
        (Endpoint::Records { .. }, Some(user)) if method == Method::Post => {
            let offered =
                offered_key(app.dialect, &Headers(&cx.headers)).map_err(|e| Problem::from(&e))?;
            if let Some(key) = offered {
                return register(&cx, &user, key, body).await;
            }
            let body = json_body(&cx, body).await?;
            let caller = writer_caller(&cx, &user, Some(&body)).await?;
            let request = WriteRequest::post(&body).map_err(|e| Problem::from(&e))?;
            write(&cx, &user, &caller, request).await
        }
        (Endpoint::Records { .. }, Some(user)) => list(&cx, &user).await,
        (Endpoint::Record { record, .. }, Some(user)) => match method {
            Method::Put | Method::Delete => {
                let body = json_body(&cx, body).await?;
                let caller = writer_caller(&cx, &user, Some(&body)).await?;
                let key = RecordKey {
                    entity: record.entity,
                    record_id: record.record_id,
                };
                let request = if method == Method::Put {
                    WriteRequest::put(key, &body)
                } else {
                    WriteRequest::delete(key, &body)
                }
                .map_err(|e| Problem::from(&e))?;
                write(&cx, &user, &caller, request).await
            }
            _ => get_record(&cx, &user, &record).await,
        },
        (Endpoint::RecordVersions { record, .. }, Some(user)) => {
            versions(&cx, &user, &record).await
        }
        (Endpoint::RecordVersion { record, hash, .. }, Some(user)) => {
            let caller = reader(&cx, &user).await?;
            let row = db::fetch_versions(
                &app.readers,
                &version_sql(user.id, &record.entity, &record.record_id, &hash),
                0,
            )
            .await
            .map_err(|e| app.internal(&e))?
            .into_iter()
            .next();
            let include = IncludeLinks::from_request(&cx.params, None);
            let answer = respond::one_record(row, include, &user.entity, &caller.access)
                .map_err(|e| app.internal(&e))??;
            answer_json(&cx, &user, answer).await
        }
        (
            Endpoint::RecordBlob {
                record,
                version,
                blob,
                ..
            },
            Some(user),
        ) => download(&cx, &user, &record, version, &blob).await,
        (Endpoint::NewBlob { .. }, Some(user)) => upload(&cx, &user, body).await,
        (Endpoint::Events { .. }, Some(user)) => {
            crate::stream::events(&cx.stream_request(), &user).await
        }
        (_, None) => Err(Problem::new(ProblemType::NotFound).into()),
    };
    let mut response = response?;
    if head {
        *response.body_mut() = Body::empty();
    }
    Ok(response)
}

/// `host` without port, and the explicit port else 443 (PROTOCOL.md §10).
fn host_and_port(uri: &http::Uri, headers: &HeaderMap) -> (String, u16) {
    let host_header = || {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<http::uri::Authority>().ok())
    };
    match uri.authority().cloned().or_else(host_header) {
        Some(authority) => (
            authority.host().to_ascii_lowercase(),
            SignedRequest::port_of(authority.port_u16()),
        ),
        None => (String::new(), SignedRequest::port_of(None)),
    }
}

fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

fn json(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

impl Context<'_> {
    fn presented(&self, body_sha256: Option<[u8; 32]>) -> Presented<'_> {
        Presented {
            method: self.method.as_str(),
            path_and_query: &self.target,
            host: &self.host,
            port: self.port,
            headers: &self.headers,
            body_sha256,
        }
    }

    fn stream_request(&self) -> crate::stream::StreamRequest<'_> {
        crate::stream::StreamRequest {
            app: self.app,
            presented: self.presented(None),
            params: &self.params,
            peer: self.peer,
        }
    }
}

/// The caller of a read; unauthenticated reads count against their address's rate.
async fn reader(cx: &Context<'_>, user: &User) -> Result<Caller, Failure> {
    let caller = authenticate(cx.app, user, &cx.presented(None)).await?;
    if matches!(caller.access, Access::Anonymous) {
        limited(cx.app.rates.anonymous_read(&cx.peer.ip()))?;
    }
    Ok(caller)
}

pub fn limited(result: Result<(), crate::rate::Limited>) -> Result<(), Failure> {
    result.map_err(|limited| {
        Failure::from(limited.problem).with_header(header::RETRY_AFTER, limited.retry_after_secs)
    })
}

/// The caller of a write: an authorized app within its write rate.
async fn writer_caller(
    cx: &Context<'_>,
    user: &User,
    body: Option<&[u8]>,
) -> Result<Caller, Failure> {
    let digest = body.map(|b| Sha256::digest(b).into());
    let caller = authenticate(cx.app, user, &cx.presented(digest)).await?;
    // A bearer token authenticates GETs only, so a writer always signed.
    let Some(app_id) = caller.app else {
        return Err(Problem::new(ProblemType::MissingAuthorization).into());
    };
    limited(cx.app.rates.write(&app_id))?;
    Ok(caller)
}

/// A JSON body, within the body limit and with a JSON content type.
async fn json_body(cx: &Context<'_>, body: Body) -> Result<Vec<u8>, Failure> {
    let limit = cx.app.limits.json_body_bytes;
    let declared = cx
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(Err(problem)) = declared.map(|declared| check_body_len(declared, limit)) {
        drain(body).await;
        return Err(problem.into());
    }
    let max = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let mut body = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|_| {
            Problem::new(ProblemType::InvalidBody).with_detail("the body ended early")
        })?;
        if bytes.len() + chunk.len() > max {
            drain(Body::from_stream(body)).await;
            return Err(Problem::new(ProblemType::BodyTooLarge)
                .with_detail(format!("a JSON body may hold at most {max} bytes"))
                .into());
        }
        bytes.extend_from_slice(&chunk);
    }
    let content_type = cx
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    check_json_content_type(content_type, !bytes.is_empty())?;
    Ok(bytes)
}

/// How much of a refused body is read and dropped before the answer, so
/// that the client, still sending, receives the problem+json instead of a
/// reset connection. A larger body is cut off.
const MAX_DRAINED_BYTES: usize = 16 << 20;

async fn drain(body: Body) {
    let mut stream = body.into_data_stream();
    let mut drained = 0;
    while drained < MAX_DRAINED_BYTES {
        match stream.next().await {
            Some(Ok(chunk)) => drained += chunk.len(),
            _ => break,
        }
    }
}

async fn answer_json(cx: &Context<'_>, user: &User, answer: Answer) -> Outcome {
    let app = cx.app;
    let linked = match answer.links_statement(user.id) {
        Some(statement) => db::fetch_versions(&app.readers, &statement, 0)
            .await
            .map_err(|e| app.internal(&e))?,
        None => Vec::new(),
    };
    let body = answer.finish(linked).map_err(|e| app.internal(&e))?;
    Ok(json(StatusCode::OK, body))
}

async fn list(cx: &Context<'_>, user: &User) -> Outcome {
    let caller = reader(cx, user).await?;
    let query = ListQuery::from_params(&cx.params, &user.entity).map_err(|e| Problem::from(&e))?;
    let statement = list_sql(user.id, &query, &caller.access).statement;
    let rows = db::fetch_versions(&cx.app.readers, &statement, 0)
        .await
        .map_err(|e| cx.app.internal(&e))?;
    let answer = respond::list_page(&query, &cx.params, rows, &user.entity, &caller.access)
        .map_err(|e| cx.app.internal(&e))?;
    answer_json(cx, user, answer).await
}

async fn latest(
    cx: &Context<'_>,
    user: &User,
    record: &RecordPath,
) -> Result<Option<(String, String)>, Failure> {
    Ok(db::fetch_versions(
        &cx.app.readers,
        &latest_version_sql(user.id, &record.entity, &record.record_id),
        0,
    )
    .await
    .map_err(|e| cx.app.internal(&e))?
    .into_iter()
    .next())
}

async fn get_record(cx: &Context<'_>, user: &User, record: &RecordPath) -> Outcome {
    let caller = reader(cx, user).await?;
    let row = latest(cx, user, record).await?;
    let include = IncludeLinks::from_request(&cx.params, None);
    let answer = respond::one_record(row, include, &user.entity, &caller.access)
        .map_err(|e| cx.app.internal(&e))??;
    answer_json(cx, user, answer).await
}

async fn versions(cx: &Context<'_>, user: &User, record: &RecordPath) -> Outcome {
    let caller = reader(cx, user).await?;
    let query = VersionsQuery::from_params(&cx.params).map_err(|e| Problem::from(&e))?;
    let latest = match latest(cx, user, record).await? {
        Some((record, links)) => Some(
            read_version(&record, &links)
                .map_err(|e| cx.app.internal(&e))?
                .0,
        ),
        None => None,
    };
    let rows = db::fetch_versions(
        &cx.app.readers,
        &query.statement(user.id, &record.entity, &record.record_id),
        0,
    )
    .await
    .map_err(|e| cx.app.internal(&e))?;
    let answer = query
        .page(
            &cx.params,
            latest.as_ref(),
            rows,
            &user.entity,
            &caller.access,
        )
        .map_err(|e| cx.app.internal(&e))??;
    answer_json(cx, user, answer).await
}

async fn write(cx: &Context<'_>, user: &User, caller: &Caller, request: WriteRequest) -> Outcome {
    let app = cx.app;
    let client_id = parse_client_id(
        cx.headers
            .get(app.dialect.names().client_id.lowercase)
            .map(HeaderValue::as_bytes),
    )?;
    let include = IncludeLinks::from_request(&cx.params, request.include_links());
    let stored = app
        .writer
        .write(RecordWrite {
            user: user.clone(),
            request,
            access: caller.access.clone(),
            origin: WriteOrigin { client_id },
        })
        .await
        .map_err(|error| writer_failure(app, &error))?
        .map_err(|error: WriteError| Problem::from(&error))?;
    let answer = respond::written(
        stored.record,
        stored.entries,
        include,
        &user.entity,
        &caller.access,
    );
    answer_json(cx, user, answer).await
}

/// An app's registration (PROTOCOL.md §10): verified by core against the
/// key it offers, stored by the writer, answered with the server's key in
/// the header the app used.
async fn register(cx: &Context<'_>, user: &User, key: OfferedKey, body: Body) -> Outcome {
    let app = cx.app;
    limited(app.rates.registration(&cx.peer.ip()))?;
    let body = json_body(cx, body).await?;
    let authorization = match cx.headers.get(header::AUTHORIZATION) {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| Problem::from(&AuthError::Malformed(Malformed::Syntax { at: 0 })))?,
        ),
        None => None,
    };
    let body_sha256: [u8; 32] = Sha256::digest(&body).into();
    let request = RegistrationRequest {
        dialect: app.dialect,
        authorization,
        signed: SignedRequest {
            method: cx.method.as_str(),
            path_and_query: &cx.target,
            host: &cx.host,
            port: cx.port,
        },
        headers: &Headers(&cx.headers),
        body: &body,
        body_sha256: &body_sha256,
    };
    let now = app.clock.now();
    let registration = verify_registration(&request, key, now).map_err(|e| Problem::from(&e))?;
    check_replay(
        app,
        registration.app_id,
        &registration.nonce,
        registration.ts_ms,
        now,
    )?;
    let answer_header = registration.key.header;
    let registered = app
        .writer
        .register(RegistrationJob {
            user: user.clone(),
            registration,
            credentials_id: RecordId::from_bytes(rand::random()),
            server_keys: ServerKeys::from_seed(rand::random()),
        })
        .await
        .map_err(|error| writer_failure(app, &error))?
        .map_err(|error| Problem::from(&error))?;
    tracing::info!(user = %user.name, app = %registered.app_record.record.id, "registered an app");
    let answer = respond::written(
        registered.app_record.record,
        registered.app_record.entries,
        IncludeLinks::from_request(&cx.params, None),
        &user.entity,
        &registration_access(&user.entity),
    );
    let mut response = answer_json(cx, user, answer).await?;
    if let Ok(value) = HeaderValue::from_str(&key_header_value(&registered.server_public_key)) {
        response.headers_mut().insert(
            header::HeaderName::from_static(answer_header.lowercase),
            value,
        );
    }
    Ok(response)
}

fn writer_failure(app: &App, error: &WriterError) -> Failure {
    match error {
        WriterError::Busy => Failure::from(
            Problem::new(ProblemType::Unavailable).with_detail("too many writes are waiting"),
        )
        .with_header(header::RETRY_AFTER, 1),
        other => app.internal(other).into(),
    }
}

async fn discovery(cx: &Context<'_>) -> Outcome {
    let app = cx.app;
    let users = list_users(&app.readers)
        .await
        .map_err(|e| app.internal(&e))?;
    let user = user_for_host(&cx.host, &users, |u| &u.entity).ok_or_else(|| {
        Problem::new(ProblemType::NotFound).with_detail("no user's entity is served at this host")
    })?;
    let row = db::fetch_versions(&app.readers, &entity_record_sql(user.id, &user.entity), 0)
        .await
        .map_err(|e| app.internal(&e))?
        .into_iter()
        .next()
        .ok_or_else(|| app.internal(&"a user has no Entity record"))?;
    let (record, _) = read_version(&row.0, &row.1).map_err(|e| app.internal(&e))?;
    let url = entity_record_url(&app.base_url, &user.name, &user.entity, &record.id);
    let mut response = empty(StatusCode::NO_CONTENT);
    if let Ok(value) = HeaderValue::from_str(&discovery_link(app.dialect, &url)) {
        response.headers_mut().insert(header::LINK, value);
    }
    Ok(response)
}

fn error_type(type_path: &str) -> Outcome {
    let page = error_type_page(type_path).ok_or_else(|| Problem::new(ProblemType::NotFound))?;
    let mut response = Response::new(Body::from(page));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(ERROR_TYPE_PAGE_CONTENT_TYPE),
    );
    Ok(response)
}

async fn download(
    cx: &Context<'_>,
    user: &User,
    record: &RecordPath,
    version: Option<folio_core::model::VersionHash>,
    blob: &BlobPath,
) -> Outcome {
    let app = cx.app;
    let caller = reader(cx, user).await?;
    let row = match version {
        None => latest(cx, user, record).await?,
        Some(hash) => db::fetch_versions(
            &app.readers,
            &version_sql(user.id, &record.entity, &record.record_id, &hash),
            0,
        )
        .await
        .map_err(|e| app.internal(&e))?
        .into_iter()
        .next(),
    };
    let Some((row_record, row_links)) = row else {
        return Err(Problem::new(ProblemType::RecordNotFound).into());
    };
    let (found, entries) = read_version(&row_record, &row_links).map_err(|e| app.internal(&e))?;
    if !caller.access.can_read(&found) {
        return Err(Problem::new(ProblemType::RecordNotFound).into());
    }
    let not_found = || Failure::from(Problem::new(ProblemType::BlobNotFound));
    let link = find_indexed_blob_link(&found, &entries, &blob.hash, blob.file_name.as_str())
        .ok_or_else(not_found)?;
    let path = app.blobs.path(&blob.hash.to_string());
    let mut file = tokio::fs::File::open(&path)
        .await
        .map_err(|_| not_found())?;
    let size = file.metadata().await.map_err(|e| app.internal(&e))?.len();
    let range = parse_range(
        cx.headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        size,
    );
    let (status, start, len) = match range {
        RangeAnswer::Whole => (StatusCode::OK, 0, size),
        RangeAnswer::Partial {
            start,
            end_inclusive,
        } => (
            StatusCode::PARTIAL_CONTENT,
            start,
            end_inclusive - start + 1,
        ),
        RangeAnswer::Unsatisfiable => {
            return Err(
                Failure::from(Problem::new(ProblemType::RangeNotSatisfiable))
                    .with_header(header::CONTENT_RANGE, unsatisfied_content_range(size)),
            );
        }
    };
    file.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(|e| app.internal(&e))?;
    let stream = tokio_util::io::ReaderStream::new(file.take(len));
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = status;
    let now = app.clock.now();
    let headers = response.headers_mut();
    let mut set = |name: header::HeaderName, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set(header::CONTENT_TYPE, link.media_type.as_str().to_owned());
    set(header::CONTENT_LENGTH, len.to_string());
    set(
        header::CONTENT_DISPOSITION,
        content_disposition(&blob.file_name),
    );
    set(header::ACCEPT_RANGES, ACCEPT_RANGES.to_owned());
    set(
        header::CACHE_CONTROL,
        blob_cache_control(blob_audience(&found, caller.bearer_expiry, now)),
    );
    if let RangeAnswer::Partial {
        start,
        end_inclusive,
    } = range
    {
        set(
            header::CONTENT_RANGE,
            content_range(start, end_inclusive, size),
        );
    }
    Ok(response)
}

async fn upload(cx: &Context<'_>, user: &User, body: Body) -> Outcome {
    let app = cx.app;
    let checked = async {
        let caller = writer_caller(cx, user, None).await?;
        check_upload_content_type(
            cx.headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        )?;
        let declared = cx
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        Ok::<_, Failure>((caller, check_upload_length(declared, &app.limits)?))
    }
    .await;
    let (caller, declared) = match checked {
        Ok(checked) => checked,
        Err(failure) => {
            drain(body).await;
            return Err(failure);
        }
    };
    let (tmp, uploaded) = app
        .blobs
        .receive(body, declared)
        .await
        .map_err(|error| match error {
            crate::blobs::UploadError::Io(e) => Failure::from(app.internal(&e)),
            other => {
                Failure::from(Problem::new(ProblemType::InvalidBody).with_detail(other.to_string()))
            }
        })?;
    let hash: BlobHash = uploaded
        .hash
        .parse()
        .map_err(|_| app.internal(&"a SHA-256 is a hash"))?;
    if let Err(error) = check_body_digest(caller.signed_content_sha256, hash.as_bytes()) {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(Problem::from(&error).into());
    }
    let now = app.clock.now();
    let response = UploadResponse::new(hash, uploaded.size, now);
    {
        let _placing = app.blobs.lock().await;
        app.blobs
            .place(tmp, &uploaded.hash)
            .await
            .map_err(|e| app.internal(&e))?;
        app.writer
            .execute(vec![upload_blob_sql(
                user.id,
                &uploaded.hash,
                uploaded.size,
                now,
                folio_core::blob::upload_expiry(now),
            )])
            .await
            .map_err(|e| writer_failure(app, &e))?;
    }
    Ok(json(StatusCode::OK, response.to_json()))
}
