//! Uploading blobs and downloading them through records (spec §4.5,
//! PROTOCOL.md §9).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Check, CheckResult, check};
use crate::client::{Body, Call, Response, host_and_port, now_ms, path_and_query};
use crate::context::{BlobRecord, Ctx, with_query};
use crate::expect::{
    self, BLOB_NOT_FOUND, INVALID_LINK, LENGTH_REQUIRED, RANGE_NOT_SATISFIABLE, RECORD_NOT_FOUND,
    SCHEMA_VIOLATION, UNSUPPORTED_MEDIA_TYPE, ensure, ensure_eq, is_hex, str_at,
};
use crate::signer::SVC;

pub fn checks() -> Vec<Check> {
    vec![
        check!("blobs/upload-answers-hash-size-expires-at", upload_shape),
        check!("blobs/upload-hash-is-sha256", upload_hash),
        check!("blobs/upload-size-is-byte-count", upload_size),
        check!("blobs/upload-expires-in-an-hour", upload_expiry),
        check!("blobs/upload-without-content-type-415", upload_without_type),
        check!(
            "blobs/upload-without-content-length-411",
            upload_without_length
        ),
        check!("blobs/download-answers-the-bytes", download_bytes),
        check!("blobs/empty-blob-downloads-empty", empty_blob),
        check!(
            "blobs/download-content-type-from-link",
            download_content_type
        ),
        check!("blobs/download-content-length", download_content_length),
        check!("blobs/download-nosniff", download_nosniff),
        check!("blobs/download-disposition-token-name", disposition_token),
        check!("blobs/download-disposition-quoted-name", disposition_quoted),
        check!(
            "blobs/download-disposition-non-ascii-name",
            disposition_non_ascii
        ),
        check!("blobs/download-accept-ranges-bytes", accept_ranges),
        check!("blobs/cache-control-public-record", cache_public),
        check!("blobs/cache-control-private-signed", cache_private_signed),
        check!("blobs/cache-control-private-bearer", cache_private_bearer),
        check!("blobs/range-closed-206", range_closed),
        check!("blobs/range-open-ended-206", range_open_ended),
        check!("blobs/range-suffix-206", range_suffix),
        check!("blobs/range-unsatisfiable-416", range_unsatisfiable),
        check!("blobs/several-ranges-whole-blob-200", several_ranges),
        check!("blobs/name-not-linked-404", name_not_linked),
        check!("blobs/hash-not-linked-404", hash_not_linked),
        check!("blobs/tombstoned-record-404", tombstoned_record),
        check!("blobs/error-cache-control-no-cache", error_no_cache),
        check!("blobs/private-record-anonymous-404", private_anonymous),
        check!("blobs/public-record-anonymous-200", public_anonymous),
        check!("blobs/same-blob-under-two-names", two_names),
        check!(
            "blobs/record-endpoint-uses-latest-version",
            latest_version_only
        ),
        check!(
            "blobs/version-endpoint-serves-that-version",
            version_endpoint
        ),
        check!(
            "blobs/link-to-unuploaded-blob-invalid-link",
            unuploaded_link
        ),
        check!("blobs/size-mismatch-invalid-link", size_mismatch),
        check!("blobs/content-types-enforced", content_types_enforced),
        check!("blobs/max-size-enforced", max_size_enforced),
    ]
}

fn random_bytes(count: usize) -> Vec<u8> {
    (0..count).map(|_| rand::random::<u8>()).collect()
}

async fn upload_shape(ctx: &Ctx) -> CheckResult {
    let uploaded = ctx
        .upload_blob(&random_bytes(100), "application/octet-stream")
        .await?;
    ensure!(uploaded["hash"].is_string(), "no hash: {uploaded}");
    ensure!(uploaded["size"].is_u64(), "no size: {uploaded}");
    ensure!(
        uploaded["expires_at"].is_string(),
        "no expires_at: {uploaded}"
    );
    Ok(())
}

async fn upload_hash(ctx: &Ctx) -> CheckResult {
    let data = random_bytes(100);
    let uploaded = ctx.upload_blob(&data, "application/octet-stream").await?;
    let hash = str_at(&uploaded, "/hash")?;
    ensure!(
        is_hex(hash, 64),
        "hash {hash:?} is not 64 lowercase hex characters"
    );
    ensure_eq!(hash, hex::encode(Sha256::digest(&data)), "hash");
    Ok(())
}

async fn upload_size(ctx: &Ctx) -> CheckResult {
    let uploaded = ctx.upload_blob(&random_bytes(777), "text/plain").await?;
    ensure_eq!(uploaded["size"], json!(777), "size");
    Ok(())
}

