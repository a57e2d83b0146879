//! A result's projection: the whole document with its `_id`, or the requested fields (dotted
//! paths, nested in the output). Shared by query pages and streams, search, vector search, views
//! and traversals.

use crate::fields::ID_FIELD;
use crate::{Result, ServiceError};
use mosaic_entity::{self as entity, FieldDict};
use serde_json::{Map, Value};

/// Most fields one request projects.
pub const MAX_FIELDS: usize = 256;

/// The result document as JSON text: the whole document, or the requested fields (dotted paths,
/// nested in the output); `_id` always.
pub fn project(blob: &[u8], dict: &FieldDict, id: &str, fields: Option<&[String]>) -> Result<Vec<u8>> {
    let Some(fields) = fields else { return crate::render::json_with_id(dict, id, blob) };
    let mut out = Map::new();
    out.insert(ID_FIELD.to_owned(), Value::String(id.to_owned()));
    for f in fields {
        let steps: Vec<&str> = f.split('.').collect();
        if let Some(v) = entity::get_path(blob, dict, &steps)? {
            insert_path(&mut out, &steps, v.to_json(dict)?);
        }
    }
    serde_json::to_vec(&out).map_err(|e| ServiceError::Internal(e.to_string()))
}

fn insert_path(map: &mut Map<String, Value>, steps: &[&str], v: Value) {
    match steps {
        [] => {}
        [last] => {
            map.insert((*last).to_owned(), v);
        }
        [first, rest @ ..] => {
            if let Value::Object(m) = map.entry((*first).to_owned()).or_insert_with(|| Value::Object(Map::new())) {
                insert_path(m, rest, v);
            }
        }
    }
}
