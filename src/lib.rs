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
pub mod server;
pub mod service;
pub mod tools;

// The layers below the server: crates of their own (crates/), under the names their modules had.
pub use mosaic_catalog as catalog;
pub use mosaic_entity as entity;
pub use mosaic_keys as keys;
pub use mosaic_storage as storage;
