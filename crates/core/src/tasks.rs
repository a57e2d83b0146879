//! The record of the periodic background tasks (TTL sweep, retention): what each did last and in
//! total, for `GET /v1/admin/tasks`. The scheduler in `background` runs them and reports here.

use serde::{Deserialize, Serialize};
use std::sync::PoisonError;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// One periodic task as last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskInfo {
    /// the task's name
    #[schema(example = "ttl_sweep")]
    pub name: String,
    /// what it does
    pub description: String,
    /// time between the end of one run and the start of the next, in ms
    pub interval_ms: u64,
    /// true while a run is under way
    pub running: bool,
    /// runs finished since the server started
    pub runs: u64,
    /// when the last run started (RFC 3339), null before the first
    pub last_started_at: Option<String>,
    /// how long the last finished run took, in ms
    pub last_duration_ms: Option<u64>,
    /// items (documents, points) the last finished run removed
    pub last_removed: u64,
    /// items removed by every run since the server started
    pub removed_total: u64,
    /// the last run's error, null if it succeeded
    pub last_error: Option<String>,
}

/// `GET /v1/admin/tasks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskList {
    /// every periodic task, in the order they were started
    pub tasks: Vec<TaskInfo>,
}

/// The tasks' records.
#[derive(Default)]
pub struct Tasks {
    list: std::sync::Mutex<Vec<Record>>,
}

/// One task's record: what `GET /v1/admin/tasks` shows, and the totals `GET /metrics` adds.
struct Record {
    info: TaskInfo,
    /// when the run under way started
    started: Option<Instant>,
    /// runs that ended with an error
    errors: u64,
    /// time taken by every finished run
    duration_total: Duration,
    /// how long the last finished run took
    last_duration: Option<Duration>,
}

/// A task's figures for `GET /metrics`.
#[derive(Debug, Clone)]
pub struct TaskFigures {
    /// the task's name
    pub name: String,
    /// the pause between runs
    pub interval: Duration,
    /// true while a run is under way
    pub running: bool,
    /// runs finished since the server started
    pub runs: u64,
    /// runs that ended with an error
    pub errors: u64,
    /// items removed by every run
    pub removed_total: u64,
    /// time taken by every finished run
    pub duration_total: Duration,
    /// how long the last finished run took
    pub last_duration: Option<Duration>,
}

fn now_rfc3339() -> Option<String> {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).ok()
}

impl Tasks {
    fn with_task(&self, name: &str, f: impl FnOnce(&mut Record)) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(record) = list.iter_mut().find(|r| r.info.name == name) {
            f(record);
        }
    }

    /// Registers a periodic task (again: its record starts afresh).
    pub fn register(&self, name: &str, description: &str, interval: Duration) {
        let info = TaskInfo {
            name: name.to_owned(),
            description: description.to_owned(),
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            running: false,
            runs: 0,
            last_started_at: None,
            last_duration_ms: None,
            last_removed: 0,
            removed_total: 0,
            last_error: None,
        };
        let record = Record { info, started: None, errors: 0, duration_total: Duration::ZERO, last_duration: None };
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|r| r.info.name != name);
        list.push(record);
    }

    /// A run of `name` starts.
    pub fn started(&self, name: &str) {
        self.with_task(name, |r| {
            r.info.running = true;
            r.info.last_started_at = now_rfc3339();
            r.started = Some(Instant::now());
        });
    }

    /// A run of `name` ended, having removed `removed` items, with `error` if it failed.
    pub fn finished(&self, name: &str, removed: u64, error: Option<String>) {
        self.with_task(name, |r| {
            let took = r.started.take().map(|s| s.elapsed());
            let info = &mut r.info;
            info.running = false;
            info.runs += 1;
            info.last_duration_ms = took.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            info.last_removed = removed;
            info.removed_total += removed;
            r.errors += u64::from(error.is_some());
            info.last_error = error;
            r.last_duration = took;
            r.duration_total += took.unwrap_or_default();
        });
    }

    /// Every periodic task's record.
    pub fn list(&self) -> TaskList {
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        TaskList { tasks: list.iter().map(|r| r.info.clone()).collect() }
    }

    /// Every periodic task's figures, totals included.
    pub fn figures(&self) -> Vec<TaskFigures> {
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter()
            .map(|r| TaskFigures {
                name: r.info.name.clone(),
                interval: Duration::from_millis(r.info.interval_ms),
                running: r.info.running,
                runs: r.info.runs,
                errors: r.errors,
                removed_total: r.info.removed_total,
                duration_total: r.duration_total,
                last_duration: r.last_duration,
            })
            .collect()
    }
}
