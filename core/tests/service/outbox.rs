//! Delivering the outbox (`docs/federation.md` §4): one delivery per user
//! and recipient, the deliveries in flight left out of the next plan, and
//! each delivery's outcome (a failure, a deadline that passed) recorded on
//! its own rows, once per attempt. The fake host reaches no other server,
//! so every delivery to one fails, as a slow or absent server's would.

use folio_core::Fresh;
use folio_core::model::Entity;
use folio_core::service::federation::RetryPolicy;
use folio_core::service::jobs::Job;
use folio_core::service::{DeliveryKey, Jobs, next_due, outbox_summary, plan_deliveries};
use folio_core::store::send_now_sql;

use crate::fake_host::FakeHost;
use crate::kit::{REQUEST_NOW, date};

const BOB: &str = "bob.example";
const CAROL: &str = "carol.example";

/// Queues a notification of version `n` of one record for `recipient`,
/// due at `due_ms`.
fn queue(host: &FakeHost, user: i64, recipient: &str, n: u8, due_ms: i64) {
    let record = "0123456789abcdef0123456789abcdef";
    let hash = format!("{n:02x}").repeat(32);
    host.execute(&format!(
        "INSERT INTO outbox (user_id, recipient, record_id, version_hash, queued_at, due_at) \
         VALUES ({user}, '{recipient}', '{record}', '{hash}', {due_ms}, {due_ms})"
    ));
}

fn attempts(host: &FakeHost, recipient: &str) -> i64 {
    host.count(&format!(
        "SELECT SUM(attempts) FROM outbox WHERE recipient = '{recipient}'"
    ))
}

#[test]
fn each_recipient_is_a_delivery_of_its_own_that_records_its_own_outcome() {
    let host = FakeHost::new();
    let user = host.count("SELECT id FROM users");
    let now = date(REQUEST_NOW);
    let now_ms = now.unix_millis();
    queue(&host, user, BOB, 1, now_ms - 2);
    queue(&host, user, CAROL, 1, now_ms - 1);
    queue(&host, user, BOB, 2, now_ms);
    let key = |recipient: &str| -> DeliveryKey { (user, recipient.parse::<Entity>().unwrap()) };
    let plan = |in_flight: &[DeliveryKey], max: usize| {
        pollster::block_on(plan_deliveries(&host, now, None, in_flight, max)).expect("a plan")
    };
    let keys = |in_flight: &[DeliveryKey], max: usize| -> Vec<DeliveryKey> {
        plan(in_flight, max).iter().map(|d| d.key()).collect()
    };

    // Bob's two notifications are one delivery, in the order they came due.
    assert_eq!(keys(&[], 256), [key(BOB), key(CAROL)]);
    assert_eq!(keys(&[], 1), [key(BOB)]);
    // A delivery in flight is not planned again.
    assert_eq!(keys(&[key(BOB)], 256), [key(CAROL)]);
    let next = |in_flight: &[DeliveryKey]| {
        pollster::block_on(next_due(&host, None, in_flight)).expect("the next due")
    };
    assert_eq!(next(&[key(BOB)]), Some(now_ms - 1));
    assert_eq!(next(&[key(BOB), key(CAROL)]), None);

    let (fresh, retry) = (Fresh::from_seed([3; 32]), RetryPolicy::default());
    let mut planned = plan(&[], 256).into_iter();
    let (bob, carol) = (planned.next().unwrap(), planned.next().unwrap());

    // Carol's server cannot be reached: her notification is retried later,
    // and Bob's are untouched by it.
    let report = pollster::block_on(carol.run(&host, now, &fresh, &retry));
    assert_eq!((report.delivered, report.retried, report.failed), (0, 1, 0));
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!((attempts(&host, CAROL), attempts(&host, BOB)), (1, 0));
    let carol_due = host.count("SELECT due_at FROM outbox WHERE recipient = 'carol.example'");
    assert!(
        carol_due >= now_ms + retry.first_delay_ms / 2,
        "{carol_due}"
    );

    // Bob's delivery passed its deadline: both of his are retried later.
    // Recorded twice (the deadline passed while it was being recorded), the
    // attempt counts once.
    for _ in 0..2 {
        let report = pollster::block_on(bob.deadline_passed(&host, now, &fresh, &retry));
        assert_eq!((report.delivered, report.retried), (0, 2));
    }
    assert_eq!(attempts(&host, BOB), 2, "one attempt for each of Bob's");
    assert_eq!(keys(&[], 256), [], "both recipients back off");
    assert!(next(&[]).is_some_and(|due| due > now_ms));
}

