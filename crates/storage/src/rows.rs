//! A cache of documents by key, in front of fjall, for point reads (`GET` of a document by id).
//!
//! A point read through fjall looks in the active and sealed memtables, then, table by table,
//! through a bloom filter, the block index and a cached block: a tenth of a GET's server time. A
//! hit here is one hash and one short lock. It holds only values that are committed, and the
//! committer evicts every entity key it commits before the write is acknowledged.
//!
//! **Why a read never puts back a stale value.** Before it commits, the committer evicts each
//! entity key of the write from its shard and marks the shard busy; after the commit it clears
//! the mark and evicts again. Each eviction moves the shard's count. A read takes the count before
//! it reads fjall, and stores what it read only if the count has not moved and the shard is not
//! busy. So what is stored was read after the last commit to the shard; while a commit is under
//! way its keys are not in the cache and every reader reads fjall, which shows the commit to all
//! readers at once (a reader can never see a new value and then, from here, the older one).
//!
//! Values are copied in: fjall's are views into a whole data block, which would stay alive, and
//! uncounted, for as long as the entry.

use super::Slice;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, PoisonError};

/// Shards: each its own lock, so concurrent readers rarely meet.
const SHARDS: usize = 64;
/// What an entry costs beside its key and value bytes (about: the map's slot, the key's box).
const ENTRY_OVERHEAD: usize = 64;

/// Documents by entity key, at most `capacity` bytes.
pub(super) struct Rows {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::FixedState,
    /// bytes per shard
    shard_capacity: usize,
}

/// Entries by the hash of their key: the committer evicts by hash, so it keeps no copy of the
/// keys it commits. Two keys of one hash share a slot (a lookup compares the key).
#[derive(Default)]
struct Shard {
    map: HashMap<u64, (Box<[u8]>, Slice), foldhash::fast::FixedState>,
    bytes: usize,
    /// evictions by the committer (see the module's comment)
    evictions: u64,
    /// keys of the shard in a commit under way: nothing is stored meanwhile
    busy: u32,
}

fn cost(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + ENTRY_OVERHEAD
}

impl Shard {
    fn evict(&mut self, hash: u64) {
        self.evictions += 1;
        if let Some((k, v)) = self.map.remove(&hash) {
            self.bytes -= cost(&k, &v);
        }
    }
}

/// What a read must show to store what it read: the shard's eviction count before it read.
pub(super) struct Ticket {
    hash: u64,
    evictions: u64,
}

impl Rows {
    /// A cache of `capacity` bytes (0: none).
    pub(super) fn new(capacity: usize) -> Rows {
        Rows {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: foldhash::fast::FixedState::with_seed(0x6d6f_7361_6963),
            shard_capacity: capacity / SHARDS,
        }
    }

    /// True for a cache of no capacity (`--row-cache-mb 0`): reads and commits pass it by.
    pub(super) fn is_off(&self) -> bool {
        self.shard_capacity == 0
    }

    /// The hash by which `key` is held and evicted.
    pub(super) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn lock(&self, hash: u64) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[(hash % SHARDS as u64) as usize].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached value of `key`, or the ticket with which to store it after reading it.
    pub(super) fn get(&self, key: &[u8]) -> Result<Slice, Ticket> {
        let hash = self.hash(key);
        let s = self.lock(hash);
        match s.map.get(&hash) {
            Some((k, value)) if &k[..] == key => Ok(value.clone()),
            _ => Err(Ticket { hash, evictions: s.evictions }),
        }
    }

    /// Stores `value`, read for `key` from fjall after `ticket` was taken, unless the committer
    /// evicted from the shard since (the value may be older than the one committed) or the value
    /// alone is over the shard's share.
    pub(super) fn fill(&self, ticket: Ticket, key: &[u8], value: &Slice) {
        let added = cost(key, value);
        if added > self.shard_capacity {
            return;
        }
        let mut s = self.lock(ticket.hash);
        if s.evictions != ticket.evictions || s.busy > 0 {
            return;
        }
        if let Some((k, v)) = s.map.remove(&ticket.hash) {
            s.bytes -= cost(&k, &v);
        }
        // Past the share, entries go in the map's own order, which the hash makes arbitrary.
        while s.bytes + added > self.shard_capacity {
            let Some(&victim) = s.map.keys().next() else { break };
            if let Some((k, v)) = s.map.remove(&victim) {
                s.bytes -= cost(&k, &v);
            }
        }
        s.map.insert(ticket.hash, (key.into(), Slice::from(&value[..])));
        s.bytes += added;
    }

    /// The committer is about to commit a new value (or the removal) of the key of `hash`.
    pub(super) fn committing(&self, hash: u64) {
        let mut s = self.lock(hash);
        s.busy += 1;
        s.evict(hash);
    }

    /// The commit announced with [`Rows::committing`] is done (or failed): called before the
    /// write is acknowledged.
    pub(super) fn committed(&self, hash: u64) {
        let mut s = self.lock(hash);
        s.busy = s.busy.saturating_sub(1);
        s.evict(hash);
    }

    /// Another server (the cluster's leader) committed a new value (or the removal) of `key`.
    pub(super) fn changed_elsewhere(&self, key: &[u8]) {
        self.lock(self.hash(key)).evict(self.hash(key));
    }

    /// Forgets every document (what another server changed is not known key by key).
    pub(super) fn clear(&self) {
        for shard in &self.shards {
            let mut s = shard.lock().unwrap_or_else(PoisonError::into_inner);
            s.evictions += 1;
            s.map.clear();
            s.bytes = 0;
        }
    }

    /// Bytes held (tests).
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(b: &[u8]) -> Slice {
        Slice::from(b)
    }

    #[test]
    fn a_read_overtaken_by_a_commit_stores_nothing() {
        let rows = Rows::new(1 << 20);
        let Err(ticket) = rows.get(b"k") else { panic!("empty cache hit") };
        // the committer commits a new value, while the read holds the old one
        rows.committing(rows.hash(b"k"));
        rows.committed(rows.hash(b"k"));
        rows.fill(ticket, b"k", &slice(b"old"));
        assert!(rows.get(b"k").is_err());
        // a read that starts while a commit to its shard is under way keeps nothing either
        rows.committing(rows.hash(b"k"));
        let Err(ticket) = rows.get(b"k") else { panic!() };
        rows.fill(ticket, b"k", &slice(b"old"));
        assert!(rows.get(b"k").is_err());
        rows.committed(rows.hash(b"k"));
        // a read after the eviction stores what it read
        let Err(ticket) = rows.get(b"k") else { panic!() };
        rows.fill(ticket, b"k", &slice(b"new"));
        assert_eq!(&rows.get(b"k").ok().unwrap()[..], b"new");
        rows.committing(rows.hash(b"k"));
        assert!(rows.get(b"k").is_err());
        assert_eq!(rows.bytes(), 0);
    }

    #[test]
    fn the_bytes_stay_within_the_capacity() {
        let rows = Rows::new(SHARDS * 1000);
        for i in 0u32..10_000 {
            let key = i.to_be_bytes();
            if let Err(t) = rows.get(&key) {
                rows.fill(t, &key, &slice(&[1; 100]));
            }
        }
        assert!(rows.bytes() <= SHARDS * 1000, "{}", rows.bytes());
        assert!(rows.bytes() > SHARDS * 500, "{}", rows.bytes());
        // a value over a shard's share is not kept
        let Err(t) = rows.get(b"big") else { panic!() };
        rows.fill(t, b"big", &slice(&[0; 2000]));
        assert!(rows.get(b"big").is_err());
    }
}
