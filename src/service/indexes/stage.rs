//! The index entries' step of a document write (see `service::pipeline::write`): a document's entries in
//! every hash, unique, range, spatial and n-gram index of its table move from its old version's
//! to its new version's; a unique index that already maps a new value to another document
//! refuses the write with `unique_violation`.

use super::entries::{self, Entry, PreparedEntries};
use crate::catalog::{Catalog, IndexDef, IndexKind};
use crate::service::core::change::Change;
use crate::service::{Result, ServiceError};
use crate::storage::WriteTx;
use std::sync::Arc;

/// Replaces the entries of the changed document in every index that is building or ready (not
/// fulltext or vector: those are steps of their own). `prepared` holds the new version's entries
/// computed before the write (each index's are taken from it; the rest are computed here).
pub(crate) fn stage(
    w: &mut WriteTx<'_>,
    catalog: &Arc<Catalog>,
    c: &Change<'_>,
    prepared: &mut Vec<PreparedEntries>,
) -> Result<()> {
    let defs = catalog.indexes(&c.table.name);
    let mut dict = None;
    for def in defs.iter().filter(|d| d.is_maintained() && !matches!(d.kind, IndexKind::Fulltext | IndexKind::Vector)) {
        let dict = dict.get_or_insert_with(|| catalog.dict());
        // The old document's entries are never refused: one stored before the index existed
        // may be over the cap, and must still be patchable and deletable.
        let before = c.old.map(|b| entries::stored_entries(def, c.id, b, dict)).transpose()?.unwrap_or_default();
        let after = match c.new {
            Some(b) => match entries::take_prepared(prepared, def) {
                Some(after) => after,
                None => entries::entries(def, c.id, b, dict)?,
            },
            None => Vec::new(),
        };
        for e in before.iter().filter(|e| after.binary_search(e).is_err()) {
            delete_entry(w, def, e)?;
        }
        // while the index builds, every entry is staged: the backfill skips a document changed
        // after its chunk was read, so this write indexes it
        let building = !def.is_ready();
        let count = after.len();
        for e in after.into_iter().filter(|e| building || before.binary_search(e).is_err()) {
            put_entry(w, def, c.id, e)?;
        }
        mark_multikey(w, catalog, def, count);
    }
    Ok(())
}

/// Removes an entry the document had. A unique entry is removed only while it names this
/// document: during a backfill, a document the backfill has not reached may share its value with
/// one already indexed, whose entry it is.
fn delete_entry(tx: &mut WriteTx<'_>, def: &IndexDef, e: &Entry) -> Result<()> {
    if def.kind == IndexKind::Unique && tx.get(e.space, &e.key)?.is_none_or(|owner| owner != e.value) {
        return Ok(());
    }
    tx.delete(e.space, e.key.clone());
    Ok(())
}

/// Sets the index's multikey flag, in the write, the first time a document has several entries.
fn mark_multikey(tx: &mut WriteTx<'_>, catalog: &Arc<Catalog>, def: &IndexDef, entries: usize) {
    if entries > 1 && !def.multikey && matches!(def.kind, IndexKind::Hash | IndexKind::Unique | IndexKind::Range) {
        let mut next = def.clone();
        next.multikey = true;
        catalog.put_index(tx, next);
    }
}

/// Stages one entry of document `id`; a unique entry that names another document refuses it.
pub(crate) fn put_entry(tx: &mut WriteTx<'_>, def: &IndexDef, id: &str, e: Entry) -> Result<()> {
    if def.kind == IndexKind::Unique
        && let Some(owner) = tx.get(e.space, &e.key)?
        && owner != id.as_bytes()
    {
        let key = crate::keys::display(e.space.name(), &e.key);
        return Err(ServiceError::UniqueViolation {
            index: def.name.clone(),
            detail: format!("{key} belongs to document {:?}", String::from_utf8_lossy(&owner)),
        });
    }
    tx.put(e.space, e.key, e.value);
    Ok(())
}
