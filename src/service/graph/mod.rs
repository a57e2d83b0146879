//! Graph reads: neighbours, traversals and shortest paths. Every walk reads one view: the
//! in-memory adjacency it carries (`memory`, kept exact by every commit) or, when that is off,
//! the view's adjacency entries (`graph:out:{edge_table}:{vertex}:` / `graph:in:…` prefix scans,
//! one per edge table and direction), so it costs what it visits, not what the graph holds; edge
//! documents are read only for an edge filter or a weight that is not the table's declared one,
//! vertex documents only for a vertex filter or returned fields. Each walk is bounded: by
//! `max_visited` (adjacency entries read; 422 `max_visited_exceeded`), and by the request timeout.

pub(crate) mod adjacency;
pub(crate) mod check;
mod mem_walk;
pub(crate) mod memory;
mod neighbors;
mod paths;
mod store_walk;
mod traverse;
mod walk;

pub use neighbors::{Neighbor, NeighborsPage, NeighborsRequest};
pub use paths::{ShortestPathRequest, ShortestPathResponse, WeightedPath};
pub use traverse::{ReturnKind, TraversePath, TraverseRequest, TraverseResponse, TraversedVertex};
pub use walk::WalkDirection;

use super::core::{Core, Handle};
use super::{Result, ServiceError};
use crate::catalog::{TableDef, TableKind};
use crate::keys::{Direction, EntityKey};
use crate::service::core::cancel::Stop;
use crate::service::core::clock::now_ms;
use crate::storage::{Derived, KeyRange, ReadView, Space};
use adjacency::split_vertex;
use mem_walk::MemoryGraph;
use memory::Adjacency;
use std::sync::Arc;
use store_walk::StoreGraph;
use walk::{Cost, Step, WalkGraph};

/// Most edge tables one walk follows.
pub const MAX_EDGE_TABLES: usize = 32;
/// `max_visited` when the request does not say.
pub const DEFAULT_MAX_VISITED: usize = 100_000;
/// The largest `max_visited` a request may ask for.
pub const MAX_MAX_VISITED: usize = 10_000_000;
/// Adjacency entries a walk of the in-memory adjacency may read on the request's own thread
/// before it is handed to the blocking pool (see [`Graph::inline_budget`]): tens of microseconds.
const INLINE_ENTRIES: usize = 4096;

/// The graph model: walks over the edge tables' adjacency (`graph:out|in:`), and that adjacency
/// kept in memory, over the shared [`Core`].
pub struct Graph {
    core: Arc<Core>,
    /// the adjacency in memory, kept exact by every commit (see [`memory`])
    pub(crate) memory: Arc<memory::GraphMemory>,
}

impl Handle for Graph {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Graph {
    /// The model over `core`, its in-memory adjacency bounded to `memory_bytes` (loaded by
    /// [`Graph::load_memory`]).
    pub(crate) fn new(core: Arc<Core>, memory_bytes: usize) -> Graph {
        Graph { core, memory: Arc::new(memory::GraphMemory::new(memory_bytes)) }
    }
}

/// The name of an adjacency direction in answers.
fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::Out => "out",
        Direction::In => "in",
    }
}

