//! `POST /v1/tables/{table}/vector-search`: the k nearest documents to a vector, on one snapshot.
//!
//! Strategies (the answer's `strategy` says which ran):
//! - `hnsw`: the graph walk gives the `ef` nearest candidates, then the filter keeps the matching
//!   ones; while fewer than k match, the walk runs again with a list 4× longer (up to
//!   [`MAX_EF`]) before turning exact;
//! - `filtered_exact`: a filter the query planner can serve from an index with at most
//!   [`SELECTIVE_MAX`] candidates (its estimate) is evaluated first, and the distance is computed
//!   for each matching document: exact, and cheaper than a walk that would pass through mostly
//!   non-matching nodes;
//! - `exact`: brute force over every node (`"exact": true`, or when a walk found fewer than k
//!   hits — a very selective unindexed filter — so a filter never starves the answer).
//!
//! A quantized index (`"quantization": "int8"`) walks its graph on int8 codes, then rescores:
//! the `k × oversampling` nearest accepted candidates by the codes are ranked again by their
//! documents' own vectors (read with the documents, which the search reads anyway), and the k
//! nearest of those are the answer, with exact distances. Its exact strategies compute every
//! distance on the stored floats: the `vec:` node keys of the snapshot (`exact`), or the
//! documents of the filter's candidates (`filtered_exact`).
//!
//! The graph's read lock is held only to walk it (ids and distances), never while documents are
//! read or filtered: a write waiting for the lock would hold up the committer. Every hit is read
//! from the snapshot: a node whose document the snapshot does not hold (or holds expired) is
//! never returned.

use super::Vectors;
use super::hnsw::Metric;
use super::{kernels, params_of, rescore};
use crate::catalog::IndexKind;
use crate::keys::EntityKey;
use crate::service::core::Handle;
use crate::service::core::cancel::Stop;
use crate::service::core::expiry::{Expiry, now_ms};
use crate::service::core::filter::Filter;
use crate::service::query;
use crate::service::{Result, ServiceError};
use crate::storage::{Slice, Space};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, TryLockError};
use utoipa::ToSchema;

/// Most hits one search returns.
pub const MAX_K: usize = 1000;
/// Largest `ef`.
pub const MAX_EF: usize = 10_000;
/// The default `ef` (search list length) of an index of up to [`DEFAULT_EF_NODES`] nodes.
pub const DEFAULT_EF: usize = 64;
/// See [`default_ef`].
pub const DEFAULT_EF_NODES: usize = 100_000;

/// The `ef` a search of an index of `nodes` nodes uses when the request names none: 64 up to
/// 100k nodes, then growing as (nodes / 100k)^0.67 — 300 at 1M. A longer list is needed for the
/// same recall as the graph grows: on the peers bench's gaussian mixture, recall@10 0.95 takes
/// ef 48 at 100k × 64-d, and at 1M × 96-d ef 256 gives 0.949 and ef 384 0.978.
pub fn default_ef(nodes: usize) -> usize {
    let grown = DEFAULT_EF as f64 * (nodes as f64 / DEFAULT_EF_NODES as f64).powf(0.67);
    (grown.ceil() as usize).clamp(DEFAULT_EF, MAX_EF)
}
/// The default `oversampling` of a quantized index's search.
pub const DEFAULT_OVERSAMPLING: f64 = 3.0;
/// Largest `oversampling`.
pub const MAX_OVERSAMPLING: f64 = 100.0;
/// Most distance terms (`ef` × 2m × dimension, about a graph walk's work) of a search run on the
/// request's own thread, without the hop to the blocking pool (see [`Vectors::vector_search`]).
pub const INLINE_WORK: usize = 1 << 20;
/// Most hits of a search run on the request's own thread.
pub const INLINE_K: usize = 100;
/// Most candidates an indexed filter may have for the exact strategy.
pub const SELECTIVE_MAX: u64 = 5000;

