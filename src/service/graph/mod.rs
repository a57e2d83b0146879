//! Graph reads: neighbours, traversals and shortest paths. Every walk reads adjacency entries
//! (`graph:out:{edge_table}:{vertex}:` / `graph:in:…` prefix scans, one per edge table and
//! direction) on one snapshot, so it costs what it visits, not what the graph holds; edge
//! documents are read only for an edge filter or a weight that is not the table's declared one,
//! vertex documents only for a vertex filter or returned fields. Each walk is bounded: by
//! `max_visited` (adjacency entries read; 422 `max_visited_exceeded`), and by the request timeout.

mod neighbors;
mod paths;
mod traverse;

pub use neighbors::{Neighbor, NeighborsPage, NeighborsRequest};
pub use paths::{ShortestPathRequest, ShortestPathResponse, WeightedPath};
pub use traverse::{ReturnKind, TraversePath, TraverseRequest, TraverseResponse, TraversedVertex};

use super::adjacency::{split_vertex, weight_ref};
use super::stop::Stop;
use super::ttl::{Expired, now_ms};
use super::{Db, Result, ServiceError};
use crate::catalog::{TableDef, TableKind};
use crate::entity;
use crate::keys::{AdjValue, Direction, EntityKey, GraphKey};
use crate::storage::{KeyRange, ReadView, Space};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use utoipa::ToSchema;

/// Most edge tables one walk follows.
pub const MAX_EDGE_TABLES: usize = 32;
/// `max_visited` when the request does not say.
pub const DEFAULT_MAX_VISITED: usize = 100_000;
/// The largest `max_visited` a request may ask for.
pub const MAX_MAX_VISITED: usize = 10_000_000;

/// Which way a walk follows edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WalkDirection {
    /// from `_from` to `_to`
    #[default]
    Out,
    /// from `_to` to `_from`
    In,
    /// both ways
    Any,
}

impl WalkDirection {
    /// The adjacency directions read.
    fn dirs(self) -> &'static [Direction] {
        match self {
            WalkDirection::Out => &[Direction::Out],
            WalkDirection::In => &[Direction::In],
            WalkDirection::Any => &[Direction::Out, Direction::In],
        }
    }

    /// The direction of the same walk seen from its other end.
    fn reverse(self) -> WalkDirection {
        match self {
            WalkDirection::Out => WalkDirection::In,
            WalkDirection::In => WalkDirection::Out,
            WalkDirection::Any => WalkDirection::Any,
        }
    }

    fn tag(self) -> &'static [u8] {
        match self {
            WalkDirection::Out => b"out",
            WalkDirection::In => b"in",
            WalkDirection::Any => b"any",
        }
    }
}

/// The name of an adjacency direction in answers.
fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::Out => "out",
        Direction::In => "in",
    }
}

/// One step along an edge from a vertex.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    /// the edge, `"edge_table/id"`
    pub edge: String,
    /// the vertex reached
    pub vertex: String,
    /// out (along the edge) or in (against it)
    pub dir: Direction,
    /// the edge's cost: 1 for hops, else its weight
    pub weight: f64,
}

/// What the path algorithms walk: the steps from a vertex in one direction.
pub(crate) trait Graph {
    fn steps(&mut self, vertex: &str, dir: WalkDirection) -> Result<Rc<Vec<Step>>>;
}

/// Where an edge's cost comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cost {
    /// every edge costs 1
    Hops,
    /// the numeric edge field of that name: from the adjacency entry when it is the edge table's
    /// declared weight field, else from the edge document
    Field(String),
}

/// The store as a [`Graph`]: adjacency entries read from one snapshot, each vertex's steps read
/// once (and kept), every entry counted against `max_visited`.
pub(crate) struct StoreGraph<'a> {
    view: &'a ReadView,
    db: &'a Db,
    tables: &'a [Arc<TableDef>],
    stop: &'a Stop,
    cost: Cost,
    max_visited: usize,
    read: usize,
    calls: u64,
    /// each vertex's steps, per direction (out, in, any)
    seen: [HashMap<String, Rc<Vec<Step>>>; 3],
    /// expired edges and vertices, not yet swept: never stepped along or onto
    expired: Expired<'a>,
}

impl<'a> StoreGraph<'a> {
    fn new(
        db: &'a Db,
        view: &'a ReadView,
        tables: &'a [Arc<TableDef>],
        stop: &'a Stop,
        cost: Cost,
        max_visited: usize,
    ) -> Self {
        let expired = Expired::new(view, &db.catalog);
        StoreGraph { view, db, tables, stop, cost, max_visited, read: 0, calls: 0, seen: Default::default(), expired }
    }

    fn weight(&self, table: &TableDef, edge_id: &str, adj: &AdjValue<'_>) -> Result<f64> {
        let Cost::Field(field) = &self.cost else { return Ok(1.0) };
        let bad =
            |why: &str| ServiceError::InvalidWeight(format!("edge \"{}/{edge_id}\": {field:?} {why}", table.name));
        if table.weight_field.as_deref() == Some(field.as_str()) {
            return adj.weight.ok_or_else(|| bad("is missing from its adjacency entry"));
        }
        let blob = self
            .view
            .get(Space::Entity, &EntityKey::new(&table.name, edge_id).encode())?
            .ok_or_else(|| bad("cannot be read: the edge document is missing"))?;
        self.db.catalog.with_dict(|dict| match entity::get_path(&blob, dict, &[field.as_str()])? {
            Some(v) => weight_ref(&v).ok_or_else(|| bad("is not a number >= 0")),
            None => Err(bad("is missing")),
        })
    }
}