/// A walk's [`WalkGraph`]: the in-memory adjacency when the view carries it, else the keys.
pub(crate) enum Walker<'a> {
    Memory(MemoryGraph<'a>),
    Store(StoreGraph<'a>),
}

impl<'a> Walker<'a> {
    pub fn new(
        model: &'a Graph,
        view: &'a ReadView,
        tables: &'a [Arc<TableDef>],
        stop: &'a Stop,
        cost: Cost,
        max_visited: usize,
    ) -> Self {
        match view.derived::<Adjacency>() {
            Some(adj) => {
                Walker::Memory(MemoryGraph::new(adj, view, &model.core.catalog, tables, stop, cost, max_visited))
            }
            None => Walker::Store(StoreGraph::new(view, &model.core.catalog, tables, stop, cost, max_visited)),
        }
    }
}

impl WalkGraph for Walker<'_> {
    fn steps(&mut self, v: u32, dir: WalkDirection, out: &mut Vec<Step>) -> Result<()> {
        match self {
            Walker::Memory(g) => g.steps(v, dir, out),
            Walker::Store(g) => g.steps(v, dir, out),
        }
    }
    fn vertex(&mut self, name: &str) -> u32 {
        match self {
            Walker::Memory(g) => g.vertex(name),
            Walker::Store(g) => g.vertex(name),
        }
    }
    fn vertex_name(&self, v: u32) -> String {
        match self {
            Walker::Memory(g) => g.vertex_name(v),
            Walker::Store(g) => g.vertex_name(v),
        }
    }
    fn warm(&self, vs: &[u32], dir: WalkDirection) {
        match self {
            Walker::Memory(g) => g.warm(vs, dir),
            Walker::Store(g) => g.warm(vs, dir),
        }
    }
    fn vertex_names(&self, vs: &[u32]) -> Vec<String> {
        match self {
            Walker::Memory(g) => g.vertex_names(vs),
            Walker::Store(g) => g.vertex_names(vs),
        }
    }
    fn edge_name(&self, e: u32) -> String {
        match self {
            Walker::Memory(g) => g.edge_name(e),
            Walker::Store(g) => g.edge_name(e),
        }
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

impl Graph {
    /// Loads the in-memory adjacency from the `graph:` keys (at open, before anything writes, so
    /// no commit falls between the load and the first change it applies) and has the committer
    /// publish it with every view from now on.
    pub(crate) fn load_memory(&self) -> Result<()> {
        if self.memory.off_reason().is_some() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let tables: Vec<memory::load::TableId> = self
            .core
            .catalog
            .tables()
            .iter()
            .filter(|t| t.kind == TableKind::Edge)
            .map(|t| (t.name.clone(), t.created_at))
            .collect();
        let view = self.core.store.committed();
        let loaded =
            memory::load::from_keys(&tables, |prefix| view.scan(Space::Graph, KeyRange::Prefix(prefix), false));
        let seconds = started.elapsed().as_secs_f64();
        self.memory.loaded(loaded, seconds);
        let stats = self.memory.stats();
        tracing::info!(
            edges = stats.edges,
            bytes = stats.bytes,
            ms = (seconds * 1e3) as u64,
            state = stats.state,
            "graph adjacency loaded into memory"
        );
        let (memory, catalog) = (self.memory.clone(), self.core.catalog.clone());
        self.core.store.set_derived_source(Arc::new(move || {
            let live = |name: &str, created_at: i64| catalog.table(name).is_some_and(|t| t.created_at == created_at);
            memory.capture(live).map(|adj| adj as Derived)
        }));
        Ok(())
    }

    /// How many adjacency entries a walk may read right on the request's thread, if it may: when
    /// it reads the in-memory adjacency and nothing else (`small`: no filter, no document), and
    /// no table can expire (the expiry entries would be scanned). A small walk costs less than
    /// the hand-off to the blocking pool; one that needs more than the budget is run there again
    /// with its whole `max_visited`, so no request holds an async thread for long.
    fn inline_budget(&self, view: &ReadView, small: bool, max_visited: usize) -> Option<usize> {
        (small && view.derived::<Adjacency>().is_some() && !mem_walk::may_expire(&self.core.catalog))
            .then(|| max_visited.min(INLINE_ENTRIES))
    }

    /// The in-memory adjacency's figures.
    pub fn memory_stats(&self) -> memory::GraphMemoryStats {
        self.memory.stats()
    }

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
                    let t = self.core.catalog.table(n).ok_or_else(|| ServiceError::TableNotFound(n.clone()))?;
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
                let mut all: Vec<_> =
                    self.core.catalog.tables().into_iter().filter(|t| t.kind == TableKind::Edge).collect();
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
        if self.core.catalog.table(table).is_none() {
            return Err(ServiceError::TableNotFound(table.to_owned()));
        }
        let gone = || ServiceError::DocumentNotFound { table: table.to_owned(), id: id.to_owned() };
        let blob = view.get(Space::Entity, &EntityKey::new(table, id).encode())?.ok_or_else(gone)?;
        if crate::service::core::expiry::is_expired(
            &self.core.catalog,
            &self.core.catalog.dict(),
            table,
            &blob,
            now_ms(),
        )? {
            return Err(gone());
        }
        Ok(())
    }
}
