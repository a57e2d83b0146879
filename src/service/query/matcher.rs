//! From candidates to results: the checks each candidate of a plan goes through (expiry, the
//! first meeting of a multikey document, a union's first branch, the filter) and its position in
//! the result order — or, for a covered plan, the result read off the index key alone. Shared by
//! pages and streams.

use super::covered::Covered;
use super::cursor::OrderKey;
use super::exec::{self, Candidate};
use super::plan::{Access, IndexScan, SortKey};
use super::shape::{MAX_MET, first_branch, order_key};
use crate::entity::FieldDict;
use crate::keys::{Component, EntityKey};
use crate::service::Result;
use crate::service::core::expiry::Expiry;
use crate::service::core::filter::Filter;
use crate::service::core::filter::project;
use crate::storage::{ReadView, Slice, Space};
use std::cmp::Ordering;
use std::collections::HashSet;

/// Where a result's document comes from.
pub(super) enum Source {
    /// the stored document
    Blob(Slice),
    /// the values of the requested fields, from the index key (a covered plan; see
    /// `Covered::kept`)
    Key(Vec<Component<'static>>),
    /// the stored document, read again by id when it is written out (a stream sorted in memory
    /// keeps only the positions of its results)
    Reread,
}

/// One result: its position in the order, and its document.
pub(super) struct Hit {
    pub key: OrderKey,
    pub source: Source,
}

/// Heap bytes of a component beyond its own size.
fn heap_bytes(c: &Component<'_>) -> usize {
    match c {
        Component::Str(s) => s.len(),
        Component::Bytes(b) => b.len(),
        _ => 0,
    }
}

impl Hit {
    /// About the memory the result takes when kept without its document (a stream sorted in
    /// memory): the struct, its id, its sort values and a covered result's values.
    pub fn kept_bytes(&self) -> usize {
        let component = std::mem::size_of::<Component<'static>>();
        let values = self.key.values.iter().map(|(c, _)| component + 8 + heap_bytes(c)).sum::<usize>();
        let source = match &self.source {
            Source::Key(vals) => vals.iter().map(|c| component + heap_bytes(c)).sum(),
            Source::Blob(b) => b.len(),
            Source::Reread => 0,
        };
        std::mem::size_of::<Hit>() + self.key.id.len() + values + source
    }
}
impl PartialEq for Hit {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Hit {}
impl Ord for Hit {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key)
    }
}
impl PartialOrd for Hit {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Checks candidates of one plan against the filter, on one snapshot.
pub(super) struct Matcher<'a> {
    view: &'a ReadView,
    table: &'a str,
    access: &'a Access,
    filter: &'a Filter,
    sort: &'a [SortKey],
    dict: &'a FieldDict,
    covered: Option<&'a Covered>,
    rules: Option<&'a Expiry>,
    now: i64,
    met: Vec<HashSet<String>>,
    /// candidates taken from the scan (multikey repeats excepted)
    pub examined: u64,
    /// documents read from storage (none for a covered plan)
    pub documents_read: u64,
}

impl<'a> Matcher<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        view: &'a ReadView,
        (rules, now): (Option<&'a Expiry>, i64),
        dict: &'a FieldDict,
        table: &'a str,
        access: &'a Access,
        filter: &'a Filter,
        sort: &'a [SortKey],
        covered: Option<&'a Covered>,
    ) -> Self {
        // expired documents not yet swept are skipped like deleted ones (by the rules and the time
        // the query was prepared with, which a covered plan's expiry set used too)
        Matcher {
            view,
            table,
            access,
            filter,
            sort,
            dict,
            covered,
            rules,
            now,
            met: Vec::new(),
            examined: 0,
            documents_read: 0,
        }
    }

    fn index_scan(&self, branch: usize) -> Option<&'a IndexScan> {
        match self.access {
            Access::Index(s) => Some(&**s),
            Access::Union(branches) => branches.get(branch).map(|(s, _)| s),
            _ => None,
        }
    }

    /// The result the candidate makes, if its document matches (and is met for the first time).
    pub(super) fn accept(&mut self, cand: Candidate) -> Result<Option<Hit>> {
        if let Some(covered) = self.covered {
            self.examined += 1;
            if covered.expired(&cand.id) {
                return Ok(None);
            }
            let values = covered.values(cand.key.as_deref(), cand.scan_value)?;
            let sorted = covered.sort_values(&values, &cand.id);
            let values_of = sorted.into_iter().zip(self.sort).map(|(v, k)| (v, k.desc)).collect();
            let kept = covered.kept(values);
            return Ok(Some(Hit { key: OrderKey { values: values_of, id: cand.id }, source: Source::Key(kept) }));
        }
        // A multikey scan meets a document once per entry, and only the first meeting counts: a
        // document met before in this scan is skipped before its blob is read (so a sorted scan
        // reads each document once, not once per array element).
        if let (Some(scan), Some(_)) = (self.index_scan(cand.branch), &cand.key)
            && scan.def.multikey
        {
            if self.met.get(cand.branch).is_some_and(|m| m.contains(&cand.id)) {
                return Ok(None);
            }
            if self.met.len() <= cand.branch {
                self.met.resize_with(cand.branch + 1, HashSet::new);
            }
            // bounded: past the cap, the blob check below alone decides
            if self.met.iter().map(HashSet::len).sum::<usize>() < MAX_MET {
                self.met[cand.branch].insert(cand.id.clone());
            }
        }
        self.examined += 1;
        let blob = match cand.blob {
            Some(b) => b,
            None => match self.view.get(Space::Entity, &EntityKey::new(self.table, &cand.id).encode())? {
                Some(b) => b,
                None => return Ok(None), // an entry without its document: `check` reports it
            },
        };
        self.documents_read += 1;
        let dict = self.dict;
        if self.rules.as_ref().map(|r| r.expired(&blob, dict, self.now)).transpose()? == Some(true) {
            return Ok(None);
        }
        if let (Some(scan), Some(key)) = (self.index_scan(cand.branch), &cand.key)
            && !exec::first_meeting(scan, key, &cand.id, &blob, dict)?
        {
            return Ok(None);
        }
        // A union takes each document from the first branch whose filter it matches.
        if let Access::Union(branches) = self.access
            && !first_branch(branches, cand.branch, &cand.id, &blob, dict)?
        {
            return Ok(None);
        }
        if !self.filter.matches(&cand.id, &blob, dict)? {
            return Ok(None);
        }
        let key = order_key(&blob, dict, self.sort, &cand.id)?;
        Ok(Some(Hit { key, source: Source::Blob(blob) }))
    }

    /// The result as JSON text: the document or its projection. A `Reread` result whose
    /// document is not in the snapshot (it was there when the result was taken) yields `None`.
    pub(super) fn render(&self, hit: &Hit, fields: Option<&[String]>) -> Result<Option<Vec<u8>>> {
        let id = hit.key.id.as_str();
        Ok(Some(match &hit.source {
            Source::Blob(blob) => project(blob, self.dict, id, fields)?,
            Source::Key(values) => match self.covered {
                Some(c) => c.project(id, values)?,
                None => {
                    return Err(crate::service::ServiceError::Internal("a key result without a covered plan".into()));
                }
            },
            Source::Reread => match self.view.get(Space::Entity, &EntityKey::new(self.table, id).encode())? {
                Some(blob) => project(&blob, self.dict, id, fields)?,
                None => return Ok(None),
            },
        }))
    }
}
