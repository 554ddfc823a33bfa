//! Sequential create and list round trips with the Rust client, on one
//! connection: the counterpart of clients/js/bench/roundtrip.mjs, which
//! starts the server and runs both.
//!
//!   roundtrip BASE_URL CA_CERT APP_ID AUTHORIZATION_ID SEED TYPE_LINK_JSON COUNT
//!
//! Prints one JSON object: `{"creates_per_s", "lists_per_s"}`.

use std::time::Instant;

use folio_client::TrustOptions;
use folio_client::client::{Call, Http};
use folio_client::signer::AppKey;
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [base, ca, app_id, authorization_id, seed, type_link, count] = args.as_slice() else {
        return Err(
            "usage: roundtrip BASE_URL CA_CERT APP_ID AUTHORIZATION_ID SEED TYPE_LINK_JSON COUNT"
                .into(),
        );
    };
    let count: u32 = count.parse().map_err(|e| format!("COUNT: {e}"))?;
    let type_link: Value =
        serde_json::from_str(type_link).map_err(|e| format!("TYPE_LINK_JSON: {e}"))?;
    let key = AppKey::new(app_id, authorization_id, seed)?;
    let trust = TrustOptions {
        ca_cert: Some(ca.clone()),
        insecure: false,
    };
    let http = Http::new(&trust)?;
    let records = format!("{base}/api/me/records");
    let url = |text: &str| text.parse::<url::Url>().map_err(|e| e.to_string());

    let started = Instant::now();
    for n in 0..count {
        let body = json!({"type": type_link, "content": {"n": n}});
        let answer = http
            .send(&Call::post(url(&records)?).json(&body).signed(&key))
            .await?;
        if answer.status != 200 {
            return Err(format!("create: {} {}", answer.status, answer.excerpt()));
        }
    }
    let creates = f64::from(count) / started.elapsed().as_secs_f64();

    let started = Instant::now();
    for _ in 0..count {
        let answer = http
            .send(&Call::get(url(&format!("{records}?page_size=20"))?).signed(&key))
            .await?;
        if answer.status != 200 {
            return Err(format!("list: {} {}", answer.status, answer.excerpt()));
        }
    }
    let lists = f64::from(count) / started.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({"creates_per_s": creates.round(), "lists_per_s": lists.round()})
    );
    Ok(())
}
