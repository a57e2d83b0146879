//! Writing points: checked, encoded, sorted and deduplicated before the committer; on it, one
//! write stages every point of the request with its series' statistics (and the metric's
//! configuration when the metric is new), so a request's points land all together or not at all.

use super::batch::{Batch, MAX_POINTS_PER_WRITE, check_metric};
use super::block::BlockHeader;
use super::series::{self, Point};
use super::stats::{self, KeyKind};
use super::time::Precision;
use crate::Timeseries;
use mosaic_catalog::MetricConfig;
use mosaic_core::Handle;
use mosaic_core::{Result, ServiceError};
use mosaic_keys::{MetaKey, TsKey};
use mosaic_storage::{Slice, Space, WriteTx};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

/// A request's run of points appended to a series (or filling a gap of it) becomes one block
/// from this many points on (fewer: single points, which cost less to write than a block of one).
const APPEND_BLOCK_MIN: usize = 2;
/// Requests with more points than this are prepared on the blocking pool.
const PREPARE_INLINE_MAX: usize = 512;

/// A point of `POST /v1/timeseries/{metric}/points`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PointIn {
    /// the measured entity (host, sensor, …), at most 1024 bytes
    #[schema(example = "server1")]
    pub entity: String,
    /// milliseconds since the epoch (or the unit of `?precision=`), or an RFC 3339 time
    #[schema(example = 1730000000000i64)]
    pub ts: super::time::TsIn,
    /// the value (a finite number)
    pub value: f64,
    /// tags stored with the point and returned with it
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tags: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The body of `POST /v1/timeseries/{metric}/points`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WritePoints {
    /// the points, at most 1,000,000; a later point with the same entity and time as an earlier
    /// one wins
    pub points: Vec<PointIn>,
}

/// What a write stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WriteReport {
    /// points written (a point given twice in one request counts once)
    pub points: usize,
    /// line protocol only: string fields skipped (mosaicdb stores numbers)
    #[serde(default)]
    pub skipped_string_fields: usize,
}

/// The JSON points of one metric, checked: every problem is reported with the point's index.
pub fn from_json(metric: &str, body: WritePoints, precision: Precision) -> Result<Batch> {
    check_metric(metric).map_err(ServiceError::InvalidRequest)?;
    if body.points.len() > MAX_POINTS_PER_WRITE {
        return Err(ServiceError::InvalidRequest(format!("at most {MAX_POINTS_PER_WRITE} points per request")));
    }
    let mut batch = Batch::default();
    batch.points.reserve(body.points.len());
    let mut errors = Vec::new();
    for (i, p) in body.points.into_iter().enumerate() {
        let checked = batch
            .series(metric, &p.entity)
            .and_then(|series| Ok((series, super::time::parse_ts(&p.ts, precision)?)))
            .and_then(|st| if p.value.is_finite() { Ok(st) } else { Err("the value must be finite".into()) })
            .and_then(|(series, ts)| {
                let tags = match p.tags {
                    Some(t) if !t.is_empty() => Some(serde_json::to_vec(&t).map_err(|e| format!("tags: {e}"))?),
                    _ => None,
                };
                Ok((series, ts, tags))
            });
        match checked {
            Ok((series, ts, tags)) => batch.push(series, ts, p.value, tags),
            Err(why) => errors.push(format!("points[{i}]: {why}")),
        }
    }
    if !errors.is_empty() {
        let more = errors.len().saturating_sub(20);
        let mut detail = errors.into_iter().take(20).collect::<Vec<_>>().join("; ");
        if more > 0 {
            detail.push_str(&format!("; and {more} more"));
        }
        return Err(ServiceError::InvalidRequest(detail));
    }
    Ok(batch)
}

/// Bodies up to this size are parsed on the runtime thread.
fn body_is_small(body: &[u8]) -> bool {
    body.len() <= 16 << 10
}

/// The points of one series, in time order, each time once.
struct SeriesRun {
    series: u32,
    metric: String,
    entity: String,
    /// the series' key prefix
    prefix: Vec<u8>,
    points: Vec<Point>,
}

/// Points ready for the committer.
struct Prepared {
    metrics: Vec<String>,
    runs: Vec<SeriesRun>,
    points: usize,
}

