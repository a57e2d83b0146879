//! The planner: which index scans (if any) produce the candidates of a query, in which order.
//!
//! Every access path yields a superset of the matching documents; the whole filter is checked on
//! each candidate, so a plan can only be slower or faster, never wrong. Candidates are costed by
//! counting index keys in their ranges (up to a cap), and the cheapest wins; a range index on the
//! first sort field can serve the order (with early stop at `limit`) instead.

use super::ids::IdScan;
pub use super::viewscan::{ViewScan, with_view};
use crate::catalog::{IndexDef, IndexKind};
use crate::keys::{Component, IdxKey, KeyWriter, RidxKey, SidxKey, prefix_successor};
use crate::service::Result;
use crate::service::core::fields::ID_FIELD;
use crate::service::core::filter::geo::GeoBox;
use crate::service::core::filter::{Filter, Op, scalar};
use crate::storage::{KeyRange, ReadView, Space};
use serde_json::Value;
use std::ops::Bound;

/// Keys counted per access path when estimating.
pub const ESTIMATE_CAP: u64 = 1000;
/// Most key ranges one access path scans (e.g. `$in` values).
pub(super) const MAX_RANGES: usize = 256;

/// A sort key: a field and a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    /// dotted path
    pub field: String,
    /// descending?
    pub desc: bool,
}

/// A key range `[lo, hi)` of one keyspace.
pub type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// One index scan.
#[derive(Debug, Clone)]
pub struct IndexScan {
    /// the index (as of the query's snapshot)
    pub def: IndexDef,
    /// the ranges, scanned in order (reversed for a descending scan)
    pub ranges: Vec<Range>,
    /// scan direction
    pub reverse: bool,
    /// what the scan looks for, for `explain`
    pub condition: String,
    /// for spatial scans: the exact shape a point must fall in
    pub shape: Option<Shape>,
    /// counted keys (capped at [`ESTIMATE_CAP`])
    pub estimate: u64,
    /// one equality with one value: each document at most once, in id order
    pub equality: bool,
}

/// The exact area of a spatial scan.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// within meters of a point
    Circle(crate::service::core::filter::geo::Point, f64),
    /// inside a box
    Box(GeoBox),
}

impl IndexScan {
    /// The keyspace of the index's entries.
    pub fn space(&self) -> Space {
        match self.def.kind {
            IndexKind::Range => Space::Ridx,
            IndexKind::Spatial => Space::Sidx,
            _ => Space::Idx,
        }
    }

    /// True when the scan yields each document once, in id order: one exact key prefix of a
    /// hash/unique index, or one value of a range index.
    pub fn id_ordered(&self) -> bool {
        self.equality && !self.reverse
    }

    /// Narrows a one-range range-index scan to start (in its direction) at `value`: the keys
    /// before it hold only results an earlier page returned. A bound outside the range is ignored.
    pub fn seek(&mut self, value: &Component<'_>) {
        if self.def.kind != IndexKind::Range || self.ranges.len() != 1 {
            return;
        }
        let at = RidxKey::value_prefix(&self.def.table, &self.def.name, value);
        let (lo, hi) = &mut self.ranges[0];
        let key = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
            Bound::Unbounded => None,
        };
        // Only ever narrow, and never to an empty or inverted range.
        let (low, high) = (key(lo), key(hi));
        if self.reverse {
            if let Some(after) = prefix_successor(&at)
                && low.as_ref().is_none_or(|l| after > *l)
                && high.as_ref().is_none_or(|h| after <= *h)
            {
                *hi = Bound::Excluded(after);
            }
        } else if low.as_ref().is_none_or(|l| at >= *l) && high.as_ref().is_none_or(|h| at < *h) {
            *lo = Bound::Included(at);
        }
    }

    /// Narrows an id-ordered scan (one exact key prefix) to start after document `id`: its keys
    /// are the prefix followed by the id, in id order, so the keys before hold only documents an
    /// earlier page returned. Unique entries end at the values (one document): nothing to skip.
    pub fn seek_after_id(&mut self, id: &str) {
        if !self.id_ordered() || self.def.kind == IndexKind::Unique || self.ranges.len() != 1 {
            return;
        }
        if let (Bound::Included(prefix), _) = &self.ranges[0] {
            let mut key = prefix.clone();
            key.extend_from_slice(&KeyWriter::default().str(id).finish());
            self.ranges[0].0 = Bound::Excluded(key);
        }
    }

    /// True when the scan's own order (value, then id) can be the result order: a range scan of a
    /// range index that holds one entry per document (not multikey).
    pub fn natural_order(&self) -> bool {
        self.def.kind == IndexKind::Range && !self.def.multikey && !self.equality && !self.reverse
    }
}

