//! The time-series model's in-memory state, held by the database.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// In-memory state of the time-series model: the metrics being deleted (writes to them wait
/// for the delete to finish: 409).
#[derive(Default)]
pub(crate) struct State {
    dropping: Mutex<HashSet<String>>,
}

impl State {
    pub(crate) fn start_dropping(&self, metric: &str) -> bool {
        self.dropping.lock().unwrap_or_else(PoisonError::into_inner).insert(metric.to_owned())
    }

    pub(crate) fn stop_dropping(&self, metric: &str) {
        self.dropping.lock().unwrap_or_else(PoisonError::into_inner).remove(metric);
    }

    pub(crate) fn is_dropping(&self, metric: &str) -> bool {
        let dropping = self.dropping.lock().unwrap_or_else(PoisonError::into_inner);
        !dropping.is_empty() && dropping.contains(metric)
    }
}
