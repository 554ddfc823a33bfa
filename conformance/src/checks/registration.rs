//! App registration: a POST of an App record carrying the app's new key in
//! `X-Svc-PublicKey` or `X-Svc-Credentials`, signed by that key with an
//! empty authorization-id line (PROTOCOL.md §10).

use reqwest::Method;
use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::apps::{
    CREDENTIALS_HEADER, NewApp, PUBLIC_KEY_HEADER, ScopeItem, key_header, register, register_body,
    registered, registration, scope_type,
};
use crate::checks::cors::ensure_exposed_headers;
use crate::client::{Call, Response, record_id};
use crate::context::Ctx;
use crate::expect::{
    self, BODY_TOO_LARGE, ID_CONFLICT, INVALID_BODY, INVALID_SIGNATURE, MALFORMED_AUTHORIZATION,
    MISSING_AUTHORIZATION, Problem, RECORD_NOT_FOUND, UNKNOWN_APP, ensure, ensure_eq, str_at,
};
use crate::signer::AppKey;

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "registration/good-key-x-svc-publickey-200",
            good_key_public_key
        ),
        check!(
            "registration/good-key-x-svc-credentials-200",
            good_key_credentials
        ),
        check!(
            "registration/answers-server-key-in-same-header",
            answers_in_same_header
        ),
        check!("registration/signed-key-header-accepted", signed_key_header),
        check!("registration/wrong-key-invalid-signature", wrong_key),
        check!(
            "registration/missing-key-header-unknown-app",
            missing_key_header
        ),
        check!(
            "registration/missing-key-header-and-authorization-401",
            missing_key_header_and_authorization
        ),
        check!(
            "registration/malformed-key-header-bad-syntax",
            malformed_syntax
        ),
        check!(
            "registration/malformed-key-header-short-key",
            malformed_short_key
        ),
        check!(
            "registration/malformed-key-header-not-base64",
            malformed_not_base64
        ),
        check!(
            "registration/same-id-other-key-id-conflict",
            same_id_other_key
        ),
        check!(
            "registration/same-id-same-key-new-version",
            same_id_same_key
        ),
        check!("registration/other-type-invalid-body", other_type),
        check!("registration/id-mismatch-invalid-body", id_mismatch),
        check!("registration/no-id-invalid-body", no_id),
        check!(
            "registration/icon-of-a-stored-blob-invalid-body",
            icon_refused
        ),
        check!("registration/body-over-32-kib-413", body_over_32_kib),
        check!(
            "registration/unauthorized-app-unknown-app",
            unauthorized_app
        ),
        check!("registration/works-cross-origin", works_cross_origin),
    ]
}

/// A scope request naming one fresh type, as a real app's would.
async fn some_scope(ctx: &Ctx) -> Result<Vec<ScopeItem>, String> {
    let (ty, _) = scope_type(ctx, "conformance_registration").await?;
    Ok(vec![ScopeItem::of("read", &ty)?])
}

/// Registers a fresh app with `header`; fails unless it succeeds and the
/// answer is its App record.
async fn good_key(ctx: &Ctx, header: &'static str) -> CheckResult {
    let app = NewApp::fresh();
    let body = app.body(ctx, &some_scope(ctx).await?).await?;
    let call = registration(ctx, &app.key, header, &app.key.public_key(), &body)?;
    let record = registered(&ctx.send(call).await?, header)?.record;
    ensure_eq!(record["id"].as_str(), Some(app.id()), "the App record's id");
    ensure_eq!(
        record.pointer("/author/entity").and_then(Value::as_str),
        Some(ctx.entity()),
        "the App record's author"
    );
    ensure_eq!(
        record["permissions"],
        json!({}),
        "the App record's permissions"
    );
    let app_type = ctx.builtin_type("app").await?;
    ensure_eq!(
        record.pointer("/type/record_id"),
        app_type.pointer("/record_id"),
        "the App record's type"
    );
    ensure_eq!(
        record.pointer("/content/name").and_then(Value::as_str),
        Some(app.name.as_str()),
        "the App record's name"
    );
    let stored = expect::json(&ctx.get_record(app.id()).await?, 200)
        .map_err(|error| format!("the full app reading the App record: {error}"))?;
    ensure_eq!(
        stored.pointer("/record/version/hash"),
        record.pointer("/version/hash"),
        "the stored App record's version"
    );
    let anonymous = ctx.send(Call::get(ctx.record_url(app.id())?)).await?;
    expect::problem_response(&anonymous, RECORD_NOT_FOUND)
        .map_err(|error| format!("an anonymous GET of the private App record: {error}"))?;
    Ok(())
}

async fn good_key_public_key(ctx: &Ctx) -> CheckResult {
    good_key(ctx, PUBLIC_KEY_HEADER).await
}

async fn good_key_credentials(ctx: &Ctx) -> CheckResult {
    good_key(ctx, CREDENTIALS_HEADER).await
}

