//! Covered queries: when one index scan answers the filter exactly and the index key holds every
//! field the query returns and sorts by, each result is built from the key alone (its values and
//! the document id) and no document is read.
//!
//! A scan answers the filter exactly when every document it meets matches and every match is met
//! once: the index is hash, unique or range and not multikey (each document has one entry), every
//! condition of the filter is on the index's fields, and the scan's key ranges are precisely those
//! conditions — an equality or `$in` of non-null scalars on each field of a hash or unique index;
//! on a range index one equality or `$in`, one `$prefix`, comparisons of one type class other than
//! null, or no condition at all (the whole index, in order). Null is never part of an exact scan:
//! a missing field, an object or an empty array are indexed as null, and `{"a": null}` does not
//! match all of them.
//!
//! A value in a key is returned only where it is the document's value exactly: the field is a
//! typed table's column of type `string`, `int`, `bool` or `timestamp` (so never an array with one
//! element, which a schemaless document may hold and which indexes like its element, nor a float
//! `3.0`, whose key is the number 3), and the scan excludes null (a nullable or later-added column
//! may be absent, and absence is indexed as null). `_id` comes from the key on every table.
//! Anything else makes the query read documents as usual: covering is an optimisation the answer
//! never depends on.

use super::plan::{self, Access, Bounds, IndexScan, Range, SortKey};
use crate::catalog::{ColumnType, IndexDef, IndexKind, TableDef};
use crate::entity::FieldDict;
use crate::keys::{Component, EntityKey, IdxKey, KeyWriter, MetaKey, RidxKey};
use crate::service::core::cancel::Stop;
use crate::service::core::expiry::Expiry;
use crate::service::core::fields::ID_FIELD;
use crate::service::core::filter::{Filter, Op};
use crate::service::{Result, ServiceError};
use crate::storage::{ReadView, Space};
use serde_json::Value;
use std::collections::HashSet;

/// Most not yet swept expired documents a covered query skips by id; beyond, it reads documents.
/// Each is read once (its expiry checked as the matcher would), so a covered plan costs at most
/// this many point reads on top of its scan.
const MAX_EXPIRED: usize = 256;

/// How a covered plan builds each result from an index key.
#[derive(Debug)]
pub(super) struct Covered {
    /// the index scanned
    kind: IndexKind,
    arity: usize,
    /// each requested field: its path and where its value is (`None`: the id)
    fields: Vec<(String, Option<usize>)>,
    /// each sort key's position in the key (`None`: the id)
    sort: Vec<Option<usize>>,
    /// documents expired but not swept yet, to skip like deleted ones
    expired: HashSet<String>,
    /// the members of each result, in the order [`Covered::project`] writes them (by name, as
    /// the keys of a JSON object sort): each one's `"name":` text and its place among the kept
    /// values (`None`: the id)
    layout: Vec<(Vec<u8>, Option<usize>)>,
}

/// The members a result of `fields` has (see `Covered::layout`): `_id` and each field with a
/// place in the key, by name, each once.
fn layout(fields: &[(String, Option<usize>)]) -> Vec<(Vec<u8>, Option<usize>)> {
    let kept = fields.iter().filter_map(|(f, at)| at.map(|_| f.as_str()));
    let mut names: Vec<(&str, Option<usize>)> =
        std::iter::once((ID_FIELD, None)).chain(kept.enumerate().map(|(k, f)| (f, Some(k)))).collect();
    names.sort_by(|a, b| a.0.cmp(b.0));
    names.dedup_by(|a, b| a.0 == b.0);
    names
        .into_iter()
        .map(|(name, at)| {
            let mut text = Value::String(name.to_owned()).to_string().into_bytes();
            text.push(b':');
            (text, at)
        })
        .collect()
}

