//! Reads: point gets and forward/reverse scans over one consistent snapshot.

use super::{Result, Space, StorageError};
use fjall::Readable;
use std::ops::Bound;

/// Bytes read from the store (a cheap, reference-counted slice).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slice(pub(super) fjall::Slice);

impl std::ops::Deref for Slice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Slice {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// Which keys a scan visits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRange {
    /// every key that starts with these bytes
    Prefix(Vec<u8>),
    /// every key within the bounds
    Between(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

/// One consistent view of every keyspace: a request that reads several keys reads them here, so
/// its answer never mixes two states. Keep it short-lived: it pins old versions.
pub struct ReadView {
    pub(super) snapshot: std::sync::Arc<fjall::Snapshot>,
    pub(super) spaces: std::sync::Arc<[fjall::Keyspace]>,
}

impl ReadView {
    fn ks(&self, space: Space) -> &fjall::Keyspace {
        &self.spaces[space as usize]
    }

    /// The value under `key`, if any.
    pub fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        Ok(self.snapshot.get(self.ks(space), key)?.map(Slice))
    }

    /// Key-value pairs in `range`, in key order (or reversed).
    pub fn scan(&self, space: Space, range: KeyRange, reverse: bool) -> Scan {
        let iter = match range {
            KeyRange::Prefix(p) => self.snapshot.prefix(self.ks(space), p),
            KeyRange::Between(lo, hi) => self.snapshot.range(self.ks(space), (lo, hi)),
        };
        Scan { iter, reverse }
    }
}

/// An iterator over key-value pairs; stop early whenever you like.
pub struct Scan {
    iter: fjall::Iter,
    reverse: bool,
}

impl Iterator for Scan {
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        let guard = if self.reverse { self.iter.next_back()? } else { self.iter.next()? };
        Some(guard.into_inner().map(|(k, v)| (Slice(k), Slice(v))).map_err(StorageError::from))
    }
}
