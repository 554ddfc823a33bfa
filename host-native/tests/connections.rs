//! The listeners' connection limits, against a real `folio serve`: a
//! connection past the per-address cap is closed as soon as it is accepted,
//! one that never completes its TLS handshake is closed after the header
//! timeout (giving its place back), and requests are answered meanwhile;
//! each connection is served with the protocol ALPN chose, and a stopped
//! server ends its streams and connections and exits.

mod support;

use std::time::{Duration, Instant};

use support::{Server, add_me, free_port, scratch};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PER_ADDRESS: usize = 4;
const HEADER_TIMEOUT_SECS: u64 = 2;

/// Waits for the server to close `stream`: an end of stream or a reset,
/// within `wait`. Answers how long it took.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> Duration {
    let started = Instant::now();
    let mut buf = [0; 256];
    loop {
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Err(_) => panic!("the connection is still open after {wait:?}"),
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            // Whatever the server sent before closing (nothing expected).
            Ok(Ok(_)) => {}
        }
    }
}

/// Whether the server has closed `stream` (read without waiting).
fn is_closed(stream: &TcpStream) -> bool {
    let mut buf = [0; 16];
    match stream.try_read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// A plain-HTTP request to the redirecting listener: its status line.
async fn redirect_status(port: u16) -> String {
    // The plain listener opens just after the HTTPS one announces itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stream = loop {
        match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => break stream,
            Err(error) if Instant::now() < deadline => {
                assert_eq!(
                    error.kind(),
                    std::io::ErrorKind::ConnectionRefused,
                    "{error}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("the plain-HTTP listener: {error}"),
        }
    };
    stream
        .write_all(b"GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .expect("sent");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("an answer in time")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn connections_past_the_cap_or_silent_too_long_are_closed_and_requests_go_on() {
    let data = scratch("connections");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let per_address = PER_ADDRESS.to_string();
    let header_timeout = HEADER_TIMEOUT_SECS.to_string();
    let server = Server::start(
        &data,
        port,
        &[
            "--max-connections-per-address",
            &per_address,
            "--header-timeout-secs",
            &header_timeout,
        ],
    );
    assert_eq!(
        redirect_status(server.http_port).await,
        "HTTP/1.1 308 Permanent Redirect"
    );

    // The redirect's connection gives its place back once the server has
    // closed it, a moment after the client read the answer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Connections that never start their TLS handshake take the address's
    // places; one more is closed at once. (The server takes connections in
    // no set order, so which one is not known.)
    let mut silent = Vec::new();
    for _ in 0..=PER_ADDRESS {
        silent.push(
            TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("a connection"),
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = silent.iter().position(is_closed);
    assert!(
        refused.is_some(),
        "none of {} connections was closed at once",
        silent.len()
    );
    silent.retain(|stream| !is_closed(stream));
    assert_eq!(silent.len(), PER_ADDRESS, "the others are open");
    // The plain-HTTP listener counts against the same places.
    let mut plain = TcpStream::connect(("127.0.0.1", server.http_port))
        .await
        .expect("accepted by the kernel");
    closed_within(&mut plain, Duration::from_secs(1)).await;

    // The silent ones end after the handshake timeout and give their places back.
    for stream in &mut silent {
        closed_within(stream, Duration::from_secs(HEADER_TIMEOUT_SECS + 3)).await;
    }
    assert_eq!(
        redirect_status(server.http_port).await,
        "HTTP/1.1 308 Permanent Redirect"
    );
}

#[tokio::test]
async fn handshakes_past_the_pace_within_the_header_timeout_are_refused_at_once() {
    let data = scratch("handshake-pace");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let header_timeout = HEADER_TIMEOUT_SECS.to_string();
    let _server = Server::start(
        &data,
        port,
        &[
            "--handshakes-per-second",
            "1",
            "--header-timeout-secs",
            &header_timeout,
        ],
    );
    // One handshake a second may start, none later than the header timeout
    // from now: of five connections at once, at most three get a turn and
    // the others are closed before their handshake, without waiting for
    // any timeout. (The server takes them in no set order.)
    let mut waiting = Vec::new();
    for _ in 0..5 {
        waiting.push(
            TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("a connection"),
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let closed = waiting.iter().filter(|stream| is_closed(stream)).count();
    assert!(
        (2..5).contains(&closed),
        "{closed} of 5 connections closed at once; 2 to 4 expected"
    );
}

/// A client of the server's own certificate, HTTP/1.1 only or as ALPN
/// chooses (HTTP/2).
fn client(server: &Server, http1_only: bool) -> reqwest::Client {
    let pem = std::fs::read(server.cert()).expect("the server's certificate");
    let cert = reqwest::Certificate::from_pem(&pem).expect("a PEM certificate");
    let builder = reqwest::Client::builder().add_root_certificate(cert);
    let builder = if http1_only {
        builder.http1_only()
    } else {
        builder
    };
    builder.build().expect("a client")
}

#[tokio::test]
async fn a_stopped_server_ends_its_streams_and_connections_and_exits_within_the_grace_period() {
    let data = scratch("shutdown");
    let port = free_port();
    add_me(&data, &format!("https://localhost:{port}"));
    let mut server = Server::start_with_env(&data, port, &[], &[("RUST_LOG", "info")]);
    let events = format!("{}/api/me/events", server.base_url());

    // Each connection gets the protocol its TLS handshake chose.
    let h1 = client(&server, true);
    let mut stream = h1
        .get(&events)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("an anonymous event stream");
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.version(), reqwest::Version::HTTP_11);
    let h2 = client(&server, false);
    let answer = h2
        .get(format!("{}/api/me/records", server.base_url()))
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
    drop(answer);

    let stopped_at = Instant::now();
    let signal = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(signal.success());
    // The stream ends (after what it had to send), and the process exits
    // cleanly, well before the 10 s grace period would drop connections.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = stream.chunk().await.transpose() {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the event stream is still open 5 s after SIGTERM"
    );
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("the child's status") {
            break status;
        }
        assert!(
            stopped_at.elapsed() < Duration::from_secs(5),
            "folio serve still runs 5 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "folio serve exited with {status}");
    // Give the log reader a moment to see the last lines.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = server.log_lines();
    assert!(log.iter().any(|line| line.contains("stopped")), "{log:#?}");
    assert!(
        !log.iter().any(|line| line.contains("grace period")),
        "no connection waited for the grace period: {log:#?}"
    );
    // New connections are refused.
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
}
