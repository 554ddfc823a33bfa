//! Core benchmarks: the version hash of a 1 KiB record; an Authorization
//! header's parse + verify against raw ed25519-dalek verification of the same
//! message, the yardstick it should stay close to; and validating a 1 KiB
//! post (../shared/real-types/post.json) while extracting its links; and the
//! whole create transition of a 1 KiB post, its needs answered from memory;
//! and the console's bounded line diff at its worst cases (issue 40).
//!
//! Run: `cargo bench -p folio-core --bench core`

use std::hint::black_box;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use criterion::{Criterion, criterion_group, criterion_main};
use ed25519_dalek::{Signer, SigningKey};
use folio_core::auth::access::Access;
use folio_core::auth::{AppKey, SignedRequest};
use folio_core::model::Record;
use folio_core::model::dialect::Dialect;
use folio_core::schema::RecordType;
use folio_core::schema::builtin::BuiltinType;
use folio_core::write::{BlobFacts, Need, Step, Supplied, Write, WriteContext, WriteRequest};
use serde_json::{Value, json};

/// A message record as the messaging app of ../shared/real-types writes it,
/// padded so that its hashed form is 1 KiB.
fn message_record() -> Record {
    let mut record = json!({
        "author": {"entity": "alice.folio.example"},
        "id": "6b1d5c0e9f8a4b7c8d2e3f4a5b6c7d8e",
        "source": "self",
        "created_at": "2026-11-21T10:15:30.1234567Z",
        "received_at": "2026-11-21T10:15:30.2345678Z",
        "version": {
            "author": {"entity": "alice.folio.example"},
            "hash": "0000000000000000000000000000000000000000000000000000000000000000",
            "parent_hash": "4f2d8c6a0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d4f",
            "created_at": "2026-11-21T10:16:02.5790000Z",
            "received_at": "2026-11-21T10:16:02.6000000Z"
        },
        "permissions": {
            "read": [{"entity": "alice.folio.example"}, {"entity": "bob.folio.example"}],
            "write": [{"entity": "alice.folio.example"}]
        },
        "type": {
            "entity": "types.folio.example",
            "record_id": "153b3cb3a2f0494e950599de1cc13ef3",
            "version_hash": "c169efc698f0b42fd0b38f9a1a3430a0b31184b296c67246dd3ed31a4b701a5b"
        },
        "content": {
            "conversation": {"entity": "alice.folio.example", "record_id": "7583995c51cf44ad972fdc123105e1dc"},
            "text": "",
            "mentions": [{"entity": "bob.folio.example"}],
            "images": [{
                "small": {
                    "hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99",
                    "type": "image/jpeg",
                    "name": "small.jpg",
                    "size": 1200
                },
                "width": 640,
                "height": 480
            }],
            "sent_at": 1732184130123_i64,
            "reactions": {"👍": 2, "🎉": 1}
        }
    });
    let base = serde_json::from_value::<Record>(record.clone())
        .unwrap()
        .hash_input()
        .canonical_json()
        .len();
    record["content"]["text"] = json!(
        "Meet at the cafe at noon? I'll bring the printed agenda and the notes. ".repeat(20)
            [..1024 - base]
            .to_owned()
    );
    let record: Record = serde_json::from_value(record).unwrap();
    assert_eq!(record.hash_input().canonical_json().len(), 1024);
    record
}

fn version_hash(c: &mut Criterion) {
    let record = message_record();
    c.bench_function("version hash, 1 KiB record", |b| {
        b.iter(|| black_box(&record).hash_input().hash())
    });
}

fn authorization(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[7; 32]);
    let app_key = AppKey::from_bytes(key.verifying_key().as_bytes()).unwrap();
    let auth_id = "ffeeddccbbaa99887766554433221100".parse().unwrap();
    let request = SignedRequest {
        method: "GET",
        path_and_query: "/api/alice/events?min=%222026-11-21T10%3A50%3A20.485Z%22&filter=%24%5B%27type%27%5D%3Dtypes.folio.example%2Bfe727f22b5c34fb185a370449e4f0128",
        host: "alice.folio.example",
        port: 443,
    };
    let headers: &[(&str, &str)] = &[
        ("last-event-id", "ace998430d9142e8be861a396fc8e5ae"),
        ("x-svc-client-id", "8fbf7696f25b4628bde73f46f4631d3f"),
    ];
    let input = format!(
        "svc.request\ned25519\n1732184130123\n3f9a0c1e\nffeeddccbbaa99887766554433221100\nGET\n{}\n{}\n443\n\
         last-event-id=ace998430d9142e8be861a396fc8e5ae\nx-svc-client-id=8fbf7696f25b4628bde73f46f4631d3f\n",
        request.path_and_query, request.host
    );
    let signature = key.sign(input.as_bytes());
    let header = format!(
        "SVC algorithm=\"ed25519\" ts=\"1732184130123\" nonce=\"3f9a0c1e\" id=\"00112233445566778899aabbccddeeff\" \
         headers=\"last-event-id,x-svc-client-id\" signature=\"{}\"",
        STANDARD.encode(signature.to_bytes())
    );
    Dialect::Svc
        .parse_authorization(&header)
        .unwrap()
        .verify(&app_key, Some(&auth_id), &request, headers)
        .unwrap();

    let mut group = c.benchmark_group("request signature");
    group.bench_function("Authorization parse + verify", |b| {
        b.iter(|| {
            let parsed = Dialect::Svc
                .parse_authorization(black_box(&header))
                .unwrap();
            parsed
                .verify(&app_key, Some(&auth_id), &request, headers)
                .unwrap()
        })
    });
    let verifying_key = key.verifying_key();
    group.bench_function("raw ed25519-dalek verify_strict", |b| {
        b.iter(|| {
            verifying_key
                .verify_strict(black_box(input.as_bytes()), &signature)
                .unwrap()
        })
    });
    group.finish();
}