/// The ranges of an index scan that answer `filter` exactly on `def` (see the module doc), and
/// whether they may meet null values; `None` when no scan does.
fn exact_ranges(filter: &Filter, table: &str, def: &IndexDef) -> Option<(Vec<Range>, bool)> {
    if def.multikey || !matches!(def.kind, IndexKind::Hash | IndexKind::Unique | IndexKind::Range) {
        return None;
    }
    let mut ops: Vec<(&str, &Op)> = Vec::new();
    for c in filter.conjuncts() {
        match c {
            Filter::Field { path, op } if def.fields.contains(path) => ops.push((path, op)),
            _ => return None,
        }
    }
    let non_null = |values: Vec<Component<'static>>| (!values.contains(&Component::Null)).then_some(values);
    if def.kind == IndexKind::Range {
        let field = def.fields.first()?;
        if ops.is_empty() {
            return Some((vec![plan::prefix_range(RidxKey::index_prefix(table, &def.name))], true));
        }
        if let [(_, op)] = ops.as_slice() {
            if let Some(values) = plan::eq_values(op).and_then(non_null) {
                let ranges = values.iter().map(|v| plan::prefix_range(RidxKey::value_prefix(table, &def.name, v)));
                return (values.len() <= plan::MAX_RANGES).then(|| (ranges.collect(), false));
            }
            if let Op::Prefix(p) = op {
                let start = KeyWriter::default().str(table).str(&def.name).str_prefix(p).finish();
                return Some((vec![plan::prefix_range(start)], false));
            }
        }
        let mut bounds = Bounds::default();
        for (path, op) in &ops {
            if *path != field || !plan::tighten(&mut bounds, op) {
                return None;
            }
        }
        let class = bounds.lo.as_ref().or(bounds.hi.as_ref())?.0.class_tags();
        if class == Component::Null.class_tags() {
            return None;
        }
        return Some((vec![bounds.range(table, &def.name)?], false));
    }
    // hash and unique: one equality or `$in` on each field, nothing else
    if ops.len() != def.fields.len() {
        return None;
    }
    let mut per_field = Vec::with_capacity(def.fields.len());
    for f in &def.fields {
        let mut on = ops.iter().filter(|(path, _)| path == f);
        let (Some((_, op)), None) = (on.next(), on.next()) else { return None };
        per_field.push(plan::eq_values(op).and_then(non_null)?);
    }
    let combos = per_field.iter().try_fold(1usize, |n, v| n.checked_mul(v.len()))?;
    if combos > plan::MAX_RANGES {
        return None;
    }
    let combos = per_field.iter().fold(vec![Vec::new()], |acc, values| {
        acc.iter()
            .flat_map(|prefix: &Vec<Component<'static>>| {
                values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(v.clone());
                    next
                })
            })
            .collect::<Vec<_>>()
    });
    let ranges = combos.iter().map(|vals| plan::prefix_range(IdxKey::values_prefix(table, &def.name, vals)));
    Some((ranges.collect(), false))
}

/// The typed column `field` of the table as the snapshot has it, if its values round-trip
/// through a key exactly.
fn exact_column(table: Option<&TableDef>, field: &str) -> bool {
    let Some(columns) = table.and_then(|t| t.columns.as_ref()) else { return false };
    columns.iter().any(|c| {
        c.name == field
            && matches!(c.ty, ColumnType::String | ColumnType::Int | ColumnType::Bool | ColumnType::Timestamp)
    })
}

/// The covered form of a plan, when it has one (see the module doc). Call with the plan as
/// chosen, before a cursor narrows its ranges.
#[allow(clippy::too_many_arguments)]
pub(super) fn cover(
    view: &ReadView,
    catalog: &crate::catalog::Catalog,
    (rules, now): (Option<&Expiry>, i64),
    dict: &FieldDict,
    table: &str,
    filter: &Filter,
    access: &Access,
    fields: Option<&[String]>,
    sort: &[SortKey],
    stop: &Stop,
) -> Result<Option<Covered>> {
    let (Some(fields), Access::Index(scan)) = (fields, access) else { return Ok(None) };
    let IndexScan { def, ranges, .. } = &**scan;
    let Some((exact, may_be_null)) = exact_ranges(filter, table, def) else { return Ok(None) };
    if exact != *ranges {
        return Ok(None);
    }
    let table_def: Option<TableDef> = match view.get(Space::Meta, &MetaKey::Table(table.into()).encode())? {
        Some(v) => Some(serde_json::from_slice(&v).map_err(|e| ServiceError::Internal(e.to_string()))?),
        None => None,
    };
    let position = |f: &str| def.fields.iter().position(|d| d == f);
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        if f == ID_FIELD {
            out.push((f.clone(), None));
            continue;
        }
        match position(f) {
            Some(i) if !may_be_null && exact_column(table_def.as_ref(), f) => out.push((f.clone(), Some(i))),
            _ => return Ok(None),
        }
    }
    let mut sort_at = Vec::with_capacity(sort.len());
    for k in sort {
        // a sort value is the field's one indexed value (null when missing), as in the key
        match (k.field == ID_FIELD, position(&k.field)) {
            (true, _) => sort_at.push(None),
            (false, Some(i)) => sort_at.push(Some(i)),
            (false, None) => return Ok(None),
        }
    }
    let expired = match rules {
        None => HashSet::new(),
        Some(rules) => match expired_ids(view, catalog, rules, dict, table, now, stop)? {
            Some(ids) => ids,
            None => return Ok(None),
        },
    };
    let layout = layout(&out);
    Ok(Some(Covered { kind: def.kind, arity: def.fields.len(), fields: out, sort: sort_at, expired, layout }))
}

