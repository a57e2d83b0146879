//! A series' statistics (`meta:series:{metric}:{entity}`): point count, first and last time, loose
//! keys and bytes stored, kept exact by every write, merge, retention run and delete, so listing
//! metrics reads one key per series instead of every point, and a write whose points all lie after the series' last time
//! (the usual append) knows they are new without looking them up.

use mosaic_core::cancel::{Stop, Watched};
use mosaic_core::{Result, ServiceError};
use mosaic_keys::MetaKey;
use mosaic_storage::{KeyRange, ReadView, Space, WriteTx};

/// Count, first and last timestamp (ns) of one series, how many of its keys the merge task may
/// still merge (`loose`: single points and blocks short of full), how many of those are single
/// points, and the bytes of its keys and values (what it takes before the store's own
/// compression); count 0 means no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeriesStats {
    pub count: u64,
    pub first: i64,
    pub last: i64,
    pub loose: u64,
    pub bytes: u64,
    pub singles: u64,
}

/// What a key of a series holds, for [`SeriesStats::add_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// one point
    Single,
    /// a block; `loose` when short of full
    Block { loose: bool },
}

impl SeriesStats {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48);
        let fields =
            [self.count, self.first.cast_unsigned(), self.last.cast_unsigned(), self.loose, self.bytes, self.singles];
        for n in fields {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out
    }

    /// A record of 48 bytes; of 40 as an early build of format 3 wrote (bytes, no count of single
    /// points: every loose key may be one); of 32 as written before the bytes and single points
    /// were counted (format 2: the upgrade to format 3 counts them; until then bytes read as 0 and
    /// every loose key may be a single point), or of 24 as written before blocks existed (every point its
    /// own key, so all of them loose single points).
    pub fn decode(value: &[u8]) -> Result<SeriesStats> {
        let bad = || ServiceError::Internal("a series record is not 24, 32, 40 or 48 bytes".into());
        let mut n = [0u64; 6];
        match value.len() {
            24 | 32 | 40 | 48 => {
                for (slot, chunk) in n.iter_mut().zip(value.chunks_exact(8)) {
                    *slot = u64::from_be_bytes(chunk.try_into().map_err(|_| bad())?);
                }
            }
            _ => return Err(bad()),
        }
        let [count, first, last, mut loose, bytes, mut singles] = n;
        if value.len() == 24 {
            loose = count;
        }
        if value.len() < 48 {
            singles = loose;
        }
        Ok(SeriesStats { count, first: first.cast_signed(), last: last.cast_signed(), loose, bytes, singles })
    }

    /// Counts a key stored for the series: its bytes, and what it holds.
    pub fn add_key(&mut self, key: usize, value: usize, kind: KeyKind) {
        self.bytes += (key + value) as u64;
        match kind {
            KeyKind::Single => {
                self.loose += 1;
                self.singles += 1;
            }
            KeyKind::Block { loose } => self.loose += u64::from(loose),
        }
    }

    /// Uncounts a key of the series removed (or replaced).
    pub fn remove_key(&mut self, key: usize, value: usize, kind: KeyKind) {
        self.bytes = self.bytes.saturating_sub((key + value) as u64);
        match kind {
            KeyKind::Single => {
                self.loose = self.loose.saturating_sub(1);
                self.singles = self.singles.saturating_sub(1);
            }
            KeyKind::Block { loose } => self.loose = self.loose.saturating_sub(u64::from(loose)),
        }
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

/// The record of one series as the write sees it (absent: count 0). Records are read and
/// rewritten by every write to their series, so the memtable holds many versions of each: the
/// committer's cache of committed values answers without walking them.
pub fn read(tx: &WriteTx<'_>, metric: &str, entity: &str) -> Result<SeriesStats> {
    match tx.get_cached(Space::Meta, &MetaKey::Series(metric.into(), entity.into()).encode())? {
        Some(v) => SeriesStats::decode(&v),
        None => Ok(SeriesStats::default()),
    }
}

/// Stages the record (or its removal once the series is empty), and the series' labels in the
/// series index when it gets its first point or loses its last (`had_points`: as it was).
pub fn stage(tx: &mut WriteTx<'_>, metric: &str, entity: &str, had_points: bool, stats: SeriesStats) {
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
pub fn records(view: &ReadView, metric: &str, entity: Option<&str>, stop: &Stop) -> Result<Vec<(String, SeriesStats)>> {
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
            _ => return Err(ServiceError::damaged("meta", "a series record key does not decode")),
        }
    }
    Ok(out)
}

/// A stored `ts:` key that does not decode.
pub fn corrupt(e: mosaic_keys::KeyError) -> ServiceError {
    ServiceError::damaged("ts", format!("a stored key does not decode: {e}"))
}
