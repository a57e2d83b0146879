//! Model-based tests: random operations go to a server and to an in-memory model written from the
//! documented semantics (`common::model` and each module's own), and every answer must agree.
//! One test binary: `cargo test --test model` runs them, `cargo test --test model query::` one
//! module (`MOSAIC_MODEL_SEEDS` widens the seed ranges of `graph` and `query`).

#[path = "../common/mod.rs"]
mod common;

mod graph;
mod graph_memory;
mod query;
mod search;
mod timeseries;
mod views;
