//! Rates that hold across the server (PROTOCOL.md §13, §10): an address's
//! unauthenticated reads, registrations and sign-in attempts are counted in
//! one [`RateObject`] per address, whichever user's store the requests go
//! to. Core decides everything: which rates travel ([`AddressRate::of`]),
//! where ([`AddressRate::place_name`]), the count ([`RateLimits`]) and the
//! verdict ([`AddressVerdict`]); this module only carries them.
//!
//! An app's writes are counted where they are made: an app is authorized
//! by one user, and its writes all go through that user's object (see
//! [`UserStore`](crate::UserStore)), which keeps them in a [`RateLimits`]
//! of its own without a subrequest; so are the passwords typed for the
//! user's account (core's `AccountBackoff`). An address's place is core's
//! [`AddressRate::place_name`]: an IPv6 client's /64 is one object.

use std::cell::RefCell;

use folio_core::model::RecordDate;
use folio_core::service::limits::{Limits, RateLimit, ReceivedQuota, parse_per_minute_setting};
use folio_core::{AddressRate, AddressVerdict, Limited, Rate, RateLimits};
use worker::{DurableObject, Env, Method, Request, RequestInit, Response, State, durable_object};

/// The Durable Object namespace of the per-address rate objects.
const RATES: &str = "RATES";

/// The limits the worker is configured with: core's defaults, with the
/// rates its `[vars]` set (each `PER_SECOND/BURST`, a count for sign-ins,
/// or `off`) and the event streams' heartbeat interval
/// (`FOLIO_HEARTBEAT_MS`, milliseconds above zero, as `folio serve
/// --heartbeat-ms`). A value that does not read is logged and the default
/// kept.
pub fn configured(env: &Env) -> Limits {
    let defaults = Limits::default();
    let setting = |name: &str| env.var(name).ok().map(|value| value.to_string());
    let rate = |name: &str, default: Option<RateLimit>| match setting(name) {
        None => default,
        Some(text) => RateLimit::parse_setting(&text).unwrap_or_else(|error| {
            worker::console_error!("{name}: {error}; using the default");
            default
        }),
    };
    let quota = |name: &str, default: Option<ReceivedQuota>| match setting(name) {
        None => default,
        Some(text) => ReceivedQuota::parse_setting(&text).unwrap_or_else(|error| {
            worker::console_error!("{name}: {error}; using the default");
            default
        }),
    };
    let sign_ins = match setting("FOLIO_SIGN_IN_RATE") {
        None => defaults.sign_in_attempts_per_minute,
        Some(text) => parse_per_minute_setting(&text).unwrap_or_else(|error| {
            worker::console_error!("FOLIO_SIGN_IN_RATE: {error}; using the default");
            defaults.sign_in_attempts_per_minute
        }),
    };
    let heartbeat_ms = match setting("FOLIO_HEARTBEAT_MS") {
        None => defaults.heartbeat_ms,
        Some(text) => match text.parse::<u64>() {
            Ok(ms) if ms > 0 => ms,
            _ => {
                worker::console_error!(
                    "FOLIO_HEARTBEAT_MS: {text:?} is not a number of milliseconds above zero; \
                     using the default"
                );
                defaults.heartbeat_ms
            }
        },
    };
    Limits {
        heartbeat_ms,
        writes_per_app: rate("FOLIO_WRITE_RATE", defaults.writes_per_app),
        unauthenticated_reads_per_address: rate(
            "FOLIO_READ_RATE",
            defaults.unauthenticated_reads_per_address,
        ),
        registrations_per_address: rate("FOLIO_REGISTER_RATE", defaults.registrations_per_address),
        sign_in_attempts_per_minute: sign_ins,
        notifications_per_entity: rate(
            "FOLIO_NOTIFICATION_RATE",
            defaults.notifications_per_entity,
        ),
        notifications_per_domain: rate(
            "FOLIO_NOTIFICATION_DOMAIN_RATE",
            defaults.notifications_per_domain,
        ),
        notifications_per_user: rate(
            "FOLIO_NOTIFICATION_USER_RATE",
            defaults.notifications_per_user,
        ),
        received_from_known: quota("FOLIO_RECEIVED_QUOTA", defaults.received_from_known),
        received_from_strangers: quota("FOLIO_UNSOLICITED_QUOTA", defaults.received_from_strangers),
        ..defaults
    }
}

/// Only the rates a user object counts itself: an app's writes, and the
/// account's sign-in budget (every sign-in to an account reaches its user's
/// object).
pub fn kept_by_user(limits: &Limits) -> RateLimits {
    RateLimits::new(&Limits {
        unauthenticated_reads_per_address: None,
        registrations_per_address: None,
        sign_in_attempts_per_minute: None,
        ..limits.clone()
    })
}

/// Counts `rate` at `now` in its address's [`RateObject`]: `None` when
/// core does not count it per address (an app's writes, a rate that is
/// off), else core's verdict; an object that cannot be asked is
/// [`Limited::counter_unreachable`].
pub async fn count_per_address(
    env: &Env,
    limits: &Limits,
    rate: Rate<'_>,
    now: RecordDate,
) -> Option<Result<(), Limited>> {
    let rate = AddressRate::of(rate, now, limits)?;
    Some(match ask(env, &rate).await {
        Ok(verdict) => verdict.into_result(),
        Err(error) => {
            worker::console_error!("the rate object {}: {error}", rate.place_name());
            Err(Limited::counter_unreachable())
        }
    })
}

async fn ask(env: &Env, rate: &AddressRate) -> worker::Result<AddressVerdict> {
    let stub = env
        .durable_object(RATES)?
        .id_from_name(&rate.place_name())?
        .get_stub()?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(serde_json::to_string(rate)?.into()));
    let request = Request::new_with_init("https://rates.internal/", &init)?;
    // As text, read by serde_json: the time in ticks is past what a
    // JavaScript number holds exactly.
    let answer = stub.fetch_with_request(request).await?.text().await?;
    Ok(serde_json::from_str(&answer)?)
}

/// The rates of one client address (its unauthenticated reads,
/// registrations and sign-in attempts), counted with core's
/// [`RateLimits`] for every user object that asks.
///
/// The buckets live in memory only: an object is evicted only after tens
/// of seconds without a request, by when every bucket of the configured
/// rates is full again (the slowest, sign-ins, refills in a minute by
/// default), so forgetting them then is what core's `forget_idle` does.
#[durable_object]
pub struct RateObject {
    buckets: RefCell<RateLimits>,
}

impl DurableObject for RateObject {
    fn new(_state: State, env: Env) -> Self {
        let limits = Limits {
            writes_per_app: None,
            ..configured(&env)
        };
        RateObject {
            buckets: RefCell::new(RateLimits::new(&limits)),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let rate: AddressRate = serde_json::from_str(&req.text().await?)?;
        Response::from_json(&rate.check(&mut self.buckets.borrow_mut()))
    }
}
