//! The embedded backend: one fjall database per data directory, one keyspace per key family.
//! Everything the store asks of fjall goes through here (the journal's fsync in `sync.rs` reads
//! its files, and `dirs.rs` closes its gaps in directory fsyncs, without calling it).
//!
//! **Reopening.** The open database sits in a cell that every clone of [`Embedded`] shares, so
//! that the store can open it again in place (`recover.rs`) after fjall's background work
//! stopped it for a cause that passed: [`Embedded::retire`] takes it out (calls then fail with
//! [`StorageError::Recovering`]), [`Embedded::install`] puts a new one in. Each snapshot,
//! iterator and batch holds the database it was made from, so a read under way finishes on it;
//! and the count of those holders says when the old database is free to close.

use super::config::StorageConfig;
use super::error::{Result, StorageError};
use super::limits::Limits;
use super::range::KeyRange;
use super::slice::Slice;
use super::space::Space;
use super::stats::{FamilyStats, StoreStats};
use arc_swap::ArcSwapOption;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};
use std::sync::Arc;

/// An open fjall database: shared by the store's handles, replaced when it is reopened.
#[derive(Clone)]
pub(super) struct Embedded {
    open: Arc<ArcSwapOption<Open>>,
}

/// One open fjall database and its keyspaces (in `Space as usize` order).
pub(super) struct Open {
    // (the keyspaces first: dropped before the database)
    spaces: Box<[Keyspace]>,
    db: Database,
}

/// A consistent view of every keyspace, as of when it was taken.
pub(super) struct EmbeddedView {
    snapshot: fjall::Snapshot,
    open: Arc<Open>,
}

/// A scan's key-value pairs, in key order (both ends); or the one error of a scan that could not
/// begin.
pub(super) struct EmbeddedIter {
    iter: Option<fjall::Iter>,
    failed: Option<StorageError>,
    /// the database the iterator reads (see [`Embedded::retire`])
    _open: Option<Arc<Open>>,
}

/// One write's keys, committed together or not at all.
pub(super) struct EmbeddedBatch {
    batch: fjall::OwnedWriteBatch,
    open: Arc<Open>,
}

/// What a call meets while the store is being reopened (between [`Embedded::retire`] and
/// [`Embedded::install`]).
pub(super) fn reopening() -> StorageError {
    StorageError::Recovering { reason: "the store is being opened again".into(), retry_after: 1 }
}

/// How fjall creates a keyspace (it keeps these with it: a data directory keeps the options it
/// was created with).
fn options(space: Space, memtable_bytes: u64) -> KeyspaceCreateOptions {
    let options = KeyspaceCreateOptions::default().max_memtable_size(memtable_bytes);
    match space {
        // Documents are read by key far more than scanned (GET, PUT's old version, a query's
        // entities): a hash index in each data block finds a key without the block's binary
        // search.
        Space::Entity => options.data_block_hash_ratio_policy(fjall::config::HashRatioPolicy::all(0.75)),
        // Posting blocks repeat their ids' shapes and field numbers block after block: lz4 on
        // every level, not only the deepest (fjall's default leaves levels 0-1 plain, where an
        // index of some 100k documents lives).
        Space::Ftidx | Space::Ftstat => {
            options.data_block_compression_policy(fjall::config::CompressionPolicy::all(fjall::CompressionType::Lz4))
        }
        _ => options,
    }
}

fn pair(g: fjall::Guard) -> Result<(Slice, Slice)> {
    g.into_inner().map(|(k, v)| (Slice(k), Slice(v))).map_err(StorageError::from)
}

impl Embedded {
    /// fjall 3: a key's length is a `u16` in its journal and tables (a longer key makes
    /// `Batch::insert` panic, reads too, so it must never get there); a value's a `u32`, and a
    /// table block holding one (with its key and header) must fit a `u32` too: 1 GiB keeps far
    /// below that (and is PostgreSQL's largest `bytea`).
    pub(super) const LIMITS: Limits = Limits { max_key: u16::MAX as usize, max_value: 1 << 30, max_commit: None };

