//! Time series: points under `ts:{metric}:{entity}:{timestamp}` (nanoseconds), written as JSON or
//! InfluxDB line protocol, read as pages or aggregated into time buckets, removed by per-metric
//! retention. Metrics live in the catalog (`meta:metric:`), each series' point count and time
//! span in `meta:series:` (see [`stats`]).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod agg_read;
mod aggregate;
pub mod batch;
pub mod block;
pub mod check;
pub mod influxql;
pub mod labels;
mod line;
mod lineparse;
mod listing;
mod merge;
mod metric_scan;
mod metrics;
pub mod promql;
mod read;
pub mod retention;
mod select;
pub mod series;
mod state;
pub mod stats;
pub mod time;
mod upgrade;
mod write;

pub use aggregate::{
    AggregateFn, AggregateRequest, AggregateResponse, Bucket, GroupBuckets, Grouping, MAX_BUCKETS, SeriesBuckets,
};
pub use listing::{DEFAULT_SERIES_LIMIT, MAX_SERIES_LIMIT, SeriesInfo, SeriesPage};
pub use metrics::{MetricInfo, MetricList, Retention};
pub use mosaic_core::error::LineError;
pub use read::{MAX_POINTS_LIMIT, Order, PointOut, PointsPage, PointsRequest};
pub use retention::REMOVE_CHUNK;
pub use state::State;
pub use time::Precision;
pub use upgrade::upgrade;
pub use write::{PointIn, WritePoints, WriteReport};

use mosaic_core::{Core, Handle};
use std::sync::Arc;

/// The time-series model: its own keys (`ts:`, `meta:series:`, the catalog's metrics) and its
/// in-memory state, over the shared [`Core`]. It names no other model.
pub struct Timeseries {
    core: Arc<Core>,
    /// metrics being deleted, and what the merge task need look at
    state: State,
}

impl Handle for Timeseries {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Timeseries {
    /// The model over `core`, with no metric being deleted.
    pub fn new(core: Arc<Core>) -> Timeseries {
        Timeseries { core, state: State::default() }
    }
}
