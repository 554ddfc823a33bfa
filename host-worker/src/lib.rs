//! Folio's edge host on Cloudflare Workers.
//!
//! It wires `folio_core` to the Workers runtime: requests come in through
//! `fetch`; records will live in D1 and live events in Durable Objects (the
//! edge host issue). For now it answers CORS preflights and reports every
//! other request as not implemented, with the core's headers and problem body.

use folio_core::dialect::Dialect;
use folio_core::http::{NO_CACHE, PREFLIGHT_STATUS};
use folio_core::problem::{PROBLEM_CONTENT_TYPE, Problem, ProblemType, default_docs_url};
use worker::{Context, Env, Headers, Method, Request, Response, Result, event};

#[event(fetch)]
async fn fetch(req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    let dialect = Dialect::default();
    let headers = Headers::new();
    if req.method() == Method::Options {
        for (name, value) in dialect.preflight_headers() {
            headers.set(name, value)?;
        }
        return Ok(Response::empty()?
            .with_status(PREFLIGHT_STATUS)
            .with_headers(headers));
    }

    let url = req.url()?;
    let docs_url = default_docs_url(&url.origin().ascii_serialization());
    let problem = Problem::new(ProblemType::NotImplemented);
    for (name, value) in dialect.cors_headers() {
        headers.set(name, value)?;
    }
    headers.set("cache-control", NO_CACHE)?;
    headers.set("content-type", PROBLEM_CONTENT_TYPE)?;
    Ok(Response::ok(problem.to_json(&docs_url))?
        .with_status(problem.status())
        .with_headers(headers))
}
