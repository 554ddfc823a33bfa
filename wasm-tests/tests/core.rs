//! folio-core's behaviour tests, compiled for wasm32 and run under node.
//!
//! Each module is one of core's own integration test files, included as it
//! is; inside them `#[test]` names `wasm_bindgen_test` on wasm32. So every
//! check runs on both targets from one source.

#[path = "../../core/tests/vectors.rs"]
mod vectors;

#[path = "../../core/tests/model.rs"]
mod model;

#[path = "../../core/tests/authorization.rs"]
mod authorization;

#[path = "../../core/tests/problems.rs"]
mod problems;

#[path = "../../core/tests/schema.rs"]
mod schema;

#[path = "../../core/tests/real_types.rs"]
mod real_types;

#[path = "../../core/tests/builtin.rs"]
mod builtin;

#[path = "../../core/tests/query.rs"]
mod query;

#[path = "../../core/tests/events.rs"]
mod events;

#[path = "../../core/tests/event_stream.rs"]
mod event_stream;

#[path = "../../core/tests/writes.rs"]
mod writes;

#[path = "../../core/tests/receive.rs"]
mod receive;

#[path = "../../core/tests/published_types.rs"]
mod published_types;

#[path = "../../core/tests/lists.rs"]
mod lists;

#[path = "../../core/tests/transport.rs"]
mod transport;

#[path = "../../core/tests/service_pure.rs"]
mod service_pure;