/// The body of `POST /v1/tables/{table}/vector-search`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VectorSearchRequest {
    /// the field of a ready `vector` index
    #[schema(example = "embedding", min_length = 1, max_length = 4096)]
    pub field: String,
    /// the query vector: as many numbers as the index's dimension (at most 4096)
    #[schema(min_items = 1, max_items = 4096, example = json!([0.1, 0.2, 0.3]))]
    pub vector: Vec<f64>,
    /// hits to return, 1-1000 (default 10)
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 1, maximum = 1000)]
    pub k: Option<usize>,
    /// search list length, 1-10000 (default: 64 up to 100k vectors, then growing with the
    /// index, 300 at 1M; raised to k)
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 1, maximum = 10000)]
    pub ef: Option<usize>,
    /// a filter (the query language) the hits must match
    #[schema(value_type = Option<Object>, example = json!({"category": "books"}))]
    pub filter: Option<Value>,
    /// fields of each document to return (dotted paths); `_id` always comes back
    #[schema(max_items = 256)]
    pub fields: Option<Vec<String>>,
    /// true: brute force over every vector (exact, slower)
    #[serde(default)]
    pub exact: bool,
    /// a quantized index: how many candidates are rescored on the documents' vectors, as a
    /// multiple of k (1-100, default 3); ignored by an index without quantization
    #[schema(minimum = 1, maximum = 100, example = 3.0)]
    pub oversampling: Option<f64>,
}

/// One hit.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VectorHit {
    /// the document id
    #[serde(rename = "_id")]
    pub id: String,
    /// its distance to the query vector (cosine: 1 − cosine similarity; l2: Euclidean; dot:
    /// the negative dot product)
    pub distance: f32,
    /// the document (or the requested fields)
    #[schema(value_type = Object)]
    pub document: Map<String, Value>,
}

/// The answer of a vector search.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VectorSearchResponse {
    /// the hits, nearest first
    pub hits: Vec<VectorHit>,
    /// `hnsw`, `filtered_exact` or `exact` (see docs/vectors.md)
    pub strategy: &'static str,
}

/// A query vector checked against the index.
fn query_vector(v: &[f64], dim: usize, metric: Metric) -> Result<Vec<f32>> {
    let bad = |m: String| Err(ServiceError::InvalidRequest(m));
    if v.len() != dim {
        return bad(format!("`vector` has {} elements; the index takes {dim}", v.len()));
    }
    let mut q: Vec<f32> = v.iter().map(|x| *x as f32).collect();
    if q.iter().any(|x| !x.is_finite()) {
        return bad("`vector` holds a number that is not a finite f32".into());
    }
    if !kernels::dot(&q, &q).is_finite() {
        return bad("`vector` is too long: its squared length overflows f32".into());
    }
    if metric == Metric::Cosine && !kernels::normalize(&mut q) {
        return bad(if q.iter().all(|x| *x == 0.0) {
            "`vector` is zero: it has no direction (metric cosine)".into()
        } else {
            "`vector` is too short to normalise: its squared length underflows f32 (metric cosine)".into()
        });
    }
    Ok(q)
}

impl Vectors {
    /// The k nearest documents to a vector (see the module doc).
    pub async fn vector_search(
        self: &Arc<Self>,
        table: String,
        req: VectorSearchRequest,
    ) -> Result<VectorSearchResponse> {
        let k = req.k.unwrap_or(10);
        if !(1..=MAX_K).contains(&k) {
            return Err(ServiceError::InvalidRequest(format!("`k` must be 1 to {MAX_K}")));
        }
        if req.ef.is_some_and(|ef| !(1..=MAX_EF).contains(&ef)) {
            return Err(ServiceError::InvalidRequest(format!("`ef` must be 1 to {MAX_EF}")));
        }
        if req.oversampling.is_some_and(|o| !(1.0..=MAX_OVERSAMPLING).contains(&o)) {
            return Err(ServiceError::InvalidRequest(format!("`oversampling` must be 1 to {MAX_OVERSAMPLING}")));
        }
        if req.fields.as_ref().is_some_and(|f| f.len() > crate::service::core::filter::MAX_FIELDS) {
            return Err(ServiceError::InvalidRequest(format!(
                "at most {} fields",
                crate::service::core::filter::MAX_FIELDS
            )));
        }
        let (stop, _abandon) = self.core.request_stop();
        // A short walk (no filter, a cached graph whose lock is free, a bounded `ef` and `k`) runs
        // here: its reads are point reads, and the hop to the blocking pool would cost a good part
        // of it (measured: task switches 18% of a search's samples at ef 48 on 100k × 64-d).
        let rescored = k as f64 * req.oversampling.unwrap_or(DEFAULT_OVERSAMPLING);
        if req.filter.is_none()
            && !req.exact
            && k <= INLINE_K
            && rescored <= INLINE_K as f64 * DEFAULT_OVERSAMPLING
            && let Some(answer) = self.vector_search_now(&table, &req, k, &stop, true)?
        {
            return Ok(answer);
        }
        self.read(move |vectors| {
            vectors
                .vector_search_now(&table, &req, k, &stop, false)?
                .ok_or_else(|| ServiceError::Internal("a vector search on the blocking pool was refused".into()))
        })
        .await
    }

