//! `ttlidx:{table}:{expire_at}:{id}` → empty; swept in time order.

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// The expiry entry of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtlKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// expiry time (milliseconds since the Unix epoch)
    pub expire_at: i64,
    /// document id
    pub id: Cow<'a, str>,
}

impl<'a> TtlKey<'a> {
    /// Document `id` of `table` expires at `expire_at`.
    pub fn new(table: &'a str, expire_at: i64, id: &'a str) -> Self {
        TtlKey { table: table.into(), expire_at, id: id.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::default().str(&self.table).num(self.expire_at).str(&self.id).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = TtlKey { table: r.next_str()?, expire_at: r.next_i64()?, id: r.next_str()? };
        r.end()?;
        Ok(k)
    }

    /// The exclusive upper bound of the entries of `table` that expire at or before `now`.
    pub fn expired_until(table: &str, now: i64) -> Vec<u8> {
        KeyWriter::default().str(table).num(now.saturating_add(1)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_sweep_bound() {
        let k = TtlKey::new("sessions", 0, "s1");
        let bytes = k.encode();
        assert_eq!(bytes, b"\x07sessions\x00\x01\x05\x07s1\x00\x01");
        assert_eq!(TtlKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("ttlidx", &bytes), "ttlidx:sessions:0:s1");
        let bound = TtlKey::expired_until("sessions", 100);
        assert!(TtlKey::new("sessions", 100, "zz").encode() < bound);
        assert!(TtlKey::new("sessions", 101, "").encode() > bound);
    }
}
