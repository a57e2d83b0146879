//! A request's memory budget (`--max-query-memory-mb`, as PostgreSQL's `work_mem`): the heavy
//! evaluators (PromQL, InfluxQL) charge the approximate bytes of what they materialise — series
//! and points, groups and aggregate state, a median's values, answer rows — and release what
//! they drop. Past the budget the request stops with 422 `query_too_large`. Counted in bytes, not
//! cells, so a wide row and a narrow one cost what they weigh. With the admission limits of the
//! API (`--max-heavy-reads` per class), heavy reads together hold at most about permits × budget.

use crate::{Result, ServiceError};
use std::cell::Cell;

/// [`super::DbOptions::max_query_bytes`] unless said otherwise: 256 MiB.
pub const DEFAULT_MAX_QUERY_BYTES: usize = 256 << 20;

/// The approximate heap cost of a `String` of `len` bytes (its header and its bytes).
pub const fn string_bytes(len: usize) -> usize {
    24 + len
}

/// What one request holds, in bytes, against its budget. Charged through a shared borrow (a
/// request's evaluator charges while it reads through the same context); it stays on the
/// request's thread.
#[derive(Debug, Clone)]
pub struct MemBudget {
    used: Cell<usize>,
    max: usize,
}

impl MemBudget {
    /// A budget of `max` bytes (0: no budget).
    pub fn new(max: usize) -> MemBudget {
        MemBudget { used: Cell::new(0), max: if max == 0 { usize::MAX } else { max } }
    }

    /// Counts `bytes` more held; refuses when the request would hold more than the budget.
    pub fn charge(&self, bytes: usize) -> Result<()> {
        let used = self.used.get().saturating_add(bytes);
        self.used.set(used);
        if used > self.max {
            return Err(ServiceError::QueryTooLarge(format!(
                "the query would hold more than {} MiB in memory (--max-query-memory-mb): narrow the selectors, \
                 the time range or the resolution",
                self.max >> 20
            )));
        }
        Ok(())
    }

    /// Counts `bytes` as no longer held.
    pub fn release(&self, bytes: usize) {
        self.used.set(self.used.get().saturating_sub(bytes));
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.get()
    }

    /// Back to `used` bytes held (a part of the request that failed let go of what it held).
    pub fn reset_to(&self, used: usize) {
        self.used.set(used);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_release_and_refuse_past_the_budget() {
        let b = MemBudget::new(100);
        assert!(b.charge(60).is_ok());
        b.release(30);
        assert_eq!(b.used(), 30);
        assert!(b.charge(70).is_ok());
        let err = b.charge(1).unwrap_err();
        assert_eq!(err.code(), "query_too_large");
        let unbounded = MemBudget::new(0);
        assert!(unbounded.charge(usize::MAX).is_ok());
    }
}
