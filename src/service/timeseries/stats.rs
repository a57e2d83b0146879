//! A series' statistics (`meta:series:{metric}:{entity}`): point count, first and last time, loose
//! keys and bytes stored, kept exact by every write, merge, retention run and delete, so listing
//! metrics reads one key per series instead of every point, and a write whose points all lie after the series' last time
//! (the usual append) knows they are new without looking them up.

use crate::keys::MetaKey;
use crate::service::stop::{Stop, Watched};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space, WriteTx};

/// Count, first and last timestamp (ns) of one series, how many of its keys the merge task may
/// still merge (`loose`: single points and blocks short of full), and the bytes of its keys and
/// values (what it takes before the store's own compression); count 0 means no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SeriesStats {
    pub count: u64,
    pub first: i64,
    pub last: i64,
    pub loose: u64,
    pub bytes: u64,
}

impl SeriesStats {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(40);
        for n in [self.count, self.first.cast_unsigned(), self.last.cast_unsigned(), self.loose, self.bytes] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out
    }

    /// A record of 40 bytes; of 32 as written before the bytes were counted (format 2: the
    /// upgrade to format 3 counts them), or of 24 as written before blocks existed (every point
    /// its own key, so all of them loose). Bytes not counted read as 0.
    pub fn decode(value: &[u8]) -> Result<SeriesStats> {
        let bad = || ServiceError::Internal("a series record is not 24, 32 or 40 bytes".into());
        let (count, rest) = value.split_first_chunk::<8>().ok_or_else(bad)?;
        let (first, rest) = rest.split_first_chunk::<8>().ok_or_else(bad)?;
        let (last, rest) = rest.split_first_chunk::<8>().ok_or_else(bad)?;
        let count = u64::from_be_bytes(*count);
        let (loose, bytes) = match rest.len() {
            0 => (count, 0),
            8 | 16 => {
                let (loose, bytes) = rest.split_at(8);
                let bytes = if bytes.is_empty() { 0 } else { u64::from_be_bytes(bytes.try_into().map_err(|_| bad())?) };
                (u64::from_be_bytes(loose.try_into().map_err(|_| bad())?), bytes)
            }
            _ => return Err(bad()),
        };
        Ok(SeriesStats { count, first: i64::from_be_bytes(*first), last: i64::from_be_bytes(*last), loose, bytes })
    }

    /// Counts a key stored for the series: its bytes, and whether it is loose.
    pub fn add_key(&mut self, key: usize, value: usize, loose: bool) {
        self.bytes += (key + value) as u64;
        self.loose += u64::from(loose);
    }

    /// Uncounts a key of the series removed (or replaced).
    pub fn remove_key(&mut self, key: usize, value: usize, loose: bool) {
        self.bytes = self.bytes.saturating_sub((key + value) as u64);
        self.loose = self.loose.saturating_sub(u64::from(loose));
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

/// Stages the record (or its removal once the series is empty), and the series' labels in the
/// series index when it gets its first point or loses its last (`had_points`: as it was).
pub(crate) fn stage(tx: &mut WriteTx<'_>, metric: &str, entity: &str, had_points: bool, stats: SeriesStats) {
    let key = MetaKey::Series(metric.into(), entity.into()).encode();
    if stats.count == 0 {
        tx.delete(Space::Meta, key);
    } else {
        tx.put(Space::Meta, key, stats.encode());
    }
    if had_points != (stats.count > 0) {
        super::labels::stage(tx, metric, entity, stats.count > 0);
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
