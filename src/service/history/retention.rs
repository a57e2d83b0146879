//! History retention: a table's versions past its `max_age` or beyond its `max_versions` are
//! removed by the periodic task `history_retention`, in bounded writes; a table whose history was
//! turned off loses all it kept (heads included).
//!
//! A version's age is counted from its end — when a write replaced it (the next version's start,
//! or the head's) — for that is how long ago it stopped being the document; a deletion ages from
//! its own time. `max_versions` counts the replaced versions and deletions of a document, not its
//! current version. Each run reads a table's whole history once (one prefix scan), so its cost
//! grows with what is kept, not with what is written.

use super::read::MAX_PAGE;
use crate::keys::{HistKey, table_prefix};
use crate::service::{Db, Result, ServiceError};
use crate::storage::{KeyRange, Space};
use std::sync::Arc;

/// Keys one retention write removes.
const CHUNK: usize = MAX_PAGE;

impl Db {
    /// Removes what every table's history policy no longer keeps, as of `now_us`; returns the
    /// keys removed. Stops between writes when `stop` says so (or the database closes).
    pub async fn apply_history_retention(
        self: &Arc<Self>,
        now_us: i64,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<u64> {
        let mut removed = 0;
        for table in self.catalog.tables() {
            let this = self.clone();
            let name = table.name.clone();
            // the policy as the catalog has it when the table's turn comes (not when the run
            // began), and checked again by each removal: see below
            let Some(policy) = self.catalog.table(&name).map(|t| t.history.clone()) else { continue };
            let (judged, scanned) = (policy.clone(), name.clone());
            let doomed = self
                .read(move |db| {
                    let (policy, name) = (judged, scanned);
                    let view = db.store.snapshot();
                    let keys = view.scan(Space::Hist, KeyRange::Prefix(table_prefix(&name)), false);
                    let max_age_us = match &policy {
                        Some(p) => p
                            .max_age
                            .as_deref()
                            .and_then(crate::service::duration::parse_duration_ms)
                            .map(|ms| ms * 1000),
                        None => None,
                    };
                    let mut doomed = Vec::new();
                    // one document's keys: (key, its start; for the head, the current version's)
                    let mut doc: Vec<(Vec<u8>, Start)> = Vec::new();
                    let mut current: Option<Vec<u8>> = None;
                    for item in keys {
                        let (key, value) = item?;
                        let parsed = HistKey::decode(&key).map_err(|e| {
                            ServiceError::Internal(format!("a history key of {name:?} does not decode: {e}"))
                        })?;
                        let of = HistKey::of_document(&parsed.table, &parsed.id);
                        if current.as_ref() != Some(&of) {
                            judge(&mut doc, policy.as_ref().map(|p| (max_age_us, p.max_versions)), now_us, &mut doomed);
                            current = Some(of);
                        }
                        let start = match parsed.start {
                            Some(start) => Start::Version(start),
                            None => Start::Head(super::decode_head(&value).map_or(i64::MAX, |(_, s)| s)),
                        };
                        doc.push((key.to_vec(), start));
                    }
                    judge(&mut doc, policy.as_ref().map(|p| (max_age_us, p.max_versions)), now_us, &mut doomed);
                    Ok(doomed)
                })
                .await?;
            for chunk in doomed.chunks(CHUNK) {
                if stop() || this.closing() {
                    return Ok(removed);
                }
                let keys = chunk.to_vec();
                let n = keys.len() as u64;
                let (name, policy) = (name.clone(), policy.clone());
                // Only under the policy the keys were judged by: a table whose policy changed
                // since (history turned on again after its purge, a new bound) is judged again by
                // the next run. On the committer, so no write of the new policy comes between.
                let done = self
                    .write(move |tx, db| {
                        if db.catalog.table(&name).map(|t| t.history.clone()) != Some(policy) {
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
        }
        Ok(removed)
    }
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
fn judge(
    doc: &mut Vec<(Vec<u8>, Start)>,
    bounds: Option<(Option<i64>, Option<u32>)>,
    now_us: i64,
    doomed: &mut Vec<Vec<u8>>,
) {
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
}
