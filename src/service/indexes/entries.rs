//! The index entries a document has: computed from its blob, so a write can replace exactly the
//! old entries with the new ones, and `check` can recompute what should be there.
//!
//! Which values an index holds for a field:
//! - a scalar: itself; an array: each scalar element (multi-key), deduplicated;
//! - missing, null, an object, or an array without scalars: `null` — so a hash or range index holds
//!   every document, and a range scan can serve `sort` over the whole table;
//! - unique indexes skip null (as SQL does), so any number of documents may lack the field;
//! - spatial indexes hold the point of a `{"lat", "lon"}` object or `[lon, lat]` array, if valid.

use crate::catalog::{Catalog, IndexDef, IndexKind};
use crate::entity::{self, FieldDict, ValueRef};
use crate::keys::{Component, IdxKey, RidxKey, SidxKey, sidx};
use crate::service::core::filter::geo::Point;
pub use crate::service::core::filter::{component, field_values, path};
use crate::service::{Result, ServiceError};
use crate::storage::Space;
use std::borrow::Cow;
use std::sync::Arc;

/// Most entries one document may have in one index: the product of the value counts of a
/// composite index's fields (each array element is a value), or a range index's distinct values.
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

/// Most distinct trigrams one document may have in an `ngram` index (a string of about 10,000
/// characters).
pub const MAX_NGRAMS_PER_DOC: usize = 10_000;

/// The distinct trigrams (three consecutive characters) of a field's string, or of each string
/// element of its array: what an `ngram` index holds. A string shorter than three characters has
/// none.
pub fn trigrams(blob: &[u8], dict: &FieldDict, field: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut add = |s: &str| {
        let bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).chain(std::iter::once(s.len())).collect();
        for w in bounds.windows(4) {
            if let (Some(a), Some(b)) = (w.first(), w.last()) {
                out.push(s[*a..*b].to_owned());
            }
        }
    };
    match entity::get_path(blob, dict, &path(field))? {
        Some(ValueRef::Str(s)) => add(s),
        Some(ValueRef::Array(a)) => {
            for v in a.iter() {
                if let ValueRef::Str(s) = v? {
                    add(s);
                }
            }
        }
        _ => {}
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Every entry `def` holds for document `id` stored as `blob`, sorted. A document that would have
/// more than [`MAX_ENTRIES_PER_DOC`] entries is refused (`too_many_index_entries`) before any
/// combination is built: the count is computed with checked arithmetic, so 256 values on each of
/// 8 fields is refused, never multiplied out.
pub fn entries(def: &IndexDef, id: &str, blob: &[u8], dict: &FieldDict) -> Result<Vec<Entry>> {
    match build(def, id, blob, dict, true)? {
        Built::Entries(out) => Ok(out),
        Built::OverCap(count) => Err(ServiceError::TooManyIndexEntries {
            index: def.name.clone(),
            entries: count.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string()),
        }),
    }
}

/// A new document's entries in one index, computed before its write reaches the committer (see
/// [`prepare`]).
#[derive(Debug)]
pub struct PreparedEntries {
    /// the index they were computed for: its `created_at`, unique per index ever created
    created_at: i64,
    entries: Vec<Entry>,
}

/// The entries of a new document in every maintained entry index of `table` (not fulltext or
/// vector: those prepare their own), computed outside the committer so that it only diffs them
/// against the old document's. An index whose entries refuse the document (over the cap) is left
/// out: the committer computes it again and reports the refusal, if the index is still there.
/// `dict` must know every field name of the blob.
pub fn prepare(catalog: &Catalog, table: &str, id: &str, blob: &[u8]) -> Vec<PreparedEntries> {
    let defs = catalog.indexes(table);
    let mut dict = None;
    let mut out = Vec::new();
    for def in defs.iter().filter(|d| d.is_maintained() && !matches!(d.kind, IndexKind::Fulltext | IndexKind::Vector)) {
        let dict: &Arc<FieldDict> = dict.get_or_insert_with(|| catalog.dict());
        if let Ok(entries) = entries(def, id, blob, dict) {
            out.push(PreparedEntries { created_at: def.created_at, entries });
        }
    }
    out
}

