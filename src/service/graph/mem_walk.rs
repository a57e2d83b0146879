//! The [`WalkGraph`] of a walk on the in-memory adjacency its view carries: a vertex's steps are read
//! from arrays, not an LSM scan. Entries count against `max_visited` as the key scans would
//! (each vertex's entries once per direction). Expired edges and vertices not yet swept are
//! skipped as on the keys; that costs name lookups, so only when some table can expire.

use super::adjacency::split_vertex;
use super::memory::{Adjacency, TableAdj};
use super::store_walk::edge_cost;
use super::walk::{Budget, Cost, LocalNames, Step, WalkDirection, WalkGraph};
use crate::catalog::{Catalog, TableDef};
use crate::service::Result;
use crate::service::core::cancel::Stop;
use crate::service::core::expiry::Expired;
use crate::service::core::expiry::Expiry;
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
    budget: Budget<'a>,
    cost: Cost,
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
            budget: Budget::new(stop, max_visited),
            cost,
            counted: HashSet::with_capacity_and_hasher(256, Default::default()),
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
        let stop = self.budget.stop();
        Ok(expired.contains(table, id, stop)? || expired.vertex(&vertex, stop)?)
    }
}

impl WalkGraph for MemoryGraph<'_> {
    fn steps(&mut self, v: u32, dir: WalkDirection, out: &mut Vec<Step>) -> Result<()> {
        self.budget.expand()?;
        if v >= EXTRA {
            return Ok(());
        }
        if self.counted.insert((v, dir as u8)) {
            let entries = self
                .tables
                .iter()
                .flat_map(|(_, t, _)| dir.dirs().iter().map(move |&d| t.map_or(0, |t| t.at(d, v).len())));
            self.budget.read(entries.sum())?;
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

    fn warm(&self, vs: &[u32], dir: WalkDirection) {
        // each vertex's slot, then the first entry of its list: loads that do not depend on each
        // other, so the processor has many misses in flight at once
        let mut touched = 0u32;
        for (_, t, _) in &self.tables {
            let Some(t) = t else { continue };
            for &d in dir.dirs() {
                for &v in vs {
                    touched = touched.wrapping_add(t.at(d, v).first().map_or(0, |e| e.other));
                }
            }
        }
        std::hint::black_box(touched);
    }

    fn vertex_names(&self, vs: &[u32]) -> Vec<String> {
        let names = self.adj.names();
        // the names' places first, then their text: the lookups of one pass do not wait on each
        // other (a walk's vertices are spread over the whole arena)
        let found: Vec<&str> =
            vs.iter().map(|&v| if v >= EXTRA { self.extra.name(v - EXTRA) } else { names.vertex_name(v) }).collect();
        found.into_iter().map(str::to_owned).collect()
    }

    fn edge_name(&self, e: u32) -> String {
        self.adj.names().edge_name(e).to_owned()
    }
}
