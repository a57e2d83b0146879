//! A series as stored: single points (`ts:{metric}:{entity}:{ts}`, one key each, as every write
//! makes them) and compressed blocks (`ts:{metric}:{entity}:true:{last}`, made by the merge
//! task from single points and small blocks). Every time of a series lives in exactly one key:
//! blocks never overlap each other, and no single point lies within a block's span (a write at a
//! time inside a block rewrites the block). So a read merges two time-ordered streams without
//! deduplicating, and counts stay exact.
//!
//! A block's value is the [`block`] codec's bytes (timestamps and values), preceded by their
//! length, then the tags of the points that have any: a u32 count, then per tagged point its
//! index (u32), the tags' length (u32) and their JSON.

use super::block::{self, BlockHeader};
use super::stats::{KeyKind, SeriesStats, corrupt};
use super::time::parse_bound;
use mosaic_core::{Result, ServiceError};
use mosaic_keys::{TsKey, prefix_successor};
use mosaic_storage::{KeyRange, Slice, Space, StorageError, WriteTx};
use std::ops::Bound;

/// Points of a full block: the merge task writes blocks of this many points (the last of a
/// series' run fewer), and leaves full ones alone. A key holding fewer is *loose*.
pub const FULL_BLOCK: usize = 8192;

/// Whether a key holding `count` points is loose (the merge task may merge it).
pub fn is_loose(count: usize) -> bool {
    count < FULL_BLOCK
}

/// The time window `[from, to)` in ns.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl Window {
    pub fn parse(from: Option<&str>, to: Option<&str>) -> Result<Window> {
        let from = from.map(|f| parse_bound("from", f)).transpose()?;
        let to = to.map(|t| parse_bound("to", t)).transpose()?;
        Ok(Window { from, to })
    }

    pub fn is_empty(&self) -> bool {
        matches!((self.from, self.to), (Some(f), Some(t)) if f >= t)
    }

    /// The key range of the window within the series of `prefix`.
    pub fn range(&self, metric: &str, entity: &str, prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let lower = match self.from {
            Some(f) => Bound::Included(TsKey::new(metric, entity, f).encode()),
            None => Bound::Included(prefix.to_vec()),
        };
        let upper = match self.to {
            Some(t) => Bound::Excluded(TsKey::new(metric, entity, t).encode()),
            None => prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded),
        };
        (lower, upper)
    }
}

/// A stored point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub ts: i64,
    pub value: f64,
    /// the tags' JSON, if any
    pub tags: Option<Box<[u8]>>,
}

fn bad_block(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::damaged("ts", format!("a block does not decode: {e}"))
}

/// The value of a block holding `points` (1 ..= `block::MAX_BLOCK_POINTS`, strictly increasing).
pub fn encode_block(points: &[Point]) -> Result<Vec<u8>> {
    let pairs: Vec<(i64, f64)> = points.iter().map(|p| (p.ts, p.value)).collect();
    let codec = block::encode(&pairs).map_err(bad_block)?;
    let tagged: Vec<(usize, &[u8])> =
        points.iter().enumerate().filter_map(|(i, p)| p.tags.as_deref().map(|t| (i, t))).collect();
    let mut out = Vec::with_capacity(8 + codec.len() + tagged.iter().map(|(_, t)| 8 + t.len()).sum::<usize>());
    out.extend_from_slice(&(codec.len() as u32).to_be_bytes());
    out.extend_from_slice(&codec);
    out.extend_from_slice(&(tagged.len() as u32).to_be_bytes());
    for (i, t) in tagged {
        out.extend_from_slice(&(i as u32).to_be_bytes());
        out.extend_from_slice(&(t.len() as u32).to_be_bytes());
        out.extend_from_slice(t);
    }
    Ok(out)
}

/// The codec's part of a block value, and the tags' part.
fn split_block(value: &[u8]) -> Result<(&[u8], &[u8])> {
    let (len, rest) = value.split_first_chunk::<4>().ok_or_else(|| bad_block("truncated"))?;
    rest.split_at_checked(u32::from_be_bytes(*len) as usize).ok_or_else(|| bad_block("truncated"))
}