    /// Opens (or creates) the database in `config.path` with every keyspace.
    pub(super) fn open(config: &StorageConfig) -> Result<Embedded> {
        let open = Open::new(config)?;
        Ok(Embedded { open: Arc::new(ArcSwapOption::from_pointee(open)) })
    }

    /// The database open now, for one call.
    fn with<T>(&self, f: impl FnOnce(&Open) -> Result<T>) -> Result<T> {
        match &*self.open.load() {
            Some(open) => f(open),
            None => Err(reopening()),
        }
    }

    /// Takes the open database out: from now on calls fail with [`reopening`], and what was made
    /// from it (snapshots, iterators) goes on reading it. Once the caller holds the last
    /// reference ([`Arc::strong_count`] is 1) nothing reads it any more, and dropping it closes
    /// it (fjall stops its workers and frees the directory's lock).
    pub(super) fn retire(&self) -> Option<Arc<Open>> {
        self.open.swap(None)
    }

    /// Puts an open database in (a new one, or the one [`Embedded::retire`] took out).
    pub(super) fn install(&self, open: Arc<Open>) {
        self.open.store(Some(open));
    }

    /// Whether fjall stopped taking writes, its background work having failed: `Ok(false)`
    /// when sound, `Err` for another failure (flushing the journal's buffer, which each commit
    /// already emptied). A cheap call, made about once a second.
    pub(super) fn stopped(&self) -> Result<bool> {
        self.with(|open| match open.db.persist(PersistMode::Buffer) {
            Ok(()) => Ok(false),
            Err(fjall::Error::Poisoned) => Ok(true),
            Err(e) => Err(e.into()),
        })
    }

    /// The latest committed value of `key` (durable or not).
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        self.with(|open| Ok(open.ks(space).get(key)?.map(Slice)))
    }

    /// Whether `key` exists, as committed.
    pub(super) fn contains(&self, space: Space, key: &[u8]) -> Result<bool> {
        self.with(|open| Ok(open.ks(space).contains_key(key)?))
    }

    /// The committed pairs in `range` (within the limits: see [`Limits::clamp`]).
    pub(super) fn scan(&self, space: Space, range: KeyRange) -> EmbeddedIter {
        let Some(open) = self.open.load_full() else { return EmbeddedIter::failed(reopening()) };
        let ks = open.ks(space);
        let iter = match range {
            KeyRange::Prefix(p) => ks.prefix(p),
            KeyRange::Between(lo, hi) => ks.range((lo, hi)),
        };
        EmbeddedIter { iter: Some(iter), failed: None, _open: Some(open) }
    }

    /// A view of every keyspace as committed now.
    pub(super) fn snapshot(&self) -> Result<EmbeddedView> {
        let open = self.open.load_full().ok_or_else(reopening)?;
        Ok(EmbeddedView { snapshot: open.db.snapshot(), open })
    }

    /// An empty batch, handed to the OS as it commits (fjall's default, said here: the fsync
    /// thread relies on it).
    pub(super) fn batch(&self) -> Result<EmbeddedBatch> {
        let open = self.open.load_full().ok_or_else(reopening)?;
        Ok(EmbeddedBatch { batch: open.db.batch().durability(Some(PersistMode::Buffer)), open })
    }

    /// Makes everything committed so far durable (`all`: the journal's metadata too).
    pub(super) fn persist(&self, all: bool) -> Result<()> {
        self.with(|open| open.persist(all))
    }

    /// The bytes of every keyspace's memtables, active and sealed.
    pub(super) fn write_buffer_bytes(&self) -> u64 {
        self.with(|open| Ok(open.db.write_buffer_size())).unwrap_or(0)
    }

    /// The disk space a keyspace's table files take.
    pub(super) fn disk_space(&self, space: Space) -> u64 {
        self.with(|open| Ok(open.ks(space).disk_space())).unwrap_or(0)
    }

    /// A cheap estimate of a keyspace's key count.
    pub(super) fn approximate_len(&self, space: Space) -> usize {
        self.with(|open| Ok(open.ks(space).approximate_len())).unwrap_or(0)
    }

    /// Flushes a keyspace's memtable, then compacts its tables into one sorted run.
    ///
    /// fjall 3.1.13 keeps `Keyspace::major_compact` (and the memtable rotation) out of its docs
    /// (`#[doc(hidden)]`); the version is pinned, and this is the one place that calls it.
    pub(super) fn compact(&self, space: Space) -> Result<()> {
        let open = self.open.load_full().ok_or_else(reopening)?;
        open.flush_memtables(std::slice::from_ref(&space))?;
        Ok(open.ks(space).major_compact()?)
    }

    /// Seals the keyspaces' active memtables and waits until fjall's workers have written them
    /// all to table files (or one of them failed): see [`Open::flush_memtables`].
    pub(super) fn flush_memtables(&self, spaces: &[Space]) -> Result<()> {
        let open = self.open.load_full().ok_or_else(reopening)?;
        open.flush_memtables(spaces)
    }

    /// The store's figures that fjall keeps (the committer's counters are filled in by the caller).
    pub(super) fn stats(&self, stats: StoreStats) -> StoreStats {
        match self.open.load_full() {
            Some(open) => open.stats(stats),
            None => stats,
        }
    }
}

