//! The in-memory HNSW graph (Malkov & Yashunin) of one vector index: the cache of its `vec:` keys.
//!
//! Written here rather than taken from a crate: `hnsw_rs` cannot delete a point, and
//! `instant-distance` builds an immutable index; this index must take deletes and replaces in
//! every write and repair its links so recall holds under churn, and its state must be exactly
//! what the keys say, so the graph is ours (about 400 lines).
//!
//! - Vectors live in one contiguous arena indexed by a dense slot number, as `f32` or quantized
//!   to int8 ([`arena`]); slots freed by deletes are reused. Doc ids map to slots and back.
//! - A node's level is drawn from a hash of its id (so a rebuild gives the same levels).
//! - Links are directed; `rev` mirrors them (built at the first delete, so opening and bulk
//!   building do not pay for it) so a delete finds every node that points to the
//!   deleted one and repairs its list with candidates from both neighbourhoods (the heuristic,
//!   then the closest of the rest up to the layer's cap), in the same write.
//! - A filtered search walks the graph through every node but keeps only accepted nodes among
//!   the results, as hnswlib's filter does: it returns k accepted nodes whenever k are
//!   reachable.
//! - Every change records which ids' keys must be rewritten ([`Changes`]).
//! - An insert's neighbour search can run outside the writer ([`Graph::plan`], under the read
//!   lock): the plan records the stamp of every node whose links it would change. Applying it
//!   ([`Graph::apply_plan`], on the committer) takes each planned list whose node is unchanged
//!   since, and re-prunes only the lists that changed in between (a cheap local step), so the
//!   expensive search never runs on the committer unless the plan is missing.

use arena::Arena;
use links::Links;
pub use load::Loader;
pub use metric::Metric;
use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;

/// A graph's fixed parameters.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// vector length
    pub dim: usize,
    /// distance
    pub metric: Metric,
    /// links per node above layer 0 (2m at layer 0)
    pub m: usize,
    /// candidate list length while inserting
    pub ef_construction: usize,
    /// vectors kept as int8 codes in memory (see [`arena`])
    pub quantized: bool,
}

/// Highest layer a node may have.
const MAX_LEVEL: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Cand {
    d: f32,
    s: u32,
}

impl Eq for Cand {}

