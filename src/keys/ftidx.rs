//! `ftidx:{table}:{index}:{token}:{id}` → term frequency and positions.

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// A full-text posting: one token of one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtidxKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// index name
    pub index: Cow<'a, str>,
    /// the analyzed token
    pub token: Cow<'a, str>,
    /// document id
    pub id: Cow<'a, str>,
}

impl<'a> FtidxKey<'a> {
    /// The posting of `token` in document `id`.
    pub fn new(table: &'a str, index: &'a str, token: &'a str, id: &'a str) -> Self {
        FtidxKey { table: table.into(), index: index.into(), token: token.into(), id: id.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::default().str(&self.table).str(&self.index).str(&self.token).str(&self.id).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = FtidxKey { table: r.next_str()?, index: r.next_str()?, token: r.next_str()?, id: r.next_str()? };
        r.end()?;
        Ok(k)
    }

    /// The prefix of the posting list of `token`.
    pub fn token_prefix(table: &str, index: &str, token: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).str(token).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let k = FtidxKey::new("posts", "body", "rust", "p1");
        let bytes = k.encode();
        assert_eq!(bytes, b"\x07posts\x00\x01\x07body\x00\x01\x07rust\x00\x01\x07p1\x00\x01");
        assert_eq!(FtidxKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("ftidx", &bytes), "ftidx:posts:body:rust:p1");
    }
}
