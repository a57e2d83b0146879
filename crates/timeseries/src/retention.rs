//! Removing points: the retention task (every point older than its metric's `max_age`) and the
//! deletes of a series or a whole metric. Each removes at most [`REMOVE_CHUNK`] points per write,
//! so no write grows without bound and other writes interleave; each write also brings the
//! series' record up to date, so the statistics stay exact after every commit.

use super::block::BlockHeader;
use super::series::{self, Point};
use super::stats::{self, KeyKind, SeriesStats};
use super::time::NS_PER_MS;
use crate::Timeseries;
use mosaic_core::Handle;
use mosaic_core::cancel::Stop;
use mosaic_core::{Result, ServiceError};
use mosaic_keys::TsKey;
use mosaic_storage::{Slice, Space, WriteTx};
use std::sync::Arc;

/// Single points removed per write.
pub const REMOVE_CHUNK: usize = 10_000;
/// Blocks removed (or trimmed) per write.
const REMOVE_BLOCKS: usize = 64;

/// Removes the oldest points of one series with times before `cutoff` (all of them without a
/// cutoff): up to [`REMOVE_CHUNK`] single points and [`REMOVE_BLOCKS`] blocks, everything before a
/// boundary `b` so the record stays exact — whole blocks before it, the block across it trimmed.
/// Returns how many points went, whether any before `cutoff` are left, and the bytes of the keys
/// deleted.
fn remove_chunk(tx: &mut WriteTx<'_>, metric: &str, entity: &str, cutoff: Option<i64>) -> Result<(u64, bool, u64)> {
    let prefix = TsKey::series_prefix(metric, entity);
    // (time, key, value bytes)
    let mut singles: Vec<(i64, Vec<u8>, usize)> = Vec::new();
    // everything before `b` goes (None: no bound but the cutoff)
    let mut b: Option<i64> = cutoff;
    let mut more = false;
    for item in tx.scan(Space::Ts, series::singles_range(&prefix, None, cutoff)).take(REMOVE_CHUNK + 1) {
        let (key, value) = item?;
        let ts = TsKey::ts_after_prefix(&key, prefix.len()).map_err(stats::corrupt)?;
        if singles.len() == REMOVE_CHUNK {
            b = Some(ts);
            more = true;
            break;
        }
        singles.push((ts, key.to_vec(), value.len()));
    }
    let mut blocks: Vec<(Vec<u8>, Slice, BlockHeader)> = Vec::new();
    for item in tx.scan(Space::Ts, series::blocks_range(&prefix, i64::MIN)) {
        let (key, value) = item?;
        let h = series::block_header(&value)?;
        if b.is_some_and(|b| h.first >= b) {
            break;
        }
        if blocks.len() == REMOVE_BLOCKS {
            b = Some(h.first);
            more = true;
            break;
        }
        blocks.push((key.to_vec(), value, h));
    }
    let before = |ts: i64| b.is_none_or(|b| ts < b);
    let mut record = stats::read(tx, metric, entity)?;
    let had_points = record.count > 0;
    // the bytes of the keys deleted
    let mut garbage = 0u64;
    let mut removed = 0u64;
    // the first time left: of the trimmed block, else found below
    let mut first_left: Option<i64> = None;
    for (key, value, h) in blocks {
        record.remove_key(key.len(), value.len(), KeyKind::Block { loose: series::is_loose(h.count as usize) });
        garbage += (key.len() + value.len()) as u64;
        tx.delete(Space::Ts, key);
        if before(h.last) {
            removed += u64::from(h.count);
            continue;
        }
        let kept: Vec<Point> = series::decode_block(&value)?.into_iter().filter(|p| !before(p.ts)).collect();
        removed += u64::from(h.count) - kept.len() as u64;
        first_left = kept.first().map(|p| p.ts);
        series::put_blocks(tx, &prefix, &kept, &mut record)?;
    }
    for (ts, key, value_len) in singles {
        if !before(ts) {
            continue;
        }
        record.remove_key(key.len(), value_len, KeyKind::Single);
        garbage += (key.len() + value_len) as u64;
        tx.delete(Space::Ts, key);
        removed += 1;
    }
    if removed == 0 {
        return Ok((0, false, 0));
    }
    record.count = record.count.saturating_sub(removed);
    if record.count == 0 {
        record = SeriesStats::default();
    } else {
        let next_single = match b {
            Some(b) => tx
                .scan(Space::Ts, series::singles_range(&prefix, Some(b), None))
                .next()
                .transpose()?
                .map(|(k, _)| TsKey::ts_after_prefix(&k, prefix.len()).map_err(stats::corrupt))
                .transpose()?,
            None => None,
        };
        let next_block = match (first_left, b) {
            (Some(f), _) => Some(f),
            (None, Some(b)) => series::first_block_from(tx, &prefix, b)?,
            (None, None) => None,
        };
        record.first = match (next_single, next_block) {
            (Some(s), Some(k)) => s.min(k),
            (s, k) => s.or(k).ok_or_else(|| {
                ServiceError::Internal(format!("series {metric}/{entity}: its record counts points it does not have"))
            })?,
        };
    }
    stats::stage(tx, metric, entity, had_points, record);
    Ok((removed, more, garbage))
}

