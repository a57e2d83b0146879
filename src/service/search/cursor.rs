//! A walk over one term's postings, block by block: the cursor the document-at-a-time search
//! ([`super::daat`]) moves, decoding a block only when a document in it is wanted, and the
//! blocks' score bounds it skips by.

use super::block::{self, Decoded};
use super::score::Bm25;
use crate::keys::FtidxKey;
use crate::service::{Result, ServiceError};
use crate::storage::Slice;

/// One block of a term, as read from the snapshot.
pub struct Block<'a> {
    /// the number its key starts at: at or below that of each document it holds
    pub first: u64,
    /// the block value
    pub bytes: &'a [u8],
}

/// One term of a clause, with its blocks in key order.
pub struct Term<'a> {
    /// the term
    pub name: &'a str,
    /// the included clause it belongs to (its bit in `all` mode); unused for excluded terms
    pub clause: usize,
    /// its idf
    pub idf: f64,
    /// its document frequency
    pub df: u64,
    /// its blocks, in key order
    pub blocks: Vec<Block<'a>>,
}

/// A term with its blocks `range` of the store (keys beside), as read for a query.
pub fn term<'a>(
    keys: &'a [Slice],
    store: &'a [Slice],
    name: &'a str,
    df: u64,
    range: std::ops::Range<usize>,
    clause: usize,
    stats: Bm25,
) -> Result<Term<'a>> {
    let mut blocks = Vec::with_capacity(range.len());
    for i in range {
        let k = FtidxKey::decode(&keys[i]).map_err(|e| ServiceError::damaged("ftidx", format!("a key: {e}")))?;
        blocks.push(Block { first: k.first, bytes: &store[i] });
    }
    Ok(Term { name, clause, idf: stats.idf(df), df, blocks })
}

/// One term's posting of a document every term holds (see [`super::daat::common`]).
#[derive(Debug, Clone, Copy)]
pub struct Held<'d> {
    /// the document's length
    pub len: u64,
    /// the term's `(field, frequency)` pairs in it
    pub pairs: &'d [(u16, u32)],
    /// their positions (see `block::field_positions`)
    pub positions: &'d [u8],
}

/// A walk over one term's postings.
pub(super) struct Cursor<'t, 'a> {
    pub(super) term: &'t Term<'a>,
    /// each block's start
    pub(super) starts: Vec<u64>,
    /// each block's score bound
    pub(super) bounds: Vec<f64>,
    /// the largest of them
    pub(super) max: f64,
    /// the current block
    pub(super) bi: usize,
    /// its postings, once decoded (`loaded` says which block they are)
    pub(super) block: Decoded<'a>,
    pub(super) loaded: Option<usize>,
    /// the current posting in them
    pub(super) pi: usize,
    /// its document
    pub(super) here: Option<u64>,
}

impl<'t, 'a> Cursor<'t, 'a> {
    pub(super) fn new(term: &'t Term<'a>, weight_sum: f64, stats: Bm25) -> Result<Self> {
        let mut bounds = Vec::with_capacity(term.blocks.len());
        for b in &term.blocks {
            let h = block::head(b.bytes)?.0;
            bounds.push(term.idf * weight_sum * h.max_of(|tf, len| stats.tf_part(f64::from(tf), len)));
        }
        let max = bounds.iter().copied().fold(0.0, f64::max);
        let starts = term.blocks.iter().map(|b| b.first).collect();
        let mut c =
            Cursor { term, starts, bounds, max, bi: 0, block: Decoded::default(), loaded: None, pi: 0, here: None };
        c.settle()?;
        Ok(c)
    }

    pub(super) fn start(&self, j: usize) -> Option<u64> {
        self.starts.get(j).copied()
    }

    /// Moves past exhausted blocks to the current posting and caches its document in `here`
    /// (`None` at the end), decoding a block when it becomes the current one.
    fn settle(&mut self) -> Result<()> {
        while let Some(b) = self.term.blocks.get(self.bi) {
            if self.loaded != Some(self.bi) {
                self.block.load(b.first, b.bytes)?;
                self.loaded = Some(self.bi);
                self.pi = 0;
            }
            if let Some(&d) = self.block.docs.get(self.pi) {
                self.here = Some(d);
                return Ok(());
            }
            self.bi += 1;
        }
        self.here = None;
        Ok(())
    }

