//! A panic in the writer thread (injected with the `writer-panic`
//! failpoint) ends `folio serve` with status 70 and a log line, at once:
//! the write that was waiting fails instead of hanging, and a supervisor
//! can restart the server.

mod support;

use std::time::{Duration, Instant};

use folio_conformance::client::{Auth, Call, Http, now_ms, sign_call};
use folio_conformance::signer::Layout;
use folio_core::schema::builtin::BuiltinType;
use serde_json::json;
use support::{App, Server, add_app, add_me, free_port, scratch};

/// A signed create of a Type record; the server's answer, or why none came.
async fn create_a_type(server: &Server, app: &App) -> Result<u16, String> {
    let target = app.target(server);
    let key = app.key();
    let schema = json!({"type": "object", "properties": {"content": {"type": "object"}}});
    let body =
        json!({"type": BuiltinType::Type.link(), "content": {"name": "note", "schema": schema}});
    let url = format!("{}/api/me/records", server.base_url());
    let mut call = Call::post(url.parse().map_err(|e| format!("{e}"))?).json(&body);
    call.auth = Auth::Header(sign_call(
        &call,
        &key,
        &[],
        Layout::WithAlgorithmLine,
        now_ms(),
        "0000000001",
    ));
    let http = Http::new(&target)?.without_retries();
    http.send(&call).await.map(|response| response.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_panic_exits_the_server_with_status_70_and_the_waiting_write_fails() {
    let data = scratch("writer-panic");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let app = add_app(&data, "me", &["--full-access"]);
    // This test binary starts one server, which alone inherits the variable.
    unsafe { std::env::set_var("FOLIO_FAILPOINTS", "writer-panic") };
    let mut server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));

    // A write: the writer takes it, or an upkeep job before it, and panics.
    let answer = tokio::time::timeout(Duration::from_secs(10), create_a_type(&server, &app))
        .await
        .expect("the write did not hang");
    assert!(
        !matches!(answer, Ok(200)),
        "the write was acknowledged by a server whose writer panicked"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("the server's status") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the server still runs 10 s after its writer panicked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(70), "{status}");
}
