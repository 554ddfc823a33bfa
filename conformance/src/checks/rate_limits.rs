//! Rate limits (PROTOCOL.md §13), and those on registration and on failed
//! sign-ins (PROTOCOL.md §10). These run last: they empty the buckets, and
//! failed sign-ins may shut the consent page to this address for a while.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;

use super::{Check, CheckResult, Needs, check};
use crate::apps::{NewApp, PUBLIC_KEY_HEADER, consent_url, register, registration};
use crate::browser::{Browser, csrf, html, summary};
use crate::client::{Call, Http, Response, record_id, retry_after};
use crate::context::{Ctx, with_query};
use crate::expect::{self, RATE_LIMITED, ensure};

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "rate-limits/unauthenticated-reads-429-with-retry-after",
            unauthenticated_reads
        ),
        check!(
            "rate-limits/unauthenticated-reads-per-address-across-users",
            reads_across_users,
            Needs::OtherUser
        ),
        check!(
            "rate-limits/failed-authentication-counts-as-unauthenticated",
            failed_authentication
        ),
        check!(
            "rate-limits/writes-past-burst-429-with-retry-after",
            writes_past_burst
        ),
        check!(
            "rate-limits/registrations-past-burst-429-with-retry-after",
            registrations_past_burst
        ),
        check!(
            "rate-limits/account-wrong-passwords-from-many-addresses-429",
            account_sign_in_failures,
            Needs::Loopback
        ),
        check!(
            "rate-limits/sign-in-failures-429-with-retry-after",
            sign_in_failures
        ),
        check!(
            "rate-limits/console-sign-in-failures-429-with-retry-after",
            console_sign_in_failures
        ),
    ]
}

/// Sends every call at once without retrying; fails unless some answer is
/// a rate-limit problem with a `Retry-After`.
async fn ensure_some_limited(http: &Http, calls: Vec<Call<'_>>) -> CheckResult {
    let sent = calls.len();
    let responses: Vec<Result<Response, String>> =
        join_all(calls.iter().map(|call| http.send(call))).await;
    let limited: Vec<&Response> = responses
        .iter()
        .filter_map(|response| response.as_ref().ok())
        .filter(|response| response.status == 429)
        .collect();
    let first = limited.first().ok_or_else(|| {
        let errors = responses
            .iter()
            .filter(|response| response.is_err())
            .count();
        format!("none of {sent} requests sent at once was rate limited ({errors} failed to send)")
    })?;
    rate_limited_with_retry_after(first)
}

/// A `request/429-rate-limited` problem with a `Retry-After` in seconds.
fn rate_limited_with_retry_after(response: &Response) -> CheckResult {
    expect::problem_response(response, RATE_LIMITED)?;
    ensure!(
        retry_after(&response.headers).is_some(),
        "429 without a Retry-After in seconds: {:?}",
        response.header("retry-after")
    );
    Ok(())
}

async fn unauthenticated_reads(ctx: &Ctx) -> CheckResult {
    let (per_second, burst) = ctx
        .rate_limit("unauthenticated_reads_per_address", (300, 300))
        .await?;
    let count = usize::try_from(burst * 2 + per_second).map_err(|error| error.to_string())?;
    let url = crate::context::with_query(ctx.records_url()?, &[("page_size", "1")]);
    let calls = (0..count).map(|_| Call::get(url.clone())).collect();
    let result = ensure_some_limited(&ctx.http.without_retries(), calls).await;
    // Let the bucket refill for whatever runs next.
    tokio::time::sleep(Duration::from_secs(2)).await;
    result
}

/// A request whose `Authorization` fails to verify counts against the
/// address's unauthenticated rate: a forged header does not skip it.
async fn failed_authentication(ctx: &Ctx) -> CheckResult {
    let (per_second, burst) = ctx
        .rate_limit("unauthenticated_reads_per_address", (300, 300))
        .await?;
    let count = usize::try_from(burst * 2 + per_second).map_err(|error| error.to_string())?;
    let url = crate::context::with_query(ctx.records_url()?, &[("page_size", "1")]);
    let forged = "Svc app_id=\"00000000000000000000000000000000\", ts=\"0\", nonce=\"n\", signature=\"AA==\"";
    let calls = (0..count)
        .map(|_| Call::get(url.clone()).authorization(forged.to_string()))
        .collect();
    let result = ensure_some_limited(&ctx.http.without_retries(), calls).await;
    tokio::time::sleep(refill_time(per_second, burst)).await;
    result
}

/// How long an emptied bucket takes to fill again, and a second more.
fn refill_time(per_second: u64, burst: u64) -> Duration {
    Duration::from_secs(burst.div_ceil(per_second.max(1)) + 1)
}

/// Sends `count` unauthenticated reads of `url` at once, without retrying.
async fn reads(http: &Http, url: &reqwest::Url, count: usize) -> Vec<Result<Response, String>> {
    let calls: Vec<Call<'_>> = (0..count).map(|_| Call::get(url.clone())).collect();
    join_all(calls.iter().map(|call| http.send(call))).await
}

