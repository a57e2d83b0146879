//! The keys one write has staged: a put (`Some(value)`) or a delete (`None`) per key.
//!
//! Most keyspaces are only ever looked up by key within a write, so their staged keys are held
//! by hash: an import chunk stages tens of thousands of keys with long shared prefixes (a table
//! name, an index name), and an ordered map compares those prefixes at every level of every
//! insert and lookup (16% of the committer's instructions per imported document, callgrind). The
//! keyspaces a write scans as it sees them ([`super::WriteTx::scan_current`]: graph adjacency and
//! vector nodes) keep theirs in key order. The others are sorted once, when the write commits.

use super::Space;
use std::collections::{BTreeMap, HashMap};

type Hashed = HashMap<Vec<u8>, Option<Vec<u8>>, foldhash::fast::RandomState>;

/// A write's staged keys.
#[derive(Default)]
pub(super) struct Staged {
    /// keys of the keyspaces scanned within writes, in order
    ordered: BTreeMap<(Space, Vec<u8>), Option<Vec<u8>>>,
    /// keys of the other keyspaces, one map per keyspace (`Space as usize`)
    hashed: [Hashed; Space::ALL.len()],
    /// keys in `hashed`
    hashed_len: usize,
}

/// Whether a write may scan `space` as it sees it (its staged keys in order).
fn ordered(space: Space) -> bool {
    matches!(space, Space::Graph | Space::Vec)
}

impl Staged {
    /// Stages `value` for `key`; returns what was staged for it before (None: nothing).
    pub(super) fn insert(&mut self, space: Space, key: Vec<u8>, value: Option<Vec<u8>>) -> Option<Option<Vec<u8>>> {
        if ordered(space) {
            return self.ordered.insert((space, key), value);
        }
        let previous = self.hashed[space as usize].insert(key, value);
        self.hashed_len += usize::from(previous.is_none());
        previous
    }

    /// The bytes of every staged key and value.
    pub(super) fn bytes(&self) -> usize {
        let ordered = self.ordered.iter().map(|((_, k), v)| k.len() + v.as_ref().map_or(0, Vec::len));
        let hashed = self.hashed.iter().flatten().map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len));
        ordered.sum::<usize>() + hashed.sum::<usize>()
    }

    /// Unstages `key`.
    pub(super) fn remove(&mut self, space: Space, key: &[u8]) {
        if ordered(space) {
            self.ordered.remove(&(space, key.to_vec()));
        } else if self.hashed[space as usize].remove(key).is_some() {
            self.hashed_len -= 1;
        }
    }

    /// What is staged for `key`, if anything.
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        if ordered(space) {
            if self.ordered.is_empty() {
                return None;
            }
            return self.ordered.get(&(space, key.to_vec()));
        }
        self.hashed[space as usize].get(key)
    }

    /// The staged keys of `space` under `prefix`, in key order.
    pub(super) fn under(&self, space: Space, prefix: &[u8]) -> Vec<(&Vec<u8>, &Option<Vec<u8>>)> {
        if ordered(space) {
            use std::ops::Bound;
            let lo = (space, prefix.to_vec());
            return self
                .ordered
                .range((Bound::Included(&lo), Bound::Unbounded))
                .take_while(|((s, k), _)| *s == space && k.starts_with(prefix))
                .map(|((_, k), v)| (k, v))
                .collect();
        }
        // not a keyspace writes scan: correct all the same, at the cost of a sort
        let mut found: Vec<_> = self.hashed[space as usize].iter().filter(|(k, _)| k.starts_with(prefix)).collect();
        found.sort_unstable_by(|a, b| a.0.cmp(b.0));
        found
    }

    pub(super) fn len(&self) -> usize {
        self.ordered.len() + self.hashed_len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn clear(&mut self) {
        self.ordered.clear();
        for map in &mut self.hashed {
            map.clear();
        }
        self.hashed_len = 0;
    }

    /// Every staged key with its value, in key order within each keyspace: fjall's memtable
    /// takes keys in order faster (each insert walks the skiplist where the last one did).
    pub(super) fn into_keys(self) -> impl Iterator<Item = ((Space, Vec<u8>), Option<Vec<u8>>)> {
        let hashed = Space::ALL.into_iter().zip(self.hashed).flat_map(|(space, map)| {
            let mut keys: Vec<_> = map.into_iter().collect();
            keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            keys.into_iter().map(move |(k, v)| ((space, k), v))
        });
        self.ordered.into_iter().chain(hashed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_of_keyspace_stage_look_up_and_list_alike() {
        for space in [Space::Entity, Space::Graph] {
            let mut s = Staged::default();
            assert_eq!(s.insert(space, b"b2".to_vec(), Some(vec![2])), None);
            assert_eq!(s.insert(space, b"a1".to_vec(), None), None);
            assert_eq!(s.insert(space, b"b1".to_vec(), Some(vec![1])), None);
            assert_eq!(s.insert(space, b"b2".to_vec(), Some(vec![3])), Some(Some(vec![2])));
            s.insert(Space::Meta, b"b0".to_vec(), Some(vec![]));
            assert_eq!(s.len(), 4);
            assert_eq!(s.get(space, b"a1"), Some(&None));
            assert_eq!(s.get(space, b"zz"), None);
            let under: Vec<_> = s.under(space, b"b").into_iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(under, vec![(b"b1".to_vec(), Some(vec![1])), (b"b2".to_vec(), Some(vec![3]))]);
            s.remove(space, b"b1");
            s.remove(space, b"never");
            assert_eq!(s.len(), 3);
            let mut all: Vec<_> = s.into_keys().collect();
            all.sort();
            assert_eq!(all.len(), 3);
            assert!(all.contains(&((Space::Meta, b"b0".to_vec()), Some(vec![]))));
        }
    }
}
