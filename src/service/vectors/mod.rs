//! Vector indexes: the `vector` index kind, its persisted HNSW graph (`vec:` keys, see
//! [`layout`]), the in-memory cache of each graph, and `POST /v1/tables/{table}/vector-search`.
//!
//! The write protocol (the family's steps, see `service::pipeline::write`): [`Vectors::plan_vectors`] plans a
//! new document's inserts before the committer; [`stage`] logs one [`VecOp`] per vector index
//! whose vector changed in the write's vector log (`Write::vectors`), so every write path — put,
//! patch, delete, batch, import, TTL sweep, backfill — logs it, and a failed attempt or write
//! drops its ops with the rest of what it staged. [`finish`] runs at the end of the write, on the
//! committer, after everything that can
//! refuse the write: it changes the cached graph and stages the keys of every node whose vector
//! or links changed, in that same write. So the keys commit with the document, a search started
//! after the write was acknowledged sees it, and the cache never holds a change that was refused.
//! A search that races a write may see a node whose document its snapshot does not have yet (or
//! has no longer): every hit is read from the search's snapshot, and a node without a live
//! document there is skipped.

mod bulk;
mod cache;
pub(crate) mod check;
pub mod hnsw;
mod hybrid;
pub mod kernels;
pub mod layout;
pub(crate) mod oplog;
mod params;
mod rescore;
mod search;
mod upgrade;

pub(crate) use bulk::bulk_chunk;
pub use cache::{Cached, Graphs, load};
pub use params::{DEFAULT_EF_CONSTRUCTION, DEFAULT_M, MAX_DIMENSION, params_of, parse_options};
pub use search::{VectorHit, VectorSearchRequest, VectorSearchResponse};
pub(crate) use upgrade::upgrade;

use super::core::{Core, Handle};
use super::search::Search;
use super::{Result, ServiceError};
use crate::catalog::{Catalog, IndexDef, IndexKind};
use crate::entity::{self, FieldDict, ValueRef};
use crate::service::core::change::Change;
use crate::storage::WriteTx;
use hnsw::{Changes, Metric, Params};
use oplog::VecOp;
use std::sync::{Arc, PoisonError};

/// The vectors model: the vector indexes' graphs (`vec:`), cached in memory and kept exact by
/// every write, over the shared [`Core`]; a hybrid search ranks with [`Search`] as well.
pub struct Vectors {
    core: Arc<Core>,
    /// the search model, for hybrid searches
    search: Arc<Search>,
    /// the cached graphs of the vector indexes
    pub(crate) graphs: Graphs,
}

impl Handle for Vectors {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Vectors {
    /// The model over `core`, with no graph cached yet.
    pub(crate) fn new(core: Arc<Core>, search: Arc<Search>) -> Vectors {
        Vectors { core, search, graphs: Graphs::default() }
    }
}

/// The vector a document holds for the index, ready to store (normalised for cosine); `None`
/// when the field is missing or null. A wrong length, a non-numeric or non-finite element, a
/// vector whose squared length overflows f32, or (for cosine) a zero vector or one too short to
/// normalise is refused with `invalid_vector`, naming the field.
pub fn doc_vector(def: &IndexDef, p: &Params, blob: &[u8], dict: &FieldDict) -> Result<Option<Vec<f32>>> {
    let field = def.fields.first().map(String::as_str).unwrap_or_default();
    let bad = |reason: String| Err(ServiceError::InvalidVector { field: field.to_owned(), reason });
    let steps: Vec<&str> = field.split('.').collect();
    let mut v: Vec<f32> = match entity::get_path(blob, dict, &steps)? {
        None | Some(ValueRef::Null) => return Ok(None),
        Some(ValueRef::Vector(v)) => v.iter().collect(),
        Some(ValueRef::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, x) in a.iter().enumerate() {
                out.push(match x? {
                    ValueRef::Int(n) => n as f32,
                    ValueRef::UInt(n) => n as f32,
                    ValueRef::Float(f) => f as f32,
                    _ => return bad(format!("element {i} is not a number")),
                });
            }
            out
        }
        Some(_) => return bad(format!("expected an array of {} numbers", p.dim)),
    };
    if v.len() != p.dim {
        return bad(format!("has {} elements; vector index {:?} takes {}", v.len(), def.name, p.dim));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return bad("an element is not a finite f32".into());
    }
    // distances of such a vector overflow, whatever the metric
    if !kernels::dot(&v, &v).is_finite() {
        return bad("too long: its squared length overflows f32 (scale the elements down)".into());
    }
    if p.metric == Metric::Cosine && !kernels::normalize(&mut v) {
        return bad(if v.iter().all(|x| *x == 0.0) {
            "a zero vector has no direction (metric cosine)".into()
        } else {
            "too short to normalise: its squared length underflows f32 (metric cosine)".into()
        });
    }
    Ok(Some(v))
}

/// The vector a stored document holds, never refused (a document stored before the index
/// existed is simply not indexed).
pub fn stored_vector(def: &IndexDef, p: &Params, blob: &[u8], dict: &FieldDict) -> Option<Vec<f32>> {
    doc_vector(def, p, blob, dict).ok().flatten()
}

/// A document's insert into one vector index, planned before its write (outside the committer).
pub(crate) struct PreparedVector {
    index: String,
    created_at: i64,
    vector: Vec<f32>,
    plan: hnsw::InsertPlan,
}

