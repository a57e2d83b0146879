//! The write path: one committer thread takes queued writes in groups.
//!
//! Each write is a function run on the committer against a [`WriteTx`]: it reads what it needs
//! (the old document, unique-index owners, …), stages its puts and deletes, and returns. The
//! committer commits each write's staged keys as one atomic fjall batch before running the next,
//! so a write always reads the state every earlier write left — two updates of one document can
//! never interleave — and sequence numbers are handed out in commit order, gap-free. In sync
//! mode the group's answers then go to the fsync thread (`sync.rs`), and the committer goes on
//! with the next group while the journal is fsynced: one `fdatasync` covers every group committed
//! before it began, and no write is acknowledged before it.

use super::engine::{Engine, View};
use super::limits::{Limit, Limits, TooLarge};
use super::staged::Staged;
use super::sync::{Completion, Ticket};
use super::{EventCodec, KeyRange, Result, Slice, Space, StorageError};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

/// What a write function gets: reads of the latest committed state (plus its own staged keys),
/// and a place to stage puts and deletes that commit together or not at all.
pub struct WriteTx<'c> {
    committer: &'c Committer,
    staged: Staged,
    seqs_taken: u64,
    /// hooks to run once the write commits, each marked whether it must wait for durability
    on_commit: Vec<(bool, Box<dyn FnOnce() + Send>)>,
    /// keys staged with [`WriteTx::put_new`]
    fresh: Vec<(Space, Vec<u8>, Vec<u8>)>,
    /// change event bodies from [`WriteTx::append_event`], numbered when the write commits
    events: Vec<Vec<u8>>,
    /// While [`WriteTx::attempt`] runs: each staged key's previous staged state, to undo.
    undo: Option<Vec<Undo>>,
    /// The first key or value staged past the backend's limits (it is not staged): the write
    /// (or the [`WriteTx::attempt`] that staged it) fails with it, nothing of it written.
    over: Option<TooLarge>,
}

/// A staged key and what it was staged as before (None: not staged).
type Undo = ((Space, Vec<u8>), Option<Option<Vec<u8>>>);

