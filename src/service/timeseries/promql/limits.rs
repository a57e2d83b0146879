//! What one PromQL query may cost: series selected, samples read and computed, steps, and the
//! query's own size. Past a bound the query stops with 422 `query_too_large` (errorType
//! `execution`, as Prometheus answers a query over its sample limit), or 400 for the steps and
//! the length (Prometheus' `bad_data`).

use crate::service::{Result, ServiceError};

/// Most series one query may select (over all its selectors).
pub const MAX_SERIES: usize = 50_000;
/// Most samples one query may read from storage plus hold as results of its steps (Prometheus'
/// `--query.max-samples` counts alike; its default is 50 000 000, ours is lower for the memory
/// a shared server can spare).
pub const MAX_SAMPLES: usize = 5_000_000;
/// Most steps of a range query, as Prometheus.
pub const MAX_STEPS: i64 = 11_000;
/// Longest query text, in bytes.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;
/// Deepest nesting of a query's expressions.
pub const MAX_DEPTH: usize = 64;
/// Most series a listing (`series`, `labels`, `label values`) may read.
pub const MAX_LISTED_SERIES: usize = 100_000;

/// What a query has spent.
#[derive(Debug)]
pub(crate) struct Budget {
    series: usize,
    samples: usize,
    max_series: usize,
}

impl Budget {
    pub fn new() -> Budget {
        Budget { series: 0, samples: 0, max_series: MAX_SERIES }
    }

    /// A budget for listings: more series, no samples.
    pub fn listing() -> Budget {
        Budget { series: 0, samples: 0, max_series: MAX_LISTED_SERIES }
    }

    /// Counts `n` more series.
    pub fn series(&mut self, n: usize) -> Result<()> {
        self.series += n;
        if self.series > self.max_series {
            return Err(ServiceError::QueryTooLarge(format!(
                "the query selects more than {} series: narrow its selectors",
                self.max_series
            )));
        }
        Ok(())
    }

    /// Counts `n` more samples read or computed.
    pub fn samples(&mut self, n: usize) -> Result<()> {
        self.samples += n;
        if self.samples > MAX_SAMPLES {
            return Err(ServiceError::QueryTooLarge(format!(
                "query processing would load too many samples into memory (more than {MAX_SAMPLES}): \
                 narrow the selectors, the time range or the resolution"
            )));
        }
        Ok(())
    }
}
