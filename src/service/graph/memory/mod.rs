//! The graph's adjacency in memory: per edge table and direction, each vertex's entries (the
//! vertex at the other end, the edge, its declared weight), numbered so that a walk reads arrays
//! instead of an LSM prefix scan per vertex. The `graph:` keys stay the only truth: this is
//! loaded from them when the server opens (`load`) and changed by every commit that changes them
//! (a hook runs each write's [`EdgeOp`] log on the committer, after the commit).
//!
//! **Consistency.** A walk never sees half a write: the committer freezes the adjacency at the
//! end of each group (`GraphMemory::capture`, a few `Arc` clones — [`Lists`] is persistent) and
//! the storage publishes it *with* the snapshot of that group's keys, so the view a request
//! reads carries the adjacency of exactly its keys (`ReadView::derived`). Sync mode shows both
//! once the group is durable.
//!
//! **Bounded.** The estimated bytes are counted as it changes; past the cap
//! (`--graph-memory-limit`) it is switched off — views carry none, and walks fall back to key
//! scans — until the next start. Edge numbers of deleted edges (and vertex numbers of vertices
//! left without edges) are garbage until a compaction renumbers what is live, once the garbage
//! outweighs it.

mod lists;
pub(crate) mod load;
mod names;
pub(crate) mod oplog;

pub(crate) use lists::Entry;
use lists::Lists;
pub(crate) use names::Names;
pub(crate) use oplog::EdgeOp;

use crate::keys::Direction;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};

/// What an entry, a list and a vertex slot cost in memory.
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();
const LIST_BYTES: usize = 16 + 16;
const SLOT_BYTES: usize = 16;
/// Garbage tolerated before a compaction, beside as much as is live.
const GARBAGE_SLACK: usize = 1 << 16;

/// One edge table's adjacency: out lists by `_from`, in lists by `_to`.
#[derive(Clone)]
pub(crate) struct TableAdj {
    pub created_at: i64,
    lists: [Lists; 2],
    edges: usize,
}

impl TableAdj {
    fn new(created_at: i64) -> Self {
        TableAdj { created_at, lists: Default::default(), edges: 0 }
    }

    /// The entries at vertex `v` in direction `dir`, ordered by edge name.
    pub fn at(&self, dir: Direction, v: u32) -> &[Entry] {
        self.lists[dir as usize].at(v)
    }

    /// Every vertex with entries in `dir`, with them.
    pub fn all(&self, dir: Direction) -> impl Iterator<Item = (u32, &[Entry])> {
        self.lists[dir as usize].iter()
    }
}

/// What a write does to one list: the edge numbers it removes and the entries it adds.
type Pending = (HashSet<u32, foldhash::fast::RandomState>, Vec<Entry>);

/// One version of the adjacency of every edge table, as of the keys of the view that carries it.
#[derive(Clone)]
pub(crate) struct Adjacency {
    names: Arc<RwLock<Names>>,
    tables: HashMap<String, Arc<TableAdj>>,
    /// live edges, every table
    edges: usize,
    /// edge numbers whose edge went
    dead_edges: usize,
}

/// The figures of the in-memory adjacency, for `/v1/info` and `/metrics`.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
pub struct GraphMemoryStats {
    /// `loading`, `on`, or `off` (over its limit, or failed: walks read the keys)
    pub state: &'static str,
    /// edges held
    pub edges: u64,
    /// vertex numbers held (vertices with edges, and garbage until the next compaction)
    pub vertices: u64,
    /// bytes held, estimated
    pub bytes: u64,
    /// the limit, bytes
    pub limit_bytes: u64,
    /// bytes per edge, estimated (0 without edges)
    pub bytes_per_edge: f64,
    /// how long the load at open took, seconds
    pub load_seconds: f64,
}

impl Adjacency {
    fn empty() -> Self {
        Adjacency { names: Default::default(), tables: HashMap::new(), edges: 0, dead_edges: 0 }
    }