/// The statuses of `responses` with their counts, e.g. `200 x98, 429 x1`.
fn statuses(responses: &[Result<Response, String>]) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for response in responses {
        let key = match response {
            Ok(response) => response.status.to_string(),
            Err(_) => "not sent".to_string(),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
        .iter()
        .map(|(status, count)| format!("{status} x{count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An address's unauthenticated reads are one rate across the server
/// (PROTOCOL.md §13), whichever user's store they read. From a full bucket,
/// one read short of a burst of one user's store, then as many of another
/// user's, is nearly two bursts from one address: the second batch must
/// meet a `429`. Neither store alone sees a burst, so a server that counts
/// each store's reads apart (an edge host with one object per user) never
/// limits any of them.
///
/// Deterministic as long as the server answers both batches before the
/// bucket refills what the first one took (`burst - 2` tokens, at
/// `per_second`): the check says so when it could not tell.
async fn reads_across_users(ctx: &Ctx) -> CheckResult {
    let other = ctx
        .target
        .other_user
        .as_deref()
        .ok_or("the target has no other_user")?;
    let (per_second, burst) = ctx
        .rate_limit("unauthenticated_reads_per_address", (300, 300))
        .await?;
    ensure!(
        burst >= 3,
        "a burst of {burst} is too small to split over two stores"
    );
    let each = usize::try_from(burst - 1).map_err(|error| error.to_string())?;
    let query = [("page_size", "1")];
    let mine = with_query(ctx.records_url()?, &query);
    let theirs = with_query(ctx.url(&format!("/api/{other}/records"))?, &query);
    let http = ctx.http.without_retries();
    // Both stores readable at all (a missing user would be a 404, never
    // counted), then a full bucket to start from.
    for url in [&mine, &theirs] {
        let response = ctx.send(Call::get(url.clone())).await?;
        expect::json(&response, 200).map_err(|error| format!("GET {url}: {error}"))?;
    }
    tokio::time::sleep(refill_time(per_second, burst)).await;

    let started = Instant::now();
    let first = reads(&http, &mine, each).await;
    let second = reads(&http, &theirs, each).await;
    let elapsed = started.elapsed();
    let result = (|| {
        ensure!(
            first
                .iter()
                .all(|response| response.as_ref().is_ok_and(|r| r.status == 200)),
            "{each} unauthenticated reads of {}'s store from a full bucket of {burst}: {}",
            ctx.target.user,
            statuses(&first)
        );
        let limited = second
            .iter()
            .filter_map(|response| response.as_ref().ok())
            .find(|response| response.status == 429);
        let Some(limited) = limited else {
            let refilled = per_second as f64 * elapsed.as_secs_f64();
            let sent = 2 * each;
            if sent as f64 <= burst as f64 + refilled {
                return Err(format!(
                    "could not tell: the {sent} reads took {:.1} s, time for the bucket to \
                     refill {refilled:.0} tokens; run the server with a lower per-second read \
                     rate ({}'s store: {})",
                    elapsed.as_secs_f64(),
                    other,
                    statuses(&second)
                ));
            }
            return Err(format!(
                "after {each} unauthenticated reads of {}'s store, none of {each} reads of \
                 {other}'s store from the same address was limited ({} in {:.1} s; burst \
                 {burst}, {per_second}/s): the address's reads are counted per store",
                ctx.target.user,
                statuses(&second),
                elapsed.as_secs_f64()
            ));
        };
        rate_limited_with_retry_after(limited)
    })();
    tokio::time::sleep(refill_time(per_second, burst)).await;
    result
}

async fn writes_past_burst(ctx: &Ctx) -> CheckResult {
    let (per_second, burst) = ctx.rate_limit("writes_per_app", (100, 200)).await?;
    let count = usize::try_from(burst * 2 + per_second).map_err(|error| error.to_string())?;
    let ty = ctx.note_type().await?;
    let body = json!({"type": ty, "content": {"title": "burst"}});
    let url = ctx.records_url()?;
    let calls = (0..count)
        .map(|_| Call::post(url.clone()).json(&body).signed(&ctx.full))
        .collect();
    let result = ensure_some_limited(&ctx.http.without_retries(), calls).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    result
}

async fn registrations_past_burst(ctx: &Ctx) -> CheckResult {
    let (per_second, burst) = ctx
        .rate_limit("registrations_per_address", (10, 20))
        .await?;
    // Ten seconds' worth past the burst: a server slow enough to take all
    // of them in turn (a busy machine; on the edge each registration waits
    // for the user object and D1) still meets the limit.
    let count = usize::try_from(burst * 2 + per_second * 10).map_err(|error| error.to_string())?;
    let apps: Vec<NewApp> = (0..count).map(|_| NewApp::fresh()).collect();
    let mut calls = Vec::with_capacity(count);
    for app in &apps {
        let body = app.body(ctx, &[]).await?;
        calls.push(registration(
            ctx,
            &app.key,
            PUBLIC_KEY_HEADER,
            &app.key.public_key(),
            &body,
        )?);
    }
    let result = ensure_some_limited(&ctx.http.without_retries(), calls).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    result
}

/// The most wrong passwords sent before giving up on a `429`.
const SIGN_IN_ATTEMPTS: usize = 100;

/// Wrong passwords on the console's sign-in form count against the same
/// rate as the consent page's: the address is refused with a `429` page.
async fn console_sign_in_failures(ctx: &Ctx) -> CheckResult {
    let page = ctx.url(&format!("/{}/console", ctx.target.user))?;
    let action = ctx.url(&format!("/{}/console/sign-in", ctx.target.user))?;
    wrong_passwords_until_limited(ctx, &page, &action, &[]).await
}

async fn sign_in_failures(ctx: &Ctx) -> CheckResult {
    let app = NewApp::fresh();
    register(ctx, &app, &[]).await?;
    let url = consent_url(ctx, app.id())?;
    wrong_passwords_until_limited(ctx, &url, &url, &[("action", "sign_in")]).await
}

/// Wrong passwords for one account, each from an address of its own
/// (127.0.0.2, 127.0.0.3, …, so no address's sign-in rate is reached), are
/// refused past the account's budget: a `429` page with a `Retry-After`
/// (issue 40). On the console's sign-in form and then the consent page's,
/// which share the budget.
async fn account_sign_in_failures(ctx: &Ctx) -> CheckResult {
    let console = ctx.url(&format!("/{}/console", ctx.target.user))?;
    let action = ctx.url(&format!("/{}/console/sign-in", ctx.target.user))?;
    let wrong = format!("not-the-password-{}", record_id());
    for attempt in 1..=ADDRESSES_PER_ACCOUNT_CHECK {
        let local = std::net::Ipv4Addr::new(127, 0, 0, 1 + attempt);
        let http = Http::bound_to(&ctx.target, local.into())?.without_retries();
        let mut browser = Browser::new(&http, &console);
        let (_, token) = browser
            .open(&console)
            .await
            .map_err(|e| format!("from {local}: {e}"))?;
        let response = browser
            .post_form(&action, &[("csrf", &token), ("password", &wrong)])
            .await?;
        match response.status {
            401 => {}
            429 => {
                html(&response, 429)?;
                ensure!(
                    retry_after(&response.headers).is_some(),
                    "429 after {attempt} wrong passwords without a Retry-After in seconds: {:?}",
                    response.header("retry-after")
                );
                // The consent page counts against the same account.
                let app = NewApp::fresh();
                register(ctx, &app, &[]).await?;
                let url = consent_url(ctx, app.id())?;
                let local = std::net::Ipv4Addr::new(127, 0, 0, 2 + attempt);
                let http = Http::bound_to(&ctx.target, local.into())?.without_retries();
                let mut browser = Browser::new(&http, &url);
                let (_, token) = browser.open(&url).await?;
                let fields = [
                    ("csrf", token.as_str()),
                    ("action", "sign_in"),
                    ("password", wrong.as_str()),
                ];
                let response = browser.post_form(&url, &fields).await?;
                ensure!(
                    response.status == 429 && retry_after(&response.headers).is_some(),
                    "the consent page from {local} after the console's 429: {}",
                    summary(&response)
                );
                return Ok(());
            }
            status => {
                return Err(format!(
                    "wrong password {attempt} from {local}: expected 401 or 429, got {status}: {}",
                    response.excerpt()
                ));
            }
        }
    }
    Err(format!(
        "{ADDRESSES_PER_ACCOUNT_CHECK} wrong passwords for one account, each from its own address, were never refused"
    ))
}

/// The addresses [`account_sign_in_failures`] sends from, one wrong password each.
const ADDRESSES_PER_ACCOUNT_CHECK: u8 = 30;

/// Posts wrong passwords from the sign-in form of `page` to `action` (with
/// `fields` besides the token and the password) until a `429` page with a
/// `Retry-After` answers; each `401` page's token is used for the next.
async fn wrong_passwords_until_limited(
    ctx: &Ctx,
    page: &url::Url,
    action: &url::Url,
    fields: &[(&str, &str)],
) -> CheckResult {
    let http = ctx.http.without_retries();
    let mut browser = Browser::new(&http, page);
    let (_, mut token) = browser.open(page).await?;
    let wrong = format!("not-the-password-{}", record_id());
    for attempt in 1..=SIGN_IN_ATTEMPTS {
        let mut form = vec![("csrf", token.as_str()), ("password", wrong.as_str())];
        form.extend_from_slice(fields);
        let response = browser.post_form(action, &form).await?;
        match response.status {
            401 => {
                if let Ok(fresh) = csrf(&html(&response, 401)?) {
                    token = fresh;
                }
            }
            429 => {
                html(&response, 429)?;
                ensure!(
                    retry_after(&response.headers).is_some(),
                    "429 after {attempt} wrong passwords without a Retry-After in seconds: {:?}",
                    response.header("retry-after")
                );
                return Ok(());
            }
            status => {
                return Err(format!(
                    "wrong password {attempt} to {action}: expected 401 or 429, got {status}: {}",
                    response.excerpt()
                ));
            }
        }
    }
    Err(format!(
        "{SIGN_IN_ATTEMPTS} wrong passwords to {action} from one address were never rate limited"
    ))
}
