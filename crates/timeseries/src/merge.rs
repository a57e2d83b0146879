//! The merge task: a series' loose keys (single points as writes make them, and blocks short of
//! [`FULL_BLOCK`] points) become compressed blocks. Merging is tiered, as in a size-tiered LSM:
//! a run of consecutive keys each holding fewer than `t` points is merged once together they
//! hold `t` or they are [`FANOUT`] keys (for `t` = 64, 1024, then a full block), so a point is
//! rewritten a few times at most
//! however it arrived, and full blocks are never rewritten by the task. Each merge is one write
//! (the series' record changes with its keys), rewriting at most [`MERGE_MAX_POINTS`] points; it reads
//! the series' keys to plan, full blocks included.

use super::series::{self, FULL_BLOCK, Point};
use super::stats::{self, KeyKind};
use crate::Timeseries;
use mosaic_core::Handle;
use mosaic_core::{Result, ServiceError};
use mosaic_keys::TsKey;
use mosaic_storage::{Slice, Space, WriteTx};
use std::sync::Arc;

/// Loose keys a series needs before the task looks at it.
pub const MERGE_MIN_LOOSE: u64 = 16;
/// The tiers: a run of keys each under `t` points is merged once it holds `t` together.
const TIERS: [usize; 3] = [64, 1024, FULL_BLOCK];
/// Keys under a tier's size merged together once there are this many, even short of the size: a
/// series that never reaches a tier's size (a few thousand points) still ends in few blocks.
const FANOUT: usize = 8;
/// Points one merge write rewrites at most.
pub const MERGE_MAX_POINTS: usize = 32 * FULL_BLOCK;

/// One key of a series, in time order.
struct Item {
    key: Vec<u8>,
    value: Slice,
    /// its first time (a single point's time)
    first: i64,
    count: usize,
    block: bool,
}

/// The keys of the series of `prefix` as committed, in time order (blocks and single points
/// interleaved: no two overlap).
fn items(tx: &WriteTx<'_>, prefix: &[u8]) -> Result<Vec<Item>> {
    let mut blocks = Vec::new();
    for item in tx.scan(Space::Ts, series::blocks_range(prefix, i64::MIN)) {
        let (key, value) = item?;
        let h = series::block_header(&value)?;
        blocks.push(Item { key: key.to_vec(), value, first: h.first, count: h.count as usize, block: true });
    }
    let mut all = Vec::with_capacity(blocks.len());
    let mut blocks = blocks.into_iter().peekable();
    for item in tx.scan(Space::Ts, series::singles_range(prefix, None, None)) {
        let (key, value) = item?;
        let ts = TsKey::ts_after_prefix(&key, prefix.len()).map_err(stats::corrupt)?;
        while let Some(b) = blocks.next_if(|b| b.first < ts) {
            all.push(b);
        }
        all.push(Item { key: key.to_vec(), value, first: ts, count: 1, block: false });
    }
    all.extend(blocks);
    Ok(all)
}

/// The runs of `counts` (consecutive keys' point counts) to merge: ranges of key indexes, each of
/// two keys or more, at most `max_points` points in all (at least one run when there is any).
pub fn plan(counts: &[usize], max_points: usize) -> Vec<std::ops::Range<usize>> {
    // (start, end, points) of each piece: a key, or keys merged by an earlier tier
    let mut pieces: Vec<(usize, usize, usize)> = counts.iter().enumerate().map(|(i, &c)| (i, i + 1, c)).collect();
    for t in TIERS {
        let mut out = Vec::with_capacity(pieces.len());
        let mut run: Vec<(usize, usize, usize)> = Vec::new();
        let flush = |run: &mut Vec<(usize, usize, usize)>, out: &mut Vec<(usize, usize, usize)>| {
            let total: usize = run.iter().map(|p| p.2).sum();
            match (run.first(), run.last()) {
                (Some(a), Some(z)) if run.len() >= 2 && (total >= t || run.len() >= FANOUT) => {
                    out.push((a.0, z.1, total))
                }
                _ => out.append(run),
            }
            run.clear();
        };
        for piece in pieces {
            if piece.2 < t {
                run.push(piece);
            } else {
                flush(&mut run, &mut out);
                out.push(piece);
            }
        }
        flush(&mut run, &mut out);
        pieces = out;
    }
    let mut runs = Vec::new();
    let mut points = 0;
    for (start, mut end, mut total) in pieces {
        if end - start < 2 {
            continue;
        }
        if !runs.is_empty() && points + total > max_points {
            break;
        }
        if total > max_points {
            // a long run is merged a part at a time: its first keys, at least two
            let mut sum = 0;
            end = start
                + counts[start..end]
                    .iter()
                    .take_while(|&&c| (sum + c <= max_points).then(|| sum += c).is_some())
                    .count()
                    .max(2);
            total = counts[start..end].iter().sum();
        }
        points += total;
        runs.push(start..end);
        if points >= max_points {
            break;
        }
    }
    runs
}

