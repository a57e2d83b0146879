//! The posting blocks of the terms searched, remembered for the state they were read in.
//!
//! Reading a term's blocks walks fjall's iterators key by key (memtables, filters, table blocks):
//! some 15% of a 1-term search's samples on the peers bench. Every view a search reads names its
//! state by a number (`ReadView::state`), and two views of one state read the same blocks, so
//! blocks read in a state are exact for any later search of that state, and for no other: the
//! cache holds one state's blocks, and a search of a newer state empties it. Between writes —
//! a read-heavy workload's common case — every search after the first of a term finds its blocks
//! here; a write makes the next search read them again. What it holds is bounded by
//! [`MAX_BYTES`] of keys and values, copied out of fjall's data blocks (a view into one would
//! keep the whole block alive).

use crate::storage::Slice;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Most bytes of blocks (keys and values) remembered.
pub const MAX_BYTES: usize = 16 << 20;

/// One term's blocks: keys and values, in key order.
pub type Blocks = Arc<[(Slice, Slice)]>;

/// The remembered blocks of one state.
#[derive(Default)]
pub struct TermBlocks(Mutex<Held>);

/// One index's remembered terms: its table, name and creation time, and each term's blocks with
/// their bytes.
type IndexTerms = (String, String, i64, HashMap<String, (Blocks, usize)>);

#[derive(Default)]
struct Held {
    state: u64,
    /// by index (few: a linear search finds one without building a key)
    indexes: Vec<IndexTerms>,
    bytes: usize,
}

impl Held {
    fn terms(&self, table: &str, index: &str, created_at: i64) -> Option<&HashMap<String, (Blocks, usize)>> {
        self.indexes.iter().find(|e| e.0 == table && e.1 == index && e.2 == created_at).map(|e| &e.3)
    }
}

impl TermBlocks {
    /// The blocks of `term` remembered for `state`, with their bytes, if any.
    pub fn get(&self, state: u64, table: &str, index: &str, created_at: i64, term: &str) -> Option<(Blocks, usize)> {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if held.state != state {
            return None;
        }
        held.terms(table, index, created_at)?.get(term).cloned()
    }

    /// Remembers `blocks`, read for `term` in `state` (not if a newer state is remembered, nor
    /// a term of more than [`MAX_BYTES`]). The blocks are copied: what fjall reads are views into
    /// its whole data blocks, which a remembered view would keep alive, unbounded by the bytes
    /// counted here. Returns the blocks as remembered (or as given).
    pub fn put(&self, state: u64, table: &str, index: &str, created_at: i64, term: &str, blocks: Blocks) -> Blocks {
        let bytes: usize = blocks.iter().map(|(k, v)| k.len() + v.len()).sum();
        if bytes > MAX_BYTES {
            return blocks;
        }
        let owned: Blocks = blocks.iter().map(|(k, v)| (Slice::from(&k[..]), Slice::from(&v[..]))).collect();
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if state < held.state {
            return owned;
        }
        // what is forgotten is dropped after the lock is released
        let mut forgotten = Vec::new();
        if state > held.state || held.bytes + bytes > MAX_BYTES {
            forgotten = std::mem::take(&mut held.indexes);
            held.bytes = 0;
            held.state = state;
        }
        let at = match held.indexes.iter().position(|e| e.0 == table && e.1 == index && e.2 == created_at) {
            Some(at) => at,
            None => {
                held.indexes.push((table.to_owned(), index.to_owned(), created_at, HashMap::new()));
                held.indexes.len() - 1
            }
        };
        let replaced = held.indexes[at].3.insert(term.to_owned(), (owned.clone(), bytes));
        held.bytes = held.bytes + bytes - replaced.map_or(0, |r| r.1);
        drop(held);
        drop(forgotten);
        owned
    }
}

#[cfg(test)]
mod tests {
    use super::TermBlocks;
    use crate::storage::Slice;
    use std::sync::Arc;

    fn blocks(n: u8) -> super::Blocks {
        Arc::from(vec![(Slice::from(vec![n]), Slice::from(vec![n; 3]))])
    }

    /// Blocks are found only for the state they were read in; a newer state forgets the older
    /// one's, and an older state's read never replaces a newer one's.
    #[test]
    fn blocks_are_found_only_in_their_state() {
        let cache = TermBlocks::default();
        cache.put(5, "t", "ft", 1, "a", blocks(1));
        assert_eq!(cache.get(5, "t", "ft", 1, "a").unwrap().0[0].0[..], [1]);
        assert!(cache.get(6, "t", "ft", 1, "a").is_none(), "another state");
        assert!(cache.get(5, "t", "ft", 2, "a").is_none(), "another index of the same name");
        assert!(cache.get(5, "t", "ft", 1, "b").is_none());
        cache.put(7, "t", "ft", 1, "b", blocks(2));
        assert!(cache.get(5, "t", "ft", 1, "a").is_none(), "the older state is forgotten");
        cache.put(5, "t", "ft", 1, "a", blocks(1));
        assert!(cache.get(7, "t", "ft", 1, "a").is_none(), "an older read is not kept");
        assert_eq!(cache.get(7, "t", "ft", 1, "b").unwrap().0[0].1[..], [2, 2, 2]);
        // a term read twice counts once
        cache.put(7, "t", "ft", 1, "b", blocks(2));
        assert_eq!(cache.0.lock().unwrap().bytes, 4);
    }
}
