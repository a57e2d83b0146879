//! The header-read and keep-alive timeouts of connections, kept by one sweeper task per server
//! rather than by a timer per request.
//!
//! hyper's own `header_read_timeout` arms a timer for every request head, and cost point GETs
//! ~15% of their throughput (`MOSAIC_BENCH_ONLY=ceiling,identity cargo bench --bench http`).
//! Here each connection keeps one atomic word, [`Activity`]: which phase it is in (reading a
//! head, idle between requests, or answering) and the tick of the server's coarse clock at which
//! that phase began. A request costs a few relaxed atomic loads and stores on that word, no timer
//! and no clock read. The sweeper advances the clock every tick (a tenth of the shorter timeout,
//! between 50 ms and 1 s) and closes the connections whose phase has lasted too long, so a
//! timeout fires between its length and two ticks later. A connection answering a request (a
//! stream, a long-poll, a change stream, an upload) is in no timed phase and is never cut here.

use crate::api::{ConnectionMetrics, ConnectionTimeout};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// The phase bits of [`Activity::state`] (the rest is the tick the phase began at).
const PHASE: u64 = 0b11 << 62;
/// answering at least one request: no deadline
const BUSY: u64 = 0;
/// reading a request head (or the TLS handshake, from the accept on)
const HEAD: u64 = 1 << 62;
/// between requests, nothing of the next head read yet
const IDLE: u64 = 2 << 62;

/// The timeouts of a server's connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnTimeouts {
    /// longest from a connection's accept, or from the first byte of a request head, until the
    /// head is whole (the TLS handshake included)
    pub header: Duration,
    /// longest a keep-alive connection may stay idle between requests
    pub idle: Duration,
}

impl Default for ConnTimeouts {
    /// 10 s for a head, 60 s idle (nginx has 60 s and 75 s; 10 s is plenty on any network a
    /// database's clients use).
    fn default() -> Self {
        ConnTimeouts { header: Duration::from_secs(10), idle: Duration::from_secs(60) }
    }
}

/// A server's coarse clock and the connections it watches.
pub(super) struct Sweeper {
    tick: Duration,
    /// ticks since the sweeper started
    now: AtomicU64,
    /// a phase lasting this many ticks (or more) of the clock has passed its timeout
    header_ticks: u64,
    idle_ticks: u64,
    watched: Mutex<Vec<Weak<Activity>>>,
    metrics: Arc<ConnectionMetrics>,
}

impl Sweeper {
    pub(super) fn new(timeouts: ConnTimeouts, metrics: Arc<ConnectionMetrics>) -> Arc<Sweeper> {
        let shorter = timeouts.header.min(timeouts.idle);
        let tick = (shorter / 10).clamp(Duration::from_millis(50), Duration::from_secs(1));
        // The tick a phase began at was read up to a tick before the phase began: one more tick
        // makes sure a whole timeout has passed.
        let ticks = |d: Duration| (d.as_nanos().div_ceil(tick.as_nanos())) as u64 + 1;
        Arc::new(Sweeper {
            tick,
            now: AtomicU64::new(0),
            header_ticks: ticks(timeouts.header),
            idle_ticks: ticks(timeouts.idle),
            watched: Mutex::new(Vec::new()),
            metrics,
        })
    }

    /// Watches a new connection, in its head phase from now on.
    pub(super) fn watch(self: &Arc<Self>) -> Arc<Activity> {
        let activity = Arc::new(Activity {
            sweeper: self.clone(),
            answering: AtomicUsize::new(0),
            state: AtomicU64::new(HEAD | self.now()),
            expired: Notify::new(),
        });
        self.watched.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::downgrade(&activity));
        activity
    }

    fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// Ticks the clock and closes the connections past a timeout, until dropped.
    pub(super) async fn run(self: Arc<Self>) {
        let mut every = tokio::time::interval(self.tick);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
            self.sweep(now);
        }
    }

    fn sweep(&self, now: u64) {
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        watched.retain(|w| {
            let Some(activity) = w.upgrade() else { return false };
            let state = activity.state.load(Ordering::Relaxed);
            let since = state & !PHASE;
            let (limit, why) = match state & PHASE {
                HEAD => (self.header_ticks, ConnectionTimeout::Header),
                IDLE => (self.idle_ticks, ConnectionTimeout::Idle),
                _ => return true,
            };
            if now.saturating_sub(since) < limit {
                return true;
            }
            self.metrics.timed_out(why);
            activity.expired.notify_one();
            false
        });
    }
}

