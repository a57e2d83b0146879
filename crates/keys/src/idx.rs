//! `idx:{table}:{index}:{value…}:{id}` → empty; unique indexes: `idx:{table}:{index}:{value…}` → `{id}`.

use super::tuple::{Component, KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// An equality-index entry: one or more indexed values (composite indexes), then the document id
/// — except for unique indexes, whose key ends at the values and whose stored value is the id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// index name
    pub index: Cow<'a, str>,
    /// the indexed values, one per indexed field
    pub values: Vec<Component<'a>>,
    /// the document id; `None` for a unique index entry
    pub id: Option<Cow<'a, str>>,
}

impl<'a> IdxKey<'a> {
    /// A non-unique entry.
    pub fn new(table: &'a str, index: &'a str, values: Vec<Component<'a>>, id: &'a str) -> Self {
        IdxKey { table: table.into(), index: index.into(), values, id: Some(id.into()) }
    }

    /// A unique entry (the id is stored as the value).
    pub fn unique(table: &'a str, index: &'a str, values: Vec<Component<'a>>) -> Self {
        IdxKey { table: table.into(), index: index.into(), values, id: None }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Self::values_prefix_writer(&self.table, &self.index, &self.values);
        if let Some(id) = &self.id {
            w = w.str(id);
        }
        w.finish()
    }

    /// Parses key bytes of an index with `arity` indexed fields.
    pub fn decode(key: &'a [u8], arity: usize) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let table = r.next_str()?;
        let index = r.next_str()?;
        let values = (0..arity).map(|_| r.next_component()).collect::<Result<Vec<_>, _>>()?;
        let id = if r.is_empty() { None } else { Some(r.next_str()?) };
        r.end()?;
        Ok(IdxKey { table, index, values, id })
    }

    /// The prefix of every entry of one index.
    pub fn index_prefix(table: &str, index: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).finish()
    }

    /// The prefix of the entries holding exactly `values` (all of them, or a leading part of a
    /// composite index).
    pub fn values_prefix(table: &str, index: &str, values: &[Component<'_>]) -> Vec<u8> {
        Self::values_prefix_writer(table, index, values).finish()
    }

    fn values_prefix_writer(table: &str, index: &str, values: &[Component<'_>]) -> KeyWriter {
        values.iter().fold(KeyWriter::default().str(table).str(index), |w, v| w.component(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::Number;

    #[test]
    fn golden() {
        let k =
            IdxKey::new("users", "by_city", vec![Component::Str("Oslo".into()), Component::Num(Number::Int(1))], "u1");
        let bytes = k.encode();
        let mut want = b"\x07users\x00\x01\x07by_city\x00\x01\x07Oslo\x00\x01".to_vec();
        want.extend_from_slice(&[0x06, 0x04, 0x4c, 0x80, 0, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(b"\x07u1\x00\x01");
        assert_eq!(bytes, want);
        assert_eq!(IdxKey::decode(&bytes, 2).unwrap(), k);
        assert_eq!(super::super::display("idx", &bytes), "idx:users:by_city:Oslo:1:u1");

        let u = IdxKey::unique("users", "by_email", vec![Component::Str("a@b.c".into())]);
        assert_eq!(IdxKey::decode(&u.encode(), 1).unwrap(), u);
        assert!(k.encode().starts_with(&IdxKey::values_prefix("users", "by_city", &k.values[..1])));
    }
}
