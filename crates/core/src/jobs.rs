//! Background jobs (index backfills, purges, and the writes that start them): counted, so that
//! closing the database stops them at their next step and waits until none of them holds it any
//! more. A job stopped this way resumes at the next open: builds stay `building`, drops keep
//! their marks. (The build lifecycle that runs as such a job is `build_lifecycle.rs`.)

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The running jobs of one database.
#[derive(Default)]
pub struct Jobs {
    closing: AtomicBool,
    running: AtomicUsize,
    idle: Notify,
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

impl Jobs {
    /// True once the database is closing: a job stops at its next step.
    pub fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Background jobs under way.
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Acquire) as u64
    }

    /// Runs `job` in a task of its own, counted until it ends (and with it its hold on the
    /// database).
    pub fn spawn<F>(self: &Arc<Self>, job: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let running = Running::start(self);
        tokio::spawn(async move {
            let out = job.await;
            drop(running);
            out
        })
    }

    /// Marks the database closing: jobs stop at their next step.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Waits until no job runs.
    pub async fn idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.running.load(Ordering::Acquire) == 0 {
                break;
            }
            idle.await;
        }
    }
}
