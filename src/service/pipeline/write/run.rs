//! Running a write on the committer: the write's function, then the finish step of the families
//! that merge their logs at the end of the write.

use super::Write;
use crate::service::pipeline::Pipeline;
use crate::service::{Result, graph, search, vectors};
use std::sync::{Arc, Mutex, PoisonError};

impl Pipeline {
    /// Runs a write on the committer: `f` stages its changes in a [`Write`], then the fulltext
    /// and vector logs are merged and staged (`finish`), all in one atomic commit.
    pub(crate) async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Write<'_, '_>, &Pipeline) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let db = self.clone();
        let touched = Arc::new(Mutex::new(Vec::new()));
        let t = touched.clone();
        let out = self
            .core
            .store
            .write(move |tx| {
                let mut w = Write::new(tx, &db.core.catalog);
                let out = f(&mut w, &db)?;
                // the write's fulltext changes, merged (see `search::maintain`)
                let fulltext = std::mem::take(&mut w.fulltext);
                search::maintain::finish(w.tx, w.catalog, fulltext, &db.search.known_terms)?;
                // a key past the backend's limits refuses the write as it returns: before the
                // graphs below change for it
                w.check_limits()?;
                // the write's vector changes, applied to the cached graphs and staged (see
                // `vectors`): last, after everything that can refuse the write
                let vector_log = std::mem::take(&mut w.vectors);
                vectors::finish(w.tx, vector_log, &db.vectors, &t)?;
                // the write's edge changes, for the in-memory adjacency once it commits
                let edge_log = std::mem::take(&mut w.graph);
                graph::memory::finish(w.tx, edge_log, &db.graph.memory);
                Ok(out)
            })
            .await;
        if out.is_err() {
            // graphs changed for a write that did not commit: reloaded from the keys on next use
            let touched = std::mem::take(&mut *touched.lock().unwrap_or_else(PoisonError::into_inner));
            for (table, index) in touched {
                self.vectors.graphs.forget(&table, &index);
            }
        }
        out
    }
}
