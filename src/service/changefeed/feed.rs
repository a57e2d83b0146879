//! The changefeed's in-memory state, held by the database.

use crate::keys::ChangeKey;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space};
use std::sync::atomic::AtomicU64;

/// The feed's in-memory state.
pub(crate) struct Feed {
    /// the lowest seq that may still be stored: what retention left (events below are gone)
    pub(super) first_kept: AtomicU64,
    /// set once the server stops: waits end at once
    pub(super) stopping: tokio::sync::watch::Sender<bool>,
}

impl Feed {
    /// A cluster follower's: the first event the leader's retention left is `first`.
    pub(crate) fn follow_first(&self, first: u64) {
        self.first_kept.store(first, std::sync::atomic::Ordering::Release);
    }

    /// The state of an opened store: the first kept event is the first one stored (or, with none,
    /// the next one to come).
    pub(crate) fn load(store: &crate::storage::Store) -> Result<Feed> {
        let view = store.snapshot();
        let first = match view.scan(Space::Changefeed, KeyRange::Prefix(Vec::new()), false).next() {
            Some(item) => {
                let (k, _) = item?;
                ChangeKey::decode(&k).map_err(|e| ServiceError::Internal(format!("bad changefeed key: {e}")))?.seq
            }
            None => *store.durable_seq().borrow() + 1,
        };
        Ok(Feed { first_kept: AtomicU64::new(first), stopping: tokio::sync::watch::Sender::new(false) })
    }
}