/// Merges loose keys of one series in the write; returns how many keys went (0: nothing to do)
/// and whether more is left to merge.
fn merge_series(tx: &mut WriteTx<'_>, metric: &str, entity: &str) -> Result<(usize, bool, u64)> {
    let prefix = TsKey::series_prefix(metric, entity);
    let items = items(tx, &prefix)?;
    let counts: Vec<usize> = items.iter().map(|i| i.count).collect();
    let runs = plan(&counts, MERGE_MAX_POINTS);
    let Some(last_run) = runs.last() else { return Ok((0, false, 0)) };
    let more = !plan(&counts[last_run.end..], usize::MAX).is_empty();
    let mut record = stats::read(tx, metric, entity)?;
    let had_points = record.count > 0;
    let (mut removed, mut added, mut garbage) = (0, 0, 0u64);
    for run in runs {
        let mut points: Vec<Point> = Vec::new();
        for item in &items[run] {
            if item.block {
                points.extend(series::decode_block(&item.value)?);
            } else {
                points.push(series::decode_single(item.first, &item.value)?);
            }
            let kind = match item.block {
                true => KeyKind::Block { loose: series::is_loose(item.count) },
                false => KeyKind::Single,
            };
            record.remove_key(item.key.len(), item.value.len(), kind);
            garbage += (item.key.len() + item.value.len()) as u64;
            tx.delete(Space::Ts, item.key.clone());
            removed += 1;
        }
        series::put_blocks(tx, &prefix, &points, &mut record)?;
        added += points.len().div_ceil(FULL_BLOCK);
    }
    stats::stage(tx, metric, entity, had_points, record);
    Ok((removed - added.min(removed), more, garbage))
}

impl Timeseries {
    /// One run of the merge task: merges the loose keys of every series that has at least
    /// [`MERGE_MIN_LOOSE`] in the metrics written since the last run (every metric in the first
    /// run since the open), so an idle run costs nothing; returns how many keys went. Stops
    /// between two writes once `stop()` says so.
    pub async fn merge_timeseries(self: &Arc<Self>, stop: &(dyn Fn() -> bool + Sync)) -> Result<u64> {
        let mut gone = 0u64;
        // the bytes of the series' keys of each metric looked at, as their records say
        let mut stored = std::collections::HashMap::new();
        let metrics = self.core.catalog.metrics();
        for (i, metric) in metrics.iter().enumerate() {
            if !self.state.take_dirty(&metric.name) {
                continue;
            }
            // a run that stops early leaves this metric and the ones after it to the next
            let leave = || {
                for m in &metrics[i..] {
                    self.state.keep_dirty(&m.name);
                }
            };
            let name = metric.name.clone();
            let series = self
                .read(move |ts| {
                    stats::records(&ts.core.store.committed(), &name, None, &mosaic_core::cancel::Stop::default())
                })
                .await;
            let series = match series {
                Ok(series) => series,
                Err(e) => {
                    leave();
                    return Err(e);
                }
            };
            // the metric's bytes, kept up to date with each merge below
            let mut bytes: u64 = series.iter().map(|(_, r)| r.bytes).sum();
            let live: std::collections::HashSet<&str> = series.iter().map(|(e, _)| e.as_str()).collect();
            self.state.settled.keep_only(&metric.name, &live);
            for (entity, record) in &series {
                let seen = (record.count, record.loose);
                if record.loose < MERGE_MIN_LOOSE || self.state.settled.is(&metric.name, entity, seen) {
                    continue;
                }
                // the series' bytes as last counted in `bytes`
                let mut latest = record.bytes;
                loop {
                    if stop() || self.core.closing() {
                        leave();
                        return Ok(gone);
                    }
                    let (m, e) = (metric.name.clone(), entity.clone());
                    let merged = self
                        .commit(move |tx, ts| {
                            if ts.state.is_dropping(&m) {
                                return Ok((0, false, 0, None));
                            }
                            let (n, more, garbage) = merge_series(tx, &m, &e)?;
                            Ok((n, more, garbage, Some(stats::read(tx, &m, &e)?)))
                        })
                        .await;
                    let (n, more, garbage, after) = match merged {
                        Ok(m) => m,
                        // one series that cannot be merged (a block that does not decode: check
                        // says more) must not stop the others
                        Err(e) if !matches!(e, ServiceError::Unavailable(_)) => {
                            tracing::warn!(metric = %metric.name, entity = %entity, error = %e, "merging a time series failed");
                            break;
                        }
                        Err(e) => {
                            leave();
                            return Err(e);
                        }
                    };
                    gone += n as u64;
                    self.state.note_removed(garbage);
                    if let Some(after) = &after {
                        bytes = (bytes + after.bytes).saturating_sub(latest);
                        latest = after.bytes;
                    }
                    if !more {
                        // nothing (more) to do until the series changes
                        let seen = after.map(|a| (a.count, a.loose)).filter(|_| n == 0);
                        self.state.settled.set(&metric.name, entity, seen);
                        break;
                    }
                }
            }
            stored.insert(metric.name.clone(), bytes);
        }
        let live = metrics.iter().map(|m| m.name.clone()).collect();
        let stored = self.state.merge_run_done(stored, &live);
        self.compact_timeseries(stored).await?;
        Ok(gone)
    }