async fn upload_expiry(ctx: &Ctx) -> CheckResult {
    let before = now_ms();
    let uploaded = ctx.upload_blob(&random_bytes(10), "text/plain").await?;
    let expires_at = str_at(&uploaded, "/expires_at")?;
    let expiry = crate::dates::unix_ms(expires_at)
        .ok_or_else(|| format!("expires_at {expires_at:?} is not a RecordDate"))?;
    let hour = 3_600_000;
    ensure!(
        (before + hour - 300_000..=now_ms() + hour + 300_000).contains(&expiry),
        "expires_at {expires_at} is not about an hour from now"
    );
    Ok(())
}

async fn upload_without_type(ctx: &Ctx) -> CheckResult {
    let call = Call::post(ctx.new_blob_url()?)
        .body(random_bytes(10), None)
        .signed(&ctx.full);
    expect::problem_response(&ctx.send(call).await?, UNSUPPORTED_MEDIA_TYPE).map(drop)
}

async fn upload_without_length(ctx: &Ctx) -> CheckResult {
    let mut call = Call::post(ctx.new_blob_url()?).signed(&ctx.full);
    call.body = Body::Stream {
        data: random_bytes(10),
        content_type: Some("text/plain".into()),
    };
    expect::problem_response(&ctx.send(call).await?, LENGTH_REQUIRED).map(drop)
}

async fn download(ctx: &Ctx, blob: &BlobRecord, range: Option<&str>) -> Result<Response, String> {
    let mut call = Call::get(ctx.blob_record_url(blob)?);
    if let Some(range) = range {
        call = call.header("range", range);
    }
    ctx.send(call.signed(&ctx.full)).await
}

async fn private_blob(ctx: &Ctx, name: &str) -> Result<BlobRecord, String> {
    ctx.blob_record(name, "image/png", false).await
}

async fn download_bytes(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, None).await?;
    expect::status(&response, 200)?;
    ensure!(
        response.body == blob.data,
        "the downloaded bytes differ from the upload"
    );
    Ok(())
}

/// A blob of no bytes is a blob too: uploaded, linked and downloaded whole.
async fn empty_blob(ctx: &Ctx) -> CheckResult {
    let uploaded = ctx.upload_blob(&[], "text/plain").await?;
    let hash = str_at(&uploaded, "/hash")?.to_string();
    ensure_eq!(uploaded["size"], json!(0), "size");
    let file = json!({"hash": hash, "type": "text/plain", "name": "empty.txt", "size": 0});
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "empty", "file": file}});
    let record = ctx.create(body).await?;
    let url = ctx.blob_url(str_at(&record, "/id")?, &hash, "empty.txt")?;
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    expect::status(&response, 200)?;
    ensure!(
        response.body.is_empty(),
        "{} bytes for an empty blob",
        response.body.len()
    );
    ensure_eq!(
        response.header("content-length"),
        Some("0"),
        "Content-Length"
    );
    Ok(())
}

async fn download_content_type(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, None).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("content-type"),
        Some("image/png"),
        "Content-Type"
    );
    Ok(())
}

async fn download_content_length(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, None).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("content-length"),
        Some("1024"),
        "Content-Length"
    );
    Ok(())
}

/// A browser must not guess a page or a script from an uploaded blob's
/// bytes, whatever type its link declares.
async fn download_nosniff(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, None).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("x-content-type-options"),
        Some("nosniff"),
        "X-Content-Type-Options"
    );
    Ok(())
}

async fn disposition(ctx: &Ctx, name: &str) -> Result<String, String> {
    let blob = private_blob(ctx, name).await?;
    let response = download(ctx, &blob, None).await?;
    expect::status(&response, 200)?;
    response
        .header_text("content-disposition")
        .ok_or_else(|| "no Content-Disposition".to_string())
}

async fn disposition_token(ctx: &Ctx) -> CheckResult {
    ensure_eq!(
        disposition(ctx, "image.png").await?,
        "attachment; filename=image.png",
        "Content-Disposition"
    );
    Ok(())
}

async fn disposition_quoted(ctx: &Ctx) -> CheckResult {
    let value = disposition(ctx, "my image.png").await?;
    ensure_eq!(
        value,
        "attachment; filename=\"my image.png\"",
        "Content-Disposition"
    );
    Ok(())
}

async fn disposition_non_ascii(ctx: &Ctx) -> CheckResult {
    let value = disposition(ctx, "été.png").await?;
    ensure!(
        value.starts_with("attachment;"),
        "Content-Disposition {value:?}"
    );
    ensure!(
        value.contains("filename*=UTF-8''%C3%A9t%C3%A9.png"),
        "Content-Disposition {value:?} lacks filename*=UTF-8''%C3%A9t%C3%A9.png"
    );
    Ok(())
}

