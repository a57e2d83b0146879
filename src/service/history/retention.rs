//! History retention: a table's versions past its `max_age` or beyond its `max_versions` are
//! removed by the periodic task `history_retention`, in bounded writes; a table whose history was
//! turned off loses all it kept (heads included).
//!
//! A version's age is counted from its end — when a write replaced it (the next version's start,
//! or the head's) — for that is how long ago it stopped being the document; a deletion ages from
//! its own time. `max_versions` counts the replaced versions and deletions of a document, not its
//! current version. Each run reads a table's whole history once (page by page, each page's keys
//! removed before the next is read), so its cost grows with what is kept, not with what is
//! written, and its memory with a page.

use super::History;
use super::read::MAX_PAGE;
use crate::keys::{HistKey, prefix_successor, table_prefix};
use crate::service::core::Handle;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space};
use std::ops::Bound;
use std::sync::Arc;

/// Keys one retention write removes, and about the most one page of a table's history collects.
const CHUNK: usize = MAX_PAGE;
/// Keys one page reads at most (then it ends at the next document): a page that removes little
/// still ends, so that a run's stop is heeded and a snapshot is not held for a whole table.
const SCAN_PAGE: usize = 16 * CHUNK;

/// A table's policy as [`judge`] takes it: max age in µs and max versions; `None`: history off.
type Bounds = Option<(Option<i64>, Option<u32>)>;

/// One page of a table's history, judged.
#[derive(Debug, Default)]
struct Page {
    /// the keys the policy no longer keeps (about [`CHUNK`] at most: see [`judge_page`])
    doomed: Vec<Vec<u8>>,
    /// where the next page begins (the first key of a document not judged yet); `None`: the
    /// table's history is all judged
    next: Option<Vec<u8>>,
}

