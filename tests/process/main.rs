//! The `mosaicdb` binary and its surroundings: the binary end to end (`binary`), the deployment
//! files (`deploy`), the descriptors a connection costs (`fds`), and the official InfluxDB client
//! libraries against a server (`influx`). One test binary: `cargo test --test process`.

#[path = "../common/mod.rs"]
mod common;

mod binary;
mod cluster;
mod deploy;
mod fds;
mod influx;
