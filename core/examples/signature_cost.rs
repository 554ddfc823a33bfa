//! Runs one request-signature check N times, for counting instructions with
//! callgrind, which is repeatable where wall-clock benchmarks on shared
//! machines are not:
//!
//! ```sh
//! cargo build --release -p folio-core --example signature_cost
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/signature_cost header 1000   # or: raw 1000, or: none 1000
//! ```
//!
//! `header` parses an Authorization header and verifies it; `raw` runs
//! ed25519-dalek's verify_strict on the same message; `none` does the setup
//! only, to subtract.

use std::hint::black_box;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer, SigningKey};
use folio_core::auth::{AppKey, SignedRequest};
use folio_core::model::RecordId;
use folio_core::model::dialect::Dialect;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let iterations: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);

    let key = SigningKey::from_bytes(&[7; 32]);
    let app_key = AppKey::from_bytes(key.verifying_key().as_bytes()).unwrap();
    let auth_id: RecordId = "ffeeddccbbaa99887766554433221100".parse().unwrap();
    let request = SignedRequest {
        method: "GET",
        path_and_query: "/api/alice/events?min=%222026-11-21T10%3A50%3A20.485Z%22",
        host: "alice.folio.example",
        port: 443,
    };
    let headers: &[(&str, &str)] = &[("x-svc-client-id", "8fbf7696f25b4628bde73f46f4631d3f")];
    let input = format!(
        "svc.request\ned25519\n1732184130123\n3f9a0c1e\n{auth_id}\nGET\n{}\n{}\n443\nx-svc-client-id={}\n",
        request.path_and_query, request.host, headers[0].1
    );
    let signature = key.sign(input.as_bytes());
    let header = format!(
        "SVC algorithm=\"ed25519\" ts=\"1732184130123\" nonce=\"3f9a0c1e\" id=\"00112233445566778899aabbccddeeff\" \
         headers=\"x-svc-client-id\" signature=\"{}\"",
        STANDARD.encode(signature.to_bytes())
    );
    let verifying_key = key.verifying_key();

    for _ in 0..iterations {
        match mode.as_str() {
            "header" => {
                let parsed = Dialect::Svc
                    .parse_authorization(black_box(&header))
                    .unwrap();
                parsed
                    .verify(&app_key, Some(&auth_id), &request, headers)
                    .unwrap();
            }
            "raw" => verifying_key
                .verify_strict(black_box(input.as_bytes()), &signature)
                .unwrap(),
            "none" => {}
            other => panic!("unknown mode {other:?}: header, raw or none"),
        }
    }
}
