//! A result's shape: its position in the result order, its projection, and which branch of a
//! union answers it. Shared by pages, streams, the matcher and the vector search's hits.

use super::cursor::OrderKey;
use super::filter::Filter;
use super::plan::{self, SortKey};
use crate::entity::{self, FieldDict};
use crate::keys::Component;
use crate::service::core::fields::ID_FIELD;
use crate::service::indexes::entries::field_values;
use crate::service::{Result, ServiceError};
use serde_json::{Map, Value};

/// Most ids one multikey scan remembers as met (see `run_query`).
pub(super) const MAX_MET: usize = 10_000;
/// Most fields one query projects.
pub const MAX_FIELDS: usize = 256;

/// A field's sort value: its smallest value ascending, its largest descending (arrays), with
/// missing fields as null — the value at which a range index scan first meets the document.
fn sort_value(blob: &[u8], dict: &FieldDict, key: &SortKey, id: &str) -> Result<Component<'static>> {
    if key.field == ID_FIELD {
        return Ok(Component::Str(id.to_owned().into()));
    }
    let values = field_values(blob, dict, &key.field)?;
    let v = if key.desc { values.last() } else { values.first() };
    Ok(v.cloned().unwrap_or(Component::Null).into_owned())
}

pub(super) fn order_key(blob: &[u8], dict: &FieldDict, sort: &[SortKey], id: &str) -> Result<OrderKey> {
    let values = sort.iter().map(|k| Ok((sort_value(blob, dict, k, id)?, k.desc))).collect::<Result<_>>()?;
    Ok(OrderKey { values, id: id.to_owned() })
}

/// The result document as JSON text: the whole document, or the requested fields (dotted paths,
/// nested in the output); `_id` always.
pub(crate) fn project(blob: &[u8], dict: &FieldDict, id: &str, fields: Option<&[String]>) -> Result<Vec<u8>> {
    let Some(fields) = fields else { return crate::service::core::render::json_with_id(dict, id, blob) };
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

/// True when `branch` is the first branch of the union whose filter the document matches.
pub(super) fn first_branch(
    branches: &[(plan::IndexScan, Filter)],
    branch: usize,
    id: &str,
    blob: &[u8],
    dict: &FieldDict,
) -> Result<bool> {
    for (_, earlier) in branches.iter().take(branch) {
        if earlier.matches(id, blob, dict)? {
            return Ok(false);
        }
    }
    match branches.get(branch) {
        Some((_, f)) => f.matches(id, blob, dict),
        None => Ok(false),
    }
}