impl PartialOrd for Cand {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cand {
    fn cmp(&self, other: &Self) -> Ordering {
        self.d.total_cmp(&other.d).then(self.s.cmp(&other.s))
    }
}

/// The slots whose keys a change touched.
#[derive(Debug, Default)]
pub struct Changes {
    /// slots taken or freed (their node key is written or deleted)
    pub nodes: BTreeSet<u32>,
    /// slots whose links changed
    pub links: BTreeSet<u32>,
    /// of a quantized graph (which does not keep the floats): the vector of each slot in `nodes`
    /// that took one, for its node key
    pub vectors: HashMap<u32, Vec<f32>>,
}

/// Stands for the node being planned in a plan's lists.
const NEW: u32 = u32::MAX;

/// An insert computed outside the writer (see the module doc).
#[derive(Debug, Clone)]
pub struct InsertPlan {
    level: usize,
    /// the epoch of the graph it was planned on (its slot numbers mean nothing in another)
    epoch: u64,
    /// the graph's insert count when planned
    inserted: u64,
    /// its live nodes when planned
    len: u64,
    /// per layer: the new node's chosen neighbours, with their ids
    links: Vec<Vec<(u32, Arc<str>)>>,
    /// `(node, layer, its stamp when planned, its new list with NEW for the new node)`
    updates: Vec<(u32, usize, u64, Vec<u32>)>,
}

/// One index's graph.
pub struct Graph {
    p: Params,
    arena: Arena,
    ids: Vec<Option<Arc<str>>>,
    links: Links,
    /// per slot and layer: the slots linking to it
    rev: Option<Vec<Vec<Vec<u32>>>>,
    by_id: HashMap<Arc<str>, u32, foldhash::fast::RandomState>,
    free: Vec<u32>,
    entry: Option<u32>,
    /// per slot: bumped whenever its links change or the slot is freed or reused
    stamps: Vec<u64>,
    /// nodes inserted so far (a plan made before more than [`PLAN_SLACK`] others is not used)
    inserted: u64,
    /// unique to this graph (every construction or load takes the next): a plan made on another
    /// graph — one replaced by a rebuild, or reloaded — is not applied to this one
    epoch: u64,
}

/// The next graph epoch.
static EPOCHS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// How many inserts may come between a plan and its use: a plan does not know the nodes
/// inserted after it was made (it cannot link to them directly), so beyond this the insert is
/// searched again on the writer — as in a bulk import into a small graph. The slack is this, or
/// a [`PLAN_FRACTION`]th of the graph the plan was made on if that is more: inserts planned
/// together in batches of at most 2% of the graph build a graph of the same recall (the batch
/// insertion of ParlayANN's HNSW; measured in `benches/peers`).
pub const PLAN_SLACK: u64 = 64;

/// See [`PLAN_SLACK`].
pub const PLAN_FRACTION: u64 = 50;

/// The inserts that may come between a plan made on a graph of `len` nodes and its use.
pub fn plan_slack(len: usize) -> usize {
    PLAN_SLACK.max(len as u64 / PLAN_FRACTION) as usize
}

/// A bitset of visited slots.
struct Visited(Vec<u64>);

impl Visited {
    fn new(n: usize) -> Self {
        Visited(vec![0; n.div_ceil(64)])
    }
    /// Marks `s`; true if it was not marked before.
    fn insert(&mut self, s: u32) -> bool {
        let (w, b) = (s as usize / 64, s % 64);
        match self.0.get_mut(w) {
            Some(word) if *word & (1 << b) == 0 => {
                *word |= 1 << b;
                true
            }
            _ => false,
        }
    }
}

impl Graph {
    /// An empty graph.
    pub fn new(p: Params) -> Graph {
        Graph {
            p,
            arena: Arena::new(p.quantized),
            ids: Vec::new(),
            links: Links::new(p.m * 2),
            rev: None,
            by_id: HashMap::default(),
            free: Vec::new(),
            entry: None,
            stamps: Vec::new(),
            inserted: 0,
            epoch: EPOCHS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The parameters.
    pub fn params(&self) -> Params {
        self.p
    }

    /// Live nodes.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True without nodes.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Bytes held by the arena and the link lists (approximate).
    pub fn memory_bytes(&self) -> usize {
        let rev: usize = self.rev.iter().flatten().flatten().map(|l| l.capacity() * 4 + 24).sum();
        self.arena.memory_bytes() + self.links.memory_bytes() + rev + self.by_id.len() * 48
    }

    /// The floats of a slot, which a quantized graph does not keep (`None`).
    pub fn vector(&self, s: u32) -> Option<&[f32]> {
        self.arena.float(s, self.p.dim)
    }

    /// The ranking distance of a query to a slot.
    #[inline]
    fn dist_q(&self, q: &[f32], s: u32) -> f32 {
        self.arena.dist_q(self.p.metric, q, s, self.p.dim)
    }

    /// The id of a live slot.
    pub fn id(&self, s: u32) -> Option<&Arc<str>> {
        self.ids.get(s as usize).and_then(Option::as_ref)
    }

    /// The slot of an id.
    pub fn slot(&self, id: &str) -> Option<u32> {
        self.by_id.get(id).copied()
    }

    /// The links of an id, per layer, as ids.
    pub fn links_of(&self, id: &str) -> Option<Vec<Vec<Arc<str>>>> {
        let s = self.slot(id)?;
        let layer = |l| self.links.get(s, l).iter().filter_map(|&n| self.id(n).cloned()).collect();
        Some((0..=self.level(s)).map(layer).collect())
    }

    /// A slot's links at a layer, as slots.
    pub fn links_at(&self, s: u32, layer: usize) -> &[u32] {
        self.links.get(s, layer)
    }

    /// Slots (live and free): one more than the highest slot in use.
    pub fn slots(&self) -> usize {
        self.ids.len()
    }

    /// Every live id.
    pub fn ids(&self) -> impl Iterator<Item = &Arc<str>> {
        self.by_id.keys()
    }

    #[inline]
    fn dist(&self, a: u32, b: u32) -> f32 {
        self.arena.dist(self.p.metric, a, b, self.p.dim)
    }

    /// True when `id` is a node holding `v` already. For a quantized graph (the same codes, but
    /// perhaps other floats) the node key is still rewritten with `v`.
    fn holds(&self, id: &str, v: &[f32], changes: &mut Changes) -> bool {
        let Some(s) = self.slot(id).filter(|s| self.arena.holds(*s, v, self.p.dim)) else { return false };
        if self.p.quantized {
            changes.nodes.insert(s);
            changes.vectors.insert(s, v.to_vec());
        }
        true
    }

    fn max_links(&self, layer: usize) -> usize {
        if layer == 0 { self.p.m * 2 } else { self.p.m }
    }

    /// A slot's level (0 for a free slot).
    pub fn level(&self, s: u32) -> usize {
        self.links.level(s)
    }

    /// The level of a node with this id: geometric with ratio 1/m, from a hash of the id.
    pub fn level_for(&self, id: &str) -> usize {
        let h = xxhash_rust::xxh3::xxh3_64(id.as_bytes());
        let u = ((h >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let ml = 1.0 / (self.p.m.max(2) as f64).ln();
        ((-u.ln() * ml) as usize).min(MAX_LEVEL)
    }

    /// A slot for a new node (recorded in `changes`).
    fn alloc(&mut self, id: Arc<str>, v: &[f32], level: usize, changes: &mut Changes) -> u32 {
        self.inserted += 1;
        let s = match self.free.pop() {
            Some(s) => {
                self.arena.set(s, v, self.p.dim);
                self.ids[s as usize] = Some(id.clone());
                self.by_id.insert(id, s);
                self.links.reset(s, level);
                if let Some(r) = self.rev.as_mut().and_then(|r| r.get_mut(s as usize)) {
                    *r = vec![Vec::new(); level + 1];
                }
                self.stamps[s as usize] += 1;
                s
            }
            None => {
                self.arena.push(v, self.p.dim);
                self.push_slot(id, level)
            }
        };
        changes.nodes.insert(s);
        changes.links.insert(s);
        if self.p.quantized {
            changes.vectors.insert(s, v.to_vec());
        }
        s
    }

    /// A new slot at the end for `id`, whose vector was just appended to the arena.
    fn push_slot(&mut self, id: Arc<str>, level: usize) -> u32 {
        self.ids.push(Some(id.clone()));
        self.links.push(level);
        if let Some(r) = self.rev.as_mut() {
            r.push(vec![Vec::new(); level + 1]);
        }
        self.stamps.push(0);
        let s = (self.ids.len() - 1) as u32;
        self.by_id.insert(id, s);
        s
    }

    /// Replaces `a`'s links at `layer`, keeping `rev` in step.
    fn set_links(&mut self, a: u32, layer: usize, new: Vec<u32>) {
        self.stamps[a as usize] += 1;
        let Some(rev) = self.rev.as_mut() else {
            self.links.set(a, layer, &new);
            return;
        };
        // the links dropped and added, found by merging sorted copies (a list holds at most 2m)
        let mut old = self.links.get(a, layer).to_vec();
        self.links.set(a, layer, &new);
        let mut new = new;
        old.sort_unstable();
        new.sort_unstable();
        let (mut i, mut j) = (0, 0);
        loop {
            let (dropped, added) = match (old.get(i), new.get(j)) {
                (None, None) => break,
                (Some(x), Some(y)) if x == y => {
                    (i, j) = (i + 1, j + 1);
                    continue;
                }
                (Some(&x), Some(y)) if x < *y => (Some(x), None),
                (Some(&x), None) => (Some(x), None),
                (_, Some(&y)) => (None, Some(y)),
            };
            if let Some(b) = dropped {
                i += 1;
                if let Some(r) = rev.get_mut(b as usize).and_then(|r| r.get_mut(layer)) {
                    r.retain(|x| *x != a);
                }
            }
            if let Some(b) = added {
                j += 1;
                if let Some(r) = rev.get_mut(b as usize).and_then(|r| r.get_mut(layer)) {
                    r.push(a);
                }
            }
        }
    }

    /// Adds (or replaces) the node `id` with vector `v` (normalised already for cosine).
    pub fn insert(&mut self, id: &str, v: &[f32], changes: &mut Changes) {
        if self.holds(id, v, changes) {
            return;
        }
        self.remove(id, changes);
        let id: Arc<str> = Arc::from(id);
        let level = self.level_for(&id);
        let slot = self.alloc(id.clone(), v, level, changes);
        let Some(ep) = self.entry.filter(|e| *e != slot) else {
            self.entry = Some(slot);
            return;
        };
        let top = self.level(ep);
        let mut cur = ep;
        for layer in (level + 1..=top).rev() {
            cur = self.greedy(v, cur, layer);
        }
        let mut eps = vec![cur];
        for layer in (0..=level.min(top)).rev() {
            let w = self.search_layer(v, &eps, self.p.ef_construction, layer, None);
            let chosen = self.select(&w, self.p.m, false);
            self.set_links(slot, layer, chosen.clone());
            for n in chosen {
                let list = self.linked_back(n, layer, slot);
                self.set_links(n, layer, list);
                changes.links.insert(n);
            }
            eps = w.iter().map(|c| c.s).collect();
        }
        if level > top {
            self.entry = Some(slot);
        }
    }

    /// Node `n`'s links at `layer` with `slot` added: over the layer's cap, re-pruned by the
    /// heuristic over the node's own distances (an insert's back-links; a planned one whose
    /// neighbour changed since the plan).
    fn linked_back(&self, n: u32, layer: usize, slot: u32) -> Vec<u32> {
        let mut list = self.links.get(n, layer).to_vec();
        list.push(slot);
        if list.len() > self.max_links(layer) {
            let mut c: Vec<Cand> = list.iter().map(|&x| Cand { d: self.dist(n, x), s: x }).collect();
            c.sort();
            list = self.select(&c, self.max_links(layer), false);
        }
        list
    }

    /// The heuristic of the HNSW paper: a candidate (closest first) is kept when it is closer to
    /// the base than to every kept one; `fill` then tops up with the closest of the rest.
    fn select(&self, cands: &[Cand], m: usize, fill: bool) -> Vec<u32> {
        self.select_by(cands, m, fill, &|a, b| self.dist(a, b))
    }

    fn select_by(&self, cands: &[Cand], m: usize, fill: bool, dist: &dyn Fn(u32, u32) -> f32) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::with_capacity(m);
        let mut rest = Vec::new();
        for c in cands {
            if out.len() >= m {
                break;
            }
            if out.iter().all(|&o| dist(c.s, o) > c.d) {
                out.push(c.s);
            } else {
                rest.push(c.s);
            }
        }
        if fill {
            out.extend(rest.into_iter().take(m.saturating_sub(out.len())));
        }
        out
    }

    fn greedy(&self, q: &[f32], mut cur: u32, layer: usize) -> u32 {
        let mut best = self.dist_q(q, cur);
        loop {
            let mut moved = false;
            // a slot out of range (it cannot happen: plans are checked against the epoch) has no links
            for &n in self.links.get(cur, layer) {
                let d = self.dist_q(q, n);
                if d < best {
                    (best, cur, moved) = (d, n, true);
                }
            }
            if !moved {
                return cur;
            }
        }
    }

    /// The `ef` nearest nodes to `q` at `layer` reachable from `eps`, closest first; with
    /// `accept`, only accepted nodes are kept (every node is still walked through).
    fn search_layer(
        &self,
        q: &[f32],
        eps: &[u32],
        ef: usize,
        layer: usize,
        mut accept: Option<&mut dyn FnMut(u32) -> bool>,
    ) -> Vec<Cand> {
        let mut visited = Visited::new(self.ids.len());
        let mut frontier: BinaryHeap<std::cmp::Reverse<Cand>> = BinaryHeap::new();
        let mut best: BinaryHeap<Cand> = BinaryHeap::new();
        for &e in eps {
            if !visited.insert(e) {
                continue;
            }
            let c = Cand { d: self.dist_q(q, e), s: e };
            frontier.push(std::cmp::Reverse(c));
            if accept.as_mut().is_none_or(|a| a(e)) {
                best.push(c);
            }
        }
        while best.len() > ef {
            best.pop();
        }
        // a node's unvisited neighbours and their distances, computed before any of them is
        // ranked: the vector loads are independent, so their cache misses overlap
        let (mut next, mut dists) = (Vec::new(), Vec::new());
        while let Some(std::cmp::Reverse(c)) = frontier.pop() {
            if best.len() >= ef && best.peek().is_some_and(|w| c.d > w.d) {
                break;
            }
            next.clear();
            next.extend(self.links.get(c.s, layer).iter().copied().filter(|&n| visited.insert(n)));
            dists.clear();
            dists.extend(next.iter().map(|&n| self.dist_q(q, n)));
            for (&n, &d) in next.iter().zip(&dists) {
                if best.len() < ef || best.peek().is_some_and(|w| d < w.d) {
                    let cand = Cand { d, s: n };
                    frontier.push(std::cmp::Reverse(cand));
                    if accept.as_mut().is_none_or(|a| a(n)) {
                        best.push(cand);
                        if best.len() > ef {
                            best.pop();
                        }
                    }
                }
            }
        }
        best.into_sorted_vec()
    }

    /// The `k` nearest accepted nodes to `q` (closest first), searching with list length `ef`.
    pub fn search(&self, q: &[f32], k: usize, ef: usize, accept: &mut dyn FnMut(u32) -> bool) -> Vec<(u32, f32)> {
        let Some(ep) = self.entry else { return Vec::new() };
        let mut cur = ep;
        for layer in (1..=self.level(ep)).rev() {
            cur = self.greedy(q, cur, layer);
        }
        let found = self.search_layer(q, &[cur], ef.max(k), 0, Some(accept));
        found.into_iter().take(k).map(|c| (c.s, c.d)).collect()
    }

    /// The `k` nearest accepted nodes among `slots` (all live nodes when `None`), by brute force
    /// over the arena (a quantized graph's distances are approximate): distances first, then
    /// `accept` in distance order until `k` are accepted.
    pub fn exact(
        &self,
        q: &[f32],
        k: usize,
        slots: Option<&[u32]>,
        accept: &mut dyn FnMut(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let mut all: Vec<Cand> = match slots {
            Some(s) => s.iter().map(|&s| Cand { d: self.dist_q(q, s), s }).collect(),
            None => self.by_id.values().map(|&s| Cand { d: self.dist_q(q, s), s }).collect(),
        };
        all.sort_unstable();
        let mut out = Vec::with_capacity(k);
        for c in all {
            if out.len() >= k {
                break;
            }
            if accept(c.s) {
                out.push((c.s, c.d));
            }
        }
        out
    }
}

mod arena;
mod links;
mod load;
mod metric;
mod plan;
mod remove;
#[cfg(test)]
mod tests;
