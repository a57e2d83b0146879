//! `POST /v1/admin/check`: walks every document and every index entry of every table on one
//! snapshot and reports any entry without its document or with a stale value, any document
//! missing an entry, a wrong document count, and graph adjacency that disagrees with its edges.

use super::indexes::entries::entries;
use super::{Db, Result, ServiceError};
use crate::catalog::{IndexDef, TableDef, TableKind};
use crate::entity::{self, FieldDict, ValueRef};
use crate::keys::{Direction, EntityKey, GraphKey, IdxKey, MetaKey, RidxKey, SidxKey};
use crate::storage::{KeyRange, ReadView, Space};
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Arc;
use utoipa::ToSchema;

/// Problems listed in a report (all are counted).
const MAX_LISTED: usize = 1000;

/// The outcome of a check.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct CheckReport {
    /// true when nothing is wrong
    pub ok: bool,
    /// what was walked
    pub checked: Checked,
    /// how many problems were found
    pub problem_count: u64,
    /// the first 1000 problems
    pub problems: Vec<CheckProblem>,
}

/// Counts of what a check walked.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct Checked {
    /// tables
    pub tables: u64,
    /// documents
    pub documents: u64,
    /// ready indexes
    pub indexes: u64,
    /// index entries
    pub index_entries: u64,
    /// graph adjacency entries
    pub graph_entries: u64,
}

/// One inconsistency.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CheckProblem {
    /// `missing_entry`, `stale_entry`, `orphan_entry`, `count_mismatch`, `undecodable_document`,
    /// `missing_adjacency`, `stale_adjacency`
    pub kind: &'static str,
    /// the key concerned, in display form
    pub key: String,
    /// what is wrong
    pub detail: String,
}

impl CheckReport {
    fn problem(&mut self, kind: &'static str, key: String, detail: impl Into<String>) {
        self.problem_count += 1;
        if self.problems.len() < MAX_LISTED {
            self.problems.push(CheckProblem { kind, key, detail: detail.into() });
        }
    }
}

fn internal(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::Internal(e.to_string())
}

fn defs_in<T: serde::de::DeserializeOwned>(view: &ReadView, prefix: Vec<u8>) -> Result<Vec<T>> {
    view.scan(Space::Meta, KeyRange::Prefix(prefix), false)
        .map(|item| serde_json::from_slice(&item?.1).map_err(internal))
        .collect()
}

impl Db {
    /// Checks every table; nothing is changed.
    pub async fn check(self: &Arc<Self>) -> Result<CheckReport> {
        self.read(|db| {
            let view = db.store.snapshot();
            let mut report = CheckReport::default();
            let tables: Vec<TableDef> = defs_in(&view, MetaKey::kind_prefix("table"))?;
            // A snapshot taken after the view's, so it holds every name the view's blobs use;
            // no lock is held during the walk, so writes adding names go on meanwhile.
            let dict = db.catalog.dict();
            for table in &tables {
                check_table(&view, &dict, table, &mut report)?;
            }
            report.checked.tables = tables.len() as u64;
            report.ok = report.problem_count == 0;
            Ok(report)
        })
        .await
    }
}

fn show(space: Space, key: &[u8]) -> String {
    crate::keys::display(space.name(), key)
}