/// How candidates are produced.
#[derive(Debug, Clone)]
pub enum Access {
    /// every document of the table, in id order
    FullScan,
    /// one index scan
    Index(Box<IndexScan>),
    /// documents in every one of several id-ordered scans (a merge join)
    Intersect(Vec<IndexScan>),
    /// an `$or`: one scan per branch, each document taken from the first branch it matches
    Union(Vec<(IndexScan, Filter)>),
    /// `_id` conditions: point reads or one range of the entity keys, in id order
    Ids(IdScan),
    /// the members of a filter view (`$view`), in id order
    View(ViewScan),
    /// every document of the table as it was at a time (µs), from its history, in id order
    AsOf(i64),
}

/// The estimate of a plan's access path (as `explain` shows it), `None` for a full scan.
pub fn estimate_of(access: &Access) -> Option<u64> {
    match access {
        Access::FullScan | Access::AsOf(_) => None,
        Access::Index(s) => Some(s.estimate),
        Access::Intersect(ss) => Some(ss.iter().map(|s| s.estimate).min().unwrap_or(0)),
        Access::Union(bs) => Some(bs.iter().map(|(s, _)| s.estimate).sum()),
        Access::Ids(s) => Some(s.estimate),
        Access::View(v) => Some(v.estimate),
    }
}

/// The chosen plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// where candidates come from
    pub access: Access,
    /// candidates arrive in the order of the first sort key (the scan serves `sort`)
    pub sort_by_index: bool,
}

pub(super) fn prefix_range(prefix: Vec<u8>) -> Range {
    let hi = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    (Bound::Included(prefix), hi)
}

