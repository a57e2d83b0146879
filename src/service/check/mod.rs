//! `POST /v1/admin/check`: walks every document and every index entry of every table on one
//! snapshot and reports any entry without its document or with a stale value, any document
//! missing an entry, a wrong document count, graph adjacency that disagrees with its edges, and
//! time-series statistics that disagree with the points (see [`timeseries`]), and expiry entries
//! that are not exactly one per expiring document at its expiry, and maintained views that differ
//! from their recomputation from the documents (see [`view`]), and an in-memory graph adjacency
//! that differs from the adjacency keys (see [`memory`]), and document histories that do not hold
//! together (see [`history`]).
//! Which entries a document should have is derived here independently of the write path
//! ([`derive`]), so an entry the write path computes wrongly is reported too.

mod derive;
mod ttl;

pub use crate::service::core::check_report::CheckReport;

use super::{Db, Result, ServiceError};
use crate::catalog::{IndexDef, TableDef, TableKind};
use crate::entity::{self, FieldDict, ValueRef};
use crate::keys::{AdjValue, Direction, EntityKey, GraphKey, IdxKey, MetaKey, RidxKey, SidxKey};
use crate::service::core::Handle;
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::{defs_in, internal, show};
use crate::storage::{KeyRange, ReadView, Space};
use std::sync::Arc;

/// Checks every table; nothing is changed. The walk gives up (`Abandoned`, 408
/// `request_timeout`) at the request timeout (`query_timeout`; none for the offline
/// `mosaicdb check`), or as soon as this future is dropped (the client went away).
pub async fn check(db: &Arc<Db>) -> Result<CheckReport> {
    // `_abandon` drops with this future, telling the walk on the blocking pool to stop
    let (stop, _abandon) = db.core.request_stop();
    db.read(move |db| check_walk(db, &stop)).await
}

fn check_walk(db: &Db, stop: &Stop) -> Result<CheckReport> {
    let view = db.core.store.snapshot();
    let mut report = CheckReport::default();
    let tables: Vec<TableDef> = defs_in(&view, MetaKey::kind_prefix("table"))?;
    // A snapshot taken after the view's, so it holds every name the view's blobs use;
    // no lock is held during the walk, so writes adding names go on meanwhile.
    let dict = db.core.catalog.dict();
    for table in &tables {
        stop.check()?;
        check_table(&view, &dict, table, &mut report, stop)?;
        crate::service::history::check::check_history(&view, &dict, table, &mut report, stop)?;
    }
    report.checked.tables = tables.len() as u64;
    report.checked.graph_memory = crate::service::graph::check::check_memory(&view, &tables, &mut report, stop)?;
    crate::service::timeseries::check::check_points(&view, &mut report, stop)?;
    crate::service::changefeed::check::check_events(&view, &mut report, stop)?;
    report.ok = report.problem_count == 0;
    Ok(report)
}

/// An edge blob's `_from`, `_to` and (for a table with a declared weight field) weight, read here
/// on their own rather than with the write path's helper.
fn edge_of(table: &TableDef, blob: &[u8], dict: &FieldDict) -> Option<(String, String, Option<f64>)> {
    let get = |f: &str| match entity::get_path(blob, dict, &[f]) {
        Ok(Some(ValueRef::Str(s))) => Some(s.to_owned()),
        _ => None,
    };
    let weight = table.weight_field.as_deref().and_then(|w| match entity::get_path(blob, dict, &[w]) {
        Ok(Some(ValueRef::Int(i))) => Some(i as f64),
        Ok(Some(ValueRef::UInt(u))) => Some(u as f64),
        Ok(Some(ValueRef::Float(f))) => Some(f),
        _ => None,
    });
    Some((get("_from")?, get("_to")?, weight))
}

