//! Top-k of a query of term clauses, document at a time, skipping what cannot enter the top k.
//!
//! Every term's blocks, read in key order, list its documents in one order shared by all terms:
//! the number of the write that indexed the document, then its id (see `keys::ftidx`: a document's
//! postings are all in blocks of its write, and a write's blocks split its ids in order). So the
//! terms' postings merge like sorted lists: no map of every match is built.
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
//! A block's bound (`postings::BlockBound`) is `idf · Σw · tf_part(max tf, min length)`: at least
//! the contribution of any of its postings (BM25's term part grows with the frequency and shrinks
//! with the length; each field adds at most its weight times that). Bounds are compared with a
//! relative margin ([`MARGIN`]), so float rounding never skips a document that ties, and ties
//! still go to the smaller id. Scores are summed in the query's term order, as the exhaustive
//! search sums them, so both give the same bits.

use super::postings::{self, Posting};
use super::ranked::{self, Ranked};
use super::score::Bm25;
use crate::service::Result;
use crate::service::stop::Stop;
use std::borrow::Cow;
use std::collections::BinaryHeap;

/// Relative slack on every bound comparison (float sums in another order may differ by ulps).
const MARGIN: f64 = 1e-9;

/// A document's place in every term's postings: its write's number, then its id.
type Doc<'a> = (u64, &'a [u8]);

/// One block of a term, as read from the snapshot.
pub struct Block<'a> {
    /// the number of the write that made it
    pub write: u64,
    /// its key's first id: at or below the id of each document it holds
    pub first: Cow<'a, str>,
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

/// Says whether a document is one the search must pass over.
pub type Gone<'g> = dyn Fn(&[u8]) -> bool + 'g;

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
pub struct Found<'a> {
    /// the best `depth` hits, best first
    pub hits: Vec<Ranked<'a>>,
    /// the matches counted
    pub total: u64,
    /// whether `total` is every match (else there are more)
    pub exact: bool,
}

/// A walk over one term's postings.
struct Cursor<'t, 'a> {
    term: &'t Term<'a>,
    /// each block's score bound (infinite for a block without a head)
    bounds: Vec<f64>,
    /// the largest of them
    max: f64,
    /// the current block
    bi: usize,
    /// its postings, once decoded (`loaded` says which block they are)
    postings: Vec<Posting<'a>>,
    loaded: Option<usize>,
    /// the current posting in them
    pi: usize,
}

impl<'t, 'a> Cursor<'t, 'a> {
    fn new(term: &'t Term<'a>, weight_sum: f64, stats: Bm25) -> Result<Self> {
        let mut bounds = Vec::with_capacity(term.blocks.len());
        for b in &term.blocks {
            bounds.push(match postings::block_head(b.bytes)?.0 {
                Some(h) => term.idf * weight_sum * stats.tf_part(f64::from(h.max_tf), h.min_len),
                None => f64::INFINITY,
            });
        }
        let max = bounds.iter().copied().fold(0.0, f64::max);
        Ok(Cursor { term, bounds, max, bi: 0, postings: Vec::new(), loaded: None, pi: 0 })
    }

    fn start(&self, j: usize) -> Option<Doc<'t>> {
        self.term.blocks.get(j).map(|b| (b.write, b.first.as_bytes()))
    }

    /// The current document, moving past exhausted blocks; `None` at the end.
    fn doc(&mut self) -> Result<Option<Doc<'a>>> {
        while let Some(block) = self.term.blocks.get(self.bi) {
            if self.loaded != Some(self.bi) {
                self.postings = postings::decode_block(block.bytes)?;
                self.loaded = Some(self.bi);
                self.pi = 0;
            }
            if let Some(p) = self.postings.get(self.pi) {
                return Ok(Some((block.write, p.id)));
            }
            self.bi += 1;
        }
        Ok(None)
    }

    /// The current posting (after [`Cursor::doc`] gave a document).
    fn posting(&self) -> &Posting<'a> {
        &self.postings[self.pi]
    }

    fn advance(&mut self) {
        self.pi += 1;
    }

    /// The block that would hold `target`, from the current one on: the last starting at or
    /// before it.
    fn block_of(&self, target: Doc<'_>) -> usize {
        let rest = self.term.blocks.get(self.bi + 1..).unwrap_or_default();
        self.bi + rest.partition_point(|b| (b.write, b.first.as_bytes()) <= target)
    }

    /// Moves to the first document at or after `target`, decoding only the block that can hold it.
    fn seek(&mut self, target: Doc<'_>) -> Result<Option<Doc<'a>>> {
        let j = self.block_of(target);
        if j != self.bi {
            self.bi = j;
        }
        while let Some(d) = self.doc()? {
            if d >= target {
                return Ok(Some(d));
            }
            let write = d.0;
            self.pi += self.postings[self.pi..].partition_point(|p| (write, p.id) < target);
        }
        Ok(None)
    }

    /// The bound of the block that would hold `target`, and where that block ends (the next
    /// block's start; `None`: the term's last block). Nothing is decoded.
    fn bound_at(&self, target: Doc<'_>) -> (f64, Option<Doc<'t>>) {
        if self.bi >= self.term.blocks.len() {
            return (0.0, None);
        }
        let j = self.block_of(target);
        (self.bounds[j], self.start(j + 1))
    }

    /// The posting's contribution to a document's score.
    fn contribution(&self, weights: &[f64], stats: Bm25) -> Result<f64> {
        let p = self.posting();
        let mut c = 0.0;
        p.fields(|f| {
            let w = weights.get(usize::from(f.field)).copied().unwrap_or(1.0);
            c += w * self.term.idf * stats.tf_part(f64::from(f.tf), p.len);
        })?;
        Ok(c)
    }
}

