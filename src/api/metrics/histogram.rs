//! A latency histogram of atomic bucket counters: an observation is two relaxed atomic additions
//! (its bucket and the sum), with no lock. The count is not kept apart: it is the sum of the
//! buckets read at the scrape, so `_count` always equals the `+Inf` bucket.

use prometheus_client::encoding::{MetricEncoder, NoLabelSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets in nanoseconds, from 100 µs to 10 s (the `+Inf` bucket follows):
/// a point read answers in tens of microseconds, a long scan in seconds.
const BOUNDS_NANOS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// The buckets, the last one `+Inf`.
const BUCKETS: usize = BOUNDS_NANOS.len() + 1;

/// Observed durations.
#[derive(Debug, Default)]
pub(super) struct Histogram {
    /// observations per bucket (not cumulative)
    buckets: [AtomicU64; BUCKETS],
    sum_nanos: AtomicU64,
}

/// What a histogram held when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Snapshot {
    buckets: [u64; BUCKETS],
    sum_nanos: u64,
}

impl Histogram {
    /// Counts one duration.
    pub(super) fn observe(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        // the first bucket whose bound is at least `nanos` (`le` is inclusive)
        let bucket = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counts now.
    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum_nanos: self.sum_nanos.load(Ordering::Relaxed),
        }
    }
}

impl Snapshot {
    /// Observations counted.
    pub(super) fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Writes the `_sum`, `_count` and cumulative `_bucket` samples, in seconds.
    pub(super) fn encode(&self, encoder: &mut MetricEncoder<'_>) -> std::fmt::Result {
        let buckets: [(f64, u64); BUCKETS] = std::array::from_fn(|i| {
            let bound = BOUNDS_NANOS.get(i).map_or(f64::INFINITY, |&n| n as f64 / 1e9);
            (bound, self.buckets[i])
        });
        let sum = self.sum_nanos as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, self.count(), &buckets, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_lands_in_the_first_bucket_whose_bound_holds_it() {
        let h = Histogram::default();
        for micros in [0, 100, 101, 999, 1000, 20_000_000] {
            h.observe(Duration::from_micros(micros));
        }
        let s = h.snapshot();
        // le=0.0001 holds 0 and exactly 100 µs; 101 µs goes to le=0.00025; 999 µs and 1 ms to
        // le=0.001; 20 s only to +Inf
        assert_eq!(s.buckets[0], 2);
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[3], 2);
        assert_eq!(s.buckets[BUCKETS - 1], 1);
        assert_eq!(s.count(), 6);
        assert_eq!(s.sum_nanos, (100 + 101 + 999 + 1000 + 20_000_000) * 1000);
    }

    #[test]
    fn the_encoding_is_cumulative_and_its_count_is_the_inf_bucket() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(11));
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(One(h.snapshot())));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let sample = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' '))).unwrap_or("")
        };
        assert_eq!(sample("t_seconds_count"), "3", "{text}");
        assert_eq!(sample("t_seconds_bucket{le=\"0.0001\"}"), "1", "{text}");
        assert_eq!(sample("t_seconds_bucket{le=\"0.005\"}"), "2", "{text}");
        assert_eq!(sample("t_seconds_bucket{le=\"10.0\"}"), "2", "{text}");
        assert_eq!(sample("t_seconds_bucket{le=\"+Inf\"}"), "3", "{text}");
        assert!(sample("t_seconds_sum").starts_with("11.00305"), "{text}");
    }

    #[derive(Debug)]
    struct One(Snapshot);

    impl prometheus_client::collector::Collector for One {
        fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> std::fmt::Result {
            let unit = prometheus_client::registry::Unit::Seconds;
            let kind = prometheus_client::metrics::MetricType::Histogram;
            let mut metric = encoder.encode_descriptor("t", "test", Some(&unit), kind)?;
            self.0.encode(&mut metric)
        }
    }
}
