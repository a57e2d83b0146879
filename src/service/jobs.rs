//! Background jobs (index backfills, purges, and the writes that start them): counted, so that
//! closing the database stops them at their next step and waits until none of them holds it any
//! more. A job stopped this way resumes at the next open: builds stay `building`, drops keep
//! their marks.

use super::purge::Purge;
use super::{Db, Result, ServiceError};
use crate::storage::WriteTx;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The running jobs of one database.
#[derive(Default)]
pub(super) struct Jobs {
    closing: AtomicBool,
    running: AtomicUsize,
    idle: Notify,
}

/// Where a background build stands after one chunk.
pub(super) enum Chunk<P> {
    /// more to do, after this position
    More(P),
    /// the table is done, or the build is no longer the one this job runs (dropped, replaced)
    Done,
}

/// One running job; dropped after the job's future, so after the job's hold on the database.
struct Running(Arc<Jobs>);

impl Running {
    fn start(jobs: &Arc<Jobs>) -> Running {
        jobs.running.fetch_add(1, Ordering::AcqRel);
        Running(jobs.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Db {
    /// True once the database is closing: a job stops at its next step.
    pub(super) fn closing(&self) -> bool {
        self.jobs.closing.load(Ordering::Acquire)
    }

    /// Background jobs under way.
    pub(super) fn jobs_running(&self) -> u64 {
        self.jobs.running.load(Ordering::Acquire) as u64
    }

    /// Runs `job` in a task of its own, counted until it ends (and with it its hold on the
    /// database).
    pub(super) fn spawn_job<F>(&self, job: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let running = Running::start(&self.jobs);
        tokio::spawn(async move {
            let out = job.await;
            drop(running);
            out
        })
    }

    /// Runs a background build (an index's backfill, a view's build) chunk by chunk: `step` does
    /// one chunk from the position the previous one ended at. Closing stops it between chunks, and
    /// so does a store that refuses writes: the build stays `building` and resumes at the next
    /// open. Any other error would fail again on a retry: `fail` records it in the definition (in
    /// one write) and `purge` removes what the build wrote.
    pub(super) async fn run_build<P, F, Fut>(
        self: &Arc<Self>,
        mut step: F,
        fail: impl FnOnce(&mut WriteTx<'_>, &Db, String) + Send + 'static,
        purge: Purge,
    ) -> Result<()>
    where
        F: FnMut(Option<P>) -> Fut,
        Fut: Future<Output = Result<Chunk<P>>>,
    {
        let mut position = None;
        loop {
            if self.closing() {
                return Ok(());
            }
            match step(position.take()).await {
                Ok(Chunk::More(p)) => position = Some(p),
                Ok(Chunk::Done) => return Ok(()),
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

    /// Stops the background jobs at their next step, waits for them, then waits for queued
    /// writes and fsyncs everything.
    pub async fn shutdown(&self) -> Result<()> {
        self.jobs.closing.store(true, Ordering::Release);
        self.stop_change_waits();
        loop {
            let idle = self.jobs.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.jobs.running.load(Ordering::Acquire) == 0 {
                break;
            }
            idle.await;
        }
        self.close()
    }
}
