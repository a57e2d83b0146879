//! `ridx:{table}:{index}:{value}:{id}` → empty; scanned in value order for ranges and ORDER BY.

use super::tuple::{Component, KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// A range-index entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RidxKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// index name
    pub index: Cow<'a, str>,
    /// the indexed value
    pub value: Component<'a>,
    /// document id
    pub id: Cow<'a, str>,
}

impl<'a> RidxKey<'a> {
    /// An entry for `value` of document `id`.
    pub fn new(table: &'a str, index: &'a str, value: Component<'a>, id: &'a str) -> Self {
        RidxKey { table: table.into(), index: index.into(), value, id: id.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::with_capacity(self.table.len() + self.index.len() + self.id.len() + 24)
            .str(&self.table)
            .str(&self.index)
            .component(&self.value)
            .str(&self.id)
            .finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = RidxKey { table: r.next_str()?, index: r.next_str()?, value: r.next_component()?, id: r.next_str()? };
        r.end()?;
        Ok(k)
    }

    /// The value and id of an entry of the index whose [`RidxKey::index_prefix`] is `prefix`:
    /// what a scan of one index needs, without reading the table and index names again. A key
    /// outside the prefix is decoded whole (and its names dropped).
    pub fn value_and_id(key: &'a [u8], prefix: &[u8]) -> Result<(Component<'a>, Cow<'a, str>), KeyError> {
        let Some(rest) = key.strip_prefix(prefix) else {
            let k = RidxKey::decode(key)?;
            return Ok((k.value, k.id));
        };
        let mut r = KeyReader::new(rest);
        let (value, id) = (r.next_component()?, r.next_str()?);
        r.end()?;
        Ok((value, id))
    }

    /// The prefix of every entry of one index.
    pub fn index_prefix(table: &str, index: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).finish()
    }

    /// The prefix of every entry holding exactly `value`: the lower bound of `>= value`, and its
    /// successor the lower bound of `> value`.
    pub fn value_prefix(table: &str, index: &str, value: &Component<'_>) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).component(value).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::Number;

    #[test]
    fn golden() {
        let k = RidxKey::new("users", "by_age", Component::Num(Number::Float(-1.5)), "bob");
        let bytes = k.encode();
        let mut want = b"\x07users\x00\x01\x07by_age\x00\x01".to_vec();
        want.extend_from_slice(&[0x04, 0xfb, 0xb3, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        want.extend_from_slice(b"\x07bob\x00\x01");
        assert_eq!(bytes, want);
        assert_eq!(RidxKey::decode(&bytes).unwrap(), k);
        let prefix = RidxKey::index_prefix("users", "by_age");
        let want = (k.value.clone(), k.id.clone());
        assert_eq!(RidxKey::value_and_id(&bytes, &prefix).unwrap(), want);
        // a key of another index is decoded whole
        assert_eq!(RidxKey::value_and_id(&bytes, &RidxKey::index_prefix("users", "by_x")).unwrap(), want);
        assert!(RidxKey::value_and_id(&bytes[..bytes.len() - 1], &prefix).is_err());
        assert_eq!(super::super::display("ridx", &bytes), "ridx:users:by_age:-1.5:bob");
    }
}
