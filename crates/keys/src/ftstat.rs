//! `ftdlen:{table}:{index}:{id}` → document length, its number in the index and its tokens;
//! `ftdoc:{table}:{index}:{num}` → the id of the document numbered `num` (postings name
//! documents by number: a search reads the ids of its page's hits here);
//! `ftterm:{table}:{index}:{token}` → empty: the term dictionary (one key per term with postings);
//! `ftstat:{table}:{index}` → N and total length. All live in the `ftstat` keyspace, told apart by
//! their first component.

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

const DLEN: &str = "ftdlen";
const DOC: &str = "ftdoc";
const STAT: &str = "ftstat";
const TERM: &str = "ftterm";

/// A key of the full-text statistics keyspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FtStatKey<'a> {
    /// the token count of one document
    DocLen {
        /// table name
        table: Cow<'a, str>,
        /// index name
        index: Cow<'a, str>,
        /// document id
        id: Cow<'a, str>,
    },
    /// the id of a numbered document
    Doc {
        /// table name
        table: Cow<'a, str>,
        /// index name
        index: Cow<'a, str>,
        /// the document's number in the index
        num: u64,
    },
    /// a token that has postings (the term dictionary, for prefixes and typo-tolerant terms)
    Term {
        /// table name
        table: Cow<'a, str>,
        /// index name
        index: Cow<'a, str>,
        /// the analyzed token
        token: Cow<'a, str>,
    },
    /// document count and total length of one index (for BM25's average length)
    Stat {
        /// table name
        table: Cow<'a, str>,
        /// index name
        index: Cow<'a, str>,
    },
}

impl<'a> FtStatKey<'a> {
    /// The length entry of document `id`.
    pub fn doc_len(table: &'a str, index: &'a str, id: &'a str) -> Self {
        FtStatKey::DocLen { table: table.into(), index: index.into(), id: id.into() }
    }

    /// The entry naming document number `num`.
    pub fn doc(table: &'a str, index: &'a str, num: u64) -> Self {
        FtStatKey::Doc { table: table.into(), index: index.into(), num }
    }

    /// The dictionary entry of `token`.
    pub fn term(table: &'a str, index: &'a str, token: &'a str) -> Self {
        FtStatKey::Term { table: table.into(), index: index.into(), token: token.into() }
    }

    /// The statistics entry of one index.
    pub fn stat(table: &'a str, index: &'a str) -> Self {
        FtStatKey::Stat { table: table.into(), index: index.into() }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            FtStatKey::DocLen { table, index, id } => KeyWriter::default().str(DLEN).str(table).str(index).str(id),
            FtStatKey::Doc { table, index, num } => KeyWriter::default().str(DOC).str(table).str(index).num(*num),
            FtStatKey::Term { table, index, token } => KeyWriter::default().str(TERM).str(table).str(index).str(token),
            FtStatKey::Stat { table, index } => KeyWriter::default().str(STAT).str(table).str(index),
        }
        .finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let k = match r.next_str()?.as_ref() {
            DLEN => FtStatKey::DocLen { table: r.next_str()?, index: r.next_str()?, id: r.next_str()? },
            DOC => FtStatKey::Doc { table: r.next_str()?, index: r.next_str()?, num: r.next_u64()? },
            TERM => FtStatKey::Term { table: r.next_str()?, index: r.next_str()?, token: r.next_str()? },
            STAT => FtStatKey::Stat { table: r.next_str()?, index: r.next_str()? },
            _ => return Err(KeyError::UnexpectedType { expected: "ftdlen, ftdoc, ftterm or ftstat" }),
        };
        r.end()?;
        Ok(k)
    }

    /// The prefixes of every entry of `table` (lengths, numbers, terms, then statistics).
    pub fn table_prefixes(table: &str) -> [Vec<u8>; 4] {
        [DLEN, DOC, TERM, STAT].map(|tag| KeyWriter::default().str(tag).str(table).finish())
    }

    /// The prefixes of every entry of one index (lengths, numbers, terms, then statistics).
    pub fn index_prefixes(table: &str, index: &str) -> [Vec<u8>; 4] {
        [DLEN, DOC, TERM, STAT].map(|tag| KeyWriter::default().str(tag).str(table).str(index).finish())
    }

    /// The prefix of the length entries of one index.
    pub fn doc_len_prefix(table: &str, index: &str) -> Vec<u8> {
        KeyWriter::default().str(DLEN).str(table).str(index).finish()
    }

    /// The prefix of the number entries of one index.
    pub fn doc_prefix(table: &str, index: &str) -> Vec<u8> {
        KeyWriter::default().str(DOC).str(table).str(index).finish()
    }

    /// The prefix of the dictionary entries of one index whose token starts with `start`.
    pub fn term_prefix(table: &str, index: &str, start: &str) -> Vec<u8> {
        KeyWriter::default().str(TERM).str(table).str(index).str_prefix(start).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let d = FtStatKey::doc_len("posts", "body", "p1");
        let bytes = d.encode();
        assert_eq!(bytes, b"\x07ftdlen\x00\x01\x07posts\x00\x01\x07body\x00\x01\x07p1\x00\x01");
        assert_eq!(FtStatKey::decode(&bytes).unwrap(), d);
        assert_eq!(super::super::display("ftstat", &bytes), "ftdlen:posts:body:p1");
        let s = FtStatKey::stat("posts", "body");
        assert_eq!(FtStatKey::decode(&s.encode()).unwrap(), s);
        assert_eq!(super::super::display("ftstat", &s.encode()), "ftstat:posts:body");
        let n = FtStatKey::doc("posts", "body", 12);
        assert_eq!(FtStatKey::decode(&n.encode()).unwrap(), n);
        assert_eq!(super::super::display("ftstat", &n.encode()), "ftdoc:posts:body:12");
        assert!(n.encode().starts_with(&FtStatKey::doc_prefix("posts", "body")));
        let t = FtStatKey::term("posts", "body", "graph");
        assert_eq!(FtStatKey::decode(&t.encode()).unwrap(), t);
        assert_eq!(super::super::display("ftstat", &t.encode()), "ftterm:posts:body:graph");
        assert!(t.encode().starts_with(&FtStatKey::term_prefix("posts", "body", "gra")));
        assert!(!t.encode().starts_with(&FtStatKey::term_prefix("posts", "body", "grb")));
    }
}
