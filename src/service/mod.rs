//! The service layer: one module per model, owning the rules and the transactions. `api` calls
//! it; it calls `catalog`, `keys`, `entity` and `storage`.

pub mod backup;
pub mod changefeed;
mod check;
pub mod cluster;
pub use mosaic_core as core;
pub mod databases;
pub mod graph;
pub mod history;
pub mod indexes;
mod info;
mod metrics_snapshot;
pub mod pipeline;
pub mod query;
pub mod schema;
pub mod search;
pub mod sql;
#[cfg(test)]
mod tests;
pub use mosaic_timeseries as timeseries;
pub mod ttl;
pub mod vectors;
pub mod views;

pub use self::core::cancel::AbandonOnDrop;
pub use self::core::options::{BACKFILL_CHUNK, DbOptions, PURGE_CHUNK};
pub use self::core::tasks::{TaskFigures, TaskInfo, TaskList};
pub use self::core::{Core, Result, ServiceError};
pub use crate::storage::Health;
pub use check::{CheckReport, check};
pub use indexes::CreateIndex;
pub use info::{Info, KeyCount, info};
pub use metrics_snapshot::{IndexBuild, IndexFigures, MetricsSnapshot, metrics_snapshot};
pub use pipeline::batch::{BatchOp, BatchOutcome, OpKind};
pub use pipeline::documents::SweepOutcome;
pub use pipeline::documents::{Document, DocumentPage, EtagMatch, Preconditions, PutOutcome, RawPage};
pub use pipeline::import::{DEFAULT_MIN_IMPORT_BYTES, ImportFormat, ImportLimits, ImportReport};
pub use pipeline::tables::{AlterTable, CreateTable, TableInfo, check_table_name};
pub use query::{QueryExplain, QueryRequest, QueryResponse, QueryResult, QueryStream};
pub use search::{AnalyzeRequest, AnalyzeResponse, SearchRequest, SearchResponse};
pub use vectors::{VectorSearchRequest, VectorSearchResponse};
pub use views::{CreateView, ViewInfo, ViewList};

use self::core::Handle;
use crate::catalog::Catalog;
use crate::storage::{StorageConfig, Store};
use std::sync::Arc;

/// The open database: the shared [`Core`] and the rules of every model.
pub struct Db {
    /// the store, its catalog, settings, jobs and tasks
    pub core: Arc<Core>,
    /// backups whose snapshot is held (see `backup`)
    backups_running: Arc<std::sync::atomic::AtomicU64>,
    /// the search model
    pub search: Arc<search::Search>,
    /// the time-series model
    pub timeseries: Arc<timeseries::Timeseries>,
    /// the vectors model
    pub vectors: Arc<vectors::Vectors>,
    /// the query model
    pub query: Arc<query::Query>,
    /// the views model (reads; the lifecycle is the database's)
    pub views: Arc<views::Views>,
    /// the TTL model (the expiry entries)
    pub ttl: Arc<ttl::Ttl>,
    /// the graph model
    pub graph: Arc<graph::Graph>,
    /// the changefeed model
    pub changefeed: Arc<changefeed::Changefeed>,
    /// the history model
    pub history: Arc<history::History>,
    /// everything that calls several models: documents and their writes, batches, imports,
    /// the lifecycles of tables, indexes and views
    pub pipeline: Arc<pipeline::Pipeline>,
    /// this server's role among those sharing its backend (see `cluster`)
    pub cluster: Arc<cluster::Cluster>,
}

