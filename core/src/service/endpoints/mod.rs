//! The API's endpoints, one file per group: each parses its request,
//! authenticates it through [`Context`](super::Context), runs its reads and
//! at most one job, and answers. [`dispatch`](super::dispatch) routes to
//! them.

pub(super) mod blobs;
pub(super) mod consent;
pub(super) mod console;
pub(super) mod events;
pub(super) mod federation;
pub(super) mod records;
