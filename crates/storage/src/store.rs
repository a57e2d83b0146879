//! An open data directory: the [`Store`] handle, its open (the keyspaces, the committer and, in
//! sync mode, the fsync thread), its reads and writes, and its close.

use super::config::{Durability, StorageConfig};
use super::engine::Engine;
use super::error::{Result, StorageError};
use super::events::EventCodec;
use super::health::{self, Health};
use super::limits::Limits;
use super::range::KeyRange;
use super::read::{DerivedSource, Published};
use super::slice::Slice;
use super::space::Space;
use super::stats::{self, StoreStats};
use super::sync::{self, Completion, Views};
use super::write::{Committer, Job, WriteTx};
use super::{dirs, rows};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

/// An open data directory. Cheap to clone; the last clone dropped stops the committer after it
/// has answered every queued write.
#[derive(Clone)]
pub struct Store {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    /// the backend
    pub(super) engine: Engine,
    /// documents for point reads (the committer evicts what it commits)
    rows: Arc<rows::Rows>,
    config: StorageConfig,
    poisoned: Arc<health::Poison>,
    /// a recovery from an engine failure that passes (`recover.rs`)
    recovery: Arc<health::Recovery>,
    /// the free disk space the committer keeps
    reserve: Arc<health::DiskReserve>,
    /// false once the committer thread has ended (closed, or taken down by a panic)
    running: Arc<AtomicBool>,
    /// see [`Store::inject_sync_failure`]
    fail_next_sync: Arc<AtomicBool>,
    #[cfg(test)]
    hold_sync: Arc<Mutex<()>>,
    /// the id of the journal file the fsync thread last synced (sync mode)
    #[cfg(test)]
    synced_journal: Arc<std::sync::atomic::AtomicU64>,
    queue: Mutex<Option<mpsc::Sender<Job>>>,
    committer: Mutex<Option<JoinHandle<()>>>,
    /// the fsync thread (sync mode), which the committer joins when it ends
    fsync_thread: Option<std::thread::ThreadId>,
    /// what the committer counts (groups, writes, fsyncs)
    counters: Arc<stats::CommitCounters>,
    /// see [`Store::durable_seq`]
    durable: Arc<tokio::sync::watch::Sender<u64>>,
    /// The state every read sees (see [`Store::snapshot`]): as of the last group the fsync
    /// thread made durable (sync mode), or the last group committed (buffered mode).
    pub(super) views: Views,
    /// whether point reads go through `views` (sync mode) or read the latest commit (buffered)
    durable_reads: bool,
    /// see [`Store::set_derived_source`]
    derived_source: Arc<std::sync::OnceLock<DerivedSource>>,
    /// see [`Store::compact`]
    republish: Arc<AtomicBool>,
}

/// The file that marks a data directory whose restore has not finished.
pub const RESTORE_MARKER: &str = "RESTORE_INCOMPLETE";

/// Most committed groups waiting for their fsync (sync mode); past it the committer waits.
const MAX_GROUPS_UNSYNCED: usize = 64;