impl Open {
    /// Opens (or creates) the database in `config.path` with every keyspace.
    pub(super) fn new(config: &StorageConfig) -> Result<Open> {
        super::engine_log::install();
        let db = Database::builder(&config.path)
            .cache_size(config.cache_bytes)
            .worker_threads(config.worker_threads.max(2))
            .max_journaling_size(config.max_journal_bytes)
            .max_cached_files(Some(config.max_table_files.max(10)))
            .open()?;
        let memtable = config.memtable_bytes;
        let spaces = Space::ALL
            .iter()
            .map(|&s| db.keyspace(s.name(), || options(s, memtable)))
            .collect::<Result<Vec<_>, fjall::Error>>()?
            .into_boxed_slice();
        Ok(Open { spaces, db })
    }

    fn ks(&self, space: Space) -> &Keyspace {
        &self.spaces[space as usize]
    }

    /// Makes everything committed so far durable (`all`: the journal's metadata too).
    pub(super) fn persist(&self, all: bool) -> Result<()> {
        Ok(self.db.persist(if all { PersistMode::SyncAll } else { PersistMode::SyncData })?)
    }

    /// Seals the keyspaces' active memtables and waits until fjall's workers have written them
    /// all to table files (or one of them failed).
    ///
    /// Not fjall's `Keyspace::rotate_memtable_and_wait` (fjall 3.1.13 src/keyspace/mod.rs): after
    /// the rotation it polls `sealed_memtable_count() > 0` with no other way out. A flush or
    /// compaction that fails (an I/O error: a failing disk, a data directory removed under the
    /// store) ends the fjall worker that ran it and poisons the database (src/worker_pool.rs,
    /// `worker_tick`'s error arm, "Worker #{i} crashed"); the sealed memtable stays, no worker
    /// flushes it, and that loop spun until the close gave up on it (issue 26, point 4: 30 s per
    /// test server). This loop also checks for the poison, through `Database::persist` (the one
    /// public call that reports it; in `Buffer` mode it only flushes the journal's buffer, which
    /// an fsync before this emptied). It seals every keyspace first and then waits once, so the
    /// flushes run on all the workers together. When fjall's own wait gives up on a poisoned
    /// database, this can go back to calling it.
    fn flush_memtables(&self, spaces: &[Space]) -> Result<()> {
        for &space in spaces {
            self.ks(space).rotate_memtable()?;
        }
        while spaces.iter().any(|&s| self.ks(s).sealed_memtable_count() > 0) {
            self.db.persist(PersistMode::Buffer)?;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(())
    }

    fn stats(&self, mut stats: StoreStats) -> StoreStats {
        let db = &self.db;
        stats.families = Space::ALL
            .iter()
            .map(|&space| {
                let ks = self.ks(space);
                FamilyStats {
                    family: space.name(),
                    disk_bytes: ks.disk_space(),
                    approximate_keys: ks.approximate_len() as u64,
                    table_files: ks.table_count() as u64,
                    sealed_memtables: ks.sealed_memtable_count() as u64,
                }
            })
            .collect();
        stats.journal_bytes = match db.journal_disk_space() {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the journal's size");
                None
            }
        };
        stats.journal_files = db.journal_count() as u64;
        stats.cache_capacity_bytes = db.cache_capacity();
        stats.cache_bytes = db.cache_size();
        stats.write_buffer_bytes = db.write_buffer_size();
        stats.flushes_queued = db.outstanding_flushes() as u64;
        stats.compactions_running = db.active_compactions() as u64;
        stats.compactions_completed = db.compactions_completed() as u64;
        stats.compaction_time = db.time_compacting();
        stats
    }
}

