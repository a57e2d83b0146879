//! Maintained views (`view:`): every ready view is recomputed from the table's documents — its
//! members, or its groups' states (count, exact sums) and min/max value counts, and its size —
//! and compared with its keys both ways: a key that should not be there, one that is missing,
//! and one whose value differs are each reported. The recomputation adds each document's
//! contribution afresh (never the write path's incremental changes), so a change staged wrongly
//! by a write, a build or a purge shows. It holds one view's expected keys in memory at a time.

use super::report::{CheckReport, defs_in, show};
use crate::catalog::{ViewDef, ViewKind};
use crate::entity::FieldDict;
use crate::keys::{Component, MetaKey, ViewKey};
use crate::service::Result;
use crate::service::core::cancel::{Stop, Watched};
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
pub(super) struct Tally {
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

#[cfg(test)]
mod tests {
    use crate::keys::{Component, Number, ViewKey};
    use crate::service::{CreateTable, CreateView, Db, DbOptions, Preconditions};
    use crate::storage::{Space, StorageConfig, StorageError};
    use serde_json::json;

    /// View keys written straight into the store, bypassing the write path: each wrong one is
    /// reported with its key, and the right ones are not.
    #[tokio::test]
    async fn check_reports_view_keys_that_differ_from_the_documents() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(StorageConfig::new(dir.path()), DbOptions { background_jobs: false, ..DbOptions::default() })
            .unwrap();
        let table: CreateTable = serde_json::from_value(json!({"name": "t"})).unwrap();
        db.create_table(table).await.unwrap();
        for v in [
            json!({"name": "f", "kind": "filter", "filter": {"age": {"$gte": 18}}}),
            json!({"name": "g", "kind": "group", "by": ["city"], "aggregates": {"n": "count", "s": "sum(amount)", "lo": "min(age)"}}),
        ] {
            let req: CreateView = serde_json::from_value(v).unwrap();
            db.create_view("t".into(), req).await.unwrap();
        }
        for (id, doc) in [
            ("a", json!({"age": 20, "city": "Oslo", "amount": 1.5})),
            ("b", json!({"age": 10, "city": "Oslo", "amount": 2})),
            ("c", json!({"age": 30, "city": "Rome"})),
        ] {
            let doc = doc.as_object().unwrap().clone();
            db.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
        }
        let report = db.check().await.unwrap();
        assert!(report.ok, "{report:?}");
        assert_eq!(report.checked.views, 2);
        // members a, c; count f; groups Oslo, Rome; count g; ages 10, 20 (Oslo), 30 (Rome)
        assert_eq!(report.checked.view_keys, 2 + 1 + 2 + 1 + 3, "{report:?}");
        let oslo = || vec![Component::Str("Oslo".into())];
        let group = db.store().get(Space::View, &ViewKey::group("t", "g", oslo()).encode()).unwrap().unwrap();
        let mut wrong_group = group.to_vec();
        wrong_group[7] += 1; // the count's last byte
        db.store()
            .write(move |tx| {
                tx.delete(Space::View, ViewKey::member("t", "f", "a").encode());
                tx.put(Space::View, ViewKey::member("t", "f", "zz").encode(), Vec::new());
                tx.put(Space::View, ViewKey::group("t", "g", oslo()).encode(), wrong_group);
                let ten = Component::Num(Number::Int(10));
                tx.delete(Space::View, ViewKey::value("t", "g", "age", oslo(), ten).encode());
                Ok::<_, StorageError>(())
            })
            .await
            .unwrap();
        let report = db.check().await.unwrap();
        let mut kinds: Vec<_> = report.problems.iter().map(|p| (p.kind, p.key.clone())).collect();
        kinds.sort();
        assert_eq!(
            kinds,
            [
                ("missing_entry", "view:t:f:m:a".to_owned()),
                ("missing_entry", "view:t:g:x:age:Oslo:10".to_owned()),
                ("orphan_entry", "view:t:f:m:zz".to_owned()),
                ("stale_entry", "view:t:g:g:Oslo".to_owned()),
            ],
            "{report:?}"
        );
        assert!(!report.ok);
    }
}
