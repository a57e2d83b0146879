//! The journal's fsync, off the committer (sync durability).
//!
//! Every batch the committer commits is already handed to the OS (fjall writes it out of its
//! buffer in the commit), so what a group still needs before it is acknowledged is one
//! `fdatasync` of the journal file that holds it. fjall's own `persist` holds the journal
//! writer's lock through that fsync, so no batch could commit meanwhile: the committer would idle
//! for the whole of every fsync. Instead the committer sends each group's answers here as a
//! [`Ticket`] and goes on with the next group; this thread fsyncs the journal file through a
//! descriptor of its own, without fjall's lock, and then answers every ticket that was queued
//! before the fsync began. One fsync thus covers every group committed while the last one ran.
//!
//! **Which file.** fjall keeps its journal as `{n}.jnl` files in the data directory and writes to
//! the highest `n`. When it seals a journal (a flush finds it past 64 MB), it first fsyncs it
//! whole (`fsync`, not `fdatasync`), and only then creates `{n+1}.jnl`. So once `{n+1}.jnl` exists, everything written
//! to `{n}.jnl` is durable; and a batch handed to the OS before this thread looks at the directory
//! is in the highest journal it finds or in an earlier one that is durable already (which this
//! thread fsyncs once more as it moves on). `fdatasync` suffices, as for fjall's own
//! `PersistMode::SyncData`: it also writes the metadata needed to read the data back (the size
//! of a file that grew). This reads fjall's file layout, hence the exact version pin in
//! `Cargo.toml`; `sealed_journals_are_followed` in the storage tests keeps it honest.

use super::read::Published;
use super::stats::CommitCounters;
use super::{Result, StorageError};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

/// Called once the write's fate is known: `Ok` only when it is committed and as durable as the
/// store promises. Here, with the thread that settles it, so that this file need not import the
/// committer (`write.rs`) that hands it over.
pub(super) type Completion = Box<dyn FnOnce(Result<()>) + Send>;

/// The state that reads see: the committer takes a snapshot after each group that changed
/// something, with the derived state as of it; in sync mode the fsync thread swaps it in once the
/// group is durable, in buffered mode the committer does at once.
pub(super) type Views = Arc<PublishedViews>;

/// The view reads see, and the number of its state for whoever waits for one (a request's
/// `X-Mosaic-Min-Seq`): told on each swap, so that a waiter sleeps until then instead of polling.
pub(super) struct PublishedViews {
    current: arc_swap::ArcSwap<Published>,
    state: tokio::sync::watch::Sender<u64>,
}

impl PublishedViews {
    pub(super) fn new(first: Arc<Published>) -> PublishedViews {
        let state = tokio::sync::watch::Sender::new(first.state());
        PublishedViews { current: arc_swap::ArcSwap::new(first), state }
    }

    pub(super) fn load(&self) -> arc_swap::Guard<Arc<Published>> {
        self.current.load()
    }

    pub(super) fn load_full(&self) -> Arc<Published> {
        self.current.load_full()
    }

    /// Shows `view` to reads, then wakes whoever waits for its state.
    pub(super) fn store(&self, view: Arc<Published>) {
        let state = view.state();
        self.current.store(view);
        self.state.send_if_modified(|s| std::mem::replace(s, state) != state);
    }

    /// The published states as they come.
    pub(super) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.state.subscribe()
    }
}

/// One committed group's answers, waiting for the fsync that makes it durable.
pub(super) struct Ticket {
    /// each write's completion and its own outcome (a write that failed is answered with its
    /// error, but only in turn, after the writes committed before it)
    pub(super) done: Vec<(Completion, Result<()>)>,
    /// whether any write of the group committed keys (else nothing needs an fsync)
    pub(super) wrote: bool,
    /// the last sequence number taken once the group committed
    pub(super) last_seq: u64,
    /// the state as of the group (when it wrote), shown to reads once it is durable
    pub(super) view: Option<Arc<Published>>,
    /// the hashes of the document keys the group committed, evicted from the document cache
    /// as the view is shown
    pub(super) documents: Vec<u64>,
}

/// The fsync thread's state.
pub(super) struct Syncer {
    pub(super) journal: Journal,
    pub(super) poisoned: Arc<super::health::Poison>,
    /// Test hook: fail the next fsync as a broken disk would.
    pub(super) fail_next_sync: Arc<AtomicBool>,
    /// Test hook: an fsync waits while this lock is held elsewhere, as a slow disk would.
    #[cfg(test)]
    pub(super) hold: Arc<std::sync::Mutex<()>>,
    pub(super) counters: Arc<CommitCounters>,
    pub(super) durable: Arc<tokio::sync::watch::Sender<u64>>,
    /// what reads see: replaced by each durable group's view
    pub(super) view: Views,
    /// the document cache, which holds only what reads see
    pub(super) rows: Arc<super::rows::Rows>,
}

impl Syncer {
    /// Starts the fsync thread; at most `unsynced` tickets wait for it (past that, the sender
    /// waits). It ends once the sender is dropped and every ticket is answered.
    pub(super) fn spawn(self, unsynced: usize) -> Result<(mpsc::SyncSender<Ticket>, std::thread::JoinHandle<()>)> {
        let (tickets, taken) = mpsc::sync_channel(unsynced);
        let thread = std::thread::Builder::new()
            .name("mosaic-fsync".into())
            .spawn(move || self.run(taken))
            .map_err(|e| StorageError::Engine(format!("cannot start the fsync thread: {e}")))?;
        Ok((tickets, thread))
    }