async fn accept_ranges(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, None).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("accept-ranges"),
        Some("bytes"),
        "Accept-Ranges"
    );
    Ok(())
}

async fn cache_public(ctx: &Ctx) -> CheckResult {
    let blob = ctx.blob_record("public.png", "image/png", true).await?;
    let response = ctx.send(Call::get(ctx.blob_record_url(&blob)?)).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("cache-control"),
        Some("max-age=31536000, s-maxage=7200, immutable"),
        "Cache-Control"
    );
    Ok(())
}

async fn cache_private_signed(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, None).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("cache-control"),
        Some("private, max-age=31536000, immutable"),
        "Cache-Control"
    );
    Ok(())
}

async fn cache_private_bearer(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let url = ctx.blob_record_url(&blob)?;
    let (host, port) = host_and_port(&url);
    let lifetime_s = 600;
    let token = ctx.full.bearer_token(
        SVC,
        now_ms() + lifetime_s * 1000,
        path_and_query(&url),
        &host,
        port,
    );
    let response = ctx
        .send(Call::get(with_query(url, &[("bearer", &token.standard())])))
        .await?;
    expect::status(&response, 200)?;
    let value = response.header("cache-control").unwrap_or_default();
    let seconds = value
        .strip_prefix("max-age=")
        .and_then(|rest| rest.split_once(", s-maxage="))
        .filter(|(max_age, s_maxage)| max_age == s_maxage)
        .and_then(|(max_age, _)| max_age.parse::<i64>().ok())
        .ok_or_else(|| format!("Cache-Control {value:?} is not max-age=N, s-maxage=N"))?;
    ensure!(
        (lifetime_s - 60..=lifetime_s).contains(&seconds),
        "Cache-Control {value:?}: N should be the token's remaining {lifetime_s} s"
    );
    Ok(())
}

async fn ranged(ctx: &Ctx, range: &str, start: usize, end: usize) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, Some(range)).await?;
    expect::status(&response, 206)?;
    let expected = format!("bytes {start}-{end}/1024");
    ensure_eq!(
        response.header("content-range"),
        Some(expected.as_str()),
        "Content-Range"
    );
    ensure!(
        response.body == blob.data[start..=end],
        "the ranged bytes differ"
    );
    Ok(())
}

async fn range_closed(ctx: &Ctx) -> CheckResult {
    ranged(ctx, "bytes=10-19", 10, 19).await
}

async fn range_open_ended(ctx: &Ctx) -> CheckResult {
    ranged(ctx, "bytes=1000-", 1000, 1023).await
}

async fn range_suffix(ctx: &Ctx) -> CheckResult {
    ranged(ctx, "bytes=-24", 1000, 1023).await
}

async fn range_unsatisfiable(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, Some("bytes=5000-6000")).await?;
    expect::problem_response(&response, RANGE_NOT_SATISFIABLE)?;
    ensure_eq!(
        response.header("content-range"),
        Some("bytes */1024"),
        "Content-Range"
    );
    Ok(())
}

async fn several_ranges(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = download(ctx, &blob, Some("bytes=0-1,5-6")).await?;
    expect::status(&response, 200)?;
    ensure!(response.body == blob.data, "the body is not the whole blob");
    Ok(())
}

async fn name_not_linked(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let url = ctx.blob_url(&blob.id, &blob.hash, "other.png")?;
    expect::problem_response(
        &ctx.send(Call::get(url).signed(&ctx.full)).await?,
        BLOB_NOT_FOUND,
    )
    .map(drop)
}

async fn hash_not_linked(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let url = ctx.blob_url(&blob.id, &"d".repeat(64), &blob.name)?;
    expect::problem_response(
        &ctx.send(Call::get(url).signed(&ctx.full)).await?,
        BLOB_NOT_FOUND,
    )
    .map(drop)
}

async fn tombstoned_record(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    expect::status(
        &ctx.send(Call::delete(ctx.record_url(&blob.id)?).signed(&ctx.full))
            .await?,
        200,
    )?;
    expect::problem_response(&download(ctx, &blob, None).await?, BLOB_NOT_FOUND).map(drop)
}

async fn error_no_cache(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let url = ctx.blob_url(&blob.id, &blob.hash, "other.png")?;
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    expect::problem_response(&response, BLOB_NOT_FOUND)?;
    ensure_eq!(
        response.header("cache-control"),
        Some("no-cache"),
        "Cache-Control"
    );
    Ok(())
}

async fn private_anonymous(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let response = ctx.send(Call::get(ctx.blob_record_url(&blob)?)).await?;
    expect::problem_response(&response, RECORD_NOT_FOUND).map(drop)
}

