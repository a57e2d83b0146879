//! The `mosaicdb` binary and its surroundings: the binary end to end (`binary`), the deployment
//! files (`deploy`), the descriptors a connection costs (`fds`), a shortage of descriptors recovered from
//! (`recovery`), the official InfluxDB client
//! libraries against a server (`influx`), and the docs' walk-throughs run as written against it
//! (`readme`). One test binary: `cargo test --test process`.

#[path = "../common/mod.rs"]
mod common;

mod binary;
mod cluster;
mod deploy;
mod fds;
mod influx;
mod prometheus;
mod readme;
mod recovery;
