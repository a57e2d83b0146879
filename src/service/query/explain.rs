//! What `explain` shows of each scan of a plan.

use super::ids::IdScan;
use super::plan::{Access, IndexScan};
use crate::catalog::IndexKind;
use crate::keys::EntityKey;
use crate::service::core::fields::ID_FIELD;
use serde::Serialize;
use std::ops::Bound;
use utoipa::ToSchema;

/// What `explain` shows of one scan.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ScanExplain {
    /// index name (`_id` for reads of the entity keys by id, the view's name for `$view`)
    pub index: String,
    /// index kind (absent for `_id` reads and view scans)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<IndexKind>,
    /// the condition it serves
    pub condition: String,
    /// the key ranges, in display form (`[lo, hi)`)
    pub ranges: Vec<[String; 2]>,
    /// `asc` or `desc`
    pub direction: &'static str,
    /// keys counted in its ranges (capped at 1000)
    pub estimated_rows: u64,
}

impl ScanExplain {
    pub(super) fn of(s: &IndexScan) -> ScanExplain {
        let show = |b: &Bound<Vec<u8>>, open: &str| match b {
            Bound::Included(k) | Bound::Excluded(k) => crate::keys::display(s.space().name(), k),
            Bound::Unbounded => open.to_owned(),
        };
        ScanExplain {
            index: s.def.name.clone(),
            kind: Some(s.def.kind),
            condition: s.condition.clone(),
            ranges: s.ranges.iter().map(|(lo, hi)| [show(lo, "-inf"), show(hi, "+inf")]).collect(),
            direction: if s.reverse { "desc" } else { "asc" },
            estimated_rows: s.estimate,
        }
    }
}

impl ScanExplain {
    pub(super) fn of_view(s: &super::plan::ViewScan) -> ScanExplain {
        let show = |b: &Bound<Vec<u8>>, open: &str| match b {
            Bound::Included(k) | Bound::Excluded(k) => crate::keys::display("view", k),
            Bound::Unbounded => open.to_owned(),
        };
        ScanExplain {
            index: s.view.clone(),
            kind: None,
            condition: format!("members of view {:?}", s.view),
            ranges: vec![[show(&s.range.0, "-inf"), show(&s.range.1, "+inf")]],
            direction: "asc",
            estimated_rows: s.estimate,
        }
    }

    pub(super) fn of_ids(s: &IdScan) -> ScanExplain {
        let show = |b: &Bound<Vec<u8>>, open: &str| match b {
            Bound::Included(k) | Bound::Excluded(k) => crate::keys::display("entity", k),
            Bound::Unbounded => open.to_owned(),
        };
        let ranges = match &s.points {
            // a point read is the one-key range [key, key]
            Some(ids) => ids
                .iter()
                .map(|id| {
                    let key = show(&Bound::Included(EntityKey::new(&s.table, id).encode()), "");
                    [key.clone(), key]
                })
                .collect(),
            None => vec![[show(&s.range.0, "-inf"), show(&s.range.1, "+inf")]],
        };
        ScanExplain {
            index: ID_FIELD.to_owned(),
            kind: None,
            condition: s.condition.clone(),
            ranges,
            direction: "asc",
            estimated_rows: s.estimate,
        }
    }
}

/// The strategy of an access path, as `explain` names it, and its scans.
pub(super) fn describe(access: &Access) -> (&'static str, Vec<ScanExplain>) {
    match access {
        Access::FullScan => ("full_scan", Vec::new()),
        Access::AsOf(_) => ("as_of_scan", Vec::new()),
        Access::Index(s) => ("index_scan", vec![ScanExplain::of(s)]),
        Access::Intersect(ss) => ("intersection", ss.iter().map(ScanExplain::of).collect()),
        Access::Union(bs) => ("union", bs.iter().map(|(s, _)| ScanExplain::of(s)).collect()),
        Access::Ids(s) if s.points.is_some() => ("id_lookup", vec![ScanExplain::of_ids(s)]),
        Access::Ids(s) => ("id_range", vec![ScanExplain::of_ids(s)]),
        Access::View(s) => ("view_scan", vec![ScanExplain::of_view(s)]),
    }
}
