//! What a check answers: the report, its counts and problems, and the small helpers every part
//! of the walk uses to read definitions and name keys.

use crate::{Result, ServiceError};
use mosaic_storage::{KeyRange, ReadView, Space};
use serde::Serialize;
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
    /// whether the in-memory graph adjacency was compared with the adjacency entries (it is
    /// unless it is off)
    pub graph_memory: bool,
    /// fulltext postings
    pub postings: u64,
    /// time-series keys (single points and blocks)
    pub points: u64,
    /// series index entries (`meta:label:`)
    pub series_labels: u64,
    /// expiry entries (`ttlidx:`)
    pub ttl_entries: u64,
    /// vector index nodes (`vec:`)
    pub vector_nodes: u64,
    /// change events (`changefeed:`)
    pub change_events: u64,
    /// ready maintained views
    pub views: u64,
    /// view keys (`view:`)
    pub view_keys: u64,
    /// kept document versions and deletions (`hist:`)
    pub history_versions: u64,
}

/// One inconsistency.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CheckProblem {
    /// `missing_entry`, `stale_entry`, `orphan_entry`, `count_mismatch`, `undecodable_document`,
    /// `missing_adjacency`, `stale_adjacency`, `memory_adjacency`, `stat_mismatch` (fulltext or series statistics),
    /// `undecodable_point`, `undecodable_event`, `bad_event`, `changefeed_gap`,
    /// `undecodable_history`, `history_order`
    pub kind: &'static str,
    /// the key concerned, in display form
    pub key: String,
    /// what is wrong
    pub detail: String,
}

impl CheckReport {
    pub fn problem(&mut self, kind: &'static str, key: String, detail: impl Into<String>) {
        self.problem_count += 1;
        if self.problems.len() < MAX_LISTED {
            self.problems.push(CheckProblem { kind, key, detail: detail.into() });
        }
    }
}

pub fn internal(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::Internal(e.to_string())
}

pub fn defs_in<T: serde::de::DeserializeOwned>(view: &ReadView, prefix: Vec<u8>) -> Result<Vec<T>> {
    view.scan(Space::Meta, KeyRange::Prefix(prefix), false)
        .map(|item| serde_json::from_slice(&item?.1).map_err(internal))
        .collect()
}

pub fn show(space: Space, key: &[u8]) -> String {
    mosaic_keys::display(space.name(), key)
}
