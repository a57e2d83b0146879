//! A stored document written out as JSON text. A leaf: reads, queries and change events all
//! render documents the same way.

use super::{Result, ServiceError};
use crate::entity::{self, FieldDict, ValueRef};

/// The document as JSON text with its `_id` first, written straight from the blob.
pub(crate) fn json_with_id(dict: &FieldDict, id: &str, blob: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(blob.len() * 2 + id.len() + 16);
    out.extend_from_slice(b"{\"_id\":");
    serde_json::to_writer(&mut out, id).map_err(|e| ServiceError::Internal(e.to_string()))?;
    match entity::root(blob)? {
        ValueRef::Object(o) => entity::write_entries(o, dict, &mut out, true)?,
        _ => return Err(ServiceError::Internal("a stored document is not an object".into())),
    }
    out.push(b'}');
    Ok(out)
}
