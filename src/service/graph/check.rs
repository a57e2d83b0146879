//! `check` for the in-memory graph adjacency: the one the check's view carries (exactly as of its
//! keys) against every `graph:` entry of every edge table — the same entries at the same
//! vertices, leading to the same ends with the same weights, and nothing more. Skipped when the
//! adjacency is off (walks read the keys then).

use crate::catalog::{TableDef, TableKind};
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::CheckReport;
use crate::service::graph::memory::{Adjacency, load};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};

/// Most differences reported.
const MAX_REPORTED: usize = 100;

/// Compares the view's in-memory adjacency with its keys; returns whether there was one.
pub(crate) fn check_memory(
    view: &ReadView,
    tables: &[TableDef],
    report: &mut CheckReport,
    stop: &Stop,
) -> Result<bool> {
    let Some(adj) = view.derived::<Adjacency>() else { return Ok(false) };
    let edge_tables: Vec<load::TableId> =
        tables.iter().filter(|t| t.kind == TableKind::Edge).map(|t| (t.name.clone(), t.created_at)).collect();
    let scan = |prefix| {
        let keys = view.scan(Space::Graph, KeyRange::Prefix(prefix), false);
        Watched::new(keys.map(|i| i.map_err(ServiceError::from)), stop)
    };
    for problem in load::compare(adj, &edge_tables, scan, MAX_REPORTED)? {
        report.problem("memory_adjacency", "graph".into(), problem);
    }
    Ok(true)
}
