//! The stored form of a posting block (an `ftidx` value), laid out for scoring as Lucene and
//! tantivy lay theirs out: columns rather than entries, document numbers as bit-packed gaps,
//! frequencies apart from positions.
//!
//! ```text
//! block   := k (tf length){k}  n  col(gaps) col(lengths) col(field count - 1) col(fields) col(tf - 1)
//!            positions
//! col     := width:u8, then the column's values, `width` bits each, least significant first
//! positions := for each posting, for each of its fields: tf varints, the first absolute, the
//!            others gaps
//! ```
//!
//! The head's `k` ≤ 4 pairs bound the BM25 contribution of every posting ([`BlockBound`]); `n`
//! postings follow, each a document number (the first a gap from the key's first number, the
//! others from the one before), its document's length, and per field the field's number and the
//! term's frequency there. Scoring decodes the five columns of `n` values (a few bytes a posting:
//! a one-field index's field counts and numbers take no bits, and frequencies of 1 none either) and never
//! walks the positions, which only phrases read. Every count is checked against the bytes there
//! are, so a damaged value is an error, never a panic or a large allocation.

use super::bitpack;
use crate::entity::varint;
use crate::service::{Result, ServiceError};

/// Most postings a block holds when written (`maintain` splits a term's postings of a write into
/// blocks of this many).
pub const BLOCK_DOCS: usize = 128;
/// Most postings a block may say it holds when read (more is damage).
const MAX_READ_DOCS: u64 = 4096;
/// Most fields one posting may say it has.
const MAX_FIELDS: u64 = 256;
/// Most `(tf, length)` pairs a block's head keeps.
pub const BOUND_PAIRS: usize = 4;

fn damaged() -> ServiceError {
    ServiceError::damaged("ftidx", "a posting block")
}

/// What bounds the score of every posting of a block: the `(term frequency, document length)`
/// pairs no other posting beats on both (the largest frequency in any one field, and the length),
/// at most [`BOUND_PAIRS`] of them (neighbours merged into their largest frequency and shortest
/// length). BM25's term part grows with the frequency and shrinks with the length, so the largest
/// `tf_part` over the pairs, times the index's summed field weights and the term's idf, is at
/// least any posting's contribution — and for a one-field index of few pairs, exactly the
/// block's best (Lucene keeps such pairs as "impacts").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockBound {
    pairs: [(u32, u64); BOUND_PAIRS],
    count: usize,
}

impl BlockBound {
    /// The pairs, largest frequency first.
    pub fn pairs(&self) -> &[(u32, u64)] {
        &self.pairs[..self.count]
    }

    /// The largest `f(tf, length)` over the pairs (0 without any).
    pub fn max_of(&self, f: impl Fn(u32, u64) -> f64) -> f64 {
        self.pairs().iter().map(|&(tf, len)| f(tf, len)).fold(0.0, f64::max)
    }

    /// The bound of postings with these `(tf, length)` pairs.
    pub fn of(mut each: Vec<(u32, u64)>) -> BlockBound {
        each.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        // the front: by falling frequency, each kept pair shorter than every one kept before
        let mut front: Vec<(u32, u64)> = Vec::new();
        for p in each {
            if front.last().is_none_or(|l| p.1 < l.1) {
                front.push(p);
            }
        }
        let mut out = BlockBound { pairs: [(0, 0); BOUND_PAIRS], count: 0 };
        for group in front.chunks(front.len().div_ceil(BOUND_PAIRS).max(1)) {
            let tf = group.iter().map(|p| p.0).max().unwrap_or(0);
            let len = group.iter().map(|p| p.1).min().unwrap_or(0);
            out.pairs[out.count] = (tf, len);
            out.count += 1;
        }
        out
    }
}

/// One posting to write: the document's number and length, the term's `(field, tf)` pairs, and
/// its positions encoded as the block keeps them (see [`encode_positions`]).
#[derive(Debug, Clone, Copy)]
pub struct PostingIn<'p> {
    /// the document's number in the index
    pub num: u64,
    /// the document's length
    pub len: u64,
    /// `(field number, term frequency)`, by field number
    pub fields: &'p [(u16, u32)],
    /// the positions of each field in turn
    pub positions: &'p [u8],
}

/// Appends one field's positions (ascending) in the block's form.
pub fn encode_positions(out: &mut Vec<u8>, positions: &[u32]) {
    let mut last = 0u32;
    for &p in positions {
        varint::write(out, u64::from(p.saturating_sub(last)));
        last = p;
    }
}

