//! The HTTP API, one module per area, each against servers started in this process
//! (`common::TestServer`). One test binary for all of them, so the crate is linked once:
//! `cargo test --test api` runs them, `cargo test --test api wire::` one module.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod backup;
mod batch_import;
mod changefeed;
mod cluster;
mod console;
mod cors;
mod covered;
mod databases;
mod databases_model;
mod documents;
mod graph;
mod heavy_reads;
mod history;
mod history_model;
mod import_csv;
mod indexes;
mod influxql;
mod metrics;
mod prometheus;
mod query;
mod search;
mod service;
mod spec;
mod sql;
mod sql_functions;
mod sql_postgres;
mod sql_wire;
mod stream;
mod tables;
mod tasks;
mod timeseries;
mod ttl;
mod vectors;
mod vectors_int8;
mod views;
mod wire;
