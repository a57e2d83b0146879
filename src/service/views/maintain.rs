//! Keeping views up to date: what a document contributes to a view, and the change between two
//! versions of it staged as the few keys that differ — in the write that changes the document.
//!
//! [`stage`] is the views' step of every document write (`write::derived`), the one place every
//! document change goes through (insert, replace, patch, delete, batch, import, TTL expiry, cascade), with the old and
//! new blobs. A write that changes neither a document's membership nor its group values nor its
//! aggregated values stages no view key. Group states are read-modify-written on the committer
//! (`WriteTx::get` sees the write's own staged keys, so a batch touching one group twice adds up).

use super::def::{Compiled, MAX_KEYS_PER_DOC, compiled};
use super::state::GroupState;
use super::sum::ExactSum;
use crate::catalog::{Catalog, ViewDef, ViewKind};
use crate::entity::{self, FieldDict, ValueRef};
use crate::keys::{Component, ViewKey};
use crate::service::core::change::Change;
use crate::service::core::filter::{field_values, path};
use crate::service::{Result, ServiceError};
use crate::storage::{Space, WriteTx};
use std::collections::BTreeMap;

/// A group: one value per `by` field.
pub type Group = Vec<Component<'static>>;

/// A numeric value a sum adds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Numeric {
    /// an integer (i64 or u64)
    Int(i128),
    /// a float
    Float(f64),
}

/// What one document adds to a group view.
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    /// its groups, distinct
    pub groups: Vec<Group>,
    /// per summed field: its numeric value, if it has one (a scalar number)
    pub sums: Vec<Option<Numeric>>,
    /// per min/max field: its distinct values (each array element), nulls left out
    pub ranges: Vec<Vec<Component<'static>>>,
}

/// The numeric value of a field, if it is a number (not an array, string or anything else).
fn numeric(blob: &[u8], dict: &FieldDict, field: &str) -> Result<Option<Numeric>> {
    Ok(match entity::get_path(blob, dict, &path(field))? {
        Some(ValueRef::Int(i)) => Some(Numeric::Int(i128::from(i))),
        Some(ValueRef::UInt(u)) => Some(Numeric::Int(i128::from(u))),
        Some(ValueRef::Float(f)) => Some(Numeric::Float(f)),
        _ => None,
    })
}

/// True when the document belongs in the view (its filter matches; no filter: always).
pub fn member(c: &Compiled, id: &str, blob: &[u8], dict: &FieldDict) -> Result<bool> {
    c.filter.as_ref().map_or(Ok(true), |f| f.matches(id, blob, dict))
}

/// What a document contributes to a group view, `None` when the filter leaves it out. With
/// `capped`, a document over [`MAX_KEYS_PER_DOC`] is refused (a stored one never is: it was
/// checked when written, and must stay deletable).
pub fn contribution(
    c: &Compiled,
    view: &str,
    id: &str,
    blob: &[u8],
    dict: &FieldDict,
    capped: bool,
) -> Result<Option<Contribution>> {
    if !member(c, id, blob, dict)? {
        return Ok(None);
    }
    let per_field: Vec<Vec<Component<'static>>> =
        c.by.iter()
            .map(|f| Ok(field_values(blob, dict, f)?.into_iter().map(Component::into_owned).collect()))
            .collect::<Result<_>>()?;
    let ranges: Vec<Vec<Component<'static>>> = c
        .range_fields
        .iter()
        .map(|f| {
            let values = field_values(blob, dict, f)?;
            Ok(values.into_iter().filter(|v| *v != Component::Null).map(Component::into_owned).collect())
        })
        .collect::<Result<_>>()?;
    let groups = per_field.iter().try_fold(1usize, |n, v| n.checked_mul(v.len()));
    let per_group = ranges.iter().try_fold(1usize, |n, v| n.checked_add(v.len()));
    let keys = groups.zip(per_group).and_then(|(g, p)| g.checked_mul(p));
    if capped && keys.is_none_or(|k| k > MAX_KEYS_PER_DOC) {
        return Err(ServiceError::TooManyViewKeys {
            view: view.to_owned(),
            keys: keys.map_or_else(|| "more than 2^64".to_owned(), |k| k.to_string()),
        });
    }
    let groups = per_field.iter().fold(vec![Vec::new()], |acc, values| {
        acc.iter()
            .flat_map(|prefix: &Group| {
                values.iter().map(move |v| {
                    let mut g = prefix.clone();
                    g.push(v.clone());
                    g
                })
            })
            .collect()
    });
    let sums = c.sum_fields.iter().map(|f| numeric(blob, dict, f)).collect::<Result<_>>()?;
    Ok(Some(Contribution { groups, sums, ranges }))
}

