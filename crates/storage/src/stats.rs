//! What the store can say about itself: the committer's counters (kept as it commits, a few
//! relaxed atomic additions per group) and fjall's own figures (read when asked, never on the
//! write path).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters the committer keeps.
#[derive(Debug, Default)]
pub(super) struct CommitCounters {
    groups: AtomicU64,
    writes: AtomicU64,
    fsyncs: AtomicU64,
    fsync_nanos: AtomicU64,
}

impl CommitCounters {
    /// A group taken from the queue, in which `writes` write functions committed keys.
    pub(super) fn group(&self, writes: u64) {
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(writes, Ordering::Relaxed);
    }

    /// An fsync of the journal that took `took`, for the groups counted before it. The fsync is
    /// counted last (release), and [`StoreStats::counted`] reads it first (acquire), so a reader never
    /// sees more fsyncs than groups or writes.
    pub(super) fn synced(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.fsync_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.fsyncs.fetch_add(1, Ordering::Release);
    }
}

/// The store's figures at one moment.
#[derive(Debug, Clone, Default)]
pub struct StoreStats {
    /// groups of writes the committer took from its queue (each commits its writes one by one;
    /// in sync mode the fsync thread then fsyncs once for every group committed meanwhile)
    pub write_groups: u64,
    /// write functions whose keys were committed (a write that staged nothing is not counted)
    pub writes: u64,
    /// fsyncs of the journal (sync mode: one covers every group that wrote while the one before
    /// it ran, so at most one per group that wrote)
    pub fsyncs: u64,
    /// time spent in those fsyncs
    pub fsync_time: Duration,
    /// one entry per key family, in [`super::Space::ALL`] order
    pub families: Vec<FamilyStats>,
    /// journal files on disk
    pub journal_files: u64,
    /// bytes of the journal files, if they could be read
    pub journal_bytes: Option<u64>,
    /// size the block cache may grow to
    pub cache_capacity_bytes: u64,
    /// bytes the block cache holds
    pub cache_bytes: u64,
    /// bytes in memtables, active and sealed, of every family
    pub write_buffer_bytes: u64,
    /// memtable flushes waiting to run
    pub flushes_queued: u64,
    /// compactions running now
    pub compactions_running: u64,
    /// compactions finished since the store opened
    pub compactions_completed: u64,
    /// time spent compacting since the store opened
    pub compaction_time: Duration,
}

/// The figures of one key family (keyspace).
#[derive(Debug, Clone)]
pub struct FamilyStats {
    /// the family's name
    pub family: &'static str,
    /// bytes on disk (its table files; the journal is shared and counted apart)
    pub disk_bytes: u64,
    /// an estimate of the number of keys
    pub approximate_keys: u64,
    /// table (SST) files
    pub table_files: u64,
    /// memtables sealed and waiting to be flushed
    pub sealed_memtables: u64,
}

impl StoreStats {
    /// The committer's figures (the backend fills in its own).
    pub(super) fn counted(c: &CommitCounters) -> StoreStats {
        // the fsyncs first (see `CommitCounters::synced`)
        let fsyncs = c.fsyncs.load(Ordering::Acquire);
        StoreStats {
            write_groups: c.groups.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            fsyncs,
            fsync_time: Duration::from_nanos(c.fsync_nanos.load(Ordering::Relaxed)),
            ..StoreStats::default()
        }
    }
}