/// The documents of `table` a covered scan must skip as expired at `now`: exactly those the
/// matcher's `rules` find expired. The snapshot's expiry entries name the candidates — complete
/// once every TTL index the rules come from is ready in the snapshot (`None` otherwise: a build
/// may not have written them all) — and each one's document is read and checked against the
/// rules, so an entry left stale (by a TTL index being dropped, whose entries a background job
/// repairs later) skips nothing the rules keep. `None` too beyond [`MAX_EXPIRED`] entries.
fn expired_ids(
    view: &ReadView,
    catalog: &crate::catalog::Catalog,
    rules: &Expiry,
    dict: &FieldDict,
    table: &str,
    now: i64,
    stop: &Stop,
) -> Result<Option<HashSet<String>>> {
    if rules.building() {
        return Ok(None);
    }
    for def in catalog.ttl_indexes(table) {
        let Some(snap) = crate::catalog::stored_index(view, table, &def.name)? else { return Ok(None) };
        if !snap.is_ready() {
            return Ok(None);
        }
    }
    let Some(ids) = crate::service::core::expiry::expired_ids_at_most(view, table, now, stop, MAX_EXPIRED)? else {
        return Ok(None);
    };
    let mut out = HashSet::with_capacity(ids.len());
    for id in ids {
        let Some(blob) = view.get(Space::Entity, &EntityKey::new(table, &id).encode())? else { continue };
        if rules.expired(&blob, dict, now)? {
            out.insert(id);
        }
    }
    Ok(Some(out))
}

impl Covered {
    /// True when the candidate's document expired (and is not swept yet).
    pub(super) fn expired(&self, id: &str) -> bool {
        !self.expired.is_empty() && self.expired.contains(id)
    }