/// A public post as the social app writes it: text with mention and web
/// link facets, an image set of three JPEG blobs, and a reply: about 1 KiB of
/// content.
fn post_record() -> Record {
    let blob = |name: &str, size: u64| json!({"hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99", "type": "image/jpeg", "name": name, "size": size});
    let mut record = serde_json::to_value(message_record()).unwrap();
    record["permissions"] = json!({"read": "public"});
    record["type"]["record_id"] = json!("875d6b82645e4833a3f0dca3fb79d69d");
    record["content"] = json!({
        "text": "Hi @bob and @carol, the photos from Saturday: https://example.org/album/2026-11-21",
        "text_facets": [
            {"index": 3, "length": 4, "type": "mention", "mention": {"entity": "bob.folio.example"}},
            {"index": 12, "length": 6, "type": "mention", "mention": {"entity": "carol.folio.example"}},
            {"index": 46, "length": 37, "type": "web_link", "url": "https://example.org/album/2026-11-21"}
        ],
        "media": {"type": "images", "images": [{
            "small": blob("small.jpg", 24_000), "medium": blob("medium.jpg", 180_000), "large": blob("large.jpg", 900_000),
            "width": 2048, "height": 1536, "alt": "Six of us on the ridge"
        }]},
        "reply_to_post": {"entity": "bob.folio.example", "record_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0"}
    });
    serde_json::from_value(record).unwrap()
}

fn validation(c: &mut Criterion) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-types/post.json"
    ))
    .unwrap();
    let post_type = RecordType::from_content(&serde_json::from_str(&text).unwrap()).unwrap();
    let record = post_record();
    let links = post_type.schema.validate(&record).unwrap().links.len();
    let bytes = serde_json::to_string(record.content().unwrap())
        .unwrap()
        .len();
    c.bench_function(
        &format!("validate + links, post ({bytes} bytes of content, {links} links)"),
        |b| b.iter(|| post_type.schema.validate(black_box(&record)).unwrap()),
    );
}

/// A record of `entity` with this id, type, permissions and content, hashed.
fn stored_record(entity: &str, id: &str, type_link: Value, content: Value) -> Record {
    let mut record: Record = serde_json::from_value(json!({
        "author": {"entity": entity}, "id": id, "source": "self",
        "created_at": "2026-11-20T08:00:00.0000000Z", "received_at": "2026-11-20T08:00:00.0000000Z",
        "version": {"author": {"entity": entity}, "hash": "0".repeat(64), "created_at": "2026-11-20T08:00:00.0000000Z"},
        "permissions": {"read": "public"}, "type": type_link, "content": content
    }))
    .unwrap();
    record.version.hash = record.hash_input().hash();
    record
}

/// The body of a public post with a mention and three image blobs, whose
/// text is padded by `padding` characters.
fn post_body(type_link: &Value, padding: usize) -> Vec<u8> {
    let blob = |digit: char, name: &str, size: u64| json!({"hash": digit.to_string().repeat(64), "type": "image/jpeg", "name": name, "size": size});
    let text = "Hi @bob, the photos! ".to_owned() + &"and more ".repeat(60)[..padding];
    let body = json!({
        "type": type_link,
        "permissions": {"read": "public"},
        "content": {
            "text": text,
            "text_facets": [{"index": 3, "length": 4, "type": "mention", "mention": {"entity": "bob.example"}}],
            "media": {"type": "images", "images": [{
                "small": blob('1', "small.jpg", 24_000), "medium": blob('2', "medium.jpg", 180_000),
                "large": blob('3', "large.jpg", 900_000), "width": 2048, "height": 1536
            }]}
        }
    });
    serde_json::to_vec(&body).unwrap()
}

