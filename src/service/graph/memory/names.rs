//! The names the in-memory adjacency numbers: vertices (`"table/id"`, looked up both ways) and
//! edges (`"edge_table/id"`, by number only). Numbers only grow, so a reader of an older version
//! finds every number that version holds; names whose edges went are garbage until the next
//! compaction (`Adjacency::compacted`). Shared by the versions of one lineage behind a lock the
//! committer takes to add names, and readers to turn numbers into names.
//!
//! Each kind of name lives end to end in one text arena, in number order, with the end offset of
//! each: no allocation per name, 8 bytes beside its text, and the names of neighbouring numbers
//! (a vertex's edges, loaded together) side by side in memory. Vertex lookups go through a hash
//! table of numbers that keeps each name's hash, so growing it never reads the names again.

use hashbrown::HashTable;
use std::hash::BuildHasher;

/// What one name costs beside its bytes: its end offset (and for a vertex, its hash-table slot
/// with the table's spare room).
const EDGE_OVERHEAD: usize = 8;
const VERTEX_OVERHEAD: usize = 8 + 16 * 8 / 7 + 1;

/// Names end to end, by number.
#[derive(Default)]
struct Arena {
    text: String,
    /// where each name ends in `text`
    ends: Vec<usize>,
}

impl Arena {
    fn push(&mut self, parts: &[&str]) -> u32 {
        for p in parts {
            self.text.push_str(p);
        }
        self.ends.push(self.text.len());
        (self.ends.len() - 1) as u32
    }

    fn get(&self, n: u32) -> &str {
        let n = n as usize;
        let Some(&end) = self.ends.get(n) else { return "" };
        let start = if n == 0 { 0 } else { self.ends[n - 1] };
        self.text.get(start..end).unwrap_or("")
    }

    fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Vertex and edge names by number.
#[derive(Default)]
pub(crate) struct Names {
    vertices: Arena,
    /// vertex numbers, with their name's hash
    ids: HashTable<(u64, u32)>,
    hasher: foldhash::fast::FixedState,
    edges: Arena,
}

impl Names {
    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// The number of a vertex, if it has one.
    pub fn vertex(&self, name: &str) -> Option<u32> {
        let hash = self.hash(name);
        self.ids.find(hash, |&(h, v)| h == hash && self.vertices.get(v) == name).map(|&(_, v)| v)
    }

    /// The number of a vertex, given one if it has none.
    pub fn intern(&mut self, name: &str) -> u32 {
        let hash = self.hash(name);
        let vertices = &mut self.vertices;
        let entry = self.ids.entry(hash, |&(h, v)| h == hash && vertices.get(v) == name, |&(h, _)| h);
        match entry {
            hashbrown::hash_table::Entry::Occupied(o) => o.get().1,
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let v = vertices.push(&[name]);
                slot.insert((hash, v));
                v
            }
        }
    }

    /// A new number for edge `id` of `table` (named `"table/id"`).
    pub fn add_edge(&mut self, table: &str, id: &str) -> u32 {
        self.edges.push(&[table, "/", id])
    }

    /// The name of vertex `v` (a number it handed out).
    pub fn vertex_name(&self, v: u32) -> &str {
        self.vertices.get(v)
    }

    /// The name of edge `e`, `"edge_table/id"`.
    pub fn edge_name(&self, e: u32) -> &str {
        self.edges.get(e)
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
        self.vertices.text.len()
            + self.vertices.len() * VERTEX_OVERHEAD
            + self.edges.text.len()
            + self.edges.len() * EDGE_OVERHEAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_numbered_in_order_and_found_both_ways() {
        let mut n = Names::default();
        let (a, b) = (n.intern("v/a"), n.intern("v/bb"));
        assert_eq!((a, b, n.intern("v/a")), (0, 1, 0));
        assert_eq!((n.vertex("v/bb"), n.vertex("v/c"), n.vertex("")), (Some(1), None, None));
        assert_eq!((n.vertex_name(0), n.vertex_name(1), n.vertex_name(9)), ("v/a", "v/bb", ""));
        assert_eq!((n.add_edge("e", "x/y"), n.add_edge("e", "")), (0, 1));
        assert_eq!((n.edge_name(0), n.edge_name(1), n.edge_name(2)), ("e/x/y", "e/", ""));
        // many more: the table grows and every name is still found
        for i in 0..10_000 {
            assert_eq!(n.intern(&format!("w/{i}")), i + 2);
        }
        assert!((0..10_000).all(|i| n.vertex(&format!("w/{i}")) == Some(i + 2)));
        assert_eq!((n.vertices(), n.edges()), (10_002, 2));
    }
}