impl<'c> WriteTx<'c> {
    fn new(committer: &'c Committer) -> WriteTx<'c> {
        WriteTx {
            committer,
            staged: Staged::default(),
            seqs_taken: 0,
            on_commit: Vec::new(),
            fresh: Vec::new(),
            events: Vec::new(),
            undo: None,
            over: None,
        }
    }

    /// Stages `key = value`.
    pub fn put(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        self.stage(space, key, Some(value));
    }

    /// Stages `key = value` for a key that nothing else in this write stages or reads back (a
    /// key new by construction, e.g. numbered by the write): cheaper than [`WriteTx::put`] for the
    /// tens of thousands of keys one bulk write may make, as it is not kept in the write's
    /// ordered map. [`WriteTx::get`] does not see it.
    pub fn put_new(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        if self.within_limits(space, &key, Some(&value)) {
            self.fresh.push((space, key, value));
        }
    }

    /// True when the backend takes `key` (and `value`); else the write is marked to fail (see
    /// [`WriteTx::over`]).
    #[inline]
    fn within_limits(&mut self, space: Space, key: &[u8], value: Option<&[u8]>) -> bool {
        match self.committer.limits.check(space, key, value) {
            None => true,
            Some(too) => {
                self.over.get_or_insert(too);
                false
            }
        }
    }

    /// Fails if the write has staged a key or value past the backend's limits (it will be refused
    /// when it returns): for a step that must not run for a refused write, such as one that
    /// changes in-memory state before the commit.
    pub fn check_limits(&self) -> Result<()> {
        match self.over {
            Some(too) => Err(StorageError::TooLarge(too)),
            None => Ok(()),
        }
    }

    /// The limits of the backend this write goes to: a write may check a key it builds before
    /// staging it, to say more precisely what is too long.
    pub fn limits(&self) -> Limits {
        self.committer.limits
    }

    /// Appends a change event to the write: `body` is the members of a JSON object (no braces).
    /// When the write function returns, the committer numbers the write's events with the next
    /// sequence numbers (after any [`WriteTx::next_seq`] the write took) and stages each in
    /// [`Space::Changefeed`], as the store's [`EventCodec`] makes its key and value, in the same
    /// atomic batch as the change; a failing [`WriteTx::attempt`] drops the events it appended.
    pub fn append_event(&mut self, body: Vec<u8>) {
        self.events.push(body);
    }

    /// Stages the removal of `key`.
    pub fn delete(&mut self, space: Space, key: Vec<u8>) {
        self.stage(space, key, None);
    }

    fn stage(&mut self, space: Space, key: Vec<u8>, value: Option<Vec<u8>>) {
        if value.is_none() && !self.committer.limits.readable(&key) {
            // no stored key is that long: nothing to delete (keys computed from an old version
            // stored before an index existed may be; refusing would make the document undeletable)
            return;
        }
        if !self.within_limits(space, &key, value.as_deref()) {
            return;
        }
        match &mut self.undo {
            None => {
                self.staged.insert(space, key, value);
            }
            Some(undo) => {
                let previous = self.staged.insert(space, key.clone(), value);
                undo.push(((space, key), previous));
            }
        }
    }

    /// Runs `f`; if it fails, everything it staged (keys, sequence numbers, commit hooks) is
    /// undone and the rest of the write stands. Lets one write apply many independent items
    /// (import lines) where a failing item must not take the others down. A key or value `f`
    /// stages past the backend's limits fails it too (with [`StorageError::TooLarge`]).
    pub fn attempt<T, E: From<StorageError>>(
        &mut self,
        f: impl FnOnce(&mut Self) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let outer = self.undo.take();
        let outer_over = self.over.take();
        self.undo = Some(Vec::new());
        let (seqs, hooks, fresh, events) = (self.seqs_taken, self.on_commit.len(), self.fresh.len(), self.events.len());
        let result = match (f(self), std::mem::replace(&mut self.over, outer_over)) {
            (Ok(_), Some(too)) => Err(StorageError::TooLarge(too).into()),
            (result, _) => result,
        };
        let undo = std::mem::replace(&mut self.undo, outer).unwrap_or_default();
        if result.is_err() {
            for ((space, key), previous) in undo.into_iter().rev() {
                match previous {
                    Some(value) => {
                        self.staged.insert(space, key, value);
                    }
                    None => self.staged.remove(space, &key),
                }
            }
            self.seqs_taken = seqs;
            self.on_commit.truncate(hooks);
            self.fresh.truncate(fresh);
            self.events.truncate(events);
        } else if let Some(outer) = &mut self.undo {
            // A nested attempt that succeeded stays undoable by the enclosing one.
            outer.extend(undo);
        }
        result
    }

    /// The value of `key`: this write's own staged value if it staged one, else the committed one.
    pub fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(staged) = self.staged.get(space, key) {
            return Ok(staged.clone());
        }
        if !self.committer.limits.readable(key) {
            return Ok(None);
        }
        Ok(self.committer.reads.get(space, key)?.map(|v| v.to_vec()))
    }

    /// Like [`WriteTx::get`], remembering the committed value on the committer
    /// ([`Committer::values`]) so that the next write reading the key finds it without a lookup.
    /// For small keys that many writes read and rewrite (a view's group states and value
    /// counts): a lookup of such a hot key walks the memtable's many versions of it.
    pub fn get_cached(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(staged) = self.staged.get(space, key) {
            return Ok(staged.clone());
        }
        if !self.committer.limits.readable(key) {
            return Ok(None);
        }
        let k = (space, key.to_vec());
        if let Some(known) = self.committer.values.borrow().get(&k) {
            return Ok(known.clone());
        }
        let found = self.committer.reads.get(space, key)?.map(|v| v.to_vec());
        self.committer.values.borrow_mut().insert(k, found.clone());
        Ok(found)
    }

