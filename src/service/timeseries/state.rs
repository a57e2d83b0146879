//! The time-series model's in-memory state, held by the database.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// In-memory state of the time-series model: the metrics being deleted (writes to them wait
/// for the delete to finish: 409), and what the merge task need not look at again.
#[derive(Default)]
pub(crate) struct State {
    dropping: Mutex<HashSet<String>>,
    /// series the merge task found nothing to merge in
    pub(crate) settled: Settled,
    /// time-series keys deleted (merged away, removed) since the `ts` keyspace was last
    /// compacted: while 0 a compaction could win nothing
    removed_since_compaction: AtomicU64,
}

impl State {
    pub(crate) fn start_dropping(&self, metric: &str) -> bool {
        self.dropping.lock().unwrap_or_else(PoisonError::into_inner).insert(metric.to_owned())
    }

    pub(crate) fn stop_dropping(&self, metric: &str) {
        self.dropping.lock().unwrap_or_else(PoisonError::into_inner).remove(metric);
    }

    /// Counts keys deleted (their versions and tombstones are garbage until a compaction).
    pub(crate) fn note_removed(&self, keys: u64) {
        self.removed_since_compaction.fetch_add(keys, Ordering::Relaxed);
    }

    /// Keys deleted since the last compaction, now 0.
    pub(crate) fn take_removed(&self) -> u64 {
        self.removed_since_compaction.swap(0, Ordering::Relaxed)
    }

    pub(crate) fn is_dropping(&self, metric: &str) -> bool {
        let dropping = self.dropping.lock().unwrap_or_else(PoisonError::into_inner);
        !dropping.is_empty() && dropping.contains(metric)
    }
}

/// The series the merge task found nothing to merge in, with their record then (point count and
/// loose keys): looked at again only once it changed.
#[derive(Default)]
pub(crate) struct Settled(Mutex<HashMap<(String, String), (u64, u64)>>);

impl Settled {
    pub(crate) fn is(&self, metric: &str, entity: &str, record: (u64, u64)) -> bool {
        let settled = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        settled.get(&(metric.to_owned(), entity.to_owned())) == Some(&record)
    }

    pub(crate) fn set(&self, metric: &str, entity: &str, record: Option<(u64, u64)>) {
        let mut settled = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (metric.to_owned(), entity.to_owned());
        match record {
            Some(r) => settled.insert(key, r),
            None => settled.remove(&key),
        };
    }

    /// Forgets the series of `metric` that `live` does not name (deleted since).
    pub(crate) fn keep_only(&self, metric: &str, live: &std::collections::HashSet<&str>) {
        let mut settled = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        settled.retain(|(m, e), _| m != metric || live.contains(e.as_str()));
    }
}
