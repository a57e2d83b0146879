//! What the walks (traversal, shortest paths) run on: a [`WalkGraph`] of numbered vertices and edges,
//! read from the in-memory adjacency (`mem_walk`) or, when it is off, from the `graph:` keys
//! (`store_walk`), and the path algorithms' unit tests' own graph.

use super::super::Result;
use crate::keys::Direction;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
    pub(crate) fn dirs(self) -> &'static [Direction] {
        match self {
            WalkDirection::Out => &[Direction::Out],
            WalkDirection::In => &[Direction::In],
            WalkDirection::Any => &[Direction::Out, Direction::In],
        }
    }

    /// The direction of the same walk seen from its other end.
    pub(crate) fn reverse(self) -> WalkDirection {
        match self {
            WalkDirection::Out => WalkDirection::In,
            WalkDirection::In => WalkDirection::Out,
            WalkDirection::Any => WalkDirection::Any,
        }
    }

    pub(crate) fn tag(self) -> &'static [u8] {
        match self {
            WalkDirection::Out => b"out",
            WalkDirection::In => b"in",
            WalkDirection::Any => b"any",
        }
    }
}

/// One step along an edge from a vertex: numbers the walk's [`WalkGraph`] gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Step {
    /// the edge (one number per edge, whichever end it is seen from)
    pub edge: u32,
    /// the vertex reached
    pub vertex: u32,
    /// out (along the edge) or in (against it)
    pub dir: Direction,
    /// the edge's cost: 1 for hops, else its weight
    pub weight: f64,
}

/// Where an edge's cost comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cost {
    /// every edge costs 1
    Hops,
    /// the numeric edge field of that name: from the adjacency when it is the edge table's
    /// declared weight field, else from the edge document
    Field(String),
}

/// What the walks run on: the steps from a vertex, in the order of the `graph:` keys (edge table
/// as listed, out before in, then edge id), and the names behind the numbers.
pub(crate) trait WalkGraph {
    /// Appends the steps from `v` in direction `dir` to `out`.
    fn steps(&mut self, v: u32, dir: WalkDirection, out: &mut Vec<Step>) -> Result<()>;
    /// The number of vertex `name` (one without edges gets one too).
    fn vertex(&mut self, name: &str) -> u32;
    /// The name of vertex `v`, `"table/id"`.
    fn vertex_name(&self, v: u32) -> String;
    /// Readies the steps of vertices `vs`, about to be expanded: a graph in memory touches their
    /// lists in one pass, so their cache misses overlap instead of coming one per expansion.
    fn warm(&self, _vs: &[u32], _dir: WalkDirection) {}
    /// The names of vertices `vs`, in order (one call: a graph may look them up together).
    fn vertex_names(&self, vs: &[u32]) -> Vec<String> {
        vs.iter().map(|&v| self.vertex_name(v)).collect()
    }
    /// The name of edge `e`, `"edge_table/id"`.
    fn edge_name(&self, e: u32) -> String;
}

/// What bounds a walk: its stop (timeout, client gone), checked every 256 vertices expanded and
/// every 1024 entries read, and `max_visited`, the adjacency entries it may read.
pub(crate) struct Budget<'a> {
    stop: &'a crate::service::core::cancel::Stop,
    max_visited: usize,
    read: usize,
    calls: u64,
}

impl<'a> Budget<'a> {
    pub fn new(stop: &'a crate::service::core::cancel::Stop, max_visited: usize) -> Self {
        Budget { stop, max_visited, read: 0, calls: 0 }
    }

    /// One more vertex expanded.
    pub fn expand(&mut self) -> Result<()> {
        self.calls += 1;
        if self.calls.is_multiple_of(256) {
            self.stop.check()?;
        }
        Ok(())
    }

    /// `n` more entries read: 422 `max_visited_exceeded` past the budget.
    pub fn read(&mut self, n: usize) -> Result<()> {
        let before = self.read;
        self.read += n;
        if self.read > self.max_visited {
            return Err(super::super::ServiceError::MaxVisited(self.max_visited));
        }
        if before / 1024 != self.read / 1024 {
            self.stop.check()?;
        }
        Ok(())
    }

    pub fn stop(&self) -> &'a crate::service::core::cancel::Stop {
        self.stop
    }
}

/// Names numbered in the order met: the graphs that have no numbers of their own.
#[derive(Default)]
pub(crate) struct LocalNames {
    ids: std::collections::HashMap<String, u32, foldhash::fast::RandomState>,
    names: Vec<String>,
}

impl LocalNames {
    pub fn number(&mut self, name: &str) -> u32 {
        if let Some(&n) = self.ids.get(name) {
            return n;
        }
        self.names.push(name.to_owned());
        let n = (self.names.len() - 1) as u32;
        self.ids.insert(name.to_owned(), n);
        n
    }

    pub fn name(&self, n: u32) -> &str {
        self.names.get(n as usize).map_or("", String::as_str)
    }
}

#[cfg(test)]
pub(crate) mod memory {
    //! An in-memory [`WalkGraph`] for the algorithms' unit tests.
    use super::*;

    /// Edges `(id, from, to, weight)`.
    pub(crate) struct TestGraph {
        pub edges: Vec<(&'static str, &'static str, &'static str, f64)>,
        vertices: LocalNames,
        edge_names: LocalNames,
    }

    impl TestGraph {
        pub(crate) fn new(edges: Vec<(&'static str, &'static str, &'static str, f64)>) -> TestGraph {
            TestGraph { edges, vertices: LocalNames::default(), edge_names: LocalNames::default() }
        }
    }

    impl WalkGraph for TestGraph {
        fn steps(&mut self, v: u32, dir: WalkDirection, out: &mut Vec<Step>) -> Result<()> {
            let vertex = self.vertices.name(v).to_owned();
            for &d in dir.dirs() {
                for i in 0..self.edges.len() {
                    let (id, from, to, w) = self.edges[i];
                    let (at, other) = if d == Direction::Out { (from, to) } else { (to, from) };
                    if at == vertex {
                        let (edge, vertex) = (self.edge_names.number(id), self.vertices.number(other));
                        out.push(Step { edge, vertex, dir: d, weight: w });
                    }
                }
            }
            Ok(())
        }
        fn vertex(&mut self, name: &str) -> u32 {
            self.vertices.number(name)
        }
        fn vertex_name(&self, v: u32) -> String {
            self.vertices.name(v).to_owned()
        }
        fn edge_name(&self, e: u32) -> String {
            self.edge_names.name(e).to_owned()
        }
    }
}
