//! A stored document written out as JSON text, and pages of them. A leaf: reads, queries, views
//! and change events all render documents the same way.

use super::{Result, ServiceError};
use mosaic_entity::{self as entity, FieldDict, ValueRef};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// A document as returned to clients.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// the document with its `_id` first, as compact JSON text
    pub json: Vec<u8>,
    /// the content tag for `If-Match`
    pub etag: String,
}

/// The strong content tag of a stored blob.
pub fn etag(blob: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = xxhash_rust::xxh3::xxh3_64(blob);
    // `"` + 16 lowercase hex digits + `"`, written directly: the committer makes one per write
    let mut out = String::with_capacity(18);
    out.push('"');
    for shift in (0..16).rev() {
        out.push(char::from(HEX[((hash >> (shift * 4)) & 0xf) as usize]));
    }
    out.push('"');
    out
}

/// The document as JSON text with its `_id` first, written straight from the blob.
pub fn json_with_id(dict: &FieldDict, id: &str, blob: &[u8]) -> Result<Vec<u8>> {
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

/// One page of documents (a listing or a query's results), for the OpenAPI document; the
/// service builds it as a [`RawPage`].
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DocumentPage {
    /// the documents, each with its `_id`
    #[schema(value_type = Vec<Object>)]
    pub documents: Vec<Map<String, Value>>,
    /// pass as `cursor` for the next page; null on the last page
    pub cursor: Option<String>,
}

/// A page as the service produces it: each document already JSON text, written straight from
/// its blob (the shape of [`DocumentPage`]).
#[derive(Debug, Clone)]
pub struct RawPage {
    /// the documents, each compact JSON text
    pub documents: Vec<Vec<u8>>,
    /// the next page's cursor
    pub cursor: Option<String>,
}

impl RawPage {
    /// The page as the JSON text of a [`DocumentPage`].
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.documents.iter().map(|d| d.len() + 1).sum::<usize>() + 64);
        out.extend_from_slice(b"{\"documents\":[");
        for (i, d) in self.documents.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(d);
        }
        out.extend_from_slice(b"],\"cursor\":");
        match &self.cursor {
            // a cursor is base64url: no escaping needed
            Some(c) => {
                out.push(b'"');
                out.extend_from_slice(c.as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
        out
    }
}
