//! `entity:{table}:{id}` → the entity blob.

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// The primary key of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// document id
    pub id: Cow<'a, str>,
}

impl<'a> EntityKey<'a> {
    /// The key of document `id` in `table`.
    pub fn new(table: &'a str, id: &'a str) -> Self {
        EntityKey { table: table.into(), id: id.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::with_capacity(self.table.len() + self.id.len() + 6).str(&self.table).str(&self.id).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = EntityKey { table: r.next_str()?, id: r.next_str()? };
        r.end()?;
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let k = EntityKey::new("users", "alice");
        let bytes = k.encode();
        assert_eq!(bytes, b"\x07users\x00\x01\x07alice\x00\x01");
        assert_eq!(EntityKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("entity", &bytes), "entity:users:alice");
    }
}
