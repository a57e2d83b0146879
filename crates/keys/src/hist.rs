//! `hist:{table}:{id}` → the current version's start; `hist:{table}:{id}:{start}` → a version a
//! write replaced (or a deletion), kept while the table's history keeps it.
//!
//! The head key sorts before the document's versions (a tuple's prefix sorts first), the
//! versions by their start, so a document's whole history is one range, oldest first; a table's
//! is one prefix. Times are the committer's microseconds (see `service::history`).

use super::tuple::{KeyError, KeyReader, KeyWriter};
use std::borrow::Cow;

/// A key of the history family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistKey<'a> {
    /// table name
    pub table: Cow<'a, str>,
    /// document id
    pub id: Cow<'a, str>,
    /// a version's start (µs since the Unix epoch); `None`: the head
    pub start: Option<i64>,
}

impl<'a> HistKey<'a> {
    /// The head of document `id` of `table`: when its current version started.
    pub fn head(table: &'a str, id: &'a str) -> Self {
        HistKey { table: table.into(), id: id.into(), start: None }
    }

    /// The version of document `id` of `table` that started at `start`.
    pub fn version(table: &'a str, id: &'a str, start: i64) -> Self {
        HistKey { table: table.into(), id: id.into(), start: Some(start) }
    }

    /// The key bytes.
    pub fn encode(&self) -> Vec<u8> {
        let w = KeyWriter::default().str(&self.table).str(&self.id);
        match self.start {
            Some(start) => w.num(start),
            None => w,
        }
        .finish()
    }

    /// Parses key bytes.
    pub fn decode(key: &'a [u8]) -> Result<Self, KeyError> {
        let mut r = KeyReader::new(key);
        let (table, id) = (r.next_str()?, r.next_str()?);
        let start = if r.is_empty() { None } else { Some(r.next_i64()?) };
        r.end()?;
        Ok(HistKey { table, id, start })
    }

    /// The prefix of a document's head and versions.
    pub fn of_document(table: &str, id: &str) -> Vec<u8> {
        KeyWriter::default().str(table).str(id).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_sorts_before_the_versions_and_these_by_start() {
        let head = HistKey::head("t", "a");
        let early = HistKey::version("t", "a", -5);
        let late = HistKey::version("t", "a", 1_700_000_000_000_000);
        let next_doc = HistKey::head("t", "a\u{0}");
        let (h, e, l, n) = (head.encode(), early.encode(), late.encode(), next_doc.encode());
        assert!(h < e && e < l && l < n, "{h:?} {e:?} {l:?} {n:?}");
        let prefix = HistKey::of_document("t", "a");
        assert!(h.starts_with(&prefix) && l.starts_with(&prefix) && !n.starts_with(&prefix));
        for k in [head, early, late] {
            assert_eq!(HistKey::decode(&k.encode()).unwrap(), k);
        }
        assert_eq!(super::super::display("hist", &HistKey::version("t", "a", 7).encode()), "hist:t:a:7");
    }
}