    /// Answers tickets in the order they come until the committer hangs up.
    fn run(mut self, tickets: mpsc::Receiver<Ticket>) {
        while let Ok(first) = tickets.recv() {
            let mut batch = vec![first];
            batch.extend(tickets.try_iter());
            self.settle(batch);
        }
    }

    /// One fsync for every ticket taken (if any of them wrote), then their answers, in order.
    fn settle(&mut self, mut batch: Vec<Ticket>) {
        let synced = if batch.iter().any(|t| t.wrote) && !self.poisoned.is_set() {
            let started = Instant::now();
            let synced = self.sync();
            self.counters.synced(started.elapsed());
            synced
        } else {
            Ok(())
        };
        // A failed fsync (or commit) poisons the store: from then on nothing is published, not
        // even for a later group that wrote nothing (see `Committer::commit_group`).
        let poisoned = self.poisoned.is_set();
        if synced.is_ok() && !poisoned {
            // Reads see the groups now, before any of their writes is answered: a client never
            // reads back less than it was told is written. The cache's entries of the groups'
            // documents go around the swap, as around a commit in buffered mode (`rows.rs`).
            let view = batch.iter_mut().rev().find_map(|t| t.view.take());
            let documents = || batch.iter().flat_map(|t| t.documents.iter().copied());
            documents().for_each(|hash| self.rows.committing(hash));
            if let Some(view) = view {
                self.view.store(view);
            }
            documents().for_each(|hash| self.rows.committed(hash));
            let last = batch.iter().map(|t| t.last_seq).max().unwrap_or(0);
            self.durable.send_if_modified(|d| {
                let moved = last > *d;
                *d = (*d).max(last);
                moved
            });
        }
        for ticket in batch {
            for (completion, result) in ticket.done {
                completion(match result {
                    Ok(()) if synced.is_err() || poisoned => Err(StorageError::Poisoned),
                    r => r,
                });
            }
        }
    }

    fn sync(&mut self) -> Result<()> {
        #[cfg(test)]
        let _held = self.hold.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.fail_next_sync.swap(false, Ordering::AcqRel) {
            return Err(self.poison(StorageError::Engine("injected fsync failure".into())));
        }
        self.journal
            .sync()
            .map_err(|source| self.poison(StorageError::Io { context: "fsync of the journal".into(), source }))
    }

    fn poison(&self, e: StorageError) -> StorageError {
        tracing::error!(error = %e, "fsync of the journal failed: the store refuses writes from now on");
        self.poisoned.set(&e);
        e
    }
}

/// The journal file fjall writes to now, open for fsync only.
pub(super) struct Journal {
    dir: PathBuf,
    id: u64,
    file: File,
    /// the id of the journal last synced, for the tests to compare with the directory
    pub(super) synced: Arc<AtomicU64>,
}

impl Journal {
    /// The highest-numbered journal in `dir`.
    pub(super) fn open(dir: &Path) -> std::io::Result<Journal> {
        // Only sealed journals are deleted (once flushed), and sealing takes 64 MB of journal
        // (fjall's worker_pool.rs), so the newest one found is still there: a second look is
        // for the impossible, not the rare.
        let mut tries = 0;
        loop {
            let id = newest(dir)?;
            match File::open(journal_path(dir, id)) {
                Ok(file) => {
                    return Ok(Journal { dir: dir.to_path_buf(), id, file, synced: Arc::new(AtomicU64::new(id)) });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// [`Journal::open`], waiting while descriptors or memory are short (EMFILE and the like:
    /// `engine_log::passing_code`): the groups waiting for this fsync wait longer, and the
    /// committer behind them, but nothing fails for a cause that passes.
    fn open_waiting(dir: &Path) -> std::io::Result<Journal> {
        let mut delay = std::time::Duration::from_millis(10);
        loop {
            match Journal::open(dir) {
                Err(e) if super::engine_log::passing_io(&e) => {
                    tracing::warn!(error = %e, "cannot open the new journal file for its fsync: trying again");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(std::time::Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    /// Makes every byte handed to the OS for the journal before this call durable.
    pub(super) fn sync(&mut self) -> std::io::Result<()> {
        // A newer journal means this one was sealed, and fsynced whole, before it was created.
        // It is fsynced here once more all the same: should fjall have failed to set the new
        // file up after creating it, its writes would still have gone to this one.
        if journal_path(&self.dir, self.id + 1).exists() {
            self.file.sync_data()?;
            let newer = Journal::open_waiting(&self.dir)?;
            (self.id, self.file) = (newer.id, newer.file);
        }
        self.file.sync_data()?;
        self.synced.store(self.id, Ordering::Relaxed);
        Ok(())
    }
}

fn journal_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id}.jnl"))
}

/// The highest `n` of the `{n}.jnl` files in `dir`.
pub(super) fn newest(dir: &Path) -> std::io::Result<u64> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let id = name.to_str().and_then(|n| n.strip_suffix(".jnl")).and_then(|n| n.parse::<u64>().ok());
        newest = newest.max(id);
    }
    newest.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no journal file in the data directory"))
}
