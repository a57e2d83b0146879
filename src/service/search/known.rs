//! What the committer knows of each fulltext index's committed keys, so a write need not read
//! them back:
//! - the terms its dictionary holds, so a write adds the dictionary entry of a term only when it
//!   is new (a blind put of every term of every write left a version per write in the LSM tree,
//!   which each dictionary scan — prefixes, typo-tolerant terms — then walked);
//! - each token's last block where it is not full (its first number and value), so a write
//!   appends the token's new postings to it rather than starting a block of its own: an import
//!   in chunks, or a stream of single-document writes, would otherwise leave a short block per
//!   write and token (3.7 times as many blocks as full ones on the peers bench's texts).
//!
//! Only the committer reads and changes it. What a write adds is recorded once the write has
//! committed (an `on_commit` hook), and what it removes or rewrites is forgotten when the write
//! stages it — so it may lack something (a term is then put again; a token's postings start a new
//! block), but never claims what the store does not hold. An index's entries are keyed by its
//! creation time, so a dropped and re-created index starts afresh; what is remembered is bounded
//! (terms and bytes per index, bytes over all, the number of indexes), and forgetting is always
//! safe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Most terms remembered per index.
const MAX_TERMS: usize = 2_000_000;
/// Most bytes of last blocks remembered per index (past it its last blocks are all forgotten).
const MAX_TAIL_BYTES: usize = 32 << 20;
/// Most bytes of last blocks remembered over all indexes (past it all are forgotten).
const MAX_ALL_TAIL_BYTES: usize = 128 << 20;
/// Most indexes remembered (past it all are forgotten: dropped indexes' entries go with them).
const MAX_INDEXES: usize = 256;

/// A token's last block: its first number and value.
pub type Tail = (u64, Arc<[u8]>);

/// One index's known state.
#[derive(Default)]
pub struct Known {
    terms: foldhash::HashSet<String>,
    tails: foldhash::HashMap<String, Tail>,
    tail_bytes: usize,
}

impl Known {
    /// True when the dictionary is known to hold `token`.
    pub fn has_term(&self, token: &str) -> bool {
        self.terms.contains(token)
    }

    /// Forgets a term (its entry is being removed).
    pub fn forget_term(&mut self, token: &str) {
        self.terms.remove(token);
    }

    /// The token's last block, if it is known and not full: its first number and value.
    pub fn tail(&self, token: &str) -> Option<Tail> {
        self.tails.get(token).cloned()
    }

    /// Forgets a token's last block (the write changes its blocks).
    pub fn forget_tail(&mut self, token: &str) {
        if let Some((_, v)) = self.tails.remove(token) {
            self.tail_bytes -= v.len();
        }
    }

    fn set_tail(&mut self, token: String, tail: Option<Tail>) {
        self.forget_tail(&token);
        if let Some((first, value)) = tail {
            if self.tail_bytes + value.len() > MAX_TAIL_BYTES {
                self.tails.clear();
                self.tail_bytes = 0;
            }
            self.tail_bytes += value.len();
            self.tails.insert(token, (first, value));
        }
    }
}

/// What a write adds to one index's known state once it commits.
#[derive(Default)]
pub struct Added {
    /// dictionary entries it put
    pub terms: Vec<String>,
    /// tokens whose last block it wrote: the block, where not full
    pub tails: Vec<(String, Option<Tail>)>,
}

/// Per index (table, name, created_at).
type Indexes = HashMap<(String, String, i64), Known>;

/// The known state of every fulltext index (see the module doc).
#[derive(Default, Clone)]
pub struct KnownTerms(Arc<Mutex<Indexes>>);

impl KnownTerms {
    /// The map, locked.
    pub fn lock(&self) -> MutexGuard<'_, Indexes> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records what a committed write added to index `key`.
    pub fn record(&self, key: (String, String, i64), added: Added) {
        let mut map = self.lock();
        if map.len() >= MAX_INDEXES && !map.contains_key(&key) {
            map.clear();
        }
        if map.values().map(|k| k.tail_bytes).sum::<usize>() > MAX_ALL_TAIL_BYTES {
            for k in map.values_mut() {
                k.tails.clear();
                k.tail_bytes = 0;
            }
        }
        let known = map.entry(key).or_default();
        if known.terms.len() + added.terms.len() <= MAX_TERMS {
            known.terms.extend(added.terms);
        }
        for (token, tail) in added.tails {
            known.set_tail(token, tail);
        }
    }
}