impl Handle for Db {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Db {
    /// Opens the data directory, loads the catalog, and resumes unfinished index builds, index
    /// and table drops in the background (call from within a tokio runtime).
    pub fn open(config: StorageConfig, options: DbOptions) -> Result<Arc<Db>> {
        let store = Store::open(config, &changefeed::Events)?;
        let role = store.role();
        let follower = role == crate::storage::Role::Follower;
        // a follower's in-memory state, loaded below, is at least as of the leader's state now
        let lead = store.leadership()?.unwrap_or_default();
        let state = if follower { lead.state } else { store.published_state() };
        let found_format = self::core::data_format::check(&store)?;
        if follower && found_format < self::core::data_format::DATA_FORMAT {
            return Err(ServiceError::Unavailable(crate::storage::StorageError::Backend(format!(
                "the database has data format {found_format}: the leader has not upgraded it to {} yet",
                self::core::data_format::DATA_FORMAT
            ))));
        }
        let catalog = Catalog::load(&store)?;
        let feed = Arc::new(changefeed::Feed::load(&store)?);
        let store_epoch = store.epoch();
        let core = Arc::new(Core::new(store, catalog, &options));
        // the models, each over the core, in their declared directions (vectors → search)
        let search = Arc::new(search::Search::new(core.clone()));
        let vectors = Arc::new(vectors::Vectors::new(core.clone(), search.clone()));
        let graph = Arc::new(graph::Graph::new(core.clone(), options.graph_memory_bytes));
        let changefeed = Arc::new(changefeed::Changefeed::new(core.clone(), feed, role));
        let history = Arc::new(history::History::new(core.clone()));
        let ttl = Arc::new(ttl::Ttl::new(core.clone()));
        let models = pipeline::Models {
            search: search.clone(),
            vectors: vectors.clone(),
            graph: graph.clone(),
            ttl: ttl.clone(),
            history: history.clone(),
        };
        let leader = (lead.leader, lead.epoch.max(store_epoch));
        let cluster =
            Arc::new(cluster::Cluster::new(core.clone(), role, leader, state, vectors.clone(), changefeed.clone()));
        let db = Arc::new(Db {
            timeseries: Arc::new(timeseries::Timeseries::new(core.clone())),
            query: Arc::new(query::Query::new(core.clone())),
            views: Arc::new(views::Views::new(core.clone())),
            pipeline: Arc::new(pipeline::Pipeline::new(core.clone(), models)),
            search,
            vectors,
            graph,
            changefeed,
            history,
            ttl,
            core,
            backups_running: Default::default(),
            cluster,
        });
        db.cluster.start_cluster_task();
        if follower {
            // it reads the backend as it is, with no derived state, and starts no job: the
            // leader writes (see `cluster`)
            return Ok(db);
        }
        // before anything writes: the load reads the keys as no write has changed them yet
        db.graph.load_memory()?;
        if !options.background_jobs {
            return Ok(db);
        }
        if found_format < self::core::data_format::DATA_FORMAT {
            let catalog = db.core.catalog.clone();
            self::core::data_format::upgrade(&db.core.store, found_format, move |tx, found| {
                timeseries::upgrade(tx, found)?;
                vectors::upgrade(tx, found, &catalog)?;
                search::upgrade::upgrade(tx, found, &catalog)
            })?;
        }
        let took = db.vectors.open_vector_indexes()?;
        tracing::info!(ms = took.as_millis() as u64, "vector indexes opened from their keys");
        for table in db.core.catalog.tables() {
            for index in db.core.catalog.indexes(&table.name) {
                match index.state {
                    crate::catalog::IndexState::Building { .. } => db.pipeline.spawn_backfill(&index),
                    crate::catalog::IndexState::Failed { .. } => db.pipeline.purge_failed_index(&index),
                    crate::catalog::IndexState::Ready => {}
                }
            }
        }
        for (table, index, created_at) in db.core.catalog.dropping_indexes() {
            drop(db.pipeline.purge_dropped_index(&table, &index, created_at));
        }
        db.pipeline.resume_views();
        for table in db.core.catalog.dropping() {
            let this = db.pipeline.clone();
            drop(db.core.spawn_job(async move {
                if let Err(e) = this.purge_table(&table).await {
                    tracing::error!(table, error = %e, "resuming a table drop failed");
                }
            }));
        }
        Ok(db)
    }

    /// Stops the background jobs at their next step, waits for them, then waits for queued
    /// writes and fsyncs everything.
    pub async fn shutdown(&self) -> Result<()> {
        self.core.jobs.close();
        self.changefeed.stop_change_waits();
        self.core.jobs.idle().await;
        self.core.close()
    }
}
