//! Running an aggregation: which series, read how. Each series' points are bucketed in time
//! order ([`buckets_of`]) and handed to a [`Sink`], in entity name order. Two ways to read them:
//!
//! - series by series, each a read of its own key ranges (a long series split in two halves on
//!   two threads): what a narrow selection or window needs;
//! - every series of the metric in one scan ([`MetricScan`]), the metric's key range cut in two
//!   at a series boundary for two threads, each with its own sink, the later absorbed into the
//!   earlier: what "every series together" over most of their points needs, where a read per
//!   series would spend most of its time seeking.

use super::aggregate::{AggregateRequest, AggregateResponse, Buckets, Sink, too_many};
use super::metric_scan::MetricScan;
use super::series::{Entries, Point, SeriesPoints, Window};
use super::stats::SeriesStats;
use super::time::{NS_PER_MS, bucket_of, duration_param};
use crate::Timeseries;
use mosaic_core::Handle;
use mosaic_core::cancel::Stop;
use mosaic_core::{Result, ServiceError};
use mosaic_keys::TsKey;
use mosaic_storage::{ReadView, Space};
use std::sync::Arc;

/// Series with fewer points than this in the window are scanned on one thread.
const PARALLEL_MIN_POINTS: u64 = 100_000;
/// Fewest series for which one scan of the metric is worth it.
const SCAN_MIN_SERIES: usize = 16;
/// Largest series (bytes of its keys) the metric scan holds in memory while it reads it.
const SCAN_SERIES_MAX_BYTES: u64 = 64 << 20;

/// Where to split a long series' window in two for a parallel scan: a bucket boundary near the
/// middle of the points' span within the window (None for a short series, or no boundary inside).
fn split_point(stats: &SeriesStats, window: Window, step: i64) -> Option<i64> {
    if stats.count < PARALLEL_MIN_POINTS {
        return None;
    }
    let lo = window.from.map_or(stats.first, |f| f.max(stats.first));
    let hi = window.to.map_or(stats.last, |t| t.min(stats.last));
    if hi <= lo {
        return None;
    }
    let middle = (i128::from(lo) + i128::from(hi)) / 2;
    let mid = middle.div_euclid(i128::from(step)) * i128::from(step);
    i64::try_from(mid).ok().filter(|m| *m > lo && *m < hi)
}

/// Whether to read the metric's series in one scan: they are all of the metric's (no entity or
/// selector narrowed them), many, none too large to hold, and the window holds most of their
/// points (estimated from each series' time span).
fn scan_whole_metric(series: &[(String, SeriesStats)], window: Window, narrowed: bool) -> bool {
    if narrowed || series.len() < SCAN_MIN_SERIES || series.iter().any(|(_, s)| s.bytes > SCAN_SERIES_MAX_BYTES) {
        return false;
    }
    let (mut total, mut inside) = (0f64, 0f64);
    for (_, s) in series {
        let (lo, hi) = (window.from.map_or(s.first, |f| f.max(s.first)), window.to.map_or(s.last, |t| t.min(s.last)));
        let share = match s.last - s.first {
            0 => f64::from(u8::from(lo <= s.first && s.first <= hi && window.to.is_none_or(|t| s.first < t))),
            span => ((hi as f64 - lo as f64) / span as f64).clamp(0.0, 1.0),
        };
        total += s.count as f64;
        inside += s.count as f64 * share;
    }
    inside * 2.0 >= total
}

/// The buckets of one series' points (in time order), closed one after another (at most
/// `limit`).
fn buckets_of(points: impl Iterator<Item = Result<Point>>, step: i64, limit: usize, stop: &Stop) -> Result<Buckets> {
    let mut own: Buckets = Vec::new();
    for (n, point) in points.enumerate() {
        if n % 4096 == 4095 {
            stop.check()?;
        }
        let Point { ts, value: v, .. } = point?;
        let start = bucket_of(ts, step);
        match own.last_mut() {
            Some((s, acc)) if *s == start => acc.add(ts, v),
            _ => {
                if own.len() == limit {
                    return Err(too_many());
                }
                own.push((start, super::aggregate::Acc::new(ts, v)));
            }
        }
    }
    Ok(own)
}