impl History {
    /// Removes what every table's history policy no longer keeps, as of `now_us`; returns the
    /// keys removed. Stops between writes when `stop` says so (or the database closes).
    ///
    /// A table's history is read page by page ([`judge_page`]), each page's keys removed before
    /// the next is read: memory is bounded by a page (and one document's history), not by what
    /// a table keeps, so turning history off on a large table removes it all in bounded steps.
    pub async fn apply_history_retention(
        self: &Arc<Self>,
        now_us: i64,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<u64> {
        let mut removed = 0;
        for table in self.core.catalog.tables() {
            let name = table.name.clone();
            // the policy as the catalog has it when the table's turn comes (not when the run
            // began), and checked again by each removal: see below
            let Some(policy) = self.core.catalog.table(&name).map(|t| t.history.clone()) else { continue };
            let bounds: Bounds = policy.as_ref().map(|p| {
                let max_age_us = p
                    .max_age
                    .as_deref()
                    .and_then(crate::service::core::duration::parse_duration_ms)
                    .map(|ms| ms * 1000);
                (max_age_us, p.max_versions)
            });
            let prefix = table_prefix(&name);
            let end = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
            let mut from = Bound::Included(prefix);
            loop {
                if stop() || self.core.closing() {
                    return Ok(removed);
                }
                let range = KeyRange::Between(from, end.clone());
                let scanned = name.clone();
                let page = self
                    .read(move |history| {
                        let view = history.core.store.snapshot();
                        judge_page(view.scan(Space::Hist, range, false), &scanned, bounds, now_us, CHUNK, SCAN_PAGE)
                    })
                    .await?;
                if !page.doomed.is_empty() {
                    let n = page.doomed.len() as u64;
                    let (keys, name, policy) = (page.doomed, name.clone(), policy.clone());
                    // Only under the policy the keys were judged by: a table whose policy changed
                    // since (history turned on again after its purge, a new bound) is judged
                    // again by the next run. On the committer, so no write of the new policy
                    // comes between.
                    let done = self
                        .commit(move |tx, history| {
                            if history.core.catalog.table(&name).map(|t| t.history.clone()) != Some(policy) {
                                return Ok(false);
                            }
                            for key in keys {
                                tx.delete(Space::Hist, key);
                            }
                            Ok::<_, ServiceError>(true)
                        })
                        .await?;
                    if !done {
                        break;
                    }
                    removed += n;
                }
                match page.next {
                    Some(next) => from = Bound::Included(next),
                    None => break,
                }
            }
        }
        Ok(removed)
    }
}

/// Judges the history keys `keys` yields (a table's, in order, from a document's first key)
/// until the end, or until, at the end of a document, `chunk` keys are doomed or `scan` keys
/// were read: what the page holds is then at most `chunk` keys plus one document's.
fn judge_page<K: AsRef<[u8]>, V: AsRef<[u8]>, E>(
    keys: impl Iterator<Item = std::result::Result<(K, V), E>>,
    table: &str,
    bounds: Bounds,
    now_us: i64,
    chunk: usize,
    scan: usize,
) -> Result<Page>
where
    ServiceError: From<E>,
{
    let mut page = Page::default();
    // one document's keys: (key, its start; for the head, the current version's)
    let mut doc: Vec<(Vec<u8>, Start)> = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for (read, item) in keys.enumerate() {
        let (key, value) = item?;
        let key = key.as_ref();
        let parsed = HistKey::decode(key)
            .map_err(|e| ServiceError::damaged("hist", format!("a key of {table:?} does not decode: {e}")))?;
        let of = HistKey::of_document(&parsed.table, &parsed.id);
        if current.as_ref() != Some(&of) {
            judge(&mut doc, bounds, now_us, &mut page.doomed);
            if page.doomed.len() >= chunk || read >= scan {
                // this document is the next page's first
                page.next = Some(key.to_vec());
                return Ok(page);
            }
            current = Some(of);
        }
        let start = match parsed.start {
            Some(start) => Start::Version(start),
            None => Start::Head(super::decode_head(value.as_ref()).map_or(i64::MAX, |(_, s)| s)),
        };
        doc.push((key.to_vec(), start));
    }
    judge(&mut doc, bounds, now_us, &mut page.doomed);
    Ok(page)
}

/// Where one key of a document's history starts.
#[derive(Clone, Copy)]
enum Start {
    /// the head: the current version starts here
    Head(i64),
    /// a kept version (or deletion) starts here
    Version(i64),
}

/// Adds to `doomed` the keys of one document's history (`doc`: its keys in order, the head
/// first) that `bounds` (max age in µs, max versions; `None`: history off) no longer keeps, and
/// empties `doc`.
fn judge(doc: &mut Vec<(Vec<u8>, Start)>, bounds: Bounds, now_us: i64, doomed: &mut Vec<Vec<u8>>) {
    let keys = std::mem::take(doc);
    let Some((max_age_us, max_versions)) = bounds else {
        // history off: everything goes, the head too
        doomed.extend(keys.into_iter().map(|(k, _)| k));
        return;
    };
    let head = keys.iter().find_map(|(_, s)| match s {
        Start::Head(start) => Some(*start),
        Start::Version(_) => None,
    });
    let versions: Vec<(Vec<u8>, i64)> = keys
        .into_iter()
        .filter_map(|(k, s)| match s {
            Start::Version(start) => Some((k, start)),
            Start::Head(_) => None,
        })
        .collect();
    let over = max_versions.map_or(0, |m| versions.len().saturating_sub(m as usize));
    for (i, (key, start)) in versions.iter().enumerate() {
        let too_many = i < over;
        // a version ends where the next begins (the head's, for the last one the current version
        // replaced); a deletion with nothing after it ends at its own time
        let end = versions.get(i + 1).map(|(_, next)| *next).or(head).unwrap_or(*start);
        let too_old = max_age_us.is_some_and(|age| now_us.saturating_sub(end) > age);
        if too_many || too_old {
            doomed.push(key.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(head: Option<i64>, versions: &[i64]) -> Vec<(Vec<u8>, Start)> {
        let mut keys: Vec<(Vec<u8>, Start)> = head.map(|h| (b"h".to_vec(), Start::Head(h))).into_iter().collect();
        keys.extend(versions.iter().map(|v| (v.to_string().into_bytes(), Start::Version(*v))));
        keys
    }

    fn doomed(mut keys: Vec<(Vec<u8>, Start)>, bounds: Option<(Option<i64>, Option<u32>)>, now: i64) -> Vec<String> {
        let mut out = Vec::new();
        judge(&mut keys, bounds, now, &mut out);
        assert!(keys.is_empty());
        out.into_iter().map(|k| String::from_utf8(k).unwrap()).collect()
    }

    #[test]
    fn ages_count_from_the_end_and_counts_keep_the_newest() {
        // versions 10, 20, 30 replaced at 20, 30 and 40 (the head's start)
        let d = || doc(Some(40), &[10, 20, 30]);
        assert_eq!(doomed(d(), Some((Some(15), None)), 50), ["10", "20"]);
        assert_eq!(doomed(d(), Some((Some(10), None)), 50), ["10", "20"]);
        assert_eq!(doomed(d(), Some((Some(100), None)), 50), Vec::<String>::new());
        assert_eq!(doomed(d(), Some((None, Some(1))), 50), ["10", "20"]);
        assert_eq!(doomed(d(), Some((None, Some(5))), 50), Vec::<String>::new());
        // a deletion last (no head) ends at its own time
        assert_eq!(doomed(doc(None, &[10, 20]), Some((Some(25), None)), 50), ["10", "20"]);
        // (a deletion and the version it ended end together: both go, or neither)
        assert_eq!(doomed(doc(None, &[10, 20]), Some((Some(35), None)), 50), Vec::<String>::new());
        // history off: everything, the head included
        assert_eq!(doomed(d(), None, 50), ["h", "10", "20", "30"]);
    }

    /// A table's history as the store holds it: per document its head, then `versions`.
    fn history(docs: usize, versions: i64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut keys = Vec::new();
        for d in 0..docs {
            let id = format!("doc{d:04}");
            keys.push((HistKey::head("t", &id).encode(), super::super::encode_head(super::super::How::Created, 100)));
            for v in 0..versions {
                keys.push((HistKey::version("t", &id, v).encode(), vec![super::super::How::Updated as u8]));
            }
        }
        keys
    }

    /// Pages of `keys` judged as the task does, each from where the last one ended.
    fn pages(keys: &[(Vec<u8>, Vec<u8>)], bounds: Bounds, chunk: usize, scan: usize) -> Vec<Page> {
        let mut out: Vec<Page> = Vec::new();
        let mut from = 0;
        loop {
            let rest = keys[from..].iter().map(|(k, v)| Ok::<_, ServiceError>((k.as_slice(), v.as_slice())));
            let page = judge_page(rest, "t", bounds, 1_000, chunk, scan).unwrap();
            let next = page.next.clone();
            out.push(page);
            match next {
                Some(next) => from = keys.iter().position(|(k, _)| *k == next).unwrap(),
                None => return out,
            }
        }
    }

    #[test]
    fn a_page_holds_a_chunk_and_one_document_at_most_and_the_pages_cover_everything() {
        let keys = history(50, 3);
        // history off: every key goes, 4 per document, in pages of at most 10 + 4 keys
        let off = pages(&keys, None, 10, usize::MAX);
        assert!(off.len() > 5, "{}", off.len());
        assert!(
            off.iter().all(|p| p.doomed.len() < 10 + 4),
            "{:?}",
            off.iter().map(|p| p.doomed.len()).collect::<Vec<_>>()
        );
        let all: Vec<Vec<u8>> = off.into_iter().flat_map(|p| p.doomed).collect();
        assert_eq!(all, keys.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), "each key once, in order");
        // a policy that keeps everything: no key doomed, the pages still end after `scan` keys
        let kept = pages(&keys, Some((None, None)), 10, 40);
        assert!(kept.iter().all(|p| p.doomed.is_empty()));
        assert_eq!(kept.len(), 5, "200 keys read 40 (ten documents) a page");
        // one version kept per document: 2 of each document's 3 go
        let one = pages(&keys, Some((None, Some(1))), 10, usize::MAX);
        assert!(one.iter().all(|p| p.doomed.len() < 10 + 3));
        assert_eq!(one.iter().map(|p| p.doomed.len()).sum::<usize>(), 100);
    }
}
