//! The names the in-memory adjacency numbers: vertices (`"table/id"`, looked up both ways) and
//! edges (`"edge_table/id"`, by number only). Numbers only grow, so a reader of an older version
//! finds every number that version holds; names whose edges went are garbage until the next
//! compaction (`Adjacency::compacted`). Shared by the versions of one lineage behind a lock the
//! committer takes to add names, and readers to turn numbers into names.

use std::collections::HashMap;
use std::sync::Arc;

/// What one name costs beside its bytes: its box (and for a vertex, its map slot).
const EDGE_OVERHEAD: usize = 16;
const VERTEX_OVERHEAD: usize = 16 + 16 + 8 + 8;

/// Vertex and edge names by number.
#[derive(Default)]
pub(crate) struct Names {
    ids: HashMap<Arc<str>, u32, foldhash::fast::RandomState>,
    vertices: Vec<Arc<str>>,
    edges: Vec<Box<str>>,
    bytes: usize,
}

impl Names {
    /// The number of a vertex, if it has one.
    pub fn vertex(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The number of a vertex, given one if it has none.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.vertices.len() as u32;
        let name: Arc<str> = name.into();
        self.bytes += name.len() + VERTEX_OVERHEAD;
        self.vertices.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    /// A new number for edge `"edge_table/id"`.
    pub fn add_edge(&mut self, name: String) -> u32 {
        self.bytes += name.len() + EDGE_OVERHEAD;
        self.edges.push(name.into_boxed_str());
        (self.edges.len() - 1) as u32
    }

    /// The name of vertex `v` (a number it handed out).
    pub fn vertex_name(&self, v: u32) -> &str {
        self.vertices.get(v as usize).map_or("", |n| n)
    }

    /// The name of edge `e`, `"edge_table/id"`.
    pub fn edge_name(&self, e: u32) -> &str {
        self.edges.get(e as usize).map_or("", |n| n)
    }

    /// Vertex numbers handed out.
    pub fn vertices(&self) -> usize {
        self.vertices.len()
    }

    /// Edge numbers handed out.
    pub fn edges(&self) -> usize {
        self.edges.len()
    }

    /// The bytes the names take, about.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}
