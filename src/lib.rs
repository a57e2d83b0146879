//! mosaicdb: a multi-model database served over HTTP/JSON — tables of JSON documents, indexes,
//! graph edges and time series — on one embedded ordered key-value store (fjall).
//!
//! It is not a library for embedding a database in your process: the library exists so that the
//! binary, the tests and the benches build the same application.
//!
//! ```
//! use mosaicdb::keys::{EntityKey, display};
//! let key = EntityKey::new("users", "alice").encode();
//! assert_eq!(display("entity", &key), "entity:users:alice");
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod api;
pub mod background;
pub mod catalog;
pub mod entity;
pub mod keys;
pub mod server;
pub mod service;
pub mod storage;
pub mod tools;
