//! Command-line tools: those that work on a data directory directly (the server must not be
//! running) and the client of those that talk to a running server.

pub mod backup;
pub mod backup_all;
pub mod client;

mod inspect;

pub use inspect::inspect;
