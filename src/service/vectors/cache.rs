//! The in-memory graph of each vector index, loaded from its `vec:` keys on first use and kept in
//! step by every write's finish step (`vectors::finish`).

use super::hnsw::Graph;
use super::layout;
use super::params::params_of;
use crate::catalog::{Catalog, IndexDef, IndexKind};
use crate::service::Result;
use crate::storage::ReadView;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

/// One index's cached graph.
pub struct Cached {
    /// the definition's `created_at`: a re-created index of the same name has another graph
    pub created_at: i64,
    /// the graph
    pub graph: RwLock<Graph>,
}

/// The cached graphs of every vector index, by (table, index).
#[derive(Default)]
pub struct Graphs {
    map: RwLock<HashMap<(String, String), Arc<Cached>>>,
}

impl Graphs {
    /// The graph of a maintained index (loaded from its keys on first use), or `None` when the
    /// catalog no longer has this index.
    pub fn get(
        &self,
        store_view: &dyn Fn() -> ReadView,
        catalog: &Catalog,
        table: &str,
        index: &str,
    ) -> Result<Option<Arc<Cached>>> {
        let Some(def) = catalog.index(table, index).filter(|d| d.kind == IndexKind::Vector && d.is_maintained()) else {
            return Ok(None);
        };
        let key = (table.to_owned(), index.to_owned());
        if let Some(c) = self.map.read().unwrap_or_else(PoisonError::into_inner).get(&key)
            && c.created_at == def.created_at
        {
            return Ok(Some(c.clone()));
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = map.get(&key)
            && c.created_at == def.created_at
        {
            return Ok(Some(c.clone()));
        }
        let graph = load(&store_view(), &def)?;
        // checked again under the map's lock: an index dropped (and forgotten) since the check
        // above must not get its graph cached again
        if catalog.index(table, index).is_none_or(|d| d.created_at != def.created_at || !d.is_maintained()) {
            return Ok(None);
        }
        let cached = Arc::new(Cached { created_at: def.created_at, graph: RwLock::new(graph) });
        map.insert(key, cached.clone());
        Ok(Some(cached))
    }

    /// The graph of an index if it is cached already (never loads it).
    pub fn cached(&self, table: &str, index: &str) -> Option<Arc<Cached>> {
        self.map.read().unwrap_or_else(PoisonError::into_inner).get(&(table.to_owned(), index.to_owned())).cloned()
    }

    /// Replaces the cache of an index with an empty graph (its keys are being removed in the
    /// same write).
    pub fn reset(&self, def: &IndexDef) -> Result<()> {
        let cached = Arc::new(Cached { created_at: def.created_at, graph: RwLock::new(Graph::new(params_of(def)?)) });
        self.map.write().unwrap_or_else(PoisonError::into_inner).insert((def.table.clone(), def.name.clone()), cached);
        Ok(())
    }

    /// The memory an index's cached graph takes (estimated), if it is loaded.
    pub fn memory_bytes(&self, table: &str, index: &str) -> Option<usize> {
        let cached = self.cached(table, index)?;
        let bytes = cached.graph.read().unwrap_or_else(PoisonError::into_inner).memory_bytes();
        Some(bytes)
    }

    /// Forgets the caches of a dropped table's indexes.
    pub fn forget_table(&self, table: &str) {
        self.map.write().unwrap_or_else(PoisonError::into_inner).retain(|(t, _), _| t != table);
    }

    /// Forgets every cached graph (a follower's, once the leader changed vector keys: each is
    /// read again from its keys on next use).
    pub fn forget_all(&self) {
        self.map.write().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// Forgets the cache of an index (dropped).
    pub fn forget(&self, table: &str, index: &str) {
        self.map.write().unwrap_or_else(PoisonError::into_inner).remove(&(table.to_owned(), index.to_owned()));
    }
}

/// Reads an index's graph from its keys.
pub fn load(view: &ReadView, def: &IndexDef) -> Result<Graph> {
    let p = params_of(def)?;
    match layout::load(view, &def.table, &def.name, p)? {
        Some(graph) => Ok(graph),
        // format 3's keys, until the upgrade rewrites them
        None => super::upgrade::load(view, &def.table, &def.name, p),
    }
}
