//! Process-wide dictionary of object keys (field names).

use std::collections::HashMap;
use std::sync::Arc;

use super::{Error, MAX_FIELD_NAME_LEN, MAX_FIELD_NAMES, Result};

/// Interns object keys so that a stored key costs a 1-3 byte id instead of
/// its text (the idea of VelocyPack's attribute translator).
///
/// Ids are dense and assigned in order, so the dictionary is persisted as an
/// append-only list of names: [`names_from`](Self::names_from) yields what a
/// write added, [`from_names`](Self::from_names) reloads the list, and
/// [`truncate`](Self::truncate) rolls back names of an aborted write.
/// Pure data: persisting and locking are the caller's job.
#[derive(Debug, Clone, Default)]
pub struct FieldDict {
    names: Vec<Arc<str>>,
    // Arc shares the text between both directions of the mapping.
    ids: HashMap<Arc<str>, u32>,
}

impl FieldDict {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds a dictionary from a persisted name list; each name's id is
    /// its 0-based position.
    ///
    /// Fails on a list that [`intern`](Self::intern) could not have produced:
    /// a duplicate, a name over [`MAX_FIELD_NAME_LEN`] bytes, or more than
    /// [`MAX_FIELD_NAMES`] names.
    ///
    /// # Errors
    /// [`Error::DuplicateFieldName`], [`Error::FieldNameTooLong`] or
    /// [`Error::DictionaryFull`]: the persisted list is corrupt.
    pub fn from_names(names: impl IntoIterator<Item = String>) -> Result<Self> {
        let mut dict = Self::new();
        for name in names {
            if name.len() > MAX_FIELD_NAME_LEN {
                return Err(Error::FieldNameTooLong(name.len()));
            }
            if dict.names.len() >= MAX_FIELD_NAMES {
                return Err(Error::DictionaryFull);
            }
            if dict.ids.contains_key(name.as_str()) {
                return Err(Error::DuplicateFieldName(name));
            }
            dict.push(Arc::from(name));
        }
        Ok(dict)
    }

    /// The id of `name`, if it has one.
    #[inline]
    pub fn id_of(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The name with id `id`, if any.
    #[inline]
    pub fn name_of(&self, id: u32) -> Option<&str> {
        self.names.get(usize::try_from(id).ok()?).map(|n| &**n)
    }

    /// Number of names held (also the next id to be assigned).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name has been interned yet.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The id of `name`, assigning the next id if it is new.
    ///
    /// Returns `None`, and assigns nothing, when `name` is longer than
    /// [`MAX_FIELD_NAME_LEN`] bytes or the dictionary already holds
    /// [`MAX_FIELD_NAMES`] names; the encoder then writes the key inline.
    /// Long keys are left out because they are rare, often data-like (ids,
    /// hashes) and would bloat a dictionary that every process keeps in memory.
    #[inline]
    pub fn intern(&mut self, name: &str) -> Option<u32> {
        if let Some(&id) = self.ids.get(name) {
            return Some(id);
        }
        if name.len() > MAX_FIELD_NAME_LEN || self.names.len() >= MAX_FIELD_NAMES {
            return None;
        }
        Some(self.push(Arc::from(name)))
    }

    /// Whether [`intern`](Self::intern) would give `name`, which the
    /// dictionary does not hold, an id (it is short enough and there is room).
    #[inline]
    pub fn could_intern(&self, name: &str) -> bool {
        name.len() <= MAX_FIELD_NAME_LEN && self.names.len() < MAX_FIELD_NAMES
    }

    /// The names with ids `start..`, in id order: after a write, pass the
    /// length taken before it to get the names it added and persist them.
    pub fn names_from(&self, start: u32) -> impl Iterator<Item = (u32, &str)> {
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        self.names
            .iter()
            .enumerate()
            .skip(start)
            // Ids never exceed MAX_FIELD_NAMES, so the cast is lossless.
            .map(|(id, name)| (id as u32, &**name))
    }

    /// Forgets every name with an id `>= len` (no-op if `len >= self.len()`):
    /// rolls back the names added by a write that was then aborted.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.names.len() {
            return;
        }
        for name in self.names.drain(len..) {
            self.ids.remove(&*name);
        }
    }

    fn push(&mut self, name: Arc<str>) -> u32 {
        // Callers check the MAX_FIELD_NAMES cap first, so the id fits a u32.
        let id = self.names.len() as u32;
        self.ids.insert(Arc::clone(&name), id);
        self.names.push(name);
        id
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn intern_assigns_dense_ids() {
        let mut d = FieldDict::new();
        assert!(d.is_empty());
        assert_eq!(d.intern("a"), Some(0));
        assert_eq!(d.intern("b"), Some(1));
        assert_eq!(d.intern("a"), Some(0));
        assert_eq!(d.len(), 2);
        assert_eq!(d.id_of("b"), Some(1));
        assert_eq!(d.id_of("c"), None);
        assert_eq!(d.name_of(1), Some("b"));
        assert_eq!(d.name_of(2), None);
        assert_eq!(d.name_of(u32::MAX), None);
    }

    #[test]
    fn ids_stable_across_reload() {
        let mut d = FieldDict::new();
        for n in ["name", "email", "", "ünïcødé", "🦀"] {
            d.intern(n);
        }
        let names: Vec<String> = d.names_from(0).map(|(_, n)| n.to_owned()).collect();
        let e = FieldDict::from_names(names).unwrap();
        assert_eq!(e.len(), d.len());
        for (id, name) in d.names_from(0) {
            assert_eq!(e.id_of(name), Some(id));
            assert_eq!(e.name_of(id), Some(name));
        }
        let added: Vec<_> = d.names_from(3).collect();
        assert_eq!(added, vec![(3, "ünïcødé"), (4, "🦀")]);
        assert_eq!(d.names_from(99).count(), 0);
    }

    #[test]
    fn truncate_rolls_back() {
        let mut d = FieldDict::new();
        d.intern("a");
        let mark = d.len();
        d.intern("b");
        d.intern("c");
        d.truncate(mark);
        assert_eq!(d.len(), 1);
        assert_eq!(d.id_of("b"), None);
        assert_eq!(d.id_of("c"), None);
        assert_eq!(d.intern("c"), Some(1));
        d.truncate(10);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn caps() {
        let mut d = FieldDict::new();
        let max = "k".repeat(MAX_FIELD_NAME_LEN);
        assert_eq!(d.intern(&max), Some(0));
        assert_eq!(d.intern(&"k".repeat(MAX_FIELD_NAME_LEN + 1)), None);
        assert_eq!(d.len(), 1);

        let full = FieldDict::from_names((0..MAX_FIELD_NAMES).map(|i| i.to_string())).unwrap();
        let mut full2 = full.clone();
        assert_eq!(full2.intern("new"), None);
        assert_eq!(full2.intern("7"), Some(7));
        assert_eq!(full2.len(), MAX_FIELD_NAMES);
    }

    #[test]
    fn from_names_rejects_bad_lists() {
        let dup = FieldDict::from_names(["a".to_owned(), "a".to_owned()]);
        assert_eq!(dup.unwrap_err(), Error::DuplicateFieldName("a".into()));
        let long = FieldDict::from_names(["x".repeat(65)]);
        assert_eq!(long.unwrap_err(), Error::FieldNameTooLong(65));
        let many = FieldDict::from_names((0..=MAX_FIELD_NAMES).map(|i| i.to_string()));
        assert_eq!(many.unwrap_err(), Error::DictionaryFull);
    }
}