/// How long a shutdown waits for the memtable flush (see [`Store::close`]).
const CLOSE_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Store {
    /// Opens (or creates) the data directory and starts the committer, which stores the events
    /// writes append as `events` says. A directory that an unfinished restore left (it holds
    /// [`RESTORE_MARKER`]) is refused.
    pub fn open(config: StorageConfig, events: &'static dyn EventCodec) -> Result<Store> {
        if config.path.join(RESTORE_MARKER).exists() {
            return Err(StorageError::UnfinishedRestore(config.path));
        }
        let store = Store::open_dir(config, events)?;
        if let Some(pg) = store.engine().postgres()
            && pg.restoring()?
        {
            let _ = store.close();
            return Err(StorageError::Engine(
                "the PostgreSQL database holds an unfinished restore: empty it and restore again".into(),
            ));
        }
        Ok(store)
    }

    /// The backend.
    pub(super) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// [`Store::open`] without the restore marker check (the bulk load's own open).
    pub(super) fn open_dir(config: StorageConfig, events: &'static dyn EventCodec) -> Result<Store> {
        let embedded = config.backend == super::Backend::Embedded;
        let created = if embedded { dirs::missing(&config.path) } else { Vec::new() };
        let engine = Engine::open(&config)?;
        if embedded {
            dirs::sync_after_open(&config.path, &created).map_err(|source| StorageError::Io {
                context: format!("fsync of the data directory {:?}", config.path),
                source,
            })?;
        }
        // The next sequence number follows the last change event on disk.
        let all = KeyRange::Between(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
        let next_seq = match engine.writer_view().scan(Space::Changefeed, all).next_back().transpose()? {
            Some((key, _)) => {
                events.seq(&key).map_err(|e| StorageError::Engine(format!("bad changefeed key: {e}")))? + 1
            }
            None => 1,
        };
        let poisoned = Arc::new(health::Poison::default());
        let recovery = Arc::new(health::Recovery::default());
        // the engine's errors logged before this store opened are not its own
        let mark = super::engine_log::mark();
        recovery.mark.store(mark, Ordering::Release);
        recovery.next_mark.store(mark, Ordering::Release);
        // the free space of a PostgreSQL server's disk is its operator's to watch
        let min_free = if embedded { config.min_free_bytes } else { 0 };
        let reserve = Arc::new(health::DiskReserve::new(config.path.clone(), min_free));
        let fail_next_sync = Arc::new(AtomicBool::new(false));
        #[cfg(test)]
        let hold_sync = Arc::new(Mutex::new(()));
        let counters = Arc::new(stats::CommitCounters::default());
        let durable = Arc::new(tokio::sync::watch::Sender::new(next_seq - 1));
        #[cfg(test)]
        let mut synced_journal = Arc::default();
        let follower = engine.postgres().is_some_and(|pg| pg.role() == super::Role::Follower);
        // a follower's cached documents are evicted as the leader's log says (`follow_documents`)
        let rows = Arc::new(rows::Rows::new(usize::try_from(config.row_cache_bytes).unwrap_or(usize::MAX)));
        if config.durability == Durability::Sync && embedded {
            // What the open recovered from the journal reached the OS before a crash, but
            // maybe not the disk: it is fsynced before anything reads it.
            engine.persist(true)?;
        }
        if let Some(pg) = engine.postgres() {
            // numbered above every state the leaders before this server published
            super::read::raise_states(pg.found_state());
        }
        let first = Published::new(engine.shared_snapshot(), None);
        // PostgreSQL's state row names it (see `Store::snapshot`); a follower's views show the
        // leader's states
        if !follower {
            engine.end_group(Some(first.state()))?;
        }
        let views: Views = Arc::new(sync::PublishedViews::new(first));
        let derived_source = Arc::new(std::sync::OnceLock::new());
        let republish = Arc::new(AtomicBool::new(false));
        // PostgreSQL: each group's commit is durable, and reads see it once committed
        let durable_reads = config.durability == Durability::Sync && embedded;
        let syncer = match config.durability {
            Durability::Sync if embedded => {
                let journal = sync::Journal::open(&config.path).map_err(|source| StorageError::Io {
                    context: "opening the journal for its fsync".into(),
                    source,
                })?;
                #[cfg(test)]
                {
                    synced_journal = journal.synced.clone();
                }
                let syncer = sync::Syncer {
                    journal,
                    poisoned: poisoned.clone(),
                    fail_next_sync: fail_next_sync.clone(),
                    #[cfg(test)]
                    hold: hold_sync.clone(),
                    counters: counters.clone(),
                    durable: durable.clone(),
                    view: views.clone(),
                    rows: rows.clone(),
                };
                Some(syncer.spawn(MAX_GROUPS_UNSYNCED)?)
            }
            Durability::Sync | Durability::Buffered => None,
        };
        let fsync_thread = syncer.as_ref().map(|(_, thread)| thread.thread().id());
        let committer = Committer {
            reads: engine.writer_view(),
            engine: engine.clone(),
            rows: rows.clone(),
            syncer,
            poisoned: poisoned.clone(),
            reserve: reserve.clone(),
            full: Default::default(),
            max_group: config.max_group.max(1),
            limits: engine.limits(),
            next_seq,
            events,
            present: Default::default(),
            values: Default::default(),
            counters: counters.clone(),
            durable: durable.clone(),
            views: views.clone(),
            derived_source: derived_source.clone(),
            derived: None,
            republish: republish.clone(),
            follower,
            recovery: recovery.clone(),
            config: config.clone(),
            checked: std::cell::Cell::new(std::time::Instant::now()),
        };
        let (tx, rx) = mpsc::channel();
        let running = Arc::new(AtomicBool::new(true));
        let alive = Running(running.clone());
        let handle = std::thread::Builder::new()
            .name("mosaic-committer".into())
            .spawn(move || {
                // dropped however the thread ends, a panic included
                let _alive = alive;
                committer.run(rx)
            })
            .map_err(|e| StorageError::Engine(format!("cannot start the committer: {e}")))?;
        engine.set_committer(handle.thread().id());
        Ok(Store {
            inner: Arc::new(Inner {
                engine,
                rows,
                config,
                poisoned,
                recovery,
                reserve,
                running,
                fail_next_sync,
                #[cfg(test)]
                hold_sync,
                #[cfg(test)]
                synced_journal,
                queue: Mutex::new(Some(tx)),
                committer: Mutex::new(Some(handle)),
                fsync_thread,
                counters,
                durable,
                durable_reads,
                views,
                derived_source,
                republish,
            }),
        })
    }

    /// The settings the store was opened with.
    pub fn config(&self) -> &StorageConfig {
        &self.inner.config
    }

    /// The largest key, value and commit the backend takes (see `limits.rs`).
    pub fn limits(&self) -> Limits {
        self.inner.engine.limits()
    }

    /// True after a failed write to disk: writes are refused until restart.
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.is_set()
    }

    /// What this server is among those sharing the backend (see `cluster.rs`): always
    /// [`Role::Sole`] on fjall and outside cluster mode.
    pub fn role(&self) -> super::Role {
        self.inner.engine.postgres().map_or(super::Role::Sole, |pg| pg.role())
    }

    /// The epoch this server took as it took the lead of its PostgreSQL database (0: it
    /// follows, or the backend is fjall).
    pub fn epoch(&self) -> u64 {
        self.inner.engine.postgres().map_or(0, |pg| pg.epoch())
    }

    /// Whether no server leads the backend now (`false` on fjall).
    pub fn lead_is_free(&self) -> Result<bool> {
        self.inner.engine.postgres().map_or(Ok(false), |pg| pg.lock_free())
    }

    /// The backend's leadership row, read now (`None` on fjall).
    pub fn leadership(&self) -> Result<Option<super::Leadership>> {
        self.inner.engine.postgres().map(|pg| pg.leadership()).transpose()
    }

    /// The number of the state reads see now (on a leader: at least that of every write
    /// acknowledged so far; see [`ReadView::state`](super::ReadView::state)).
    pub fn published_state(&self) -> u64 {
        self.inner.views.load().state()
    }

    /// The number of each state as it is published (see [`Store::published_state`]): a waiter
    /// for a state sleeps until a publication reaches it.
    pub fn published_states(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.views.subscribe()
    }

    /// A follower's: the changefeed's last event, written by the leader, is `seq` (what
    /// [`Store::durable_seq`] says from now on, so that the changefeed's waiters wake).
    pub fn follow_changes(&self, seq: u64) {
        self.inner.durable.send_if_modified(|d| {
            let moved = seq > *d;
            if moved {
                *d = seq;
            }
            moved
        });
    }

    /// A cluster follower's: evicts from the document cache every document the leader's groups
    /// after state `applied` up to `upto` wrote, as its log names them (all of them where the log
    /// no longer covers those groups). Call before counting `upto` as applied.
    pub fn follow_documents(&self, applied: u64, upto: u64) -> Result<()> {
        let Some(pg) = self.inner.engine.postgres() else { return Ok(()) };
        if self.inner.rows.is_off() {
            return Ok(());
        }
        match pg.documents_since(applied, upto)? {
            Some(keys) => keys.iter().for_each(|key| self.inner.rows.changed_elsewhere(key)),
            None => self.inner.rows.clear(),
        }
        Ok(())
    }

    /// Stops taking writes for good: another server leads the backend now (seen by a read of
    /// its epoch). A group under way fails at its fence anyway; this stops the next ones.
    pub fn deposed(&self) {
        if !self.is_poisoned() {
            tracing::warn!("another server took the lead of the PostgreSQL database: this one takes no more writes");
            self.inner.poisoned.set(&StorageError::Deposed);
        }
    }

    /// Whether the store takes writes now, and why not (see [`Health`]). Reads no disk: the
    /// free space is as the committer last read it.
    pub fn health(&self) -> Health {
        if let Some(reason) = self.inner.poisoned.reason().filter(|_| self.is_poisoned()) {
            return Health::Failed { reason };
        }
        if !self.is_running() {
            return Health::Stopped;
        }
        self.inner.recovery.health().or_else(|| self.inner.reserve.health()).unwrap_or(Health::Ok)
    }

    /// True while the committer thread runs (false after [`Store::close`], or once a bug took
    /// it down): writes can commit only then.
    pub fn is_running(&self) -> bool {
        self.inner.running.load(Ordering::Acquire)
    }

    /// The value of one key as reads see it: durable in sync mode (see [`Store::snapshot`]),
    /// committed in buffered mode. Documents come from the document cache when it holds them
    /// (see `rows.rs`).
    pub fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        // a PostgreSQL store that stopped writing (deposed, say) may see others' writes, which
        // evict nothing here
        let stopped = self.is_poisoned() && self.inner.engine.commits_by_group();
        if space != Space::Entity || self.inner.rows.is_off() || stopped {
            return self.read_get(space, key);
        }
        // The ticket first, then the read: see `rows.rs` for why a fill is then never stale.
        let ticket = match self.inner.rows.get(key) {
            Ok(hit) => return Ok(Some(hit)),
            Err(ticket) => ticket,
        };
        let found = self.read_get(space, key)?;
        if let Some(value) = &found {
            self.inner.rows.fill(ticket, key, value);
        }
        Ok(found)
    }

    fn read_get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        if !self.limits().readable(key) {
            return Ok(None);
        }
        if self.inner.durable_reads
            && let Some(snapshot) = &self.inner.views.load().snapshot
        {
            snapshot.get(space, key)
        } else {
            self.inner.engine.get(space, key)
        }
    }

    /// The latest committed value of one key, durable or not: for work whose outcome the
    /// committer checks again (a patch prepared outside it), never for an answer.
    pub fn get_committed(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        if !self.limits().readable(key) {
            return Ok(None);
        }
        self.inner.engine.get(space, key)
    }

    /// Sets where the committer takes the derived state it publishes with every view from (once;
    /// later calls are ignored). `source` runs on the committer at the end of each group; a
    /// group whose derived state is another `Arc` than the last one published publishes a view
    /// even if it wrote no key, so a write that only sets the state up (a load at open) is seen
    /// by reads once it is answered.
    pub fn set_derived_source(&self, source: DerivedSource) {
        let _ = self.inner.derived_source.set(source);
        // a group that publishes it (not awaited: reads see none until then, as before)
        let _ = self.submit(|_| Ok::<(), StorageError>(()));
    }

    /// The last sequence number that is committed and durable (fsynced in sync mode, committed in
    /// buffered mode): change events up to it may be served, as no crash can take them back.
    /// The receiver is notified each time it moves; 0 before the first event.
    pub fn durable_seq(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.durable.subscribe()
    }

    /// The disk space a keyspace takes, in bytes (its table files; the journal and memtable not
    /// counted).
    pub fn disk_space(&self, space: Space) -> u64 {
        self.inner.engine.disk_space(space)
    }

    /// Rewrites a keyspace into fresh table files without the versions and tombstones nothing
    /// can read any more: its memtable is flushed first (so the tombstones it holds meet the
    /// versions they hide), then every table compacted into one sorted run, and reads are given
    /// a view of the result. Blocks until the compaction is done: call it from a blocking
    /// context. Writes go on meanwhile (a compaction never holds the
    /// committer).
    pub fn compact(&self, space: Space) -> Result<()> {
        self.inner.engine.compact(space)?;
        // The view reads see was taken before and keeps reading what the compaction replaced
        // (memtables, tables of garbage) until a write publishes another: publish one now.
        self.inner.republish.store(true, Ordering::Release);
        self.submit(|_| Ok::<(), StorageError>(()))?;
        Ok(())
    }

    /// Flushes a keyspace's memtable into a table file (tests: a version per table).
    #[cfg(test)]
    pub(crate) fn flush_for_test(&self, space: Space) {
        self.inner.engine.flush_memtables(&[space]).unwrap();
    }

    /// A cheap estimate of the number of keys in a keyspace.
    pub fn approximate_len(&self, space: Space) -> usize {
        self.inner.engine.approximate_len(space)
    }

    /// The store's figures now: the committer's counters, and per key family its disk space,
    /// approximate key count and table files, with the journal, cache, memtable and compaction
    /// figures fjall keeps. Reads in-memory state, but waits for the journal's lock (held while a
    /// batch commits, and during fjall's own fsync when it flushes a memtable): call it from a
    /// blocking context.
    pub fn stats(&self) -> StoreStats {
        self.inner.engine.stats(StoreStats::counted(&self.inner.counters))
    }

    /// Runs `f` on the committer and resolves once its staged keys are committed (and, in sync
    /// mode, fsynced) — or with `f`'s error, in which case nothing it staged is written.
    pub async fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StorageError> + Send + 'static,
    {
        let rx = self.submit(f)?;
        match rx.await {
            Ok(r) => r,
            Err(_) => {
                let probe = self.submit(|_| Ok::<(), StorageError>(()));
                let alive = match probe {
                    Ok(rx) => matches!(rx.await, Ok(Ok(()))),
                    Err(_) => false,
                };
                Err(self.lost(alive).into())
            }
        }
    }

    /// Why a write got no answer: its function panicked (the committer, which answers a probe,
    /// lives on), or the committer itself went down with it.
    fn lost(&self, committer_alive: bool) -> StorageError {
        if committer_alive {
            return StorageError::Aborted;
        }
        // The thread may still be unwinding: say it is down now rather than when it ends.
        self.inner.running.store(false, Ordering::Release);
        StorageError::CommitterDown
    }

    /// Queues `f` on the committer and returns at once, without waiting for its outcome: it
    /// commits before every write queued after it. For a write nobody waits on but that must come
    /// first (the format stamp at open); the receiver has its outcome, for a log.
    pub fn write_queued<F>(&self, f: F) -> Result<tokio::sync::oneshot::Receiver<Result<()>>>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<()> + Send + 'static,
    {
        self.submit(f)
    }

    /// [`Store::write`] for callers outside an async runtime (tools, benches, tests).
    pub fn write_blocking<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StorageError> + Send + 'static,
    {
        let rx = self.submit(f)?;
        match rx.blocking_recv() {
            Ok(r) => r,
            Err(_) => {
                let probe = self.submit(|_| Ok::<(), StorageError>(()));
                let alive = probe.is_ok_and(|rx| matches!(rx.blocking_recv(), Ok(Ok(()))));
                Err(self.lost(alive).into())
            }
        }
    }

    pub(super) fn submit<T, E, F>(&self, f: F) -> Result<tokio::sync::oneshot::Receiver<Result<T, E>>, E>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StorageError> + Send + 'static,
    {
        if self.is_poisoned() {
            return Err(StorageError::Poisoned.into());
        }
        let (reply, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |tx: &mut WriteTx<'_>| -> Completion {
            // a write queued before the store was poisoned (or its disk filled up) is answered
            // without running: its function may change caches (a vector graph) for a write that
            // is not committed
            if let Some(refusal) = tx.refusal() {
                return Box::new(move |_| {
                    let _ = reply.send(Err(refusal.into()));
                });
            }
            match f(tx) {
                Ok(value) => Box::new(move |durable: Result<()>| {
                    let _ = reply.send(durable.map(|()| value).map_err(E::from));
                }),
                Err(e) => {
                    tx.discard();
                    Box::new(move |_| {
                        let _ = reply.send(Err(e));
                    })
                }
            }
        });
        let queue = self.inner.queue.lock().map_err(|_| StorageError::Closed)?;
        // close() takes the queue; otherwise a send fails only once the committer has gone.
        let queue = queue.as_ref().ok_or(StorageError::Closed)?;
        if !self.is_running() {
            return Err(self.lost(false).into());
        }
        queue.send(job).map_err(|_| self.lost(false))?;
        Ok(rx)
    }

    /// Stops taking writes, waits for the queued ones, fsyncs everything, and flushes every
    /// memtable to table files, so the next open has (almost) no journal to replay: up to
    /// `max_journal_bytes` of journal otherwise, replayed entry by entry before the first request.
    /// The flush moves that cost to the shutdown (as RocksDB's default does); after a crash the
    /// journal is replayed as always.
    pub fn close(&self) -> Result<()> {
        if let Ok(mut q) = self.inner.queue.lock() {
            q.take();
        }
        if let Some(handle) = self.inner.committer.lock().ok().and_then(|mut h| h.take()) {
            let _ = handle.join();
        }
        if let Some(pg) = self.inner.engine.postgres() {
            // the lead goes at once, not when the connection's close reaches PostgreSQL: a
            // server reopening its database (or the next one) finds it free
            pg.release_lead();
        }
        if self.is_poisoned() {
            return Err(StorageError::Poisoned);
        }
        if self.inner.recovery.is_active() {
            // every acknowledged write is durable (sync) or with the OS (buffered) all the same:
            // the next open replays the journal
            return Err(self.inner.recovery.refusal());
        }
        self.inner.engine.persist(true)?;
        // Everything is durable now; the flush only saves the next open its replay. Sealing a
        // keyspace's active memtable queues its flush, and journal files every keyspace has
        // flushed past are deleted. (Those calls are fjall's own, outside its documented surface,
        // hence the exact version pin.) A flush that cannot finish (a failing disk) must not hang
        // the shutdown: it gets [`CLOSE_FLUSH_WAIT`], and a flush that failed none (see
        // `Embedded::flush_memtables`).
        let engine = self.inner.engine.clone();
        let (done, flushed) = mpsc::channel();
        let flusher = std::thread::Builder::new().name("mosaic-close-flush".into()).spawn(move || {
            let _ = done.send(engine.flush_memtables(&Space::ALL));
        });
        let outcome = flusher.map(|thread| {
            let outcome = flushed.recv_timeout(CLOSE_FLUSH_WAIT);
            if outcome.is_ok() {
                // it holds the database until it ends: joined, so a reopen right after the close
                // does not find the directory still locked
                let _ = thread.join();
            }
            outcome
        });
        match outcome {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "flushing the memtables at shutdown failed; the next open replays the journal")
            }
            Ok(Err(_)) => tracing::warn!(
                "flushing the memtables at shutdown is taking too long; the next open replays the journal"
            ),
            Err(e) => tracing::warn!(error = %e, "cannot start the shutdown flush; the next open replays the journal"),
        }
        Ok(())
    }

    /// Test hook: the id of the journal file the last fsync covered (sync mode).
    #[cfg(test)]
    pub(crate) fn synced_journal(&self) -> u64 {
        self.inner.synced_journal.load(Ordering::Relaxed)
    }

    /// Test hook: fsyncs wait until the guard is dropped, as on a slow disk.
    #[cfg(test)]
    pub(crate) fn hold_fsyncs(&self) -> std::sync::MutexGuard<'_, ()> {
        self.inner.hold_sync.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Test hook: the next group fsync fails, as a broken disk would make it. (Compiled always:
    /// the server's unit tests call it, and a dependency is never built with `cfg(test)`.)
    #[doc(hidden)]
    pub fn inject_sync_failure(&self) {
        self.inner.fail_next_sync.store(true, Ordering::Release);
    }

    /// Test hook: takes the committer thread down, as a bug outside a write function would (an
    /// on-commit hook that panics). Returns once the thread has ended. (Compiled always, as
    /// [`Store::inject_sync_failure`].)
    #[doc(hidden)]
    pub fn kill_committer(&self) {
        let _ = self.write_blocking(|tx| {
            tx.on_commit(|| panic!("injected committer failure"));
            Ok::<(), StorageError>(())
        });
        while self.inner.committer.lock().ok().and_then(|h| h.as_ref().map(|h| !h.is_finished())).unwrap_or(false) {
            std::thread::yield_now();
        }
    }
}

/// Clears the running flag when the committer thread ends, however it ends.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut q) = self.queue.lock() {
            q.take();
        }
        if let Some(handle) = self.committer.lock().ok().and_then(|mut h| h.take()) {
            // The last handle may be dropped by a write function on the committer itself, which
            // then ends on its own once the queue is gone; or by a write's answer dropped on the
            // fsync thread, which the committer joins as it ends.
            let here = std::thread::current().id();
            if handle.thread().id() != here && self.fsync_thread != Some(here) {
                let _ = handle.join();
            }
        }
    }
}
