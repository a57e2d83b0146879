//! What every model uses and no model owns: the store and its catalog, the settings, the
//! background jobs and periodic tasks ([`Core`]), and the shared leaves — the service error,
//! cancellation, cursors, rendering, counts, durations, the data-format version and a heavy
//! read's memory budget.
//!
//! A model's handle holds an `Arc<Core>`; `Core` names no model.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cancel;
pub mod change;
pub mod check_report;
pub mod clock;
pub mod counts;
pub mod cursor;
pub mod data_format;
pub mod de;
pub mod duration;
pub mod error;
pub mod expiry;
pub mod fields;
pub mod filter;
pub mod jobs;
pub mod mem_budget;
pub mod options;
pub mod quota;
pub mod registry;
pub mod render;
pub mod tasks;

pub use error::{Result, ServiceError};

use mosaic_catalog::{Catalog, TableDef};
use mosaic_storage::{Health, Store};
use options::DbOptions;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinHandle;

/// The store, its catalog, the settings every model reads, and the background jobs and tasks.
pub struct Core {
    pub store: Store,
    pub catalog: Arc<Catalog>,
    /// when the database was opened
    pub started: Instant,
    /// a query with `allow_scan: false` refuses a full scan of a table with more documents
    pub scan_threshold: u64,
    pub query_timeout: Option<std::time::Duration>,
    /// a heavy read's memory budget, in bytes (see `mem_budget`)
    pub max_query_bytes: usize,
    pub backfill_chunk: usize,
    pub purge_chunk: usize,
    /// background jobs, stopped and awaited at shutdown
    pub jobs: Arc<jobs::Jobs>,
    /// what the periodic background tasks did (see `background`)
    pub tasks: tasks::Tasks,
    /// the database's quota of stored bytes (see `quota`)
    pub quota: quota::Quota,
}

impl Core {
    /// The core over an open store and its loaded catalog.
    /// Refuses a write (507 `quota_exceeded`) while the database stores its quota or more.
    pub fn check_quota(&self) -> Result<()> {
        self.quota.check(|| self.store.stored_bytes())
    }

    /// A core over a store opened at `config` with default settings, for a model's own tests
    /// (the store keeps change events in storage's test format). Not for serving: hidden from the
    /// docs, public because the models' tests live in other crates.
    #[doc(hidden)]
    pub fn open_for_test(config: mosaic_storage::StorageConfig) -> Arc<Core> {
        let store = Store::open(config, &mosaic_storage::TestEvents).expect("the test store opens");
        let catalog = Catalog::load(&store).expect("the test catalog loads");
        Arc::new(Core::new(store, catalog, &DbOptions::default()))
    }

    pub fn new(store: Store, catalog: Arc<Catalog>, options: &DbOptions) -> Core {
        Core {
            store,
            catalog,
            started: Instant::now(),
            scan_threshold: options.scan_threshold,
            query_timeout: options.query_timeout,
            max_query_bytes: options.max_query_bytes,
            backfill_chunk: options.backfill_chunk,
            purge_chunk: options.purge_chunk,
            jobs: Default::default(),
            tasks: Default::default(),
            quota: Default::default(),
        }
    }

    /// The store (for tools and tests).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// True when the store takes writes: not poisoned, and its committer runs (not closed, not
    /// taken down by a bug).
    pub fn is_writable(&self) -> bool {
        self.store.health() == Health::Ok
    }

    /// The definition of table `name`, or 404 `table_not_found`.
    pub fn table_or_404(&self, name: &str) -> Result<Arc<TableDef>> {
        self.catalog.table(name).ok_or_else(|| ServiceError::TableNotFound(name.to_owned()))
    }

    /// Whether the store takes writes now, and why not.
    pub fn health(&self) -> Health {
        self.store.health()
    }

    /// Waits for queued writes and fsyncs everything.
    pub fn close(&self) -> Result<()> {
        Ok(self.store.close()?)
    }

    /// The stop of a long walk run for a request: at the request timeout (`query_timeout`), or
    /// once the returned guard — held by the request's future — is dropped.
    pub fn request_stop(&self) -> (cancel::Stop, cancel::AbandonOnDrop) {
        cancel::Stop::new(self.query_timeout.and_then(|t| Instant::now().checked_add(t)))
    }

    /// A heavy read's memory budget (`--max-query-memory-mb`).
    pub fn mem_budget(&self) -> mem_budget::MemBudget {
        mem_budget::MemBudget::new(self.max_query_bytes)
    }

    /// True once the database is closing: a job stops at its next step.
    pub fn closing(&self) -> bool {
        self.jobs.closing()
    }

    /// Background jobs under way.
    pub fn jobs_running(&self) -> u64 {
        self.jobs.running()
    }

    /// Runs `job` in a task of its own, counted until it ends (and with it its hold on the
    /// database).
    pub fn spawn_job<F>(&self, job: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.jobs.spawn(job)
    }

    /// Runs `work` in a task of its own and waits for it. If this future is dropped (the request
    /// timed out, the client left), the work still runs to its end: a catalog write and the
    /// background job it starts (a backfill, a purge) are never separated.
    pub async fn detached<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.spawn_job(work).await.map_err(|e| ServiceError::Internal(format!("task failed: {e}")))?
    }

    /// Registers a periodic task (again: its record starts afresh).
    pub fn register_task(&self, name: &str, description: &str, interval: std::time::Duration) {
        self.tasks.register(name, description, interval);
    }

    /// A run of periodic task `name` starts.
    pub fn task_started(&self, name: &str) {
        self.tasks.started(name);
    }

    /// A run of periodic task `name` ended, having removed `removed` items, with `error` if it
    /// failed.
    pub fn task_finished(&self, name: &str, removed: u64, error: Option<String>) {
        self.tasks.finished(name, removed, error);
    }

    /// Every periodic task's record.
    pub fn tasks(&self) -> tasks::TaskList {
        self.tasks.list()
    }
}

/// What a model's handle (and the composition over them) does with the [`Core`] it holds: reads
/// on the blocking pool, and plain writes — a model's own keys, no document change — on the
/// committer.
pub trait Handle: Send + Sync + Sized + 'static {
    /// The shared core.
    fn core(&self) -> &Core;

    /// Runs a point read (a few keys) on the calling thread: a memtable or block-cache hit takes
    /// microseconds, less than the hand-off to the blocking pool. Scans and anything that may
    /// read many keys use [`Handle::read`].
    fn read_point<T>(&self, f: impl FnOnce(&Self) -> Result<T>) -> Result<T> {
        f(self)
    }

    /// Runs a read on the blocking pool: fjall calls block.
    fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Self) -> Result<T> + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send {
        let this = self.clone();
        async move {
            tokio::task::spawn_blocking(move || f(&this))
                .await
                .map_err(|e| ServiceError::Internal(format!("read task failed: {e}")))?
        }
    }

    /// Runs a write of the model's own keys on the committer, in one atomic commit; a key past
    /// the backend's limits refuses it as it returns.
    fn commit<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut mosaic_storage::WriteTx<'_>, &Self) -> Result<T> + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send {
        let this = self.clone();
        async move {
            let core = this.core();
            let that = this.clone();
            core.store
                .write(move |tx| {
                    let out = f(tx, &that)?;
                    tx.check_limits()?;
                    Ok(out)
                })
                .await
        }
    }
}
