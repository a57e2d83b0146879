//! A database's quota of stored bytes: writes are refused (507 `quota_exceeded`) while the
//! database's store holds at least that much; deletes and drops go on, so space can be freed.
//!
//! The size is the store's table files and memtables (`Store::stored_bytes`), measured at most
//! every [`MEASURE_EVERY`] and remembered in between: measuring on every write would cost more
//! than the write. So a database may pass its quota by what it writes in that time, and LSM
//! compaction moves the figure both ways (a delete frees its space only once compacted).

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
    /// the last measurement: when, and the size
    measured: Mutex<Option<(Instant, u64)>>,
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

    /// `Err((used, limit))` while the size is at or over the quota; `measure` gives the size when
    /// the last measurement is older than [`MEASURE_EVERY`].
    pub fn check(&self, measure: impl FnOnce() -> u64) -> Result<(), (u64, u64)> {
        let Some(limit) = self.limit() else { return Ok(()) };
        let mut measured = self.measured.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let used = match *measured {
            Some((at, used)) if at.elapsed() < MEASURE_EVERY => used,
            _ => {
                let used = measure();
                *measured = Some((Instant::now(), used));
                used
            }
        };
        if used >= limit { Err((used, limit)) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_at_the_limit_and_measures_again_only_after_a_while() {
        let q = Quota::default();
        assert_eq!(q.check(|| unreachable!("no quota: nothing to measure")), Ok(()));
        q.set(Some(100));
        assert_eq!(q.check(|| 99), Ok(()));
        // remembered: a new measurement is not taken yet
        assert_eq!(q.check(|| 1000), Ok(()));
        std::thread::sleep(MEASURE_EVERY);
        assert_eq!(q.check(|| 100), Err((100, 100)));
        q.set(None);
        assert_eq!(q.check(|| 1000), Ok(()));
    }
}