    /// The indexed values of a candidate, from its key (`scan_value`: the value a range scan
    /// already read off it).
    pub(super) fn values(
        &self,
        key: Option<&[u8]>,
        scan_value: Option<Component<'static>>,
    ) -> Result<Vec<Component<'static>>> {
        let internal = |e: crate::keys::KeyError| ServiceError::Internal(e.to_string());
        if self.kind == IndexKind::Range {
            return Ok(scan_value.into_iter().collect());
        }
        let key = key.ok_or_else(|| ServiceError::Internal("a covered candidate without key".into()))?;
        Ok(IdxKey::decode(key, self.arity).map_err(internal)?.values.into_iter().map(Component::into_owned).collect())
    }

    /// The candidate's sort values (direction applied later), from its key.
    pub(super) fn sort_values(&self, values: &[Component<'static>], id: &str) -> Vec<Component<'static>> {
        self.sort
            .iter()
            .map(|at| match at {
                None => Component::Str(id.to_owned().into()),
                Some(i) => values.get(*i).cloned().unwrap_or(Component::Null),
            })
            .collect()
    }

    /// Of a candidate's indexed values, those of the requested fields (other than `_id`), in the
    /// order of the fields: what a result keeps until it is written.
    pub(super) fn kept(&self, values: Vec<Component<'static>>) -> Vec<Component<'static>> {
        self.fields
            .iter()
            .filter_map(|(_, at)| *at)
            .map(|i| values.get(i).cloned().unwrap_or(Component::Null))
            .collect()
    }

    /// The result document: `_id` and the requested fields (`kept`: their values, see
    /// [`Covered::kept`]), as `project` would write them — written straight from the layout,
    /// without building the object.
    pub(super) fn project(&self, id: &str, kept: &[Component<'static>]) -> Result<Vec<u8>> {
        let mut out =
            Vec::with_capacity(self.layout.iter().map(|(name, _)| name.len() + 8).sum::<usize>() + id.len() + 2);
        out.push(b'{');
        for (i, (name, at)) in self.layout.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(name);
            // `kept` holds a value for every kept member (see `Covered::kept`)
            let written = match at.map(|k| kept.get(k).unwrap_or(&Component::Null)) {
                None => serde_json::to_writer(&mut out, id),
                Some(Component::Str(s)) => serde_json::to_writer(&mut out, s.as_ref()),
                Some(c) => serde_json::to_writer(&mut out, &c.to_json()),
            };
            written.map_err(|e| ServiceError::Internal(e.to_string()))?;
        }
        out.push(b'}');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(kind: IndexKind, fields: &[&str]) -> IndexDef {
        IndexDef::ready_for_test(kind, fields)
    }

    /// A covered result is the object `project` builds of the same values: its members sorted
    /// by name (`_id` among them, wherever it sorts), each once, strings escaped.
    #[test]
    fn a_covered_result_is_the_object_project_writes() {
        use crate::keys::Number;
        let fields: Vec<(String, Option<usize>)> =
            [("b", Some(0)), ("Z", Some(1)), ("_id", None), ("b", Some(0)), ("a\"q", Some(2))]
                .into_iter()
                .map(|(f, at)| (f.to_owned(), at))
                .collect();
        let key = vec![Component::Str("x\"\u{1}é".into()), Component::Num(Number::Float(-2.5)), Component::Bool(true)];
        let covered = Covered {
            kind: IndexKind::Hash,
            arity: 3,
            layout: layout(&fields),
            fields,
            sort: Vec::new(),
            expired: HashSet::new(),
        };
        let kept = covered.kept(key.clone());
        let mut want = serde_json::Map::new();
        want.insert("_id".into(), json!("d\\1"));
        for (name, at) in [("b", 0), ("Z", 1), ("a\"q", 2)] {
            want.insert(name.into(), key[at].to_json());
        }
        assert_eq!(covered.project("d\\1", &kept).unwrap(), serde_json::to_vec(&want).unwrap());
        let only_id = Covered { layout: layout(&[]), ..covered };
        assert_eq!(only_id.project("d7", &[]).unwrap(), br#"{"_id":"d7"}"#);
    }

    fn exact(kind: IndexKind, fields: &[&str], filter: Value) -> Option<bool> {
        let f = Filter::parse(&filter).unwrap();
        exact_ranges(&f, "t", &def(kind, fields)).map(|(_, null)| null)
    }

    /// Exactly the filters an index answers alone are covered; null, other fields, mixed classes
    /// and several conditions on a hash field are not.
    #[test]
    fn exact_filters() {
        use IndexKind::*;
        assert_eq!(exact(Range, &["a"], json!({})), Some(true));
        assert_eq!(exact(Range, &["a"], json!({"a": 5})), Some(false));
        assert_eq!(exact(Range, &["a"], json!({"a": {"$in": [1, 2]}})), Some(false));
        assert_eq!(exact(Range, &["a"], json!({"a": {"$gte": 1, "$lt": 9}})), Some(false));
        assert_eq!(exact(Range, &["a"], json!({"a": {"$prefix": "x"}})), Some(false));
        assert_eq!(exact(Hash, &["a", "b"], json!({"a": 1, "b": {"$in": ["x", "y"]}})), Some(false));
        assert_eq!(exact(Unique, &["a"], json!({"a": "k"})), Some(false));
        for (kind, fields, f) in [
            (Range, &["a"][..], json!({"a": null})),
            (Range, &["a"][..], json!({"a": {"$gte": null}})),
            (Range, &["a"][..], json!({"a": {"$gt": 1, "$lt": "z"}})),
            (Range, &["a"][..], json!({"a": {"$gt": 1}, "b": 2})),
            (Range, &["a"][..], json!({"a": 1, "$or": [{"a": 2}]})),
            (Range, &["a"][..], json!({"a": {"$ne": 1}})),
            (Range, &["a"][..], json!({"a": 1, "_id": "x"})),
            (Hash, &["a"][..], json!({})),
            (Hash, &["a"][..], json!({"a": {"$in": [1, null]}})),
            (Hash, &["a"][..], json!({"$and": [{"a": 1}, {"a": 2}]})),
            (Hash, &["a", "b"][..], json!({"a": 1})),
            (Hash, &["a"][..], json!({"a": {"$gt": 1}})),
            (Spatial, &["a"][..], json!({})),
        ] {
            assert_eq!(exact(kind, fields, f.clone()), None, "{kind:?} {f}");
        }
        let mut multikey = def(Range, &["a"]);
        multikey.multikey = true;
        assert!(exact_ranges(&Filter::parse(&json!({"a": 1})).unwrap(), "t", &multikey).is_none());
    }
}
