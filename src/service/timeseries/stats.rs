//! A series' statistics (`meta:series:{metric}:{entity}`): point count and first and last time,
//! kept exact by every write, retention run and delete, so listing metrics reads one key per
//! series instead of every point, and a write whose points all lie after the series' last time
//! (the usual append) knows they are new without looking them up.

use crate::keys::{MetaKey, TsKey};
use crate::service::stop::{Stop, Watched};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space, WriteTx};
use std::ops::Bound;

/// Count, first and last timestamp (ns) of one series; count 0 means no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SeriesStats {
    pub count: u64,
    pub first: i64,
    pub last: i64,
}

impl SeriesStats {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.first.to_be_bytes());
        out.extend_from_slice(&self.last.to_be_bytes());
        out
    }

    pub fn decode(value: &[u8]) -> Result<SeriesStats> {
        let bad = || ServiceError::Internal("a series record is not 24 bytes".into());
        let (count, rest) = value.split_first_chunk::<8>().ok_or_else(bad)?;
        let (first, rest) = rest.split_first_chunk::<8>().ok_or_else(bad)?;
        let last: [u8; 8] = rest.try_into().map_err(|_| bad())?;
        Ok(SeriesStats {
            count: u64::from_be_bytes(*count),
            first: i64::from_be_bytes(*first),
            last: i64::from_be_bytes(last),
        })
    }

    /// Widens the time span to hold `ts`.
    pub fn include(&mut self, ts: i64) {
        if self.count == 0 {
            (self.first, self.last) = (ts, ts);
        } else {
            self.first = self.first.min(ts);
            self.last = self.last.max(ts);
        }
    }

    /// True when a point at `ts` cannot already exist: the series is empty or `ts` lies outside
    /// its span.
    pub fn surely_new(&self, ts: i64) -> bool {
        self.count == 0 || ts < self.first || ts > self.last
    }
}

/// The record of one series as the write sees it (absent: count 0).
pub(crate) fn read(tx: &WriteTx<'_>, metric: &str, entity: &str) -> Result<SeriesStats> {
    match tx.get(Space::Meta, &MetaKey::Series(metric.into(), entity.into()).encode())? {
        Some(v) => SeriesStats::decode(&v),
        None => Ok(SeriesStats::default()),
    }
}

/// Stages the record (or its removal once the series is empty).
pub(crate) fn stage(tx: &mut WriteTx<'_>, metric: &str, entity: &str, stats: SeriesStats) {
    let key = MetaKey::Series(metric.into(), entity.into()).encode();
    if stats.count == 0 {
        tx.delete(Space::Meta, key);
    } else {
        tx.put(Space::Meta, key, stats.encode());
    }
}

/// The record after the write removes the series' first `removed` points, the last of them
/// `last_removed` (removal always takes a series from its start): the count drops, the last time
/// stays, and the first is the time of the next committed point.
pub(crate) fn after_removing_head(
    tx: &WriteTx<'_>,
    prefix: &[u8],
    last_removed: &[u8],
    removed: usize,
    stats: SeriesStats,
) -> Result<SeriesStats> {
    let count = stats.count.saturating_sub(removed as u64);
    if count == 0 {
        return Ok(SeriesStats::default());
    }
    let upper = crate::keys::prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let next = tx.scan(Space::Ts, KeyRange::Between(Bound::Excluded(last_removed.to_vec()), upper)).next();
    match next.transpose()? {
        Some((k, _)) => {
            let first = TsKey::ts_after_prefix(&k, prefix.len()).map_err(corrupt)?;
            Ok(SeriesStats { count, first, last: stats.last })
        }
        None => Ok(SeriesStats::default()),
    }
}

/// The series of `metric` with their records, in entity name order (or just `entity`'s, if it
/// has one).
pub(crate) fn records(
    view: &ReadView,
    metric: &str,
    entity: Option<&str>,
    stop: &Stop,
) -> Result<Vec<(String, SeriesStats)>> {
    if let Some(e) = entity {
        let record = view.get(Space::Meta, &MetaKey::Series(metric.into(), e.into()).encode())?;
        return record.map(|r| Ok(vec![(e.to_owned(), SeriesStats::decode(&r)?)])).unwrap_or(Ok(Vec::new()));
    }
    let mut out = Vec::new();
    let scan = view.scan(Space::Meta, KeyRange::Prefix(MetaKey::series_of(metric)), false);
    for item in Watched::new(scan.map(|r| r.map_err(ServiceError::from)), stop) {
        let (key, value) = item?;
        match MetaKey::decode(&key) {
            Ok(MetaKey::Series(_, e)) => out.push((e.into_owned(), SeriesStats::decode(&value)?)),
            _ => return Err(ServiceError::Internal("a series record key does not decode".into())),
        }
    }
    Ok(out)
}

/// A stored `ts:` key that does not decode.
pub(crate) fn corrupt(e: crate::keys::KeyError) -> ServiceError {
    ServiceError::Internal(format!("a stored time-series key does not decode: {e}"))
}
