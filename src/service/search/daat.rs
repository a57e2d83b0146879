//! Top-k of a query of term clauses, document at a time, skipping what cannot enter the top k.
//!
//! Every term's blocks, read in key order, list its documents by their number in the index (see
//! `keys::ftidx`), one order shared by all terms. So the terms' postings merge like sorted lists
//! of integers: no map of every match is built. The cursors that
//! propose candidates wait in a queue by their current document; a candidate costs work for the
//! terms that hold it, not for every term.
//!
//! `total` is counted exactly up to a threshold (`"total": "exact"` lifts it). Until the count
//! passes it, every match is visited (counted), but a match is scored only if the bounds of the
//! blocks holding it could put it in the top k. Past it — or from the start where the count is
//! known without visiting (one term: its document frequency; a union whose largest term alone
//! passes the threshold) — the search skips:
//! - *MaxScore*: in `any` mode the terms whose summed best block bounds cannot reach the k-th score
//!   stop proposing documents; they are only looked up for documents the others propose;
//! - *block-max*: where the summed bounds of the blocks that hold a candidate cannot reach the k-th
//!   score, no document before the first of those blocks' ends can either, and the proposing
//!   terms jump there without decoding what they pass.
//!
//! A block's bound (`block::BlockBound`) is `idf · Σw · max tf_part(tf, length)` over the
//! `(tf, length)` pairs of its head: at least the contribution of any of its postings (BM25's term
//! part grows with the frequency and shrinks with the length; each field adds at most its weight
//! times that). Ties go to the smaller number (the document indexed first, as in Lucene and
//! tantivy), and documents are visited in number order, so a document enters a full page only
//! with a score above the page's last: a block whose bound is not above it is passed over, ties
//! included. That holds to the bit for one term of a one-field index (the bound of a block's best
//! pair is that posting's score, computed the same way); elsewhere bounds are sums or products
//! in another order than the scores, which may round an ulp or so apart, so they are raised by a
//! relative [`SLACK`] first — far above rounding, far below any real difference of scores. Scores are summed in the query's term order, as the exhaustive
//! search sums them, so both give the same bits.

use super::block::{self, Decoded};
use super::ranked::{self, Ranked};
use super::score::Bm25;
use crate::keys::FtidxKey;
use crate::service::stop::Stop;
use crate::service::{Result, ServiceError};
use crate::storage::Slice;
use std::collections::BinaryHeap;

/// Relative raise of bounds that may round below a score they bound (see the module doc).
const SLACK: f64 = 1e-12;

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

/// Says whether a document (by number) is one the search must pass over.
pub type Gone<'g> = dyn Fn(u64) -> bool + 'g;

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
        let k =
            FtidxKey::decode(&keys[i]).map_err(|e| ServiceError::Internal(format!("a damaged full-text key: {e}")))?;
        blocks.push(Block { first: k.first, bytes: &store[i] });
    }
    Ok(Term { name, clause, idf: stats.idf(df), df, blocks })
}

/// One term's posting of a document every term holds (see [`common`]).
#[derive(Debug, Clone, Copy)]
pub struct Held<'d> {
    /// the document's length
    pub len: u64,
    /// the term's `(field, frequency)` pairs in it
    pub pairs: &'d [(u16, u32)],
    /// their positions (see `block::field_positions`)
    pub positions: &'d [u8],
}

/// Calls `f` with each document every one of `terms` holds, in order, and each term's posting
/// of it. The rarest term leads; the others seek (gallop) to its documents, decoding only the
/// blocks that may hold them.
pub fn common(terms: &[Term<'_>], stop: &Stop, mut f: impl FnMut(u64, &[Held<'_>]) -> Result<()>) -> Result<()> {
    let mut cur = terms.iter().map(|t| Cursor::new(t, 1.0, Bm25::new(0, 0))).collect::<Result<Vec<_>>>()?;
    let Some(lead) = (0..terms.len()).min_by_key(|&i| terms[i].df) else { return Ok(()) };
    let mut steps = 0u32;
    'walk: while let Some(d) = cur[lead].doc() {
        steps = steps.wrapping_add(1);
        if steps.is_multiple_of(512) {
            stop.check()?;
        }
        for k in 0..cur.len() {
            match cur[k].seek(d)? {
                None => break 'walk,
                Some(m) if m > d => {
                    cur[lead].seek(m)?;
                    continue 'walk;
                }
                Some(_) => {}
            }
        }
        for c in &mut cur {
            c.block.locate_positions()?;
        }
        let row: Vec<Held<'_>> = cur.iter().map(Cursor::held).collect();
        f(d, &row)?;
        cur[lead].advance()?;
    }
    Ok(())
}

