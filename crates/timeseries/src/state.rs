//! The time-series model's in-memory state, held by the database.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// In-memory state of the time-series model: the metrics being deleted (writes to them wait
/// for the delete to finish: 409), and what the merge task need not look at again.
#[derive(Default)]
pub struct State {
    dropping: Mutex<HashSet<String>>,
    /// series the merge task found nothing to merge in
    pub settled: Settled,
    /// bytes of the time-series keys deleted (merged away, removed) since the `ts` keyspace was
    /// last compacted: the garbage a compaction would drop
    removed_since_compaction: AtomicU64,
    /// what the merge task need look at: the metrics written since it last looked at them (all
    /// of them until its first run since the open), and the bytes their series held then
    merging: Mutex<Merging>,
}

/// See [`State::merging`].
#[derive(Default)]
struct Merging {
    /// false until the merge task's first run has looked at every metric
    started: bool,
    dirty: HashSet<String>,
    stored: HashMap<String, u64>,
}

impl State {
    pub fn start_dropping(&self, metric: &str) -> bool {
        self.dropping.lock().unwrap_or_else(PoisonError::into_inner).insert(metric.to_owned())
    }

    pub fn stop_dropping(&self, metric: &str) {
        self.dropping.lock().unwrap_or_else(PoisonError::into_inner).remove(metric);
    }

    /// Notes that `metric` was written: the merge task looks at it in its next run.
    pub fn written(&self, metric: &str) {
        let mut merging = self.merging.lock().unwrap_or_else(PoisonError::into_inner);
        if !merging.dirty.contains(metric) {
            merging.dirty.insert(metric.to_owned());
        }
    }

    /// Whether the merge task must look at `metric` in this run (it was written since the last
    /// look, or this is the first run since the open); it is clean from now until written again.
    pub fn take_dirty(&self, metric: &str) -> bool {
        let mut merging = self.merging.lock().unwrap_or_else(PoisonError::into_inner);
        let written = merging.dirty.remove(metric);
        !merging.started || written
    }

    /// Marks `metric` to be looked at again (a run stopped before it was done with it).
    pub fn keep_dirty(&self, metric: &str) {
        self.merging.lock().unwrap_or_else(PoisonError::into_inner).dirty.insert(metric.to_owned());
    }

    /// Ends a run of the merge task: every metric has been looked at once; `stored` holds the
    /// bytes of the series of the metrics it looked at, `live` names every metric. Returns the
    /// bytes of every metric's series as last looked at.
    pub fn merge_run_done(&self, stored: HashMap<String, u64>, live: &HashSet<String>) -> u64 {
        let mut merging = self.merging.lock().unwrap_or_else(PoisonError::into_inner);
        merging.started = true;
        merging.stored.extend(stored);
        merging.stored.retain(|m, _| live.contains(m));
        merging.stored.values().sum()
    }

    /// Counts the bytes of keys deleted (their versions and tombstones are garbage until a
    /// compaction).
    pub fn note_removed(&self, bytes: u64) {
        self.removed_since_compaction.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes of the keys deleted since the last compaction.
    pub fn removed_bytes(&self) -> u64 {
        self.removed_since_compaction.load(Ordering::Relaxed)
    }

    /// Bytes of the keys deleted since the last compaction, now 0.
    pub fn take_removed(&self) -> u64 {
        self.removed_since_compaction.swap(0, Ordering::Relaxed)
    }

    pub fn is_dropping(&self, metric: &str) -> bool {
        let dropping = self.dropping.lock().unwrap_or_else(PoisonError::into_inner);
        !dropping.is_empty() && dropping.contains(metric)
    }
}

/// The series the merge task found nothing to merge in, with their record then (point count and
/// loose keys): looked at again only once it changed.
#[derive(Default)]
pub struct Settled(Mutex<HashMap<(String, String), (u64, u64)>>);

impl Settled {
    pub fn is(&self, metric: &str, entity: &str, record: (u64, u64)) -> bool {
        let settled = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        settled.get(&(metric.to_owned(), entity.to_owned())) == Some(&record)
    }

    pub fn set(&self, metric: &str, entity: &str, record: Option<(u64, u64)>) {
        let mut settled = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (metric.to_owned(), entity.to_owned());
        match record {
            Some(r) => settled.insert(key, r),
            None => settled.remove(&key),
        };
    }

    /// Forgets the series of `metric` that `live` does not name (deleted since).
    pub fn keep_only(&self, metric: &str, live: &std::collections::HashSet<&str>) {
        let mut settled = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        settled.retain(|(m, e), _| m != metric || live.contains(e.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_merge_task_looks_at_every_metric_once_then_at_the_written_ones() {
        let state = State::default();
        // before its first run: every metric, whatever was written
        state.written("a");
        assert!(state.take_dirty("a") && state.take_dirty("b"));
        // a write during the first run, after it looked at the metric: looked at again
        state.written("b");
        let live: HashSet<String> = ["a".to_owned(), "b".to_owned()].into();
        let stored = state.merge_run_done([("a".to_owned(), 10), ("b".to_owned(), 5)].into(), &live);
        assert_eq!(stored, 15);
        // then only what was written since, once
        assert!(!state.take_dirty("a") && state.take_dirty("b") && !state.take_dirty("b"));
        state.written("b");
        assert!(!state.take_dirty("a") && state.take_dirty("b") && !state.take_dirty("b"));
        // a run cut short leaves the metric for the next
        state.keep_dirty("a");
        assert!(state.take_dirty("a"));
        // the bytes of metrics not looked at stay; deleted metrics go
        let live: HashSet<String> = ["b".to_owned()].into();
        assert_eq!(state.merge_run_done([("b".to_owned(), 7)].into(), &live), 7);
    }
}
