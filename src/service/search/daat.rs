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

use super::cursor::{Cursor, Held, Term, earlier};
use super::ranked::{self, Ranked};
use super::score::Bm25;
use crate::service::Result;
use crate::service::core::cancel::Stop;
use std::collections::BinaryHeap;

/// Relative raise of bounds that may round below a score they bound (see the module doc).
const SLACK: f64 = 1e-12;

/// Says whether a document (by number) is one the search must pass over.
pub type Gone<'g> = dyn Fn(u64) -> bool + 'g;

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
    if ask.all && exclude.is_empty() && cur.len() > 1 && by_clause.iter().all(|c| c.len() == 1) {
        return conjunction(&mut cur, by_clause[lead][0], ask, slack, stop);
    }
    let mut tally =
        Tally { heap: BinaryHeap::with_capacity(ask.depth + 1), theta: f64::NEG_INFINITY, total, counting, exact };
    if union && exclude.is_empty() && counting && cur.len() <= MERGED_UNION {
        counted_union(&mut cur, ask, slack, stop, &mut tally)?;
    }
    let Tally { mut heap, mut theta, mut total, mut counting, mut exact } = tally;
    // the cursors that propose candidates — in `all` mode the lead clause's, in `any` mode all
    // until MaxScore drops the weakest (at once if the count passed the threshold above) — in a
    // queue by their current document; the rest are looked up for the documents proposed
    let proposers: Vec<usize> = if ask.all {
        by_clause.get(lead).cloned().unwrap_or_default()
    } else if !counting && heap.len() == ask.depth {
        proposing(&cur, &by_max, theta, slack)
    } else {
        by_max.clone()
    };
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

/// Most terms a union merges by scanning their current documents (see [`counted_union`]).
const MERGED_UNION: usize = 4;

/// Where a walk stands: the page so far, its last score once full, and the count.
struct Tally {
    heap: BinaryHeap<Ranked>,
    theta: f64,
    total: u64,
    counting: bool,
    exact: bool,
}

/// The counting part of a union of a few terms with nothing excluded: until the count passes
/// the threshold every match is visited anyway, so the terms merge directly — the least of their
/// current documents found by a scan, no queue — and a match is scored when the bounds of the
/// blocks of the terms holding it could put it in the page (no other term holds it: every other
/// one is past it). Returns at the end of the postings, or right after the match that passed the
/// threshold, where [`top_k`]'s walk goes on with the cursors as they stand.
fn counted_union(cur: &mut [Cursor<'_, '_>], ask: &Ask<'_>, slack: f64, stop: &Stop, t: &mut Tally) -> Result<()> {
    let mut steps = 0u32;
    while t.counting {
        steps = steps.wrapping_add(1);
        if steps.is_multiple_of(512) {
            stop.check()?;
        }
        // the least current document, and which terms are at it (a bit each)
        let (mut d, mut at) = (u64::MAX, 0u32);
        for (i, c) in cur.iter().enumerate() {
            match c.doc() {
                Some(x) if x < d => (d, at) = (x, 1 << i),
                Some(x) if x == d => at |= 1 << i,
                _ => {}
            }
        }
        if at == 0 {
            break;
        }
        let holds = |i: usize| at & (1 << i) != 0;
        if ask.gone.is_none_or(|gone| !gone(d)) {
            t.total += 1;
            if t.total > ask.threshold {
                (t.counting, t.total, t.exact) = (false, ask.threshold, false);
            }
            let worth = t.heap.len() < ask.depth || {
                let ub: f64 = cur.iter().enumerate().filter(|&(i, _)| holds(i)).map(|(_, c)| c.bounds[c.bi]).sum();
                ub * slack > t.theta
            };
            if worth {
                // summed in the query's term order, as the exhaustive search sums
                let mut score = 0.0;
                for (_, c) in cur.iter_mut().enumerate().filter(|&(i, _)| holds(i)) {
                    score += c.contribution(ask.weights, ask.stats)?;
                }
                ranked::offer(&mut t.heap, ask.depth, Ranked { score, num: d });
                if t.heap.len() == ask.depth
                    && let Some(worst) = t.heap.peek()
                {
                    t.theta = t.theta.max(worst.score);
                }
            }
        }
        for (_, c) in cur.iter_mut().enumerate().filter(|&(i, _)| holds(i)) {
            c.advance()?;
        }
    }
    Ok(())
}

/// `all` mode where every clause is one term and nothing is excluded: the walk of [`top_k`]
/// without its queue. The lead (the rarest term) proposes; the others, rarest first, seek to
/// its document, and the first to land past it sends the lead there. The count, the block-max
/// skip and the scoring are [`top_k`]'s (every cursor is at the document it scores).
fn conjunction(cur: &mut [Cursor<'_, '_>], lead: usize, ask: &Ask<'_>, slack: f64, stop: &Stop) -> Result<Found> {
    let mut others: Vec<usize> = (0..cur.len()).filter(|&i| i != lead).collect();
    others.sort_by_key(|&i| cur[i].term.df);
    let (mut counting, mut total, mut exact) = (true, 0u64, true);
    let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(ask.depth + 1);
    let mut theta = f64::NEG_INFINITY;
    let mut steps = 0u32;
    'walk: loop {
        steps = steps.wrapping_add(1);
        if steps.is_multiple_of(512) {
            stop.check()?;
        }
        let Some(d) = cur[lead].doc() else { break };
        for &i in &others {
            match cur[i].seek(d)? {
                None => break 'walk,
                Some(m) if m > d => {
                    cur[lead].seek(m)?;
                    continue 'walk;
                }
                Some(_) => {}
            }
        }
        if !counting && heap.len() == ask.depth {
            // block-max: the blocks holding `d` bound every document up to the first of their ends
            let (mut ub, mut end) = (0.0, None);
            for c in cur.iter() {
                ub += c.bounds[c.bi];
                end = earlier(end, c.start(c.bi + 1));
            }
            if ub * slack <= theta {
                let Some(end) = end else { break };
                cur[lead].seek(end)?;
                continue;
            }
        }
        if ask.gone.is_none_or(|gone| !gone(d)) {
            if counting {
                total += 1;
                if total > ask.threshold {
                    (counting, total, exact) = (false, ask.threshold, false);
                }
            }
            let worth = heap.len() < ask.depth || cur.iter().map(|c| c.bounds[c.bi]).sum::<f64>() * slack > theta;
            if worth {
                // summed in the query's term order, as the exhaustive search sums
                let mut score = 0.0;
                for c in cur.iter_mut() {
                    score += c.contribution(ask.weights, ask.stats)?;
                }
                ranked::offer(&mut heap, ask.depth, Ranked { score, num: d });
                if heap.len() == ask.depth
                    && let Some(worst) = heap.peek()
                {
                    theta = theta.max(worst.score);
                }
            }
        }
        cur[lead].advance()?;
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
struct Queue(Vec<(u64, usize)>, Vec<usize>);

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
        // (the second vector is this one's scratch: no allocation a seek)
        let mut queued = std::mem::take(&mut self.1);
        queued.clear();
        queued.extend(self.0.drain(..).map(|e| e.1));
        for &i in &queued {
            cur[i].seek(target)?;
            self.push(cur, i);
        }
        self.1 = queued;
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
