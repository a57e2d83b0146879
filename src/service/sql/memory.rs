//! The memory a SQL statement may hold: a pool per statement (`--sql-memory-mb`) drawing on one
//! budget every statement shares (`--sql-total-memory-mb`), with no spilling to disk. DataFusion's
//! operators that hold data (hash joins, aggregates, sorts) reserve from the statement's pool
//! before they grow; a reservation that does not fit fails the statement with
//! `ResourcesExhausted`, and the pool remembers which limit refused it, so the answer says whether
//! the statement was too large (422 `sql_memory_exceeded`) or the server too busy (503
//! `sql_memory_busy`).

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool, MemoryReservation};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// The budget every statement draws on.
#[derive(Debug)]
pub(super) struct SharedMemory {
    limit: usize,
    used: AtomicUsize,
}

impl SharedMemory {
    pub(super) fn new(limit: usize) -> SharedMemory {
        SharedMemory { limit, used: AtomicUsize::new(0) }
    }

    /// Takes `bytes` if they fit under the limit.
    fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        // never below zero, whatever a consumer's accounting does
        let _ = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| Some(used.saturating_sub(bytes)));
    }

    /// Bytes held by every statement now.
    #[cfg(test)]
    pub(super) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// Which limit refused a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// the statement's own limit: the statement is too large
    Statement,
    /// the shared budget: other statements hold it
    Shared,
}

/// One statement's pool.
#[derive(Debug)]
pub(super) struct StatementPool {
    shared: Arc<SharedMemory>,
    limit: usize,
    used: AtomicUsize,
    /// 0: nothing refused; 1: the statement's limit; 2: the shared budget
    refused: AtomicU8,
}

impl StatementPool {
    pub(super) fn new(shared: Arc<SharedMemory>, limit: usize) -> StatementPool {
        StatementPool { shared, limit, used: AtomicUsize::new(0), refused: AtomicU8::new(0) }
    }

    /// The limit that refused a reservation of this statement, if one did.
    pub(super) fn refusal(&self) -> Option<Refusal> {
        match self.refused.load(Ordering::Acquire) {
            1 => Some(Refusal::Statement),
            2 => Some(Refusal::Shared),
            _ => None,
        }
    }

    fn refuse(&self, refusal: Refusal, reservation: &MemoryReservation, additional: usize) -> DataFusionError {
        let code = match refusal {
            Refusal::Statement => 1,
            Refusal::Shared => 2,
        };
        let _ = self.refused.compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire);
        let what = match refusal {
            Refusal::Statement => format!("the statement's limit of {} MiB (--sql-memory-mb)", self.limit >> 20),
            Refusal::Shared => format!(
                "the {} MiB all statements share (--sql-total-memory-mb), which others hold now",
                self.shared.limit >> 20
            ),
        };
        DataFusionError::ResourcesExhausted(format!(
            "{} needed {additional} more bytes beyond {what}",
            reservation.consumer().name()
        ))
    }
}

impl std::fmt::Display for StatementPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StatementPool(used: {}, limit: {})", self.used.load(Ordering::Relaxed), self.limit)
    }
}

impl MemoryPool for StatementPool {
    fn name(&self) -> &str {
        "mosaicdb_statement"
    }

    fn grow(&self, _reservation: &MemoryReservation, additional: usize) {
        // what an operator takes without asking (small buffers): counted, never refused
        self.used.fetch_add(additional, Ordering::AcqRel);
        self.shared.used.fetch_add(additional, Ordering::AcqRel);
    }

    fn shrink(&self, _reservation: &MemoryReservation, shrink: usize) {
        let _ = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| Some(used.saturating_sub(shrink)));
        self.shared.give_back(shrink);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        let mine = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(additional).filter(|total| *total <= self.limit)
        });
        if mine.is_err() {
            return Err(self.refuse(Refusal::Statement, reservation, additional));
        }
        if !self.shared.try_take(additional) {
            let _ = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| Some(u.saturating_sub(additional)));
            return Err(self.refuse(Refusal::Shared, reservation, additional));
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}

impl Drop for StatementPool {
    /// Whatever the statement still holds goes back to the shared budget.
    fn drop(&mut self) {
        self.shared.give_back(*self.used.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::MemoryConsumer;

    #[test]
    fn a_statement_is_refused_by_its_own_limit_then_by_the_shared_one() {
        let shared = Arc::new(SharedMemory::new(100));
        let a: Arc<dyn MemoryPool> = Arc::new(StatementPool::new(shared.clone(), 60));
        let ra = MemoryConsumer::new("a").register(&a);
        ra.try_grow(50).unwrap();
        assert!(ra.try_grow(20).is_err(), "60 is the statement's limit");
        let pool = |p: &Arc<dyn MemoryPool>| p.downcast_ref::<StatementPool>().unwrap().refusal();
        assert_eq!(pool(&a), Some(Refusal::Statement));
        let b: Arc<dyn MemoryPool> = Arc::new(StatementPool::new(shared.clone(), 60));
        let rb = MemoryConsumer::new("b").register(&b);
        assert!(rb.try_grow(60).is_err(), "50 + 60 is over the shared 100");
        assert_eq!(pool(&b), Some(Refusal::Shared));
        rb.try_grow(50).unwrap();
        assert_eq!(shared.used(), 100);
        drop(ra);
        drop(a);
        assert_eq!(shared.used(), 50, "a statement's reservations go back when it ends");
        drop(rb);
        drop(b);
        assert_eq!(shared.used(), 0);
    }
}
