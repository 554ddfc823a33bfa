//! Starting a real `folio` for black-box tests: a fresh data directory, a
//! user and apps made with the CLI, and `folio serve` on free ports.

#![allow(dead_code)]

pub mod tls;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

pub const FOLIO: &str = env!("CARGO_BIN_EXE_folio");

/// A fresh directory under the target directory, removed first if it exists.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Runs `folio` with arguments; panics with its stderr on failure.
pub fn folio(data: &Path, args: &[&str]) -> String {
    let output = Command::new(FOLIO)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .expect("folio runs");
    assert!(
        output.status.success(),
        "folio {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// Runs `folio` with `stdin` as its input.
pub fn folio_with_input(data: &Path, args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(FOLIO)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("folio runs");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("folio ends")
}

/// Creates the user `me` at entity `localhost`, its Entity record naming
/// `base_url`; returns its password.
pub fn add_me(data: &Path, base_url: &str) -> String {
    let out = folio(
        data,
        &[
            "user",
            "add",
            "me",
            "--entity",
            "localhost",
            "--base-url",
            base_url,
            "--json",
        ],
    );
    let out: Value = serde_json::from_str(&out).expect("one JSON object");
    out["password"].as_str().expect("password").to_owned()
}

/// A new Ed25519 key pair: (seed, public key), standard base64.
pub fn key_pair() -> (String, String) {
    let seed: [u8; 32] = rand::random();
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    (
        STANDARD.encode(seed),
        STANDARD.encode(key.verifying_key().as_bytes()),
    )
}

/// An app made by `folio app add`: its ids and private key.
pub struct App {
    pub app_id: String,
    pub authorization_id: String,
    pub private_key: String,
}

impl App {
    /// The key the app signs with.
    pub fn key(&self) -> folio_conformance::signer::AppKey {
        folio_conformance::signer::AppKey::new(
            &self.app_id,
            &self.authorization_id,
            &self.private_key,
        )
        .expect("the app's key")
    }

    /// The conformance client's view of `server` for user `me`, as this app
    /// (full and scoped app alike), trusting the server's self-signed
    /// certificate.
    pub fn target(&self, server: &Server) -> folio_conformance::Target {
        let credentials = folio_conformance::AppCredentials {
            app_id: self.app_id.clone(),
            authorization_id: self.authorization_id.clone(),
            private_key: self.private_key.clone(),
        };
        folio_conformance::Target::one_app(
            server.base_url(),
            "me",
            "localhost",
            Some(server.cert().display().to_string()),
            credentials,
        )
    }
}

pub fn add_app(data: &Path, user: &str, access: &[&str]) -> App {
    let (private_key, public_key) = key_pair();
    let mut args = vec![
        "app",
        "add",
        "--user",
        user,
        "--public-key",
        &public_key,
        "--json",
    ];
    args.extend_from_slice(access);
    let out: Value = serde_json::from_str(&folio(data, &args)).expect("one JSON object");
    App {
        app_id: out["app_id"].as_str().expect("app_id").to_owned(),
        authorization_id: out["authorization_id"]
            .as_str()
            .expect("authorization_id")
            .to_owned(),
        private_key,
    }
}

/// A running `folio serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub http_port: u16,
    pub data: PathBuf,
    /// Every line it has written to stderr so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `folio serve` on `port` (HTTPS) and a free plain-HTTP port,
    /// and waits until it listens. It logs warnings and errors only.
    pub fn start(data: &Path, port: u16, extra: &[&str]) -> Server {
        Server::start_with_env(data, port, extra, &[("RUST_LOG", "warn")])
    }

    /// [`Server::start`] with `env` set for the server (`FOLIO_LOG`, …).
    pub fn start_with_env(data: &Path, port: u16, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let base_url = format!("https://localhost:{port}");
        Server::start_at(data, port, &base_url, extra, env)
    }

    /// [`Server::start_with_env`] with its base URL.
    pub fn start_at(
        data: &Path,
        port: u16,
        base_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let http_port = free_port();
        let mut child = Command::new(FOLIO)
            .arg("--data-dir")
            .arg(data)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--http-listen", &format!("127.0.0.1:{http_port}")])
            .args(["--base-url", base_url])
            .args(extra)
            .env_remove("RUST_LOG")
            .env_remove("FOLIO_LOG")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("folio serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let (ready, wait) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut ready = Some(ready);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                kept.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(line.clone());
                if line.contains("listening on https://")
                    && let Some(ready) = ready.take()
                {
                    let _ = ready.send(());
                }
                if std::env::var_os("FOLIO_TEST_SERVER_LOG").is_some() {
                    eprintln!("[folio] {line}");
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while wait.recv_timeout(Duration::from_millis(100)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("folio serve exited early: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "folio serve did not start in 60 s"
            );
        }
        Server {
            child,
            port,
            http_port,
            data: data.to_owned(),
            log,
        }
    }

    /// The lines logged so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn base_url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    pub fn cert(&self) -> PathBuf {
        self.data.join("tls/cert.pem")
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// wrangler's environment for the tests that run the worker: no
/// telemetry, no download of `Request.cf`, the worker already built
/// (e2e/wrangler.mjs sets the same).
pub const WRANGLER_ENV: &[(&str, &str)] = &[
    ("WRANGLER_SEND_METRICS", "false"),
    ("WRANGLER_SEND_ERROR_REPORTS", "false"),
    ("DO_NOT_TRACK", "1"),
    ("CLOUDFLARE_CF_FETCH_ENABLED", "false"),
    ("FOLIO_WORKER_PREBUILT", "1"),
];

/// Runs `program` (wrangler, most often) in `dir` with [`WRANGLER_ENV`] to
/// completion; its standard output. Panics with its output if it fails.
pub fn run_tool(program: &Path, args: &[&str], dir: &Path) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .envs(WRANGLER_ENV.iter().copied())
        .output()
        .unwrap_or_else(|error| panic!("{}: {error}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?}: {}{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
