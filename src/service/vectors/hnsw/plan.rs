//! Inserts planned outside the writer and applied on it (see the parent module's doc).

use super::{Cand, Changes, Graph, InsertPlan, NEW};
use std::sync::Arc;

impl Graph {
    /// The neighbour search of inserting `id` with vector `v`, on this state of the graph (the
    /// node `id` has now, if any, is left out: the apply removes it first). `None` when the graph
    /// is empty or `id` is its entry point: the insert then runs in full on the writer.
    pub fn plan(&self, id: &str, v: &[f32]) -> Option<InsertPlan> {
        let exclude = self.slot(id);
        let ep = self.entry.filter(|e| Some(*e) != exclude)?;
        let level = self.level_for(id);
        let top = self.level(ep);
        let mut cur = ep;
        for layer in (level + 1..=top).rev() {
            cur = self.greedy(v, cur, layer);
        }
        let dist = |a: u32, b: u32| match (a, b) {
            (NEW, NEW) => 0.0,
            (NEW, x) | (x, NEW) => self.dist_q(v, x),
            (x, y) => self.dist(x, y),
        };
        let mut plan = InsertPlan {
            level,
            epoch: self.epoch,
            inserted: self.inserted,
            len: self.len() as u64,
            links: vec![Vec::new(); level.min(top) + 1],
            updates: Vec::new(),
        };
        let mut eps = vec![cur];
        for layer in (0..=level.min(top)).rev() {
            let mut not_old = |s: u32| Some(s) != exclude;
            let w = self.search_layer(v, &eps, self.p.ef_construction, layer, Some(&mut not_old));
            let chosen = self.select_by(&w, self.p.m, false, &dist);
            for &n in &chosen {
                let mut list: Vec<u32> = self.links.get(n, layer).to_vec();
                list.push(NEW);
                if list.len() > self.max_links(layer) {
                    let mut c: Vec<Cand> = list.iter().map(|&x| Cand { d: dist(n, x), s: x }).collect();
                    c.sort();
                    list = self.select_by(&c, self.max_links(layer), false, &dist);
                }
                plan.updates.push((n, layer, self.stamps[n as usize], list));
            }
            plan.links[layer] = chosen.iter().filter_map(|&n| Some((n, self.id(n)?.clone()))).collect();
            if w.is_empty() {
                return None;
            }
            eps = w.iter().map(|c| c.s).collect();
        }
        Some(plan)
    }

    /// Inserts (or replaces) `id` following a plan made on an earlier state (see the module doc).
    pub fn apply_plan(&mut self, id: &str, v: &[f32], plan: &InsertPlan, changes: &mut Changes) {
        if self.holds(id, v, changes) {
            return;
        }
        self.remove(id, changes);
        // planned on another graph (replaced by a rebuild, or reloaded): its slots mean nothing here
        if plan.epoch != self.epoch
            || self.entry.is_none()
            || self.inserted > plan.inserted + super::plan_slack(plan.len as usize) as u64
        {
            return self.insert(id, v, changes);
        }
        let top = self.entry.map_or(0, |e| self.level(e));
        let id: Arc<str> = Arc::from(id);
        let slot = self.alloc(id.clone(), v, plan.level, changes);
        for (layer, list) in plan.links.iter().enumerate() {
            let chosen: Vec<u32> = list
                .iter()
                .filter(|(n, nid)| self.id(*n) == Some(nid) && self.level(*n) >= layer && *n != slot)
                .map(|(n, _)| *n)
                .collect();
            self.set_links(slot, layer, chosen);
        }
        for (n, layer, stamp, list) in &plan.updates {
            let (n, layer) = (*n, *layer);
            // (`id` is `None` for a slot out of range too)
            if n == slot || self.id(n).is_none() || self.level(n) < layer {
                continue;
            }
            let list = if self.stamps[n as usize] == *stamp {
                list.iter().map(|&x| if x == NEW { slot } else { x }).collect()
            } else {
                // changed since the plan: add the new node to its current list and prune again
                self.linked_back(n, layer, slot)
            };
            self.set_links(n, layer, list);
            changes.links.insert(n);
        }
        if plan.level > top {
            self.entry = Some(slot);
        }
    }
}
