//! A table as it was at a time: every document's version current then, in `_id` order, from one
//! merged walk of the table's entity keys and its history keys (both are ordered by
//! `(table, id)` alike). Queries and exports with `as_of` read through it.
//!
//! Per document:
//! - a head that started at or before the time: the current document;
//! - otherwise the last kept version that started at or before the time (a tombstone: none);
//! - no history key at all, but a document: it was written before the table kept history and
//!   never replaced since, so it is taken as current at any time (its start is unknown).
//!
//! The walk reads every history key of the table (all kept versions) and every document: its
//! cost grows with the table's size plus its kept history, whatever the filter; no index is used,
//! because indexes describe the documents as they are now.

use super::decode_head;
use super::decode_version;
use crate::keys::{EntityKey, HistKey, prefix_successor, table_prefix};
use crate::service::core::cancel::Stop;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Scan, Slice, Space};
use std::iter::Peekable;
use std::ops::Bound;

/// The documents of a table as of a time (µs), in `_id` order: `(id, blob)`.
pub struct TableAsOf<'s> {
    table: String,
    at: i64,
    entities: Peekable<Scan>,
    hist: Peekable<Scan>,
    /// checked every [`STOP_EVERY`] keys read, so that a walk finding little stops at the
    /// request's deadline or when its reader goes away
    stop: &'s Stop,
    read: u32,
}

/// Keys read between two looks at the stop.
const STOP_EVERY: u32 = 256;

impl<'s> TableAsOf<'s> {
    /// The walk over `table` as of `at`, starting after the id `after` when given.
    pub fn new(view: &ReadView, table: &str, at: i64, after: Option<&str>, stop: &'s Stop) -> TableAsOf<'s> {
        let prefix = table_prefix(table);
        let hi = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
        let (entity_lo, hist_lo) = match after {
            Some(id) => (
                Bound::Excluded(EntityKey::new(table, id).encode()),
                // every key of `id` sorts at or before its version at the end of time
                Bound::Excluded(HistKey::version(table, id, i64::MAX).encode()),
            ),
            None => (Bound::Included(prefix.clone()), Bound::Included(prefix)),
        };
        let entities = view.scan(Space::Entity, KeyRange::Between(entity_lo, hi.clone()), false).peekable();
        let hist = view.scan(Space::Hist, KeyRange::Between(hist_lo, hi), false).peekable();
        TableAsOf { table: table.to_owned(), at, entities, hist, stop, read: 0 }
    }

    fn damaged(&self, what: &str) -> ServiceError {
        ServiceError::damaged("hist", format!("the history of table {}: {what}", self.table))
    }

    /// The id of the next key of a scan (`None` at its end), or its error.
    fn peek_id(scan: &mut Peekable<Scan>, hist: bool) -> Result<Option<String>> {
        match scan.peek() {
            None => Ok(None),
            Some(Err(_)) => match scan.next() {
                Some(Err(e)) => Err(e.into()),
                _ => Err(ServiceError::Internal("a scan error went away".into())),
            },
            Some(Ok((key, _))) => {
                let id = if hist { HistKey::decode(key).map(|k| k.id) } else { EntityKey::decode(key).map(|k| k.id) };
                id.map(|id| Some(id.into_owned()))
                    .map_err(|e| ServiceError::damaged("hist", format!("a key does not decode: {e}")))
            }
        }
    }

    /// Counts a key read, and looks at the stop every so often.
    fn tick(&mut self) -> Result<()> {
        self.read = self.read.wrapping_add(1);
        if self.read.is_multiple_of(STOP_EVERY) {
            self.stop.check()?;
        }
        Ok(())
    }

    /// The next document that existed at the time, if any is left.
    fn step(&mut self) -> Result<Option<(String, Slice)>> {
        loop {
            self.tick()?;
            let entity = Self::peek_id(&mut self.entities, false)?;
            let hist = Self::peek_id(&mut self.hist, true)?;
            let id = match (entity, hist) {
                (None, None) => return Ok(None),
                (Some(e), None) => e,
                (None, Some(h)) => h,
                (Some(e), Some(h)) => e.min(h),
            };
            // the document's keys, by their bytes: its entity key, and every hist key under its
            // prefix (a tuple's string ends in a terminator, so no other id's keys share it)
            let entity_key = EntityKey::new(&self.table, &id).encode();
            let doc_prefix = HistKey::of_document(&self.table, &id);
            let current = match self.entities.next_if(|item| item.as_ref().is_ok_and(|(k, _)| **k == *entity_key)) {
                Some(item) => Some(item?.1),
                None => None,
            };
            // the document's history keys: its head first, then its versions oldest first
            let (mut head, mut kept) = (None, None);
            while let Some(item) =
                self.hist.next_if(|item| item.as_ref().is_ok_and(|(k, _)| k.starts_with(&doc_prefix)))
            {
                let (key, value) = item?;
                self.tick()?;
                match HistKey::decode(&key).map_err(|e| self.damaged(&e.to_string()))?.start {
                    None => head = Some(decode_head(&value).ok_or_else(|| self.damaged("a head does not decode"))?.1),
                    Some(start) if start <= self.at => {
                        decode_version(&value).ok_or_else(|| self.damaged("a version does not decode"))?;
                        kept = Some(value);
                    }
                    Some(_) => {}
                }
            }
            let blob = match head {
                Some(start) if start <= self.at => current,
                // no head but a document: written before the table kept history and never
                // replaced since (as `History::get_document_as_of` reads it too)
                None if current.is_some() => current,
                _ => match kept.as_deref().and_then(decode_version) {
                    Some((_, Some(blob))) => Some(Slice::from(blob)),
                    _ => None,
                },
            };
            if let Some(blob) = blob {
                return Ok(Some((id, blob)));
            }
        }
    }
}

impl Iterator for TableAsOf<'_> {
    type Item = Result<(String, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}
