//! TTL: documents that expire, by their own `_expires_at` or by a `ttl` index (an indexed time
//! plus `expire_after`). A document that expires has exactly one `ttlidx:{table}:{expire_at}:{id}`
//! entry, at the earliest of those times, staged in the same write as the document by
//! [`stage`] (the TTL step of the write pipeline, `write::derived`, so every write path keeps it). Reads hide a document
//! from the moment it expires ([`expiry`]); the sweep (`documents/ttl_sweep.rs`) deletes it later, through the
//! ordinary delete path, so its index, fulltext and graph entries go with it.
//!
//! Why the old entry is found without a lookup: it is at the expiry the stored document had. Only
//! while a TTL index is building may that differ from what the current definitions compute (the
//! build has not reached the document), so then every candidate time is removed; a dropped TTL
//! index's entries are moved by [`Ttl::repair_ttl`] before the drop finishes.

use super::core::{Core, Handle};
use super::{Result, ServiceError};
use crate::catalog::Catalog;
use crate::keys::{EntityKey, TtlKey, prefix_successor, table_prefix};
use crate::service::core::change::Change;
use crate::service::core::expiry::Expiry;
use crate::storage::{KeyRange, Space, WriteTx};
use std::ops::Bound;
use std::sync::Arc;

/// The TTL model: the expiry entries (`ttlidx:`), staged by every write and repaired when a TTL
/// index goes, over the shared [`Core`]. Hiding expired documents is every read's (`core::expiry`);
/// deleting them is the sweep's (`documents/ttl_sweep.rs`).
pub struct Ttl {
    core: Arc<Core>,
}

impl Handle for Ttl {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Ttl {
    /// The model over `core`.
    pub(crate) fn new(core: Arc<Core>) -> Ttl {
        Ttl { core }
    }
}

/// Expiry entries one repair or sweep write handles.
pub const TTL_CHUNK: usize = 256;

/// The TTL step of a document change (see `service::pipeline::write`): its expiry entry moves.
pub(crate) fn stage(tx: &mut WriteTx<'_>, catalog: &Catalog, c: &Change<'_>) -> Result<()> {
    move_entry(tx, catalog, &c.table.name, c.id, c.old, c.new)
}

/// Moves document `id`'s expiry entry from where the old version had it to where the new one
/// has it (old `None`: created; new `None`: deleted), in the write.
pub(crate) fn move_entry(
    tx: &mut WriteTx<'_>,
    catalog: &Catalog,
    table: &str,
    id: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<()> {
    let dict = catalog.dict();
    let Some(rules) = Expiry::of(catalog, &dict, table) else { return Ok(()) };
    let after = new.map(|b| rules.at(b, &dict)).transpose()?.flatten();
    let before = match old {
        None => Vec::new(),
        Some(b) if rules.building() => rules.candidates(b, &dict)?,
        Some(b) => rules.at(b, &dict)?.into_iter().collect(),
    };
    for t in before.iter().filter(|t| Some(**t) != after) {
        tx.delete(Space::Ttlidx, TtlKey::new(table, *t, id).encode());
    }
    if let Some(t) = after
        && (rules.building() || !before.contains(&t))
    {
        tx.put(Space::Ttlidx, TtlKey::new(table, t, id).encode(), Vec::new());
    }
    Ok(())
}

/// Makes one expiry entry right, in the write: removed when its document is gone or expires at
/// another time (whose entry is put instead). True when the entry was right.
pub(crate) fn settle_entry(tx: &mut WriteTx<'_>, catalog: &Catalog, table: &str, key: &[u8]) -> Result<EntryState> {
    let entry = TtlKey::decode(key).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let Some(blob) = tx.get(Space::Entity, &EntityKey::new(table, &entry.id).encode())? else {
        tx.delete(Space::Ttlidx, key.to_vec());
        return Ok(EntryState::Fixed);
    };
    let dict = catalog.dict();
    let at = match Expiry::of(catalog, &dict, table) {
        Some(rules) => rules.at(&blob, &dict)?,
        None => None,
    };
    if at == Some(entry.expire_at) {
        return Ok(EntryState::Right(blob));
    }
    tx.delete(Space::Ttlidx, key.to_vec());
    if let Some(t) = at {
        tx.put(Space::Ttlidx, TtlKey::new(table, t, &entry.id).encode(), Vec::new());
    }
    Ok(EntryState::Fixed)
}

/// What [`settle_entry`] found.
pub(crate) enum EntryState {
    /// the entry is the document's (stored as this blob)
    Right(Vec<u8>),
    /// it was wrong and is now right
    Fixed,
}

impl Ttl {
    /// Checks every expiry entry of `table` against its document and moves the wrong ones, a
    /// chunk per write: run when a TTL index is dropped, since documents whose expiry came from
    /// it now expire later or not at all. Runs before the drop's mark goes, so a drop resumed
    /// at open repairs again. Entries can only be wrong, never missing, after a drop: the
    /// expiry of a document only moves later.
    pub(crate) async fn repair_ttl(self: &Arc<Self>, table: &str) -> Result<()> {
        let mut after: Option<Vec<u8>> = None;
        loop {
            if self.core.closing() {
                return Ok(());
            }
            let (t, from) = (table.to_owned(), after.take());
            let last = self
                .commit(move |tx, ttl| {
                    // dropped meanwhile: its purge removes the entries
                    if ttl.core.catalog.table(&t).is_none() {
                        return Ok(None);
                    }
                    let prefix = table_prefix(&t);
                    let lower = from.map_or_else(|| Bound::Included(prefix.clone()), Bound::Excluded);
                    let upper = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
                    let keys = tx
                        .scan(Space::Ttlidx, KeyRange::Between(lower, upper))
                        .take(TTL_CHUNK)
                        .map(|r| r.map(|(k, _)| k.to_vec()))
                        .collect::<Result<Vec<_>, _>>()?;
                    for key in &keys {
                        settle_entry(tx, &ttl.core.catalog, &t, key)?;
                    }
                    Ok((keys.len() == TTL_CHUNK).then(|| keys.last().cloned()).flatten())
                })
                .await?;
            match last {
                Some(key) => after = Some(key),
                None => return Ok(()),
            }
        }
    }
}
