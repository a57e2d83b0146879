//! Recovery from a storage engine failure that passes: fjall's background work stopped for want
//! of a resource (descriptors, memory), and the store opens fjall again in place once it is back.
//!
//! **Why a reopen.** A fjall worker whose flush, journal rotation or compaction fails ends, and
//! poisons the whole database: every later batch is refused (`Error::Poisoned`) until the
//! database is opened again; fjall never retries (3.1.13 src/worker_pool.rs). Out of descriptors
//! (EMFILE: a flood of connections, a low `ulimit -n`) is such a failure, and it passes.
//!
//! **Why here, in the storage layer, and not by reopening the server** (as cluster mode does):
//! the keys after the reopen are exactly the keys before it, so nothing above the store needs to
//! know. Every batch fjall committed was handed to the OS as it committed (`Buffer` mode), so it
//! is in the journal's pages, and the reopen replays it; a batch fjall refused wrote nothing. So
//! the state the new database opens with is the state last committed, no write lost and none
//! half-done — the in-memory state the layers above keep in step with the commits (the graph's
//! adjacency, the vector graphs, the catalog, the committer's own caches and sequence numbers)
//! stays exact. (The write the poisoned engine refused is answered as refused; the service
//! drops what its function changed in memory, as for any write that fails.) Reads go on meanwhile:
//! from the old database, until the moment it is closed. A server-level reopen would instead
//! close every database of the server and serve nothing while the cause lasts.
//!
//! **What stops the store for good** — as before, writes refused until a restart
//! (`Health::Failed`): a failed journal write or fsync of our own (the kernel may have dropped
//! what it was to write: reopening would show data that is not on disk), and any engine failure
//! whose logged cause is not a passing one, or that logged none (`engine_log.rs` reads it:
//! fjall says only `Poisoned`). A fjall worker's own failed fsync is such a cause (EIO).
//!
//! **The steps** (all on the committer, so no write commits meanwhile; writes that come are
//! refused with [`StorageError::Recovering`] while the cause lasts, and wait in the queue during
//! the reopen itself):
//! 1. the committer notices: a batch refused with `Poisoned`, or its once-a-second check;
//! 2. it waits (`health::RETRY_FIRST`, doubling up to `RETRY_MAX`), then
//!    checks that descriptors can be had again ([`probe`]);
//! 3. the fsync thread answers every group handed to it (sync mode), so no view of the old
//!    database is published after this;
//! 4. the old database is taken out of the engine and reads are shown a view that answers
//!    `Recovering`; once the last snapshot or scan of it has ended (at most [`READERS_WAIT`],
//!    else it is put back and the attempt fails), it is closed — fjall's workers stop and its
//!    journal is fsynced;
//! 5. fjall opens the directory again, replaying the journal; in sync mode the result is
//!    fsynced before anything reads it (as at every open), then published, and writes resume.
//!
//! The fsync thread keeps its descriptor of the journal: fjall reopens the same file (appending
//! to it), and a newer one is followed as always (`sync.rs`).

use super::embedded::{Embedded, Open};
use super::engine::View;
use super::engine_log::{self, Cause};
use super::read::Published;
use super::sync::{Completion, Ticket};
use super::write::Committer;
use super::{Durability, Result, StorageError};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often the committer checks that fjall is sound (between groups, and when idle).
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How long a reopen waits for the reads of the old database to end.
const READERS_WAIT: Duration = Duration::from_secs(5);

/// How long a reopen waits for the old database's lock to go (its last holders ending).
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Descriptors [`probe`] takes at once.
const PROBE_FILES: usize = 16;

impl Committer {
    /// fjall refused a batch as poisoned: begins a recovery if its cause passes, else poisons the
    /// store. Returns what the write is answered.
    pub(super) fn engine_stopped(&self) -> StorageError {
        if self.recovery.is_active() {
            return self.recovery.refusal();
        }
        match engine_log::cause_since(self.recovery.mark.load(Ordering::Acquire)) {
            Cause::Passing(reason) => {
                tracing::error!(
                    cause = %reason,
                    "the storage engine stopped its background work for a cause that passes: writes are refused, \
                     and the store opens it again once the cause is gone"
                );
                self.recovery.begin(reason);
                self.recovery.refusal()
            }
            Cause::Lasting(reason) => {
                self.poison(StorageError::Engine(format!("the storage engine stopped its background work: {reason}")));
                self.poisoned.refusal()
            }
        }
    }

