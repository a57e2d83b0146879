//! Whether the store takes writes, and why not: a failed write to disk (the store is poisoned
//! for good, until a restart), a storage engine that stopped for a cause that passes (the store
//! opens it again: see `recover.rs`), or a disk too full to take more (writes wait for space).
//!
//! **Disk full.** A journal write or a flush that meets ENOSPC poisons fjall (its journal may
//! hold half a batch), and only a restart recovers. So the committer refuses writes *before* the
//! disk is full: it reads the free space of the data directory's file system (`statvfs`, at
//! most every [`CHECK_EVERY`]) and while it is under the reserve, each write is answered
//! [`StorageError::DiskFull`] without running. Space freed by the operator (or by compaction)
//! lets writes in again, with no restart. The reserve covers what a write can still need once
//! admitted: a journal file (fjall preallocates 64 MiB), a memtable flush, a compaction's output.

use super::StorageError;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often the committer reads the free disk space, at most.
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// What the store can do now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// Reads and writes.
    Ok,
    /// Reads; writes are refused while the data directory's disk has less than `reserve` bytes
    /// free, and resume on their own once it has more.
    DiskFull {
        /// bytes free when last read
        free: u64,
        /// bytes kept free (`--min-free-disk-mb`)
        reserve: u64,
    },
    /// Reads; writes are refused until a restart, after a write to disk failed (`reason`).
    Failed {
        /// the first failure
        reason: String,
    },
    /// Reads (except for the moment the engine is opened again); writes are refused while the
    /// store recovers from a storage engine failure that passes (too many open files, out of
    /// memory): it opens the engine again, trying with a growing delay while the cause lasts.
    Recovering {
        /// the failure, or the last attempt's
        reason: String,
        /// attempts to reopen that failed so far
        attempts: u32,
    },
    /// Reads; the write path stopped (shut down, or a bug took it down).
    Stopped,
}