/// The change of one group.
#[derive(Debug, Clone, Default)]
struct GroupDelta {
    count: i64,
    /// per summed field: numeric values, float values, the sum
    sums: Vec<(i64, i64, ExactSum)>,
}

impl GroupDelta {
    fn is_zero(&self) -> bool {
        self.count == 0 && self.sums.iter().all(|(n, f, s)| *n == 0 && *f == 0 && s.is_zero())
    }
}

/// The changes to one view's keys, gathered over one or many documents, staged at once.
#[derive(Debug, Default)]
pub struct Delta {
    /// filter views: id → a member now (true) or no longer (false)
    members: BTreeMap<String, bool>,
    groups: BTreeMap<Group, GroupDelta>,
    /// (min/max field, group, value) → change of its document count
    values: BTreeMap<(usize, Group, Component<'static>), i64>,
}

impl Delta {
    /// Notes a filter view's membership change of document `id`.
    pub fn member(&mut self, id: &str, now: bool) {
        self.members.insert(id.to_owned(), now);
    }

    /// Adds (`sign` 1) or takes away (`sign` -1) a document's contribution.
    pub fn add(&mut self, c: &Contribution, sign: i64) {
        for g in &c.groups {
            let d = self.groups.entry(g.clone()).or_default();
            d.count += sign;
            if d.sums.len() < c.sums.len() {
                d.sums.resize_with(c.sums.len(), Default::default);
            }
            for (slot, v) in d.sums.iter_mut().zip(&c.sums) {
                match v {
                    Some(Numeric::Int(i)) => {
                        slot.0 += sign;
                        slot.2.add_int(*i, sign < 0);
                    }
                    Some(Numeric::Float(f)) => {
                        slot.0 += sign;
                        slot.1 += sign;
                        slot.2.add_f64(*f, sign < 0);
                    }
                    None => {}
                }
            }
            for (field, values) in c.ranges.iter().enumerate() {
                for v in values {
                    *self.values.entry((field, g.clone(), v.clone())).or_default() += sign;
                }
            }
        }
    }

    /// Adds another delta's changes to this one.
    pub fn merge(&mut self, other: Delta) {
        self.members.extend(other.members);
        for (g, d) in other.groups {
            let mine = self.groups.entry(g).or_default();
            mine.count += d.count;
            if mine.sums.len() < d.sums.len() {
                mine.sums.resize_with(d.sums.len(), Default::default);
            }
            for (a, b) in mine.sums.iter_mut().zip(&d.sums) {
                a.0 += b.0;
                a.1 += b.1;
                a.2.add(&b.2);
            }
        }
        for (k, v) in other.values {
            *self.values.entry(k).or_default() += v;
        }
    }