/// One series read from its own key ranges (window `window`; `singles`: whether its record
/// counts single points).
fn series_buckets(
    view: &ReadView,
    (metric, entity, singles): (&str, &str, bool),
    window: Window,
    step: i64,
    limit: usize,
    stop: &Stop,
) -> Result<Buckets> {
    let prefix = TsKey::series_prefix(metric, entity);
    let scan = |range, reverse| -> Entries<'_> { Box::new(view.scan(Space::Ts, range, reverse)) };
    buckets_of(SeriesPoints::new(scan, (metric, entity, &prefix), window, false, singles), step, limit, stop)
}

/// Reads series by series into `sink`.
fn by_series(
    view: &ReadView,
    metric: &str,
    series: &[(String, SeriesStats)],
    window: Window,
    step: i64,
    sink: &mut Sink,
    stop: &Stop,
) -> Result<()> {
    for (entity, record) in series {
        let limit = sink.limit();
        let own = match split_point(record, window, step) {
            // two halves of a long series on two threads; no bucket straddles the split
            Some(mid) => {
                let (early, late) = (Window { to: Some(mid), ..window }, Window { from: Some(mid), ..window });
                let (a, b) = std::thread::scope(|scope| {
                    let series = (metric, entity.as_str(), record.singles > 0);
                    let second = scope.spawn(move || series_buckets(view, series, late, step, limit, stop));
                    let first = series_buckets(view, series, early, step, limit, stop);
                    (first, second.join())
                });
                let mut own = a?;
                own.extend(b.map_err(|_| ServiceError::Internal("an aggregation thread panicked".into()))??);
                if own.len() > limit {
                    return Err(too_many());
                }
                own
            }
            None => series_buckets(view, (metric, entity, record.singles > 0), window, step, limit, stop)?,
        };
        sink.add(entity, own)?;
    }
    Ok(())
}

/// Reads the series of the metric from the one named `from` to the one before `to` in one scan.
fn scan_part(
    view: &ReadView,
    metric: &str,
    (from, to): (Option<&str>, Option<&str>),
    window: Window,
    step: i64,
    sink: &mut Sink,
    stop: &Stop,
) -> Result<()> {
    for series in MetricScan::new(view, metric, from, to) {
        stop.check()?;
        let series = series?;
        let own = buckets_of(series.points(metric, window), step, sink.limit(), stop)?;
        sink.add(&series.entity, own)?;
    }
    Ok(())
}

