//! Running a plan: candidate streams from storage, the filter on each candidate, and a bounded
//! top-k by the query's order — memory grows with `limit`, never with the table.

use super::ids::{self, IdScan};
use super::plan::{Access, IndexScan, Range, Shape};
use crate::catalog::IndexKind;
use crate::entity::FieldDict;
use crate::keys::{Component, EntityKey, IdxKey, RidxKey, SidxKey, ViewKey, ViewPart, prefix_successor, sidx};
use crate::service::core::cancel::Stop;
use crate::service::core::cancel::Watched;
use crate::service::core::filter::geo::Point;
use crate::service::indexes::entries;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Scan, Slice, Space};
use std::ops::Bound;

fn internal(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::Internal(e.to_string())
}

/// One candidate: a document id, the index key it came from (none for a table scan), the value
/// of that key (for sorted scans), and the blob when the scan already read it.
pub struct Candidate {
    /// for a union: the branch whose scan produced it
    pub branch: usize,
    pub id: String,
    pub key: Option<Slice>,
    pub scan_value: Option<Component<'static>>,
    pub blob: Option<Slice>,
}

/// Keys of one index scan, range after range.
struct ScanKeys<'v> {
    view: &'v ReadView,
    space: Space,
    ranges: std::vec::IntoIter<Range>,
    reverse: bool,
    current: Option<Scan>,
}

impl Iterator for ScanKeys<'_> {
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(scan) = &mut self.current
                && let Some(item) = scan.next()
            {
                return Some(item.map_err(Into::into));
            }
            let (lo, hi) = self.ranges.next()?;
            self.current = Some(self.view.scan(self.space, KeyRange::Between(lo, hi), self.reverse));
        }
    }
}

/// Decodes an index entry into a candidate (spatial entries outside the shape are skipped).
/// `prefix` is the index's key prefix, for a range index (its keys are read past it).
fn decode_entry(scan: &IndexScan, prefix: &[u8], key: Slice, value: Slice) -> Result<Option<Candidate>> {
    let (id, scan_value) = match scan.def.kind {
        IndexKind::Range => {
            let (value, id) = RidxKey::value_and_id(&key, prefix).map_err(internal)?;
            (id.into_owned(), Some(value.into_owned()))
        }
        IndexKind::Spatial => {
            let k = SidxKey::decode(&key).map_err(internal)?;
            let (lat, lon) = sidx::decode_point(&value).map_err(internal)?;
            let inside = match (scan.shape, Point::new(lat, lon)) {
                (Some(Shape::Circle(c, m)), Some(p)) => c.distance_m(p) <= m,
                (Some(Shape::Box(b)), Some(p)) => b.contains(p),
                _ => true,
            };
            if !inside {
                return Ok(None);
            }
            (k.id.into_owned(), None)
        }
        _ => {
            let k = IdxKey::decode(&key, scan.def.fields.len()).map_err(internal)?;
            let id = match k.id {
                Some(id) => id.into_owned(),
                None => String::from_utf8(value.to_vec()).map_err(internal)?,
            };
            (id, None)
        }
    };
    Ok(Some(Candidate { branch: 0, id, key: Some(key), scan_value, blob: None }))
}

/// True when `key` is the first key of this document that the scan meets: a multikey index
/// holds several entries of one document, and only the first one in scan order counts.
pub fn first_meeting(scan: &IndexScan, key: &[u8], id: &str, blob: &[u8], dict: &FieldDict) -> Result<bool> {
    if !scan.def.multikey {
        return Ok(true);
    }
    let in_range = |k: &[u8], (lo, hi): &Range| {
        let above = match lo {
            Bound::Included(l) => k >= l.as_slice(),
            Bound::Excluded(l) => k > l.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match hi {
            Bound::Included(h) => k <= h.as_slice(),
            Bound::Excluded(h) => k < h.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    };
    let ranges: Box<dyn Iterator<Item = &Range>> =
        if scan.reverse { Box::new(scan.ranges.iter().rev()) } else { Box::new(scan.ranges.iter()) };
    if scan.def.kind == IndexKind::Range {
        // A range index's keys of one document are its values in order: encode them one at a
        // time in scan order and stop at the first inside a range, rather than building them all.
        let field = scan.def.fields.first().map(String::as_str).unwrap_or_default();
        let values = entries::field_values(blob, dict, field)?;
        for r in ranges {
            let mut in_order: Box<dyn Iterator<Item = &Component<'_>>> =
                if scan.reverse { Box::new(values.iter().rev()) } else { Box::new(values.iter()) };
            if let Some(first) = in_order
                .by_ref()
                .map(|v| RidxKey::new(&scan.def.table, &scan.def.name, v.clone(), id).encode())
                .find(|k| in_range(k, r))
            {
                return Ok(first.as_slice() == key);
            }
        }
        return Ok(false);
    }
    let mut keys: Vec<Vec<u8>> =
        entries::stored_entries(&scan.def, id, blob, dict)?.into_iter().map(|e| e.key).collect();
    if scan.reverse {
        keys.reverse();
    }
    for r in ranges {
        if let Some(first) = keys.iter().find(|k| in_range(k, r)) {
            return Ok(first.as_slice() == key);
        }
    }
    Ok(false)
}

/// The candidates of an access path, lazily.
pub fn candidates<'v>(
    view: &'v ReadView,
    table: &str,
    access: &Access,
    after_id: Option<&str>,
    stop: &'v Stop,
) -> Box<dyn Iterator<Item = Result<Candidate>> + 'v> {
    match access {
        Access::FullScan => {
            let prefix = crate::keys::table_prefix(table);
            let lo = match after_id {
                Some(id) => Bound::Excluded(EntityKey::new(table, id).encode()),
                None => Bound::Included(prefix.clone()),
            };
            let hi = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
            entity_range(view, lo, hi, stop)
        }
        Access::AsOf(at) => {
            Box::new(crate::service::history::scan::TableAsOf::new(view, table, *at, after_id, stop).map(|item| {
                let (id, blob) = item?;
                Ok(Candidate { branch: 0, id, key: None, scan_value: None, blob: Some(blob) })
            }))
        }
        Access::Index(scan) => index_candidates(view, scan, stop),
        Access::Ids(scan) => id_candidates(view, scan, stop),
        Access::View(scan) => view_candidates(view, scan, stop),
        Access::Intersect(scans) => {
            let streams: Vec<_> = scans.iter().map(|s| index_candidates(view, s, stop)).collect();
            Box::new(MergeJoin { streams, done: false })
        }
        Access::Union(branches) => {
            let scans: Vec<IndexScan> = branches.iter().map(|(s, _)| s.clone()).collect();
            Box::new(scans.into_iter().enumerate().flat_map(move |(i, scan)| {
                index_candidates(view, &scan, stop).map(move |c| c.map(|c| Candidate { branch: i, ..c }))
            }))
        }
    }
}