/// A block of `postings` (in number order, the first at or after `first`, the key's number).
pub fn encode(first: u64, postings: &[PostingIn<'_>]) -> Vec<u8> {
    let pairs = postings.iter().map(|p| (p.fields.iter().map(|f| f.1).max().unwrap_or(0), p.len)).collect();
    let bound = BlockBound::of(pairs);
    let mut out =
        Vec::with_capacity(16 + postings.len() * 4 + postings.iter().map(|p| p.positions.len()).sum::<usize>());
    varint::write(&mut out, bound.count as u64);
    for &(tf, len) in bound.pairs() {
        varint::write(&mut out, u64::from(tf));
        varint::write(&mut out, len);
    }
    varint::write(&mut out, postings.len() as u64);
    let gaps = postings.iter().scan(first, |last, p| {
        let gap = p.num.saturating_sub(*last);
        *last = p.num;
        Some(gap)
    });
    bitpack::pack(&mut out, gaps);
    bitpack::pack(&mut out, postings.iter().map(|p| p.len));
    bitpack::pack(&mut out, postings.iter().map(|p| (p.fields.len() as u64).saturating_sub(1)));
    bitpack::pack(&mut out, postings.iter().flat_map(|p| p.fields.iter().map(|f| u64::from(f.0))));
    bitpack::pack(&mut out, postings.iter().flat_map(|p| p.fields.iter().map(|f| u64::from(f.1.saturating_sub(1)))));
    for p in postings {
        out.extend_from_slice(p.positions);
    }
    out
}

/// A block's head: its bound, its posting count, and the bytes after them.
pub fn head(bytes: &[u8]) -> Result<(BlockBound, u64, &[u8])> {
    let mut c = bytes;
    let count = usize::try_from(num(&mut c)?).ok().filter(|n| *n <= BOUND_PAIRS).ok_or_else(damaged)?;
    let mut b = BlockBound { pairs: [(0, 0); BOUND_PAIRS], count };
    for pair in &mut b.pairs[..count] {
        *pair = (u32::try_from(num(&mut c)?).map_err(|_| damaged())?, num(&mut c)?);
    }
    let n = num(&mut c)?;
    if n > MAX_READ_DOCS {
        return Err(damaged());
    }
    Ok((b, n, c))
}

/// How many postings a block holds.
pub fn len(bytes: &[u8]) -> Result<u64> {
    Ok(head(bytes)?.1)
}

#[inline]
fn num(c: &mut &[u8]) -> Result<u64> {
    if let Some((&b, rest)) = c.split_first()
        && b < 0x80
    {
        *c = rest;
        return Ok(u64::from(b));
    }
    let (v, n) = varint::read(c).map_err(|_| damaged())?;
    *c = c.get(n..).ok_or_else(damaged)?;
    Ok(v)
}

/// A decoded block: its columns, in buffers a reader reuses from block to block.
#[derive(Debug, Default, Clone)]
pub struct Decoded<'a> {
    /// each posting's document number
    pub docs: Vec<u64>,
    /// each posting's document length
    pub lens: Vec<u64>,
    /// posting `i`'s `(field, tf)` pairs are `pairs[at[i]..at[i + 1]]`
    at: Vec<usize>,
    /// every posting's `(field number, term frequency)` pairs
    pairs: Vec<(u16, u32)>,
    /// the positions section
    positions: &'a [u8],
    /// the columns after the numbers, until [`Decoded::fill`] decodes them
    rest: &'a [u8],
    filled: bool,
    /// where each posting's positions start in it (filled by [`Decoded::locate_positions`])
    pos_at: Vec<usize>,
    scratch: Vec<u64>,
}

impl<'a> Decoded<'a> {
    /// Decodes `bytes` (the block keyed by number `first`) into these buffers: the document
    /// numbers now, the rest when [`Decoded::fill`] asks (a search passes over many blocks
    /// reading only their numbers).
    pub fn load(&mut self, first: u64, bytes: &'a [u8]) -> Result<()> {
        let (_, n, rest) = head(bytes)?;
        let n = n as usize;
        let rest = bitpack::unpack(rest, n, &mut self.docs)?;
        let mut last = first;
        for d in &mut self.docs {
            last = last.checked_add(*d).ok_or_else(damaged)?;
            *d = last;
        }
        self.rest = rest;
        self.filled = false;
        self.pos_at.clear();
        Ok(())
    }