/// The outbox's summary (the metrics' and `/health/federation`'s): each
/// state's notifications, oldest age and recipients, and the failing
/// peers; then `folio outbox send-now` for one recipient makes what waits
/// for it due now, keeping its attempts, and leaves the rest waiting.
#[test]
fn the_summary_counts_each_state_and_send_now_brings_one_recipient_forward() {
    let host = FakeHost::new();
    let user = host.count("SELECT id FROM users");
    let now = date(REQUEST_NOW);
    let now_ms = now.unix_millis();
    let summary = || pollster::block_on(outbox_summary(&host, now)).expect("a summary");
    assert_eq!(summary().failing_peers(), 0);
    assert_eq!(summary().pending.notifications, 0);

    queue(&host, user, BOB, 1, now_ms - 5_000);
    queue(&host, user, BOB, 2, now_ms - 1_000);
    queue(&host, user, CAROL, 1, now_ms - 2_000);
    queue(&host, user, "dave.example", 1, now_ms - 9_000);
    host.execute(
        "UPDATE outbox SET attempts = 3, failed_at = 1, last_error = 'gone' \
         WHERE recipient = 'dave.example'",
    );
    let (fresh, retry) = (Fresh::from_seed([3; 32]), RetryPolicy::default());
    // Carol's and Bob's servers cannot be reached: they back off.
    for delivery in pollster::block_on(plan_deliveries(&host, now, None, &[], 256)).unwrap() {
        pollster::block_on(delivery.run(&host, now, &fresh, &retry));
    }
    queue(&host, user, BOB, 3, now_ms);
    let counted = summary();
    assert_eq!(
        (counted.pending.notifications, counted.pending.recipients),
        (1, 1),
        "{counted:?}"
    );
    assert_eq!(counted.pending.oldest_age_ms, 0);
    assert_eq!(
        (counted.retrying.notifications, counted.retrying.recipients),
        (3, 2)
    );
    assert_eq!(counted.retrying.oldest_age_ms, 5_000);
    assert_eq!(
        (counted.failed.notifications, counted.failed.oldest_age_ms),
        (1, 9_000)
    );
    assert_eq!(counted.failing_peers(), 2);
    let json = counted.to_json();
    assert_eq!(json["failing_peers"], 2);
    assert_eq!(json["outbox"]["failed"]["oldest_age_seconds"], 9);

    // Send now, for Carol alone: her row is due now with its attempt kept;
    // Bob's still wait, and Dave's stays given up.
    let carol: Entity = CAROL.parse().unwrap();
    let statement = send_now_sql(now_ms, None, Some(&carol), false);
    let outcome = pollster::block_on(host.run(Job::Statements(vec![statement]))).expect("it runs");
    assert!(outcome.is_ok(), "{outcome:?}");
    let due = |recipient: &str| {
        host.count(&format!(
            "SELECT MAX(due_at) FROM outbox WHERE recipient = '{recipient}'"
        ))
    };
    assert_eq!(due(CAROL), now_ms);
    assert_eq!(attempts(&host, CAROL), 1);
    assert!(due(BOB) > now_ms);
    assert_eq!(
        host.count("SELECT COUNT(*) FROM outbox WHERE failed_at IS NOT NULL"),
        1
    );
    let planned: Vec<DeliveryKey> = pollster::block_on(plan_deliveries(&host, now, None, &[], 256))
        .unwrap()
        .iter()
        .map(|delivery| delivery.key())
        .collect();
    assert_eq!(planned, [(user, carol)]);
}
