//! The scheduler of the periodic background tasks: the TTL sweep (`service::ttl`), time-series
//! retention and merging (`service::timeseries`) and changefeed retention (`service::changefeed`).
//! Each task runs on its own tokio task: a run, then a pause of its interval, and so on; its
//! record (`GET /v1/admin/tasks`) says what each run did. Stopping waits for the run under way
//! (each stops at its next bounded step), never for an interval.

use crate::service::Db;
use crate::service::changefeed::Retention;
use crate::service::timeseries::time::now_nanos;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Shortest interval a task may have.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The intervals of the periodic tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskConfig {
    /// pause between TTL sweeps
    pub ttl_interval: Duration,
    /// pause between retention runs (time series and changefeed)
    pub retention_interval: Duration,
    /// pause between runs of the time-series merge task
    pub merge_interval: Duration,
    /// how much of the changefeed is kept
    pub changefeed: Retention,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            ttl_interval: Duration::from_secs(60),
            retention_interval: Duration::from_secs(60),
            merge_interval: Duration::from_secs(2),
            changefeed: Retention::default(),
        }
    }
}

/// Tells a run to stop at its next step.
#[derive(Clone)]
pub struct StopSignal(watch::Receiver<bool>);

impl StopSignal {
    /// True once the scheduler is stopping.
    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }
}

type Run =
    Box<dyn Fn(Arc<Db>, StopSignal) -> Pin<Box<dyn Future<Output = crate::service::Result<u64>> + Send>> + Send + Sync>;

/// A periodic task.
struct Task {
    name: &'static str,
    description: &'static str,
    interval: Duration,
    run: Run,
}

/// The running scheduler.
pub struct Scheduler {
    stop: watch::Sender<bool>,
    handles: Vec<JoinHandle<()>>,
}

impl Scheduler {
    /// Starts every periodic task (call from within a tokio runtime); each runs once at once,
    /// then after each interval.
    pub fn start(db: Arc<Db>, config: TaskConfig) -> Scheduler {
        let (stop, stopped) = watch::channel(false);
        let tasks = [
            Task {
                name: "ttl_sweep",
                description: "deletes documents whose expiry has passed, with all their entries",
                interval: config.ttl_interval.max(MIN_INTERVAL),
                run: Box::new(|db, stop| Box::pin(async move { sweep(&db, &stop).await })),
            },
            Task {
                name: "retention",
                description: "removes time-series points older than their metric's max_age",
                interval: config.retention_interval.max(MIN_INTERVAL),
                run: Box::new(|db, stop| {
                    Box::pin(async move { db.timeseries.apply_retention(now_nanos(), &|| stop.is_set()).await })
                }),
            },
            Task {
                name: "timeseries_merge",
                description: "packs each time series' single points and small blocks into compressed blocks",
                interval: config.merge_interval.max(MIN_INTERVAL),
                run: Box::new(|db, stop| {
                    Box::pin(async move { db.timeseries.merge_timeseries(&|| stop.is_set()).await })
                }),
            },
            Task {
                name: "history_retention",
                description: "removes document versions past their table's history max_age or max_versions, and \
                    the history of tables that no longer keep one",
                interval: config.retention_interval.max(MIN_INTERVAL),
                run: Box::new(|db, stop| {
                    Box::pin(async move {
                        let now_us = now_nanos() / 1000;
                        db.history.apply_history_retention(now_us, &|| stop.is_set()).await
                    })
                }),
            },
            Task {
                name: "changefeed_retention",
                description: "removes change events older than --changefeed-retention, and the oldest while the feed \
                    is over --changefeed-max-mb",
                interval: config.retention_interval.max(MIN_INTERVAL),
                run: Box::new(move |db, stop| {
                    let retention = config.changefeed;
                    Box::pin(async move {
                        let now = crate::service::core::clock::now_ms();
                        db.changefeed.trim_changefeed(retention, now, &move || stop.is_set()).await
                    })
                }),
            },
        ];
        // a follower writes nothing: the leader runs the tasks
        let writes = db.cluster.role() != crate::storage::Role::Follower;
        let handles = tasks
            .into_iter()
            .filter(|_| writes)
            .map(|task| {
                db.core.register_task(task.name, task.description, task.interval);
                tokio::spawn(run_periodically(db.clone(), task, StopSignal(stopped.clone())))
            })
            .collect();
        Scheduler { stop, handles }
    }

    /// Stops every task: a run under way ends at its next step; waits for them.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for handle in self.handles {
            if let Err(e) = handle.await {
                tracing::error!(error = %e, "a background task ended abnormally");
            }
        }
    }
}

/// Expiry entries one sweep call examines; a run calls again while more are due.
const SWEEP_BUDGET: usize = 10_000;

/// One run of the TTL sweep: everything due now, a budget at a time, until nothing due is left
/// or the scheduler stops.
async fn sweep(db: &Arc<Db>, stop: &StopSignal) -> crate::service::Result<u64> {
    let now = crate::service::core::clock::now_ms();
    let mut removed = 0;
    loop {
        let outcome = db.pipeline.sweep_expired(now, SWEEP_BUDGET).await?;
        removed += outcome.removed;
        // no progress: what is due is refused (a vertex with edges in a reject table); the next
        // run tries again rather than this one spinning on it
        let progress = outcome.removed + outcome.repaired > 0;
        if !outcome.more || !progress || stop.is_set() {
            return Ok(removed);
        }
    }
}

async fn run_periodically(db: Arc<Db>, task: Task, mut stop: StopSignal) {
    loop {
        if stop.is_set() {
            return;
        }
        db.core.task_started(task.name);
        let outcome = (task.run)(db.clone(), stop.clone()).await;
        match outcome {
            Ok(removed) => db.core.task_finished(task.name, removed, None),
            Err(e) => {
                tracing::warn!(task = task.name, error = %e, "background task failed");
                db.core.task_finished(task.name, 0, Some(e.to_string()));
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(task.interval) => {}
            _ = stop.0.changed() => return,
        }
    }
}
