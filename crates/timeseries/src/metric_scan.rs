//! Reading every series of a metric in one pass. A series read on its own costs two range scans
//! (its blocks, its single points), each a seek into every table that may hold it and the parse
//! of a data block; over a thousand small series that is most of an aggregation's time. One
//! scan of the metric's whole key range (or of a part of it, between two series) reads each data
//! block once; each series' keys are held in memory while that series is read (the caller keeps
//! this path to series of bounded size), through the same [`SeriesPoints`] merge as a series read
//! on its own, so both paths answer alike.

use super::series::{Entries, SeriesPoints, Window};
use super::stats::corrupt;
use mosaic_core::Result;
use mosaic_keys::TsKey;
use mosaic_storage::{KeyRange, ReadView, Slice, Space, StorageError};
use std::ops::Bound;

/// The keys of the series of a metric, series after series, from one scan.
pub struct MetricScan<'v> {
    metric: String,
    keys: std::iter::Peekable<Entries<'v>>,
}

/// One series' keys, in key order (blocks, then single points).
pub struct SeriesKeys {
    pub entity: String,
    pub prefix: Vec<u8>,
    keys: Vec<(Slice, Slice)>,
}

impl<'v> MetricScan<'v> {
    /// The series of `metric` from the one whose entity is `from` (inclusive; None: the first)
    /// to the one whose entity is `to` (exclusive; None: to the last).
    pub fn new(view: &'v ReadView, metric: &str, from: Option<&str>, to: Option<&str>) -> Self {
        let lower = match from {
            Some(e) => Bound::Included(TsKey::series_prefix(metric, e)),
            None => Bound::Included(TsKey::metric_prefix(metric)),
        };
        let upper = match to {
            Some(e) => Bound::Excluded(TsKey::series_prefix(metric, e)),
            None => {
                mosaic_keys::prefix_successor(&TsKey::metric_prefix(metric)).map_or(Bound::Unbounded, Bound::Excluded)
            }
        };
        let keys: Entries<'v> = Box::new(view.scan(Space::Ts, KeyRange::Between(lower, upper), false));
        MetricScan { metric: metric.to_owned(), keys: keys.peekable() }
    }

    /// The next series' keys.
    fn next_series(&mut self) -> Result<Option<SeriesKeys>> {
        let Some(first) = self.keys.next() else { return Ok(None) };
        let (key, value) = first?;
        let entity = match (TsKey::decode(&key), TsKey::decode_block(&key)) {
            (Ok(k), _) | (_, Ok(k)) => k.entity.into_owned(),
            (Err(e), _) => return Err(corrupt(e)),
        };
        let prefix = TsKey::series_prefix(&self.metric, &entity);
        let mut keys = vec![(key, value)];
        while let Some(Ok((next, _))) = self.keys.peek() {
            if !next.starts_with(&prefix) {
                break;
            }
            if let Some(item) = self.keys.next() {
                keys.push(item?);
            }
        }
        Ok(Some(SeriesKeys { entity, prefix, keys }))
    }
}

impl Iterator for MetricScan<'_> {
    type Item = Result<SeriesKeys>;
    fn next(&mut self) -> Option<Result<SeriesKeys>> {
        self.next_series().transpose()
    }
}

impl SeriesKeys {
    /// The series' points within `window`, in time order, as [`SeriesPoints`] reads them from
    /// the store.
    pub fn points<'k>(&'k self, metric: &str, window: Window) -> SeriesPoints<'k> {
        let keys = &self.keys;
        let scan = move |range: KeyRange, reverse: bool| -> Entries<'k> {
            let (lo, hi) = match &range {
                KeyRange::Prefix(p) => (
                    Bound::Included(p.clone()),
                    mosaic_keys::prefix_successor(p).map_or(Bound::Unbounded, Bound::Excluded),
                ),
                KeyRange::Between(lo, hi) => (lo.clone(), hi.clone()),
            };
            let start = match &lo {
                Bound::Included(k) => keys.partition_point(|(key, _)| key.as_ref() < k.as_slice()),
                Bound::Excluded(k) => keys.partition_point(|(key, _)| key.as_ref() <= k.as_slice()),
                Bound::Unbounded => 0,
            };
            let end = match &hi {
                Bound::Included(k) => keys.partition_point(|(key, _)| key.as_ref() <= k.as_slice()),
                Bound::Excluded(k) => keys.partition_point(|(key, _)| key.as_ref() < k.as_slice()),
                Bound::Unbounded => keys.len(),
            }
            .max(start);
            let slice = keys[start..end].iter().map(|(k, v)| Ok::<_, StorageError>((k.clone(), v.clone())));
            if reverse { Box::new(slice.rev()) } else { Box::new(slice) }
        };
        SeriesPoints::new(scan, (metric, &self.entity, &self.prefix), window, false, true)
    }
}
