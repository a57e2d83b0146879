//! Admission control of heavy reads, as Elasticsearch's bounded search queues: each class of
//! heavy read (PromQL, InfluxQL, as-of reads of history, graph walks and paths, queries, SQL) runs
//! at most `--max-heavy-reads` requests at once (default: twice the cores). One more waits up
//! to [`HeavyReads::wait`] for a place, then is refused with 503 `too_many_heavy_reads` and
//! `Retry-After`. With each request's memory budget (`--max-query-memory-mb`), the heavy reads
//! together hold at most about classes × permits × budget. Streamed answers (NDJSON exports and
//! query streams, backups) are bounded apart, by `--max-streams`.

use super::error::ApiError;
use axum::http::StatusCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The classes of heavy reads, each with its own places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeavyClass {
    /// the Prometheus query API: queries and listings
    Promql,
    /// InfluxQL's `/query`
    Influxql,
    /// reads of a table as it was (`as_of`)
    History,
    /// graph traversals and shortest paths
    Graph,
    /// queries of a table
    Query,
    /// SQL statements (`POST /v1/sql`)
    Sql,
}

impl HeavyClass {
    /// Every class, in the order of [`Admission`]'s places.
    pub const ALL: [HeavyClass; 6] = [
        HeavyClass::Promql,
        HeavyClass::Influxql,
        HeavyClass::History,
        HeavyClass::Graph,
        HeavyClass::Query,
        HeavyClass::Sql,
    ];

    /// The class's name (the label of its metrics).
    pub fn name(self) -> &'static str {
        match self {
            HeavyClass::Promql => "promql",
            HeavyClass::Influxql => "influxql",
            HeavyClass::History => "history",
            HeavyClass::Graph => "graph",
            HeavyClass::Query => "query",
            HeavyClass::Sql => "sql",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The admission limits of heavy reads.
#[derive(Debug, Clone, Copy)]
pub struct HeavyReads {
    /// requests of one class that run at once (`--max-heavy-reads`)
    pub per_class: usize,
    /// how long a request waits for a place before it is refused
    pub wait: Duration,
}

impl Default for HeavyReads {
    /// Twice the cores per class; a wait of one second.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        HeavyReads { per_class: 2 * cores, wait: Duration::from_secs(1) }
    }
}

/// The places of every class, and what they have refused.
#[derive(Debug)]
pub(crate) struct Admission {
    places: Vec<Arc<Semaphore>>,
    refused: Vec<AtomicU64>,
    limits: HeavyReads,
}

/// A place taken: the request's work runs while it is held.
#[derive(Debug)]
pub(crate) struct HeavyPermit(#[allow(dead_code)] OwnedSemaphorePermit);

impl Admission {
    pub(crate) fn new(limits: HeavyReads) -> Admission {
        let per_class = limits.per_class.clamp(1, Semaphore::MAX_PERMITS);
        let limits = HeavyReads { per_class, ..limits };
        Admission {
            places: HeavyClass::ALL.iter().map(|_| Arc::new(Semaphore::new(per_class))).collect(),
            refused: HeavyClass::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
            limits,
        }
    }

    /// Takes a place of `class`, waiting a little for one; refuses with 503
    /// `too_many_heavy_reads` and `Retry-After` when none frees up in time.
    pub(crate) async fn enter(&self, class: HeavyClass) -> Result<HeavyPermit, ApiError> {
        let places = self.places[class.index()].clone();
        let taken = match places.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => tokio::time::timeout(self.limits.wait, places.acquire_owned()).await.ok().and_then(Result::ok),
        };
        match taken {
            Some(permit) => Ok(HeavyPermit(permit)),
            None => {
                self.refused[class.index()].fetch_add(1, Ordering::Relaxed);
                Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too_many_heavy_reads",
                    format!(
                        "the server already runs {} {} reads (--max-heavy-reads); retry shortly",
                        self.limits.per_class,
                        class.name()
                    ),
                )
                .retry_after(1))
            }
        }
    }

    /// Per class: (its name, requests running, requests refused so far).
    pub(crate) fn figures(&self) -> Vec<(&'static str, u64, u64)> {
        HeavyClass::ALL
            .iter()
            .map(|c| {
                let free = self.places[c.index()].available_permits();
                let running = self.limits.per_class.saturating_sub(free) as u64;
                (c.name(), running, self.refused[c.index()].load(Ordering::Relaxed))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_class_past_its_places_waits_then_is_refused() {
        let admission = Admission::new(HeavyReads { per_class: 2, wait: Duration::from_millis(20) });
        let a = admission.enter(HeavyClass::Promql).await.unwrap();
        let _b = admission.enter(HeavyClass::Promql).await.unwrap();
        // another class has its own places
        let _c = admission.enter(HeavyClass::Graph).await.unwrap();
        let refused = admission.enter(HeavyClass::Promql).await.unwrap_err();
        assert_eq!(refused.problem().code, "too_many_heavy_reads");
        assert_eq!(refused.problem().status, 503);
        drop(a);
        let _d = admission.enter(HeavyClass::Promql).await.unwrap();
        let figures = admission.figures();
        assert_eq!(figures[0], ("promql", 2, 1));
        assert_eq!(figures[3], ("graph", 1, 0));
    }
}
