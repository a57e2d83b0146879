//! Per-vertex adjacency lists of one edge table and direction, persistent: a version is frozen by
//! cloning a handful of `Arc`s, and a change copies only the chunk of 1024 vertex slots and the
//! one list it touches (`Arc::make_mut`), so a commit costs what it changes while readers of
//! older versions keep theirs unchanged.

use std::sync::Arc;

/// Vertex slots per chunk (a power of two).
const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;

/// One adjacency entry: the vertex at the other end, the edge, and its declared weight (0 when
/// the edge table declares none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Entry {
    pub other: u32,
    pub edge: u32,
    pub weight: f64,
}

/// The entries at one vertex, ordered by edge name (the order of the `graph:` keys).
pub(crate) type List = Arc<[Entry]>;

type Chunk = Vec<Option<List>>;

/// The lists of every vertex, by vertex number.
#[derive(Clone, Default)]
pub(crate) struct Lists {
    chunks: Vec<Arc<Chunk>>,
}

impl Lists {
    /// The entries at vertex `v` (none for a vertex this version does not know).
    pub fn at(&self, v: u32) -> &[Entry] {
        let (c, i) = ((v >> CHUNK_BITS) as usize, v as usize & (CHUNK - 1));
        self.chunks.get(c).and_then(|chunk| chunk[i].as_deref()).unwrap_or(&[])
    }

    /// Replaces the list of vertex `v` (an empty one is dropped).
    pub fn set(&mut self, v: u32, list: Vec<Entry>) {
        let (c, i) = ((v >> CHUNK_BITS) as usize, v as usize & (CHUNK - 1));
        if self.chunks.len() <= c {
            self.chunks.resize_with(c + 1, || Arc::new(vec![None; CHUNK]));
        }
        Arc::make_mut(&mut self.chunks[c])[i] = (!list.is_empty()).then(|| list.into());
    }

    /// Every vertex with a non-empty list, with it, by vertex number.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[Entry])> {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk.iter().enumerate().filter_map(move |(i, l)| l.as_deref().map(|l| (((c << CHUNK_BITS) + i) as u32, l)))
        })
    }

    /// Vertex slots allocated (a chunk at a time).
    pub fn slots(&self) -> usize {
        self.chunks.len() * CHUNK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(edge: u32) -> Entry {
        Entry { other: edge + 100, edge, weight: 0.0 }
    }

    #[test]
    fn a_frozen_copy_keeps_its_lists() {
        let mut lists = Lists::default();
        lists.set(3, vec![e(1), e(2)]);
        lists.set(5000, vec![e(3)]);
        let frozen = lists.clone();
        lists.set(3, vec![e(2)]);
        lists.set(7, vec![e(9)]);
        lists.set(5000, vec![]);
        assert_eq!(frozen.at(3), [e(1), e(2)]);
        assert_eq!(frozen.at(7), []);
        assert_eq!(frozen.at(5000), [e(3)]);
        assert_eq!(lists.at(3), [e(2)]);
        assert_eq!(lists.at(5000), []);
        assert_eq!(lists.at(1 << 30), []);
        assert_eq!(lists.iter().map(|(v, l)| (v, l.len())).collect::<Vec<_>>(), [(3, 1), (7, 1)]);
        assert_eq!(frozen.iter().map(|(v, _)| v).collect::<Vec<_>>(), [3, 5000]);
    }
}
