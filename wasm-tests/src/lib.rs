//! This crate has no code of its own: its tests (in `tests/`) compile folio-core's behaviour tests for wasm32.
