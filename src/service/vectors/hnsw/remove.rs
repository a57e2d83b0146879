//! Deletes: a removed node's in-links found through the reverse links, and each repaired.

use super::{Cand, Changes, Graph};

impl Graph {
    /// Removes the node `id`, repairing the links of every node that pointed to it.
    pub fn remove(&mut self, id: &str, changes: &mut Changes) -> bool {
        let Some(slot) = self.slot(id) else { return false };
        for layer in 0..=self.level(slot) {
            let out = self.links.get(slot, layer).to_vec();
            let ins = self.rev()[slot as usize][layer].clone();
            self.set_links(slot, layer, Vec::new());
            for r in ins {
                let mut pool: Vec<u32> = self.links.get(r, layer).iter().copied().filter(|x| *x != slot).collect();
                pool.extend(out.iter().copied().filter(|x| *x != r && *x != slot));
                pool.sort_unstable();
                pool.dedup();
                let mut c: Vec<Cand> = pool.iter().map(|&x| Cand { d: self.dist(r, x), s: x }).collect();
                c.sort();
                let chosen = self.select(&c, self.max_links(layer), true);
                self.set_links(r, layer, chosen);
                changes.links.insert(r);
            }
        }
        let id = self.ids[slot as usize].take();
        if let Some(id) = id {
            self.by_id.remove(&id);
        }
        changes.nodes.insert(slot);
        changes.links.insert(slot);
        self.links.reset(slot, 0);
        if let Some(r) = self.rev().get_mut(slot as usize) {
            r.clear();
        }
        self.stamps[slot as usize] += 1;
        self.free.push(slot);
        if self.entry == Some(slot) {
            self.entry = self.by_id.values().copied().max_by_key(|s| (self.level(*s), std::cmp::Reverse(*s)));
        }
        true
    }

    /// The reverse links, built from the links on first use.
    pub(super) fn rev(&mut self) -> &mut Vec<Vec<Vec<u32>>> {
        let links = &self.links;
        self.rev.get_or_insert_with(|| {
            let mut rev: Vec<Vec<Vec<u32>>> = (0..links.len() as u32)
                .map(|s| if self.ids[s as usize].is_some() { vec![Vec::new(); links.level(s) + 1] } else { Vec::new() })
                .collect();
            for s in 0..links.len() as u32 {
                for layer in 0..=links.level(s) {
                    for &n in links.get(s, layer) {
                        if let Some(r) = rev.get_mut(n as usize).and_then(|r| r.get_mut(layer)) {
                            r.push(s);
                        }
                    }
                }
            }
            rev
        })
    }
}
