//! The index entries a document should have, derived for `check` independently of
//! [`entries`](crate::service::indexes::entries::entries), which the write path uses: if that
//! function computed a wrong entry, the write path would store it and a check built on the same
//! function would expect it. This module reads the indexed fields through the blob's object
//! views one path step at a time, and judges an entry in two separate ways:
//!
//! - [`expected`] builds every key a document should have (forward: a missing one is found);
//! - [`judge`] decodes a stored key and asks whether the document holds each decoded value
//!   (backward: a wrong one is found, whatever produced it).
//!
//! The rules are the documented ones: a field holds its scalar, or each scalar element of its
//! array (or each number of its vector); a field with no scalar holds `null`; unique indexes skip
//! any combination with `null`; a spatial index holds the `{"lat", "lon"}` / `[lon, lat]` point.

use crate::catalog::{IndexDef, IndexKind};
use crate::entity::{self, FieldDict, ValueRef};
use crate::keys::{Component, IdxKey, Number, RidxKey, SidxKey, sidx};
use crate::service::core::filter::geo::STORED_PRECISION;
use crate::service::{Result, ServiceError};
use crate::storage::Space;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// A key and value an index should hold.
pub(super) type Expected = (Space, Vec<u8>, Vec<u8>);

fn internal(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::Internal(e.to_string())
}

/// The value at a dotted path, one object step at a time; `None` when a step is missing or
/// not an object.
pub(super) fn lookup<'a>(blob: &'a [u8], dict: &FieldDict, field: &str) -> Result<Option<ValueRef<'a>>> {
    let mut at = entity::root(blob)?;
    for step in field.split('.') {
        match at {
            ValueRef::Object(o) => match o.get(dict, step)? {
                Some(v) => at = v,
                None => return Ok(None),
            },
            _ => return Ok(None),
        }
    }
    Ok(Some(at))
}

fn scalar<'a>(v: &ValueRef<'a>) -> Option<Component<'a>> {
    match v {
        ValueRef::Null => Some(Component::Null),
        ValueRef::Bool(b) => Some(Component::Bool(*b)),
        ValueRef::Int(i) => Some(Component::Num(Number::Int(*i))),
        ValueRef::UInt(u) => Some(Component::Num(Number::UInt(*u))),
        ValueRef::Float(f) => Number::from_f64(*f).ok().map(Component::Num),
        ValueRef::Str(s) => Some(Component::Str(Cow::Borrowed(*s))),
        ValueRef::Bytes(b) => Some(Component::Bytes(Cow::Borrowed(*b))),
        ValueRef::Vector(_) | ValueRef::Array(_) | ValueRef::Object(_) => None,
    }
}

/// Every value the field holds for an index (see the module doc).
fn held<'a>(blob: &'a [u8], dict: &FieldDict, field: &str) -> Result<BTreeSet<Component<'a>>> {
    let mut set = BTreeSet::new();
    match lookup(blob, dict, field)? {
        Some(ValueRef::Array(a)) => {
            for item in a.iter() {
                set.extend(scalar(&item?));
            }
        }
        Some(ValueRef::Vector(v)) => {
            set.extend(v.iter().filter_map(|x| Number::from_f64(x.into()).ok()).map(Component::Num))
        }
        Some(v) => set.extend(scalar(&v)),
        None => {}
    }
    if set.is_empty() {
        set.insert(Component::Null);
    }
    Ok(set)
}

/// The point a spatial index holds for the field, as (lat, lon).
fn point(blob: &[u8], dict: &FieldDict, field: &str) -> Result<Option<(f64, f64)>> {
    let num = |v: Option<ValueRef<'_>>| match v {
        Some(ValueRef::Int(i)) => Some(i as f64),
        Some(ValueRef::UInt(u)) => Some(u as f64),
        Some(ValueRef::Float(f)) => Some(f),
        _ => None,
    };
    let lat_lon = match lookup(blob, dict, field)? {
        Some(ValueRef::Object(o)) => num(o.get(dict, "lat")?).zip(num(o.get(dict, "lon")?)),
        Some(ValueRef::Array(a)) if a.len() == 2 => num(a.get(1)?).zip(num(a.get(0)?)),
        Some(ValueRef::Vector(v)) if v.len() == 2 => {
            let xs: Vec<f64> = v.iter().map(f64::from).collect();
            xs.get(1).copied().zip(xs.first().copied())
        }
        _ => None,
    };
    Ok(lat_lon.filter(|(lat, lon)| lat.abs() <= 90.0 && lon.abs() <= 180.0))
}