/// What a search asks for.
pub struct Ask<'s> {
    /// `all` mode: a match holds a term of every included clause; else one of any
    pub all: bool,
    /// how many included clauses there are
    pub clauses: usize,
    /// the weight of each indexed field, by number
    pub weights: &'s [f64],
    /// the index's statistics
    pub stats: Bm25,
    /// how many hits to keep (`offset + limit`)
    pub depth: usize,
    /// count matches exactly up to this many
    pub threshold: u64,
    /// when some documents must be passed over (expired ones the sweep has not removed yet):
    /// says which
    pub gone: Option<&'s Gone<'s>>,
}

/// What a search found.
pub struct Found {
    /// the best `depth` hits, best first
    pub hits: Vec<Ranked>,
    /// the matches counted
    pub total: u64,
    /// whether `total` is every match (else there are more)
    pub exact: bool,
}

/// A walk over one term's postings.
struct Cursor<'t, 'a> {
    term: &'t Term<'a>,
    /// each block's start
    starts: Vec<u64>,
    /// each block's score bound
    bounds: Vec<f64>,
    /// the largest of them
    max: f64,
    /// the current block
    bi: usize,
    /// its postings, once decoded (`loaded` says which block they are)
    block: Decoded<'a>,
    loaded: Option<usize>,
    /// the current posting in them
    pi: usize,
    /// its document
    here: Option<u64>,
}

