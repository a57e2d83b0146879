//! `ftidx:{table}:{index}:{token}:{block}:{first_id}` → a block of postings of `token`.
//!
//! Postings are stored in blocks, not one key per token and document: a write numbers its block
//! (`block`, one number per write that adds postings) and splits each token's postings, in `_id`
//! order, into blocks of at most a few dozen documents, each keyed by its first id. An import
//! chunk of 2000 documents thus writes one key per distinct token and block instead of one per
//! token occurrence (about 15 times fewer keys on English text). A document's postings of one
//! token are in exactly one block: the block numbered by the write that indexed it, the one with
//! the greatest `first_id` not above its id. Removing a document rewrites (or deletes) those
//! blocks; a block's key never changes, so `first_id` is a lower bound of the ids it holds.
//! The block value is the search module's (`service/search/postings.rs`).

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
    /// the number of the write that made the block
    pub block: u64,
    /// the id of the block's first document (a lower bound of the ids it holds)
    pub first: Cow<'a, str>,
}

impl<'a> FtidxKey<'a> {
    /// The block of `token` written by write `block`, starting at document `first`.
    pub fn new(table: &'a str, index: &'a str, token: &'a str, block: u64, first: &'a str) -> Self {
        FtidxKey { table: table.into(), index: index.into(), token: token.into(), block, first: first.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        KeyWriter::default()
            .str(&self.table)
            .str(&self.index)
            .str(&self.token)
            .num(self.block)
            .str(&self.first)
            .finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = FtidxKey {
            table: r.next_str()?,
            index: r.next_str()?,
            token: r.next_str()?,
            block: r.next_u64()?,
            first: r.next_str()?,
        };
        r.end()?;
        Ok(k)
    }

    /// The prefix of every block of `token`.
    pub fn token_prefix(table: &str, index: &str, token: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).str(token).finish()
    }

    /// The prefix of every block of `token` made by write `block`.
    pub fn block_prefix(table: &str, index: &str, token: &str, block: u64) -> Vec<u8> {
        KeyWriter::default().str(table).str(index).str(token).num(block).finish()
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
        let k = FtidxKey::new("posts", "body", "rust", 7, "p1");
        let bytes = k.encode();
        assert!(bytes.starts_with(b"\x07posts\x00\x01\x07body\x00\x01\x07rust\x00\x01"));
        assert!(bytes.ends_with(b"\x07p1\x00\x01"));
        assert_eq!(FtidxKey::decode(&bytes).unwrap(), k);
        assert_eq!(super::super::display("ftidx", &bytes), "ftidx:posts:body:rust:7:p1");
        assert!(bytes.starts_with(&FtidxKey::block_prefix("posts", "body", "rust", 7)));
        assert!(bytes.starts_with(&FtidxKey::token_prefix("posts", "body", "rust")));
    }

    #[test]
    fn blocks_of_a_token_sort_by_write_then_first_id() {
        let a = FtidxKey::new("t", "i", "x", 2, "zz").encode();
        let b = FtidxKey::new("t", "i", "x", 10, "a").encode();
        let c = FtidxKey::new("t", "i", "x", 10, "b").encode();
        assert!(a < b && b < c);
    }
}
