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

/// The stored value of change event `seq`: the JSON object `{"seq":seq,` `body` `,"txn":txn,
/// "count":count}`, where `body` is the event's other members (`ts`, `op`, `table`, `id`,
/// `document`) as JSON text without braces, `txn` the seq of its write's first event and `count`
/// the number of events in that write. Stored as served, so a page is the values joined.
pub fn event_value(seq: u64, txn: u64, count: u64, body: &[u8]) -> Vec<u8> {
    let mut digits = itoa::Buffer::new();
    let mut out = Vec::with_capacity(body.len() + 64);
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(digits.format(seq).as_bytes());
    out.push(b',');
    out.extend_from_slice(body);
    out.extend_from_slice(b",\"txn\":");
    out.extend_from_slice(digits.format(txn).as_bytes());
    out.extend_from_slice(b",\"count\":");
    out.extend_from_slice(digits.format(count).as_bytes());
    out.push(b'}');
    out
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

    #[test]
    fn event_values_are_json_objects() {
        let v = event_value(7, 6, 2, br#""op":"delete","table":"t","id":"a""#);
        assert_eq!(v, br#"{"seq":7,"op":"delete","table":"t","id":"a","txn":6,"count":2}"#);
    }
}
