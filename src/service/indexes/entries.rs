//! The index entries a document has: computed from its blob, so a write can replace exactly the
//! old entries with the new ones, and `check` can recompute what should be there.
//!
//! Which values an index holds for a field:
//! - a scalar: itself; an array: each scalar element (multi-key), deduplicated;
//! - missing, null, an object, or an array without scalars: `null` — so a hash or range index holds
//!   every document, and a range scan can serve `sort` over the whole table;
//! - unique indexes skip null (as SQL does), so any number of documents may lack the field;
//! - spatial indexes hold the point of a `{"lat", "lon"}` object or `[lon, lat]` array, if valid.

use super::geo::Point;
use crate::catalog::{IndexDef, IndexKind};
use crate::entity::{self, FieldDict, ValueRef};
use crate::keys::{Component, IdxKey, Number, RidxKey, SidxKey, sidx};
use crate::service::{Result, ServiceError};
use crate::storage::Space;
use std::borrow::Cow;

/// Most entries one document may have in one composite index (the product of its array fields).
pub const MAX_ENTRIES_PER_DOC: usize = 1000;

/// One index entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// idx, ridx or sidx
    pub space: Space,
    /// the key
    pub key: Vec<u8>,
    /// the value (the id for unique entries, the point for spatial ones, else empty)
    pub value: Vec<u8>,
}

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

/// Every entry `def` holds for document `id` stored as `blob`, sorted.
pub fn entries(def: &IndexDef, id: &str, blob: &[u8], dict: &FieldDict) -> Result<Vec<Entry>> {
    let (table, index) = (def.table.as_str(), def.name.as_str());
    let mut out = Vec::new();
    match def.kind {
        IndexKind::Hash | IndexKind::Unique => {
            let per_field = def.fields.iter().map(|f| field_values(blob, dict, f)).collect::<Result<Vec<_>>>()?;
            let combos: usize = per_field.iter().map(Vec::len).product();
            if combos > MAX_ENTRIES_PER_DOC {
                return Err(ServiceError::InvalidDocument(format!(
                    "the document would have {combos} entries in index {index:?} (at most {MAX_ENTRIES_PER_DOC})"
                )));
            }
            for values in cartesian(&per_field) {
                if def.kind == IndexKind::Unique {
                    if values.contains(&Component::Null) {
                        continue;
                    }
                    out.push(Entry {
                        space: Space::Idx,
                        key: IdxKey::unique(table, index, values).encode(),
                        value: id.as_bytes().to_vec(),
                    });
                } else {
                    out.push(Entry {
                        space: Space::Idx,
                        key: IdxKey::new(table, index, values, id).encode(),
                        value: vec![],
                    });
                }
            }
        }
        IndexKind::Range => {
            let field = def.fields.first().map(String::as_str).unwrap_or_default();
            for v in field_values(blob, dict, field)? {
                out.push(Entry { space: Space::Ridx, key: RidxKey::new(table, index, v, id).encode(), value: vec![] });
            }
        }
        IndexKind::Spatial => {
            let field = def.fields.first().map(String::as_str).unwrap_or_default();
            if let Some(v) = entity::get_path(blob, dict, &path(field))?
                && let Some(p) = Point::from_value(&v, dict)?
            {
                let cell = p.geohash()?;
                out.push(Entry {
                    space: Space::Sidx,
                    key: SidxKey::new(table, index, &cell, id).encode(),
                    value: sidx::encode_point(p.lat, p.lon).to_vec(),
                });
            }
        }
        // Not built by this version: no entries (index creation refuses these kinds).
        IndexKind::Fulltext | IndexKind::Vector | IndexKind::Ttl => {}
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Every combination taking one value per field.
fn cartesian<'a>(per_field: &[Vec<Component<'a>>]) -> Vec<Vec<Component<'a>>> {
    per_field.iter().fold(vec![Vec::new()], |acc, values| {
        acc.iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(v.clone());
                    next
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::IndexState;
    use crate::entity::EncodeOptions;
    use serde_json::json;

    fn def(kind: IndexKind, fields: &[&str]) -> IndexDef {
        IndexDef {
            table: "t".into(),
            name: "i".into(),
            kind,
            fields: fields.iter().map(|f| f.to_string()).collect(),
            options: Default::default(),
            state: IndexState::Ready,
            created_at: 0,
            multikey: false,
        }
    }

    fn shown(e: &[Entry]) -> Vec<String> {
        e.iter().map(|e| crate::keys::display(e.space.name(), &e.key)).collect()
    }

    #[test]
    fn entries_per_kind() {
        let mut dict = FieldDict::new();
        let doc = json!({"a": [3, 1, 3, {"x": 1}], "b": "x", "c": null, "loc": {"lat": 59.9, "lon": 10.7},
                         "n": {"deep": 2.5}, "e": []});
        let blob = entity::encode(&doc, &mut dict, &EncodeOptions::default()).unwrap();
        let e = |kind, fields: &[&str]| shown(&entries(&def(kind, fields), "d1", &blob, &dict).unwrap());
        assert_eq!(e(IndexKind::Range, &["a"]), ["ridx:t:i:1:d1", "ridx:t:i:3:d1"]);
        assert_eq!(e(IndexKind::Range, &["missing"]), ["ridx:t:i:null:d1"]);
        assert_eq!(e(IndexKind::Range, &["e"]), ["ridx:t:i:null:d1"]);
        assert_eq!(e(IndexKind::Range, &["n.deep"]), ["ridx:t:i:2.5:d1"]);
        assert_eq!(e(IndexKind::Hash, &["b", "a"]), ["idx:t:i:x:1:d1", "idx:t:i:x:3:d1"]);
        assert_eq!(e(IndexKind::Unique, &["b"]), ["idx:t:i:x"]);
        assert!(e(IndexKind::Unique, &["c"]).is_empty(), "unique indexes skip null");
        assert_eq!(e(IndexKind::Spatial, &["loc"]).len(), 1);
        assert!(e(IndexKind::Spatial, &["b"]).is_empty());
        let u = entries(&def(IndexKind::Unique, &["b"]), "d1", &blob, &dict).unwrap();
        assert_eq!(u[0].value, b"d1");
    }

    #[test]
    fn composite_products_are_capped() {
        let mut dict = FieldDict::new();
        let many: Vec<i64> = (0..40).collect();
        let blob = entity::encode(&json!({"a": many, "b": many}), &mut dict, &EncodeOptions::default()).unwrap();
        assert!(entries(&def(IndexKind::Hash, &["a", "b"]), "d", &blob, &dict).is_err());
        assert_eq!(entries(&def(IndexKind::Hash, &["a"]), "d", &blob, &dict).unwrap().len(), 40);
    }
}
