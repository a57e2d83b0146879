//! The pipeline: everything that calls several models. A document's write runs through it (the
//! `write` steps: prepare, stage every derived family in one order, finish), and so do the
//! operations built on that write — documents, batches, imports, patches, the TTL sweep and a
//! restore — and the lifecycles of tables, indexes and views with their background builds and
//! purges. The models never name it; it names them.

pub(crate) mod batch;
pub(crate) mod build_lifecycle;
pub(crate) mod documents;
pub(crate) mod import;
pub(crate) mod index_lifecycle;
pub(crate) mod patch;
pub(crate) mod purge;
pub(crate) mod tables;
pub(crate) mod view_lifecycle;
pub mod write;

use crate::service::core::{Core, Handle};
use crate::service::{graph, history, search, ttl, vectors};
use std::sync::Arc;

/// The pipeline over the shared core and the models it drives. Each model is a constructor
/// argument; none of them knows the pipeline.
pub struct Pipeline {
    core: Arc<Core>,
    /// the fulltext model: its postings merged at the end of every write
    pub(crate) search: Arc<search::Search>,
    /// the vector model: its graphs changed at the end of every write
    pub(crate) vectors: Arc<vectors::Vectors>,
    /// the graph model: its in-memory adjacency changed as every write commits
    pub(crate) graph: Arc<graph::Graph>,
    /// the TTL model (the expiry entries a sweep repairs)
    pub(crate) ttl: Arc<ttl::Ttl>,
    /// the history model (a restore reads a document's versions)
    pub(crate) history: Arc<history::History>,
    /// imports under way (see `import`)
    imports_running: std::sync::atomic::AtomicU64,
    /// Test hook: called on the thread that prepared a backfill chunk, with its document count.
    #[cfg(test)]
    pub(crate) backfill_hook: std::sync::Mutex<Option<BackfillHook>>,
}

/// See [`Pipeline::backfill_hook`].
#[cfg(test)]
pub(crate) type BackfillHook = Arc<dyn Fn(usize) + Send + Sync>;

/// The models the pipeline drives, as [`Pipeline::new`] takes them.
pub(crate) struct Models {
    pub search: Arc<search::Search>,
    pub vectors: Arc<vectors::Vectors>,
    pub graph: Arc<graph::Graph>,
    pub ttl: Arc<ttl::Ttl>,
    pub history: Arc<history::History>,
}

impl Handle for Pipeline {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Pipeline {
    /// The pipeline over `core`, driving `models`.
    pub(crate) fn new(core: Arc<Core>, models: Models) -> Pipeline {
        let Models { search, vectors, graph, ttl, history } = models;
        Pipeline {
            core,
            search,
            vectors,
            graph,
            ttl,
            history,
            imports_running: Default::default(),
            #[cfg(test)]
            backfill_hook: Default::default(),
        }
    }

    /// A pipeline over a store opened at `config`, with every model at its defaults and no
    /// background job: for the pipeline's own tests.
    #[cfg(test)]
    pub(crate) fn open_for_test(config: crate::storage::StorageConfig) -> Arc<Pipeline> {
        let core = Core::open_for_test(config);
        let search = Arc::new(search::Search::new(core.clone()));
        let models = Models {
            vectors: Arc::new(vectors::Vectors::new(core.clone(), search.clone())),
            search,
            graph: Arc::new(graph::Graph::new(core.clone(), 0)),
            ttl: Arc::new(ttl::Ttl::new(core.clone())),
            history: Arc::new(history::History::new(core.clone())),
        };
        Arc::new(Pipeline::new(core, models))
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
