//! JSON merge patches (RFC 7396), applied outside the committer where possible: the document is
//! read, patched, checked against its table and encoded before the write is queued, and the write
//! only checks that the document is still the version patched (else the caller patches again).

use super::documents::{Preconditions, etag};
use super::write::{Prepared, prepare, take_id};
use crate::catalog::{Catalog, TableDef};
use crate::keys::EntityKey;
use crate::service::core::expiry::expired;
use crate::service::pipeline::Pipeline;
use crate::service::{Result, ServiceError};
use crate::storage::{Space, WriteTx};
use serde_json::{Map, Value};

/// Attempts at patching a document read before the write; after that many (the document was
/// rewritten between each read and commit) the patch is applied on the committer, which always
/// succeeds.
pub(super) const PATCH_ATTEMPTS: usize = 4;

/// A merge patch applied outside the committer to the document as it was then.
pub(super) struct Patched {
    /// the stored document the patch was applied to
    pub base: Vec<u8>,
    /// the result
    pub prepared: Prepared,
}

/// Applies a merge patch to the document as stored now, outside the committer. `None` leaves the
/// patch to the committer: the document is missing or a precondition does not hold on this
/// version (the committer's answer, on the version it sees, is the one that counts). A patch
/// whose result the table refuses is refused here, on the version read: that version was current
/// while this request ran, so the answer is one the committer could have given, and the committer
/// never spends a decode, merge and encode only to refuse it.
pub(super) fn patch_outside(
    db: &Pipeline,
    table: &TableDef,
    id: &str,
    patch: &Value,
    etag_ok: impl Fn(&str) -> bool,
) -> Result<Option<Patched>> {
    let Some(base) = db.core.store.get_committed(Space::Entity, &EntityKey::new(&table.name, id).encode())? else {
        return Ok(None);
    };
    if !etag_ok(&etag(&base)) || expired(&db.core.catalog, &table.name, &base)? {
        return Ok(None);
    }
    let prepared = apply(&db.core.catalog, table, id, &base, patch)?;
    Ok(Some(Patched { base: base.to_vec(), prepared }))
}

/// The stored document `base` with `patch` merged in, checked against the table and encoded.
fn apply(catalog: &Catalog, table: &TableDef, id: &str, base: &[u8], patch: &Value) -> Result<Prepared> {
    let mut current = catalog.decode(base)?;
    let mut patch = patch.clone();
    if let Value::Object(p) = &mut patch {
        take_id(p, Some(id))?;
    }
    merge_patch(&mut current, &patch);
    let Value::Object(doc) = current else {
        return Err(ServiceError::InvalidDocument("a merge patch must leave an object".into()));
    };
    prepare(catalog, table, id.to_owned(), doc)
}

/// On the committer: whether the document is still the version a patch was applied to.
pub(super) fn unchanged(tx: &WriteTx<'_>, table: &str, id: &str, base: &[u8]) -> Result<bool> {
    Ok(tx.get(Space::Entity, &EntityKey::new(table, id).encode())?.as_deref() == Some(base))
}

/// Applies an RFC 7396 merge patch to the stored document and returns the prepared result.
pub(crate) fn patch_in(
    tx: &mut WriteTx<'_>,
    catalog: &Catalog,
    table: &TableDef,
    id: &str,
    patch: &Value,
    pre: &Preconditions,
) -> Result<Prepared> {
    let key = EntityKey::new(&table.name, id).encode();
    // an expired document not yet swept is gone for its clients
    let old = tx.get(Space::Entity, &key)?.map(|b| expired(catalog, &table.name, &b).map(|gone| (!gone).then_some(b)));
    let Some(old) = old.transpose()?.flatten() else {
        return Err(ServiceError::DocumentNotFound { table: table.name.clone(), id: id.to_owned() });
    };
    pre.check(Some(&etag(&old)))?;
    apply(catalog, table, id, &old, patch)
}

/// RFC 7396: objects merge recursively, null removes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7396() {
        // examples from RFC 7396 appendix A
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}}), json!({"a": {"b": "d"}})),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
        ];
        for (mut target, patch, want) in cases {
            merge_patch(&mut target, &patch);
            assert_eq!(target, want);
        }
    }
}