    /// Whether `key` exists as this write sees it (its own staged put or delete, else the committed
    /// state), without reading the value.
    pub fn contains(&self, space: Space, key: &[u8]) -> Result<bool> {
        if let Some(staged) = self.staged.get(space, key) {
            return Ok(staged.is_some());
        }
        if !self.committer.limits.readable(key) {
            return Ok(false);
        }
        let k = (space, key.to_vec());
        if let Some(&known) = self.committer.present.borrow().get(&k) {
            return Ok(known);
        }
        let found = self.committer.reads.contains(space, key)?;
        let mut present = self.committer.present.borrow_mut();
        if present.len() >= MAX_PRESENT {
            present.clear();
        }
        present.insert(k, found);
        Ok(found)
    }

    /// Whether `key` exists as this write sees it, like [`WriteTx::contains`] but without
    /// remembering the answer: for keys unlikely to be asked about again (time-series points),
    /// which would only crowd out the ones that are.
    pub fn probe(&self, space: Space, key: &[u8]) -> Result<bool> {
        if let Some(staged) = self.staged.get(space, key) {
            return Ok(staged.is_some());
        }
        if !self.committer.limits.readable(key) {
            return Ok(false);
        }
        self.committer.reads.contains(space, key)
    }

    /// Committed key-value pairs in `range`, in key order (not this write's staged keys).
    pub fn scan(&self, space: Space, range: KeyRange) -> impl Iterator<Item = Result<(Slice, Slice)>> + use<> {
        self.committer.limits.clamp(range).map(|range| self.committer.reads.scan(space, range)).into_iter().flatten()
    }

    /// The key-value pairs under `prefix` as this write sees them: the committed ones with this
    /// write's own staged puts and deletes laid over them, in key order; at most `limit`.
    pub fn scan_current(&self, space: Space, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut staged = self.staged.under(space, prefix).into_iter().peekable();
        let mut committed = self.scan(space, KeyRange::Prefix(prefix.to_vec()));
        let mut head: Option<(Slice, Slice)> = committed.next().transpose()?;
        let mut out = Vec::new();
        while out.len() < limit {
            let take_staged = match (&head, staged.peek()) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((c, _)), Some((s, _))) => s.as_slice() <= &c[..],
            };
            if take_staged {
                let Some((k, v)) = staged.next() else { break };
                if head.as_ref().is_some_and(|(c, _)| k.as_slice() == &c[..]) {
                    head = committed.next().transpose()?;
                }
                if let Some(v) = v {
                    out.push((k.clone(), v.clone()));
                }
            } else if let Some((k, v)) = head.take() {
                out.push((k.to_vec(), v.to_vec()));
                head = committed.next().transpose()?;
            }
        }
        Ok(out)
    }

    /// The next commit sequence number: gap-free and strictly increasing in commit order. A write
    /// that fails gives its numbers back.
    pub fn next_seq(&mut self) -> u64 {
        self.seqs_taken += 1;
        self.committer.next_seq + self.seqs_taken - 1
    }

    /// Runs `hook` on the committer right after this write commits (never if it fails): the place
    /// to update in-memory caches, so they only ever show committed state.
    pub fn on_commit(&mut self, hook: impl FnOnce() + Send + 'static) {
        self.on_commit.push((false, Box::new(hook)));
    }

    /// Like [`WriteTx::on_commit`], for hooks whose change answers show (definitions in the
    /// catalog): in sync mode the committer first fsyncs the journal, so what the hook shows is
    /// durable — no client sees a table that a power cut takes back. Costs an fsync on the
    /// committer: for rare writes only.
    pub fn on_durable(&mut self, hook: impl FnOnce() + Send + 'static) {
        self.on_commit.push((true, Box::new(hook)));
    }

    /// Why the store refuses this write before it runs, if it does: poisoned (nothing it staged
    /// would be committed), or its disk nearly full.
    pub(super) fn refusal(&self) -> Option<StorageError> {
        if self.committer.follower {
            Some(StorageError::NotLeader)
        } else if self.committer.poisoned.is_set() {
            Some(self.committer.poisoned.refusal())
        } else if self.committer.recovery.is_active() {
            Some(self.committer.recovery.refusal())
        } else if self.committer.full.get() {
            Some(self.committer.reserve.refusal())
        } else {
            None
        }
    }

    /// The committed key-value pair with the greatest key in `lower..=upper`, if any (not this
    /// write's staged keys).
    pub fn last_in(&self, space: Space, lower: &[u8], upper: &[u8]) -> Result<Option<(Slice, Slice)>> {
        let range =
            KeyRange::Between(std::ops::Bound::Included(lower.to_vec()), std::ops::Bound::Included(upper.to_vec()));
        let Some(range) = self.committer.limits.clamp(range) else { return Ok(None) };
        self.committer.reads.scan(space, range).next_back().transpose()
    }

    /// How many keys are staged.
    pub fn staged_len(&self) -> usize {
        self.staged.len()
    }

    pub(super) fn discard(&mut self) {
        self.over = None;
        self.staged.clear();
        self.seqs_taken = 0;
        self.on_commit.clear();
        self.fresh.clear();
        self.events.clear();
    }

    /// Numbers the write's events and stages them (see [`WriteTx::append_event`]).
    fn stage_events(&mut self) {
        let events = std::mem::take(&mut self.events);
        if events.is_empty() {
            return;
        }
        let (txn, count) = (self.committer.next_seq + self.seqs_taken, events.len() as u64);
        self.seqs_taken += count;
        self.fresh.reserve(events.len());
        for (i, body) in events.into_iter().enumerate() {
            let seq = txn + i as u64;
            let codec = self.committer.events;
            self.put_new(Space::Changefeed, codec.key(seq), codec.value(seq, txn, count, &body));
        }
    }

    /// Why the write cannot commit as staged, if it cannot: a key or value past the backend's
    /// limits, or more bytes than it commits at once.
    fn refused_for_size(&mut self) -> Option<TooLarge> {
        if let Some(too) = self.over.take() {
            return Some(too);
        }
        let max = self.committer.limits.max_commit?;
        let fresh = self.fresh.iter().map(|(_, k, v)| k.len() + v.len());
        let len = self.staged.bytes() + fresh.sum::<usize>();
        let space = self.fresh.first().map_or(Space::Entity, |f| f.0);
        (len > max).then_some(TooLarge { what: Limit::Commit, space, len, max })
    }
}