    /// The current document (`None` at the end).
    pub(super) fn doc(&self) -> Option<u64> {
        self.here
    }

    /// The current posting (while [`Cursor::doc`] is a document; its block's positions
    /// located).
    pub(super) fn held(&self) -> Held<'_> {
        let (i, b) = (self.pi, &self.block);
        Held { len: b.lens[i], pairs: b.pairs_of(i), positions: b.positions_of(i) }
    }

    pub(super) fn advance(&mut self) -> Result<()> {
        self.pi += 1;
        self.settle()
    }

    /// The block that would hold `target`, from the current one on: the last starting at or
    /// before it. Targets mostly fall in the current block (one comparison with the next
    /// block's start); else a gallop then a binary search over the blocks ahead.
    fn block_of(&self, target: u64) -> usize {
        let starts = &self.starts;
        let starts_by = |j: usize| starts.get(j).is_some_and(|s| *s <= target);
        if !starts_by(self.bi + 1) {
            return self.bi;
        }
        // blocks[bi + 1] starts by the target: gallop to a block that does not
        let (mut lo, mut step) = (self.bi + 1, 1);
        while starts_by(lo + step) {
            lo += step;
            step *= 2;
        }
        let hi = (lo + step).min(starts.len());
        lo + starts[lo + 1..hi].partition_point(|s| *s <= target)
    }

    /// Moves to the first document at or after `target`, decoding only the block that can hold it.
    pub(super) fn seek(&mut self, target: u64) -> Result<Option<u64>> {
        match self.here {
            None => return Ok(None),
            Some(h) if h >= target => return Ok(Some(h)),
            Some(_) => {}
        }
        self.bi = self.block_of(target);
        self.settle()?;
        if self.here.is_some_and(|d| d < target) {
            // within the block: its numbers ascend, and targets are mostly near
            self.pi = gallop(&self.block.docs, self.pi, target);
            self.settle()?;
        }
        Ok(self.here)
    }

    /// The bound of the block that would hold `target`, and where that block ends (the next
    /// block's start; `None`: the term's last block). Nothing is decoded.
    pub(super) fn bound_at(&self, target: u64) -> (f64, Option<u64>) {
        if self.here.is_none() {
            return (0.0, None);
        }
        let j = self.block_of(target);
        (self.bounds[j], self.start(j + 1))
    }

    /// The posting's contribution to a document's score.
    pub(super) fn contribution(&mut self, weights: &[f64], stats: Bm25) -> Result<f64> {
        self.block.fill()?;
        let (i, b) = (self.pi, &self.block);
        let len = b.lens[i];
        let mut c = 0.0;
        for &(field, tf) in b.pairs_of(i) {
            let w = weights.get(usize::from(field)).copied().unwrap_or(1.0);
            c += w * self.term.idf * stats.tf_part(f64::from(tf), len);
        }
        Ok(c)
    }
}

/// The first index at or after `from` whose number is at least `target`, given that the number
/// at `from` is below it: doubling steps from `from`, then a binary search within the last step
/// (a seek mostly lands a few postings ahead, where a binary search of the whole rest costs more).
fn gallop(docs: &[u64], from: usize, target: u64) -> usize {
    let (mut lo, mut step) = (from, 1);
    while docs.get(lo + step).is_some_and(|&d| d < target) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(docs.len());
    lo + 1 + docs.get(lo + 1..hi).map_or(0, |s| s.partition_point(|&d| d < target))
}

/// The earlier of two ends (`None`: no end).
pub(super) fn earlier(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

#[cfg(test)]
mod tests {
    use super::gallop;
    use proptest::prelude::*;

    proptest! {
        /// A gallop lands where a binary search of the rest of the block does.
        #[test]
        fn gallop_lands_where_a_binary_search_does(
            mut docs in proptest::collection::vec(0u64..1000, 1..200),
            from_pick in any::<prop::sample::Index>(),
            target in 0u64..1100,
        ) {
            docs.sort_unstable();
            docs.dedup();
            let from = from_pick.index(docs.len());
            prop_assume!(docs[from] < target);
            let want = from + docs[from..].partition_point(|&d| d < target);
            prop_assert_eq!(gallop(&docs, from, target), want);
        }
    }
}