    /// The search (see the module doc). `inline`: only a short one — `None` (nothing done) when
    /// the graph is not cached yet, its lock is held, or the walk would be long.
    fn vector_search_now(
        &self,
        table: &str,
        req: &VectorSearchRequest,
        k: usize,
        stop: &Stop,
        inline: bool,
    ) -> Result<Option<VectorSearchResponse>> {
        self.core.catalog.table(table).ok_or_else(|| ServiceError::TableNotFound(table.to_owned()))?;
        let filter = req.filter.as_ref().map(Filter::parse).transpose()?;
        let view = self.core.store.snapshot();
        let no_index = || {
            ServiceError::NoVectorIndex(format!("table {table:?} has no ready vector index on field {:?}", req.field))
        };
        let defs = query::ready_indexes(&view, &self.core.catalog, table)?;
        let def = defs
            .iter()
            .find(|d| d.kind == IndexKind::Vector && d.fields.first() == Some(&req.field))
            .ok_or_else(no_index)?;
        let p = params_of(def)?;
        let q = query_vector(&req.vector, p.dim, p.metric)?;
        let snapshot = || self.core.store.committed();
        let cached = if inline {
            let Some(cached) = self.graphs.cached(table, &def.name) else { return Ok(None) };
            cached
        } else {
            self.graphs.get(&snapshot, &self.core.catalog, table, &def.name)?.ok_or_else(no_index)?
        };
        if cached.created_at != def.created_at {
            // (a cached graph of an index dropped since: the pool's search loads the new one)
            return if inline { Ok(None) } else { Err(no_index()) };
        }
        let dict = self.core.catalog.dict();
        let (rules, now) = (Expiry::of(&self.core.catalog, &dict, table), now_ms());
        // With a selective indexed filter, the matching ids first.
        let selected = match &filter {
            Some(f) if !req.exact => query::indexed_matches(&view, &self.core.catalog, table, f, SELECTIVE_MAX, stop)?,
            _ => None,
        };
        // The graph's lock is held only to walk it (ids and distances); documents are read and
        // filtered after it is released, so a search never holds up the committer's graph writes.
        // (inline: `None` rather than wait for a write holding the lock)
        let lock = || match cached.graph.try_read() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(g)) => Some(g.into_inner()),
            Err(TryLockError::WouldBlock) if inline => None,
            Err(TryLockError::WouldBlock) => Some(cached.graph.read().unwrap_or_else(PoisonError::into_inner)),
        };
        // `None`: inline, and the search must move to the blocking pool
        let candidates = |walk: Walk<'_>| -> Result<Option<(Ranked, usize)>> {
            if inline && !matches!(walk, Walk::Graph(_)) {
                return Ok(None);
            }
            if p.quantized && matches!(walk, Walk::Exact(None)) {
                let all = rescore::scan(&view, def, &p, &q, stop)?;
                let len = all.len();
                return Ok(Some((all, len)));
            }
            let Some(graph) = lock() else { return Ok(None) };
            let found = match walk {
                Walk::Exact(None) => graph.exact(&q, graph.len(), None, &mut |_| true),
                Walk::Exact(Some(ids)) => {
                    let slots: Vec<u32> = ids.iter().filter_map(|id| graph.slot(id)).collect();
                    graph.exact(&q, slots.len(), Some(&slots), &mut |_| true)
                }
                Walk::Graph(ef) => graph.search(&q, ef, ef, &mut |_| true),
            };
            Ok(Some((found.into_iter().filter_map(|(s, d)| Some((graph.id(s)?.clone(), d))).collect(), graph.len())))
        };
        macro_rules! walked {
            ($walk:expr) => {
                match candidates($walk)? {
                    Some(found) => found.0,
                    None => return Ok(None),
                }
            };
        }
        // each candidate's document, read once (None: gone, expired or filtered out)
        let mut seen: HashMap<Arc<str>, Option<Slice>> = HashMap::new();
        let mut checked = 0usize;
        let mut take_k = |cands: &[(Arc<str>, f32)], k: usize| -> Result<Vec<(Arc<str>, f32, Slice)>> {
            let mut out = Vec::with_capacity(k);
            for (id, d) in cands {
                if out.len() >= k {
                    break;
                }
                let blob = match seen.get(id) {
                    Some(b) => b.clone(),
                    None => {
                        checked += 1;
                        if checked.is_multiple_of(256) {
                            stop.check()?;
                        }
                        let b = accepted(&view, table, id, &filter, &rules, &dict, now)?;
                        seen.insert(id.clone(), b.clone());
                        b
                    }
                };
                if let Some(blob) = blob {
                    out.push((id.clone(), *d, blob));
                }
            }
            Ok(out)
        };
        // a quantized index's candidates (by int8 codes) are rescored: k × oversampling of them
        let rescored = |found: Vec<(Arc<str>, f32, Slice)>| rescore::rank(found, def, &p, &q, &dict, k);
        let wanted = if p.quantized {
            let o = req.oversampling.unwrap_or(DEFAULT_OVERSAMPLING);
            ((k as f64 * o).ceil() as usize).max(k)
        } else {
            k
        };
        let (found, strategy) = if req.exact {
            (take_k(&walked!(Walk::Exact(None)), k)?, "exact")
        } else if let Some(ids) = &selected {
            let n = if p.quantized { ids.len() } else { k };
            (rescored(take_k(&walked!(Walk::Exact(Some(ids))), n)?), "filtered_exact")
        } else {
            // a filter is applied to the walk's candidates: while it leaves fewer than k, the walk
            // is repeated with a longer list, then the search turns exact
            let Some(nodes) = lock().map(|g| g.len()) else { return Ok(None) };
            let mut ef = req.ef.unwrap_or_else(|| default_ef(nodes)).max(k);
            loop {
                if inline && ef * 2 * p.m * p.dim > INLINE_WORK {
                    return Ok(None);
                }
                let Some((cands, len)) = candidates(Walk::Graph(ef))? else { return Ok(None) };
                let found = take_k(&cands, wanted)?;
                if found.len() >= k || cands.len() >= len {
                    break (rescored(found), "hnsw");
                }
                if cands.len() < ef || ef >= MAX_EF {
                    break (take_k(&walked!(Walk::Exact(None)), k)?, "exact");
                }
                ef = (ef * 4).min(MAX_EF);
            }
        };
        let mut hits = Vec::with_capacity(found.len());
        for (id, d, blob) in found {
            let text = crate::service::core::filter::project(&blob, &dict, &id, req.fields.as_deref())?;
            let document = serde_json::from_slice(&text).map_err(|e| ServiceError::Internal(e.to_string()))?;
            hits.push(VectorHit { id: id.to_string(), distance: p.metric.reported(d), document });
        }
        Ok(Some(VectorSearchResponse { hits, strategy }))
    }
}