/// Documents read by `_id`: point reads, or one range of the entity keys.
fn id_candidates<'v>(
    view: &'v ReadView,
    scan: &IdScan,
    stop: &'v Stop,
) -> Box<dyn Iterator<Item = Result<Candidate>> + 'v> {
    let table = scan.table.clone();
    if let Some(ids) = &scan.points {
        return Box::new(ids.clone().into_iter().filter_map(move |id| {
            match view.get(Space::Entity, &EntityKey::new(&table, &id).encode()) {
                Ok(Some(blob)) => Some(Ok(Candidate { branch: 0, id, key: None, scan_value: None, blob: Some(blob) })),
                Ok(None) => None,
                Err(e) => Some(Err(e.into())),
            }
        }));
    }
    if ids::is_empty(&scan.range) {
        return Box::new(std::iter::empty());
    }
    let (lo, hi) = scan.range.clone();
    entity_range(view, lo, hi, stop)
}

/// The documents whose entity keys lie between `lo` and `hi`, in key (`_id`) order.
fn entity_range<'v>(
    view: &'v ReadView,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    stop: &'v Stop,
) -> Box<dyn Iterator<Item = Result<Candidate>> + 'v> {
    Box::new(
        Watched::new(
            view.scan(Space::Entity, KeyRange::Between(lo, hi), false).map(|r| r.map_err(ServiceError::from)),
            stop,
        )
        .map(|item| {
            let (key, blob) = item?;
            let id = EntityKey::decode(&key).map_err(internal)?.id.into_owned();
            Ok(Candidate { branch: 0, id, key: None, scan_value: None, blob: Some(blob) })
        }),
    )
}

fn index_candidates<'v>(
    view: &'v ReadView,
    scan: &IndexScan,
    stop: &'v Stop,
) -> Box<dyn Iterator<Item = Result<Candidate>> + 'v> {
    let mut ranges = scan.ranges.clone();
    if scan.reverse {
        ranges.reverse();
    }
    let keys = ScanKeys { view, space: scan.space(), ranges: ranges.into_iter(), reverse: scan.reverse, current: None };
    let keys = Watched::new(keys, stop);
    let scan = scan.clone();
    let prefix = match scan.def.kind {
        IndexKind::Range => RidxKey::index_prefix(&scan.def.table, &scan.def.name),
        _ => Vec::new(),
    };
    Box::new(keys.filter_map(move |item| match item {
        Ok((k, v)) => decode_entry(&scan, &prefix, k, v).transpose(),
        Err(e) => Some(Err(e)),
    }))
}

/// The members of a filter view, in id order (their documents are read after).
fn view_candidates<'v>(
    view: &'v ReadView,
    scan: &super::plan::ViewScan,
    stop: &'v Stop,
) -> Box<dyn Iterator<Item = Result<Candidate>> + 'v> {
    let (lo, hi) = scan.range.clone();
    let keys = view.scan(Space::View, KeyRange::Between(lo, hi), false).map(|r| r.map_err(ServiceError::from));
    Box::new(Watched::new(keys, stop).map(|item| {
        let (key, _) = item?;
        match ViewKey::decode(&key, 0).map_err(internal)?.part {
            ViewPart::Member(id) => {
                Ok(Candidate { branch: 0, id: id.into_owned(), key: None, scan_value: None, blob: None })
            }
            _ => Err(internal("a view member scan met a key that is no member")),
        }
    }))
}

/// Ids present in every stream; each stream yields strictly increasing ids.
struct MergeJoin<'v> {
    streams: Vec<Box<dyn Iterator<Item = Result<Candidate>> + 'v>>,
    done: bool,
}

impl Iterator for MergeJoin<'_> {
    type Item = Result<Candidate>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut heads: Vec<Candidate> = Vec::with_capacity(self.streams.len());
        for s in &mut self.streams {
            match s.next() {
                Some(Ok(c)) => heads.push(c),
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    self.done = true;
                    return None;
                }
            }
        }
        loop {
            let max = heads.iter().map(|c| c.id.clone()).max()?;
            if heads.iter().all(|c| c.id == max) {
                return heads.into_iter().next().map(Ok);
            }
            for (i, s) in self.streams.iter_mut().enumerate() {
                while heads[i].id < max {
                    match s.next() {
                        Some(Ok(c)) => heads[i] = c,
                        Some(Err(e)) => return Some(Err(e)),
                        None => {
                            self.done = true;
                            return None;
                        }
                    }
                }
            }
        }
    }
}
