//! The record of the periodic background tasks (TTL sweep, retention): what each did last and in
//! total, for `GET /v1/admin/tasks`. The scheduler in `background` runs them and reports here.

use super::Db;
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
pub(crate) struct Tasks {
    list: std::sync::Mutex<Vec<(TaskInfo, Option<Instant>)>>,
}

fn now_rfc3339() -> Option<String> {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).ok()
}

impl Db {
    fn with_task(&self, name: &str, f: impl FnOnce(&mut TaskInfo, &mut Option<Instant>)) {
        let mut list = self.tasks.list.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((info, started)) = list.iter_mut().find(|(t, _)| t.name == name) {
            f(info, started);
        }
    }

    /// Registers a periodic task (again: its record starts afresh).
    pub fn register_task(&self, name: &str, description: &str, interval: Duration) {
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
        let mut list = self.tasks.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|(t, _)| t.name != name);
        list.push((info, None));
    }

    /// A run of `name` starts.
    pub fn task_started(&self, name: &str) {
        self.with_task(name, |info, started| {
            info.running = true;
            info.last_started_at = now_rfc3339();
            *started = Some(Instant::now());
        });
    }

    /// A run of `name` ended, having removed `removed` items, with `error` if it failed.
    pub fn task_finished(&self, name: &str, removed: u64, error: Option<String>) {
        self.with_task(name, |info, started| {
            info.running = false;
            info.runs += 1;
            info.last_duration_ms = started.take().map(|s| u64::try_from(s.elapsed().as_millis()).unwrap_or(u64::MAX));
            info.last_removed = removed;
            info.removed_total += removed;
            info.last_error = error;
        });
    }

    /// Every periodic task's record.
    pub fn tasks(&self) -> TaskList {
        let list = self.tasks.list.lock().unwrap_or_else(PoisonError::into_inner);
        TaskList { tasks: list.iter().map(|(t, _)| t.clone()).collect() }
    }
}
