//! What one PromQL query may cost: series selected, samples read and computed, steps, and the
//! query's own size. Past a bound the query stops with 422 `query_too_large` (errorType
//! `execution`, as Prometheus answers a query over its sample limit), or 400 for the steps and
//! the length (Prometheus' `bad_data`). What it holds in memory counts against the request's
//! memory budget too ([`MemBudget`], `--max-query-memory-mb`).

use mosaic_core::mem_budget::{MemBudget, string_bytes};
use mosaic_core::{Result, ServiceError};

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

/// The bytes one sample takes in memory: a point `(i64, f64)` read, or a step's `Option<f64>`.
const SAMPLE_BYTES: usize = 16;

/// What a query has spent.
#[derive(Debug)]
pub struct Budget {
    series: usize,
    samples: usize,
    max_series: usize,
    memory: MemBudget,
}

impl Budget {
    pub fn new(memory: MemBudget) -> Budget {
        Budget { series: 0, samples: 0, max_series: MAX_SERIES, memory }
    }

    /// A budget for listings: more series, no samples.
    pub fn listing(memory: MemBudget) -> Budget {
        Budget { series: 0, samples: 0, max_series: MAX_LISTED_SERIES, memory }
    }

    /// Counts the memory a series' labels take.
    pub fn labels(&mut self, labels: &[(String, String)]) -> Result<()> {
        let bytes = labels.iter().map(|(n, v)| string_bytes(n.len()) + string_bytes(v.len())).sum::<usize>();
        self.memory.charge(bytes + 24)
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

    /// Counts `n` more samples read or computed (and the memory they take).
    pub fn samples(&mut self, n: usize) -> Result<()> {
        self.memory.charge(n.saturating_mul(SAMPLE_BYTES))?;
        self.touched(n)
    }

    /// Counts `n` more samples a step's window went over besides the sliding pass (that reads
    /// each point once): Prometheus counts every sample a step loads.
    pub fn touched(&mut self, n: usize) -> Result<()> {
        self.samples = self.samples.saturating_add(n);
        if self.samples > MAX_SAMPLES {
            return Err(ServiceError::QueryTooLarge(format!(
                "query processing would load too many samples into memory (more than {MAX_SAMPLES}): \
                 narrow the selectors, the time range or the resolution"
            )));
        }
        Ok(())
    }
}
