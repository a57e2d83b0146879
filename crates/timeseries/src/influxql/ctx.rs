//! What a query's statements share: the read view, the limits and how much of them is used.

use mosaic_core::ServiceError;
use mosaic_core::cancel::Stop;
use mosaic_core::mem_budget::MemBudget;
use mosaic_storage::ReadView;

/// Most points one statement may read.
pub const MAX_POINTS_SCANNED: u64 = 10_000_000;
/// Most rows (values of one time, over every series) one query may answer.
pub const MAX_ROWS: usize = 100_000;
/// Most series one statement may read (of each measurement's fields together).
pub const MAX_SERIES: usize = 100_000;
/// Most `GROUP BY time` intervals one statement may answer, over every series.
pub const MAX_BUCKETS: usize = super::super::aggregate::MAX_BUCKETS;

/// A statement's own error: answered in its result, the other statements still run.
pub fn refuse(why: impl Into<String>) -> ServiceError {
    ServiceError::InvalidRequest(why.into())
}

/// What statements read, and how much of the limits they have used.
pub struct Ctx<'a> {
    pub view: ReadView,
    pub stop: &'a Stop,
    pub now: i64,
    pub epoch: super::out::Epoch,
    /// the metric names, sorted
    pub metrics: Vec<String>,
    /// rows answered so far by the query
    pub rows: usize,
    /// the bytes the query holds (groups, aggregate state, answer rows), against its budget
    pub memory: MemBudget,
}