/// Candidates with their distances, nearest first.
type Ranked = Vec<(Arc<str>, f32)>;

/// What a search walks under the graph's lock.
enum Walk<'a> {
    /// every node, or those of these ids, by brute force
    Exact(Option<&'a std::collections::HashSet<String>>),
    /// the graph, with this list length
    Graph(usize),
}

/// The document `id` as the search's snapshot has it, if it is live, unexpired and passes the
/// filter.
fn accepted(
    view: &crate::storage::ReadView,
    table: &str,
    id: &str,
    filter: &Option<Filter>,
    rules: &Option<Expiry>,
    dict: &crate::entity::FieldDict,
    now: i64,
) -> Result<Option<Slice>> {
    let Some(blob) = view.get(Space::Entity, &EntityKey::new(table, id).encode())? else { return Ok(None) };
    if rules.as_ref().map(|r| r.expired(&blob, dict, now)).transpose()? == Some(true) {
        return Ok(None);
    }
    if let Some(f) = filter
        && !f.matches(id, &blob, dict)?
    {
        return Ok(None);
    }
    Ok(Some(blob))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_ef_grows_with_the_index() {
        assert_eq!((default_ef(0), default_ef(10_000), default_ef(100_000)), (64, 64, 64));
        assert_eq!(default_ef(1_000_000), 300);
        assert!(default_ef(300_000) > 64 && default_ef(300_000) < 300);
        assert_eq!(default_ef(usize::MAX), MAX_EF);
    }
}
