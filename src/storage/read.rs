//! Reads: point gets and forward/reverse scans over one consistent snapshot.

use super::limits::Limits;
use super::range::KeyRange;
use super::{Result, Space, StorageError};
use fjall::Readable;
use std::any::Any;
use std::sync::Arc;

/// Bytes read from the store (a cheap, reference-counted slice).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slice(pub(super) fjall::Slice);

impl std::ops::Deref for Slice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Slice {
    fn from(bytes: Vec<u8>) -> Self {
        Slice(bytes.into())
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

/// In-memory state that the layers above derive from the keys (the graph's adjacency), published
/// with each view: a read sees it exactly as of the keys it reads. Opaque here; its owner
/// downcasts it (see [`ReadView::derived`]).
pub type Derived = Arc<dyn Any + Send + Sync>;

/// Where the committer takes the derived state from at the end of each group (on its thread,
/// after every hook of the group ran): see [`super::Store::set_derived_source`].
pub type DerivedSource = Arc<dyn Fn() -> Option<Derived> + Send + Sync>;

/// A state reads may show: a snapshot of every keyspace and the derived state as of it.
pub(super) struct Published {
    pub(super) snapshot: fjall::Snapshot,
    pub(super) derived: Option<Derived>,
}

impl Published {
    pub(super) fn new(snapshot: fjall::Snapshot, derived: Option<Derived>) -> Arc<Published> {
        Arc::new(Published { snapshot, derived })
    }
}

/// One consistent view of every keyspace: a request that reads several keys reads them here, so
/// its answer never mixes two states. Keep it short-lived: it pins old versions.
pub struct ReadView {
    pub(super) published: Arc<Published>,
    pub(super) spaces: Arc<[fjall::Keyspace]>,
    /// the backend's: a key longer than it takes is in no keyspace
    pub(super) limits: Limits,
}

impl ReadView {
    /// The derived state published with this view, if it is a `T` (none in a view of
    /// [`super::Store::committed`], or before the owner set its source).
    pub fn derived<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.published.derived.as_deref().and_then(|d| d.downcast_ref::<T>())
    }

    fn ks(&self, space: Space) -> &fjall::Keyspace {
        &self.spaces[space as usize]
    }

    /// The value under `key`, if any.
    pub fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        if !self.limits.readable(key) {
            return Ok(None);
        }
        Ok(self.published.snapshot.get(self.ks(space), key)?.map(Slice))
    }

    /// Key-value pairs in `range`, in key order (or reversed).
    pub fn scan(&self, space: Space, range: KeyRange, reverse: bool) -> Scan {
        let iter = self.limits.clamp(range).map(|range| match range {
            KeyRange::Prefix(p) => self.published.snapshot.prefix(self.ks(space), p),
            KeyRange::Between(lo, hi) => self.published.snapshot.range(self.ks(space), (lo, hi)),
        });
        Scan { iter, reverse }
    }
}

/// An iterator over key-value pairs; stop early whenever you like.
pub struct Scan {
    /// `None`: a range no stored key can be in
    iter: Option<fjall::Iter>,
    reverse: bool,
}

impl Iterator for Scan {
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        let iter = self.iter.as_mut()?;
        let guard = if self.reverse { iter.next_back()? } else { iter.next()? };
        Some(guard.into_inner().map(|(k, v)| (Slice(k), Slice(v))).map_err(StorageError::from))
    }
}