/// The whole create transition: parse the body, read the type (its schema
/// compiled), build and hash the version, validate it, and check its links
/// (an entity and three blobs), with the needs answered from memory.
fn create_transition(c: &mut Criterion) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-types/post.json"
    ))
    .unwrap();
    let type_type = serde_json::to_value(BuiltinType::Type.link()).unwrap();
    let post_type = stored_record(
        "types.baq.dev",
        "875d6b82645e4833a3f0dca3fb79d69d",
        type_type,
        serde_json::from_str(&text).unwrap(),
    );
    let type_link = json!({"entity": "types.baq.dev", "record_id": post_type.id, "version_hash": post_type.version.hash});
    let answer = |need: &Need| match need {
        Need::Version { .. } => Supplied::Record(Some(std::sync::Arc::new(post_type.clone()))),
        Need::Entity(_) => Supplied::Known(true),
        Need::Blob(hash) => {
            let size = match hash.as_bytes()[0] {
                0x11 => 24_000,
                0x22 => 180_000,
                _ => 900_000,
            };
            Supplied::Blob(Some(BlobFacts {
                size,
                uploaded: true,
            }))
        }
        Need::Latest(_) => Supplied::Record(None),
        Need::Dependants(_) | Need::BlobLinkers(_) => Supplied::Records(Vec::new()),
    };
    let create = |body: &[u8]| {
        let context = WriteContext {
            user: "alice.example".parse().unwrap(),
            access: Access::Owner {
                entity: "alice.example".parse().unwrap(),
            },
            now: "2026-11-21T10:15:30.1234567Z".parse().unwrap(),
            received_at: "2026-11-21T10:15:30.1234567Z".parse().unwrap(),
            last_received_at: None,
            fresh_id: "6b1d5c0e9f8a4b7c8d2e3f4a5b6c7d8e".parse().unwrap(),
        };
        let mut write = Write::new(WriteRequest::post(body).unwrap(), context);
        loop {
            match write.step() {
                Step::Fetch(needs) => write.supply(needs.iter().map(answer).collect()),
                Step::Done(result) => break result.unwrap(),
            }
        }
    };
    let unpadded = create(&post_body(&type_link, 0));
    let unpadded_len = unpadded.record().hash_input().canonical_json().len();
    assert!(unpadded_len <= 1024, "{unpadded_len} bytes before padding");
    let body = post_body(&type_link, 1024 - unpadded_len);
    let written = create(&body);
    assert_eq!(written.record().hash_input().canonical_json().len(), 1024);
    c.bench_function("create_transition_1kib", |b| {
        b.iter(|| create(black_box(&body)))
    });
}

/// The console's version diff where it costs most: the review's 40,000
/// changed lines (refused by the line limit), every line of the largest
/// comparable side changed (refused by the edit budget, after it), and the
/// most edits still compared.
fn console_diff(c: &mut Criterion) {
    use folio_core::service::console::{Differences, MAX_DIFF_EDITS, MAX_DIFF_LINES, diff_lines};
    let lines = |count: usize, mark: &dyn Fn(usize) -> &'static str| -> String {
        (0..count)
            .map(|i| format!("  \"{i}\": \"{}\",\n", mark(i)))
            .collect()
    };
    let review_before = lines(40_000, &|_| "a");
    let review_after = lines(40_000, &|_| "b");
    let before = lines(MAX_DIFF_LINES, &|_| "a");
    let all_changed = lines(MAX_DIFF_LINES, &|_| "b");
    let spread = MAX_DIFF_LINES / (MAX_DIFF_EDITS / 2);
    let most_edits = lines(MAX_DIFF_LINES, &|i| if i % spread == 0 { "b" } else { "a" });
    assert_eq!(
        diff_lines(&review_before, &review_after),
        Differences::TooLarge
    );
    assert_eq!(diff_lines(&before, &all_changed), Differences::TooLarge);
    assert!(matches!(
        diff_lines(&before, &most_edits),
        Differences::Lines(_)
    ));
    c.bench_function("console_diff_40000_lines_changed", |b| {
        b.iter(|| diff_lines(black_box(&review_before), black_box(&review_after)))
    });
    c.bench_function("console_diff_every_line_changed", |b| {
        b.iter(|| diff_lines(black_box(&before), black_box(&all_changed)))
    });
    c.bench_function("console_diff_most_edits_compared", |b| {
        b.iter(|| diff_lines(black_box(&before), black_box(&most_edits)))
    });
}

criterion_group!(
    benches,
    version_hash,
    authorization,
    validation,
    create_transition,
    console_diff
);
criterion_main!(benches);