/// The header of a block value (count, span, min, max, sum), without decoding its points.
pub fn block_header(value: &[u8]) -> Result<BlockHeader> {
    block::header(split_block(value)?.0).map_err(bad_block)
}

/// The points of a block value.
pub fn decode_block(value: &[u8]) -> Result<Vec<Point>> {
    let (codec, mut tags) = split_block(value)?;
    let mut points: Vec<Point> = block::decode(codec)
        .map_err(bad_block)?
        .into_iter()
        .map(|(ts, value)| Point { ts, value, tags: None })
        .collect();
    fn u32_at(bytes: &mut &[u8]) -> Result<usize> {
        let (n, rest) = bytes.split_first_chunk::<4>().ok_or_else(|| bad_block("truncated tags"))?;
        *bytes = rest;
        Ok(u32::from_be_bytes(*n) as usize)
    }
    let n = u32_at(&mut tags)?;
    for _ in 0..n {
        let (i, len) = (u32_at(&mut tags)?, u32_at(&mut tags)?);
        let (t, rest) = tags.split_at_checked(len).ok_or_else(|| bad_block("truncated tags"))?;
        tags = rest;
        let point = points.get_mut(i).ok_or_else(|| bad_block("tags of a point the block lacks"))?;
        point.tags = Some(t.into());
    }
    if !tags.is_empty() {
        return Err(bad_block("bytes after the tags"));
    }
    Ok(points)
}

/// A single point's stored value: the f64 (big-endian), then the tags' JSON if any.
pub fn encode_single(point: &Point) -> Vec<u8> {
    let tags = point.tags.as_deref().unwrap_or_default();
    let mut out = Vec::with_capacity(8 + tags.len());
    out.extend_from_slice(&point.value.to_be_bytes());
    out.extend_from_slice(tags);
    out
}

/// The point of a single point's key at `ts` with the stored `value` (see [`encode_single`]).
pub fn decode_single(ts: i64, value: &[u8]) -> Result<Point> {
    let (head, tags) =
        value.split_first_chunk::<8>().ok_or_else(|| ServiceError::Internal("a point value is not 8 bytes".into()))?;
    Ok(Point { ts, value: f64::from_be_bytes(*head), tags: (!tags.is_empty()).then(|| tags.into()) })
}

/// The keys of the blocks of the series of `prefix` whose last point is at or after `ts`.
pub fn blocks_range(prefix: &[u8], ts: i64) -> KeyRange {
    KeyRange::Between(Bound::Included(TsKey::blocks_from(prefix, ts)), Bound::Excluded(TsKey::blocks_end(prefix)))
}

/// The keys of the single points of the series of `prefix` from `from` (inclusive) to `before`
/// (exclusive); None: no bound.
pub fn singles_range(prefix: &[u8], from: Option<i64>, before: Option<i64>) -> KeyRange {
    let lower = match from {
        Some(ts) => TsKey::in_series(prefix, ts),
        None => TsKey::blocks_end(prefix),
    };
    let upper = match before {
        Some(ts) => Bound::Excluded(TsKey::in_series(prefix, ts)),
        None => prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded),
    };
    KeyRange::Between(Bound::Included(lower), upper)
}

/// The committed block of the series of `prefix` whose span holds `ts`: its key, value and header.
pub fn block_holding(tx: &WriteTx<'_>, prefix: &[u8], ts: i64) -> Result<Option<(Vec<u8>, Slice, BlockHeader)>> {
    let Some(item) = tx.scan(Space::Ts, blocks_range(prefix, ts)).next() else { return Ok(None) };
    let (key, value) = item?;
    let h = block_header(&value)?;
    Ok((h.first <= ts).then(|| (key.to_vec(), value, h)))
}

/// The first time of the series of `prefix`'s first committed block whose last point is at or
/// after `ts`.
pub fn first_block_from(tx: &WriteTx<'_>, prefix: &[u8], ts: i64) -> Result<Option<i64>> {
    match tx.scan(Space::Ts, blocks_range(prefix, ts)).next() {
        Some(item) => Ok(Some(block_header(&item?.1)?.first)),
        None => Ok(None),
    }
}

