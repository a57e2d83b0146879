//! `ts:{metric}:{entity}:{timestamp}` → the point's value (and tags). Timestamps are nanoseconds
//! since the Unix epoch (negative before it), so the points of one series are in time order.
//!
//! A series' points may also live in compressed blocks: `ts:{metric}:{entity}:true:{last}` → a
//! block (see `service::timeseries::series`), keyed by the time of its last point. The `true`
//! component sorts before every number, so a series' blocks come first, in time order, then its
//! single points; the blocks whose last point is at or after `t` start at [`TsKey::blocks_from`].

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// The component that marks a block key: `true`, which sorts before every number.
const BLOCK_TAG: u8 = 0x03;

/// One time-series point: a metric, the entity it measures, a timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsKey<'a> {
    /// metric name
    pub metric: Cow<'a, str>,
    /// the measured entity (host, sensor, …)
    pub entity: Cow<'a, str>,
    /// timestamp (nanoseconds since the Unix epoch, may be negative)
    pub ts: i64,
}

impl<'a> TsKey<'a> {
    /// The point of `entity` at `ts`.
    pub fn new(metric: &'a str, entity: &'a str, ts: i64) -> Self {
        TsKey { metric: metric.into(), entity: entity.into(), ts }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        Self::series_prefix_writer(&self.metric, &self.entity).num(self.ts).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = TsKey { metric: r.next_str()?, entity: r.next_str()?, ts: r.next_i64()? };
        r.end()?;
        Ok(k)
    }

    /// The prefix of every point of one metric.
    pub fn metric_prefix(metric: &str) -> Vec<u8> {
        KeyWriter::default().str(metric).finish()
    }

    /// The prefix of every point of one series (metric + entity).
    pub fn series_prefix(metric: &str, entity: &str) -> Vec<u8> {
        Self::series_prefix_writer(metric, entity).finish()
    }

    /// The key of the point at `ts` of the series whose prefix (see [`TsKey::series_prefix`]) is
    /// `prefix`: the prefix is encoded once for the many points of a series.
    pub fn in_series(prefix: &[u8], ts: i64) -> Vec<u8> {
        KeyWriter::after(prefix, 11).num(ts).finish()
    }

    /// The timestamp of a key of the series whose prefix (see [`TsKey::series_prefix`]) is
    /// `prefix_len` bytes long: reads only the last component.
    pub fn ts_after_prefix(key: &[u8], prefix_len: usize) -> Result<i64, KeyError> {
        let mut r = KeyReader::new(key.get(prefix_len..).ok_or(KeyError::Truncated)?);
        let ts = r.next_i64()?;
        r.end()?;
        Ok(ts)
    }

    /// The key of the block whose last point is at `last`, in the series of `prefix`.
    pub fn block(prefix: &[u8], last: i64) -> Vec<u8> {
        KeyWriter::after(prefix, 12).tag(BLOCK_TAG).num(last).finish()
    }

    /// Where the blocks of the series of `prefix` whose last point is at or after `ts` start.
    pub fn blocks_from(prefix: &[u8], ts: i64) -> Vec<u8> {
        Self::block(prefix, ts)
    }

    /// Where the blocks of the series of `prefix` end (exclusive), and its single points begin.
    pub fn blocks_end(prefix: &[u8]) -> Vec<u8> {
        KeyWriter::after(prefix, 1).tag(BLOCK_TAG + 1).finish()
    }

    /// The last time of a block key of the series whose prefix is `prefix_len` bytes long; None
    /// when the key is a single point's.
    pub fn block_after_prefix(key: &[u8], prefix_len: usize) -> Result<Option<i64>, KeyError> {
        let rest = key.get(prefix_len..).ok_or(KeyError::Truncated)?;
        let Some(body) = rest.strip_prefix(&[BLOCK_TAG]) else { return Ok(None) };
        let mut r = KeyReader::new(body);
        let last = r.next_i64()?;
        r.end()?;
        Ok(Some(last))
    }

    /// Parses the bytes of a block key: the metric, the entity and the block's last time.
    pub fn decode_block(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let (metric, entity) = (r.next_str()?, r.next_str()?);
        let prefix_len = key.len() - r.remaining().len();
        let last = Self::block_after_prefix(key, prefix_len)?.ok_or(KeyError::Truncated)?;
        Ok(TsKey { metric, entity, ts: last })
    }

    fn series_prefix_writer(metric: &str, entity: &str) -> KeyWriter {
        KeyWriter::with_capacity(metric.len() + entity.len() + 17).str(metric).str(entity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_time_order() {
        let k = TsKey::new("cpu", "host1", 1_700_000_000_000);
        let prefix = TsKey::series_prefix("cpu", "host1");
        let bytes = k.encode();
        let mut want = b"\x07cpu\x00\x01\x07host1\x00\x01".to_vec();
        // 1.7e12 = 1.546...·2^40: exponent 40 + 1100 = 0x0474
        want.extend_from_slice(&[0x06, 0x04, 0x74, 0xc5, 0xe7, 0xf2, 0xb4, 0x00, 0x00, 0x00, 0x00]);
        assert_eq!(bytes, want);
        assert_eq!(TsKey::decode(&bytes).unwrap(), k);
        assert_eq!(TsKey::ts_after_prefix(&bytes, prefix.len()).unwrap(), 1_700_000_000_000);
        assert_eq!(TsKey::in_series(&prefix, 1_700_000_000_000), bytes);
        assert_eq!(super::super::display("ts", &bytes), "ts:cpu:host1:1700000000000");
        assert!(TsKey::new("cpu", "h", -5).encode() < TsKey::new("cpu", "h", 3).encode());
    }

    #[test]
    fn blocks_sort_before_the_points_of_their_series_by_last_time() {
        let prefix = TsKey::series_prefix("cpu", "h");
        let b = |t| TsKey::block(&prefix, t);
        let end = TsKey::blocks_end(&prefix);
        assert!(b(i64::MIN) < b(-1) && b(-1) < b(0) && b(0) < b(i64::MAX) && b(i64::MAX) < end);
        assert!(end <= TsKey::new("cpu", "h", i64::MIN).encode());
        assert!(b(i64::MAX) < TsKey::new("cpu", "h", i64::MIN).encode());
        assert!(b(5) > prefix && b(5) < TsKey::series_prefix("cpu", "h\0"));
        assert_eq!(TsKey::block_after_prefix(&b(-7), prefix.len()).unwrap(), Some(-7));
        assert_eq!(TsKey::block_after_prefix(&TsKey::in_series(&prefix, 3), prefix.len()).unwrap(), None);
        assert_eq!(TsKey::decode_block(&b(9)).unwrap(), TsKey::new("cpu", "h", 9));
        assert!(TsKey::decode(&b(9)).is_err());
        assert_eq!(super::super::display("ts", &b(9)), "ts:cpu:h:true:9");
    }
}
