//! Command-line tools that work on a data directory directly (the server must not be running).

mod inspect;

pub use inspect::inspect;