/// The earlier of two ends (`None`: no end).
fn earlier<'x>(a: Option<Doc<'x>>, b: Option<Doc<'x>>) -> Option<Doc<'x>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

/// The search (see the module doc). `include` and `exclude` are in the query's term order.
pub fn top_k<'t, 'a>(
    include: &'t [Term<'a>],
    exclude: &'t [Term<'a>],
    ask: &Ask<'_>,
    stop: &Stop,
) -> Result<Found<'a>> {
    let weight_sum: f64 = ask.weights.iter().sum::<f64>().max(1.0);
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
    if plain && include.len() == 1 {
        (counting, total) = (false, include[0].df);
    } else if plain && union && include.iter().any(|t| t.df > ask.threshold) {
        (counting, total, exact) = (false, ask.threshold, false);
    }

    let mut heap: BinaryHeap<Ranked<'a>> = BinaryHeap::with_capacity(ask.depth + 1);
    let mut theta = f64::NEG_INFINITY;
    // the cursors that propose candidates: all, or (MaxScore) those past the weak prefix
    let mut essential: Vec<usize> =
        if ask.all { by_clause.get(lead).cloned().unwrap_or_default() } else { by_max.clone() };
    let mut steps = 0u32;
    'walk: loop {
        steps = steps.wrapping_add(1);
        if steps.is_multiple_of(512) {
            stop.check()?;
        }
        // the next candidate: the least document of the proposing cursors
        let mut d: Option<Doc<'a>> = None;
        for &i in &essential {
            d = earlier(d, cur[i].doc()?);
        }
        let Some(d) = d else { break };
        if ask.all {
            // every other clause must hold it: leapfrog to the first document they all might
            for (c, members) in by_clause.iter().enumerate() {
                if c == lead {
                    continue;
                }
                let mut least: Option<Doc<'a>> = None;
                for &i in members {
                    least = earlier(least, cur[i].seek(d)?);
                }
                match least {
                    None => break 'walk,
                    Some(m) if m > d => {
                        for &i in &essential {
                            cur[i].seek(m)?;
                        }
                        continue 'walk;
                    }
                    Some(_) => {}
                }
            }
        }
        let pruning = !counting && heap.len() == ask.depth;
        if pruning {
            // block-max: the blocks that would hold `d`, in every term, bound all documents up to
            // the first of their ends
            let (mut ub, mut end) = (0.0, None);
            for c in &cur {
                let (b, e) = c.bound_at(d);
                ub += b;
                end = earlier(end, e);
            }
            if ub * (1.0 + MARGIN) < theta {
                let Some(end) = end else { break };
                for &i in &essential {
                    cur[i].seek(end)?;
                }
                continue;
            }
        }
        let matched = {
            let mut out = ask.gone.is_none_or(|gone| !gone(d.1));
            for c in excl.iter_mut() {
                if out && c.seek(d)? == Some(d) {
                    out = false;
                }
            }
            out
        };
        if matched {
            if counting {
                total += 1;
                if total > ask.threshold {
                    (counting, total, exact) = (false, ask.threshold, false);
                    if !ask.all && heap.len() == ask.depth {
                        // the count stopped: the weak terms stop proposing from here on
                        essential = proposing(&cur, &by_max, theta);
                    }
                }
            }
            // score it, unless the bounds of the blocks holding it say it cannot enter
            let full = heap.len() == ask.depth;
            let worth = !full || {
                let mut ub = 0.0;
                for c in &cur {
                    ub += c.bound_at(d).0;
                }
                ub * (1.0 + MARGIN) >= theta
            };
            if worth {
                let mut score = 0.0;
                for c in cur.iter_mut() {
                    if c.seek(d)? == Some(d) {
                        score += c.contribution(ask.weights, ask.stats)?;
                    }
                }
                ranked::offer(&mut heap, ask.depth, Ranked { score, id: d.1 });
                if heap.len() == ask.depth
                    && let Some(worst) = heap.peek()
                    && worst.score > theta
                {
                    theta = worst.score;
                    if !ask.all && !counting {
                        essential = proposing(&cur, &by_max, theta);
                    }
                }
            }
        }
        for &i in &essential {
            if cur[i].doc()? == Some(d) {
                cur[i].advance();
            }
        }
    }
    Ok(Found { hits: heap.into_sorted_vec(), total, exact })
}

/// MaxScore: the cursors that must propose candidates — all but the weakest ones whose best bounds
/// together stay below the k-th score (a document only they hold cannot enter).
fn proposing(cur: &[Cursor<'_, '_>], by_max: &[usize], theta: f64) -> Vec<usize> {
    let mut sum = 0.0;
    let mut weak = 0;
    for &i in by_max {
        if (sum + cur[i].max) * (1.0 + MARGIN) < theta {
            sum += cur[i].max;
            weak += 1;
        } else {
            break;
        }
    }
    by_max[weak..].to_vec()
}
