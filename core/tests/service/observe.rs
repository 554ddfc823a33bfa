//! What the host counts of received notifications (issue 42, item 10):
//! every answer of `POST /api/{user}/notifications` carries core's
//! receipt, whatever refused it; no other answer does.

use folio_core::service::NotificationOutcome;

use crate::kit::{Body, Call, Config};
use crate::{host_with_app, send};

const NOTIFICATIONS: &str = "/api/alice/notifications";

#[test]
fn a_notifications_answer_carries_its_receipt_and_no_other_answer_does() {
    let (host, _) = host_with_app(Config::default());
    let body = r#"{"versions":[]}"#;
    let call = Call::post(NOTIFICATIONS)
        .header("content-type", "application/json")
        .header("content-length", body.len().to_string());
    let reply = send(&host, &call, Body::of(body));
    assert_eq!(reply.status, 401);
    let receipt = reply.notification.expect("a receipt");
    assert_eq!(receipt.outcome, NotificationOutcome::Refused);
    assert_eq!((receipt.stored, receipt.refused.len()), (0, 0));

    // Not a notification: a GET of the same path is a 405 and counts as none.
    let reply = send(&host, &Call::get(NOTIFICATIONS), Body::empty());
    assert_eq!(reply.status, 405);
    assert!(reply.notification.is_none());
    let reply = send(&host, &Call::get("/api/alice/records"), Body::empty());
    assert!(reply.notification.is_none());
}
