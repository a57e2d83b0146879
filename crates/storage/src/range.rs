//! Which keys a scan visits.

use std::ops::Bound;

/// Which keys a scan visits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRange {
    /// every key that starts with these bytes
    Prefix(Vec<u8>),
    /// every key within the bounds
    Between(Bound<Vec<u8>>, Bound<Vec<u8>>),
}
