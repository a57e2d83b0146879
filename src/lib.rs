//! mosaicdb: a multi-model database on one ordered key-value store.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod keys;
pub mod storage;
