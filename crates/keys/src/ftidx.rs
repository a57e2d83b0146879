//! `ftidx:{table}:{index}:{token}:{first}` → a block of postings of `token`.
//!
//! Every document a fulltext index holds has a number in it (`ftdoc` maps it back to the id; see
//! `keys::ftstat`), given when a write indexes the document: the index's next numbers, in id
//! order within the write. A token's postings are stored in blocks, not one key per token and
//! document, each keyed by the number of its first document when written (a lower bound of the
//! numbers it holds): a write splits each token's new postings, in number order, into blocks of at
//! most 128, and since its numbers are all new and larger than any before, the token's blocks in
//! key order list its documents in number order. A document's posting of a token is in the
//! block with the greatest `first` not above its number; removing it rewrites (or deletes) that
//! block, whose key never changes. The block value is the search module's
//! (`service/search/block.rs`).

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// A block of full-text postings of one token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtidxKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// index name
    pub index: Cow<'a, str>,
    /// the analyzed token
    pub token: Cow<'a, str>,
    /// the number of the block's first document when written (a lower bound of those it holds)
    pub first: u64,
}

impl<'a> FtidxKey<'a> {
    /// The block of `token` starting at document number `first`.
    pub fn new(table: &'a str, index: &'a str, token: &'a str, first: u64) -> Self {
        FtidxKey { table: table.into(), index: index.into(), token: token.into(), first }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::default().str(&self.table).str(&self.index).str(&self.token).num(self.first).finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = FtidxKey { table: r.next_str()?, index: r.next_str()?, token: r.next_str()?, first: r.next_u64()? };
        r.end()?;
        Ok(k)
    }

    /// The prefix of every block of `token`.
    pub fn token_prefix(table: &str, index: &str, token: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).str(token).finish()
    }

    /// The prefix of every block of one index.
    pub fn index_prefix(table: &str, index: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let k = FtidxKey::new("posts", "body", "rust", 7);
        let bytes = k.encode();
        assert!(bytes.starts_with(b"\x07posts\x00\x01\x07body\x00\x01\x07rust\x00\x01"));
        assert_eq!(FtidxKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("ftidx", &bytes), "ftidx:posts:body:rust:7");
        assert!(bytes.starts_with(&FtidxKey::token_prefix("posts", "body", "rust")));
    }

    #[test]
    fn blocks_of_a_token_sort_by_number() {
        let a = FtidxKey::new("t", "i", "x", 2).encode();
        let b = FtidxKey::new("t", "i", "x", 10).encode();
        let c = FtidxKey::new("t", "i", "x", 300).encode();
        assert!(a < b && b < c);
        // a token's blocks never interleave with another's that it prefixes
        let d = FtidxKey::new("t", "i", "xy", 1).encode();
        assert!(c < d || d < a);
    }
}
