//! The out-links of every slot, laid out for the walk: layer 0 — which every search spends most of
//! its time in, and which every node has — is one flat array with a fixed stride per slot (a
//! count, then room for `2m` slots), so reading a node's neighbours is one indexed load with no
//! pointer to chase, as in hnswlib's level-0 block; the upper layers (a node has them with
//! probability 1/m) are per-slot lists.

/// Out-links by slot and layer.
pub(super) struct Links {
    /// entries per slot in `base`: 1 (the count) + the layer-0 cap
    stride: usize,
    /// per slot: the layer-0 count, then that many neighbours (the rest of the stride unused)
    base: Vec<u32>,
    /// per slot: the lists of layers 1..=level (empty for a level-0 or freed slot)
    upper: Vec<Vec<Vec<u32>>>,
}

impl Links {
    /// No slots; layer 0 holds up to `cap0` links per slot.
    pub(super) fn new(cap0: usize) -> Links {
        Links { stride: cap0 + 1, base: Vec::new(), upper: Vec::new() }
    }

    /// Slots.
    pub(super) fn len(&self) -> usize {
        self.upper.len()
    }

    /// Makes room for `n` more slots.
    pub(super) fn reserve(&mut self, n: usize) {
        self.base.reserve(n * self.stride);
        self.upper.reserve(n);
    }

    /// Adds a slot at the end with empty lists up to `level`.
    pub(super) fn push(&mut self, level: usize) {
        self.base.resize(self.base.len() + self.stride, 0);
        self.upper.push(vec![Vec::new(); level]);
    }

    /// Empties a slot's lists and gives it `level` layers (a reused slot).
    pub(super) fn reset(&mut self, s: u32, level: usize) {
        if let Some(c) = self.base.get_mut(s as usize * self.stride) {
            *c = 0;
        }
        if let Some(u) = self.upper.get_mut(s as usize) {
            *u = vec![Vec::new(); level];
        }
    }

    /// The highest layer of a slot (0 for a freed one).
    pub(super) fn level(&self, s: u32) -> usize {
        self.upper.get(s as usize).map_or(0, Vec::len)
    }

    /// A slot's neighbours at a layer (none for a slot or layer it does not have).
    #[inline]
    pub(super) fn get(&self, s: u32, layer: usize) -> &[u32] {
        if layer == 0 {
            let at = s as usize * self.stride;
            let n = self.base.get(at).map_or(0, |c| *c as usize);
            return self.base.get(at + 1..at + 1 + n).unwrap_or(&[]);
        }
        self.upper.get(s as usize).and_then(|u| u.get(layer - 1)).map_or(&[], Vec::as_slice)
    }

    /// Replaces a slot's list at a layer it has; at layer 0, what is past the cap is dropped.
    pub(super) fn set(&mut self, s: u32, layer: usize, list: &[u32]) {
        if layer == 0 {
            let at = s as usize * self.stride;
            let n = list.len().min(self.stride - 1);
            if let Some(dst) = self.base.get_mut(at..at + 1 + n) {
                dst[0] = n as u32;
                dst[1..].copy_from_slice(&list[..n]);
            }
        } else if let Some(l) = self.upper.get_mut(s as usize).and_then(|u| u.get_mut(layer - 1)) {
            l.clear();
            l.extend_from_slice(list);
        }
    }

    /// Adds one link (a load): false when the slot does not have the layer or its layer-0 list
    /// is full.
    pub(super) fn push_link(&mut self, s: u32, layer: usize, to: u32) -> bool {
        if layer == 0 {
            let at = s as usize * self.stride;
            let Some(&n) = self.base.get(at) else { return false };
            if n as usize + 1 >= self.stride {
                return false;
            }
            self.base[at + 1 + n as usize] = to;
            self.base[at] = n + 1;
            return true;
        }
        match self.upper.get_mut(s as usize).and_then(|u| u.get_mut(layer - 1)) {
            Some(l) => {
                l.push(to);
                true
            }
            None => false,
        }
    }

    /// Bytes held (approximate).
    pub(super) fn memory_bytes(&self) -> usize {
        let upper: usize = self.upper.iter().map(|u| 24 + u.iter().map(|l| l.capacity() * 4 + 24).sum::<usize>()).sum();
        self.base.capacity() * 4 + upper
    }
}

#[cfg(test)]
mod tests {
    use super::Links;

    #[test]
    fn lists_by_slot_and_layer() {
        let mut l = Links::new(4);
        l.push(0);
        l.push(2);
        assert_eq!((l.len(), l.level(0), l.level(1)), (2, 0, 2));
        l.set(1, 0, &[0, 7, 8, 9, 10]);
        assert_eq!(l.get(1, 0), [0, 7, 8, 9], "capped at 4");
        l.set(1, 2, &[0]);
        assert_eq!(l.get(1, 2), [0]);
        assert!(l.get(0, 1).is_empty() && l.get(5, 0).is_empty());
        assert!(!l.push_link(1, 0, 3), "full");
        assert!(l.push_link(0, 0, 1) && l.get(0, 0) == [1]);
        assert!(!l.push_link(0, 1, 1), "slot 0 has no layer 1");
        l.reset(1, 1);
        assert_eq!((l.level(1), l.get(1, 0).len(), l.get(1, 1).len()), (1, 0, 0));
    }
}
