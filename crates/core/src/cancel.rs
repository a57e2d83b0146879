//! Stopping a long walk over storage on the blocking pool: at a deadline (the request timeout),
//! or once the request's future is dropped (the timeout layer answered 408, or the client went
//! away). Queries and `POST /v1/admin/check` share it.

use crate::{Result, ServiceError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::Instant;

/// Items read between two looks at [`Stop`].
const STOP_CHECK_EVERY: u32 = 64;

/// When a scan gives up: its request is gone (timed out, or the client went away), or the
/// request timeout has passed. Every key a scan reads counts, so a scan that skips many keys
/// without producing a candidate (a merge join of disjoint sets, points outside a circle) stops
/// too.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    abandoned: Arc<AtomicBool>,
    deadline: Option<Instant>,
}

impl Stop {
    /// Stops once `deadline` passes, or once the returned guard is dropped before the scan ends.
    pub fn new(deadline: Option<Instant>) -> (Stop, AbandonOnDrop) {
        let stop = Stop { abandoned: Arc::default(), deadline };
        let guard = AbandonOnDrop(stop.abandoned.clone());
        (stop, guard)
    }

    /// `Err(Abandoned)` when the scan should stop.
    pub fn check(&self) -> Result<()> {
        if self.abandoned.load(AtomicOrdering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ServiceError::Abandoned);
        }
        Ok(())
    }
}

/// Held by the request's future: dropping it (the request timed out and its future was dropped,
/// or the query ended) tells the scan on the blocking pool to stop.
pub struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, AtomicOrdering::Relaxed);
    }
}

/// Yields an error (once, then ends) when `stop` says so, looking every few items.
pub struct Watched<'v, I> {
    inner: I,
    stop: &'v Stop,
    seen: u32,
    stopped: bool,
}

impl<'v, I> Watched<'v, I> {
    pub fn new(inner: I, stop: &'v Stop) -> Self {
        Watched { inner, stop, seen: 0, stopped: false }
    }
}

impl<T, I: Iterator<Item = Result<T>>> Iterator for Watched<'_, I> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped {
            return None;
        }
        self.seen = self.seen.wrapping_add(1);
        if self.seen.is_multiple_of(STOP_CHECK_EVERY)
            && let Err(e) = self.stop.check()
        {
            self.stopped = true;
            return Some(Err(e));
        }
        self.inner.next()
    }
}