/// A queued write.
pub(super) type Job = Box<dyn FnOnce(&mut WriteTx<'_>) -> Completion + Send>;

/// The committer's state; lives on its own thread.
pub(super) struct Committer {
    /// the backend
    pub(super) engine: Engine,
    /// what write functions read through (see [`Engine::writer_view`])
    pub(super) reads: View,
    /// the document cache of point reads: every entity key committed is evicted from it
    pub(super) rows: Arc<super::rows::Rows>,
    /// sync durability: where each group's answers wait for the fsync that makes it durable,
    /// and the thread that does it (joined when the committer ends); buffered: none
    pub(super) syncer: Option<(mpsc::SyncSender<Ticket>, std::thread::JoinHandle<()>)>,
    pub(super) poisoned: Arc<super::health::Poison>,
    /// cluster mode, a follower: every write is refused ([`StorageError::NotLeader`])
    pub(super) follower: bool,
    /// the free disk space kept: while under it, writes are refused before they run
    pub(super) reserve: Arc<super::health::DiskReserve>,
    /// whether the disk was nearly full as the group began (its writes are refused)
    pub(super) full: std::cell::Cell<bool>,
    pub(super) max_group: usize,
    /// what the backend takes (checked as keys are staged)
    pub(super) limits: Limits,
    pub(super) next_seq: u64,
    /// the key and value bytes of the events it numbers
    pub(super) events: &'static dyn EventCodec,
    /// Whether keys [`WriteTx::contains`] looked up exist, as committed: only this thread writes,
    /// and each commit updates the keys it changes here, so the answers stay exact across writes
    /// (an edge naming a hub vertex reads it once, not once per edge). Cleared past
    /// [`MAX_PRESENT`] keys and after a failed commit.
    pub(super) present: std::cell::RefCell<foldhash::HashMap<(Space, Vec<u8>), bool>>,
    /// The committed values of keys [`WriteTx::get_cached`] read: as exact as `present` (each
    /// commit updates the keys it changes here), cleared past its bound (`values.rs`) and after a
    /// failed commit.
    pub(super) values: std::cell::RefCell<super::values::ValueCache>,
    /// groups and writes, for [`super::Store::stats`]
    pub(super) counters: Arc<super::stats::CommitCounters>,
    /// the last sequence number that is committed and as durable as the store promises:
    /// published after each group in buffered mode (by the fsync thread in sync mode), before
    /// any of its writes is answered
    pub(super) durable: Arc<tokio::sync::watch::Sender<u64>>,
    /// what reads see (swapped here in buffered mode, by the fsync thread in sync mode)
    pub(super) views: super::sync::Views,
    /// where the derived state published with each view comes from
    pub(super) derived_source: Arc<std::sync::OnceLock<super::read::DerivedSource>>,
    /// the derived state last published
    pub(super) derived: Option<super::read::Derived>,
    /// set by [`super::Store::compact`]: the next group publishes a view even if it wrote
    /// nothing (a view taken before a compaction keeps reading the tables it replaced)
    pub(super) republish: Arc<AtomicBool>,
    /// the recovery from an engine failure that passes (`recover.rs`)
    pub(super) recovery: Arc<super::health::Recovery>,
    /// how the store was opened: how the engine is opened again
    pub(super) config: super::StorageConfig,
    /// when the committer last checked that the engine is sound (see `recover.rs`)
    pub(super) checked: std::cell::Cell<std::time::Instant>,
}

/// Most keys [`Committer::present`] remembers.
const MAX_PRESENT: usize = 1 << 20;

impl Committer {
    pub(super) fn run(mut self, queue: mpsc::Receiver<Job>) {
        loop {
            // between groups, and when idle at least once a second: is the engine sound, is a
            // reopen due (`recover.rs`)
            self.tend();
            let first = match queue.recv_timeout(self.idle_wait()) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            let mut group = vec![first];
            while group.len() < self.max_group {
                match queue.try_recv() {
                    Ok(job) => group.push(job),
                    Err(_) => break,
                }
            }
            self.commit_group(group);
        }
        // the fsync thread answers what it holds, then ends
        if let Some((tickets, thread)) = self.syncer.take() {
            drop(tickets);
            let _ = thread.join();
        }
    }

    fn commit_group(&mut self, group: Vec<Job>) {
        let mut done: Vec<(Completion, Result<()>)> = Vec::with_capacity(group.len());
        // Sync mode: the documents the group commits, evicted from the document cache by the
        // fsync thread when it shows them to reads (the cache holds what reads see).
        let mut documents = Vec::new();
        let mut committed_any = false;
        let mut writes = 0;
        self.full.set(self.reserve.is_full());
        self.engine.start_group();
        for job in group {
            let refused = WriteTx::new(self).refusal();
            if let Some(refusal) = refused {
                // Run nothing: the job answers its refusal without running its function.
                let mut tx = WriteTx::new(self);
                let completion = std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut tx)));
                if let Ok(c) = completion {
                    done.push((c, Err(refusal)));
                }
                continue;
            }
            let mut tx = WriteTx::new(self);
            // A panicking write function must not take the committer down; its caller sees Aborted
            // because the completion (and with it the reply channel) is dropped.
            let Ok(completion) = std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut tx))) else {
                continue;
            };
            tx.stage_events();
            if let Some(too) = tx.refused_for_size() {
                // nothing of it is written; the store is unharmed
                tx.discard();
                done.push((completion, Err(StorageError::TooLarge(too))));
                continue;
            }
            let (staged, seqs, hooks) =
                (std::mem::take(&mut tx.staged), tx.seqs_taken, std::mem::take(&mut tx.on_commit));
            let fresh = std::mem::take(&mut tx.fresh);
            // a write that staged nothing needs no fsync
            let wrote = !staged.is_empty() || !fresh.is_empty();
            let mut result = self.commit_one(staged, fresh, &mut documents);
            let durable_hooks = hooks.iter().any(|(durable, _)| *durable);
            if result.is_ok() && durable_hooks && self.engine.commits_by_group() {
                // PostgreSQL: the hooks wait for the commit (see `WriteTx::on_durable`): the
                // group so far ends here — committed, published and answered as a group of its
                // own, this write's keys with it — and the rest goes on as the next group
                self.next_seq += seqs;
                let prefix = (std::mem::take(&mut done), std::mem::take(&mut documents));
                let ended = self.finish_group(prefix.0, prefix.1, true, writes + u64::from(wrote));
                (committed_any, writes) = (false, 0);
                if ended {
                    hooks.into_iter().for_each(|(_, hook)| hook());
                    done.push((completion, Ok(())));
                } else {
                    done.push((completion, Err(self.poisoned.refusal())));
                }
                continue;
            }
            if result.is_ok() && self.syncer.is_some() && durable_hooks {
                // the fsync the hooks wait for (see `WriteTx::on_durable`)
                result = self.engine.persist(false).map_err(|e| {
                    self.poison(e);
                    StorageError::Poisoned
                });
            }
            if result.is_ok() {
                self.next_seq += seqs;
                committed_any |= wrote;
                writes += u64::from(wrote);
                for (_, hook) in hooks {
                    hook();
                }
            }
            done.push((completion, result));
        }
        self.finish_group(done, documents, committed_any, writes);
    }

    /// Ends a group: counts it, publishes the state as of it (keys and derived state), and
    /// answers its writes — in sync mode by way of the fsync thread, on PostgreSQL after the
    /// group's commit (see `commit.rs`). Says whether the group ended well (in sync mode: was
    /// handed to the fsync thread).
    fn finish_group(
        &mut self,
        mut done: Vec<(Completion, Result<()>)>,
        documents: Vec<u64>,
        committed_any: bool,
        writes: u64,
    ) -> bool {
        // counted before any write of the group is answered
        self.counters.group(writes);
        let last_seq = self.next_seq - 1;
        // the state as of this group (keys and derived state), which reads see once the group is
        // durable (sync) or now (buffered)
        let derived = self.derived_source.get().and_then(|source| source());
        let moved = match (&derived, &self.derived) {
            (Some(new), Some(old)) => !Arc::ptr_eq(new, old),
            (new, old) => new.is_some() != old.is_some(),
        };
        self.derived.clone_from(&derived);
        let republish = self.republish.swap(false, Ordering::AcqRel);
        // a poisoned store publishes nothing more (a PostgreSQL view waits for what it sees to be
        // published: the state row is left as it is)
        let halted = self.engine.commits_by_group() && self.poisoned.is_set();
        let view = ((committed_any || moved || republish) && !halted)
            .then(|| super::read::Published::new(self.engine.shared_snapshot(), derived));
        if self.engine.commits_by_group() {
            self.end_group(view.as_ref().map(|v| v.state()), &documents, &mut done);
        }
        if let Some((tickets, _)) = &self.syncer {
            // Answered in order by the fsync thread, even a group that wrote nothing: its answers
            // may rest on an earlier group's writes, which are not durable yet.
            let ticket = Ticket { done, wrote: committed_any, last_seq, view, documents };
            if let Err(mpsc::SendError(ticket)) = tickets.send(ticket) {
                self.poison(StorageError::Engine("the journal's fsync thread has stopped".into()));
                for (completion, _) in ticket.done {
                    completion(Err(StorageError::Poisoned));
                }
                return false;
            }
            return true;
        }
        // Buffered: each batch reached the OS as it committed. A failed commit poisons the store:
        // from then on nothing is published, not even by a later group that wrote nothing.
        if !self.poisoned.is_set() {
            if let Some(view) = view {
                self.views.store(view);
            }
            self.durable.send_if_modified(|d| std::mem::replace(d, last_seq) != last_seq);
        }
        let ended = !self.poisoned.is_set();
        for (completion, result) in done {
            completion(result);
        }
        ended
    }

    pub(super) fn poison(&self, e: StorageError) -> StorageError {
        tracing::error!(error = %e, "write to disk failed: the store refuses writes from now on");
        self.poisoned.set(&e);
        e
    }
}