    /// How long the committer may wait for a write before [`Committer::tend`] is due.
    pub(super) fn idle_wait(&self) -> Duration {
        match self.recovery.next_attempt() {
            Some(at) => at.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)),
            None => CHECK_EVERY,
        }
    }

    /// Between groups: checks (at most every [`CHECK_EVERY`]) that fjall is sound, so that a
    /// failure shows in `/ready` even with no write coming; tries to reopen when it is due.
    pub(super) fn tend(&mut self) {
        let Some(embedded) = self.engine.embedded().cloned() else { return };
        if self.poisoned.is_set() {
            return;
        }
        if self.recovery.is_active() {
            if self.recovery.next_attempt().is_some_and(|at| at <= Instant::now()) {
                self.attempt(&embedded);
            }
            return;
        }
        if self.checked.get().elapsed() < CHECK_EVERY {
            return;
        }
        self.checked.set(Instant::now());
        // read before the check; the window of a failure found later starts one check behind
        // (see `Recovery::mark`)
        let mark = engine_log::mark();
        match embedded.stopped() {
            Ok(false) => {
                let previous = self.recovery.next_mark.swap(mark, Ordering::AcqRel);
                self.recovery.mark.store(previous, Ordering::Release);
            }
            Ok(true) => {
                self.engine_stopped();
            }
            Err(e) => {
                self.poison(e);
            }
        }
    }

    /// One attempt to reopen (see the module's comment for the steps).
    fn attempt(&mut self, embedded: &Embedded) {
        let started = Instant::now();
        if let Err(e) = probe(&self.config.path) {
            return self.not_yet(format!("descriptors are still short: {e}"));
        }
        self.settle_fsyncs();
        let derived = self.views.load().derived.clone();
        let old = embedded.retire();
        if let Some(old) = old {
            self.views.store(Published::new(Some(View::Reopening), derived.clone()));
            if !wait_for_readers(&old) {
                // put back: reads go on from it, and the next attempt waits again
                embedded.install(old);
                self.publish(derived);
                return self.not_yet("reads of the store's data went on too long to close it".into());
            }
            // closes it: fjall stops its workers and fsyncs its journal
            drop(old);
        }
        // what closing it logged counts too: a failed fsync of its journal stops the store
        if let Cause::Lasting(reason) = engine_log::cause_since(self.recovery.mark.load(Ordering::Acquire)) {
            return self.give_up(format!("the storage engine failed while it was closed: {reason}"), derived);
        }
        let mark = engine_log::mark();
        match self.open_again() {
            Ok(open) => {
                embedded.install(Arc::new(open));
                self.publish(derived);
                self.recovery.mark.store(mark, Ordering::Release);
                self.recovery.next_mark.store(mark, Ordering::Release);
                self.recovery.end();
                self.checked.set(Instant::now());
                tracing::warn!(took = ?started.elapsed(), "the store opened its data again: writes are taken again");
            }
            Err(e) if passes(&e) => {
                // no database now: reads answer `Recovering` too until the next attempt
                self.not_yet(format!("opening the store again failed: {e}"));
            }
            Err(e) => self.give_up(format!("opening the store again failed: {e}"), derived),
        }
    }

    /// The old database is closed and no new one can be opened: the store stops for good, and
    /// reads answer why.
    fn give_up(&self, reason: String, derived: Option<super::Derived>) {
        self.views.store(Published::new(Some(View::Broken(reason.clone())), derived));
        self.poison(StorageError::Engine(reason));
    }

    fn not_yet(&self, reason: String) {
        tracing::warn!(%reason, "the store is still recovering; it tries again later");
        self.recovery.failed(reason);
    }

    /// Opens the data directory again (waiting for the old database's lock to go), and in sync
    /// mode fsyncs what the journal's replay recovered before anything reads it.
    fn open_again(&self) -> Result<Open> {
        let deadline = Instant::now() + LOCK_WAIT;
        let open = loop {
            match Open::new(&self.config) {
                Err(e) if locked(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => break other?,
            }
        };
        if self.config.durability == Durability::Sync {
            open.persist(true)?;
        }
        super::dirs::sync_after_open(&self.config.path, &[])
            .map_err(|source| StorageError::Io { context: "fsync of the data directory".into(), source })?;
        Ok(open)
    }

    /// Sync mode: returns once the fsync thread has answered every group handed to it, so that
    /// no view of the old database is published after this.
    fn settle_fsyncs(&self) {
        let Some((tickets, _)) = &self.syncer else { return };
        let (done, settled) = mpsc::channel();
        let completion: Completion = Box::new(move |_| {
            let _ = done.send(());
        });
        let barrier = Ticket {
            done: vec![(completion, Ok(()))],
            wrote: false,
            last_seq: self.next_seq - 1,
            view: None,
            documents: Vec::new(),
        };
        if tickets.send(barrier).is_ok() {
            let _ = settled.recv();
        }
    }

    /// Shows reads the engine's state now, with the derived state last published.
    fn publish(&self, derived: Option<super::Derived>) {
        self.views.store(Published::new(self.engine.shared_snapshot(), derived));
    }
}

/// Whether an open failed for a cause that passes: out of descriptors or memory, or the old
/// database's lock still held.
fn passes(e: &StorageError) -> bool {
    match e {
        StorageError::Io { source, .. } => engine_log::passing_io(source),
        e => locked(e),
    }
}

/// Whether fjall refused to open the directory because a database of it is still open (its
/// lock is held: a snapshot or worker of the old one not yet gone).
fn locked(e: &StorageError) -> bool {
    // fjall 3.1.13 has no other word for it than its `Error::Locked`, displayed so
    matches!(e, StorageError::Engine(m) if m == "FjallError: Locked")
}

/// Waits until `old` is held by nothing but the caller (every snapshot and scan of it ended), at
/// most [`READERS_WAIT`].
fn wait_for_readers(old: &Arc<Open>) -> bool {
    let deadline = Instant::now() + READERS_WAIT;
    while Arc::strong_count(old) > 1 {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Whether descriptors can be had again: opens the data directory [`PROBE_FILES`] times at once.
/// (Memory has no such probe: a reopen that runs short fails and is tried again.)
fn probe(path: &std::path::Path) -> std::io::Result<()> {
    let held: Vec<std::fs::File> = (0..PROBE_FILES).map(|_| std::fs::File::open(path)).collect::<Result<_, _>>()?;
    drop(held);
    Ok(())
}
