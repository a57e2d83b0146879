//! Inserts planned before their write, on every core for the bulk paths.
//!
//! Planning an insert — the neighbour search, nearly all of its cost — needs only the graph's
//! read lock (see `hnsw`), so the bulk paths (an import's chunk, a backfill's or rebuild's chunk)
//! plan all of theirs at once on scoped threads, one per core, and the committer only applies
//! the plans. Each thread takes [`PLANS_PER_HOLD`] inserts per hold of the read lock, so a write
//! waiting for the graph (and the searches queued behind it) waits for a few plans at most. A
//! batch is planned on one state of the graph: its inserts do not see each other, which the
//! graph tolerates for batches up to [`hnsw::plan_slack`] (2% of the graph); the inserts past that
//! are searched again on the committer, so a bulk path asks for chunks of about that size
//! ([`bulk_chunk`]).

use super::Vectors;
use super::hnsw::{self, Graph, InsertPlan};
use super::{PreparedVector, doc_vector, params_of};
use crate::catalog::{IndexDef, IndexKind, TableDef};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};

/// Inserts one thread plans per hold of the graph's read lock.
const PLANS_PER_HOLD: usize = 8;
/// Inserts per thread below which fewer threads are used.
const PER_THREAD_MIN: usize = 16;

/// The plans of inserting each `(id, vector)` into `graph` (`None` where the insert must run in
/// full on the committer: an empty graph, or a planning thread that failed), on every core.
pub(crate) fn plan_many(graph: &RwLock<Graph>, items: &[(&str, &[f32])]) -> Vec<Option<InsertPlan>> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = cores.min(items.len() / PER_THREAD_MIN).max(1);
    let next = AtomicUsize::new(0);
    let work = || {
        let mut out = Vec::new();
        loop {
            let from = next.fetch_add(PLANS_PER_HOLD, Ordering::Relaxed);
            let Some(part) = items.get(from..(from + PLANS_PER_HOLD).min(items.len())) else { return out };
            if part.is_empty() {
                return out;
            }
            let g = graph.read().unwrap_or_else(PoisonError::into_inner);
            out.extend(part.iter().enumerate().map(|(i, (id, v))| (from + i, g.plan(id, v))));
        }
    };
    let done = if threads == 1 {
        work()
    } else {
        std::thread::scope(|s| {
            let others: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
            let mut done = work();
            for t in others {
                // a thread that panicked leaves its inserts unplanned: the committer runs them
                done.extend(t.join().unwrap_or_default());
            }
            done
        })
    };
    let mut plans: Vec<Option<InsertPlan>> = (0..items.len()).map(|_| None).collect();
    for (i, plan) in done {
        if let Some(slot) = plans.get_mut(i) {
            *slot = plan;
        }
    }
    plans
}

/// How many documents a bulk path should take per write into a vector index whose graph has
/// `len` nodes: as many as can be planned together, at most `cap`.
pub(crate) fn bulk_chunk(len: usize, cap: usize) -> usize {
    hnsw::plan_slack(len).min(cap).max(1)
}

impl Vectors {
    /// Plans the inserts of prepared documents `(id, blob)` of a table into its vector indexes,
    /// on the cached graphs as they are now (the committer validates and applies them: see
    /// `hnsw`), in parallel when there are many. Nothing is planned for a vector the write will
    /// refuse. One list per document.
    pub(crate) fn plan_vectors(&self, table: &TableDef, docs: &[(&str, &[u8])]) -> Vec<Vec<PreparedVector>> {
        let mut out: Vec<Vec<PreparedVector>> = docs.iter().map(|_| Vec::new()).collect();
        let defs = self.core.catalog.indexes(&table.name);
        let dict = self.core.catalog.dict();
        for def in defs.iter().filter(|d| d.kind == IndexKind::Vector && d.is_maintained()) {
            let Ok(p) = params_of(def) else { continue };
            let vectors: Vec<(usize, Vec<f32>)> = docs
                .iter()
                .enumerate()
                .filter_map(|(i, (_, blob))| Some((i, doc_vector(def, &p, blob, &dict).ok().flatten()?)))
                .collect();
            let items: Vec<(&str, &[f32])> = vectors.iter().map(|(i, v)| (docs[*i].0, v.as_slice())).collect();
            let plans = self.plan_inserts(def, &items);
            for ((i, vector), plan) in vectors.into_iter().zip(plans) {
                if let (Some(plan), Some(list)) = (plan, out.get_mut(i)) {
                    list.push(PreparedVector { index: def.name.clone(), created_at: def.created_at, vector, plan });
                }
            }
        }
        out
    }

    /// Plans inserts into one vector index's cached graph (none planned when it has no graph).
    pub(crate) fn plan_inserts(&self, def: &IndexDef, items: &[(&str, &[f32])]) -> Vec<Option<InsertPlan>> {
        let view = || self.core.store.committed();
        match self.graphs.get(&view, &self.core.catalog, &def.table, &def.name) {
            Ok(Some(cached)) if cached.created_at == def.created_at => plan_many(&cached.graph, items),
            _ => items.iter().map(|_| None).collect(),
        }
    }

    /// The nodes of a vector index's cached graph (0 when it has none).
    pub(crate) fn vector_nodes(&self, def: &IndexDef) -> usize {
        let view = || self.core.store.committed();
        match self.graphs.get(&view, &self.core.catalog, &def.table, &def.name) {
            Ok(Some(cached)) => cached.graph.read().unwrap_or_else(PoisonError::into_inner).len(),
            _ => 0,
        }
    }
}