/// A metric's delete under way: writes to it are refused until this is dropped, however the
/// delete ends.
struct DroppingMark {
    model: Arc<Timeseries>,
    metric: String,
}

impl DroppingMark {
    fn set(model: &Arc<Timeseries>, metric: &str) -> Option<DroppingMark> {
        model.state.start_dropping(metric).then(|| DroppingMark { model: model.clone(), metric: metric.to_owned() })
    }
}

impl Drop for DroppingMark {
    fn drop(&mut self) {
        self.model.state.stop_dropping(&self.metric);
    }
}

impl Timeseries {
    /// Removes the points of one series (before `cutoff`, or all), a chunk per write; returns
    /// how many.
    async fn remove_series_points(
        self: &Arc<Self>,
        metric: &str,
        entity: &str,
        cutoff: Option<i64>,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<u64> {
        let mut total = 0;
        loop {
            let (m, e) = (metric.to_owned(), entity.to_owned());
            let (n, more, garbage) = self.commit(move |tx, _| remove_chunk(tx, &m, &e, cutoff)).await?;
            self.state.note_removed(garbage);
            // the merge task counts the metric's bytes again (and merges a trimmed block)
            self.state.written(metric);
            total += n;
            if !more || stop() {
                return Ok(total);
            }
        }
    }

    /// The series of a metric with their records, as committed now.
    async fn series_of(self: &Arc<Self>, metric: &str) -> Result<Vec<(String, SeriesStats)>> {
        let metric = metric.to_owned();
        self.read(move |ts| stats::records(&ts.core.store.committed(), &metric, None, &Stop::default())).await
    }

    /// One run of the retention task at `now_ns`: removes every point older than its metric's
    /// `max_age`; returns how many. Stops between two series once `stop()` says so.
    pub async fn apply_retention(self: &Arc<Self>, now_ns: i64, stop: &(dyn Fn() -> bool + Sync)) -> Result<u64> {
        let mut removed = 0;
        for metric in self.core.catalog.metrics() {
            let Some(max_age) = metric.retention_ms else { continue };
            let cutoff = now_ns.saturating_sub(max_age.saturating_mul(NS_PER_MS));
            for (entity, stats) in self.series_of(&metric.name).await? {
                if stop() || self.core.closing() {
                    return Ok(removed);
                }
                if stats.first >= cutoff {
                    // nothing old enough: no write
                    continue;
                }
                removed += self.remove_series_points(&metric.name, &entity, Some(cutoff), stop).await?;
            }
        }
        Ok(removed)
    }

    /// `DELETE /v1/timeseries/{metric}[?entity=]`: removes one series, or the whole metric and
    /// its configuration. While a metric is being deleted, writes to it answer 409
    /// `metric_dropping`. Returns the points removed.
    pub async fn delete_timeseries(self: &Arc<Self>, metric: String, entity: Option<String>) -> Result<u64> {
        self.metric_or_404(&metric)?;
        let this = self.clone();
        // Runs to its end even if the request times out or the client goes away (a delete cut
        // short is consistent, but the client would not learn how far it got); stops at shutdown.
        if let Some(entity) = entity {
            let work = async move {
                let closing = || this.core.closing();
                this.remove_series_points(&metric, &entity, None, &closing).await
            };
            return self.core.detached(work).await;
        }
        let Some(mark) = DroppingMark::set(self, &metric) else {
            return Err(ServiceError::MetricDropping(metric));
        };
        let work = async move {
            let _mark = mark;
            let mut removed = 0;
            let closing = || this.core.closing();
            // Writes committed while the mark was being set may have added series: list again
            // until none is left (writes to the metric are refused meanwhile).
            loop {
                let series = this.series_of(&metric).await?;
                if series.is_empty() {
                    break;
                }
                for (entity, _) in series {
                    if this.core.closing() {
                        return Err(ServiceError::Unavailable(mosaic_storage::StorageError::Closed));
                    }
                    removed += this.remove_series_points(&metric, &entity, None, &closing).await?;
                }
            }
            let name = metric.clone();
            this.commit(move |tx, ts| {
                ts.core.catalog.remove_metric(tx, &name);
                Ok(())
            })
            .await?;
            Ok(removed)
        };
        self.core.detached(work).await
    }
}
