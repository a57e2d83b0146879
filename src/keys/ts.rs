//! `ts:{metric}:{entity}:{timestamp}` → the point's value (and tags). Timestamps are nanoseconds
//! since the Unix epoch (negative before it), so the points of one series are in time order.

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

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
}