/// What the sweeper knows of one connection: the requests it is answering and its phase.
pub(super) struct Activity {
    sweeper: Arc<Sweeper>,
    /// requests being answered by the application (from the service call until hyper drops the
    /// response body)
    answering: AtomicUsize,
    /// the phase and the tick it began at
    state: AtomicU64,
    expired: Notify,
}

impl Activity {
    /// Whether the application is answering a request of this connection.
    pub(super) fn answering(&self) -> bool {
        self.answering.load(Ordering::Acquire) != 0
    }

    /// A request is being answered, until the guard is dropped.
    pub(super) fn start(self: &Arc<Self>) -> Answering {
        if self.answering.fetch_add(1, Ordering::AcqRel) == 0 {
            self.state.store(BUSY, Ordering::Relaxed);
        }
        Answering(self.clone())
    }

    /// Bytes of a request head arrived while no request is answered: the header timeout runs
    /// from the first of them.
    pub(super) fn head_bytes(&self) {
        let state = self.state.load(Ordering::Relaxed);
        if state & PHASE == IDLE {
            self.state.store(HEAD | self.sweeper.now(), Ordering::Relaxed);
        }
    }

    /// Resolves once the sweeper closed the connection for a timeout.
    pub(super) async fn expired(&self) {
        self.expired.notified().await;
    }
}

/// One request being answered, until dropped (when hyper is done with its response body).
pub(super) struct Answering(Arc<Activity>);

impl Drop for Answering {
    fn drop(&mut self) {
        let activity = &self.0;
        if activity.answering.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.state.store(IDLE | activity.sweeper.now(), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweeper(header_ms: u64, idle_ms: u64) -> (Arc<Sweeper>, Arc<ConnectionMetrics>) {
        let metrics = Arc::new(ConnectionMetrics::default());
        let timeouts = ConnTimeouts { header: Duration::from_millis(header_ms), idle: Duration::from_millis(idle_ms) };
        (Sweeper::new(timeouts, metrics.clone()), metrics)
    }

    fn expired(activity: &Activity) -> bool {
        let notified = activity.expired.notified();
        futures_util::pin_mut!(notified);
        // a stored permit completes the first poll
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::future::Future::poll(notified, &mut cx).is_ready()
    }

    #[test]
    fn each_phase_has_its_deadline_and_answering_has_none() {
        // 100 ms ticks (a tenth of 1 s): a head may take 10 ticks (11 on the clock), idle 30
        let (s, _) = sweeper(1000, 3000);
        assert_eq!((s.tick, s.header_ticks, s.idle_ticks), (Duration::from_millis(100), 11, 31));
        let slow_head = s.watch();
        let busy = s.watch();
        let answering = busy.start();
        let idle = s.watch();
        drop(idle.start());
        s.sweep(10);
        assert!(!expired(&slow_head), "10 ticks may not be a whole second yet");
        s.sweep(11);
        assert!(expired(&slow_head));
        for now in 12..100 {
            s.sweep(now);
        }
        assert!(!expired(&busy), "a request being answered is never cut");
        assert!(expired(&idle));
        drop(answering);
        assert_eq!(s.watched.lock().unwrap().len(), 1, "only the connection still in a timed phase");
    }

    #[test]
    fn bytes_of_a_head_start_the_header_timeout_only_when_idle() {
        let (s, metrics) = sweeper(1000, 60_000);
        let c = s.watch();
        drop(c.start());
        s.now.store(50, Ordering::Relaxed);
        c.head_bytes();
        s.now.store(55, Ordering::Relaxed);
        c.head_bytes(); // more of the same head: the deadline stays
        s.sweep(60);
        assert!(!expired(&c));
        s.sweep(61);
        assert!(expired(&c));
        let text = {
            let mut registry = prometheus_client::registry::Registry::default();
            registry.register_collector(Box::new(metrics));
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        assert!(text.contains("mosaicdb_http_connections_timed_out_total{phase=\"header\"} 1"), "{text}");
    }
}
