//! `vec:{table}:{index}:…` → the persisted vector index; what follows the index name is the vector
//! module's own layout (`service::vectors::layout`: `node:{slot}` a node's id and vector,
//! `links:{slot}` its links, `slots` the slot count).

use super::tuple::{Component, KeyError, KeyReader, KeyWriter, Number};
use std::borrow::Cow;

/// A key of a persisted vector index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VecKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// index name
    pub index: Cow<'a, str>,
    /// the vector module's components (node ids, layers, …)
    pub rest: Vec<Component<'a>>,
}

impl<'a> VecKey<'a> {
    /// A key under one vector index.
    pub fn new(table: &'a str, index: &'a str, rest: Vec<Component<'a>>) -> Self {
        VecKey { table: table.into(), index: index.into(), rest }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        self.rest.iter().fold(KeyWriter::default().str(&self.table).str(&self.index), |w, c| w.component(c)).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let table = r.next_str()?;
        let index = r.next_str()?;
        Ok(VecKey { table, index, rest: r.rest()? })
    }

    /// The key of the node at a slot: `vec:{table}:{index}:node:{slot}`.
    pub fn node(table: &'a str, index: &'a str, slot: u32) -> Self {
        Self::new(table, index, vec![Component::Str("node".into()), Component::Num(Number::Int(slot.into()))])
    }

    /// The key of the links of the node at a slot: `vec:{table}:{index}:links:{slot}`.
    pub fn links(table: &'a str, index: &'a str, slot: u32) -> Self {
        Self::new(table, index, vec![Component::Str("links".into()), Component::Num(Number::Int(slot.into()))])
    }

    /// The key of an index's slot count: `vec:{table}:{index}:slots`.
    pub fn slots(table: &'a str, index: &'a str) -> Self {
        Self::new(table, index, vec![Component::Str("slots".into())])
    }

    /// The prefix of every key of one vector index.
    pub fn index_prefix(table: &str, index: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let k = VecKey::new("docs", "emb", vec![Component::Str("node".into()), Component::Num(Number::Int(0))]);
        let bytes = k.encode();
        assert_eq!(bytes, b"\x07docs\x00\x01\x07emb\x00\x01\x07node\x00\x01\x05");
        assert_eq!(VecKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("vec", &bytes), "vec:docs:emb:node:0");
    }
}
