//! Retention of the feed: events older than the maximum age go, and the oldest go while the
//! feed's disk space is over its cap — in bounded writes of at most [`TRIM_CHUNK`] deletes, run
//! by the background scheduler. The newest event always stays: the next seq follows the last
//! stored event when the store opens, so an empty feed would number from 1 again.

use super::Changefeed;
use super::{ChangeKey, Stamp};
use crate::service::core::Handle;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Events one retention write removes at most.
pub const TRIM_CHUNK: usize = 1000;

/// How much of the feed is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// events older than this are removed
    pub max_age: Duration,
    /// the oldest events are removed while the feed's disk space is over this many bytes
    pub max_bytes: u64,
}

impl Retention {
    /// The default age: 24 hours.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
    /// The default size cap: 1 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
}

impl Default for Retention {
    fn default() -> Self {
        Retention { max_age: Retention::DEFAULT_MAX_AGE, max_bytes: Retention::DEFAULT_MAX_BYTES }
    }
}

impl Changefeed {
    /// Removes the events `retention` no longer keeps (as of `now_ms`), a chunk per write, until
    /// none is left to remove or `stop` says so; returns how many it removed.
    pub async fn trim_changefeed(
        self: &Arc<Self>,
        retention: Retention,
        now_ms: i64,
        stop: &(dyn Fn() -> bool + Send + Sync),
    ) -> Result<u64> {
        let stats = self.change_stats_now();
        // the size cap in events, from the mean size of one (disk space counts table files only)
        let mut over = match stats.bytes.checked_sub(retention.max_bytes) {
            Some(excess) if excess > 0 && stats.events > 0 => {
                let per_event = (stats.bytes / stats.events).max(1);
                excess.div_ceil(per_event)
            }
            _ => 0,
        };
        let cutoff = now_ms.saturating_sub(i64::try_from(retention.max_age.as_millis()).unwrap_or(i64::MAX));
        let mut removed = 0;
        loop {
            if stop() {
                return Ok(removed);
            }
            let (n, done) = self
                .commit(move |tx, model| {
                    let first = model.feed.first_kept.load(Ordering::Acquire);
                    let last = *model.core.store.durable_seq().borrow();
                    if first >= last {
                        return Ok((0, true));
                    }
                    let lower = Bound::Included(ChangeKey::new(first).encode());
                    // the newest event stays
                    let upper = Bound::Included(ChangeKey::new(last - 1).encode());
                    let mut n = 0u64;
                    let mut done = true;
                    let mut last_removed = None;
                    for item in tx.scan(Space::Changefeed, KeyRange::Between(lower, upper)).take(TRIM_CHUNK) {
                        let (k, v) = item?;
                        let seq = ChangeKey::decode(&k)
                            .map_err(|e| ServiceError::Internal(format!("bad changefeed key: {e}")))?
                            .seq;
                        let old = n < over
                            || serde_json::from_slice::<Stamp>(&v)
                                .map_err(|e| ServiceError::Internal(format!("bad change event {seq}: {e}")))?
                                .ts
                                < cutoff;
                        if !old {
                            done = true;
                            break;
                        }
                        tx.delete(Space::Changefeed, k.to_vec());
                        n += 1;
                        last_removed = Some(seq);
                        done = n < TRIM_CHUNK as u64;
                    }
                    if let Some(seq) = last_removed {
                        let feed = model.feed.clone();
                        tx.on_commit(move || {
                            feed.first_kept.fetch_max(seq + 1, Ordering::AcqRel);
                        });
                    }
                    Ok((n, done))
                })
                .await?;
            removed += n;
            over = over.saturating_sub(n);
            if done || n == 0 {
                return Ok(removed);
            }
        }
    }
}