/// The prepared entries for `def`, if they were prepared for it (the same index, not one dropped
/// and created again under its name).
pub fn take_prepared(prepared: &mut Vec<PreparedEntries>, def: &IndexDef) -> Option<Vec<Entry>> {
    let at = prepared.iter().position(|p| p.created_at == def.created_at)?;
    Some(prepared.swap_remove(at).entries)
}

/// The entries a document that is already stored can hold in `def`, never refused, so that a
/// document stored before the index existed can still be patched to fit, or deleted. Over the
/// cap, a composite index yields none (no write or backfill can have stored its product; older
/// versions capped it too), and a range index all its values (older versions did not cap those:
/// the count is the array's length, bounded by the stored document).
pub fn stored_entries(def: &IndexDef, id: &str, blob: &[u8], dict: &FieldDict) -> Result<Vec<Entry>> {
    match build(def, id, blob, dict, false)? {
        Built::Entries(out) => Ok(out),
        Built::OverCap(_) => Ok(Vec::new()),
    }
}

enum Built {
    Entries(Vec<Entry>),
    /// over the cap: the exact count, or `None` when it does not fit a `usize`
    OverCap(Option<usize>),
}

/// How many entries one value per field makes, if that is at most [`MAX_ENTRIES_PER_DOC`];
/// otherwise `Err` with the count (`None` on overflow).
fn combinations<T>(per_field: &[Vec<T>]) -> std::result::Result<usize, Option<usize>> {
    let mut n: usize = 1;
    for values in per_field {
        n = n.checked_mul(values.len()).ok_or(None)?;
    }
    if n > MAX_ENTRIES_PER_DOC { Err(Some(n)) } else { Ok(n) }
}

