//! The committer's cache of committed values of small, hot keys (`WriteTx::get_cached`): each
//! commit updates the keys it changes here, so it stays exact; bounded in bytes.

use super::Space;

/// Most bytes (keys, values and a per-entry overhead) the committer's cache of values (`WriteTx::get_cached`) holds.
const MAX_VALUE_BYTES: usize = 32 << 20;

/// What a [`ValueCache`] entry costs beside its key and value bytes (about: the map's slot and
/// the two allocations' headers).
const ENTRY_OVERHEAD: usize = 64;

/// Committed values by key, with the bytes they take.
#[derive(Default)]
pub(super) struct ValueCache {
    map: foldhash::HashMap<(Space, Vec<u8>), Option<Vec<u8>>>,
    bytes: usize,
}

fn entry_bytes(key: &[u8], value: Option<&Vec<u8>>) -> usize {
    key.len() + value.map_or(0, Vec::len) + ENTRY_OVERHEAD
}

impl ValueCache {
    /// The committed value of `key`, if the cache holds it (`Some(None)`: known absent).
    pub(super) fn get(&self, key: &(Space, Vec<u8>)) -> Option<&Option<Vec<u8>>> {
        self.map.get(key)
    }

    /// Whether the cache holds nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(super) fn insert(&mut self, key: (Space, Vec<u8>), value: Option<Vec<u8>>) {
        let added = entry_bytes(&key.1, value.as_ref());
        if self.bytes + added > MAX_VALUE_BYTES {
            self.clear();
        }
        let old = self.map.get(&key).map(|v| entry_bytes(&key.1, v.as_ref()));
        self.map.insert(key, value);
        self.bytes = (self.bytes + added).saturating_sub(old.unwrap_or(0));
    }

    /// Sets a committed key's new value, if the cache holds the key.
    pub(super) fn committed(&mut self, key: &(Space, Vec<u8>), value: Option<&Vec<u8>>) {
        if let Some(slot) = self.map.get_mut(key) {
            let (before, after) = (slot.as_ref().map_or(0, Vec::len), value.map_or(0, Vec::len));
            *slot = value.cloned();
            self.bytes = (self.bytes + after).saturating_sub(before);
        }
    }

    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }
}