    /// Stages the changes: membership keys, group states (read, changed, written; removed at a
    /// count of 0), value counts (removed at 0), and the view's size.
    pub fn stage(self, tx: &mut WriteTx<'_>, c: &Compiled, table: &str, view: &str) -> Result<()> {
        let mut size: i64 = 0;
        for (id, now) in self.members {
            let key = ViewKey::member(table, view, &id).encode();
            if now {
                tx.put(Space::View, key, Vec::new());
                size += 1;
            } else {
                tx.delete(Space::View, key);
                size -= 1;
            }
        }
        for (group, d) in self.groups {
            if d.is_zero() {
                continue;
            }
            let key = ViewKey::group(table, view, group).encode();
            let old = tx.get_cached(Space::View, &key)?;
            let mut state = match &old {
                Some(v) => GroupState::decode(v, c.sum_fields.len()).ok_or_else(|| damaged(&key))?,
                None => GroupState::new(c.sum_fields.len()),
            };
            state.count = state.count.saturating_add_signed(d.count);
            for (s, (n, f, sum)) in state.sums.iter_mut().zip(&d.sums) {
                s.numbers = s.numbers.saturating_add_signed(*n);
                s.floats = s.floats.saturating_add_signed(*f);
                s.sum.add(sum);
            }
            if state.count == 0 {
                tx.delete(Space::View, key);
                size -= i64::from(old.is_some());
            } else {
                tx.put(Space::View, key, state.encode());
                size += i64::from(old.is_none());
            }
        }
        for ((field, group, value), d) in self.values {
            if d == 0 {
                continue;
            }
            let name = c.range_fields.get(field).map(String::as_str).unwrap_or_default();
            let key = ViewKey::value(table, view, name, group, value).encode();
            let old = decode_u64(tx.get_cached(Space::View, &key)?.as_deref());
            match old.saturating_add_signed(d) {
                0 => tx.delete(Space::View, key),
                n => tx.put(Space::View, key, n.to_be_bytes().to_vec()),
            }
        }
        if size != 0 {
            let key = ViewKey::count(table, view).encode();
            match decode_u64(tx.get_cached(Space::View, &key)?.as_deref()).saturating_add_signed(size) {
                0 => tx.delete(Space::View, key),
                n => tx.put(Space::View, key, n.to_be_bytes().to_vec()),
            }
        }
        Ok(())
    }
}

/// A stored u64 count (absent: 0).
pub fn decode_u64(v: Option<&[u8]>) -> u64 {
    v.and_then(|v| v.try_into().ok()).map_or(0, u64::from_be_bytes)
}

fn damaged(key: &[u8]) -> ServiceError {
    ServiceError::damaged("view", format!("key {}", crate::keys::display("view", key)))
}

/// The change a document's write makes to one view (old blob → new blob).
pub fn change(
    def: &ViewDef,
    c: &Compiled,
    id: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
    dict: &FieldDict,
) -> Result<Option<Delta>> {
    let mut delta = Delta::default();
    match def.kind {
        ViewKind::Filter => {
            let was = old.map(|b| member(c, id, b, dict)).transpose()?.unwrap_or(false);
            let now = new.map(|b| member(c, id, b, dict)).transpose()?.unwrap_or(false);
            if was == now {
                return Ok(None);
            }
            delta.member(id, now);
        }
        ViewKind::Group => {
            let before = old.map(|b| contribution(c, &def.name, id, b, dict, false)).transpose()?.flatten();
            let after = new.map(|b| contribution(c, &def.name, id, b, dict, true)).transpose()?.flatten();
            if before == after {
                return Ok(None);
            }
            if let Some(b) = &before {
                delta.add(b, -1);
            }
            if let Some(a) = &after {
                delta.add(a, 1);
            }
        }
    }
    Ok(Some(delta))
}

/// The views' step of a document change (see `service::pipeline::write`): every view of its table that
/// covers it changes with it, in the write (see the module doc). A new version over a group
/// view's per-document cap fails the write with `too_many_view_keys`.
pub(crate) fn stage(w: &mut WriteTx<'_>, catalog: &Catalog, doc: &Change<'_>) -> Result<()> {
    let (table, id, old, new) = (doc.table.name.as_str(), doc.id, doc.old, doc.new);
    if !catalog.has_views(table) {
        return Ok(());
    }
    let dict = catalog.dict();
    for def in catalog.views(table) {
        if !def.covers(id) {
            continue;
        }
        let c = compiled(&def)?;
        if let Some(delta) = change(&def, &c, id, old, new, &dict)? {
            delta.stage(w, &c, table, &def.name)?;
        }
    }
    Ok(())
}