fn prepare(batch: Batch) -> Prepared {
    let Batch { series, mut points, .. } = batch;
    // series in key order: rank[i] is series i's place
    let mut order: Vec<u32> = (0..series.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| series[a as usize].cmp(&series[b as usize]));
    let mut rank = vec![0u32; series.len()];
    for (place, &i) in order.iter().enumerate() {
        rank[i as usize] = place as u32;
    }
    // Stable: among points with the same series and time the last given stays last, and wins.
    points.sort_by_key(|p| (rank[p.series as usize], p.ts));
    let mut series: Vec<Option<(String, String)>> = series.into_iter().map(Some).collect();
    let mut metrics: Vec<String> = Vec::new();
    let mut runs: Vec<SeriesRun> = Vec::new();
    let mut total = 0;
    let mut iter = points.into_iter().peekable();
    while let Some(p) = iter.next() {
        if iter.peek().is_some_and(|n| n.series == p.series && n.ts == p.ts) {
            continue;
        }
        if runs.last().is_none_or(|run| run.series != p.series) {
            let Some((metric, entity)) = series[p.series as usize].take() else { continue };
            let prefix = TsKey::series_prefix(&metric, &entity);
            if metrics.last() != Some(&metric) {
                metrics.push(metric.clone());
            }
            runs.push(SeriesRun { series: p.series, metric, entity, prefix, points: Vec::new() });
        }
        total += 1;
        if let Some(run) = runs.last_mut() {
            run.points.push(Point { ts: p.ts, value: p.value, tags: p.tags.map(Vec::into_boxed_slice) });
        }
    }
    Prepared { metrics, runs, points: total }
}

/// Stages the prepared points; returns how many, and the bytes of the keys they replaced (the
/// garbage the merge task's compaction counts).
fn stage(tx: &mut WriteTx<'_>, ts: &Timeseries, prepared: Prepared) -> Result<(usize, u64)> {
    let mut garbage = 0u64;
    for metric in &prepared.metrics {
        if ts.state.is_dropping(metric) {
            return Err(ServiceError::MetricDropping(metric.clone()));
        }
        if tx.get(Space::Meta, &MetaKey::Metric(metric.as_str().into()).encode())?.is_none() {
            ts.core.catalog.put_metric(tx, MetricConfig { name: metric.clone(), retention_ms: None });
        }
    }
    for run in prepared.runs {
        let mut series = stats::read(tx, &run.metric, &run.entity)?;
        // the series as it was: a point outside its span is new, however this write widens it
        let before = series;
        let prefix = &run.prefix;
        // The usual append — every point after the series' end — or a run that fills a gap no
        // key of the series reaches into (concurrent senders' requests committed out of order):
        // all its points are new, so one block for the run (the merge task packs such blocks
        // into larger ones later).
        let whole = match (run.points.first(), run.points.last()) {
            (Some(first), Some(last)) if run.points.len() >= APPEND_BLOCK_MIN => {
                series.count == 0
                    || first.ts > series.last
                    || last.ts < series.first
                    || series::span_is_free(tx, prefix, &series, first.ts, last.ts)?
            }
            _ => false,
        };
        if whole {
            if let (Some(first), Some(last)) = (run.points.first(), run.points.last()) {
                series.include(first.ts);
                series.count += run.points.len() as u64;
                series.include(last.ts);
            }
            series::put_blocks(tx, prefix, &run.points, &mut series)?;
            stats::stage(tx, &run.metric, &run.entity, before.count > 0, series);
            continue;
        }
        // points at times inside a block's span: they rewrite that block (each block once)
        let mut folds: Vec<(Vec<u8>, Slice, BlockHeader, Vec<Point>)> = Vec::new();
        for point in run.points {
            let (ts, key) = (point.ts, TsKey::in_series(prefix, point.ts));
            if !before.surely_new(ts) {
                if let Some(old) = tx.get(Space::Ts, &key)? {
                    // a single point replaced
                    let value = series::encode_single(&point);
                    series.remove_key(key.len(), old.len(), KeyKind::Single);
                    series.add_key(key.len(), value.len(), KeyKind::Single);
                    garbage += (key.len() + old.len()) as u64;
                    tx.put_new(Space::Ts, key, value);
                    continue;
                }
                if let Some((_, _, h, points)) = folds.last_mut()
                    && h.first <= ts
                    && ts <= h.last
                {
                    points.push(point);
                    continue;
                }
                if let Some((bkey, bvalue, h)) = series::block_holding(tx, prefix, ts)? {
                    folds.push((bkey, bvalue, h, vec![point]));
                    continue;
                }
            }
            series.include(ts);
            series.count += 1;
            let value = series::encode_single(&point);
            series.add_key(key.len(), value.len(), KeyKind::Single);
            tx.put_new(Space::Ts, key, value);
        }
        for (bkey, bvalue, h, points) in folds {
            let (merged, added) = series::overlay(series::decode_block(&bvalue)?, points);
            series.count += added;
            series.remove_key(bkey.len(), bvalue.len(), KeyKind::Block { loose: series::is_loose(h.count as usize) });
            garbage += (bkey.len() + bvalue.len()) as u64;
            tx.delete(Space::Ts, bkey);
            series::put_blocks(tx, prefix, &merged, &mut series)?;
        }
        stats::stage(tx, &run.metric, &run.entity, before.count > 0, series);
    }
    Ok((prepared.points, garbage))
}