/// Set once a write to disk fails: from then on nothing is committed or published.
#[derive(Default)]
pub(super) struct Poison {
    set: AtomicBool,
    /// set by [`StorageError::Deposed`]: another server leads the backend
    deposed: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Poison {
    pub(super) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Poisons the store with `e` as the reason (the first reason is kept).
    pub(super) fn set(&self, e: &StorageError) {
        let mut reason = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        reason.get_or_insert_with(|| e.to_string());
        if matches!(e, StorageError::Deposed) {
            self.deposed.store(true, Ordering::Release);
        }
        self.set.store(true, Ordering::Release);
    }

    /// What a write refused by the poisoned store is answered: [`StorageError::Deposed`] when
    /// another server leads the backend (the client writes on at the new leader), else
    /// [`StorageError::Poisoned`].
    pub(super) fn refusal(&self) -> StorageError {
        if self.deposed.load(Ordering::Acquire) { StorageError::Deposed } else { StorageError::Poisoned }
    }

    /// Why the store was poisoned.
    pub(super) fn reason(&self) -> Option<String> {
        self.reason.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The recovery from a storage engine failure that passes (see `recover.rs`): whether one is
/// under way, why, and when the committer tries next. Written by the committer, read by
/// [`super::Store::health`] and by each refused write.
#[derive(Default)]
pub(super) struct Recovery {
    active: AtomicBool,
    /// the engine log's mark (`engine_log::mark`) as of the check before the last one that saw
    /// the engine sound: one check behind, so that an error logged a moment before fjall
    /// poisoned itself (it logs first) is in the window even if a check ran between the two
    pub(super) mark: AtomicU64,
    /// the mark read at the last check that saw the engine sound (the next `mark`)
    pub(super) next_mark: AtomicU64,
    detail: Mutex<Detail>,
}

#[derive(Default)]
struct Detail {
    reason: String,
    attempts: u32,
    /// when the committer tries to reopen next
    next: Option<Instant>,
    /// the delay after the next failed attempt
    delay: Duration,
}

/// The first delay before a reopen; it doubles after each failed attempt, up to [`RETRY_MAX`].
pub(super) const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest delay between two attempts to reopen.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(30);

impl Recovery {
    /// Whether writes are refused for a recovery.
    pub(super) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    fn detail(&self) -> std::sync::MutexGuard<'_, Detail> {
        self.detail.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A recovery begins: the first attempt after [`RETRY_FIRST`].
    pub(super) fn begin(&self, reason: String) {
        *self.detail() =
            Detail { reason, attempts: 0, next: Some(Instant::now() + RETRY_FIRST), delay: RETRY_FIRST * 2 };
        self.active.store(true, Ordering::Release);
    }

    /// An attempt failed for `reason`: the next one after a delay twice as long (at most
    /// [`RETRY_MAX`]).
    pub(super) fn failed(&self, reason: String) {
        let mut d = self.detail();
        d.reason = reason;
        d.attempts += 1;
        d.next = Some(Instant::now() + d.delay);
        d.delay = (d.delay * 2).min(RETRY_MAX);
    }

    /// The engine is open and sound again.
    pub(super) fn end(&self) {
        self.active.store(false, Ordering::Release);
        *self.detail() = Detail::default();
    }

    /// When the committer tries next (`None`: no recovery under way).
    pub(super) fn next_attempt(&self) -> Option<Instant> {
        if !self.is_active() {
            return None;
        }
        self.detail().next
    }

    /// The refusal of a write during the recovery: retry once the next attempt is made.
    pub(super) fn refusal(&self) -> StorageError {
        let d = self.detail();
        let wait = d.next.map_or(Duration::ZERO, |at| at.saturating_duration_since(Instant::now()));
        StorageError::Recovering { reason: d.reason.clone(), retry_after: wait.as_secs().clamp(1, RETRY_MAX.as_secs()) }
    }

    /// Health while a recovery is under way.
    pub(super) fn health(&self) -> Option<Health> {
        if !self.is_active() {
            return None;
        }
        let d = self.detail();
        Some(Health::Recovering { reason: d.reason.clone(), attempts: d.attempts })
    }
}

/// The committer's view of the free disk space.
pub(super) struct DiskReserve {
    path: PathBuf,
    reserve: u64,
    full: AtomicBool,
    free: AtomicU64,
    checked: Mutex<Option<Instant>>,
}

impl DiskReserve {
    /// Keeps `reserve` bytes free on the file system of `path` (0: no check).
    pub(super) fn new(path: PathBuf, reserve: u64) -> DiskReserve {
        DiskReserve {
            path,
            reserve,
            full: AtomicBool::new(false),
            free: AtomicU64::new(u64::MAX),
            checked: Mutex::new(None),
        }
    }

    /// Whether writes must wait for space, reading the free space again if the last reading is
    /// older than [`CHECK_EVERY`]. A file system that cannot say is taken as having room.
    pub(super) fn is_full(&self) -> bool {
        if self.reserve == 0 {
            return false;
        }
        let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        if checked.is_none_or(|at| at.elapsed() >= CHECK_EVERY) {
            *checked = Some(Instant::now());
            match free_bytes(&self.path) {
                Ok(free) => {
                    self.free.store(free, Ordering::Relaxed);
                    let full = free < self.reserve;
                    if full != self.full.swap(full, Ordering::AcqRel) {
                        if full {
                            tracing::error!(
                                free,
                                reserve = self.reserve,
                                "the disk is nearly full: writes are refused until space is freed"
                            );
                        } else {
                            tracing::warn!(free, reserve = self.reserve, "disk space is back: writes are taken again");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the free disk space"),
            }
        }
        self.full.load(Ordering::Acquire)
    }

    /// The refusal of a write while the disk is full.
    pub(super) fn refusal(&self) -> StorageError {
        StorageError::DiskFull { free: self.free.load(Ordering::Relaxed), reserve: self.reserve }
    }

    /// Health as of the last reading (no new reading).
    pub(super) fn health(&self) -> Option<Health> {
        self.full
            .load(Ordering::Acquire)
            .then(|| Health::DiskFull { free: self.free.load(Ordering::Relaxed), reserve: self.reserve })
    }
}

/// Bytes an unprivileged process may still write on the file system of `path`.
fn free_bytes(path: &std::path::Path) -> std::io::Result<u64> {
    let s = rustix::fs::statvfs(path)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_larger_than_the_disk_is_full_and_none_never_is() {
        let dir = tempfile::tempdir().unwrap();
        let huge = DiskReserve::new(dir.path().into(), u64::MAX);
        assert!(huge.is_full());
        assert!(matches!(huge.refusal(), StorageError::DiskFull { reserve: u64::MAX, .. }));
        assert!(matches!(huge.health(), Some(Health::DiskFull { .. })));
        let none = DiskReserve::new(dir.path().into(), 0);
        assert!(!none.is_full());
        assert_eq!(none.health(), None);
        let small = DiskReserve::new(dir.path().into(), 1);
        assert!(!small.is_full());
    }

    #[test]
    fn poison_keeps_its_first_reason() {
        let p = Poison::default();
        assert!(!p.is_set() && p.reason().is_none());
        p.set(&StorageError::Engine("fsync: EIO".into()));
        p.set(&StorageError::Engine("later".into()));
        assert!(p.is_set());
        assert_eq!(p.reason().unwrap(), "storage engine error: fsync: EIO");
    }
}
