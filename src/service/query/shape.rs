//! A result's shape: its position in the result order and which branch of a union answers it
//! (its projection is the filter language's: `core::filter::project`). Shared by pages, streams
//! and the matcher.

use super::cursor::OrderKey;
use super::plan::{self, SortKey};
use crate::entity::FieldDict;
use crate::keys::Component;
use crate::service::Result;
use crate::service::core::fields::ID_FIELD;
use crate::service::core::filter::Filter;
use crate::service::core::filter::field_values;

/// Most ids one multikey scan remembers as met (see `run_query`).
pub(super) const MAX_MET: usize = 10_000;

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