/// Whether the series of `prefix` has no committed key at a time within `[first, last]`: no
/// block's span meets it and no single point lies in it (points there would all be new).
/// `stats` is the series' record (a series without single points needs no look for them).
pub fn span_is_free(tx: &WriteTx<'_>, prefix: &[u8], stats: &SeriesStats, first: i64, last: i64) -> Result<bool> {
    if first_block_from(tx, prefix, first)?.is_some_and(|f| f <= last) {
        return Ok(false);
    }
    if stats.singles == 0 {
        return Ok(true);
    }
    let mut singles = tx.scan(Space::Ts, singles_range(prefix, Some(first), last.checked_add(1)));
    Ok(singles.next().transpose()?.is_none())
}

/// Stages `points` (time-ordered, distinct) as blocks of at most [`FULL_BLOCK`] points of the
/// series of `prefix`, counted in the series' `stats` (bytes, loose keys; not the points).
pub fn put_blocks(tx: &mut WriteTx<'_>, prefix: &[u8], points: &[Point], stats: &mut SeriesStats) -> Result<()> {
    for chunk in points.chunks(FULL_BLOCK) {
        let Some(last) = chunk.last() else { continue };
        let (key, value) = (TsKey::block(prefix, last.ts), encode_block(chunk)?);
        stats.add_key(key.len(), value.len(), KeyKind::Block { loose: is_loose(chunk.len()) });
        tx.put(Space::Ts, key, value);
    }
    Ok(())
}

/// Lays `new` points (time-ordered, distinct) over `old` ones (the same): a time in both takes
/// the new point. Returns the points and how many times were not in `old`.
pub fn overlay(old: Vec<Point>, new: Vec<Point>) -> (Vec<Point>, u64) {
    let mut out = Vec::with_capacity(old.len() + new.len());
    let mut added = 0;
    let mut old = old.into_iter().peekable();
    for p in new {
        while let Some(o) = old.next_if(|o| o.ts < p.ts) {
            out.push(o);
        }
        if old.next_if(|o| o.ts == p.ts).is_none() {
            added += 1;
        }
        out.push(p);
    }
    out.extend(old);
    (out, added)
}

pub type Entries<'s> = Box<dyn Iterator<Item = std::result::Result<(Slice, Slice), StorageError>> + 's>;

/// The points of one series within a window, in time order (or reversed), from a store's scan
/// (`scan(range, reverse)`: the read view's or a write's).
pub struct SeriesPoints<'s> {
    prefix_len: usize,
    window: Window,
    desc: bool,
    singles: std::iter::Peekable<Entries<'s>>,
    blocks: Entries<'s>,
    /// the points of the block being read, in the order handed out (reversed when `desc`)
    pending: std::vec::IntoIter<Point>,
    next_single: Option<Point>,
    blocks_done: bool,
}

