//! The only module that names fjall: one database per data directory, one keyspace per key family,
//! atomic multi-keyspace writes through one committer, snapshot reads and scans.
//!
//! What it offers — named ordered keyspaces, atomic multi-key writes, snapshot reads, forward and
//! reverse range scans — is what a distributed ordered KV store offers too, so another backend can
//! be added here without touching the layers above.

mod config;
mod dirs;
mod error;
mod health;
mod limits;
mod load;
mod range;
mod read;
mod rows;
mod space;
mod staged;
mod stats;
mod store;
mod sync;
mod write;

pub use config::{Durability, StorageConfig};
pub use error::{Result, StorageError};
pub use health::Health;
pub use limits::{Limit, Limits, TooLarge};
pub use load::BulkLoad;
pub use range::KeyRange;
pub use read::{Derived, DerivedSource, ReadView, Scan, Slice};
pub use space::Space;
pub use stats::{FamilyStats, StoreStats};
pub use store::{RESTORE_MARKER, Store};
pub use write::WriteTx;

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod tests;
