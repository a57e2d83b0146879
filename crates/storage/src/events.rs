//! How the events a write appends ([`super::WriteTx::append_event`]) are stored: the store numbers
//! them (gap-free, in commit order) and stages each in [`super::Space::Changefeed`], but the
//! key and value bytes are the format of whoever reads them back, handed to [`super::Store::open`]
//! as an [`EventCodec`]. The store reads one thing back itself: at open, the sequence number of
//! the last key in that keyspace, to go on numbering after it.

/// The key and value bytes of numbered events. Keys must sort as their sequence numbers do.
pub trait EventCodec: Send + Sync {
    /// The key of the event numbered `seq`.
    fn key(&self, seq: u64) -> Vec<u8>;

    /// The stored value of the event numbered `seq`: `body` as appended, `txn` the number of its
    /// write's first event and `count` the number of events that write appended.
    fn value(&self, seq: u64, txn: u64, count: u64, body: &[u8]) -> Vec<u8>;

    /// The sequence number of an event's key, or why the key is not one.
    fn seq(&self, key: &[u8]) -> Result<u64, String>;
}

/// The codec of the store's own tests, and of the server's tests that open a store raw: the
/// number as 8 big-endian bytes, the value the three numbers then the body (`7 6 2 body`).
/// (Compiled always: a dependency is never built with `cfg(test)`.)
#[doc(hidden)]
pub struct TestEvents;

impl EventCodec for TestEvents {
    fn key(&self, seq: u64) -> Vec<u8> {
        seq.to_be_bytes().to_vec()
    }

    fn value(&self, seq: u64, txn: u64, count: u64, body: &[u8]) -> Vec<u8> {
        let mut out = format!("{seq} {txn} {count} ").into_bytes();
        out.extend_from_slice(body);
        out
    }

    fn seq(&self, key: &[u8]) -> Result<u64, String> {
        let bytes = key.try_into().map_err(|_| format!("{} bytes, not 8", key.len()))?;
        Ok(u64::from_be_bytes(bytes))
    }
}
