//! [`handle`]: routing a request to its endpoint, and the headers every
//! answer carries.

use crate::problem::{Problem, ProblemType};
use crate::query::decode_query_string;
use crate::service::discovery::{
    discovery_link, entity_record_url, server_info_json, user_for_host,
};
use crate::service::docs::{ERROR_TYPE_PAGE_CONTENT_TYPE, error_type_page};
use crate::service::http::{NO_CACHE, NOSNIFF, PREFLIGHT_STATUS, strict_transport_security};
use crate::service::limits::{check_header_bytes, check_request_target};
use crate::service::route::{Endpoint, Method, route};
use crate::store::{entity_record_sql, read_version};

use store::version_row;

use super::observe::NotificationReceipt;
use super::request::UNROUTED;
use super::route::NOTIFICATIONS_ROUTE;
use super::{Context, Failure, Host, Outcome, Reply, ReplyBody, Request, endpoints, store};

/// Answers one request; `body` is its body, unread.
pub async fn handle<H: Host>(host: &H, request: Request<'_>, body: H::Body) -> Reply<H::Stream> {
    let preflight = request.method == "OPTIONS";
    let head = request.method == "HEAD";
    let settings = host.settings();
    let mut body = Some(body);
    let mut route = UNROUTED;
    // The API's CORS headers go on every answer but a page's.
    let mut cors = true;
    let outcome = dispatch(host, &request, &mut body, &mut route, &mut cors).await;
    // A body the answer did not read is drained, so that a client still
    // sending it receives the answer (and a proxy in front is not left
    // with half a stream).
    if let Some(body) = body {
        host.discard(body).await;
    }
    let mut reply = match outcome {
        Ok(reply) => reply,
        Err(failure) => {
            if let Some(error) = &failure.internal {
                host.report(error);
            }
            let mut reply = Reply::problem(&failure.problem, &settings.docs_url);
            for (name, value) in failure.headers {
                reply.set(name, value);
            }
            if route == NOTIFICATIONS_ROUTE && request.method == "POST" {
                reply.notification =
                    Some(failure.notification.unwrap_or_else(|| {
                        NotificationReceipt::failed(failure.problem.kind, None)
                    }));
            }
            reply
        }
    };
    if !preflight {
        if cors {
            for (name, value) in settings.dialect.cors_headers() {
                reply.set(name, value);
            }
        }
        reply.set(NOSNIFF.0, NOSNIFF.1);
        if let Some(value) = strict_transport_security(&settings.base_url) {
            reply.set("strict-transport-security", value);
        }
    }
    if reply.header("cache-control").is_none() {
        reply.set("cache-control", NO_CACHE);
    }
    if head {
        reply.body = ReplyBody::Empty;
    }
    reply.route = route;
    reply
}

