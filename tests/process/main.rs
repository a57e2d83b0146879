//! The `mosaicdb` binary and its surroundings: the binary end to end (`binary`), the deployment
//! files (`deploy`), and the descriptors a connection costs (`fds`). One test binary: `cargo test
//! --test process`.

#[path = "../common/mod.rs"]
mod common;

mod binary;
mod cluster;
mod deploy;
mod fds;