    /// At the end of a run of the merge task: compacts the `ts` keyspace (and `meta`, with the
    /// series records) when the bytes of the keys merges and removals deleted since the last compaction
    /// — versions the LSM keeps, in its memtables or its table files, until a compaction meets
    /// them — exceed what the series hold (`stored` bytes) plus [`GARBAGE_SLACK`]. Each
    /// compaction rewrites what is live once per at least as many bytes of garbage: bounded
    /// amplification.
    async fn compact_timeseries(self: &Arc<Self>, stored: u64) -> Result<()> {
        if self.state.removed_bytes() <= stored.saturating_add(GARBAGE_SLACK) {
            return Ok(());
        }
        if self.core.closing() {
            return Ok(());
        }
        let garbage = self.state.take_removed();
        let (disk, started) = (self.core.store.disk_space(Space::Ts), std::time::Instant::now());
        // the series records too: every write rewrote its series' record, and a scan of them
        // walks every version the memtable still holds (the catalog beside them is small)
        let compacted = self
            .read(|ts| Ok(ts.core.store.compact(Space::Ts).and_then(|()| ts.core.store.compact(Space::Meta))?))
            .await;
        if let Err(e) = compacted {
            // counted back: the garbage is still there
            self.state.note_removed(garbage);
            return Err(e);
        }
        let after = self.core.store.disk_space(Space::Ts);
        let ms = started.elapsed().as_millis() as u64;
        tracing::info!(before = disk, after, stored, garbage, ms, "time-series keyspace compacted");
        Ok(())
    }
}

/// See [`Timeseries::compact_timeseries`].
const GARBAGE_SLACK: u64 = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn runs_merge_by_tier_and_leave_full_blocks_alone() {
        // too few points and keys: nothing
        assert!(plan(&[1; FANOUT - 1], usize::MAX).is_empty());
        assert!(plan(&[500, 500], usize::MAX).is_empty());
        // enough keys, or enough points: one run
        assert_eq!(plan(&[1; FANOUT], usize::MAX), [0..FANOUT]);
        assert_eq!(plan(&[1; 64], usize::MAX), [0..64]);
        // a full block between two runs of singles is left alone
        let mut counts = vec![1; 70];
        counts.push(FULL_BLOCK);
        counts.extend([1; FANOUT - 1]);
        assert_eq!(plan(&counts, usize::MAX), [0..70]);
        counts.push(1);
        assert_eq!(plan(&counts, usize::MAX), [0..70, 71..71 + FANOUT]);
        // small blocks add up through the tiers: 16 of 64 points make one of 1024, and so do 8
        assert_eq!(plan(&[64; 16], usize::MAX), [0..16]);
        assert_eq!(plan(&[64; 8], usize::MAX), [0..8]);
        assert!(plan(&[64; 7], usize::MAX).is_empty());
        // at most max_points per plan: a long run a part at a time (at least two keys)
        assert_eq!(plan(&[1000; 40], 5000), [0..5]);
        assert_eq!(plan(&[1000; 40], 10), [0..2]);
        let mut two = vec![1; 100];
        two.push(FULL_BLOCK);
        two.extend([1; 100]);
        assert_eq!(plan(&two, 150), [0..100]);
    }
}