impl Timeseries {
    /// Writes points, all or none; returns how many (duplicates within the request counted once).
    pub async fn write_points(self: &Arc<Self>, batch: Batch) -> Result<usize> {
        if batch.is_empty() {
            return Ok(0);
        }
        let prepared = if batch.len() <= PREPARE_INLINE_MAX {
            prepare(batch)
        } else {
            tokio::task::spawn_blocking(move || prepare(batch))
                .await
                .map_err(|e| ServiceError::Internal(format!("preparing points failed: {e}")))?
        };
        let this = self.clone();
        self.commit(move |tx, ts| {
            let metrics = prepared.metrics.clone();
            let (written, garbage) = stage(tx, ts, prepared)?;
            // once committed (whether or not its caller still waits): the merge task's next run
            // looks at these metrics
            tx.on_commit(move || {
                for metric in &metrics {
                    this.state.written(metric);
                }
                this.state.note_removed(garbage);
            });
            Ok(written)
        })
        .await
    }

    /// `POST /v1/timeseries/{metric}/points`.
    pub async fn write_json_points(
        self: &Arc<Self>,
        metric: String,
        body: WritePoints,
        precision: Precision,
    ) -> Result<WriteReport> {
        let points = from_json(&metric, body, precision)?;
        let points = self.write_points(points).await?;
        Ok(WriteReport { points, skipped_string_fields: 0 })
    }

    /// The InfluxDB line-protocol write: all lines or none.
    pub async fn write_line_protocol(
        self: &Arc<Self>,
        body: bytes::Bytes,
        precision: Precision,
    ) -> Result<WriteReport> {
        let now = super::time::now_nanos();
        let small = body_is_small(&body);
        let parse = move || {
            let text = std::str::from_utf8(&body)
                .map_err(|e| ServiceError::InvalidRequest(format!("the body is not UTF-8 text: {e}")))?;
            super::line::parse(text, precision, now)
        };
        let parsed = if small {
            parse()?
        } else {
            tokio::task::spawn_blocking(parse)
                .await
                .map_err(|e| ServiceError::Internal(format!("parsing line protocol failed: {e}")))??
        };
        let points = self.write_points(parsed.batch).await?;
        Ok(WriteReport { points, skipped_string_fields: parsed.skipped_string_fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_sorts_by_series_and_time_and_keeps_the_last_duplicate() {
        let mut batch = Batch::default();
        for (entity, ts, value) in [("b", 2, 1.0), ("a", 5, 2.0), ("b", 2, 3.0), ("a", -1, 4.0)] {
            batch.add("m", entity, ts, value);
        }
        let p = prepare(batch);
        assert_eq!(p.points, 3);
        assert_eq!(p.metrics, ["m"]);
        let runs: Vec<(String, Vec<(i64, f64)>)> = p
            .runs
            .iter()
            .map(|r| {
                let pts = r.points.iter().map(|p| (p.ts, p.value)).collect();
                (r.entity.clone(), pts)
            })
            .collect();
        assert_eq!(runs, [("a".to_owned(), vec![(-1, 4.0), (5, 2.0)]), ("b".to_owned(), vec![(2, 3.0)])]);
    }
}
