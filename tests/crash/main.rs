//! What survives a crash: SIGKILL of a process writing to the store (`store`) and of the
//! `mosaicdb` binary serving writes (`server`, `changefeed`, `graph`, `history`, `timeseries`, `vectors`), power cuts and disk faults on
//! powerfs (`power_loss`, `disk_faults`: they need root, `/dev/fuse` and the powerfs binary, and
//! say so where one is missing), crashes of PostgreSQL under the binary on the PostgreSQL backend
//! (`postgres`: it needs `MOSAIC_TEST_POSTGRES` set and PostgreSQL installed, and starts a
//! cluster of its own). The modules they share: `process` (the binary as a child
//! process), `workload` (writers and the verification after a restart) and `mount` (powerfs).
//! One test binary: `cargo test --test crash` runs them, `cargo test --test crash power_loss::`
//! one module.

#[path = "../common/mod.rs"]
mod common;

mod mount;
mod process;
mod workload;

mod changefeed;
mod databases;
mod disk_faults;
mod graph;
mod history;
mod postgres;
mod power_loss;
mod server;
mod store;
mod timeseries;
mod vectors;