impl EmbeddedView {
    /// The value under `key` in the view.
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        Ok(self.snapshot.get(self.open.ks(space), key)?.map(Slice))
    }

    /// The view's pairs in `range` (within the limits).
    pub(super) fn scan(&self, space: Space, range: KeyRange) -> EmbeddedIter {
        let ks = self.open.ks(space);
        let iter = match range {
            KeyRange::Prefix(p) => self.snapshot.prefix(ks, p),
            KeyRange::Between(lo, hi) => self.snapshot.range(ks, (lo, hi)),
        };
        EmbeddedIter { iter: Some(iter), failed: None, _open: Some(self.open.clone()) }
    }
}

impl EmbeddedIter {
    /// A scan that yields `e`, once.
    pub(super) fn failed(e: StorageError) -> EmbeddedIter {
        EmbeddedIter { iter: None, failed: Some(e), _open: None }
    }
}

impl Iterator for EmbeddedIter {
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.iter {
            Some(iter) => iter.next().map(pair),
            None => self.failed.take().map(Err),
        }
    }
}

impl DoubleEndedIterator for EmbeddedIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.iter {
            Some(iter) => iter.next_back().map(pair),
            None => self.failed.take().map(Err),
        }
    }
}

impl EmbeddedBatch {
    /// Adds `key = value`.
    pub(super) fn insert(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        self.batch.insert(self.open.ks(space), key, value);
    }

    /// Adds the removal of `key`.
    pub(super) fn remove(&mut self, space: Space, key: Vec<u8>) {
        self.batch.remove(self.open.ks(space), key);
    }

    /// Commits the batch atomically (handed to the OS).
    pub(super) fn commit(self) -> Result<()> {
        Ok(self.batch.commit()?)
    }
}

impl From<fjall::Error> for StorageError {
    fn from(e: fjall::Error) -> Self {
        use fjall::LsmError as Tree;
        match e {
            fjall::Error::Poisoned => StorageError::Poisoned,
            fjall::Error::Io(source) | fjall::Error::Storage(Tree::Io(source)) => {
                StorageError::Io { context: "the storage engine's disk access".into(), source }
            }
            fjall::Error::Storage(
                e @ (Tree::ChecksumMismatch { .. }
                | Tree::Decompress(_)
                | Tree::InvalidTrailer
                | Tree::InvalidHeader(_)
                | Tree::InvalidTag(_)
                | Tree::Utf8(_)),
            ) => {
                tracing::error!(error = ?e, "damaged data in a table file");
                StorageError::Corrupt(format!("{e:?}"))
            }
            fjall::Error::JournalRecovery(e) => {
                tracing::error!(error = ?e, "the journal is damaged");
                StorageError::Corrupt(format!(
                    "the journal is damaged ({e:?}): opening past the damage would drop acknowledged writes"
                ))
            }
            other => StorageError::Engine(other.to_string()),
        }
    }
}
