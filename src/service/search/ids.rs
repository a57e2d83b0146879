//! The ids of numbered documents, remembered per index: a search's page names its hits by number
//! (`ftdoc` holds each number's id), and reading those keys took about a quarter of a 1-term
//! search's time on the peers bench. A number, once given, names the same document for the
//! index's whole life (`maintain` never gives a number twice: the next number is kept even when
//! the index empties), so a remembered id is right for every snapshot that holds the number's
//! postings — no invalidation is needed. An index's ids are keyed by its creation time, so a
//! dropped and re-created index starts afresh; each index remembers at most [`MAX_IDS`], and
//! forgets them all when it would pass that.

use crate::catalog::IndexDef;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Most ids remembered per index.
pub const MAX_IDS: usize = 1 << 16;
/// Most indexes remembered.
const MAX_INDEXES: usize = 1024;

/// One index's remembered ids, by number.
pub type Ids = Mutex<HashMap<u64, Arc<str>>>;

/// The remembered ids of every fulltext index searched.
#[derive(Default)]
pub struct DocIds(Mutex<HashMap<(String, String, i64), Arc<Ids>>>);

impl DocIds {
    /// The remembered ids of `def`.
    pub fn of(&self, def: &IndexDef) -> Arc<Ids> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (def.table.clone(), def.name.clone(), def.created_at);
        if let Some(ids) = map.get(&key) {
            return ids.clone();
        }
        if map.len() >= MAX_INDEXES {
            map.clear();
        }
        map.entry(key).or_default().clone()
    }
}

/// The id of `num`, remembered or read with `read` (and then remembered).
pub fn id_of(
    ids: &Ids,
    num: u64,
    read: impl FnOnce() -> crate::service::Result<String>,
) -> crate::service::Result<Arc<str>> {
    if let Some(id) = ids.lock().unwrap_or_else(PoisonError::into_inner).get(&num) {
        return Ok(id.clone());
    }
    let id: Arc<str> = read()?.into();
    let mut map = ids.lock().unwrap_or_else(PoisonError::into_inner);
    if map.len() >= MAX_IDS {
        map.clear();
    }
    map.insert(num, id.clone());
    Ok(id)
}