    /// The adjacency of edge table `name` of that `created_at`, if this version has it (an edge
    /// table without any edge may have none: it has no entries).
    pub fn table(&self, name: &str, created_at: i64) -> Option<&TableAdj> {
        self.tables.get(name).map(|t| &**t).filter(|t| t.created_at == created_at)
    }

    /// The names, for a reader to turn numbers into names (hold the guard briefly: the committer
    /// waits for it to add names).
    pub fn names(&self) -> RwLockReadGuard<'_, Names> {
        self.names.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every table's name and adjacency.
    pub fn tables(&self) -> impl Iterator<Item = (&str, &TableAdj)> {
        self.tables.iter().map(|(n, t)| (n.as_str(), &**t))
    }

    /// The bytes held, estimated.
    pub fn bytes(&self) -> usize {
        let lists: usize = self.tables.values().flat_map(|t| &t.lists).map(|l| l.slots() * SLOT_BYTES).sum();
        self.names().bytes() + lists + self.edges * 2 * (ENTRY_BYTES + LIST_BYTES)
    }

    /// Applies one write's edge changes, in order.
    fn apply(&mut self, ops: &[EdgeOp]) -> Result<(), String> {
        let names = self.names.clone();
        let mut names = names.write().unwrap_or_else(PoisonError::into_inner);
        // the tables the ops touch, numbered in the order met
        let mut tables: Vec<&str> = Vec::new();
        // per touched list (table, direction, vertex): the edge numbers removed and the entries
        // added (a replaced edge gets a new number, so a removal never hides a later insert)
        let mut touched: HashMap<(u32, u8, u32), Pending, foldhash::fast::RandomState> = HashMap::default();
        // edges added by these ops (their numbers, by the hash of their name): an op that
        // removes one of them finds it here, not in the lists
        let mut fresh: HashMap<u64, Vec<u32>, foldhash::fast::RandomState> = HashMap::default();
        let hasher = foldhash::fast::FixedState::with_seed(0);
        let mut full = String::new();
        for op in ops {
            full.clear();
            full.push_str(&op.table);
            full.push('/');
            full.push_str(&op.id);
            let hash = std::hash::BuildHasher::hash_one(&hasher, full.as_str());
            let ti = match tables.iter().position(|t| *t == op.table) {
                Some(i) => i as u32,
                None => {
                    tables.push(&op.table);
                    (tables.len() - 1) as u32
                }
            };
            if self.tables.get(&op.table).is_none_or(|t| t.created_at != op.created_at) {
                // new, or dropped and made again: the old one's entries are gone with it
                if let Some(old) = self.tables.insert(op.table.clone(), Arc::new(TableAdj::new(op.created_at))) {
                    self.edges -= old.edges;
                    touched.retain(|(t, _, _), _| *t != ti);
                }
            }
            let Some(t) = self.tables.get_mut(&op.table) else { continue };
            let t = Arc::make_mut(t);
            if let Some(old) = &op.old {
                let from = names.vertex(&old.from).ok_or_else(|| format!("vertex {:?} is not known", old.from))?;
                let to = names.vertex(&old.to).ok_or_else(|| format!("vertex {:?} is not known", old.to))?;
                let added = fresh.get_mut(&hash).and_then(|ns| {
                    let at = ns.iter().position(|&n| names.edge_name(n) == full)?;
                    Some(ns.swap_remove(at))
                });
                let n = match added {
                    Some(n) => n,
                    None => {
                        let list = t.lists[0].at(from);
                        let at = list
                            .binary_search_by(|e| names.edge_name(e.edge).cmp(full.as_str()))
                            .map_err(|_| format!("edge {full:?} is not at its vertex {:?}", old.from))?;
                        list[at].edge
                    }
                };
                touched.entry((ti, 0, from)).or_default().0.insert(n);
                touched.entry((ti, 1, to)).or_default().0.insert(n);
                t.edges -= 1;
                self.edges -= 1;
                self.dead_edges += 1;
            }
            if let Some(new) = &op.new {
                let (from, to) = (names.intern(&new.from), names.intern(&new.to));
                let n = names.add_edge(&op.table, &op.id);
                fresh.entry(hash).or_default().push(n);
                let weight = new.weight.unwrap_or(0.0);
                touched.entry((ti, 0, from)).or_default().1.push(Entry { other: to, edge: n, weight });
                touched.entry((ti, 1, to)).or_default().1.push(Entry { other: from, edge: n, weight });
                t.edges += 1;
                self.edges += 1;
            }
        }
        for ((ti, dir, v), (removed, mut added)) in touched {
            let Some(t) = self.tables.get_mut(tables[ti as usize]) else { continue };
            let lists = &mut Arc::make_mut(t).lists[dir as usize];
            if !removed.is_empty() {
                added.retain(|e| !removed.contains(&e.edge));
            }
            added.sort_by(|a, b| names.edge_name(a.edge).cmp(names.edge_name(b.edge)));
            let old = lists.at(v);
            let mut merged = Vec::with_capacity(old.len() + added.len());
            let mut kept = old.iter().filter(|e| !removed.contains(&e.edge)).peekable();
            let mut added = added.into_iter().peekable();
            loop {
                let take_old = match (kept.peek(), added.peek()) {
                    (Some(o), Some(a)) => names.edge_name(o.edge) <= names.edge_name(a.edge),
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                merged.extend(if take_old { kept.next().copied() } else { added.next() });
            }
            lists.set(v, merged);
        }
        drop(names);
        if self.dead_edges > self.edges + GARBAGE_SLACK
            || self.names().vertices() > 2 * (2 * self.edges + GARBAGE_SLACK)
        {
            *self = self.compacted();
        }
        Ok(())
    }

    /// The same adjacency with only live names, renumbered (new names: versions already
    /// published keep theirs).
    fn compacted(&self) -> Adjacency {
        let old = self.names();
        let mut names = Names::default();
        let mut vertex = vec![u32::MAX; old.vertices()];
        let mut edge = vec![u32::MAX; old.edges()];
        let mut tables = HashMap::new();
        for (name, t) in &self.tables {
            let mut fresh = TableAdj::new(t.created_at);
            fresh.edges = t.edges;
            for dir in [Direction::Out, Direction::In] {
                for (v, list) in t.all(dir) {
                    let mut number = |v: u32, names: &mut Names| {
                        let slot = &mut vertex[v as usize];
                        if *slot == u32::MAX {
                            *slot = names.intern(old.vertex_name(v));
                        }
                        *slot
                    };
                    let at = number(v, &mut names);
                    let list = list
                        .iter()
                        .map(|e| {
                            let other = number(e.other, &mut names);
                            let slot = &mut edge[e.edge as usize];
                            if *slot == u32::MAX {
                                let (table, id) = old.edge_name(e.edge).split_once('/').unwrap_or_default();
                                *slot = names.add_edge(table, id);
                            }
                            Entry { other, edge: *slot, weight: e.weight }
                        })
                        .collect();
                    fresh.lists[dir as usize].set(at, list);
                }
            }
            tables.insert(name.clone(), Arc::new(fresh));
        }
        Adjacency { names: Arc::new(RwLock::new(names)), tables, edges: self.edges, dead_edges: 0 }
    }
}

/// Where the in-memory adjacency is.
enum State {
    /// not loaded yet: writes change only the keys (the load reads them)
    Loading,
    /// loaded and kept in step: `working` changes with each commit, `frozen` is what the last
    /// group published (None once `working` changed since)
    On { working: Adjacency, frozen: Option<Arc<Adjacency>> },
    /// switched off (over the limit, or an inconsistency met): walks read the keys
    Off { why: String },
}

/// The in-memory adjacency's owner: the committer changes it, and freezes it at each group's
/// end for the view it publishes.
pub(crate) struct GraphMemory {
    limit: usize,
    state: Mutex<State>,
    load_seconds: Mutex<f64>,
}

impl GraphMemory {
    /// An adjacency not loaded yet, held to at most `limit` bytes (0: never loaded).
    pub fn new(limit: usize) -> Self {
        let state = if limit == 0 { State::Off { why: "the limit is 0".into() } } else { State::Loading };
        GraphMemory { limit, state: Mutex::new(state), load_seconds: Mutex::new(0.0) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Installs the adjacency loaded from the keys (on the committer, so no commit falls between
    /// the load and the first change), or switches off when it is over the limit.
    pub fn loaded(&self, loaded: std::result::Result<Adjacency, String>, seconds: f64) {
        *self.load_seconds.lock().unwrap_or_else(PoisonError::into_inner) = seconds;
        let mut state = self.state();
        if !matches!(*state, State::Loading) {
            return;
        }
        *state = match loaded {
            Ok(adj) if adj.bytes() <= self.limit => State::On { working: adj, frozen: None },
            Ok(adj) => self.over(adj.bytes()),
            Err(why) => State::Off { why },
        };
    }

    fn over(&self, bytes: usize) -> State {
        let why = format!("it needs about {bytes} bytes, over its limit of {} (--graph-memory-limit)", self.limit);
        tracing::warn!("the in-memory graph adjacency is off: {why}; graph walks read the keys");
        State::Off { why }
    }

    /// Applies a committed write's edge changes (a commit hook, on the committer).
    pub fn apply(&self, ops: &[EdgeOp]) {
        let mut state = self.state();
        let State::On { working, frozen } = &mut *state else { return };
        *frozen = None;
        if let Err(why) = working.apply(ops) {
            tracing::error!("the in-memory graph adjacency is off: {why}; graph walks read the keys");
            *state = State::Off { why };
            return;
        }
        if working.edges.is_multiple_of(1024) || ops.len() > 64 {
            let bytes = working.bytes();
            if bytes > self.limit {
                *state = self.over(bytes);
            }
        }
    }

    /// The adjacency as of every commit so far, frozen (the committer's derived state at the end
    /// of a group); tables the catalog no longer has (dropped) are let go first.
    pub fn capture(&self, live: impl Fn(&str, i64) -> bool) -> Option<Arc<Adjacency>> {
        let mut state = self.state();
        let State::On { working, frozen } = &mut *state else { return None };
        if working.tables.iter().any(|(n, t)| !live(n, t.created_at)) {
            working.tables.retain(|n, t| live(n, t.created_at));
            working.edges = working.tables.values().map(|t| t.edges).sum();
            *frozen = None;
        }
        Some(frozen.get_or_insert_with(|| Arc::new(working.clone())).clone())
    }

    /// Its figures now.
    pub fn stats(&self) -> GraphMemoryStats {
        let load_seconds = *self.load_seconds.lock().unwrap_or_else(PoisonError::into_inner);
        let limit_bytes = self.limit as u64;
        match &*self.state() {
            State::Loading => GraphMemoryStats { state: "loading", limit_bytes, ..Default::default() },
            State::Off { .. } => GraphMemoryStats { state: "off", limit_bytes, load_seconds, ..Default::default() },
            State::On { working, .. } => {
                let (edges, bytes) = (working.edges as u64, working.bytes() as u64);
                GraphMemoryStats {
                    state: "on",
                    edges,
                    vertices: working.names().vertices() as u64,
                    bytes,
                    limit_bytes,
                    bytes_per_edge: if edges == 0 { 0.0 } else { bytes as f64 / edges as f64 },
                    load_seconds,
                }
            }
        }
    }

    /// Why it is off, if it is.
    pub fn off_reason(&self) -> Option<String> {
        match &*self.state() {
            State::Off { why } => Some(why.clone()),
            _ => None,
        }
    }
}

/// The finish step of a write: its logged edge changes go to a commit hook, which applies them
/// to the adjacency right after the write commits (never if it fails).
pub(crate) fn finish(tx: &mut crate::storage::WriteTx<'_>, ops: Vec<EdgeOp>, memory: &Arc<GraphMemory>) {
    if ops.is_empty() {
        return;
    }
    let memory = memory.clone();
    tx.on_commit(move || memory.apply(&ops));
}

#[cfg(test)]
mod tests;
