//! The lifecycle of a background build (an index's backfill, a view's build), shared by both:
//! chunk by chunk as a counted job (`jobs.rs`), stopped by closing, failed into the definition
//! and purged; and the database's job hooks (spawn, close, wait).

use super::purge::Purge;
use crate::service::pipeline::Pipeline;
use crate::service::{Result, ServiceError};
use crate::storage::WriteTx;
use std::future::Future;
use std::sync::Arc;

/// Where a background build stands after one chunk.
pub(super) enum Chunk<P> {
    /// more to do, after this position
    More(P),
    /// the table is done, or the build is no longer the one this job runs (dropped, replaced)
    Done,
}

impl Pipeline {
    /// Runs a background build (an index's backfill, a view's build) chunk by chunk: `step` does
    /// one chunk from the position the previous one ended at. Closing stops it between chunks, and
    /// so does a store that refuses writes: the build stays `building` and resumes at the next
    /// open — except while the store recovers from an engine failure that passes (it opens its
    /// engine again on its own, `storage/recover.rs`): the chunk is tried again once it has. Any
    /// other error would fail again on a retry: `fail` records it in the definition (in
    /// one write) and `purge` removes what the build wrote.
    pub(super) async fn run_build<P, F, Fut>(
        self: &Arc<Self>,
        mut step: F,
        fail: impl FnOnce(&mut WriteTx<'_>, &Pipeline, String) + Send + 'static,
        purge: Purge,
    ) -> Result<()>
    where
        P: Clone,
        F: FnMut(Option<P>) -> Fut,
        Fut: Future<Output = Result<Chunk<P>>>,
    {
        let mut position = None;
        loop {
            if self.core.closing() {
                return Ok(());
            }
            let from = position.clone();
            match step(position.take()).await {
                Ok(Chunk::More(p)) => position = Some(p),
                Ok(Chunk::Done) => return Ok(()),
                Err(ServiceError::Unavailable(crate::storage::StorageError::Recovering { retry_after, .. })) => {
                    // nothing of the chunk was written
                    position = from;
                    tokio::time::sleep(std::time::Duration::from_secs(retry_after.clamp(1, 5))).await;
                }
                Err(e @ ServiceError::Unavailable(_)) => return Err(e),
                Err(e) => {
                    let error = e.to_string();
                    self.write(move |tx, db| {
                        fail(tx, db, error);
                        Ok(())
                    })
                    .await?;
                    return self.purge(purge).await;
                }
            }
        }
    }
}
