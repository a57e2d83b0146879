//! `_id` conditions served from the entity keys: equality and `$in` as point reads, ranges and
//! `$prefix` as one key range — never a scan of the table or of an index. Entity keys sort by
//! (table, id) bytewise, so an id bound is a key bound.

use crate::keys::{Component, EntityKey, KeyWriter, prefix_successor, table_prefix};
use crate::service::core::fields::ID_FIELD;
use crate::service::core::filter::{Filter, Op};
use serde_json::Value;
use std::ops::Bound;

/// A key range of the entity keyspace.
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// Reads of documents by `_id`.
#[derive(Debug, Clone)]
pub struct IdScan {
    /// the table
    pub table: String,
    /// point reads of these ids, sorted and distinct (`_id` equality or `$in`); `None`: the range
    pub points: Option<Vec<String>>,
    /// the entity keys to scan (when not point reads)
    pub range: KeyRange,
    /// what it looks for, for `explain`
    pub condition: String,
    /// ids to read, or entity keys counted in the range (capped like index estimates)
    pub estimate: u64,
}

impl IdScan {
    /// The reads that serve the filter's `_id` conditions, if it has any that bound the ids.
    /// A condition that no string satisfies (`{"_id": null}`, `{"_id": {"$gt": 5}}`) yields no
    /// reads at all: every `_id` is a string.
    pub fn of(filter: &Filter, table: &str) -> Option<IdScan> {
        let ops: Vec<&Op> = filter
            .conjuncts()
            .into_iter()
            .filter_map(|c| match c {
                Filter::Field { path, op } if path == ID_FIELD => Some(op),
                _ => None,
            })
            .collect();
        let strings = |vs: &[Value]| -> Vec<String> {
            let mut ids: Vec<String> = vs.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            ids.sort();
            ids.dedup();
            ids
        };
        let point = ops.iter().find_map(|op| match op {
            Op::Eq(v) => Some(strings(std::slice::from_ref(v))),
            Op::In(vs) => Some(strings(vs)),
            _ => None,
        });
        if let Some(ids) = point {
            let condition = format!("_id in {ids:?}");
            let estimate = ids.len() as u64;
            return Some(IdScan {
                table: table.to_owned(),
                points: Some(ids),
                range: empty(table),
                condition,
                estimate,
            });
        }
        let prefix = table_prefix(table);
        let mut range: KeyRange =
            (Bound::Included(prefix.clone()), prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded));
        let mut parts = Vec::new();
        for op in ops {
            let key = |c: &Component<'_>| match c {
                Component::Str(s) => Some(EntityKey::new(table, s).encode()),
                _ => None,
            };
            match op {
                Op::Gt(c) | Op::Gte(c) | Op::Lt(c) | Op::Lte(c) => {
                    let Some(k) = key(c) else { return Some(nothing(table)) };
                    match op {
                        Op::Gt(_) => raise(&mut range.0, Bound::Excluded(k)),
                        Op::Gte(_) => raise(&mut range.0, Bound::Included(k)),
                        Op::Lt(_) => lower(&mut range.1, Bound::Excluded(k)),
                        _ => lower(&mut range.1, Bound::Included(k)),
                    }
                    parts.push(format!("_id {} {c}", symbol(op)));
                }
                Op::Prefix(p) => {
                    let start = KeyWriter::default().str(table).str_prefix(p).finish();
                    if let Some(end) = prefix_successor(&start) {
                        lower(&mut range.1, Bound::Excluded(end));
                    }
                    raise(&mut range.0, Bound::Included(start));
                    parts.push(format!("_id prefix {p:?}"));
                }
                _ => {}
            }
        }
        if parts.is_empty() {
            return None;
        }
        Some(IdScan { table: table.to_owned(), points: None, range, condition: parts.join(" and "), estimate: 0 })
    }

    /// Starts the reads after `id` (a later page of an `_id`-ordered query).
    pub fn seek_after(&mut self, id: &str) {
        match &mut self.points {
            Some(ids) => ids.retain(|i| i.as_str() > id),
            None => raise(&mut self.range.0, Bound::Excluded(EntityKey::new(&self.table, id).encode())),
        }
    }
}

fn symbol(op: &Op) -> &'static str {
    match op {
        Op::Gt(_) => ">",
        Op::Gte(_) => ">=",
        Op::Lt(_) => "<",
        _ => "<=",
    }
}

/// An empty range of the table's keys.
fn empty(table: &str) -> KeyRange {
    let p = table_prefix(table);
    (Bound::Included(p.clone()), Bound::Excluded(p))
}

/// Reads that find nothing.
fn nothing(table: &str) -> IdScan {
    IdScan {
        table: table.to_owned(),
        points: Some(Vec::new()),
        range: empty(table),
        condition: "_id matches no string".into(),
        estimate: 0,
    }
}

/// True when the range holds no key (an empty or inverted range must not reach the store).
pub fn is_empty(r: &KeyRange) -> bool {
    match r {
        (Bound::Included(lo), Bound::Included(hi)) => lo > hi,
        (Bound::Included(lo) | Bound::Excluded(lo), Bound::Included(hi) | Bound::Excluded(hi)) => lo >= hi,
        _ => false,
    }
}

/// Moves a lower bound up to `b` if `b` is tighter.
fn raise(lo: &mut Bound<Vec<u8>>, b: Bound<Vec<u8>>) {
    let tighter = match (&*lo, &b) {
        (Bound::Unbounded, _) => true,
        (_, Bound::Unbounded) => false,
        (Bound::Included(cur) | Bound::Excluded(cur), Bound::Included(new)) => new > cur,
        (Bound::Included(cur), Bound::Excluded(new)) => new >= cur,
        (Bound::Excluded(cur), Bound::Excluded(new)) => new > cur,
    };
    if tighter {
        *lo = b;
    }
}

/// Moves an upper bound down to `b` if `b` is tighter.
fn lower(hi: &mut Bound<Vec<u8>>, b: Bound<Vec<u8>>) {
    let tighter = match (&*hi, &b) {
        (Bound::Unbounded, _) => true,
        (_, Bound::Unbounded) => false,
        (Bound::Included(cur) | Bound::Excluded(cur), Bound::Included(new)) => new < cur,
        (Bound::Included(cur), Bound::Excluded(new)) => new <= cur,
        (Bound::Excluded(cur), Bound::Excluded(new)) => new < cur,
    };
    if tighter {
        *hi = b;
    }
}
