//! The figures `GET /metrics` reports about the database (the server's own metrics, not the
//! time-series model's): the store's, the periodic tasks', and the state of every index build.
//! Gathered when asked, from in-memory state; nothing on the write path waits for them.

use super::Db;
use super::indexes::kind_name;
use crate::catalog::IndexState;
use crate::service::core::tasks::TaskFigures;
use crate::storage::StoreStats;
use std::time::Duration;

/// The database's figures at one moment.
#[derive(Debug, Clone)]
pub struct MetricsSnapshot {
    /// time since the database opened
    pub uptime: Duration,
    /// whether the store takes writes (see [`Core::is_writable`](crate::service::Core::is_writable))
    pub writable: bool,
    /// NDJSON imports under way
    pub imports_running: u64,
    /// background jobs under way: index builds, index and table purges
    pub jobs_running: u64,
    /// tables defined
    pub tables: u64,
    /// dropped tables whose keys are still being removed
    pub tables_dropping: u64,
    /// dropped indexes whose entries are still being removed
    pub indexes_dropping: u64,
    /// the store's counters and sizes
    pub storage: StoreStats,
    /// the periodic tasks, in the order they were started
    pub tasks: Vec<TaskFigures>,
    /// every index of every table, by table then index name
    pub indexes: Vec<IndexFigures>,
    /// the changefeed's figures (as `GET /v1/changes/stats`)
    pub changefeed: super::changefeed::ChangeStats,
    /// the in-memory graph adjacency's figures
    pub graph_memory: super::graph::memory::GraphMemoryStats,
    /// every metric's points, series and bytes (empty if reading the series records failed)
    pub metrics: Vec<super::timeseries::MetricInfo>,
    /// this server among those sharing its backend
    pub cluster: super::cluster::ClusterStatus,
}

/// One index's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFigures {
    /// its table
    pub table: String,
    /// its name
    pub name: String,
    /// its kind as the API spells it (`hash`, `range`, …)
    pub kind: String,
    /// building (with its progress), ready or failed
    pub state: IndexBuild,
    /// a vector index whose graph is in memory: the bytes it takes (estimated)
    pub memory: Option<u64>,
}

/// Where an index's build stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexBuild {
    /// backfilling: `done` of about `total` documents indexed
    Building {
        /// documents indexed so far
        done: u64,
        /// documents to index (an estimate taken when the build started)
        total: u64,
    },
    /// complete and maintained
    Ready,
    /// the build stopped; the index is not used
    Failed,
}

impl IndexBuild {
    /// The state's name, as `GET …/indexes/{name}` spells it.
    pub fn name(self) -> &'static str {
        match self {
            IndexBuild::Building { .. } => "building",
            IndexBuild::Ready => "ready",
            IndexBuild::Failed => "failed",
        }
    }

    /// Every state's name.
    pub const NAMES: [&'static str; 3] = ["building", "ready", "failed"];
}

/// Every metric's figures for a scrape, read within the request timeout; a failure is
/// logged and leaves them out rather than failing the scrape.
fn metric_figures_for_scrape(db: &Db) -> Vec<super::timeseries::MetricInfo> {
    let (stop, _abandon) = db.core.request_stop();
    db.timeseries.metric_figures(&stop).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "reading the time-series figures for /metrics failed");
        Vec::new()
    })
}

/// The database's figures now (for `GET /metrics`). Waits for the journal's lock, which an
/// fsync holds, and reads every time-series record: call it from a blocking context.
pub fn metrics_snapshot(db: &Db) -> MetricsSnapshot {
    let mut tables = db.core.catalog.tables();
    tables.sort_by(|a, b| a.name.cmp(&b.name));
    let mut indexes = Vec::new();
    for table in &tables {
        let mut defs = db.core.catalog.indexes(&table.name);
        defs.sort_by(|a, b| a.name.cmp(&b.name));
        indexes.extend(defs.iter().map(|def| IndexFigures {
            table: def.table.clone(),
            name: def.name.clone(),
            kind: kind_name(def.kind),
            state: match def.state {
                IndexState::Building { done, total } => IndexBuild::Building { done, total },
                IndexState::Ready => IndexBuild::Ready,
                IndexState::Failed { .. } => IndexBuild::Failed,
            },
            memory: db.vectors.graphs.memory_bytes(&def.table, &def.name).map(|b| b as u64),
        }));
    }
    MetricsSnapshot {
        uptime: db.core.started.elapsed(),
        writable: db.core.is_writable(),
        imports_running: db.pipeline.imports_running(),
        jobs_running: db.core.jobs_running(),
        tables: tables.len() as u64,
        tables_dropping: db.core.catalog.dropping().len() as u64,
        indexes_dropping: db.core.catalog.dropping_indexes().len() as u64,
        storage: db.core.store.stats(),
        tasks: db.core.tasks.figures(),
        indexes,
        changefeed: db.changefeed.change_stats_now(),
        graph_memory: db.graph.memory.stats(),
        cluster: db.cluster.cluster_status(),
        metrics: metric_figures_for_scrape(db),
    }
}
