//! Bounded fuzzing (proptest) of what reads user input or stored bytes: the codecs, the import
//! path, the key decoders, and JSON merge patch over HTTP. One test binary: `cargo test --test
//! fuzz` runs them, `cargo test --test fuzz keys::` one module.

#[path = "../common/mod.rs"]
mod common;

mod codecs;
mod import;
mod keys;
mod merge_patch;