/// The vector step of a document change: its change is logged for every maintained vector index
/// of its table. `planned` holds the inserts planned before the write (each index's is taken from
/// it).
pub(crate) fn stage(
    catalog: &Catalog,
    c: &Change<'_>,
    planned: &mut Vec<PreparedVector>,
    log: &mut Vec<VecOp>,
) -> Result<()> {
    let defs = catalog.indexes(&c.table.name);
    let mut dict = None;
    for def in defs.iter().filter(|d| d.is_maintained() && d.kind == IndexKind::Vector) {
        let dict: &Arc<FieldDict> = dict.get_or_insert_with(|| catalog.dict());
        stage_index(log, def, dict, c.id, c.old, c.new, planned)?;
    }
    Ok(())
}

/// Logs the change of document `id` in a vector index (old blob → new blob). The new vector is
/// checked here, so a bad one refuses the write before anything is applied.
fn stage_index(
    w: &mut Vec<VecOp>,
    def: &IndexDef,
    dict: &FieldDict,
    id: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
    planned: &mut Vec<PreparedVector>,
) -> Result<()> {
    let p = params_of(def)?;
    let before = old.and_then(|b| stored_vector(def, &p, b, dict));
    let after = new.map(|b| doc_vector(def, &p, b, dict)).transpose()?.flatten();
    // Unchanged needs no work — once the index is ready: while it builds, the backfill skips a
    // document changed after its chunk was read, so this write indexes it (an insert of the
    // vector the node has already changes nothing).
    if before == after && old.is_some() && (def.is_ready() || after.is_none()) {
        return Ok(());
    }
    let at = planned
        .iter()
        .position(|pv| pv.index == def.name && pv.created_at == def.created_at && Some(&pv.vector) == after.as_ref());
    let plan = at.map(|i| planned.swap_remove(i).plan);
    log_op(w, def, id, after, plan);
    Ok(())
}

/// Logs a node change in the write (a backfill's, with the insert's plan if it has one).
pub(crate) fn log(
    w: &mut Vec<VecOp>,
    def: &IndexDef,
    id: &str,
    vector: Option<Vec<f32>>,
    plan: Option<hnsw::InsertPlan>,
) {
    log_op(w, def, id, vector, plan);
}

fn log_op(w: &mut Vec<VecOp>, def: &IndexDef, id: &str, vector: Option<Vec<f32>>, plan: Option<hnsw::InsertPlan>) {
    w.push(VecOp {
        table: def.table.clone(),
        index: def.name.clone(),
        created_at: def.created_at,
        id: id.to_owned(),
        vector,
        plan,
    });
}

/// Applies every vector change the write logged: the cached graphs change and the keys of every
/// node whose vector or links changed are staged. The family's finish step, at the end of every
/// write, on the committer, after every step that can refuse the write. Each index whose graph it
/// changes is added to `touched` first: if the write then fails to commit, the caller forgets
/// those graphs (see [`Graphs::forget`]) so the next use reloads them from the keys. A panic
/// while a graph changes forgets that graph and fails the write.
pub(crate) fn finish(
    w: &mut WriteTx<'_>,
    ops: Vec<VecOp>,
    vectors: &Vectors,
    touched: &std::sync::Mutex<Vec<(String, String)>>,
) -> Result<()> {
    if ops.is_empty() {
        return Ok(());
    }
    let mut by_index: Vec<((String, String, i64), Vec<VecOp>)> = Vec::new();
    for op in ops {
        let key = (op.table.clone(), op.index.clone(), op.created_at);
        match by_index.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(op),
            None => by_index.push((key, vec![op])),
        }
    }
    for ((table, index, created_at), ops) in by_index {
        let view = || vectors.core.store.committed();
        let Some(cached) = vectors.graphs.get(&view, &vectors.core.catalog, &table, &index)? else { continue };
        if cached.created_at != created_at {
            continue;
        }
        touched.lock().unwrap_or_else(PoisonError::into_inner).push((table.clone(), index.clone()));
        let mut graph = cached.graph.write().unwrap_or_else(PoisonError::into_inner);
        let mut changes = Changes::default();
        let changed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for op in ops {
                match (op.vector, op.plan) {
                    (Some(v), Some(plan)) => graph.apply_plan(&op.id, &v, &plan, &mut changes),
                    (Some(v), None) => graph.insert(&op.id, &v, &mut changes),
                    (None, _) => {
                        graph.remove(&op.id, &mut changes);
                    }
                }
            }
        }));
        if changed.is_err() {
            // a half-changed graph is never used again: the next use reloads it from the keys
            drop(graph);
            vectors.graphs.forget(&table, &index);
            return Err(ServiceError::Internal(format!("vector index {index:?}: the graph update failed")));
        }
        layout::stage(w, &table, &index, &graph, &changes)?;
    }
    Ok(())
}

impl Vectors {
    /// Opens the cached graph of every vector index from its keys (at start, so the first search
    /// does not pay for it), and says how long it took.
    pub(crate) fn open_vector_indexes(&self) -> Result<std::time::Duration> {
        let started = std::time::Instant::now();
        for table in self.core.catalog.tables() {
            for def in self.core.catalog.indexes(&table.name).iter().filter(|d| d.kind == IndexKind::Vector) {
                let view = || self.core.store.committed();
                self.graphs.get(&view, &self.core.catalog, &def.table, &def.name)?;
            }
        }
        Ok(started.elapsed())
    }
}
