//! The changefeed's format of the events the store numbers (see [`crate::storage::EventCodec`]):
//! each under its `changefeed:{seq}` key ([`ChangeKey`]), as the JSON object it is served as
//! ([`crate::keys::changefeed::event_value`]). Handed to every [`crate::storage::Store::open`].

use crate::keys::{ChangeKey, changefeed};
use crate::storage::EventCodec;

/// The changefeed's [`EventCodec`].
pub struct Events;

impl EventCodec for Events {
    fn key(&self, seq: u64) -> Vec<u8> {
        ChangeKey::new(seq).encode()
    }

    fn value(&self, seq: u64, txn: u64, count: u64, body: &[u8]) -> Vec<u8> {
        changefeed::event_value(seq, txn, count, body)
    }

    fn seq(&self, key: &[u8]) -> Result<u64, String> {
        ChangeKey::decode(key).map(|k| k.seq).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_are_the_key_familys() {
        assert_eq!(Events.key(1), [0x06, 0x04, 0x4c, 0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Events.seq(&Events.key(u64::MAX)), Ok(u64::MAX));
        assert!(Events.seq(b"x").is_err());
        let v = Events.value(7, 6, 2, br#""op":"delete","table":"t","id":"a""#);
        assert_eq!(v, br#"{"seq":7,"op":"delete","table":"t","id":"a","txn":6,"count":2}"#);
    }
}