impl Timeseries {
    /// Buckets of one metric.
    pub async fn aggregate(self: &Arc<Self>, metric: String, req: AggregateRequest) -> Result<AggregateResponse> {
        self.metric_or_404(&metric)?;
        let step_ms = duration_param("step", &req.step)?;
        let step_ns =
            step_ms.checked_mul(NS_PER_MS).ok_or_else(|| ServiceError::InvalidRequest("step is too long".into()))?;
        let window = Window::parse(req.from.as_deref(), req.to.as_deref())?;
        let selector = super::read::parse_selector(req.selector.as_deref())?;
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |ts| {
            let view = ts.core.store.snapshot();
            let series = selector.select(&view, &metric, req.entity.as_deref(), &stop)?;
            let mut sink = Sink::new(req.group_by);
            if window.is_empty() {
                return Ok(sink.answer(req.func, step_ms));
            }
            let narrowed = req.entity.is_some() || !selector.is_empty();
            if !scan_whole_metric(&series, window, narrowed) {
                by_series(&view, &metric, &series, window, step_ns, &mut sink, &stop)?;
                return Ok(sink.answer(req.func, step_ms));
            }
            // the metric's key range in two at the middle series, one part per thread
            let mid = series.get(series.len() / 2).map(|(e, _)| e.as_str());
            let mut later = sink.part();
            let (view, metric, stop) = (&view, metric.as_str(), &stop);
            let (a, b) = std::thread::scope(|scope| {
                let second = scope.spawn(|| scan_part(view, metric, (mid, None), window, step_ns, &mut later, stop));
                let first = scan_part(view, metric, (None, mid), window, step_ns, &mut sink, stop);
                (first, second.join())
            });
            a?;
            b.map_err(|_| ServiceError::Internal("an aggregation thread panicked".into()))??;
            sink.absorb(later)?;
            Ok(sink.answer(req.func, step_ms))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{AggregateFn, Grouping};
    use crate::batch::Batch;
    use mosaic_core::Core;
    use mosaic_storage::{Durability, StorageConfig};
    use proptest::prelude::Rng as _;
    use proptest::test_runner::{RngAlgorithm, TestRng};
    use std::sync::Arc;

    /// The one-scan path and the series-by-series path answer alike, over series of single
    /// points, blocks (merged or appended) and both, windows that cut blocks, every grouping.
    #[tokio::test]
    async fn one_scan_of_the_metric_answers_as_a_read_per_series() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StorageConfig::new(dir.path());
        config.durability = Durability::Buffered;
        let ts = Arc::new(Timeseries::new(Core::open_for_test(config)));
        let mut rng = TestRng::from_seed(RngAlgorithm::XorShift, &[7; 16]);
        let mut below = move |n: u64| (rng.next_u64() % n) as i64;
        for round in 0..6 {
            let mut batch = Batch::default();
            for s in 0..40 {
                let entity = format!("host=h{s:02},rack=r{}", s % 3);
                // appended runs (blocks), then scattered points (single points, overwrites)
                for i in 0..below(30) {
                    batch.add("m", &entity, round * 1000 + i * 7, (below(200) - 100) as f64 / 4.0);
                }
                for _ in 0..below(5) {
                    batch.add("m", &entity, below(7500) - 500, (below(200) - 100) as f64);
                }
            }
            ts.write_points(batch).await.unwrap();
            if round == 2 {
                ts.merge_timeseries(&|| false).await.unwrap();
            }
        }
        let view = ts.core.store.snapshot();
        let stop = Stop::default();
        let series = crate::stats::records(&view, "m", None, &stop).unwrap();
        assert_eq!(series.len(), 40);
        for (from, to, step) in
            [(None, None, 100), (Some(-100), Some(3333), 7), (Some(2500), Some(2501), 1), (Some(10), None, 1000)]
        {
            let window = Window { from, to };
            for grouping in [Grouping::All, Grouping::Entity, Grouping::Labels(vec!["rack".into()])] {
                for func in [AggregateFn::First, AggregateFn::Last, AggregateFn::Sum, AggregateFn::Count] {
                    let mut one = Sink::new(grouping.clone());
                    by_series(&view, "m", &series, window, step, &mut one, &stop).unwrap();
                    let mut first = Sink::new(grouping.clone());
                    let mut later = first.part();
                    let mid = series[13].0.as_str();
                    scan_part(&view, "m", (None, Some(mid)), window, step, &mut first, &stop).unwrap();
                    scan_part(&view, "m", (Some(mid), None), window, step, &mut later, &stop).unwrap();
                    first.absorb(later).unwrap();
                    let (a, b) = (one.answer(func, 1), first.answer(func, 1));
                    assert_eq!(a, b, "{window:?} {grouping:?} {func:?}");
                    if let (AggregateResponse::Buckets { buckets }, AggregateFn::Count, None, None) =
                        (&a, func, from, to)
                    {
                        let counted: f64 = buckets.iter().map(|b| b.value).sum();
                        assert_eq!(counted as u64, series.iter().map(|(_, s)| s.count).sum::<u64>());
                    }
                }
            }
        }
    }
}
