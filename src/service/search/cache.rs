//! The posting blocks of the terms searched, remembered for the state they were read in.
//!
//! Reading a term's blocks walks fjall's iterators key by key (memtables, filters, table blocks):
//! some 15% of a 1-term search's samples on the peers bench. Every view a search reads names its
//! state by a number (`ReadView::state`), and two views of one state read the same blocks, so
//! blocks read in a state are exact for any later search of that state, and for no other: the
//! cache holds one state's blocks, and a search of a newer state empties it. Between writes —
//! a read-heavy workload's common case — every search after the first of a term finds its blocks
//! here; a write makes the next search read them again. What it holds is bounded by
//! [`MAX_BYTES`] of keys and values; they are reference-counted views into fjall's data blocks
//! (4 KiB), which they keep alive, so the memory held can be a few times that.

use crate::storage::Slice;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Most bytes of blocks (keys and values) remembered.
pub const MAX_BYTES: usize = 16 << 20;

/// One term's blocks: keys and values, in key order.
pub type Blocks = Arc<[(Slice, Slice)]>;

/// A term of an index: its table, the index's name and creation time, the term.
type TermKey = (String, String, i64, String);

/// The remembered blocks of one state.
#[derive(Default)]
pub struct TermBlocks(Mutex<Held>);

#[derive(Default)]
struct Held {
    state: u64,
    terms: HashMap<TermKey, Blocks>,
    bytes: usize,
}

impl TermBlocks {
    /// The blocks of `term` remembered for `state`, if any.
    pub fn get(&self, state: u64, table: &str, index: &str, created_at: i64, term: &str) -> Option<Blocks> {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if held.state != state {
            return None;
        }
        held.terms.get(&(table.to_owned(), index.to_owned(), created_at, term.to_owned())).cloned()
    }

    /// Remembers `blocks`, read for `term` in `state` (not if a newer state is remembered).
    pub fn put(&self, state: u64, table: &str, index: &str, created_at: i64, term: &str, blocks: Blocks) {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if state < held.state {
            return;
        }
        let bytes: usize = blocks.iter().map(|(k, v)| k.len() + v.len()).sum();
        if state > held.state || held.bytes + bytes > MAX_BYTES {
            held.terms.clear();
            held.bytes = 0;
            held.state = state;
        }
        if bytes <= MAX_BYTES {
            held.bytes += bytes;
            held.terms.insert((table.to_owned(), index.to_owned(), created_at, term.to_owned()), blocks);
        }
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
        assert_eq!(cache.get(5, "t", "ft", 1, "a").unwrap()[0].0[..], [1]);
        assert!(cache.get(6, "t", "ft", 1, "a").is_none(), "another state");
        assert!(cache.get(5, "t", "ft", 2, "a").is_none(), "another index of the same name");
        assert!(cache.get(5, "t", "ft", 1, "b").is_none());
        cache.put(7, "t", "ft", 1, "b", blocks(2));
        assert!(cache.get(5, "t", "ft", 1, "a").is_none(), "the older state is forgotten");
        cache.put(5, "t", "ft", 1, "a", blocks(1));
        assert!(cache.get(7, "t", "ft", 1, "a").is_none(), "an older read is not kept");
        assert_eq!(cache.get(7, "t", "ft", 1, "b").unwrap()[0].1[..], [2, 2, 2]);
    }
}