/// Answers a request; an endpoint that reads the body takes it from `body`.
async fn dispatch<'r, H: Host>(
    host: &H,
    request: &'r Request<'r>,
    body: &mut Option<H::Body>,
    route_name: &mut &'static str,
    cors: &mut bool,
) -> Outcome<H::Stream> {
    let limits = &host.settings().limits;
    check_request_target(request.target.len(), limits)?;
    check_header_bytes(request.header_bytes, limits)?;
    let (path, query) = match request.target.split_once('?') {
        Some((path, query)) => (path, query),
        None => (request.target, ""),
    };
    let endpoint = route(path);
    *cors = !endpoint.as_ref().is_ok_and(Endpoint::is_page);
    if request.method == "OPTIONS" {
        *route_name = "preflight";
        let mut reply = Reply::empty(PREFLIGHT_STATUS);
        if *cors {
            for (name, value) in host.settings().dialect.preflight_headers() {
                reply.set(name, value);
            }
        }
        return Ok(reply);
    }
    let endpoint = endpoint?;
    let method = Method::parse(request.method).ok_or_else(|| {
        Failure::from(Problem::new(ProblemType::MethodNotAllowed))
            .with("allow", endpoint.allow().to_string())
    })?;
    endpoint
        .check_method(method)
        .map_err(|p| Failure::from(p).with("allow", endpoint.allow().to_string()))?;
    *route_name = endpoint.name(method);
    let params = decode_query_string(query).map_err(|e| Problem::from(&e))?;
    let cx = Context {
        host,
        request,
        method,
        params,
    };
    let user = match endpoint.user() {
        Some(name) => {
            let found = super::resident::user(host, name, request.epoch).await;
            let found = found.map_err(Failure::internal)?;
            match found {
                Some(user) => Some(user),
                // A person reads the consent page: a page, not problem+json.
                None if matches!(endpoint, Endpoint::Consent { .. }) => {
                    return Ok(endpoints::consent::not_found());
                }
                None if matches!(endpoint, Endpoint::Console { .. }) => {
                    return Ok(endpoints::console::no_such_user());
                }
                None => {
                    return Err(Problem::new(ProblemType::NotFound)
                        .with_detail(format!("no user `{name}` here"))
                        .into());
                }
            }
        }
        None => None,
    };
    match (endpoint, user) {
        (Endpoint::Discovery, _) => discovery(&cx).await,
        (Endpoint::ErrorType { type_path }, _) => error_type(&type_path),
        (Endpoint::Stylesheet, _) => Ok(endpoints::console::stylesheet()),
        (Endpoint::FindConsole, _) => Ok(endpoints::console::find_console(query)),
        (Endpoint::Consent { app, .. }, Some(user)) => {
            Ok(endpoints::consent::consent(&cx, &user, app, take(body)?).await)
        }
        (Endpoint::Console { page, .. }, Some(user)) => {
            Ok(endpoints::console::console(&cx, &user, page, take(body)?).await)
        }
        (Endpoint::NewNotification { .. }, Some(user)) => {
            endpoints::federation::new_notification(&cx, &user, take(body)?).await
        }
        (Endpoint::ServerInfo { .. }, Some(_)) => Ok(Reply::json(
            200,
            server_info_json(&host.settings().version, limits),
        )),
        (Endpoint::Records { .. }, Some(user)) if method == Method::Post => {
            endpoints::records::post(&cx, &user, take(body)?).await
        }
        (Endpoint::Records { .. }, Some(user)) => endpoints::records::list(&cx, &user).await,
        (Endpoint::Record { record, .. }, Some(user)) => match method {
            Method::Put | Method::Delete => {
                endpoints::records::put_or_delete(&cx, &user, record, take(body)?).await
            }
            _ => endpoints::records::get(&cx, &user, &record).await,
        },
        (Endpoint::RecordVersions { record, .. }, Some(user)) => {
            endpoints::records::versions(&cx, &user, &record).await
        }
        (Endpoint::RecordVersion { record, hash, .. }, Some(user)) => {
            endpoints::records::version(&cx, &user, &record, &hash).await
        }
        (
            Endpoint::RecordBlob {
                record,
                version,
                blob,
                ..
            },
            Some(user),
        ) => endpoints::blobs::download(&cx, &user, &record, version, &blob).await,
        (Endpoint::NewBlob { .. }, Some(user)) => {
            endpoints::blobs::upload(&cx, &user, take(body)?).await
        }
        (Endpoint::Events { .. }, Some(user)) => endpoints::events::events(&cx, &user).await,
        (_, None) => Err(Problem::new(ProblemType::NotFound).into()),
    }
}

/// The request's body, for the one endpoint that reads it.
fn take<B>(body: &mut Option<B>) -> Result<B, Failure> {
    body.take()
        .ok_or_else(|| Problem::new(ProblemType::Internal).into())
}

async fn discovery<H: Host>(cx: &Context<'_, '_, H>) -> Outcome<H::Stream> {
    let host = cx.host;
    let settings = host.settings();
    // A browser's visit: a page about the server, naming no user.
    if cx.method == Method::Get && crate::service::http::prefers_html(cx.request.header("accept")) {
        return Ok(endpoints::console::landing(
            cx.request.host,
            &settings.version,
        ));
    }
    let users = host.users().await.map_err(Failure::internal)?;
    let user = user_for_host(cx.request.host, &users, |u| &u.entity).ok_or_else(|| {
        Problem::new(ProblemType::NotFound).with_detail("no user's entity is served at this host")
    })?;
    let rows = cx.fetch(&entity_record_sql(user.id, &user.entity)).await?;
    let row = rows
        .first()
        .ok_or_else(|| Failure::internal("a user has no Entity record"))?;
    let (record, links) = version_row(row)?;
    let (record, _) = read_version(&record, &links)?;
    let url = entity_record_url(&settings.base_url, &user.name, &user.entity, &record.id);
    Ok(Reply::empty(204).with("link", discovery_link(settings.dialect, &url)))
}

fn error_type<S>(type_path: &str) -> Outcome<S> {
    let page = error_type_page(type_path).ok_or_else(|| Problem::new(ProblemType::NotFound))?;
    Ok(Reply::new(200, ReplyBody::Bytes(page.into_bytes()))
        .with("content-type", ERROR_TYPE_PAGE_CONTENT_TYPE))
}
