//! Maintained views (`view:`): every ready view is recomputed from the table's documents — its
//! members, or its groups' states (count, exact sums) and min/max value counts, and its size —
//! and compared with its keys both ways: a key that should not be there, one that is missing,
//! and one whose value differs are each reported. The recomputation adds each document's
//! contribution afresh (never the write path's incremental changes), so a change staged wrongly
//! by a write, a build or a purge shows. It holds one view's expected keys in memory at a time.

use crate::catalog::{ViewDef, ViewKind};
use crate::entity::FieldDict;
use crate::keys::{Component, MetaKey, ViewKey};
use crate::service::Result;
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::{CheckReport, defs_in, show};
use crate::service::views::def::{Compiled, compile};
use crate::service::views::maintain::{Group, Numeric, contribution, member};
use crate::service::views::state::GroupState;
use crate::storage::{KeyRange, ReadView, Space};
use std::collections::BTreeMap;

/// What one view should hold.
struct Expected {
    def: ViewDef,
    compiled: Compiled,
    members: Vec<String>,
    groups: BTreeMap<Group, GroupState>,
    values: BTreeMap<(usize, Group, Component<'static>), u64>,
}

/// The ready views of one table, recomputed document by document.
pub(crate) struct Tally {
    views: Vec<Expected>,
}

impl Tally {
    /// The ready views of `table` as the snapshot holds them; a definition that does not compile
    /// is reported and left out.
    pub fn of(view: &ReadView, table: &str, report: &mut CheckReport) -> Result<Tally> {
        let defs: Vec<ViewDef> = defs_in(view, MetaKey::views_of(table))?;
        let mut views = Vec::new();
        for def in defs.into_iter().filter(ViewDef::is_ready) {
            match compile(&def) {
                Ok(compiled) => views.push(Expected {
                    def,
                    compiled,
                    members: Vec::new(),
                    groups: BTreeMap::new(),
                    values: BTreeMap::new(),
                }),
                Err(e) => report.problem(
                    "stale_entry",
                    show(Space::Meta, &MetaKey::View(table.into(), def.name.as_str().into()).encode()),
                    format!("the view's definition does not compile: {e}"),
                ),
            }
        }
        report.checked.views += views.len() as u64;
        Ok(Tally { views })
    }

    /// Adds a document (documents come in `_id` order).
    pub fn document(&mut self, id: &str, blob: &[u8], dict: &FieldDict) -> Result<()> {
        for v in &mut self.views {
            match v.def.kind {
                ViewKind::Filter => {
                    if member(&v.compiled, id, blob, dict)? {
                        v.members.push(id.to_owned());
                    }
                }
                ViewKind::Group => {
                    let Some(c) = contribution(&v.compiled, &v.def.name, id, blob, dict, false)? else { continue };
                    let fields = v.compiled.sum_fields.len();
                    for g in &c.groups {
                        let state = v.groups.entry(g.clone()).or_insert_with(|| GroupState::new(fields));
                        state.count += 1;
                        for (s, value) in state.sums.iter_mut().zip(&c.sums) {
                            match value {
                                Some(Numeric::Int(i)) => {
                                    s.numbers += 1;
                                    s.sum.add_int(*i, false);
                                }
                                Some(Numeric::Float(f)) => {
                                    s.numbers += 1;
                                    s.floats += 1;
                                    s.sum.add_f64(*f, false);
                                }
                                None => {}
                            }
                        }
                        for (field, values) in c.ranges.iter().enumerate() {
                            for value in values {
                                *v.values.entry((field, g.clone(), value.clone())).or_default() += 1;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Compares each view's keys with what it should hold; returns the keys walked.
    pub fn finish(self, view: &ReadView, report: &mut CheckReport, stop: &Stop) -> Result<u64> {
        let mut walked = 0;
        for v in self.views {
            let (table, name) = (v.def.table.as_str(), v.def.name.as_str());
            let mut expected: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let size = match v.def.kind {
                ViewKind::Filter => v.members.len(),
                ViewKind::Group => v.groups.len(),
            } as u64;
            if size > 0 {
                expected.insert(ViewKey::count(table, name).encode(), size.to_be_bytes().to_vec());
            }
            for id in &v.members {
                expected.insert(ViewKey::member(table, name, id).encode(), Vec::new());
            }
            for (g, state) in v.groups {
                expected.insert(ViewKey::group(table, name, g).encode(), state.encode());
            }
            for ((field, g, value), n) in v.values {
                let f = v.compiled.range_fields.get(field).map(String::as_str).unwrap_or_default();
                expected.insert(ViewKey::value(table, name, f, g, value).encode(), n.to_be_bytes().to_vec());
            }
            let keys = view.scan(Space::View, KeyRange::Prefix(ViewKey::view_prefix(table, name)), false);
            for item in Watched::new(keys.map(|i| i.map_err(crate::service::ServiceError::from)), stop) {
                let (key, value) = item?;
                walked += 1;
                match expected.remove(&key[..]) {
                    None => report.problem(
                        "orphan_entry",
                        show(Space::View, &key),
                        format!("view {name:?} should not hold it (recomputed from the documents)"),
                    ),
                    Some(want) if want != *value => report.problem(
                        "stale_entry",
                        show(Space::View, &key),
                        format!("its value differs from view {name:?} recomputed from the documents"),
                    ),
                    Some(_) => {}
                }
            }
            for key in expected.into_keys() {
                report.problem(
                    "missing_entry",
                    show(Space::View, &key),
                    format!("view {name:?} recomputed from the documents holds it"),
                );
            }
        }
        Ok(walked)
    }
}
