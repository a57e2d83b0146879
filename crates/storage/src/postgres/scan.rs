//! Scans over a PostgreSQL table, paged by key: each page is one query for the next keys past
//! the last one returned (`WHERE k > $last ORDER BY k LIMIT n`), so a scan holds no cursor and
//! any number of them may take turns on one connection (a search's cursors do). Pages start
//! small (most scans stop after a few keys: a last key, an existence check) and grow, unless
//! their values are large.

use super::super::error::Result;
use super::super::range::KeyRange;
use super::super::slice::Slice;
use super::super::space::Space;
use super::conn::{Bound as Side, Lease, Query, blocking};
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

/// The first page's length, and the most a page grows to.
const FIRST_PAGE: i64 = 16;
const MAX_PAGE: i64 = 4096;
/// A page of more bytes than this makes the next one a quarter as long.
const PAGE_BYTES: usize = 4 << 20;

/// A scan's pairs, in key order from either end (each end pages on its own, and neither passes
/// what the other returned).
pub(crate) struct PgIter {
    lease: Arc<Lease>,
    space: Space,
    /// the keys still to visit: what neither end has returned
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: End,
    back: End,
    /// a failed page ends the scan after its error
    failed: bool,
}

/// One end's fetched pairs and the length of its next page.
struct End {
    pairs: VecDeque<(Slice, Slice)>,
    page: i64,
    /// no key is left beyond what `pairs` holds
    exhausted: bool,
}

impl End {
    fn new() -> End {
        End { pairs: VecDeque::new(), page: FIRST_PAGE, exhausted: false }
    }
}

/// The bounds of a prefix: from the prefix itself to the first key past every key it starts.
fn prefix_bounds(prefix: Vec<u8>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut next = prefix.clone();
    while let Some(last) = next.pop() {
        if last < u8::MAX {
            next.push(last + 1);
            return (Bound::Included(prefix), Bound::Excluded(next));
        }
    }
    // empty, or all 0xff: no key past them all
    (Bound::Included(prefix), Bound::Unbounded)
}

fn side(bound: &Bound<Vec<u8>>) -> (Side, &[u8]) {
    match bound {
        Bound::Unbounded => (Side::None, &[]),
        Bound::Included(k) => (Side::Inclusive, k),
        Bound::Excluded(k) => (Side::Exclusive, k),
    }
}

impl PgIter {
    pub(crate) fn new(lease: Arc<Lease>, space: Space, range: KeyRange) -> PgIter {
        let (lower, upper) = match range {
            KeyRange::Prefix(p) => prefix_bounds(p),
            KeyRange::Between(lo, hi) => (lo, hi),
        };
        PgIter { lease, space, lower, upper, front: End::new(), back: End::new(), failed: false }
    }

    /// Fetches the next page of one end.
    fn fetch(&mut self, descending: bool) -> Result<()> {
        let (lower, lo) = side(&self.lower);
        let (upper, hi) = side(&self.upper);
        let end = if descending { &mut self.back } else { &mut self.front };
        let limit = end.page;
        let query = Query::Page { lower, upper, descending };
        let space = self.space;
        let rows = self.lease.with(|conn| {
            let statement = conn.statement(space, query)?;
            let rows = blocking(|| conn.client().query(&statement, &[&lo, &hi, &limit]));
            super::guard(conn, rows)
        })?;
        end.exhausted = (rows.len() as i64) < limit;
        let mut bytes = 0;
        for row in rows {
            let (k, v): (&[u8], &[u8]) = (row.try_get(0)?, row.try_get(1)?);
            bytes += k.len() + v.len();
            end.pairs.push_back((Slice::from(k), Slice::from(v)));
        }
        // longer pages while they are small; shorter again when their values are large
        end.page = if bytes > PAGE_BYTES { (limit / 4).max(1) } else { (limit * 4).min(MAX_PAGE) };
        Ok(())
    }

    /// The next pair of one end, if any is left between the ends.
    fn step(&mut self, descending: bool) -> Option<Result<(Slice, Slice)>> {
        if self.failed {
            return None;
        }
        let end = if descending { &self.back } else { &self.front };
        if end.pairs.is_empty()
            && !end.exhausted
            && let Err(e) = self.fetch(descending)
        {
            self.failed = true;
            return Some(Err(e));
        }
        let end = if descending { &mut self.back } else { &mut self.front };
        let (k, v) = end.pairs.pop_front()?;
        // the other end may have returned it already
        let inside = if descending {
            match &self.lower {
                Bound::Unbounded => true,
                Bound::Included(lo) => &k[..] >= lo.as_slice(),
                Bound::Excluded(lo) => &k[..] > lo.as_slice(),
            }
        } else {
            match &self.upper {
                Bound::Unbounded => true,
                Bound::Included(hi) => &k[..] <= hi.as_slice(),
                Bound::Excluded(hi) => &k[..] < hi.as_slice(),
            }
        };
        if !inside {
            let end = if descending { &mut self.back } else { &mut self.front };
            end.pairs.clear();
            end.exhausted = true;
            return None;
        }
        if descending {
            self.upper = Bound::Excluded(k.to_vec());
        } else {
            self.lower = Bound::Excluded(k.to_vec());
        }
        Some(Ok((k, v)))
    }
}

impl Iterator for PgIter {
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl DoubleEndedIterator for PgIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_before_the_first_key_past_it() {
        assert_eq!(prefix_bounds(vec![1, 2]), (Bound::Included(vec![1, 2]), Bound::Excluded(vec![1, 3])));
        assert_eq!(prefix_bounds(vec![1, 0xff]), (Bound::Included(vec![1, 0xff]), Bound::Excluded(vec![2])));
        assert_eq!(prefix_bounds(vec![0xff, 0xff]), (Bound::Included(vec![0xff, 0xff]), Bound::Unbounded));
        assert_eq!(prefix_bounds(vec![]), (Bound::Included(vec![]), Bound::Unbounded));
    }
}
