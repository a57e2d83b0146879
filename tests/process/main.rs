//! The `mosaicdb` binary and its surroundings: the binary end to end (`binary`), the deployment
//! files (`deploy`), the descriptors a connection costs (`fds`), a flood of half-open connections
//! under a low open-file limit (`flood`), a shortage of descriptors recovered from (`recovery`),
//! HTTPS and certificate rotation (`tls`), the official InfluxDB client
//! libraries against a server (`influx`), and the docs' walk-throughs run as written against it
//! (`readme`). One test binary: `cargo test --test process`.

#[path = "../common/mod.rs"]
mod common;

mod binary;
mod cluster;
mod deploy;
mod fds;
mod flood;
mod influx;
mod prometheus;
mod readme;
mod recovery;
mod spawned;
mod tls;