fn check_table(
    view: &ReadView,
    dict: &FieldDict,
    table: &TableDef,
    report: &mut CheckReport,
    stop: &Stop,
) -> Result<()> {
    let name = table.name.as_str();
    let defs: Vec<IndexDef> = defs_in::<IndexDef>(view, MetaKey::indexes_of(name))?;
    let expiry = ttl::Rules::of(&defs);
    let indexes: Vec<IndexDef> = defs.into_iter().filter(IndexDef::is_ready).collect();
    report.checked.indexes += indexes.len() as u64;
    let mut views = crate::service::views::check::Tally::of(view, name, report)?;
    // documents → the entries they should have
    let mut documents = 0u64;
    let mut tallies: Vec<crate::service::search::check::Tally> =
        indexes.iter().map(|_| crate::service::search::check::Tally::default()).collect();
    let docs = view.scan(Space::Entity, KeyRange::Prefix(crate::keys::table_prefix(name)), false);
    for item in Watched::new(docs.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, blob) = item?;
        documents += 1;
        let id = EntityKey::decode(&key).map_err(internal)?.id.into_owned();
        if let Err(e) = entity::decode(&blob, dict) {
            report.problem("undecodable_document", show(Space::Entity, &key), e.to_string());
            continue;
        }
        if let Some(rules) = &expiry {
            rules.check_document(view, dict, name, &id, &blob, report)?;
        }
        views.document(&id, &blob, dict)?;
        for (def, tally) in indexes.iter().zip(&mut tallies) {
            if def.kind == crate::catalog::IndexKind::Fulltext {
                crate::service::search::check::check_document(view, dict, def, &id, &blob, tally, report)?;
                continue;
            }
            for (space, key, value) in derive::expected(def, &id, &blob, dict)? {
                match view.get(space, &key)? {
                    None => report.problem("missing_entry", show(space, &key), format!("document {id:?} lacks it")),
                    Some(v) if *v != *value => {
                        report.problem("stale_entry", show(space, &key), "its value differs from the document's")
                    }
                    Some(_) => {}
                }
            }
        }
        if table.kind == TableKind::Edge
            && let Some((from, to, weight)) = edge_of(table, &blob, dict)
        {
            for (dir, at, other) in [(Direction::Out, &from, &to), (Direction::In, &to, &from)] {
                let k = GraphKey::new(dir, name, at, &id).encode();
                let want = AdjValue { other: other.as_str().into(), weight }.encode();
                match view.get(Space::Graph, &k)? {
                    Some(v) if *v == *want => {}
                    Some(_) => report.problem(
                        "stale_adjacency",
                        show(Space::Graph, &k),
                        "its value (other endpoint, weight) differs from the edge's",
                    ),
                    None => {
                        report.problem("missing_adjacency", show(Space::Graph, &k), format!("edge {id:?} lacks it"))
                    }
                }
            }
        }
    }
    report.checked.documents += documents;
    let counted = crate::service::core::counts::decode(
        view.get(Space::Meta, &crate::service::core::counts::key(name))?.as_deref(),
    );
    if counted != documents {
        report.problem(
            "count_mismatch",
            show(Space::Meta, &MetaKey::Count(name.into()).encode()),
            format!("says {counted}, the table holds {documents}"),
        );
    }
    // entries → their documents
    for (def, tally) in indexes.iter().zip(&tallies) {
        if def.kind == crate::catalog::IndexKind::Fulltext {
            report.checked.postings += crate::service::search::check::check_index(view, def, tally, report, stop)?;
            continue;
        }
        if def.kind == crate::catalog::IndexKind::Vector {
            report.checked.vector_nodes += crate::service::vectors::check::check_index(view, dict, def, report, stop)?;
            continue;
        }
        let (space, prefix) = match def.kind {
            crate::catalog::IndexKind::Range => (Space::Ridx, RidxKey::index_prefix(name, &def.name)),
            crate::catalog::IndexKind::Spatial => (Space::Sidx, SidxKey::index_prefix(name, &def.name)),
            _ => (Space::Idx, IdxKey::index_prefix(name, &def.name)),
        };
        let entries = view.scan(space, KeyRange::Prefix(prefix), false);
        for item in Watched::new(entries.map(|i| i.map_err(ServiceError::from)), stop) {
            let (key, value) = item?;
            report.checked.index_entries += 1;
            let id = match space {
                Space::Ridx => RidxKey::decode(&key).map(|k| k.id.into_owned()),
                Space::Sidx => SidxKey::decode(&key).map(|k| k.id.into_owned()),
                _ => IdxKey::decode(&key, def.fields.len()).map(|k| match k.id {
                    Some(id) => id.into_owned(),
                    None => String::from_utf8_lossy(&value).into_owned(),
                }),
            };
            // a damaged key is one problem to report, not a reason to stop checking
            let id = match id {
                Ok(id) => id,
                Err(e) => {
                    report.problem("stale_entry", show(space, &key), format!("the key does not decode: {e}"));
                    continue;
                }
            };
            let Some(blob) = view.get(Space::Entity, &EntityKey::new(name, &id).encode())? else {
                report.problem("orphan_entry", show(space, &key), format!("document {id:?} does not exist"));
                continue;
            };
            match derive::judge(def, &key, &value, &id, &blob, dict) {
                Ok(None) => {}
                Ok(Some(why)) => report.problem("stale_entry", show(space, &key), why),
                Err(e) => report.problem("stale_entry", show(space, &key), format!("cannot judge it: {e}")),
            }
        }
    }
    // view keys ↔ the views recomputed
    report.checked.view_keys += views.finish(view, report, stop)?;
    // expiry entries → their documents
    if let Some(rules) = &expiry {
        rules.check_entries(view, dict, name, report, stop)?;
    }
    // adjacency → its edges: each entry is one of the two its edge document should have
    if table.kind == TableKind::Edge {
        for dir in [Direction::Out, Direction::In] {
            let adjacency = view.scan(Space::Graph, KeyRange::Prefix(GraphKey::table_prefix(dir, name)), false);
            for item in Watched::new(adjacency.map(|i| i.map_err(ServiceError::from)), stop) {
                let (key, _) = item?;
                report.checked.graph_entries += 1;
                let k = match GraphKey::decode(&key) {
                    Ok(k) => k,
                    Err(e) => {
                        report.problem(
                            "stale_adjacency",
                            show(Space::Graph, &key),
                            format!("the key does not decode: {e}"),
                        );
                        continue;
                    }
                };
                let edge = EntityKey::new(name, &k.edge_id).encode();
                let Some(blob) = view.get(Space::Entity, &edge)? else {
                    report.problem(
                        "stale_adjacency",
                        show(Space::Graph, &key),
                        format!("edge {:?} does not exist", k.edge_id),
                    );
                    continue;
                };
                let at = edge_of(table, &blob, dict).map(|(from, to, _)| if dir == Direction::Out { from } else { to });
                if at.as_deref() != Some(&*k.vertex) {
                    report.problem(
                        "stale_adjacency",
                        show(Space::Graph, &key),
                        format!(
                            "edge {:?} does not have {:?} as its {}",
                            k.edge_id,
                            k.vertex,
                            if dir == Direction::Out { "_from" } else { "_to" }
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Component, Number, sidx};
    use crate::service::{CreateIndex, CreateTable, DbOptions, Preconditions};
    use crate::storage::StorageConfig;
    use serde_json::json;

    /// A table with one index of each kind and two documents; check finds it whole.
    async fn db(dir: &std::path::Path) -> Arc<Db> {
        let db =
            Db::open(StorageConfig::new(dir), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
        let table: CreateTable = serde_json::from_value(json!({"name": "t"})).unwrap();
        db.pipeline.create_table(table).await.unwrap();
        for (name, kind, field) in
            [("h", "hash", "g"), ("u", "unique", "e"), ("r", "range", "n"), ("s", "spatial", "p")]
        {
            let req: CreateIndex =
                serde_json::from_value(json!({"name": name, "kind": kind, "fields": [field]})).unwrap();
            db.pipeline.create_index("t".into(), req).await.unwrap();
        }
        for (id, doc) in [
            ("a", json!({"g": "x", "e": "a@x", "n": [3, 4], "p": {"lat": 59.9, "lon": 10.75}})),
            ("b", json!({"g": "y", "e": "b@x", "n": 7, "p": [5.3, 60.4]})),
        ] {
            let doc = doc.as_object().unwrap().clone();
            db.pipeline.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
        }
        let report = crate::service::check(&db).await.unwrap();
        assert!(report.ok, "{report:?}");
        db
    }

    async fn corrupt(db: &Arc<Db>, delete: Option<(Space, Vec<u8>)>, put: (Space, Vec<u8>, Vec<u8>)) {
        db.core
            .store()
            .write(move |tx| {
                if let Some((space, key)) = delete {
                    tx.delete(space, key);
                }
                tx.put(put.0, put.1, put.2);
                Ok::<_, crate::storage::StorageError>(())
            })
            .await
            .unwrap();
    }

    fn kinds(report: &CheckReport) -> Vec<(&'static str, String)> {
        let mut k: Vec<_> = report.problems.iter().map(|p| (p.kind, p.key.clone())).collect();
        k.sort();
        k
    }

    fn num(i: i64) -> Component<'static> {
        Component::Num(Number::Int(i))
    }

    /// Entries written straight into the store, bypassing the write path: each wrong one is
    /// reported with its key.
    #[tokio::test]
    async fn check_reports_entries_the_documents_do_not_hold() {
        // a range entry moved to a value the document lacks: stale, and the right one missing
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let right = RidxKey::new("t", "r", num(4), "a").encode();
        let wrong = RidxKey::new("t", "r", num(5), "a").encode();
        corrupt(&d, Some((Space::Ridx, right)), (Space::Ridx, wrong, vec![])).await;
        let report = crate::service::check(&d).await.unwrap();
        assert_eq!(
            kinds(&report),
            [("missing_entry", "ridx:t:r:4:a".to_owned()), ("stale_entry", "ridx:t:r:5:a".to_owned())],
            "{report:?}"
        );
        assert!(!report.ok);

        // an extra hash entry beside the right one: only the extra one is wrong
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let extra = IdxKey::new("t", "h", vec![Component::Str("y".into())], "a").encode();
        corrupt(&d, None, (Space::Idx, extra, vec![])).await;
        assert_eq!(kinds(&crate::service::check(&d).await.unwrap()), [("stale_entry", "idx:t:h:y:a".to_owned())]);

        // a unique entry that names the wrong owner
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let key = IdxKey::unique("t", "u", vec![Component::Str("a@x".into())]).encode();
        corrupt(&d, None, (Space::Idx, key, b"b".to_vec())).await;
        let report = crate::service::check(&d).await.unwrap();
        assert_eq!(
            kinds(&report),
            [("stale_entry", "idx:t:u:a@x".to_owned()), ("stale_entry", "idx:t:u:a@x".to_owned())],
            "{report:?}"
        );

        // a spatial entry in the right cell with a wrong point
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let cell = geohash::encode(geohash::Coord { x: 10.75, y: 59.9 }, 12).unwrap();
        let key = SidxKey::new("t", "s", &cell, "a").encode();
        corrupt(&d, None, (Space::Sidx, key, sidx::encode_point(59.9, 10.0).to_vec())).await;
        let report = crate::service::check(&d).await.unwrap();
        assert_eq!(report.problem_count, 2, "both walks see it: {report:?}");
        assert!(report.problems.iter().all(|p| p.kind == "stale_entry" && p.key.starts_with("sidx:t:s:")));

        // an entry of a document that does not exist
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let key = RidxKey::new("t", "r", num(1), "ghost").encode();
        corrupt(&d, None, (Space::Ridx, key, vec![])).await;
        assert_eq!(kinds(&crate::service::check(&d).await.unwrap()), [("orphan_entry", "ridx:t:r:1:ghost".to_owned())]);

        // bytes under the index's prefix that are no key at all: reported, and the walk goes on
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let mut garbage = RidxKey::index_prefix("t", "r");
        garbage.extend_from_slice(&[0xee, 0x01]);
        corrupt(&d, None, (Space::Ridx, garbage, vec![])).await;
        let report = crate::service::check(&d).await.unwrap();
        assert_eq!(report.problem_count, 1, "{report:?}");
        assert!(report.problems[0].detail.contains("does not decode"), "{report:?}");
        assert_eq!(report.checked.index_entries, 10, "the 9 good entries were still checked");
    }

    /// Adjacency is checked both ways: each edge has exactly its two entries with the right other
    /// endpoint and weight, and each entry belongs to an edge that has it at that vertex; and the
    /// in-memory adjacency against the entries.
    #[tokio::test]
    async fn check_reports_adjacency_that_disagrees_with_its_edges() {
        use crate::keys::AdjValue;
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        let edges: CreateTable =
            serde_json::from_value(json!({"name": "e", "kind": "edge", "weight_field": "km"})).unwrap();
        d.pipeline.create_table(edges).await.unwrap();
        let doc = json!({"_from": "t/a", "_to": "t/b", "km": 7}).as_object().unwrap().clone();
        d.pipeline.put_document("e".into(), "x".into(), doc, Preconditions::default()).await.unwrap();
        assert!(crate::service::check(&d).await.unwrap().ok);
        let out = GraphKey::new(Direction::Out, "e", "t/a", "x").encode();
        let inn = GraphKey::new(Direction::In, "e", "t/b", "x").encode();
        let value = |other: &str, w: f64| AdjValue { other: other.into(), weight: Some(w) }.encode();
        // a wrong weight; an entry at a vertex the edge does not touch; an entry of no edge
        corrupt(&d, None, (Space::Graph, out.clone(), value("t/b", 8.0))).await;
        let stray = GraphKey::new(Direction::In, "e", "t/a", "x").encode();
        corrupt(&d, None, (Space::Graph, stray, value("t/b", 7.0))).await;
        let ghost = GraphKey::new(Direction::Out, "e", "t/a", "ghost").encode();
        corrupt(&d, Some((Space::Graph, inn)), (Space::Graph, ghost, value("t/b", 1.0))).await;
        let report = crate::service::check(&d).await.unwrap();
        // the in-memory adjacency still holds what the writes did, so it differs from the keys
        // the corruption changed, each way
        let memory: Vec<&str> =
            report.problems.iter().filter(|p| p.kind == "memory_adjacency").map(|p| p.detail.as_str()).collect();
        assert_eq!(memory.len(), 4, "{memory:?}");
        for want in [
            "lacks the Out entry of edge \"e/ghost\"",
            "(weight 7), its key to \"t/b\" (weight 8)",
            "lacks the In entry of edge \"e/x\" at \"t/a\"",
        ] {
            assert!(memory.iter().any(|m| m.contains(want)), "{want}: {memory:?}");
        }
        assert_eq!(
            kinds(&report).into_iter().filter(|(k, _)| *k != "memory_adjacency").collect::<Vec<_>>(),
            [
                ("missing_adjacency", "graph:in:e:\"t/b\":x".to_owned()),
                ("stale_adjacency", "graph:in:e:\"t/a\":x".to_owned()),
                ("stale_adjacency", "graph:out:e:\"t/a\":ghost".to_owned()),
                ("stale_adjacency", "graph:out:e:\"t/a\":x".to_owned()),
            ],
            "{report:?}"
        );
    }

    /// The walk stops once its request's future is gone, or at its deadline; without either it
    /// runs to the end.
    #[tokio::test]
    async fn check_stops_when_abandoned_or_past_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path()).await;
        for i in 0..200 {
            let doc = json!({"g": format!("v{i}")}).as_object().unwrap().clone();
            d.pipeline.put_document("t".into(), format!("d{i:03}"), doc, Preconditions::default()).await.unwrap();
        }
        let (stop, abandon) = Stop::new(None);
        drop(abandon);
        assert!(matches!(check_walk(&d, &stop), Err(ServiceError::Abandoned)));
        let (stop, _abandon) = Stop::new(Some(std::time::Instant::now()));
        assert!(matches!(check_walk(&d, &stop), Err(ServiceError::Abandoned)));
        let (stop, _abandon) = Stop::new(None);
        let report = check_walk(&d, &stop).unwrap();
        assert_eq!(report.checked.documents, 202, "{report:?}");
    }
}