impl<'t, 'a> Cursor<'t, 'a> {
    fn new(term: &'t Term<'a>, weight_sum: f64, stats: Bm25) -> Result<Self> {
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

    fn start(&self, j: usize) -> Option<u64> {
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
    fn doc(&self) -> Option<u64> {
        self.here
    }

    /// The current posting (while [`Cursor::doc`] is a document; its block's positions
    /// located).
    fn held(&self) -> Held<'_> {
        let (i, b) = (self.pi, &self.block);
        Held { len: b.lens[i], pairs: b.pairs_of(i), positions: b.positions_of(i) }
    }

    fn advance(&mut self) -> Result<()> {
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
    fn seek(&mut self, target: u64) -> Result<Option<u64>> {
        match self.here {
            None => return Ok(None),
            Some(h) if h >= target => return Ok(Some(h)),
            Some(_) => {}
        }
        self.bi = self.block_of(target);
        self.settle()?;
        if self.here.is_some_and(|d| d < target) {
            // within the block: its numbers ascend
            self.pi += self.block.docs[self.pi..].partition_point(|&d| d < target);
            self.settle()?;
        }
        Ok(self.here)
    }

    /// The bound of the block that would hold `target`, and where that block ends (the next
    /// block's start; `None`: the term's last block). Nothing is decoded.
    fn bound_at(&self, target: u64) -> (f64, Option<u64>) {
        if self.here.is_none() {
            return (0.0, None);
        }
        let j = self.block_of(target);
        (self.bounds[j], self.start(j + 1))
    }

    /// The posting's contribution to a document's score.
    fn contribution(&mut self, weights: &[f64], stats: Bm25) -> Result<f64> {
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

/// The earlier of two ends (`None`: no end).
fn earlier(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

/// The search (see the module doc). `include` and `exclude` are in the query's term order.
pub fn top_k<'t, 'a>(include: &'t [Term<'a>], exclude: &'t [Term<'a>], ask: &Ask<'_>, stop: &Stop) -> Result<Found> {
    let weight_sum: f64 = ask.weights.iter().sum::<f64>().max(1.0);
    // exact bounds only for one term of a one-field index
    let slack = if include.len() == 1 && ask.weights.len() <= 1 { 1.0 } else { 1.0 + SLACK };
    let mut cur = include.iter().map(|t| Cursor::new(t, weight_sum, ask.stats)).collect::<Result<Vec<_>>>()?;
    let mut excl = exclude.iter().map(|t| Cursor::new(t, weight_sum, ask.stats)).collect::<Result<Vec<_>>>()?;
    // the clauses' cursors, and in `all` mode the lead: the clause of fewest postings
    let mut by_clause: Vec<Vec<usize>> = vec![Vec::new(); ask.clauses];
    for (i, t) in include.iter().enumerate() {
        if let Some(c) = by_clause.get_mut(t.clause) {
            c.push(i);
        }
    }
    let clause_df = |c: &Vec<usize>| c.iter().map(|&i| include[i].df).sum::<u64>();
    let lead = (0..by_clause.len()).min_by_key(|&c| clause_df(&by_clause[c])).unwrap_or(0);
    // `any` mode: the cursors by their best bound, weakest first (MaxScore's order)
    let mut by_max: Vec<usize> = (0..cur.len()).collect();
    by_max.sort_by(|&a, &b| cur[a].max.total_cmp(&cur[b].max));

    // the count, where it is known without visiting the matches
    let union = !ask.all || ask.clauses == 1;
    let plain = exclude.is_empty() && ask.gone.is_none();
    let (mut counting, mut total, mut exact) = (true, 0u64, true);
    if plain && union && include.len() == 1 {
        (counting, total) = (false, include[0].df);
    } else if plain && union && include.iter().any(|t| t.df > ask.threshold) {
        (counting, total, exact) = (false, ask.threshold, false);
    }

    if plain
        && union
        && include.len() == 1
        && let Some(c) = cur.first_mut()
    {
        return Ok(Found { hits: single(c, ask, slack, stop)?, total, exact });
    }
    let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(ask.depth + 1);
    let mut theta = f64::NEG_INFINITY;
    // the cursors that propose candidates — in `all` mode the lead clause's, in `any` mode all
    // until MaxScore drops the weakest — in a queue by their current document; the rest are
    // looked up for the documents proposed
    let proposers: Vec<usize> = if ask.all { by_clause.get(lead).cloned().unwrap_or_default() } else { by_max.clone() };
    let mut others: Vec<usize> = (0..cur.len()).filter(|i| !proposers.contains(i)).collect();
    let mut queue = Queue::default();
    queue.fill(&cur, &proposers);
    let (mut at, mut holders) = (Vec::new(), Vec::new());
    let mut steps = 0u32;
    'walk: loop {
        steps = steps.wrapping_add(1);
        if steps.is_multiple_of(512) {
            stop.check()?;
        }
        let Some(d) = queue.peek() else { break };
        if ask.all {
            // every other clause must hold it: leapfrog to the first document they all might
            for (c, members) in by_clause.iter().enumerate() {
                if c == lead {
                    continue;
                }
                let mut least: Option<u64> = None;
                for &i in members {
                    least = earlier(least, cur[i].seek(d)?);
                }
                match least {
                    None => break 'walk,
                    Some(m) if m > d => {
                        queue.seek_all(&mut cur, m)?;
                        continue 'walk;
                    }
                    Some(_) => {}
                }
            }
        }
        if !counting && heap.len() == ask.depth {
            // block-max: the blocks that would hold `d`, in every term, bound all documents up to
            // the first of their ends
            let (mut ub, mut end) = (0.0, None);
            for c in &cur {
                let (b, e) = c.bound_at(d);
                ub += b;
                end = earlier(end, e);
            }
            if ub * slack <= theta {
                let Some(end) = end else { break };
                queue.seek_all(&mut cur, end)?;
                continue;
            }
        }
        queue.pop_at(d, &mut at);
        let mut regroup = false;
        let mut matched = ask.gone.is_none_or(|gone| !gone(d));
        for c in excl.iter_mut() {
            if matched && c.seek(d)? == Some(d) {
                matched = false;
            }
        }
        if matched {
            if counting {
                total += 1;
                if total > ask.threshold {
                    // the count stops: from here on the search may skip
                    (counting, total, exact) = (false, ask.threshold, false);
                    regroup = !ask.all;
                }
            }
            // score it, unless the bounds of the blocks that may hold it say it cannot enter: a
            // proposing cursor at `d` adds its block's bound; another one at `d` too, one past it
            // nothing, one behind it the bound of the block that would hold `d`
            let worth = heap.len() < ask.depth || {
                let mut ub: f64 = at.iter().map(|&i| cur[i].bounds[cur[i].bi]).sum();
                for &i in &others {
                    let c = &cur[i];
                    ub += match c.doc() {
                        Some(h) if h == d => c.bounds[c.bi],
                        Some(h) if h > d => 0.0,
                        Some(_) => c.bound_at(d).0,
                        None => 0.0,
                    };
                }
                ub * slack > theta
            };
            if worth {
                // summed in the query's term order, as the exhaustive search sums
                holders.clear();
                holders.extend_from_slice(&at);
                for &i in &others {
                    if cur[i].seek(d)? == Some(d) {
                        holders.push(i);
                    }
                }
                holders.sort_unstable();
                let mut score = 0.0;
                for &i in &holders {
                    score += cur[i].contribution(ask.weights, ask.stats)?;
                }
                ranked::offer(&mut heap, ask.depth, Ranked { score, num: d });
                if heap.len() == ask.depth
                    && let Some(worst) = heap.peek()
                    && worst.score > theta
                {
                    theta = worst.score;
                    regroup |= !ask.all && !counting;
                }
            }
        }
        for &i in &at {
            cur[i].advance()?;
        }
        if regroup && heap.len() == ask.depth {
            // MaxScore: the weakest terms stop proposing
            let proposers = proposing(&cur, &by_max, theta, slack);
            others = (0..cur.len()).filter(|i| !proposers.contains(i)).collect();
            queue.fill(&cur, &proposers);
        } else {
            for &i in &at {
                queue.push(&cur, i);
            }
        }
    }
    Ok(Found { hits: heap.into_sorted_vec(), total, exact })
}

/// The top k of one term with nothing to pass over: its blocks in turn, each passed over without
/// decoding once the page is full and the block's bound is not above the page's last score, the
/// others scored posting by posting.
fn single(c: &mut Cursor<'_, '_>, ask: &Ask<'_>, slack: f64, stop: &Stop) -> Result<Vec<Ranked>> {
    let (idf, stats, depth) = (c.term.idf, ask.stats, ask.depth);
    let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(depth + 1);
    let mut theta = f64::NEG_INFINITY;
    for (bi, b) in c.term.blocks.iter().enumerate() {
        if bi % 64 == 63 {
            stop.check()?;
        }
        if heap.len() == depth && c.bounds[bi] * slack <= theta {
            continue;
        }
        c.block.load(b.first, b.bytes)?;
        c.block.fill()?;
        let d = &c.block;
        for i in 0..d.len() {
            let len = d.lens[i];
            // as `Cursor::contribution` sums, so both give the same bits
            let mut score = 0.0;
            for &(field, tf) in d.pairs_of(i) {
                let w = ask.weights.get(usize::from(field)).copied().unwrap_or(1.0);
                score += w * idf * stats.tf_part(f64::from(tf), len);
            }
            if heap.len() < depth || score > theta {
                ranked::offer(&mut heap, depth, Ranked { score, num: d.docs[i] });
                if heap.len() == depth
                    && let Some(worst) = heap.peek()
                {
                    theta = worst.score;
                }
            }
        }
    }
    Ok(heap.into_sorted_vec())
}

/// The proposing cursors by their current document: a vector sorted greatest first, so the
/// least is popped from its end (for the few terms a merge serves, cheaper than a binary heap,
/// which took 15% of a 6-term merge's samples).
#[derive(Default)]
struct Queue(Vec<(u64, usize)>);

impl Queue {
    /// The queue of these cursors (those not at their end).
    fn fill(&mut self, cur: &[Cursor<'_, '_>], proposers: &[usize]) {
        self.0.clear();
        for &i in proposers {
            self.push(cur, i);
        }
    }

    fn push(&mut self, cur: &[Cursor<'_, '_>], i: usize) {
        if let Some(d) = cur[i].doc() {
            let at = self.0.partition_point(|e| *e > (d, i));
            self.0.insert(at, (d, i));
        }
    }

    /// The least current document.
    fn peek(&self) -> Option<u64> {
        self.0.last().map(|e| e.0)
    }

    /// Takes the cursors at `d` out of the queue, into `at`.
    fn pop_at(&mut self, d: u64, at: &mut Vec<usize>) {
        at.clear();
        while self.peek() == Some(d) {
            if let Some(e) = self.0.pop() {
                at.push(e.1);
            }
        }
    }

    /// Moves every queued cursor to `target` or past it.
    fn seek_all(&mut self, cur: &mut [Cursor<'_, '_>], target: u64) -> Result<()> {
        let queued: Vec<usize> = self.0.drain(..).map(|e| e.1).collect();
        for i in queued {
            cur[i].seek(target)?;
            self.push(cur, i);
        }
        Ok(())
    }
}

/// MaxScore: the cursors that must propose candidates — all but the weakest ones whose best bounds
/// together stay below the k-th score (a document only they hold cannot enter).
fn proposing(cur: &[Cursor<'_, '_>], by_max: &[usize], theta: f64, slack: f64) -> Vec<usize> {
    let mut sum = 0.0;
    let mut weak = 0;
    for &i in by_max {
        if (sum + cur[i].max) * slack <= theta {
            sum += cur[i].max;
            weak += 1;
        } else {
            break;
        }
    }
    by_max[weak..].to_vec()
}