impl<'s> SeriesPoints<'s> {
    /// `singles`: whether the series may have single points (its record says how many: a series
    /// without any is read with one range scan, of its blocks, instead of two).
    pub fn new(
        scan: impl Fn(KeyRange, bool) -> Entries<'s>,
        (metric, entity, prefix): (&str, &str, &[u8]),
        window: Window,
        desc: bool,
        singles: bool,
    ) -> Self {
        let (lower, upper) = window.range(metric, entity, prefix);
        // single points: the window's keys, past the blocks
        let past_blocks = TsKey::blocks_end(prefix);
        let lower = match lower {
            Bound::Included(k) if k < past_blocks => Bound::Included(past_blocks.clone()),
            other => other,
        };
        let singles: Entries<'s> = match singles {
            true => scan(KeyRange::Between(lower, upper), desc),
            false => Box::new(std::iter::empty()),
        };
        let singles = singles.peekable();
        // blocks whose last point is at or after the window's start (those before cannot reach it);
        // newest first, the first block ending at or after the window's end is the last that can
        // hold points of it (every later one starts after it ends)
        let from = TsKey::blocks_from(prefix, window.from.unwrap_or(i64::MIN));
        let upper = match window.to {
            Some(to) if desc => match scan(blocks_range(prefix, to), false).next() {
                Some(Ok((key, _))) => Bound::Included(key.to_vec()),
                _ => Bound::Excluded(past_blocks),
            },
            _ => Bound::Excluded(past_blocks),
        };
        let blocks = scan(KeyRange::Between(Bound::Included(from), upper), desc);
        SeriesPoints {
            prefix_len: prefix.len(),
            window,
            desc,
            singles,
            blocks,
            pending: Vec::new().into_iter(),
            next_single: None,
            blocks_done: false,
        }
    }

    fn in_window(&self, ts: i64) -> bool {
        self.window.from.is_none_or(|f| ts >= f) && self.window.to.is_none_or(|t| ts < t)
    }

    /// The next single point, if any (kept until handed out).
    fn peek_single(&mut self) -> Result<Option<i64>> {
        if self.next_single.is_none()
            && let Some(item) = self.singles.next()
        {
            let (key, value) = item?;
            let ts = TsKey::ts_after_prefix(&key, self.prefix_len).map_err(corrupt)?;
            self.next_single = Some(decode_single(ts, &value)?);
        }
        Ok(self.next_single.as_ref().map(|p| p.ts))
    }

    /// Loads the next block that holds points of the window into `pending`; false when none is
    /// left.
    fn load_block(&mut self) -> Result<bool> {
        while !self.blocks_done {
            let Some(item) = self.blocks.next() else {
                self.blocks_done = true;
                break;
            };
            let (_, value) = item?;
            let h = block_header(&value)?;
            if self.window.to.is_some_and(|t| h.first >= t) {
                // ascending, every later block starts later still; descending, earlier ones may fit
                if self.desc {
                    continue;
                }
                self.blocks_done = true;
                break;
            }
            let mut points: Vec<Point> = decode_block(&value)?.into_iter().filter(|p| self.in_window(p.ts)).collect();
            if points.is_empty() {
                continue;
            }
            if self.desc {
                points.reverse();
            }
            self.pending = points.into_iter();
            return Ok(true);
        }
        Ok(false)
    }

    fn next_point(&mut self) -> Result<Option<Point>> {
        let single = self.peek_single()?;
        if self.pending.as_slice().is_empty() && !self.load_block()? {
            return Ok(self.next_single.take());
        }
        let block_ts = self.pending.as_slice().first().map(|p| p.ts);
        let single_first = match (single, block_ts) {
            (Some(s), Some(b)) => (s < b) != self.desc,
            (Some(_), None) => true,
            _ => false,
        };
        Ok(if single_first { self.next_single.take() } else { self.pending.next() })
    }
}

impl Iterator for SeriesPoints<'_> {
    type Item = Result<Point>;
    fn next(&mut self) -> Option<Result<Point>> {
        self.next_point().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ts: i64, value: f64, tags: Option<&str>) -> Point {
        Point { ts, value, tags: tags.map(|t| t.as_bytes().into()) }
    }

    #[test]
    fn a_block_keeps_its_points_and_their_tags() {
        let points = vec![p(-5, 1.5, None), p(3, 2.0, Some("{\"a\":1}")), p(9, -0.0, None), p(10, 4.0, Some("{}"))];
        let value = encode_block(&points).unwrap();
        let back = decode_block(&value).unwrap();
        assert_eq!(back.len(), 4);
        for (a, b) in points.iter().zip(&back) {
            assert_eq!((a.ts, a.value.to_bits(), &a.tags), (b.ts, b.value.to_bits(), &b.tags));
        }
        let h = block_header(&value).unwrap();
        assert_eq!((h.count, h.first, h.last, h.sum), (4, -5, 10, 7.5));
        for cut in 0..value.len() {
            assert!(decode_block(&value[..cut]).is_err(), "cut at {cut}");
        }
    }
}
