//! The service layer: one module per model, owning the rules and the transactions. `api` calls
//! it; it calls `catalog`, `keys`, `entity` and `storage`.

mod adjacency;
pub mod backup;
mod batch;
mod build_lifecycle;
pub mod changefeed;
mod check;
pub mod cluster;
pub mod core;
pub mod databases;
pub(crate) mod documents;
pub mod graph;
pub mod history;
mod import;
pub mod indexes;
mod info;
mod metrics_snapshot;
mod patch;
mod purge;
pub mod query;
#[cfg(test)]
mod query_tests;
pub mod schema;
pub mod search;
mod tables;
#[cfg(test)]
mod tests;
pub mod timeseries;
pub mod ttl;
pub mod vectors;
pub mod views;
pub mod write;

pub use self::core::cancel::AbandonOnDrop;
pub use self::core::options::{BACKFILL_CHUNK, DbOptions, PURGE_CHUNK};
pub use self::core::tasks::{TaskFigures, TaskInfo, TaskList};
pub use self::core::{Core, Result, ServiceError};
pub use crate::storage::Health;
pub use batch::{BatchOp, BatchOutcome, OpKind};
pub use check::CheckReport;
pub use documents::{Document, DocumentPage, EtagMatch, Preconditions, PutOutcome, RawPage};
pub use import::{DEFAULT_MIN_IMPORT_BYTES, ImportFormat, ImportLimits, ImportReport};
pub use indexes::CreateIndex;
pub use info::{Info, KeyCount};
pub use metrics_snapshot::{IndexBuild, IndexFigures, MetricsSnapshot};
pub use query::{QueryExplain, QueryRequest, QueryResponse, QueryResult, QueryStream};
pub use search::{AnalyzeRequest, AnalyzeResponse, SearchRequest, SearchResponse};
pub use tables::{AlterTable, CreateTable, TableInfo, check_table_name};
pub use ttl::SweepOutcome;
pub use vectors::{VectorSearchRequest, VectorSearchResponse};
pub use views::{CreateView, ViewInfo, ViewList};

use self::core::Handle;
use crate::catalog::Catalog;
use crate::storage::{StorageConfig, Store};
use std::sync::Arc;

/// The open database: the shared [`Core`] and the rules of every model.
pub struct Db {
    /// the store, its catalog, settings, jobs and tasks (reached through `Deref`)
    core: Arc<Core>,
    /// imports under way (see `import`)
    imports_running: std::sync::atomic::AtomicU64,
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
    /// the graph model
    pub graph: Arc<graph::Graph>,
    /// the changefeed model
    pub changefeed: Arc<changefeed::Changefeed>,
    /// the history model
    pub history: Arc<history::History>,
    /// this server's role among those sharing its backend (see `cluster`)
    cluster: cluster::Cluster,
    /// the database's quota of stored bytes (see `databases::quota`)
    quota: databases::quota::Quota,
    /// Test hook: called on the thread that prepared a backfill chunk, with its document count.
    #[cfg(test)]
    backfill_hook: std::sync::Mutex<Option<BackfillHook>>,
}

impl Handle for Db {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl std::ops::Deref for Db {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

/// See [`Db::backfill_hook`].
#[cfg(test)]
type BackfillHook = Arc<dyn Fn(usize) + Send + Sync>;

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
        let search = Arc::new(search::Search::new(core.clone()));
        let db = Arc::new(Db {
            timeseries: Arc::new(timeseries::Timeseries::new(core.clone())),
            graph: Arc::new(graph::Graph::new(core.clone(), options.graph_memory_bytes)),
            changefeed: Arc::new(changefeed::Changefeed::new(core.clone(), feed, role)),
            history: Arc::new(history::History::new(core.clone())),
            search: search.clone(),
            vectors: Arc::new(vectors::Vectors::new(core.clone(), search)),
            query: Arc::new(query::Query::new(core.clone())),
            views: Arc::new(views::Views::new(core.clone())),
            core,
            imports_running: Default::default(),
            backups_running: Default::default(),
            cluster: cluster::Cluster::new(role, (lead.leader, lead.epoch.max(store_epoch)), state),
            quota: Default::default(),
            #[cfg(test)]
            backfill_hook: Default::default(),
        });
        db.start_cluster_task();
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
            let catalog = db.catalog.clone();
            self::core::data_format::upgrade(&db.store, found_format, move |tx, found| {
                timeseries::upgrade(tx, found)?;
                vectors::upgrade(tx, found, &catalog)?;
                search::upgrade::upgrade(tx, found, &catalog)
            })?;
        }
        let took = db.vectors.open_vector_indexes()?;
        tracing::info!(ms = took.as_millis() as u64, "vector indexes opened from their keys");
        for table in db.catalog.tables() {
            for index in db.catalog.indexes(&table.name) {
                match index.state {
                    crate::catalog::IndexState::Building { .. } => db.spawn_backfill(&index),
                    crate::catalog::IndexState::Failed { .. } => db.purge_failed_index(&index),
                    crate::catalog::IndexState::Ready => {}
                }
            }
        }
        for (table, index, created_at) in db.catalog.dropping_indexes() {
            drop(db.purge_dropped_index(&table, &index, created_at));
        }
        db.resume_views();
        for table in db.catalog.dropping() {
            let this = db.clone();
            drop(db.spawn_job(async move {
                if let Err(e) = this.purge_table(&table).await {
                    tracing::error!(table, error = %e, "resuming a table drop failed");
                }
            }));
        }
        Ok(db)
    }

    /// Runs the test hook for a prepared backfill chunk, if one is set.
    #[cfg(test)]
    fn backfill_prepared(&self, docs: usize) {
        let hook = self.backfill_hook.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(hook) = hook {
            hook(docs);
        }
    }
}
