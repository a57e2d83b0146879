//! The changefeed: every committed document change as an event under `changefeed:{seq}`, read
//! back in pages (`GET /v1/changes`, long-poll) or as a stream (`GET /v1/changes/stream`).
//!
//! Writing: [`append::stage`] (and `append::record_as`) appends an event body to the write, and the committer numbers
//! the write's events with its next sequence numbers and stages them in the same atomic batch —
//! so seqs are gap-free among committed events, strictly increasing in commit order, and a
//! write that fails leaves neither the change nor its event.
//!
//! Reading: only events up to the store's durable watermark ([`crate::storage::Store::durable_seq`],
//! moved after each group's fsync) are served, so a consumer never sees an event a crash could
//! take back and hand to another write. Pages are read from the store from `since` on: a
//! waiting or slow consumer holds one bounded page, never a growing buffer. Waiting is on the
//! watermark's notification (or the shutdown's), not a polling loop.

pub(crate) mod append;
pub(crate) mod check;
mod events;
mod feed;
mod retention;

pub(crate) use append::{Op, stage};
pub use events::Events;
pub(crate) use feed::Feed;
pub use retention::Retention;

use super::core::{Core, Handle};
use super::{Result, ServiceError};
use crate::keys::ChangeKey;
use crate::storage::{KeyRange, Space};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// The changefeed model: the events under `changefeed:`, their waiters and retention, over the
/// shared [`Core`].
pub struct Changefeed {
    core: Arc<Core>,
    /// the first event kept, and the signal that wakes waiters at shutdown
    pub(crate) feed: Arc<Feed>,
    /// this server's role: a follower serves what its leader wrote
    role: crate::storage::Role,
}

impl Handle for Changefeed {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Changefeed {
    /// The model over `core`, with the feed's state as loaded from the store.
    pub(crate) fn new(core: Arc<Core>, feed: Arc<Feed>, role: crate::storage::Role) -> Changefeed {
        Changefeed { core, feed, role }
    }
}

/// Most events one page returns.
pub const MAX_LIMIT: usize = 10_000;
/// Events one page returns unless asked otherwise.
pub const DEFAULT_LIMIT: usize = 1000;
/// Longest a long-poll waits, in ms.
pub const MAX_WAIT_MS: u64 = 60_000;
/// Events one page reads at most (those of tables filtered out included), so a filter matching
/// nothing costs a bounded read per page; `next` then still moves on.
const SCAN_BUDGET: usize = 10_000;

/// A request for one page of events.
#[derive(Debug, Clone, Default)]
pub struct ChangesRequest {
    /// events with a seq greater than this (0: from the first kept)
    pub since: u64,
    /// most events to return, 1..=[`MAX_LIMIT`]
    pub limit: usize,
    /// only events of these tables (none: every table)
    pub tables: Option<Vec<String>>,
    /// how long to wait for an event when none is there, at most [`MAX_WAIT_MS`]
    pub wait: Duration,
}

/// One page of events, each the stored JSON text.
#[derive(Debug, Clone, Default)]
pub struct ChangePage {
    /// the events, in seq order
    pub events: Vec<Vec<u8>>,
    /// pass as `since` for the next page: the last seq this page covered
    pub next: u64,
}

impl ChangePage {
    /// The page as the JSON text of a [`ChangePageDoc`].
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.events.iter().map(|e| e.len() + 1).sum::<usize>() + 32);
        out.extend_from_slice(b"{\"events\":[");
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(e);
        }
        out.extend_from_slice(format!("],\"next\":{}}}", self.next).as_bytes());
        out
    }
}

/// One change event (the shape of each `events` item).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChangeEvent {
    /// the event's sequence number: gap-free and strictly increasing in commit order
    pub seq: u64,
    /// when the change was written, ms since the Unix epoch
    pub ts: i64,
    /// `put` (created or replaced) or `delete`
    #[schema(example = "put")]
    pub op: String,
    /// the table
    pub table: String,
    /// the document's id
    pub id: String,
    /// the new document with its `_id` (puts in tables whose changefeed mode is `full`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub document: Option<serde_json::Value>,
    /// the seq of the first event of the same write
    pub txn: u64,
    /// how many events the write made (seqs `txn .. txn + count`)
    pub count: u64,
}

/// `GET /v1/changes`, for the OpenAPI document; the service writes it as a [`ChangePage`].
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChangePageDoc {
    /// the events, in seq order (empty when none came within `wait_ms`)
    pub events: Vec<ChangeEvent>,
    /// pass as `since` for the next page
    pub next: u64,
}

/// `GET /v1/changes/stats`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChangeStats {
    /// the oldest event kept (null when none is kept)
    pub first_seq: Option<u64>,
    /// the newest durable event (0 before the first)
    pub last_seq: u64,
    /// events kept (`last_seq - first_seq + 1`: the kept events are contiguous)
    pub events: u64,
    /// disk space of the feed's table files (approximate: recent events still in the journal and
    /// memtable are not counted, deleted ones until compaction are)
    pub bytes: u64,
}

/// Only the member a table filter needs.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    table: Cow<'a, str>,
}

/// The `ts` member, for retention.
#[derive(Deserialize)]
struct Stamp {
    ts: i64,
}

