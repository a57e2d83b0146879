//! A document's values as the filter language and the indexes see them: dotted paths, scalar values
//! as key components, and every value a field holds (an array's elements, a vector's numbers).

use crate::Result;
use mosaic_entity::{self as entity, FieldDict, ValueRef};
use mosaic_keys::{Component, Number};
use std::borrow::Cow;

/// Splits a dotted field path.
pub fn path(field: &str) -> Vec<&str> {
    field.split('.').collect()
}

/// A scalar document value as a key component; `None` for containers.
pub fn component<'a>(v: &ValueRef<'a>) -> Option<Component<'a>> {
    Some(match *v {
        ValueRef::Null => Component::Null,
        ValueRef::Bool(b) => Component::Bool(b),
        ValueRef::Int(i) => Component::Num(Number::Int(i)),
        ValueRef::UInt(u) => Component::Num(Number::UInt(u)),
        ValueRef::Float(f) => Component::Num(Number::from_f64(f).ok()?),
        ValueRef::Str(s) => Component::Str(Cow::Borrowed(s)),
        ValueRef::Bytes(b) => Component::Bytes(Cow::Borrowed(b)),
        ValueRef::Vector(_) | ValueRef::Array(_) | ValueRef::Object(_) => return None,
    })
}

/// The values an index holds for one field of a document (see the module doc), in key order.
pub fn field_values<'a>(blob: &'a [u8], dict: &FieldDict, field: &str) -> Result<Vec<Component<'a>>> {
    let mut out = match entity::get_path(blob, dict, &path(field))? {
        None => Vec::new(),
        Some(ValueRef::Array(a)) => {
            a.iter().filter_map(|v| v.map(|v| component(&v)).transpose()).collect::<Result<_, _>>()?
        }
        Some(ValueRef::Vector(v)) => {
            v.iter().filter_map(|x| Number::from_f64(f64::from(x)).ok()).map(Component::Num).collect()
        }
        Some(v) => component(&v).into_iter().collect(),
    };
    out.sort();
    out.dedup();
    if out.is_empty() {
        out.push(Component::Null);
    }
    Ok(out)
}
