//! Blobs (PROTOCOL.md §9): uploads, and downloads through a record that
//! links the blob.

use crate::auth::access::Access;
use crate::auth::check_body_digest;
use crate::model::{BlobLink, Record, VersionHash};
use crate::problem::{Problem, ProblemType};
use crate::service::blob::{
    ACCEPT_RANGES, RangeAnswer, Received, UploadMeter, UploadResponse, blob_audience,
    check_upload_content_type, check_upload_length, content_disposition, content_range,
    find_indexed_blob_link, parse_range, unsatisfied_content_range, upload_expiry,
};
use crate::service::http::blob_cache_control;
use crate::service::route::{BlobPath, RecordPath};
use crate::store::{fetched_blob_sql, read_version, upload_blob_sql, version_sql};

use crate::service::endpoints::federation::{Federation, MAX_PEER_ANSWER_BYTES, Trouble};
use crate::service::federation::PeerError;
use crate::service::jobs::Job;
use crate::service::{Context, Failure, Host, Outcome, Reply, ReplyBody, UploadFailure, User};

/// `GET …/records/{entity}/{id}[/versions/{hash}]/blobs/{hash}/{file_name}`.
pub(in crate::service) async fn download<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    record: &RecordPath,
    version: Option<VersionHash>,
    blob: &BlobPath,
) -> Outcome<H::Stream> {
    let caller = cx.reader(user).await?;
    download_as(
        cx,
        user,
        &caller.access,
        caller.bearer_expiry,
        record,
        version,
        blob,
    )
    .await
}

/// A blob's download for a caller whose `access` is known (the API's
/// signed or anonymous reader, the console's owner).
pub(in crate::service) async fn download_as<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    access: &Access,
    bearer_expiry: Option<crate::model::RecordDate>,
    record: &RecordPath,
    version: Option<VersionHash>,
    blob: &BlobPath,
) -> Outcome<H::Stream> {
    let host = cx.host;
    let row = match version {
        None => cx.latest(user, record).await?,
        Some(hash) => cx
            .versions(&version_sql(
                user.id,
                &record.entity,
                &record.record_id,
                &hash,
            ))
            .await?
            .into_iter()
            .next(),
    };
    let Some((row_record, row_links)) = row else {
        return Err(Problem::new(ProblemType::RecordNotFound).into());
    };
    let (found, entries) = read_version(&row_record, &row_links)?;
    if !access.can_read(&found) {
        return Err(Problem::new(ProblemType::RecordNotFound).into());
    }
    let not_found = || Failure::from(Problem::new(ProblemType::BlobNotFound));
    let link = find_indexed_blob_link(&found, &entries, &blob.hash, blob.file_name.as_str())
        .ok_or_else(not_found)?;
    let size = match host
        .blob_size(&blob.hash)
        .await
        .map_err(Failure::internal)?
    {
        Some(size) => size,
        // Only the user and their apps make their server read from others:
        // an anonymous reader or another server never does.
        None if found.author.entity != user.entity
            && matches!(access, Access::Owner { .. } | Access::App { .. }) =>
        {
            fetch_received_blob(cx, user, &found, &link).await?
        }
        None => return Err(not_found()),
    };
    let range = parse_range(cx.request.header("range"), size);
    let (status, start, len) = match range {
        RangeAnswer::Whole => (200, 0, size),
        RangeAnswer::Partial {
            start,
            end_inclusive,
        } => (206, start, end_inclusive - start + 1),
        RangeAnswer::Unsatisfiable => {
            return Err(
                Failure::from(Problem::new(ProblemType::RangeNotSatisfiable))
                    .with("content-range", unsatisfied_content_range(size)),
            );
        }
    };
    // An empty blob has no bytes to stream (R2 refuses a range of none).
    let body = match len {
        0 => ReplyBody::Bytes(Vec::new()),
        _ => ReplyBody::Stream(
            host.blob_bytes(&blob.hash, start, len)
                .await
                .map_err(Failure::internal)?,
        ),
    };
    let mut reply = Reply::new(status, body)
        .with("content-type", link.media_type.as_str())
        .with("content-length", len.to_string())
        .with("content-disposition", content_disposition(&blob.file_name))
        .with("accept-ranges", ACCEPT_RANGES)
        .with(
            "cache-control",
            blob_cache_control(blob_audience(&found, bearer_expiry, cx.request.now)),
        );
    if let RangeAnswer::Partial {
        start,
        end_inclusive,
    } = range
    {
        reply.set("content-range", content_range(start, end_inclusive, size));
    }
    Ok(reply)
}