fn check_table(view: &ReadView, dict: &FieldDict, table: &TableDef, report: &mut CheckReport) -> Result<()> {
    let name = table.name.as_str();
    let indexes: Vec<IndexDef> =
        defs_in::<IndexDef>(view, MetaKey::indexes_of(name))?.into_iter().filter(IndexDef::is_ready).collect();
    report.checked.indexes += indexes.len() as u64;
    // documents → the entries they should have
    let mut documents = 0u64;
    for item in view.scan(Space::Entity, KeyRange::Prefix(crate::keys::table_prefix(name)), false) {
        let (key, blob) = item?;
        documents += 1;
        let id = EntityKey::decode(&key).map_err(internal)?.id.into_owned();
        if let Err(e) = entity::decode(&blob, dict) {
            report.problem("undecodable_document", show(Space::Entity, &key), e.to_string());
            continue;
        }
        for def in &indexes {
            for e in entries(def, &id, &blob, dict)? {
                match view.get(e.space, &e.key)? {
                    None => report.problem("missing_entry", show(e.space, &e.key), format!("document {id:?} lacks it")),
                    Some(v) if *v != *e.value => {
                        report.problem("stale_entry", show(e.space, &e.key), "its value differs from the document's")
                    }
                    Some(_) => {}
                }
            }
        }
        if table.kind == TableKind::Edge {
            let get = |f: &str| match entity::get_path(&blob, dict, &[f]) {
                Ok(Some(ValueRef::Str(s))) => Some(s.to_owned()),
                _ => None,
            };
            if let (Some(from), Some(to)) = (get("_from"), get("_to")) {
                for (dir, at, other) in [(Direction::Out, &from, &to), (Direction::In, &to, &from)] {
                    let k = GraphKey::new(dir, name, at, &id).encode();
                    match view.get(Space::Graph, &k)? {
                        Some(v) if *v == *other.as_bytes() => {}
                        Some(_) => {
                            report.problem("stale_adjacency", show(Space::Graph, &k), "points at another vertex")
                        }
                        None => {
                            report.problem("missing_adjacency", show(Space::Graph, &k), format!("edge {id:?} lacks it"))
                        }
                    }
                }
            }
        }
    }
    report.checked.documents += documents;
    let counted = super::decode_count(view.get(Space::Meta, &MetaKey::Count(name.into()).encode())?.as_deref());
    if counted != documents {
        report.problem(
            "count_mismatch",
            show(Space::Meta, &MetaKey::Count(name.into()).encode()),
            format!("says {counted}, the table holds {documents}"),
        );
    }
    // entries → their documents
    for def in &indexes {
        let (space, prefix) = match def.kind {
            crate::catalog::IndexKind::Range => (Space::Ridx, RidxKey::index_prefix(name, &def.name)),
            crate::catalog::IndexKind::Spatial => (Space::Sidx, SidxKey::index_prefix(name, &def.name)),
            _ => (Space::Idx, IdxKey::index_prefix(name, &def.name)),
        };
        for item in view.scan(space, KeyRange::Prefix(prefix), false) {
            let (key, value) = item?;
            report.checked.index_entries += 1;
            let id = match space {
                Space::Ridx => RidxKey::decode(&key).map(|k| k.id.into_owned()).map_err(internal)?,
                Space::Sidx => SidxKey::decode(&key).map(|k| k.id.into_owned()).map_err(internal)?,
                _ => match IdxKey::decode(&key, def.fields.len()).map_err(internal)?.id {
                    Some(id) => id.into_owned(),
                    None => String::from_utf8_lossy(&value).into_owned(),
                },
            };
            let Some(blob) = view.get(Space::Entity, &EntityKey::new(name, &id).encode())? else {
                report.problem("orphan_entry", show(space, &key), format!("document {id:?} does not exist"));
                continue;
            };
            let expected = entries(def, &id, &blob, dict)?;
            if !expected.iter().any(|e| *e.key == *key && *e.value == *value) {
                report.problem("stale_entry", show(space, &key), format!("document {id:?} does not hold this value"));
            }
        }
    }
    // adjacency → its edges
    if table.kind == TableKind::Edge {
        let mut seen = BTreeSet::new();
        for dir in [Direction::Out, Direction::In] {
            for item in view.scan(Space::Graph, KeyRange::Prefix(GraphKey::table_prefix(dir, name)), false) {
                let (key, _) = item?;
                report.checked.graph_entries += 1;
                let k = GraphKey::decode(&key).map_err(internal)?;
                let edge = EntityKey::new(name, &k.edge_id).encode();
                if !seen.contains(&edge) && view.get(Space::Entity, &edge)?.is_none() {
                    report.problem(
                        "stale_adjacency",
                        show(Space::Graph, &key),
                        format!("edge {:?} does not exist", k.edge_id),
                    );
                } else {
                    seen.insert(edge);
                }
            }
        }
    }
    Ok(())
}