/// The entries of `def` for the document; `capped`: a range index over the cap is `OverCap` too.
fn build(def: &IndexDef, id: &str, blob: &[u8], dict: &FieldDict, capped: bool) -> Result<Built> {
    let (table, index) = (def.table.as_str(), def.name.as_str());
    let mut out = Vec::new();
    match def.kind {
        IndexKind::Hash | IndexKind::Unique => {
            let per_field = def.fields.iter().map(|f| field_values(blob, dict, f)).collect::<Result<Vec<_>>>()?;
            let combos = match combinations(&per_field) {
                Ok(n) => n,
                Err(count) => return Ok(Built::OverCap(count)),
            };
            out.reserve(combos);
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
            let values = field_values(blob, dict, field)?;
            if capped && values.len() > MAX_ENTRIES_PER_DOC {
                return Ok(Built::OverCap(Some(values.len())));
            }
            for v in values {
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
        IndexKind::Ngram => {
            let field = def.fields.first().map(String::as_str).unwrap_or_default();
            let grams = trigrams(blob, dict, field)?;
            if capped && grams.len() > MAX_NGRAMS_PER_DOC {
                return Ok(Built::OverCap(Some(grams.len())));
            }
            for g in grams {
                let key = IdxKey::new(table, index, vec![Component::Str(Cow::Owned(g))], id).encode();
                out.push(Entry { space: Space::Idx, key, value: vec![] });
            }
        }
        // Fulltext postings are kept by the search module (`search::maintain`); the others are not
        // built by this version (index creation refuses them).
        IndexKind::Fulltext | IndexKind::Vector | IndexKind::Ttl => {}
    }
    out.sort();
    out.dedup();
    Ok(Built::Entries(out))
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
    use crate::entity::EncodeOptions;
    use serde_json::json;

    fn def(kind: IndexKind, fields: &[&str]) -> IndexDef {
        IndexDef::ready_for_test(kind, fields)
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
        assert_eq!(e(IndexKind::Ngram, &["b"]), Vec::<String>::new(), "shorter than a trigram");
        assert!(e(IndexKind::Spatial, &["b"]).is_empty());
        let u = entries(&def(IndexKind::Unique, &["b"]), "d1", &blob, &dict).unwrap();
        assert_eq!(u[0].value, b"d1");
    }

    /// Prepared entries serve only the index they were computed for: one dropped and created
    /// again under the same name (a new `created_at`) gets its entries computed anew.
    #[test]
    fn prepared_entries_serve_only_their_own_index() {
        let mut dict = FieldDict::new();
        let blob = entity::encode(&json!({"a": 5}), &mut dict, &EncodeOptions::default()).unwrap();
        let old = def(IndexKind::Range, &["a"]);
        let mut prepared =
            vec![PreparedEntries { created_at: old.created_at, entries: entries(&old, "d", &blob, &dict).unwrap() }];
        let recreated = IndexDef { created_at: old.created_at + 1, ..old.clone() };
        assert!(take_prepared(&mut prepared, &recreated).is_none());
        assert_eq!(shown(&take_prepared(&mut prepared, &old).unwrap()), ["ridx:t:i:5:d"]);
        assert!(take_prepared(&mut prepared, &old).is_none(), "taken once");
    }

    #[test]
    fn trigrams_are_characters_not_bytes() {
        let mut dict = FieldDict::new();
        let doc = json!({"s": "ærøæ", "a": ["abcd", 7, "abc"]});
        let blob = entity::encode(&doc, &mut dict, &EncodeOptions::default()).unwrap();
        assert_eq!(trigrams(&blob, &dict, "s").unwrap(), ["røæ", "ærø"]);
        assert_eq!(trigrams(&blob, &dict, "a").unwrap(), ["abc", "bcd"]);
        let d = def(IndexKind::Ngram, &["a"]);
        assert_eq!(shown(&entries(&d, "d1", &blob, &dict).unwrap()), ["idx:t:i:abc:d1", "idx:t:i:bcd:d1"]);
    }

    #[test]
    fn composite_products_are_capped() {
        let mut dict = FieldDict::new();
        let many: Vec<i64> = (0..40).collect();
        let blob = entity::encode(&json!({"a": many, "b": many}), &mut dict, &EncodeOptions::default()).unwrap();
        assert!(entries(&def(IndexKind::Hash, &["a", "b"]), "d", &blob, &dict).is_err());
        assert_eq!(entries(&def(IndexKind::Hash, &["a"]), "d", &blob, &dict).unwrap().len(), 40);
    }

    /// 256 values on each of 8 fields: 256^8 = 2^64 wraps a `usize` product to 0, which once
    /// passed the cap and built every combination. The count is checked and refused instead; the
    /// stored-document variant (for the old side of a write) yields no entries.
    #[test]
    fn products_that_overflow_are_refused_not_built() {
        let mut dict = FieldDict::new();
        let fields = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let values: Vec<i64> = (0..256).collect();
        let doc: serde_json::Map<String, serde_json::Value> =
            fields.iter().map(|f| ((*f).to_owned(), json!(values))).collect();
        let blob = entity::encode(&serde_json::Value::Object(doc), &mut dict, &EncodeOptions::default()).unwrap();
        for kind in [IndexKind::Hash, IndexKind::Unique] {
            let d = def(kind, &fields);
            match entries(&d, "d", &blob, &dict) {
                Err(ServiceError::TooManyIndexEntries { entries, .. }) => assert_eq!(entries, "more than 2^64"),
                other => panic!("{other:?}"),
            }
            assert!(stored_entries(&d, "d", &blob, &dict).unwrap().is_empty());
        }
        // a range index: over the cap refused, but a stored document's values are all listed
        let long: Vec<i64> = (0..1001).collect();
        let blob = entity::encode(&json!({"r": long}), &mut dict, &EncodeOptions::default()).unwrap();
        let d = def(IndexKind::Range, &["r"]);
        assert!(matches!(entries(&d, "d", &blob, &dict), Err(ServiceError::TooManyIndexEntries { .. })));
        assert_eq!(stored_entries(&d, "d", &blob, &dict).unwrap().len(), 1001);
    }
}
