//! Loading a graph from its stored nodes and links.

use super::{Graph, Params};
use std::sync::Arc;

/// Builds a graph from its stored nodes as the keys are read, in two passes: every node at its
/// slot with its vector and level ([`Loader::node`], in slot order; the slots between are free),
/// then each node's links ([`Loader::link`]). A link to a slot that is not a node, to the node
/// itself, or to a node below that layer is dropped (`check` reports it).
pub struct Loader {
    g: Graph,
    /// slots the graph may have (a node key past them is damaged)
    slots: usize,
}

impl Loader {
    /// An empty graph to load into, of at most `slots` slots.
    pub fn new(p: Params, slots: usize) -> Loader {
        let mut g = Graph::new(p);
        // no more than the keys could fill (a damaged slot count must not allocate much more)
        let room = slots.min(1 << 24);
        g.arena.reserve(room, p.dim);
        g.ids.reserve(room);
        g.stamps.reserve(room);
        g.links.reserve(room);
        g.by_id.reserve(room);
        Loader { g, slots }
    }

    /// Adds a node at slot `s` (above every slot added before, below the loader's `slots`) with
    /// `vector` (the index's dimension of values); false (nothing added) when the slot is out of
    /// order or range or the id is already a node.
    pub fn node(&mut self, s: u32, id: &str, vector: &[f32], level: usize) -> bool {
        let g = &mut self.g;
        if (s as usize) < g.ids.len() || s as usize >= self.slots || g.by_id.contains_key(id) {
            return false;
        }
        while g.ids.len() < s as usize {
            let free = g.ids.len() as u32;
            g.arena.push(&[], g.p.dim);
            g.ids.push(None);
            g.links.push(0);
            g.stamps.push(0);
            g.free.push(free);
        }
        g.inserted += 1;
        g.arena.push(vector, g.p.dim);
        g.push_slot(Arc::from(id), level);
        true
    }

    /// Gives the loaded node at slot `s` (with no links yet) `level` layers; nothing for a slot
    /// that holds no node.
    pub fn set_level(&mut self, s: u32, level: usize) {
        if self.g.id(s).is_some() && level > 0 {
            self.g.links.reset(s, level.min(super::MAX_LEVEL));
        }
    }

    /// The slot of a loaded node.
    pub fn slot(&self, id: &str) -> Option<u32> {
        self.g.slot(id)
    }

    /// Adds a link of node `s` at `layer` to slot `to`, once every node is added.
    pub fn link(&mut self, s: u32, layer: usize, to: u32) {
        if to != s && self.g.id(to).is_some() && self.g.level(to) >= layer && self.g.id(s).is_some() {
            self.g.links.push_link(s, layer, to);
        }
    }

    /// The graph, with its entry point.
    pub fn finish(self) -> Graph {
        let mut g = self.g;
        g.free.reverse();
        g.entry = g.by_id.values().copied().max_by_key(|s| (g.level(*s), std::cmp::Reverse(*s)));
        g
    }
}