impl Graph for StoreGraph<'_> {
    fn steps(&mut self, vertex: &str, dir: WalkDirection) -> Result<Rc<Vec<Step>>> {
        self.calls += 1;
        if self.calls.is_multiple_of(256) {
            self.stop.check()?;
        }
        if let Some(s) = self.seen[dir as usize].get(vertex) {
            return Ok(s.clone());
        }
        let mut steps = Vec::new();
        for table in self.tables {
            for &d in dir.dirs() {
                let prefix = GraphKey::vertex_prefix(d, &table.name, vertex);
                for item in self.view.scan(Space::Graph, KeyRange::Prefix(prefix), false) {
                    let (key, value) = item?;
                    self.read += 1;
                    if self.read > self.max_visited {
                        return Err(ServiceError::MaxVisited(self.max_visited));
                    }
                    if self.read.is_multiple_of(1024) {
                        self.stop.check()?;
                    }
                    let k = GraphKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?;
                    let adj = AdjValue::decode(&value).map_err(|e| ServiceError::Internal(e.to_string()))?;
                    if self.expired.contains(&table.name, &k.edge_id, self.stop)?
                        || self.expired.vertex(&adj.other, self.stop)?
                    {
                        continue;
                    }
                    let weight = self.weight(table, &k.edge_id, &adj)?;
                    steps.push(Step {
                        edge: format!("{}/{}", table.name, k.edge_id),
                        vertex: adj.other.into_owned(),
                        dir: d,
                        weight,
                    });
                }
            }
        }
        let steps = Rc::new(steps);
        self.seen[dir as usize].insert(vertex.to_owned(), steps.clone());
        Ok(steps)
    }
}

/// Checks a `max_visited`.
fn max_visited(asked: Option<usize>) -> Result<usize> {
    let m = asked.unwrap_or(DEFAULT_MAX_VISITED);
    if !(1..=MAX_MAX_VISITED).contains(&m) {
        return Err(ServiceError::InvalidRequest(format!("max_visited must be between 1 and {MAX_MAX_VISITED}")));
    }
    Ok(m)
}

impl Db {
    /// The edge tables a walk follows: those named (each an existing edge table, at most
    /// [`MAX_EDGE_TABLES`], repeats ignored), or every edge table when none is named.
    fn edge_tables(&self, names: Option<&[String]>) -> Result<Vec<Arc<TableDef>>> {
        let tables: Vec<Arc<TableDef>> = match names {
            Some(names) if !names.is_empty() => {
                if names.len() > MAX_EDGE_TABLES {
                    return Err(ServiceError::InvalidRequest(format!(
                        "a walk follows at most {MAX_EDGE_TABLES} edge tables"
                    )));
                }
                let mut out: Vec<Arc<TableDef>> = Vec::new();
                for n in names {
                    let t = self.catalog.table(n).ok_or_else(|| ServiceError::TableNotFound(n.clone()))?;
                    if t.kind != TableKind::Edge {
                        return Err(ServiceError::InvalidRequest(format!("table {n:?} is not an edge table")));
                    }
                    if !out.iter().any(|o| o.name == t.name) {
                        out.push(t);
                    }
                }
                out
            }
            _ => {
                let mut all: Vec<_> = self.catalog.tables().into_iter().filter(|t| t.kind == TableKind::Edge).collect();
                all.sort_by(|a, b| a.name.cmp(&b.name));
                if all.len() > MAX_EDGE_TABLES {
                    return Err(ServiceError::InvalidRequest(format!(
                        "there are more than {MAX_EDGE_TABLES} edge tables: name the ones to follow in `edges`"
                    )));
                }
                all
            }
        };
        Ok(tables)
    }

    /// Checks that `vertex` is `"table/id"` naming an existing document, on the snapshot.
    fn vertex_exists(&self, view: &ReadView, what: &str, vertex: &str) -> Result<()> {
        let (table, id) = split_vertex(vertex).ok_or_else(|| {
            ServiceError::InvalidRequest(format!("{what} must be a vertex \"table/id\", not {vertex:?}"))
        })?;
        if self.catalog.table(table).is_none() {
            return Err(ServiceError::TableNotFound(table.to_owned()));
        }
        let gone = || ServiceError::DocumentNotFound { table: table.to_owned(), id: id.to_owned() };
        let blob = view.get(Space::Entity, &EntityKey::new(table, id).encode())?.ok_or_else(gone)?;
        if crate::service::ttl::expiry::is_expired(&self.catalog, &self.catalog.dict(), table, &blob, now_ms())? {
            return Err(gone());
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod memory {
    //! An in-memory [`Graph`] for the algorithms' unit tests.
    use super::*;

    /// Edges `(id, from, to, weight)`.
    pub(crate) struct MemGraph(pub Vec<(&'static str, &'static str, &'static str, f64)>);

    impl Graph for MemGraph {
        fn steps(&mut self, vertex: &str, dir: WalkDirection) -> Result<Rc<Vec<Step>>> {
            let mut out = Vec::new();
            for &d in dir.dirs() {
                for (id, from, to, w) in &self.0 {
                    let (at, other) = if d == Direction::Out { (from, to) } else { (to, from) };
                    if *at == vertex {
                        out.push(Step { edge: (*id).to_owned(), vertex: (*other).to_owned(), dir: d, weight: *w });
                    }
                }
            }
            Ok(Rc::new(out))
        }
    }
}