async fn answers_in_same_header(ctx: &Ctx) -> CheckResult {
    let scope = some_scope(ctx).await?;
    for header in [PUBLIC_KEY_HEADER, CREDENTIALS_HEADER] {
        let app = NewApp::fresh();
        let body = app.body(ctx, &scope).await?;
        let call = registration(ctx, &app.key, header, &app.key.public_key(), &body)?;
        let answer = registered(&ctx.send(call).await?, header)
            .map_err(|error| format!("registering with {header}: {error}"))?;
        ensure!(
            answer.server_key != app.key.public_key(),
            "the server answered the app's own key in {header}"
        );
    }
    Ok(())
}

async fn signed_key_header(ctx: &Ctx) -> CheckResult {
    let scope = some_scope(ctx).await?;
    for header in [PUBLIC_KEY_HEADER, CREDENTIALS_HEADER] {
        let app = NewApp::fresh();
        let body = app.body(ctx, &scope).await?;
        let call = registration(ctx, &app.key, header, &app.key.public_key(), &body)?
            .signed_headers(&app.key, &[header]);
        registered(&ctx.send(call).await?, header)
            .map_err(|error| format!("with {header} signed: {error}"))?;
    }
    Ok(())
}

/// Sends the registration of a fresh app built by `build`, which gets the
/// app and its body; fails unless the answer is `problem`.
async fn expect_refused(
    ctx: &Ctx,
    problem: Problem,
    build: impl for<'a> FnOnce(&'a NewApp, Value) -> Result<Call<'a>, String>,
) -> CheckResult {
    let app = NewApp::fresh();
    let body = app.body(ctx, &some_scope(ctx).await?).await?;
    let response = ctx.send(build(&app, body)?).await?;
    expect::problem_response(&response, problem)?;
    ensure_not_registered(ctx, app.id()).await
}

/// Sends a fresh app's registration, signed and keyed as it should be,
/// of a body that `edit` spoils; fails unless the answer is `problem`.
async fn expect_body_refused(
    ctx: &Ctx,
    problem: Problem,
    edit: impl FnOnce(&mut Value),
) -> CheckResult {
    expect_refused(ctx, problem, |app, mut body| {
        edit(&mut body);
        registration(
            ctx,
            &app.key,
            PUBLIC_KEY_HEADER,
            &app.key.public_key(),
            &body,
        )
    })
    .await
}

/// A refused registration stores nothing.
async fn ensure_not_registered(ctx: &Ctx, id: &str) -> CheckResult {
    let response = ctx.get_record(id).await?;
    ensure!(
        response.status == 404,
        "the refused App record {id} was stored: GET answers {}",
        response.status
    );
    Ok(())
}

async fn wrong_key(ctx: &Ctx) -> CheckResult {
    let app = NewApp::fresh();
    let other = AppKey::generate(app.id());
    let body = app.body(ctx, &some_scope(ctx).await?).await?;
    let call = registration(ctx, &other, PUBLIC_KEY_HEADER, &app.key.public_key(), &body)?;
    expect::problem_response(&ctx.send(call).await?, INVALID_SIGNATURE)?;
    ensure_not_registered(ctx, app.id()).await
}

async fn missing_key_header(ctx: &Ctx) -> CheckResult {
    expect_refused(ctx, UNKNOWN_APP, |app, body| {
        Ok(Call::post(ctx.records_url()?).json(&body).signed(&app.key))
    })
    .await
}

async fn missing_key_header_and_authorization(ctx: &Ctx) -> CheckResult {
    expect_refused(ctx, MISSING_AUTHORIZATION, |_, body| {
        Ok(Call::post(ctx.records_url()?).json(&body))
    })
    .await
}

/// A registration whose key header holds `value` verbatim.
async fn malformed(ctx: &Ctx, value: &str) -> CheckResult {
    expect_refused(ctx, MALFORMED_AUTHORIZATION, |app, body| {
        Ok(Call::post(ctx.records_url()?)
            .json(&body)
            .header(PUBLIC_KEY_HEADER, value)
            .signed(&app.key))
    })
    .await
}

async fn malformed_syntax(ctx: &Ctx) -> CheckResult {
    malformed(ctx, "ed25519 this is not a parameter list").await
}

async fn malformed_short_key(ctx: &Ctx) -> CheckResult {
    let short = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        rand::random::<[u8; 31]>(),
    );
    malformed(ctx, &key_header(&short)).await
}

async fn malformed_not_base64(ctx: &Ctx) -> CheckResult {
    malformed(
        ctx,
        &key_header("not*base64*at*all*but*44*characters*long**"),
    )
    .await
}

async fn same_id_other_key(ctx: &Ctx) -> CheckResult {
    let scope = some_scope(ctx).await?;
    let app = NewApp::fresh();
    let first = register(ctx, &app, &scope).await?;
    let other = AppKey::generate(app.id());
    let body = app.body(ctx, &scope).await?;
    let call = registration(ctx, &other, PUBLIC_KEY_HEADER, &other.public_key(), &body)?;
    expect::problem_response(&ctx.send(call).await?, ID_CONFLICT)?;
    let stored = expect::json(&ctx.get_record(app.id()).await?, 200)?;
    ensure_eq!(
        stored.pointer("/record/version/hash"),
        first.record.pointer("/version/hash"),
        "the App record after the conflicting registration"
    );
    Ok(())
}

