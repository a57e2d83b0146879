//! What a document holds in a fulltext index, and the stored forms beside the posting blocks
//! (whose form is `block.rs`'s): a document's postings before they are numbered
//! ([`DocPostings`]), its length record (`ftdlen` values) and an index's statistics (`ftstat`).
//!
//! A length record is `doc_len num`: the document's length and its number in the index (0 while
//! the write that indexes it is still running). Removing a document analyzes its stored version
//! again for its tokens (format 4 kept them in the record, where they took 60% of the index's bytes).

use super::analyzer::Analyzer;
use super::block::{self, PostingIn};
use crate::catalog::IndexDef;
use crate::entity::{self, FieldDict, ValueRef, varint};
use crate::service::{Result, ServiceError};

/// The fields of one token in one document: `(field number, positions)`.
pub type FieldHits = super::analyzer::FieldPositions;

/// A document analyzed for one index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocTerms {
    /// tokens over every indexed field (BM25's `len(d)`)
    pub len: u64,
    /// each distinct token's fields and positions, in token order
    pub terms: Vec<(String, FieldHits)>,
}

/// A document's postings for one index, encoded before the write where the write path can (its
/// number comes at the end of the write): its length, its tokens in order, and for each token
/// its `(field, tf)` pairs and positions in the block's form, all in three flat buffers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocPostings {
    /// the document's length
    pub len: u64,
    /// its distinct tokens, in order
    pub tokens: Vec<String>,
    /// token `i`'s pairs are `pairs[spans[i].0..spans[i + 1].0]`, its positions
    /// `positions[spans[i].1..spans[i + 1].1]` (one more span than tokens)
    spans: Vec<(u32, u32)>,
    pairs: Vec<(u16, u32)>,
    positions: Vec<u8>,
}

impl DocPostings {
    /// The postings of a document with these terms.
    pub fn encode(terms: DocTerms) -> DocPostings {
        let n = terms.terms.len();
        let mut out = DocPostings {
            len: terms.len,
            tokens: Vec::with_capacity(n),
            spans: Vec::with_capacity(n + 1),
            pairs: Vec::with_capacity(n),
            positions: Vec::with_capacity(usize::try_from(terms.len).unwrap_or(0) + n),
        };
        for (token, hits) in terms.terms {
            out.spans.push((out.pairs.len() as u32, out.positions.len() as u32));
            for (field, positions) in &hits {
                out.pairs.push((*field, u32::try_from(positions.len()).unwrap_or(u32::MAX)));
                block::encode_positions(&mut out.positions, positions);
            }
            out.tokens.push(token);
        }
        out.spans.push((out.pairs.len() as u32, out.positions.len() as u32));
        out
    }

    /// Token `i`'s posting, as document `num`.
    pub fn posting(&self, i: usize, num: u64) -> PostingIn<'_> {
        let (a, b) = (self.spans[i], self.spans[i + 1]);
        PostingIn {
            num,
            len: self.len,
            fields: &self.pairs[a.0 as usize..b.0 as usize],
            positions: &self.positions[a.1 as usize..b.1 as usize],
        }
    }
}

fn damaged(what: &str) -> ServiceError {
    ServiceError::damaged("ftstat", what.to_owned())
}

/// The indexed text of one field of a stored document: its string, or its array's strings
/// (anything else holds none).
pub fn texts<'a>(blob: &'a [u8], dict: &FieldDict, field: &str) -> Result<Vec<&'a str>> {
    let path: Vec<&str> = field.split('.').collect();
    Ok(match entity::get_path(blob, dict, &path)? {
        Some(ValueRef::Str(s)) => vec![s],
        Some(ValueRef::Array(a)) => {
            let mut out = Vec::new();
            for v in a.iter() {
                if let ValueRef::Str(s) = v? {
                    out.push(s);
                }
            }
            out
        }
        _ => Vec::new(),
    })
}

/// Analyzes the indexed fields of a stored document: strings and the string elements of arrays;
/// anything else is skipped.
pub fn analyze(def: &IndexDef, analyzer: &Analyzer, blob: &[u8], dict: &FieldDict) -> Result<DocTerms> {
    let mut fields = Vec::with_capacity(def.fields.len());
    for (field_no, field) in def.fields.iter().enumerate() {
        fields.push((u16::try_from(field_no).unwrap_or(u16::MAX), texts(blob, dict, field)?));
    }
    let (len, terms) = analyzer.document(&fields);
    Ok(DocTerms { len, terms })
}

/// A decoded length record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LenRecord {
    /// the document's length
    pub len: u64,
    /// its number in the index; 0 while the write that indexes it runs
    pub num: u64,
}

impl LenRecord {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        varint::write(&mut out, self.len);
        varint::write(&mut out, self.num);
        out
    }

    /// Parses the stored form.
    pub fn decode(bytes: &[u8]) -> Result<LenRecord> {
        let mut c = Cursor(bytes);
        let (len, num) = (c.num()?, c.num()?);
        if !c.0.is_empty() {
            return Err(damaged("length record"));
        }
        Ok(LenRecord { len, num })
    }
}

/// An index's statistics (`ftstat` value: three u64 BE): `N`, the total length, and the number
/// its next document gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// documents with at least one token
    pub n: u64,
    /// their total length
    pub total: u64,
    /// the next document number (numbers start at 1)
    pub next: u64,
}

impl Stat {
    /// Parses the stored form (absent: an empty index).
    pub fn decode(bytes: Option<&[u8]>) -> Result<Stat> {
        let Some(b) = bytes else { return Ok(Stat::default()) };
        let word = |i: usize| b.get(i * 8..i * 8 + 8).and_then(|w| w.try_into().ok()).map(u64::from_be_bytes);
        match (b.len(), word(0), word(1), word(2)) {
            (24, Some(n), Some(total), Some(next)) => Ok(Stat { n, total, next }),
            _ => Err(damaged("statistics record")),
        }
    }

    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        for w in [self.n, self.total, self.next] {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn num(&mut self) -> Result<u64> {
        let (v, n) = varint::read(self.0).map_err(|_| damaged("length record"))?;
        self.0 = self.0.get(n..).ok_or_else(|| damaged("length record"))?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn damaged_records_are_errors_not_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = LenRecord::decode(&bytes);
            let _ = Stat::decode(Some(&bytes));
        }
    }

    #[test]
    fn a_documents_postings_keep_each_token_apart() {
        let terms = DocTerms {
            len: 5,
            terms: vec![("a".into(), vec![(0, vec![1, 4]), (2, vec![0])]), ("b".into(), vec![(1, vec![300])])],
        };
        let d = DocPostings::encode(terms);
        assert_eq!(d.tokens, ["a", "b"]);
        let a = d.posting(0, 7);
        assert_eq!((a.num, a.len, a.fields), (7, 5, &[(0, 2), (2, 1)][..]));
        assert_eq!(a.positions, [1, 3, 0]);
        let b = d.posting(1, 7);
        assert_eq!(b.fields, [(1, 1)]);
        assert_eq!(b.positions, [0xac, 0x02]);
    }

    #[test]
    fn length_records_and_statistics_round_trip() {
        let r = LenRecord { len: 42, num: 7 };
        assert_eq!(LenRecord::decode(&r.encode()).unwrap(), r);
        let s = Stat { n: 3, total: 99, next: 12 };
        assert_eq!(Stat::decode(Some(&s.encode())).unwrap(), s);
        assert_eq!(Stat::decode(None).unwrap(), Stat::default());
        assert!(Stat::decode(Some(&[0; 16])).is_err());
    }
}
