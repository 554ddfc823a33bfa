//! The store failing under the server: a write the database or the blob
//! store refuses is answered with a problem and stores nothing (no record,
//! no version, no event, no blob row), and reads the store cannot answer
//! are problems too. The target's fault switch ([`crate::faults`]) turns
//! each fault on and off; every check switches its fault off again, pass or
//! fail, before it looks at what was stored.

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};

use super::records::hash_of;
use super::{Check, CheckResult, Needs, check};
use crate::client::{Call, Http, Response, record_id};
use crate::context::{Ctx, ids, type_filter, with_query};
use crate::expect::{self, INTERNAL, INVALID_LINK, RECORD_NOT_FOUND, ensure, ensure_eq, str_at};
use crate::faults::{
    FaultSwitch, STORE_READ_FAILS, STORE_READ_RECOVERS, STORE_WRITE_FAILS, STORE_WRITE_RECOVERS,
};
use crate::sse::EventStream;

/// A failure of the target's store, switched on and off by its switch.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Every write of a record or a blob's row fails inside the database's
    /// transaction, after its first statements ran.
    StoreWrite,
    /// Reads of records fail in the database.
    StoreRead,
    /// The blob store can neither write nor read bytes.
    BlobStore,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::StoreWrite => "store-write",
            Fault::StoreRead => "store-read",
            Fault::BlobStore => "blob-store",
        }
    }
}

pub fn checks() -> Vec<Check> {
    vec![
        check!(
            "faults/failed-create-is-a-problem-and-stores-nothing",
            failed_create,
            Needs::Faults
        ),
        check!(
            "faults/failed-update-keeps-the-previous-version",
            failed_update,
            Needs::Faults
        ),
        check!(
            "faults/failed-read-is-a-problem",
            failed_read,
            Needs::Faults
        ),
        check!(
            "faults/failed-blob-bytes-write-stores-no-blob",
            failed_blob_bytes,
            Needs::Faults
        ),
        check!(
            "faults/failed-blob-row-write-stores-no-blob",
            failed_blob_row,
            Needs::Faults
        ),
        check!(
            "faults/failed-blob-read-is-a-problem",
            failed_blob_read,
            Needs::Faults
        ),
    ]
}

/// Switches `fault` on or off through the target's switch.
async fn switch(ctx: &Ctx, fault: Fault, on: bool) -> Result<(), String> {
    let Some(FaultSwitch(switch)) = ctx.faults.clone() else {
        return Err("the target has no fault switch".into());
    };
    let switched = tokio::task::spawn_blocking(move || match (fault, on) {
        (Fault::StoreWrite, true) => switch.run_sql(STORE_WRITE_FAILS),
        (Fault::StoreWrite, false) => switch.run_sql(STORE_WRITE_RECOVERS),
        (Fault::StoreRead, true) => switch.run_sql(STORE_READ_FAILS),
        (Fault::StoreRead, false) => switch.run_sql(STORE_READ_RECOVERS),
        (Fault::BlobStore, failing) => switch.blob_store(failing),
    })
    .await
    .map_err(|error| format!("the fault switch's thread: {error}"))?;
    switched.map_err(|error| {
        let state = if on { "on" } else { "off" };
        format!("switching {} {state}: {error}", fault.name())
    })
}

/// Runs `during` with `fault` on, then switches it off whatever happened.
async fn under<T>(
    ctx: &Ctx,
    fault: Fault,
    during: impl Future<Output = Result<T, String>>,
) -> Result<T, String> {
    if let Err(error) = switch(ctx, fault, true).await {
        // Half switched on is still on.
        let _ = switch(ctx, fault, false).await;
        return Err(error);
    }
    let outcome = during.await;
    switch(ctx, fault, false).await?;
    outcome.map_err(|error| format!("with {} failing: {error}", fault.name()))
}

fn post_record<'a>(ctx: &'a Ctx, body: &Value) -> Result<Call<'a>, String> {
    Ok(Call::post(ctx.records_url()?).json(body).signed(&ctx.full))
}

/// An open event stream of the full app's records of type `ty`.
async fn watch(ctx: &Ctx, ty: &Value) -> Result<EventStream, String> {
    let filter = type_filter(ty)?;
    let call = Call::get(with_query(ctx.events_url()?, &[("filter", &filter)])).signed(&ctx.full);
    let response = Http::new(&ctx.target)?.open(&call).await?;
    ensure_eq!(response.status().as_u16(), 200, "events status");
    Ok(EventStream::new(response))
}

async fn failed_create(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let mut events = watch(ctx, &ty).await?;
    let id = record_id();
    let body = json!({"id": id, "type": ty, "content": {"title": "written while the store fails"}});
    let refused = under(ctx, Fault::StoreWrite, ctx.send(post_record(ctx, &body)?)).await?;
    expect::problem_response(&refused, INTERNAL)?;

    expect::problem_response(&ctx.get_record(&id).await?, RECORD_NOT_FOUND)
        .map_err(|error| format!("the refused record: {error}"))?;
    let page = ctx.list(&[("filter", &type_filter(&ty)?)]).await?;
    ensure!(
        !ids(&page)?.contains(&id),
        "the refused record is listed: {}",
        expect::brief(&page)
    );
    // The same create again is a new record, not a conflict with half of
    // the first, and its event is the record's only one.
    ctx.create(body).await?;
    let seen = events.records_until(&id, Duration::from_secs(10)).await?;
    let of_record = seen.iter().filter(|event| event.record_id() == id).count();
    ensure_eq!(of_record, 1, "events of the record");
    Ok(())
}