    /// Decodes the lengths, fields and frequencies of the loaded block (once).
    #[inline]
    pub fn fill(&mut self) -> Result<()> {
        if self.filled { Ok(()) } else { self.fill_now() }
    }

    fn fill_now(&mut self) -> Result<()> {
        let n = self.docs.len();
        let rest = bitpack::unpack(self.rest, n, &mut self.lens)?;
        let rest = bitpack::unpack(rest, n, &mut self.scratch)?;
        self.at.clear();
        self.at.reserve(n + 1);
        let mut sum = 0usize;
        self.at.push(0);
        for &k in &self.scratch {
            if k >= MAX_FIELDS {
                return Err(damaged());
            }
            sum += k as usize + 1;
            self.at.push(sum);
        }
        let rest = bitpack::unpack(rest, sum, &mut self.scratch)?;
        self.pairs.clear();
        if self.scratch.iter().any(|&f| f > u64::from(u16::MAX)) {
            return Err(damaged());
        }
        self.pairs.extend(self.scratch.iter().map(|&f| (f as u16, 0)));
        let rest = bitpack::unpack(rest, sum, &mut self.scratch)?;
        for (pair, &t) in self.pairs.iter_mut().zip(&self.scratch) {
            pair.1 = u32::try_from(t).ok().and_then(|t| t.checked_add(1)).ok_or_else(damaged)?;
        }
        self.positions = rest;
        self.filled = true;
        Ok(())
    }

    /// How many postings the block holds.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True for a block of no postings.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Finds where each posting's positions start (once a block: only phrases and rewrites
    /// need them); decodes the other columns first.
    pub fn locate_positions(&mut self) -> Result<()> {
        self.fill()?;
        if !self.pos_at.is_empty() {
            return Ok(());
        }
        let mut c = self.positions;
        let total = self.positions.len();
        self.pos_at.reserve(self.docs.len() + 1);
        for i in 0..self.docs.len() {
            self.pos_at.push(total - c.len());
            let count: u64 = self.pairs_of(i).iter().map(|&(_, tf)| u64::from(tf)).sum();
            for _ in 0..count {
                // a varint ends at its first byte below 0x80
                let end = c.iter().position(|b| *b < 0x80).ok_or_else(damaged)?;
                c = &c[end + 1..];
            }
        }
        self.pos_at.push(total - c.len());
        if !c.is_empty() {
            return Err(damaged());
        }
        Ok(())
    }

    /// Posting `i`'s positions bytes (after [`Decoded::locate_positions`]).
    pub fn positions_of(&self, i: usize) -> &'a [u8] {
        let p = self.positions;
        match (self.pos_at.get(i), self.pos_at.get(i + 1)) {
            (Some(&a), Some(&b)) => &p[a..b],
            _ => &[],
        }
    }

    /// Posting `i`'s `(field, tf)` pairs (after [`Decoded::fill`]).
    #[inline]
    pub fn pairs_of(&self, i: usize) -> &[(u16, u32)] {
        &self.pairs[self.at[i]..self.at[i + 1]]
    }

    /// Posting `i` as it would be written again (after [`Decoded::locate_positions`]).
    pub fn posting_in(&self, i: usize) -> PostingIn<'_> {
        PostingIn { num: self.docs[i], len: self.lens[i], fields: self.pairs_of(i), positions: self.positions_of(i) }
    }
}

