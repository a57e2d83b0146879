//! File content as sparse, shared pages.
//!
//! The database preallocates 64 MiB journals and fsyncs them thousands of
//! times a second, so neither a size change nor an fsync may cost O(file
//! size): a missing page reads as zeros, pages are `Arc`s shared between the
//! current and the durable content (copy on write), and every change records
//! the page indices it touched so an fsync copies only those.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Page size: large enough that a 64 MiB file is ~1000 map entries, small
/// enough that copying a page on the first write after an fsync is cheap.
pub const PAGE: u64 = 64 * 1024;

type Page = Arc<Vec<u8>>;

/// The bytes of a file: its size and its non-zero pages.
///
/// Invariant: every byte at or past `size` inside a stored page is zero, so
/// growing the file again reads zeros there.
#[derive(Clone, Default, Debug)]
pub struct Content {
    pub size: u64,
    pages: BTreeMap<u64, Page>,
}

/// What an fsync makes durable: the size and the pages changed since the
/// previous one (`None` = the page is gone, i.e. zeros), taken when the fsync
/// was called so that a held fsync applies exactly that state.
#[derive(Debug, Default)]
pub struct Snapshot {
    size: u64,
    pages: Vec<(u64, Option<Page>)>,
}

impl Content {
    /// Bytes `[off, off+len)` clipped to the size.
    pub fn read(&self, off: u64, len: u64) -> Vec<u8> {
        if off >= self.size {
            return Vec::new();
        }
        let end = self.size.min(off.saturating_add(len));
        let mut out = vec![0u8; (end - off) as usize];
        let first = off / PAGE;
        let last = (end - 1) / PAGE;
        for (&idx, page) in self.pages.range(first..=last) {
            let page_start = idx * PAGE;
            let from = off.max(page_start);
            let to = end.min(page_start + PAGE);
            out[(from - off) as usize..(to - off) as usize]
                .copy_from_slice(&page[(from - page_start) as usize..(to - page_start) as usize]);
        }
        out
    }

    fn page_mut(&mut self, idx: u64) -> &mut Vec<u8> {
        let page = self.pages.entry(idx).or_insert_with(|| Arc::new(vec![0u8; PAGE as usize]));
        Arc::make_mut(page)
    }

    /// Writes `data` at `off`, growing the size if it ends past it.
    pub fn write(&mut self, off: u64, data: &[u8], dirty: &mut BTreeSet<u64>) {
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let idx = pos / PAGE;
            let page_start = idx * PAGE;
            let to = end.min(page_start + PAGE);
            let src = &data[(pos - off) as usize..(to - off) as usize];
            // An all-zero write into a hole stays a hole: keeps preallocation
            // by writing zeros as cheap as set_len.
            if self.pages.contains_key(&idx) || src.iter().any(|&b| b != 0) {
                let page = self.page_mut(idx);
                page[(pos - page_start) as usize..(to - page_start) as usize].copy_from_slice(src);
            }
            dirty.insert(idx);
            pos = to;
        }
        self.size = self.size.max(end);
    }

    /// Sets the size; shrinking drops or zeroes the pages past it.
    pub fn set_size(&mut self, size: u64, dirty: &mut BTreeSet<u64>) {
        if size < self.size {
            self.zero_range(size, self.size - size, dirty);
        }
        self.size = size;
    }

    /// Zeroes `[off, off+len)` (clipped to the pages that exist).
    pub fn zero_range(&mut self, off: u64, len: u64, dirty: &mut BTreeSet<u64>) {
        if len == 0 {
            return;
        }
        let end = off.saturating_add(len);
        let first = off / PAGE;
        let last = (end - 1) / PAGE;
        let touched: Vec<u64> = self.pages.range(first..=last).map(|(&i, _)| i).collect();
        for idx in touched {
            let page_start = idx * PAGE;
            let from = off.max(page_start);
            let to = end.min(page_start + PAGE);
            if from == page_start && to == page_start + PAGE {
                self.pages.remove(&idx);
            } else {
                self.page_mut(idx)[(from - page_start) as usize..(to - page_start) as usize].fill(0);
            }
            dirty.insert(idx);
        }
    }

    /// XORs 0xFF into one byte (bit rot); false if `off` is past the size.
    pub fn flip(&mut self, off: u64) -> bool {
        if off >= self.size {
            return false;
        }
        let idx = off / PAGE;
        self.page_mut(idx)[(off % PAGE) as usize] ^= 0xFF;
        true
    }

    /// The state an fsync called now makes durable: O(dirty pages).
    pub fn snapshot(&self, dirty: &BTreeSet<u64>) -> Snapshot {
        Snapshot { size: self.size, pages: dirty.iter().map(|&i| (i, self.pages.get(&i).cloned())).collect() }
    }

    /// Makes a snapshot this content (used on the durable side).
    pub fn apply(&mut self, snap: &Snapshot) {
        for (idx, page) in &snap.pages {
            match page {
                Some(p) => {
                    self.pages.insert(*idx, p.clone());
                }
                None => {
                    self.pages.remove(idx);
                }
            }
        }
        self.size = snap.size;
        // A page the snapshot did not list but that lies past the new size
        // cannot exist: shrinking marks those pages dirty.
    }

    /// Number of stored pages (for tests of sparseness).
    pub fn stored_pages(&self) -> usize {
        self.pages.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_grow_reads_zeros_and_stores_nothing() {
        let mut c = Content::default();
        let mut d = BTreeSet::new();
        c.set_size(64 << 20, &mut d);
        assert_eq!(c.stored_pages(), 0);
        assert_eq!(c.read(10 << 20, 8), vec![0; 8]);
        assert!(d.is_empty());
    }

    #[test]
    fn write_across_pages_and_shrink_zeroes_tail() {
        let mut c = Content::default();
        let mut d = BTreeSet::new();
        let data: Vec<u8> = (0..(PAGE + 100)).map(|i| (i % 251) as u8 + 1).collect();
        c.write(PAGE - 50, &data, &mut d);
        assert_eq!(c.read(PAGE - 50, data.len() as u64), data);
        c.set_size(PAGE, &mut d);
        c.set_size(3 * PAGE, &mut d);
        assert_eq!(c.read(PAGE, 10), vec![0; 10]);
        assert_eq!(c.read(PAGE - 50, 50), data[..50].to_vec());
    }

    #[test]
    fn snapshot_applies_only_dirty_pages() {
        let mut cur = Content::default();
        let mut dur = Content::default();
        let mut d = BTreeSet::new();
        cur.write(0, b"hello", &mut d);
        let snap = cur.snapshot(&d);
        d.clear();
        cur.write(0, b"J", &mut d);
        dur.apply(&snap);
        assert_eq!(dur.read(0, 5), b"hello");
        assert_eq!(cur.read(0, 5), b"Jello");
    }
}
