//! The only module that names fjall: one database per data directory, one keyspace per key family,
//! atomic multi-keyspace writes through one committer, snapshot reads and scans.
//!
//! What it offers — named ordered keyspaces, atomic multi-key writes, snapshot reads, forward and
//! reverse range scans, limits (`limits.rs`) — is what a distributed ordered KV store offers too,
//! so another backend can be added here without touching the layers above. The committer, the
//! views, the document cache and the limits are the store's own; what they ask of the backend
//! goes through `embedded.rs` (fjall), the one file that calls it (`slice.rs` wraps its byte
//! view, which every backend can make from bytes).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod cluster;
mod commit;
mod config;
mod destroy;
mod dirs;
mod embedded;
mod engine;
mod engine_log;
mod error;
mod events;
mod health;
mod limits;
mod load;
mod postgres;
mod range;
mod read;
mod recover;
mod rows;
mod size;
mod slice;
mod snapshot;
mod space;
mod staged;
mod stats;
mod store;
mod sync;
mod values;
mod write;

pub use cluster::{Leadership, Role};
pub use config::{Backend, Durability, StorageConfig, database_dir};
pub use destroy::{destroy, stored_databases};
pub use error::{Result, StorageError};
pub use events::EventCodec;
#[doc(hidden)]
pub use events::TestEvents;
pub use health::Health;
pub use limits::{Limit, Limits, TooLarge};
pub use load::BulkLoad;
pub use range::KeyRange;
pub use read::{Derived, DerivedSource, ReadView, Scan};
pub use slice::Slice;
pub use space::Space;
pub use stats::{FamilyStats, StoreStats};
pub use store::{RESTORE_MARKER, Store};
pub use write::WriteTx;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod events_tests;
#[cfg(test)]
mod recover_tests;
#[cfg(test)]
mod tests;