impl Changefeed {
    /// One page of events after `req.since`: at once when there are some, else after waiting up
    /// to `req.wait` for one (an empty page when none came, or when the server is stopping).
    /// 410 `changefeed_expired` when events after `since` were removed by retention.
    pub async fn changes(self: &Arc<Self>, mut req: ChangesRequest) -> Result<ChangePage> {
        if req.limit == 0 || req.limit > MAX_LIMIT {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_LIMIT}")));
        }
        if req.wait > Duration::from_millis(MAX_WAIT_MS) {
            return Err(ServiceError::InvalidRequest(format!("wait_ms must be at most {MAX_WAIT_MS}")));
        }
        req.since = self.check_since(req.since)?;
        let deadline = Instant::now() + req.wait;
        let mut durable = self.core.store.durable_seq();
        let mut stopping = self.feed.stopping.subscribe();
        let tables = Arc::new(req.tables.take());
        loop {
            let upto = *durable.borrow_and_update();
            let (since, limit, t) = (req.since, req.limit, tables.clone());
            let page = self.read(move |model| model.change_page(since, limit, t.as_deref(), upto)).await?;
            if !page.events.is_empty() || *stopping.borrow() || Instant::now() >= deadline {
                return Ok(page);
            }
            req.since = page.next;
            if page.next < upto {
                // a filtered page that used its budget: read on
                continue;
            }
            tokio::select! {
                changed = durable.changed() => if changed.is_err() { return Ok(page) },
                _ = stopping.changed() => return Ok(page),
                () = tokio::time::sleep_until(deadline.into()) => return Ok(page),
            }
        }
    }

    /// Reads the events in `since+1 ..= upto` (at most `limit` of the wanted tables, at most
    /// [`SCAN_BUDGET`] read) from one snapshot.
    fn change_page(&self, since: u64, limit: usize, tables: Option<&[String]>, upto: u64) -> Result<ChangePage> {
        let view = self.core.store.snapshot();
        let first = self.feed.first_kept.load(Ordering::Acquire);
        if since.saturating_add(1) < first {
            return Err(ServiceError::ChangefeedExpired { since, oldest: first });
        }
        let mut page = ChangePage { events: Vec::new(), next: since };
        if since >= upto {
            return Ok(page);
        }
        let lower = Bound::Included(ChangeKey::new(since + 1).encode());
        let upper = Bound::Included(ChangeKey::new(upto).encode());
        for item in view.scan(Space::Changefeed, KeyRange::Between(lower, upper), false).take(SCAN_BUDGET) {
            let (k, v) = item?;
            let seq =
                ChangeKey::decode(&k).map_err(|e| ServiceError::Internal(format!("bad changefeed key: {e}")))?.seq;
            if seq != page.next + 1 {
                // Committed events are contiguous: a hole is retention removing them meanwhile.
                return Err(self.expired(since));
            }
            page.next = seq;
            let wanted = match tables {
                None => true,
                Some(ts) => {
                    let head: Head<'_> = serde_json::from_slice(&v)
                        .map_err(|e| ServiceError::Internal(format!("bad change event {seq}: {e}")))?;
                    ts.iter().any(|t| *t == head.table)
                }
            };
            if wanted {
                page.events.push(v.to_vec());
                if page.events.len() >= limit {
                    break;
                }
            }
        }
        if page.next == since {
            // every event up to the watermark is durable and committed: none left is retention
            return Err(self.expired(since));
        }
        Ok(page)
    }

    fn expired(&self, since: u64) -> ServiceError {
        ServiceError::ChangefeedExpired { since, oldest: self.feed.first_kept.load(Ordering::Acquire) }
    }

    /// The `since` a read starts from: 0 means "from the oldest kept event"; anything older than
    /// that is 410 `changefeed_expired`, anything past the last event 409 `changefeed_ahead`
    /// (no consumer was ever given such a seq in this feed's history: it was reset under it).
    pub fn check_since(&self, since: u64) -> Result<u64> {
        let first = self.feed.first_kept.load(Ordering::Acquire);
        if since == 0 {
            return Ok(first.saturating_sub(1));
        }
        let last = *self.core.store.durable_seq().borrow();
        if since > last && self.role == crate::storage::Role::Follower {
            // a consumer that moved here from the leader within a poll of this follower's:
            // the events are there, this server has not looked yet
            return Err(ServiceError::Lagging { wanted: since, applied: last });
        }
        if since > last {
            return Err(ServiceError::ChangefeedAhead { since, last });
        }
        if since.saturating_add(1) < first {
            return Err(ServiceError::ChangefeedExpired { since, oldest: first });
        }
        Ok(since)
    }

    /// The feed's first and last seq, event count and disk space.
    pub async fn change_stats(self: &Arc<Self>) -> Result<ChangeStats> {
        self.read(|model| Ok(model.change_stats_now())).await
    }

    /// [`Changefeed::change_stats`], on the calling thread (reads in-memory figures only).
    pub(crate) fn change_stats_now(&self) -> ChangeStats {
        let last = *self.core.store.durable_seq().borrow();
        let first = self.feed.first_kept.load(Ordering::Acquire);
        let kept = (first <= last).then_some(first);
        ChangeStats {
            first_seq: kept,
            last_seq: last,
            events: kept.map_or(0, |f| last - f + 1),
            bytes: self.core.store.disk_space(Space::Changefeed),
        }
    }

    /// Ends every long-poll and stream at once (the server is stopping).
    pub fn stop_change_waits(&self) {
        self.feed.stopping.send_replace(true);
    }

    /// A signal that turns `true` once [`Changefeed::stop_change_waits`] was called (the server is
    /// stopping): streamed answers end at it.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.feed.stopping.subscribe()
    }

    /// True once [`Changefeed::stop_change_waits`] was called.
    pub fn change_waits_stopped(&self) -> bool {
        *self.feed.stopping.borrow()
    }
}