async fn failed_update(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = ctx.note(&ty, json!({"title": "1"})).await?;
    let id = str_at(&record, "/id")?;
    let first = hash_of(&record)?;
    let update = json!({"content": {"title": "2"}, "version": {"parent_hash": first}});
    let put = || {
        Ok::<_, String>(
            Call::put(ctx.record_url(id)?)
                .json(&update)
                .signed(&ctx.full),
        )
    };
    let call = put()?;
    let refused = under(ctx, Fault::StoreWrite, ctx.send(call)).await?;
    expect::problem_response(&refused, INTERNAL)?;

    let current = expect::json(&ctx.get_record(id).await?, 200)?;
    ensure_eq!(
        hash_of(expect::at(&current, "/record")?)?,
        first,
        "the record's version after the refused update"
    );
    // The parent is still the head: the same update goes through now.
    let updated = expect::json(&ctx.send(put()?).await?, 200)?;
    ensure_eq!(
        str_at(&updated, "/record/version/parent_hash")?,
        first,
        "parent of the update made after the fault"
    );
    Ok(())
}

async fn failed_read(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = ctx
        .note(&ty, json!({"title": "read while the store fails"}))
        .await?;
    let id = str_at(&record, "/id")?;
    let filter = type_filter(&ty)?;
    let list = Call::get(with_query(ctx.records_url()?, &[("filter", &filter)])).signed(&ctx.full);
    let (one, page) = under(ctx, Fault::StoreRead, async {
        Ok((ctx.get_record(id).await?, ctx.send(list).await?))
    })
    .await?;
    expect::problem_response(&one, INTERNAL).map_err(|error| format!("get: {error}"))?;
    expect::problem_response(&page, INTERNAL).map_err(|error| format!("list: {error}"))?;
    // And the store answers again once it can.
    expect::json(&ctx.get_record(id).await?, 200).map(|_| ())
}

/// A record linking the blob `hash` of `size` bytes, as the full app
/// creates it.
async fn link_blob(ctx: &Ctx, hash: &str, size: usize) -> Result<Response, String> {
    let file =
        json!({"hash": hash, "type": "application/octet-stream", "name": "f.bin", "size": size});
    let body = json!({"type": ctx.note_type().await?, "content": {"title": "blob", "file": file}});
    ctx.send(post_record(ctx, &body)?).await
}

/// An upload of `data` refused while `fault` is on stores no blob: a record
/// cannot link it until the same bytes are uploaded again.
async fn refused_upload_stores_no_blob(ctx: &Ctx, fault: Fault) -> CheckResult {
    let data: Vec<u8> = (0..1024).map(|_| rand::random::<u8>()).collect();
    let upload = || {
        Ok::<_, String>(
            Call::post(ctx.new_blob_url()?)
                .body(data.clone(), Some("application/octet-stream"))
                .signed(&ctx.full),
        )
    };
    let call = upload()?;
    let refused = under(ctx, fault, ctx.send(call)).await?;
    expect::problem_response(&refused, INTERNAL)?;

    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data));
    expect::problem_response(&link_blob(ctx, &hash, data.len()).await?, INVALID_LINK)
        .map_err(|error| format!("linking the refused upload: {error}"))?;
    let uploaded = expect::json(&ctx.send(upload()?).await?, 200)?;
    ensure_eq!(
        str_at(&uploaded, "/hash")?,
        hash,
        "hash of the upload made after the fault"
    );
    expect::json(&link_blob(ctx, &hash, data.len()).await?, 200)
        .map(|_| ())
        .map_err(|error| format!("linking the upload made after the fault: {error}"))
}

async fn failed_blob_bytes(ctx: &Ctx) -> CheckResult {
    refused_upload_stores_no_blob(ctx, Fault::BlobStore).await
}

async fn failed_blob_row(ctx: &Ctx) -> CheckResult {
    refused_upload_stores_no_blob(ctx, Fault::StoreWrite).await
}

async fn failed_blob_read(ctx: &Ctx) -> CheckResult {
    let blob = ctx
        .blob_record("f.bin", "application/octet-stream", false)
        .await?;
    let download = || Ok::<_, String>(Call::get(ctx.blob_record_url(&blob)?).signed(&ctx.full));
    let call = download()?;
    let refused = under(ctx, Fault::BlobStore, ctx.send(call)).await?;
    expect::problem_response(&refused, INTERNAL)?;
    let served = ctx.send(download()?).await?;
    expect::status(&served, 200)?;
    ensure!(
        served.body == blob.data,
        "the blob's bytes after the fault differ from those uploaded"
    );
    Ok(())
}