/// The positions of each field of one posting, from its positions bytes and its `(field, tf)`
/// pairs, into `out` (one list a pair).
pub fn field_positions(mut bytes: &[u8], pairs: &[(u16, u32)], out: &mut [Vec<u32>]) -> Result<()> {
    for (k, &(_, tf)) in pairs.iter().enumerate() {
        let list = &mut out[k];
        list.clear();
        let mut last = 0u64;
        for _ in 0..tf {
            last = last.checked_add(num(&mut bytes)?).ok_or_else(damaged)?;
            list.push(u32::try_from(last).map_err(|_| damaged())?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Doc = (u64, u64, Vec<(u16, Vec<u32>)>);
    /// A posting's `(field, tf)` pairs and encoded positions.
    type Owned = (Vec<(u16, u32)>, Vec<u8>);

    fn block_of(first: u64, docs: &[Doc]) -> Vec<u8> {
        let owned: Vec<Owned> = docs
            .iter()
            .map(|(_, _, hits)| {
                let pairs = hits.iter().map(|(f, p)| (*f, p.len() as u32)).collect();
                let mut pos = Vec::new();
                for (_, p) in hits {
                    encode_positions(&mut pos, p);
                }
                (pairs, pos)
            })
            .collect();
        let ins: Vec<PostingIn<'_>> = docs
            .iter()
            .zip(&owned)
            .map(|((num, len, _), (pairs, pos))| PostingIn { num: *num, len: *len, fields: pairs, positions: pos })
            .collect();
        encode(first, &ins)
    }

    proptest! {
        #[test]
        fn blocks_round_trip(
            first in 0u64..1_000_000,
            docs in proptest::collection::btree_map(
                0u64..100_000,
                (0u64..10_000, proptest::collection::btree_map(0u16..4, proptest::collection::btree_set(0u32..100_000, 1..8), 1..4)),
                1..40,
            )
        ) {
            let docs: Vec<Doc> = docs
                .into_iter()
                .map(|(gap, (len, hits))| (first + gap, len, hits.into_iter().map(|(f, p)| (f, p.into_iter().collect())).collect()))
                .collect();
            let bytes = block_of(first, &docs);
            let (bound, n, _) = head(&bytes).unwrap();
            prop_assert_eq!(n as usize, docs.len());
            // at any average length, the bound is at least every posting's term part, and
            // exactly the best one's while the front fits the head (surely so for 4 postings)
            for avg in [1.0, 37.5, 5000.0] {
                let part = |tf: u32, len: u64| {
                    let norm = len as f64 / avg;
                    f64::from(tf) * 2.2 / (f64::from(tf) + 1.2 * (0.25 + 0.75 * norm))
                };
                let best = docs
                    .iter()
                    .map(|(_, len, h)| part(h.iter().map(|(_, p)| p.len() as u32).max().unwrap(), *len))
                    .fold(0.0, f64::max);
                let got = bound.max_of(part);
                prop_assert!(got >= best);
                if docs.len() <= BOUND_PAIRS {
                    prop_assert_eq!(got, best);
                }
            }
            let mut d = Decoded::default();
            d.load(first, &bytes).unwrap();
            d.locate_positions().unwrap();
            prop_assert_eq!(d.len(), docs.len());
            for (i, (num, len, hits)) in docs.iter().enumerate() {
                prop_assert_eq!(d.docs[i], *num);
                prop_assert_eq!(d.lens[i], *len);
                let pairs = d.pairs_of(i);
                prop_assert_eq!(pairs.len(), hits.len());
                let mut lists = vec![Vec::new(); pairs.len()];
                field_positions(d.positions_of(i), pairs, &mut lists).unwrap();
                for ((pair, list), (f, positions)) in pairs.iter().zip(&lists).zip(hits) {
                    prop_assert_eq!(pair.0, *f);
                    prop_assert_eq!(list, positions);
                }
            }
            // postings re-written from a decoded block give the same block
            let again: Vec<PostingIn<'_>> = (0..d.len()).map(|i| d.posting_in(i)).collect();
            prop_assert_eq!(encode(first, &again), bytes);
        }

        #[test]
        fn damaged_blocks_are_errors_not_panics(first in any::<u64>(), bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut d = Decoded::default();
            if d.load(first, &bytes).is_ok() && d.locate_positions().is_ok() {
                let mut lists = vec![Vec::new(); 4];
                for i in 0..d.len() {
                    lists.resize_with(d.pairs_of(i).len(), Vec::new);
                    let _ = field_positions(d.positions_of(i), d.pairs_of(i), &mut lists);
                }
            }
        }
    }

    #[test]
    fn a_one_field_block_of_single_occurrences_takes_few_bytes() {
        // 128 documents 1-3 apart, lengths 30-60, tf 1, one position each below 64
        let docs: Vec<Doc> =
            (0..128u64).map(|i| (1000 + i * 2 + i % 2, 30 + i % 31, vec![(0, vec![(i % 64) as u32])])).collect();
        let bytes = block_of(1000, &docs);
        // gaps 2 bits, lengths 6 bits, field counts, fields and tf-1 none; positions 1 byte
        assert!(bytes.len() < 128 * 2 + 16, "{} bytes", bytes.len());
    }
}
