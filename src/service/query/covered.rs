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

use super::exec::Candidate;
use super::filter::{Filter, Op};
use super::plan::{self, Access, Bounds, IndexScan, Range, SortKey};
use crate::catalog::{ColumnType, IndexDef, IndexKind, TableDef};
use crate::entity::FieldDict;
use crate::keys::{Component, IdxKey, KeyWriter, MetaKey, RidxKey};
use crate::service::schema::ID_FIELD;
use crate::service::stop::Stop;
use crate::service::ttl::expiry::Expiry;
use crate::service::{Result, ServiceError};
use crate::storage::{ReadView, Space};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Most not yet swept expired documents a covered query skips by id; beyond, it reads documents.
const MAX_EXPIRED: usize = 10_000;

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
    let expired = match Expiry::of(catalog, dict, table) {
        None => HashSet::new(),
        // while a TTL index builds, the expiry entries are not all there yet
        Some(rules) if rules.building() => return Ok(None),
        Some(_) => {
            let now = crate::service::ttl::now_ms();
            match crate::service::ttl::expired_ids_at_most(view, table, now, stop, MAX_EXPIRED)? {
                Some(ids) => ids,
                None => return Ok(None),
            }
        }
    };
    Ok(Some(Covered { kind: def.kind, arity: def.fields.len(), fields: out, sort: sort_at, expired }))
}

impl Covered {
    /// True when the candidate's document expired (and is not swept yet).
    pub(super) fn expired(&self, id: &str) -> bool {
        self.expired.contains(id)
    }

    /// The indexed values of a candidate, from its key.
    pub(super) fn values(&self, cand: &Candidate) -> Result<Vec<Component<'static>>> {
        let internal = |e: crate::keys::KeyError| ServiceError::Internal(e.to_string());
        if self.kind == IndexKind::Range {
            return Ok(cand.scan_value.iter().cloned().collect());
        }
        let key =
            cand.key.as_deref().ok_or_else(|| ServiceError::Internal("a covered candidate without key".into()))?;
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

    /// The result document: `_id` and the requested fields, as `project` would write them.
    pub(super) fn project(&self, id: &str, values: &[Component<'static>]) -> Result<Vec<u8>> {
        let mut out = Map::new();
        out.insert(ID_FIELD.to_owned(), Value::String(id.to_owned()));
        for (field, at) in &self.fields {
            if let Some(v) = at.and_then(|i| values.get(i)) {
                out.insert(field.clone(), v.to_json());
            }
        }
        serde_json::to_vec(&out).map_err(|e| ServiceError::Internal(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(kind: IndexKind, fields: &[&str]) -> IndexDef {
        IndexDef::ready_for_test(kind, fields)
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

    /// A covered query reads no document: with a matching document's entity key removed from
    /// the store behind the index's back, the covered query still returns it from its key, while
    /// the same query asking for a field outside the index (so reading documents) does not.
    #[tokio::test]
    async fn covered_results_come_from_the_keys_alone() {
        use crate::keys::EntityKey;
        use crate::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions, QueryRequest, QueryResult};
        use crate::storage::StorageConfig;
        let dir = tempfile::tempdir().unwrap();
        let options = DbOptions { background_jobs: false, ..DbOptions::default() };
        let db = Db::open(StorageConfig::new(dir.path()), options).unwrap();
        let table: CreateTable = serde_json::from_value(json!({"name": "t", "columns": [
            {"name": "age", "type": "int"}, {"name": "name", "type": "string"}]}))
        .unwrap();
        db.create_table(table).await.unwrap();
        let index: CreateIndex =
            serde_json::from_value(json!({"name": "by_age", "kind": "range", "fields": ["age"]})).unwrap();
        db.create_index("t".into(), index).await.unwrap();
        for (id, age) in [("a", 10), ("b", 20), ("c", 30), ("d", 40)] {
            let doc = json!({"age": age, "name": id}).as_object().unwrap().clone();
            db.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
        }
        let query = |fields: &[&str], explain: bool| {
            let req = json!({"filter": {"age": {"$gte": 20}}, "fields": fields, "explain": explain});
            let req: QueryRequest = serde_json::from_value(req).unwrap();
            let db = db.clone();
            async move { db.query("t".into(), req).await.unwrap() }
        };
        let page = |r: QueryResult| match r {
            QueryResult::Page(p) => {
                p.documents.iter().map(|d| serde_json::from_slice(d).unwrap()).collect::<Vec<Value>>()
            }
            QueryResult::Explain(e) => panic!("{e:?}"),
        };
        let plan = |r: QueryResult| match r {
            QueryResult::Explain(e) => e.plan,
            QueryResult::Page(_) => panic!("not a plan"),
        };
        let covered = plan(query(&["_id", "age"], true).await);
        assert!(covered.covered && covered.documents_read == 0, "{covered:?}");
        let read = plan(query(&["_id", "name"], true).await);
        assert!(!read.covered && read.documents_read == 3, "{read:?}");
        let want = vec![json!({"_id": "b", "age": 20}), json!({"_id": "c", "age": 30}), json!({"_id": "d", "age": 40})];
        assert_eq!(page(query(&["_id", "age"], false).await), want);
        let key = EntityKey::new("t", "c").encode();
        db.store()
            .write(move |tx| {
                tx.delete(Space::Entity, key);
                Ok::<_, crate::storage::StorageError>(())
            })
            .await
            .unwrap();
        assert_eq!(page(query(&["_id", "age"], false).await), want, "the covered query read no document");
        let names: Vec<Value> = page(query(&["name"], false).await).into_iter().map(|d| d["_id"].clone()).collect();
        assert_eq!(names, [json!("b"), json!("d")], "the uncovered query reads the documents");
    }
}