async fn public_anonymous(ctx: &Ctx) -> CheckResult {
    let blob = ctx.blob_record("public.png", "image/png", true).await?;
    let response = ctx.send(Call::get(ctx.blob_record_url(&blob)?)).await?;
    expect::status(&response, 200)?;
    ensure!(
        response.body == blob.data,
        "the downloaded bytes differ from the upload"
    );
    Ok(())
}

/// A record of `blob`'s type linking its blob under another name and type.
async fn relink(
    ctx: &Ctx,
    blob: &BlobRecord,
    name: &str,
    content_type: &str,
) -> Result<Response, String> {
    let file =
        json!({"hash": blob.hash, "type": content_type, "name": name, "size": blob.data.len()});
    let body = json!({"type": blob.record["type"], "content": {"title": "again", "file": file}});
    ctx.send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await
}

async fn two_names(ctx: &Ctx) -> CheckResult {
    let blob = private_blob(ctx, "image.png").await?;
    let other = expect::json(
        &relink(ctx, &blob, "copy.bin", "application/octet-stream").await?,
        200,
    )?;
    let url = ctx.blob_url(str_at(&other, "/record/id")?, &blob.hash, "copy.bin")?;
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    expect::status(&response, 200)?;
    ensure_eq!(
        response.header("content-type"),
        Some("application/octet-stream"),
        "Content-Type"
    );
    ensure!(response.body == blob.data, "the bytes differ");
    Ok(())
}

/// A blob record updated to a version that no longer links the blob.
async fn unlinked_by_update(ctx: &Ctx) -> Result<(BlobRecord, Value), String> {
    let blob = private_blob(ctx, "image.png").await?;
    let call = Call::put(ctx.record_url(&blob.id)?)
        .json(&json!({"content": {"title": "no file"}}))
        .signed(&ctx.full);
    let updated = expect::json(&ctx.send(call).await?, 200)?;
    Ok((blob, updated))
}

async fn latest_version_only(ctx: &Ctx) -> CheckResult {
    let (blob, _) = unlinked_by_update(ctx).await?;
    expect::problem_response(&download(ctx, &blob, None).await?, BLOB_NOT_FOUND).map(drop)
}

async fn version_endpoint(ctx: &Ctx) -> CheckResult {
    let (blob, _) = unlinked_by_update(ctx).await?;
    let version = str_at(&blob.record, "/version/hash")?;
    let url = ctx.record_url_with(
        &blob.id,
        &["versions", version, "blobs", &blob.hash, &blob.name],
    )?;
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    expect::status(&response, 200)?;
    ensure!(response.body == blob.data, "the bytes differ");
    Ok(())
}

async fn unuploaded_link(ctx: &Ctx) -> CheckResult {
    let file = json!({"hash": hex::encode(Sha256::digest(random_bytes(32))), "type": "image/png", "name": "ghost.png"});
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "ghost", "file": file}});
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await?;
    expect::problem_response(&response, INVALID_LINK).map(drop)
}

async fn size_mismatch(ctx: &Ctx) -> CheckResult {
    let uploaded = ctx.upload_blob(&random_bytes(50), "image/png").await?;
    let file = json!({"hash": uploaded["hash"], "type": "image/png", "name": "a.png", "size": 51});
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "size", "file": file}});
    let response = ctx
        .send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await?;
    expect::problem_response(&response, INVALID_LINK).map(drop)
}

/// A type whose `file` is a blob link with these extra schema properties;
/// then a record linking a fresh 1,024-byte PNG blob.
async fn constrained_blob(ctx: &Ctx, constraints: Value) -> Result<Response, String> {
    let mut file_schema = json!({"type": "blob_link"});
    if let (Some(schema), Some(extra)) = (file_schema.as_object_mut(), constraints.as_object()) {
        schema.extend(extra.clone());
    }
    let schema = json!({"type": "object", "properties": {"content": {"type": "object", "properties": {"file": file_schema}}}});
    let ty = ctx.new_type(schema).await?;
    let uploaded = ctx.upload_blob(&random_bytes(1024), "image/png").await?;
    let file =
        json!({"hash": uploaded["hash"], "type": "image/png", "name": "a.png", "size": 1024});
    let body = json!({"type": ty, "content": {"file": file}});
    ctx.send(Call::post(ctx.records_url()?).json(&body).signed(&ctx.full))
        .await
}

async fn content_types_enforced(ctx: &Ctx) -> CheckResult {
    let response = constrained_blob(ctx, json!({"content_types": ["image/jpeg"]})).await?;
    expect::problem_response(&response, SCHEMA_VIOLATION).map(drop)
}

async fn max_size_enforced(ctx: &Ctx) -> CheckResult {
    let response = constrained_blob(ctx, json!({"max_size": 1000})).await?;
    expect::problem_response(&response, SCHEMA_VIOLATION).map(drop)
}