fn cell(lat: f64, lon: f64) -> Result<String> {
    geohash::encode(geohash::Coord { x: lon, y: lat }, STORED_PRECISION).map_err(internal)
}

/// Every (space, key, value) index `def` should hold for document `id`.
pub(super) fn expected(def: &IndexDef, id: &str, blob: &[u8], dict: &FieldDict) -> Result<Vec<Expected>> {
    let (table, index) = (def.table.as_str(), def.name.as_str());
    let mut out = Vec::new();
    match def.kind {
        IndexKind::Hash | IndexKind::Unique => {
            let mut combos: Vec<Vec<Component<'_>>> = vec![Vec::new()];
            for field in &def.fields {
                let values = held(blob, dict, field)?;
                combos = combos
                    .into_iter()
                    .flat_map(|c| values.iter().map(move |v| c.iter().cloned().chain([v.clone()]).collect()))
                    .collect();
            }
            for combo in combos {
                if def.kind == IndexKind::Hash {
                    out.push((Space::Idx, IdxKey::new(table, index, combo, id).encode(), Vec::new()));
                } else if !combo.contains(&Component::Null) {
                    out.push((Space::Idx, IdxKey::unique(table, index, combo).encode(), id.as_bytes().to_vec()));
                }
            }
        }
        IndexKind::Range => {
            for v in held(blob, dict, first_field(def))? {
                out.push((Space::Ridx, RidxKey::new(table, index, v, id).encode(), Vec::new()));
            }
        }
        IndexKind::Spatial => {
            if let Some((lat, lon)) = point(blob, dict, first_field(def))? {
                let c = cell(lat, lon)?;
                out.push((
                    Space::Sidx,
                    SidxKey::new(table, index, &c, id).encode(),
                    sidx::encode_point(lat, lon).to_vec(),
                ));
            }
        }
        IndexKind::Ngram => {
            for g in strings(blob, dict, first_field(def))?.iter().flat_map(|s| grams(s)) {
                let key = IdxKey::new(table, index, vec![Component::Str(Cow::Owned(g))], id).encode();
                out.push((Space::Idx, key, Vec::new()));
            }
            out.sort();
            out.dedup();
        }
        // fulltext postings are checked against their own derivation (`check::fulltext`)
        IndexKind::Fulltext | IndexKind::Vector | IndexKind::Ttl => {}
    }
    Ok(out)
}

/// The strings of a field: itself, or its array's string elements.
fn strings<'a>(blob: &'a [u8], dict: &FieldDict, field: &str) -> Result<Vec<&'a str>> {
    Ok(match lookup(blob, dict, field)? {
        Some(ValueRef::Str(s)) => vec![s],
        Some(ValueRef::Array(a)) => {
            let mut out = Vec::new();
            for item in a.iter() {
                if let ValueRef::Str(s) = item? {
                    out.push(s);
                }
            }
            out
        }
        _ => Vec::new(),
    })
}

/// Every run of three characters of `s`.
fn grams(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.windows(3).map(|w| w.iter().collect()).collect()
}

fn first_field(def: &IndexDef) -> &str {
    def.fields.first().map(String::as_str).unwrap_or_default()
}

