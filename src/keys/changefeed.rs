//! `changefeed:{seqno}` → the change event.

use super::tuple::{KeyError, KeyReader, KeyWriter};

/// The key of the change event with sequence number `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChangeKey {
    /// gap-free, strictly increasing sequence number
    pub seq: u64,
}

impl ChangeKey {
    /// The key of event `seq`.
    pub fn new(seq: u64) -> Self {
        ChangeKey { seq }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::with_capacity(11).num(self.seq).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &[u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = ChangeKey { seq: r.next_u64()? };
        r.end()?;
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_order() {
        let bytes = ChangeKey::new(1).encode();
        assert_eq!(bytes, [0x06, 0x04, 0x4c, 0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(ChangeKey::decode(&bytes).unwrap(), ChangeKey::new(1));
        assert_eq!(super::super::display("changefeed", &bytes), "changefeed:1");
        assert!(ChangeKey::new(255).encode() < ChangeKey::new(256).encode());
        assert!(ChangeKey::new(u64::MAX - 1).encode() < ChangeKey::new(u64::MAX).encode());
    }
}
