//! A signed request cannot be replayed after the server restarts: one dated
//! ahead of its arrival (a client whose clock runs fast) has its nonce
//! stored, so the restarted server refuses it again; one dated at its
//! arrival is behind the restarted server's fence.

mod support;

use folio_conformance::client::{Auth, Call, Http, nonce, now_ms, sign_call};
use folio_conformance::signer::Layout;
use support::{App, Server, add_app, add_me, free_port, scratch};

/// A GET of the user's records, signed at `ts` with `nonce`.
fn signed_list(server: &Server, app: &App, ts: i64, nonce: &str) -> Call<'static> {
    let url = format!("{}/api/me/records?page_size=1", server.base_url());
    let mut call = Call::get(url.parse().expect("a URL"));
    call.auth = Auth::Header(sign_call(
        &call,
        &app.key(),
        &[],
        Layout::WithAlgorithmLine,
        ts,
        nonce,
    ));
    call
}

/// The status and, for a problem, its `code`.
async fn answer(server: &Server, app: &App, call: &Call<'_>) -> (u16, Option<String>) {
    let http = Http::new(&app.target(server))
        .expect("a client")
        .without_retries();
    let response = http.send(call).await.expect("an answer");
    let code = response
        .json()
        .ok()
        .and_then(|body| body["code"].as_str().map(str::to_owned));
    (response.status, code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_seen_before_a_crash_are_refused_after_the_restart() {
    let data = scratch("replay-after-restart");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let app = add_app(&data, "me", &["--full-access"]);
    let mut server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));

    let ahead = signed_list(&server, &app, now_ms() + 120_000, &nonce());
    let on_time = signed_list(&server, &app, now_ms(), &nonce());
    assert_eq!(answer(&server, &app, &ahead).await, (200, None));
    assert_eq!(answer(&server, &app, &on_time).await, (200, None));
    assert_eq!(
        answer(&server, &app, &ahead).await,
        (401, Some("replayed_request".to_owned())),
        "a replay before the crash"
    );

    server.kill();
    let server = tokio::task::block_in_place(|| Server::start(&data, port, &[]));
    assert_eq!(
        answer(&server, &app, &ahead).await,
        (401, Some("replayed_request".to_owned())),
        "the request dated ahead, replayed after the restart"
    );
    assert_eq!(
        answer(&server, &app, &on_time).await,
        (401, Some("stale_timestamp".to_owned())),
        "the request dated on time, replayed after the restart"
    );
}
