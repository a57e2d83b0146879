//! Preparing writes outside the committer: documents are checked against their table and
//! encoded (and merge patches applied) before the write is queued, so the committer only reads
//! what it must and stages keys. What a write prepared from may have changed by the time it
//! commits, so the write checks it (on the committer, before staging anything) and the caller
//! prepares again if it did.

use super::documents::{Prepared, merge_patch, prepare, take_id};
use super::{Db, Result};
use crate::catalog::TableDef;
use crate::keys::EntityKey;
use crate::storage::{Space, WriteTx};
use serde_json::Value;

/// Attempts at patching a document read before the write; after that many (the document was
/// rewritten between each read and commit) the patch is applied on the committer, which always
/// succeeds.
pub(super) const PATCH_ATTEMPTS: usize = 4;

/// True when a document prepared for table definition `prepared` still fits `live`: a column
/// added in between (with a default to fill in) means preparing it again.
pub(super) fn same_schema(live: &TableDef, prepared: &TableDef) -> bool {
    live.kind == prepared.kind && live.columns == prepared.columns
}

/// A merge patch applied outside the committer to the document as it was then.
pub(super) struct Patched {
    /// the stored document the patch was applied to
    pub base: Vec<u8>,
    /// the result
    pub prepared: Prepared,
}

/// Applies a merge patch to the document as stored now, outside the committer. `None` leaves the
/// patch to the committer: the document is missing, or the patch fails on this version — the
/// committer's answer is the one that counts, on the version it sees.
pub(super) fn patch_outside(
    db: &Db,
    table: &TableDef,
    id: &str,
    patch: &Value,
    etag_ok: impl Fn(&str) -> bool,
) -> Result<Option<Patched>> {
    let Some(base) = db.store.get(Space::Entity, &EntityKey::new(&table.name, id).encode())? else {
        return Ok(None);
    };
    if !etag_ok(&super::documents::etag(&base)) {
        return Ok(None);
    }
    let mut current = db.catalog.decode(&base)?;
    let mut patch = patch.clone();
    if let Value::Object(p) = &mut patch
        && take_id(p, Some(id)).is_err()
    {
        return Ok(None);
    }
    merge_patch(&mut current, &patch);
    let Value::Object(doc) = current else { return Ok(None) };
    Ok(prepare(&db.catalog, table, id.to_owned(), doc).ok().map(|prepared| Patched { base: base.to_vec(), prepared }))
}

/// On the committer: whether the document is still the version a patch was applied to.
pub(super) fn unchanged(tx: &WriteTx<'_>, table: &str, id: &str, base: &[u8]) -> Result<bool> {
    Ok(tx.get(Space::Entity, &EntityKey::new(table, id).encode())?.as_deref() == Some(base))
}
