//! A database's quota of stored bytes: writes are refused (507 `quota_exceeded`) while the
//! database's store holds at least that much; deletes and drops go on, so space can be freed.
//!
//! The size is the store's table files and memtables (`Store::stored_bytes`), measured at most
//! every [`MEASURE_EVERY`] and remembered in between: measuring on every write would cost more
//! than the write. So a database may pass its quota by what it writes in that time, and LSM
//! compaction moves the figure both ways (a delete frees its space only once compacted).

use crate::{Result, ServiceError};
use mosaic_storage::StorageError;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a measured size is trusted.
pub const MEASURE_EVERY: Duration = Duration::from_millis(250);

/// A quota and the last size measured.
#[derive(Debug, Default)]
pub struct Quota {
    /// bytes; 0: no quota
    limit: AtomicU64,
    /// the last measurement: when, and the size (held while measuring)
    measured: Mutex<Option<(Instant, u64)>>,
    /// the last size measured, for the callers that come while another measures
    last: Mutex<Option<u64>>,
}

impl Quota {
    /// Sets the quota (`None`: none).
    pub fn set(&self, bytes: Option<u64>) {
        self.limit.store(bytes.unwrap_or(0), Ordering::Relaxed);
    }

    /// The quota, if there is one.
    pub fn limit(&self) -> Option<u64> {
        Some(self.limit.load(Ordering::Relaxed)).filter(|l| *l > 0)
    }

    /// Refuses (507 `quota_exceeded`) while the size is at or over the quota; `measure` gives
    /// the size when the last measurement is older than [`MEASURE_EVERY`]. While one caller
    /// measures, the others go by the last size rather than wait for the measure.
    pub fn check(&self, measure: impl FnOnce() -> Result<u64, StorageError>) -> Result<()> {
        let Some(limit) = self.limit() else { return Ok(()) };
        let used = {
            let mut measured = match self.measured.try_lock() {
                Ok(guard) => guard,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    // being measured: the last size, or wait for the first
                    let last = *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    match last {
                        Some(used) => return refuse(used, limit),
                        None => self.measured.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
                    }
                }
            };
            match *measured {
                Some((at, used)) if at.elapsed() < MEASURE_EVERY => used,
                _ => {
                    let used = measure()?;
                    *measured = Some((Instant::now(), used));
                    *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(used);
                    used
                }
            }
        };
        refuse(used, limit)
    }
}

fn refuse(used: u64, quota: u64) -> Result<()> {
    if used >= quota { Err(ServiceError::QuotaExceeded { used, quota }) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_at_the_limit_and_measures_again_only_after_a_while() {
        let q = Quota::default();
        assert!(q.check(|| unreachable!("no quota: nothing to measure")).is_ok());
        q.set(Some(100));
        assert!(q.check(|| Ok(99)).is_ok());
        // remembered: a new measurement is not taken yet
        assert!(q.check(|| Ok(1000)).is_ok());
        std::thread::sleep(MEASURE_EVERY);
        assert!(matches!(q.check(|| Ok(100)), Err(ServiceError::QuotaExceeded { used: 100, quota: 100 })));
        // a measure that fails refuses the write (never lets it through unmeasured)
        std::thread::sleep(MEASURE_EVERY);
        assert!(matches!(q.check(|| Err(StorageError::Closed)), Err(ServiceError::Unavailable(_))));
        q.set(None);
        assert!(q.check(|| Ok(1000)).is_ok());
    }
}