/// Why a stored entry of `def` for document `id` (stored as `blob`) is wrong, or `None` if the
/// document holds every value the key names.
pub(super) fn judge(
    def: &IndexDef,
    key: &[u8],
    value: &[u8],
    id: &str,
    blob: &[u8],
    dict: &FieldDict,
) -> Result<Option<String>> {
    let (table, index) = (def.table.as_str(), def.name.as_str());
    let not_held = |field: &str, c: &Component<'_>| format!("document {id:?} does not hold {c} in {field}");
    Ok(match def.kind {
        IndexKind::Hash | IndexKind::Unique => {
            let k = IdxKey::decode(key, def.fields.len()).map_err(internal)?;
            let mut wrong = None;
            for (field, c) in def.fields.iter().zip(&k.values) {
                if !held(blob, dict, field)?.contains(c) {
                    wrong = Some(not_held(field, c));
                    break;
                }
            }
            let canonical = match &k.id {
                Some(kid) => IdxKey::new(table, index, k.values.clone(), kid).encode(),
                None => IdxKey::unique(table, index, k.values.clone()).encode(),
            };
            if canonical != key {
                Some("not the canonical key of its values".into())
            } else if wrong.is_some() {
                wrong
            } else if def.kind == IndexKind::Unique && k.values.contains(&Component::Null) {
                Some("a unique index holds no null".into())
            } else if def.kind == IndexKind::Unique && (k.id.is_some() || value != id.as_bytes()) {
                Some(format!("a unique entry of {id:?} must name it as its value"))
            } else if def.kind == IndexKind::Hash && (k.id.is_none() || !value.is_empty()) {
                Some("a hash entry ends with its document id and has no value".into())
            } else {
                None
            }
        }
        IndexKind::Range => {
            let k = RidxKey::decode(key).map_err(internal)?;
            if RidxKey::new(table, index, k.value.clone(), &k.id).encode() != key {
                Some("not the canonical key of its value".into())
            } else if !held(blob, dict, first_field(def))?.contains(&k.value) {
                Some(not_held(first_field(def), &k.value))
            } else if !value.is_empty() {
                Some("a range entry has no value".into())
            } else {
                None
            }
        }
        IndexKind::Spatial => {
            let k = SidxKey::decode(key).map_err(internal)?;
            match point(blob, dict, first_field(def))? {
                None => Some(format!("document {id:?} holds no point in {}", first_field(def))),
                Some((lat, lon)) => {
                    let stored = sidx::decode_point(value).ok();
                    if stored != Some((lat, lon)) {
                        Some(format!("the entry's point {stored:?} is not the document's ({lat}, {lon})"))
                    } else if k.cell != cell(lat, lon)? {
                        Some(format!("cell {} is not the point's", k.cell))
                    } else {
                        None
                    }
                }
            }
        }
        IndexKind::Ngram => {
            let k = IdxKey::decode(key, 1).map_err(internal)?;
            let gram = match k.values.as_slice() {
                [Component::Str(g)] => Some(g.clone()),
                _ => None,
            };
            let held = match &gram {
                Some(g) => strings(blob, dict, first_field(def))?.iter().any(|s| s.contains(g.as_ref())),
                None => false,
            };
            let canonical = k.id.as_deref().map(|kid| IdxKey::new(table, index, k.values.clone(), kid).encode());
            if canonical.as_deref() != Some(key) {
                Some("not the canonical key of a trigram".into())
            } else if gram.as_ref().is_none_or(|g| g.chars().count() != 3) {
                Some("an ngram entry holds one string of three characters".into())
            } else if !held {
                Some(format!("document {id:?} does not contain {:?} in {}", gram.unwrap_or_default(), first_field(def)))
            } else if !value.is_empty() {
                Some("an ngram entry has no value".into())
            } else {
                None
            }
        }
        IndexKind::Fulltext | IndexKind::Vector | IndexKind::Ttl => Some("this index kind holds no entries".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::EncodeOptions;
    use crate::service::indexes::entries::entries;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn def(kind: IndexKind, fields: &[&str]) -> IndexDef {
        IndexDef::ready_for_test(kind, fields)
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..4).prop_map(Value::from),
            Just(json!(1.0)),
            Just(json!(-0.0)),
            Just(json!(2.5)),
            Just(json!(u64::MAX)),
            Just(json!(i64::MIN)),
            prop_oneof![Just(""), Just("a"), Just("b"), Just("é")].prop_map(Value::from),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(2, 12, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(prop_oneof![Just("x"), Just("lat"), Just("lon")], inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    fn document() -> impl Strategy<Value = Value> {
        let point = prop_oneof![
            (-90.0f64..90.0, -180.0f64..180.0).prop_map(|(lat, lon)| json!({"lat": lat, "lon": lon})),
            (-90i64..=90, -180i64..=180).prop_map(|(lat, lon)| json!([lon, lat])),
            Just(json!({"lat": 91, "lon": 0})),
            value(),
        ];
        (value(), value(), value(), point).prop_map(|(a, b, n, p)| json!({"a": a, "b": b, "n": {"x": n}, "p": p}))
    }

    proptest! {
        /// The write path's `entries()` and this derivation agree on every document: each entry it
        /// computes is one this module expects, and is judged right.
        #[test]
        fn agrees_with_the_write_path(doc in document(), vectors in any::<bool>()) {
            let mut dict = FieldDict::new();
            // typed tables store number arrays of vector columns as f32 vectors
            let opts = EncodeOptions { vector_fields: if vectors { &["a", "p"] } else { &[] } };
            let blob = entity::encode(&doc, &mut dict, &opts).unwrap();
            for d in [
                def(IndexKind::Hash, &["a"]),
                def(IndexKind::Hash, &["a", "n.x"]),
                def(IndexKind::Unique, &["b", "a"]),
                def(IndexKind::Range, &["a"]),
                def(IndexKind::Range, &["n.x"]),
                def(IndexKind::Range, &["a.x"]),
                def(IndexKind::Spatial, &["p"]),
            ] {
                let Ok(theirs) = entries(&d, "id", &blob, &dict) else { continue };
                let mut theirs: Vec<Expected> = theirs.into_iter().map(|e| (e.space, e.key, e.value)).collect();
                let mut ours = expected(&d, "id", &blob, &dict).unwrap();
                theirs.sort();
                ours.sort();
                prop_assert_eq!(&theirs, &ours, "{:?} {}", d.kind, doc);
                for (_, key, value) in &ours {
                    prop_assert_eq!(judge(&d, key, value, "id", &blob, &dict).unwrap(), None);
                }
            }
        }
    }

    /// Entries a document does not hold are judged wrong, each for its reason.
    #[test]
    fn wrong_entries_are_judged_wrong() {
        let mut dict = FieldDict::new();
        let doc = json!({"a": [1, "x"], "b": "q", "p": {"lat": 10.5, "lon": 20.25}});
        let blob = entity::encode(&doc, &mut dict, &EncodeOptions::default()).unwrap();
        let j = |d: &IndexDef, key: Vec<u8>, value: Vec<u8>| judge(d, &key, &value, "id", &blob, &dict).unwrap();
        let range = def(IndexKind::Range, &["a"]);
        assert_eq!(j(&range, RidxKey::new("t", "i", Component::Num(Number::Int(1)), "id").encode(), vec![]), None);
        assert!(j(&range, RidxKey::new("t", "i", Component::Num(Number::Int(2)), "id").encode(), vec![]).is_some());
        assert!(j(&range, RidxKey::new("t", "i", Component::Null, "id").encode(), vec![]).is_some());
        let hash = def(IndexKind::Hash, &["a", "b"]);
        let x = || Component::Str("x".into());
        let q = || Component::Str("q".into());
        assert_eq!(j(&hash, IdxKey::new("t", "i", vec![x(), q()], "id").encode(), vec![]), None);
        assert!(j(&hash, IdxKey::new("t", "i", vec![q(), x()], "id").encode(), vec![]).is_some());
        let unique = def(IndexKind::Unique, &["b"]);
        assert_eq!(j(&unique, IdxKey::unique("t", "i", vec![q()]).encode(), b"id".to_vec()), None);
        assert!(j(&unique, IdxKey::unique("t", "i", vec![q()]).encode(), b"other".to_vec()).is_some());
        let spatial = def(IndexKind::Spatial, &["p"]);
        let c = cell(10.5, 20.25).unwrap();
        let good = sidx::encode_point(10.5, 20.25).to_vec();
        assert_eq!(j(&spatial, SidxKey::new("t", "i", &c, "id").encode(), good.clone()), None);
        assert!(
            j(&spatial, SidxKey::new("t", "i", &c, "id").encode(), sidx::encode_point(10.5, 20.0).to_vec()).is_some()
        );
        assert!(j(&spatial, SidxKey::new("t", "i", "s00000000000", "id").encode(), good).is_some());
    }
}