async fn same_id_same_key(ctx: &Ctx) -> CheckResult {
    let scope = some_scope(ctx).await?;
    let app = NewApp::fresh();
    let first = register(ctx, &app, &scope).await?;
    let mut body = app.body(ctx, &scope).await?;
    body["content"]["description"] = json!("Registered again by the conformance suite.");
    let again = register_body(ctx, &app, &body).await?;
    let first_hash = str_at(&first.record, "/version/hash")?;
    ensure!(
        str_at(&again.record, "/version/hash")? != first_hash,
        "registering again answered the first version"
    );
    ensure_eq!(
        again
            .record
            .pointer("/version/parent_hash")
            .and_then(Value::as_str),
        Some(first_hash),
        "the new version's parent_hash"
    );
    ensure_eq!(
        again.record.pointer("/content/description"),
        body.pointer("/content/description"),
        "the new version's description"
    );
    ensure_eq!(again.server_key, first.server_key, "the server's key");
    Ok(())
}

async fn other_type(ctx: &Ctx) -> CheckResult {
    let note = ctx.note_type().await?;
    expect_body_refused(ctx, INVALID_BODY, |body| {
        body["type"] = note;
        body["content"] = json!({"title": "not an app"});
    })
    .await
}

async fn id_mismatch(ctx: &Ctx) -> CheckResult {
    let other_id = record_id();
    expect_body_refused(ctx, INVALID_BODY, |body| body["id"] = json!(other_id)).await?;
    ensure_not_registered(ctx, &other_id).await
}

async fn no_id(ctx: &Ctx) -> CheckResult {
    expect_body_refused(ctx, INVALID_BODY, |body| {
        if let Some(body) = body.as_object_mut() {
            body.remove("id");
        }
    })
    .await
}

/// Registration writes with the owner's rights, so an icon linked then
/// would tell a stranger whether the store holds a blob (PROTOCOL.md §9:
/// an app links its icon once authorized).
async fn icon_refused(ctx: &Ctx) -> CheckResult {
    let uploaded = ctx.upload_blob(b"\x89PNG a held icon", "image/png").await?;
    let hash = str_at(&uploaded, "/hash")?.to_string();
    expect_body_refused(ctx, INVALID_BODY, |body| {
        body["content"]["icon"] = json!({"hash": hash, "type": "image/png", "name": "icon.png"});
    })
    .await
}

/// Anyone may register, and what they register is kept: a registration
/// body is capped well below an app's writes (PROTOCOL.md §13).
async fn body_over_32_kib(ctx: &Ctx) -> CheckResult {
    expect_body_refused(ctx, BODY_TOO_LARGE, |body| {
        body["padding"] = json!("x".repeat(33 << 10));
    })
    .await
}

async fn unauthorized_app(ctx: &Ctx) -> CheckResult {
    let app = NewApp::fresh();
    register(ctx, &app, &some_scope(ctx).await?).await?;
    let signed_as: [(&str, AppKey); 2] = [
        ("the empty authorization id", app.key.clone()),
        (
            "a made-up authorization id",
            app.key.authorized(&record_id()),
        ),
    ];
    for (what, key) in &signed_as {
        for call in [
            Call::get(ctx.records_url()?).signed(key),
            Call::get(ctx.record_url(app.id())?).signed(key),
        ] {
            let response = ctx.send(call).await?;
            expect::problem_response(&response, UNKNOWN_APP)
                .map_err(|error| format!("signed with {what}: {error}"))?;
        }
    }
    Ok(())
}

async fn works_cross_origin(ctx: &Ctx) -> CheckResult {
    let preflight = Call::new(Method::OPTIONS, ctx.records_url()?)
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type,x-svc-publickey",
        );
    let response = ctx.send(preflight).await?;
    expect::status(&response, 204).map_err(|error| format!("preflight: {error}"))?;
    let allowed = response
        .header("access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    ensure!(
        allowed
            .split(',')
            .any(|name| name.trim() == PUBLIC_KEY_HEADER),
        "the preflight does not allow X-Svc-PublicKey: {allowed:?}"
    );
    let app = NewApp::fresh();
    let body = app.body(ctx, &some_scope(ctx).await?).await?;
    let call = registration(
        ctx,
        &app.key,
        PUBLIC_KEY_HEADER,
        &app.key.public_key(),
        &body,
    )?
    .header("origin", "https://app.example");
    let response: Response = ctx.send(call).await?;
    registered(&response, PUBLIC_KEY_HEADER)?;
    ensure_eq!(
        response.header("access-control-allow-origin"),
        Some("*"),
        "Access-Control-Allow-Origin"
    );
    ensure_exposed_headers(&response)
}