/// Range-index bounds gathered from the conjuncts on one field.
#[derive(Debug, Clone, Default)]
pub(super) struct Bounds {
    pub(super) lo: Option<(Component<'static>, bool)>,
    pub(super) hi: Option<(Component<'static>, bool)>,
}

impl Bounds {
    fn describe(&self, field: &str) -> String {
        let mut parts = Vec::new();
        if let Some((v, inc)) = &self.lo {
            parts.push(format!("{field} {} {v}", if *inc { ">=" } else { ">" }));
        }
        if let Some((v, inc)) = &self.hi {
            parts.push(format!("{field} {} {v}", if *inc { "<=" } else { "<" }));
        }
        parts.join(" and ")
    }

    /// The ridx range of values within the bounds, bracketed to the bound's type class.
    pub(super) fn range(&self, table: &str, index: &str) -> Option<Range> {
        let class = self.lo.as_ref().or(self.hi.as_ref())?.0.class_tags();
        let class_key = |tag: u8| KeyWriter::default().str(table).str(index).tag(tag).finish();
        let lo = match &self.lo {
            Some((v, true)) => Bound::Included(RidxKey::value_prefix(table, index, v)),
            Some((v, false)) => Bound::Included(prefix_successor(&RidxKey::value_prefix(table, index, v))?),
            None => Bound::Included(class_key(class.0)),
        };
        let hi = match &self.hi {
            Some((v, true)) => Bound::Excluded(prefix_successor(&RidxKey::value_prefix(table, index, v))?),
            Some((v, false)) => Bound::Excluded(RidxKey::value_prefix(table, index, v)),
            None => Bound::Excluded(class_key(class.1)),
        };
        Some((lo, hi))
    }
}

/// Merges a comparison into bounds when it is in the same type class and tighter.
pub(super) fn tighten(b: &mut Bounds, op: &Op) -> bool {
    let (v, is_lo, inc) = match op {
        Op::Gt(v) => (v, true, false),
        Op::Gte(v) => (v, true, true),
        Op::Lt(v) => (v, false, false),
        Op::Lte(v) => (v, false, true),
        _ => return false,
    };
    if let Some((other, _)) = b.lo.as_ref().or(b.hi.as_ref())
        && other.class_tags() != v.class_tags()
    {
        return false;
    }
    let slot = if is_lo { &mut b.lo } else { &mut b.hi };
    let tighter = match slot {
        None => true,
        Some((cur, cur_inc)) => {
            if is_lo {
                v > cur || (v == cur && !inc && *cur_inc)
            } else {
                v < cur || (v == cur && !inc && *cur_inc)
            }
        }
    };
    if tighter {
        *slot = Some((v.clone(), inc));
    }
    true
}

pub(super) fn estimate(view: &ReadView, space: Space, ranges: &[Range]) -> Result<u64> {
    let mut n = 0;
    for (lo, hi) in ranges {
        for item in view.scan(space, KeyRange::Between(lo.clone(), hi.clone()), false) {
            item?;
            n += 1;
            if n >= ESTIMATE_CAP {
                return Ok(n);
            }
        }
    }
    Ok(n)
}

pub(super) fn eq_values(op: &Op) -> Option<Vec<Component<'static>>> {
    match op {
        Op::Eq(v) => Some(vec![scalar(v)?]),
        Op::In(vs) if !vs.is_empty() => {
            let mut out = vs.iter().map(scalar).collect::<Option<Vec<_>>>()?;
            out.sort();
            out.dedup();
            Some(out)
        }
        _ => None,
    }
}

fn describe_values(field: &str, values: &[Component<'_>]) -> String {
    match values {
        [one] => format!("{field} = {one}"),
        many => format!("{field} in [{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// Every index scan that could produce the candidates of `filter`.
fn candidates(filter: &Filter, table: &str, defs: &[IndexDef]) -> Vec<IndexScan> {
    let conjuncts = filter.conjuncts();
    let on = |field: &str| -> Vec<&Op> {
        conjuncts
            .iter()
            .filter_map(|c| match c {
                Filter::Field { path, op } if path == field => Some(op),
                _ => None,
            })
            .collect()
    };
    let scan = |def: &IndexDef, ranges: Vec<Range>, condition: String, shape: Option<Shape>, equality: bool| {
        IndexScan { def: def.clone(), ranges, reverse: false, condition, shape, estimate: 0, equality }
    };
    let mut out = Vec::new();
    for def in defs {
        match def.kind {
            IndexKind::Hash | IndexKind::Unique => {
                // every field needs an equality (or $in); their combinations are the prefixes
                let per_field: Option<Vec<Vec<Component<'static>>>> =
                    def.fields.iter().map(|f| on(f).into_iter().find_map(eq_values)).collect();
                let Some(per_field) = per_field else { continue };
                if def.kind == IndexKind::Unique && per_field.iter().flatten().any(|c| *c == Component::Null) {
                    continue; // unique indexes hold no nulls
                }
                // checked: 256 values on each of 8 fields must not wrap past the cap
                let combos = per_field.iter().try_fold(1usize, |n, v| n.checked_mul(v.len()));
                if combos.is_none_or(|n| n > MAX_RANGES) {
                    continue;
                }
                let combos = per_field.iter().fold(vec![Vec::new()], |acc, vals| {
                    acc.iter()
                        .flat_map(|p: &Vec<Component<'static>>| {
                            vals.iter().map(move |v| {
                                let mut n = p.clone();
                                n.push(v.clone());
                                n
                            })
                        })
                        .collect::<Vec<_>>()
                });
                let ranges = combos
                    .iter()
                    .map(|vals| prefix_range(IdxKey::values_prefix(&def.table, &def.name, vals)))
                    .collect();
                let condition = def
                    .fields
                    .iter()
                    .zip(&per_field)
                    .map(|(f, v)| describe_values(f, v))
                    .collect::<Vec<_>>()
                    .join(" and ");
                let equality = combos.len() == 1;
                out.push(scan(def, ranges, condition, None, equality));
            }
            IndexKind::Range => {
                let field = &def.fields[0];
                let ops = on(field);
                if let Some(values) = ops.iter().find_map(|op| eq_values(op)).filter(|v| v.len() <= MAX_RANGES) {
                    let ranges =
                        values.iter().map(|v| prefix_range(RidxKey::value_prefix(table, &def.name, v))).collect();
                    out.push(scan(def, ranges, describe_values(field, &values), None, values.len() == 1));
                }
                // A multikey index cannot combine bounds (an array may meet each with another
                // element), so each comparison is its own candidate there.
                let mut merged = Bounds::default();
                for op in &ops {
                    if def.multikey {
                        let mut b = Bounds::default();
                        if tighten(&mut b, op)
                            && let Some(r) = b.range(table, &def.name)
                        {
                            out.push(scan(def, vec![r], b.describe(field), None, false));
                        }
                    } else {
                        tighten(&mut merged, op);
                    }
                }
                if let Some(r) = merged.range(table, &def.name) {
                    out.push(scan(def, vec![r], merged.describe(field), None, false));
                }
                for op in &ops {
                    if let Op::Prefix(p) = op {
                        let start = KeyWriter::default().str(table).str(&def.name).str_prefix(p).finish();
                        out.push(scan(def, vec![prefix_range(start)], format!("{field} prefix {p:?}"), None, false));
                    }
                }
            }
            IndexKind::Spatial => {
                let field = &def.fields[0];
                for op in on(field) {
                    let (bbox, shape, condition) = match op {
                        Op::Near { center, meters } => (
                            GeoBox::around(*center, *meters),
                            Shape::Circle(*center, *meters),
                            format!("{field} within {meters} m of ({}, {})", center.lat, center.lon),
                        ),
                        Op::Box(b) => (*b, Shape::Box(*b), format!("{field} in box {b:?}")),
                        _ => continue,
                    };
                    let ranges = bbox
                        .cells()
                        .iter()
                        .map(|cell| prefix_range(SidxKey::cell_scan_start(table, &def.name, cell)))
                        .collect();
                    out.push(scan(def, ranges, condition, Some(shape), false));
                }
            }
            IndexKind::Ngram => {
                let field = &def.fields[0];
                for op in on(field) {
                    if let Op::Contains(Value::String(pattern)) = op {
                        out.extend(super::ngram::trigrams(pattern).into_iter().map(|g| {
                            let value = [Component::Str(g.into())];
                            let range = prefix_range(IdxKey::values_prefix(&def.table, &def.name, &value));
                            let condition = format!("{field} contains {pattern:?} (trigram {g:?})");
                            scan(def, vec![range], condition, None, true)
                        }));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The scan of a whole range index in sort order (restricted to the filter's bounds on the sort
/// field when the index is not multikey, so each document's one entry is its sort value).
fn sort_scan(filter: &Filter, table: &str, def: &IndexDef, desc: bool) -> IndexScan {
    let field = &def.fields[0];
    let mut ranges = vec![prefix_range(RidxKey::index_prefix(table, &def.name))];
    let mut condition = format!("order by {field}{}", if desc { " desc" } else { "" });
    if !def.multikey {
        let mut b = Bounds::default();
        for c in filter.conjuncts() {
            if let Filter::Field { path, op } = c
                && path == field
            {
                tighten(&mut b, op);
            }
        }
        if let Some(r) = b.range(table, &def.name) {
            ranges = vec![r];
            condition = format!("{condition}, {}", b.describe(field));
        }
    }
    IndexScan { def: def.clone(), ranges, reverse: desc, condition, shape: None, estimate: 0, equality: false }
}

/// Picks the plan for a query on `table`, given the ready indexes of the snapshot.
pub fn choose(
    view: &ReadView,
    filter: &Filter,
    sort: &[SortKey],
    table: &str,
    defs: &[IndexDef],
    limit: usize,
    explain: bool,
) -> Result<Plan> {
    // `_id` equality and `$in` are point reads of the entity keys: nothing reads less.
    let ids = IdScan::of(filter, table);
    if let Some(ids) = &ids
        && ids.points.is_some()
    {
        return Ok(Plan { access: Access::Ids(ids.clone()), sort_by_index: false });
    }
    // An `_id` range competes with the index scans on its key count.
    let id_range = match ids {
        Some(mut r) => {
            r.estimate = if super::ids::is_empty(&r.range) {
                0
            } else {
                estimate(view, Space::Entity, std::slice::from_ref(&r.range))?
            };
            Some(r)
        }
        None => None,
    };
    // The blobs do not hold `_id`: an index on it holds nothing useful.
    let defs: Vec<IndexDef> =
        defs.iter().filter(|d| !d.fields.iter().any(|f| f.split('.').next() == Some(ID_FIELD))).cloned().collect();
    let defs = defs.as_slice();
    let mut scans = candidates(filter, table, defs);
    let sort_index = sort.first().and_then(|first| {
        defs.iter()
            .find(|d| d.kind == IndexKind::Range && d.fields.first() == Some(&first.field))
            .map(|d| (d, first.desc))
    });
    // Count keys only where there is a choice to make (or explain shows it); a unique
    // equality holds one key per value.
    let choice = scans.len() > 1 || sort_index.is_some() || id_range.is_some() || explain;
    for s in &mut scans {
        s.estimate = if s.def.kind == IndexKind::Unique {
            s.ranges.len() as u64
        } else if choice {
            estimate(view, s.space(), &s.ranges)?
        } else {
            0
        };
    }
    scans.sort_by_key(|s| s.estimate);
    let id_range = id_range.filter(|r| scans.first().is_none_or(|s| r.estimate <= s.estimate));
    let best = id_range.as_ref().map(|r| r.estimate).or(scans.first().map(|s| s.estimate));
    if let Some((def, desc)) = sort_index {
        // Serve the order from the index unless another scan is so selective that sorting its
        // few candidates in memory is cheaper than walking the index until `limit` matches.
        let selective = best.is_some_and(|e| e < ESTIMATE_CAP.min(limit as u64 * 10).max(100));
        if !selective {
            let mut s = sort_scan(filter, table, def, desc);
            if explain {
                s.estimate = estimate(view, s.space(), &s.ranges)?;
            }
            return Ok(Plan { access: Access::Index(Box::new(s)), sort_by_index: true });
        }
    }
    if let Some(r) = id_range {
        return Ok(Plan { access: Access::Ids(r), sort_by_index: false });
    }
    let id_ordered: Vec<IndexScan> = scans.iter().filter(|s| s.id_ordered()).cloned().collect();
    let access = match scans.first() {
        // Without an index on the conjuncts, an `$or` may still have one per branch.
        None => union(view, filter, table, defs)?.map_or(Access::FullScan, Access::Union),
        // Two or more equality scans, none small: merge-join them on id.
        Some(best) if id_ordered.len() >= 2 && best.estimate >= 100 => {
            Access::Intersect(id_ordered.into_iter().take(4).collect())
        }
        Some(best) => Access::Index(Box::new(best.clone())),
    };
    Ok(Plan { access, sort_by_index: false })
}

/// One index scan per branch of a top-level `$or`, when every branch has one (else a full scan
/// reads less than the branches together would).
fn union(view: &ReadView, filter: &Filter, table: &str, defs: &[IndexDef]) -> Result<Option<Vec<(IndexScan, Filter)>>> {
    let branches = match filter.conjuncts().as_slice() {
        [Filter::Or(branches)] if !branches.is_empty() => branches.clone(),
        _ => return Ok(None),
    };
    let mut out = Vec::with_capacity(branches.len());
    for branch in branches {
        let mut scans = candidates(&branch, table, defs);
        for s in &mut scans {
            s.estimate = estimate(view, s.space(), &s.ranges)?;
        }
        let Some(best) = scans.into_iter().min_by_key(|s| s.estimate) else { return Ok(None) };
        out.push((best, branch));
    }
    Ok(Some(out))
}

/// Most sort keys of one query.
pub const MAX_SORT_KEYS: usize = 8;

/// Parses `"-age"` / `"name"` into sort keys (at most [`MAX_SORT_KEYS`]).
pub fn parse_sort(sort: &[String]) -> Result<Vec<SortKey>> {
    if sort.len() > MAX_SORT_KEYS {
        return Err(crate::service::ServiceError::QueryTooComplex(format!(
            "a query sorts by at most {MAX_SORT_KEYS} fields"
        )));
    }
    sort.iter()
        .map(|s| {
            let (field, desc) = match s.strip_prefix('-') {
                Some(f) => (f, true),
                None => (s.strip_prefix('+').unwrap_or(s), false),
            };
            if field.is_empty() || field.split('.').any(str::is_empty) {
                return Err(crate::service::ServiceError::InvalidFilter(format!("invalid sort field {s:?}")));
            }
            Ok(SortKey { field: field.to_owned(), desc })
        })
        .collect()
}

/// For the cursor: a JSON scalar back to a component.
pub fn component_of(v: &Value) -> Option<Component<'static>> {
    scalar(v)
}

/// True when a ready unique index answers the filter with at most one key per value (an equality
/// on each of its fields): such a query reads a handful of keys and can run inline.
pub fn unique_point(filter: &Filter, defs: &[std::sync::Arc<IndexDef>]) -> bool {
    let conjuncts = filter.conjuncts();
    if conjuncts.iter().any(|c| matches!(c, Filter::Field { path, op: Op::Eq(_) } if path == ID_FIELD)) {
        return true;
    }
    // The same choice `candidates` makes: each field's first equality or `$in` must be one
    // non-null value, else the index would not serve the query as one point.
    defs.iter().filter(|d| d.kind == IndexKind::Unique && d.is_ready()).any(|d| {
        d.fields.iter().all(|f| {
            let first = conjuncts.iter().find_map(|c| match c {
                Filter::Field { path, op } if path == f => eq_values(op),
                _ => None,
            });
            first.is_some_and(|values| matches!(values.as_slice(), [v] if *v != Component::Null))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn unique(field: &str) -> std::sync::Arc<IndexDef> {
        std::sync::Arc::new(IndexDef::ready_for_test(IndexKind::Unique, &[field]))
    }

    /// A query runs inline only when the planner will serve it as one point: the same conjunct
    /// the planner takes for the field must be one non-null value.
    #[test]
    fn unique_point_agrees_with_the_planners_choice_of_conjunct() {
        let defs = [unique("email")];
        let point = |f: serde_json::Value| unique_point(&Filter::parse(&f).unwrap(), &defs);
        assert!(point(json!({"email": "a@x"})));
        assert!(point(json!({"_id": "k"})));
        assert!(!point(json!({"email": null})));
        assert!(!point(json!({"other": "a@x"})));
        // the planner drops an index whose first $in has more values than it scans; such a query
        // would be a full scan, which must not run inline
        let many: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
        assert!(!point(json!({"$and": [{"email": {"$in": many}}, {"email": "a@x"}]})));
        assert!(!point(json!({"email": {"$in": ["a", "b"]}})));
    }
}