/// The blob `link` of `record`, a version another server's entity wrote,
/// read from that server the first time it is downloaded here (a received
/// record's blobs stay on its author's server until then), checked and
/// kept; its size. At most [`MAX_PEER_ANSWER_BYTES`] are read. Answers
/// `blob/404-not-found` when the author's server does not have it, and
/// `federation/502-peer-unreachable` when it cannot be reached, so the
/// app may try again.
async fn fetch_received_blob<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    record: &Record,
    link: &BlobLink,
) -> Result<u64, Failure> {
    let not_found = || Failure::from(Problem::new(ProblemType::BlobNotFound));
    let federation = Federation::for_request(cx.host, user, cx.request);
    let bytes = match federation
        .fetch_blob(record, link, MAX_PEER_ANSWER_BYTES)
        .await
    {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(not_found()),
        Err(Trouble::Peer(PeerError::NotFound { .. })) => return Err(not_found()),
        Err(trouble) => return Err(trouble.into_failure()),
    };
    let size = bytes.len() as u64;
    let row = fetched_blob_sql(user.id, &link.hash.to_string(), size, cx.request.now);
    cx.host
        .keep_blob(bytes, &link.hash, Job::Statements(vec![row]))
        .await
        .map_err(|e| cx.write_failure(&e))?
        .map_err(|refused| Failure::from(Problem::from(&refused)))?;
    Ok(size)
}

/// `POST …/blobs`: the bytes are kept under their SHA-256, which the
/// signature vouches for, and expire unless a record links them in time.
pub(in crate::service) async fn upload<H: Host>(
    cx: &Context<'_, '_, H>,
    user: &User,
    body: H::Body,
) -> Outcome<H::Stream> {
    let host = cx.host;
    let checked = async {
        let caller = cx.writer(user, None).await?;
        check_upload_content_type(cx.request.header("content-type"))?;
        let declared = cx
            .request
            .header("content-length")
            .and_then(|value| value.parse::<u64>().ok());
        let declared = check_upload_length(declared, &host.settings().limits)?;
        Ok::<_, Failure>((caller, declared))
    }
    .await;
    let (caller, declared) = match checked {
        Ok(checked) => checked,
        Err(failure) => {
            host.discard(body).await;
            return Err(failure);
        }
    };
    let (upload, Received { hash, size }) = host
        .receive_blob(body, UploadMeter::new(declared))
        .await
        .map_err(|failure| match failure {
            UploadFailure::Length(mismatch) => Failure::from(Problem::from(&mismatch)),
            UploadFailure::Broken(error) => Failure::from(
                Problem::new(ProblemType::InvalidBody)
                    .with_detail(format!("reading the body: {error}")),
            ),
            UploadFailure::StorageFull(error) => Failure::storage_full(error),
            UploadFailure::Failed(error) => Failure::internal(error),
        })?;
    if let Err(error) = check_body_digest(caller.signed_content_sha256, hash.as_bytes()) {
        host.discard_blob(upload).await;
        return Err(Problem::from(&error).into());
    }
    let now = cx.request.now;
    let row = upload_blob_sql(user.id, &hash.to_string(), size, now, upload_expiry(now));
    host.place_blob(upload, &hash, Job::Statements(vec![row]))
        .await
        .map_err(|e| cx.write_failure(&e))?
        .map_err(|refused| Failure::from(Problem::from(&refused)))?;
    Ok(Reply::json(
        200,
        UploadResponse::new(hash, size, now).to_json(),
    ))
}
