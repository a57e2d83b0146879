//! The [`Graph`] of a walk on the in-memory adjacency its view carries: a vertex's steps are read
//! from arrays, not an LSM scan. Entries count against `max_visited` as the key scans would
//! (each vertex's entries once per direction). Expired edges and vertices not yet swept are
//! skipped as on the keys; that costs name lookups, so only when some table can expire.

use super::memory::{Adjacency, TableAdj};
use super::store_walk::edge_cost;
use super::walk::{Cost, Graph, LocalNames, Step, WalkDirection};
use crate::catalog::{Catalog, TableDef};
use crate::service::adjacency::split_vertex;
use crate::service::stop::Stop;
use crate::service::ttl::Expired;
use crate::service::ttl::expiry::Expiry;
use crate::service::{Result, ServiceError};
use crate::storage::ReadView;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Numbers of vertices the adjacency does not hold (no edges): from here up.
const EXTRA: u32 = 1 << 31;

/// Whether some table may hold documents that expired (walks must then skip them).
pub(crate) fn may_expire(catalog: &Catalog) -> bool {
    let dict = catalog.dict();
    catalog.tables().iter().any(|t| Expiry::of(catalog, &dict, &t.name).is_some())
}

/// The steps of a walk, read from memory.
pub(crate) struct MemoryGraph<'a> {
    adj: &'a Adjacency,
    view: &'a ReadView,
    catalog: &'a Catalog,
    /// the walk's edge tables, with their adjacency (none: no edges) and whether an edge's cost
    /// is in it (hops, or the declared weight field)
    tables: Vec<(&'a TableDef, Option<&'a TableAdj>, bool)>,
    stop: &'a Stop,
    cost: Cost,
    max_visited: usize,
    read: usize,
    calls: u64,
    counted: HashSet<(u32, u8), foldhash::fast::RandomState>,
    extra: LocalNames,
    /// costs read from edge documents, by edge
    weights: HashMap<u32, f64>,
    /// when some table may hold expired documents not yet swept
    expired: Option<Expired<'a>>,
}

impl<'a> MemoryGraph<'a> {
    pub fn new(
        adj: &'a Adjacency,
        view: &'a ReadView,
        catalog: &'a Catalog,
        tables: &'a [Arc<TableDef>],
        stop: &'a Stop,
        cost: Cost,
        max_visited: usize,
    ) -> Self {
        let tables = tables
            .iter()
            .map(|t| {
                let inline = match &cost {
                    Cost::Hops => true,
                    Cost::Field(f) => t.weight_field.as_deref() == Some(f.as_str()),
                };
                (&**t, adj.table(&t.name, t.created_at), inline)
            })
            .collect();
        let may_expire = may_expire(catalog);
        MemoryGraph {
            adj,
            view,
            catalog,
            tables,
            stop,
            cost,
            max_visited,
            read: 0,
            calls: 0,
            counted: HashSet::default(),
            extra: LocalNames::default(),
            weights: HashMap::new(),
            expired: may_expire.then(|| Expired::new(view, catalog)),
        }
    }

    /// Whether the edge or the vertex an entry leads to has expired.
    fn expired(&mut self, edge: u32, vertex: u32) -> Result<bool> {
        let Some(expired) = &mut self.expired else { return Ok(false) };
        let (edge, vertex) = {
            let names = self.adj.names();
            (names.edge_name(edge).to_owned(), names.vertex_name(vertex).to_owned())
        };
        let (table, id) = split_vertex(&edge).unwrap_or(("", ""));
        Ok(expired.contains(table, id, self.stop)? || expired.vertex(&vertex, self.stop)?)
    }
}

impl Graph for MemoryGraph<'_> {
    fn steps(&mut self, v: u32, dir: WalkDirection, out: &mut Vec<Step>) -> Result<()> {
        self.calls += 1;
        if self.calls.is_multiple_of(256) {
            self.stop.check()?;
        }
        if v >= EXTRA {
            return Ok(());
        }
        if self.counted.insert((v, dir as u8)) {
            for (_, t, _) in &self.tables {
                for &d in dir.dirs() {
                    self.read += t.map_or(0, |t| t.at(d, v).len());
                }
            }
            if self.read > self.max_visited {
                return Err(ServiceError::MaxVisited(self.max_visited));
            }
        }
        for i in 0..self.tables.len() {
            let (table, Some(t), inline) = self.tables[i] else { continue };
            for &d in dir.dirs() {
                for e in t.at(d, v) {
                    if self.expired.is_some() && self.expired(e.edge, e.other)? {
                        continue;
                    }
                    let weight = match (&self.cost, inline) {
                        (Cost::Hops, _) => 1.0,
                        (_, true) => e.weight,
                        (cost, false) => match self.weights.get(&e.edge) {
                            Some(&w) => w,
                            None => {
                                let name = self.adj.names().edge_name(e.edge).to_owned();
                                let id = split_vertex(&name).map_or("", |(_, id)| id);
                                let w = edge_cost(self.view, self.catalog, cost, table, id, None)?;
                                self.weights.insert(e.edge, w);
                                w
                            }
                        },
                    };
                    out.push(Step { edge: e.edge, vertex: e.other, dir: d, weight });
                }
            }
        }
        Ok(())
    }

    fn vertex(&mut self, name: &str) -> u32 {
        match self.adj.names().vertex(name) {
            Some(v) => v,
            None => EXTRA + self.extra.number(name),
        }
    }

    fn vertex_name(&self, v: u32) -> String {
        if v >= EXTRA {
            return self.extra.name(v - EXTRA).to_owned();
        }
        self.adj.names().vertex_name(v).to_owned()
    }

    fn edge_name(&self, e: u32) -> String {
        self.adj.names().edge_name(e).to_owned()
    }
}
