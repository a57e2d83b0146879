//! The [`WalkGraph`] of a walk when the in-memory adjacency is off: adjacency entries read from the
//! view's `graph:` keys (a prefix scan per edge table and direction), each vertex's steps read
//! once and kept, every entry counted against `max_visited`.

use super::adjacency::weight_ref;
use super::walk::{Budget, Cost, LocalNames, Step, WalkDirection, WalkGraph};
use crate::catalog::{Catalog, TableDef};
use crate::entity;
use crate::keys::{AdjValue, EntityKey, GraphKey};
use crate::service::core::cancel::Stop;
use crate::service::core::expiry::Expired;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};
use std::collections::HashMap;
use std::sync::Arc;

/// The steps of a walk, read from the keys.
pub(crate) struct StoreGraph<'a> {
    view: &'a ReadView,
    catalog: &'a Catalog,
    tables: &'a [Arc<TableDef>],
    budget: Budget<'a>,
    cost: Cost,
    vertices: LocalNames,
    edges: LocalNames,
    /// each vertex's steps, per direction (out, in, any)
    seen: [HashMap<u32, Vec<Step>>; 3],
    /// expired edges and vertices, not yet swept: never stepped along or onto
    expired: Expired<'a>,
}

impl<'a> StoreGraph<'a> {
    pub fn new(
        view: &'a ReadView,
        catalog: &'a Catalog,
        tables: &'a [Arc<TableDef>],
        stop: &'a Stop,
        cost: Cost,
        max_visited: usize,
    ) -> Self {
        let expired = Expired::new(view, catalog);
        StoreGraph {
            view,
            catalog,
            tables,
            budget: Budget::new(stop, max_visited),
            cost,
            vertices: LocalNames::default(),
            edges: LocalNames::default(),
            seen: Default::default(),
            expired,
        }
    }
}

/// The cost of edge `edge_id` of `table` under `cost`: 1, its declared weight (`declared`, from
/// its adjacency entry), or a field of its document.
pub(crate) fn edge_cost(
    view: &ReadView,
    catalog: &Catalog,
    cost: &Cost,
    table: &TableDef,
    edge_id: &str,
    declared: Option<f64>,
) -> Result<f64> {
    let Cost::Field(field) = cost else { return Ok(1.0) };
    let bad = |why: &str| ServiceError::InvalidWeight(format!("edge \"{}/{edge_id}\": {field:?} {why}", table.name));
    if table.weight_field.as_deref() == Some(field.as_str()) {
        return declared.ok_or_else(|| bad("is missing from its adjacency entry"));
    }
    let blob = view
        .get(Space::Entity, &EntityKey::new(&table.name, edge_id).encode())?
        .ok_or_else(|| bad("cannot be read: the edge document is missing"))?;
    catalog.with_dict(|dict| match entity::get_path(&blob, dict, &[field.as_str()])? {
        Some(v) => weight_ref(&v).ok_or_else(|| bad("is not a number >= 0")),
        None => Err(bad("is missing")),
    })
}

impl WalkGraph for StoreGraph<'_> {
    fn steps(&mut self, v: u32, dir: WalkDirection, out: &mut Vec<Step>) -> Result<()> {
        self.budget.expand()?;
        if let Some(s) = self.seen[dir as usize].get(&v) {
            out.extend_from_slice(s);
            return Ok(());
        }
        let vertex = self.vertices.name(v).to_owned();
        let mut steps = Vec::new();
        for table in self.tables {
            for &d in dir.dirs() {
                let prefix = GraphKey::vertex_prefix(d, &table.name, &vertex);
                for item in self.view.scan(Space::Graph, KeyRange::Prefix(prefix), false) {
                    let (key, value) = item?;
                    self.budget.read(1)?;
                    let k = GraphKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?;
                    let adj = AdjValue::decode(&value).map_err(|e| ServiceError::Internal(e.to_string()))?;
                    let stop = self.budget.stop();
                    if self.expired.contains(&table.name, &k.edge_id, stop)? || self.expired.vertex(&adj.other, stop)? {
                        continue;
                    }
                    let weight = edge_cost(self.view, self.catalog, &self.cost, table, &k.edge_id, adj.weight)?;
                    steps.push(Step {
                        edge: self.edges.number(&format!("{}/{}", table.name, k.edge_id)),
                        vertex: self.vertices.number(&adj.other),
                        dir: d,
                        weight,
                    });
                }
            }
        }
        out.extend_from_slice(&steps);
        self.seen[dir as usize].insert(v, steps);
        Ok(())
    }

    fn vertex(&mut self, name: &str) -> u32 {
        self.vertices.number(name)
    }

    fn vertex_name(&self, v: u32) -> String {
        self.vertices.name(v).to_owned()
    }

    fn edge_name(&self, e: u32) -> String {
        self.edges.name(e).to_owned()
    }
}
