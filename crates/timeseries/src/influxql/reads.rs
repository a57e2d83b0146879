//! What the `SELECT`s read: the series of the fields, grouped by the `GROUP BY` tags' values, and
//! their points, within the limits.

use super::super::labels::Label;
use super::super::series::{Entries, Point, SeriesPoints, Window};
use super::super::stats::SeriesStats;
use super::ast::{GroupTags, Select};
use super::cond::{self, Filter};
use super::ctx::{Ctx, MAX_POINTS_SCANNED, MAX_ROWS, refuse};
use super::model;
use mosaic_core::Result;
use mosaic_keys::TsKey;
use mosaic_storage::Space;
use std::collections::{BTreeMap, BTreeSet};

/// One series (entity) of a group: its labels and its record in each metric read that has it.
pub struct Member {
    pub labels: Vec<Label>,
    /// (index of the metric in the statement's list, the series' record there)
    pub metrics: Vec<(usize, SeriesStats)>,
}

/// The series read, grouped.
pub struct Grouped {
    /// the `GROUP BY` tag keys (all tag keys of the series read for `GROUP BY *`)
    pub keys: Vec<String>,
    /// by the keys' values: the members, by entity
    pub groups: BTreeMap<Vec<String>, BTreeMap<String, Member>>,
}

impl Grouped {
    /// The tags of a group, as answered (none without `GROUP BY` tags).
    pub fn tags(&self, values: &[String]) -> Option<BTreeMap<String, String>> {
        (!self.keys.is_empty()).then(|| self.keys.iter().cloned().zip(values.iter().cloned()).collect())
    }
}

/// What a statement has read so far, against the limits.
#[derive(Default)]
pub struct Scan {
    /// series records read
    pub series: usize,
    /// points read
    pub points: u64,
}

/// Groups the series of `metrics` that `filter` selects by the `GROUP BY` tags.
pub fn group(ctx: &Ctx<'_>, s: &Select, metrics: &[String], filter: &Filter, scan: &mut Scan) -> Result<Grouped> {
    let mut members: BTreeMap<String, Member> = BTreeMap::new();
    for (i, metric) in metrics.iter().enumerate() {
        for series in model::series(ctx, metric, filter, &mut scan.series)? {
            let member =
                members.entry(series.entity).or_insert_with(|| Member { labels: series.labels, metrics: Vec::new() });
            member.metrics.push((i, series.record));
        }
    }
    let keys = match &s.group_tags {
        GroupTags::Keys(keys) => keys.clone(),
        GroupTags::All => {
            let all: BTreeSet<&String> = members.values().flat_map(|m| m.labels.iter().map(|(k, _)| k)).collect();
            all.into_iter().cloned().collect()
        }
    };
    let mut groups: BTreeMap<Vec<String>, BTreeMap<String, Member>> = BTreeMap::new();
    for (entity, member) in members {
        let values = keys.iter().map(|k| cond::tag(&member.labels, k).to_owned()).collect();
        groups.entry(values).or_default().insert(entity, member);
    }
    Ok(Grouped { keys, groups })
}

/// The bytes of one answered value (a JSON value).
const VALUE_BYTES: usize = 32;

/// Counts `n` rows of `columns` values answered against [`MAX_ROWS`] and the memory budget.
pub fn add_rows(ctx: &mut Ctx<'_>, n: usize, columns: usize) -> Result<()> {
    ctx.memory.charge(n.saturating_mul(24 + columns.saturating_mul(VALUE_BYTES)))?;
    ctx.rows += n;
    if ctx.rows > MAX_ROWS {
        return Err(refuse(format!(
            "the answer would hold more than {MAX_ROWS} rows: narrow the time range, add LIMIT or aggregate with GROUP BY time(…)"
        )));
    }
    Ok(())
}

/// The points of one series in `window` (reversed when `desc`), counted against
/// [`MAX_POINTS_SCANNED`].
pub fn points<'v>(
    ctx: &'v Ctx<'_>,
    (metric, entity, record): (&str, &str, &SeriesStats),
    window: Window,
    desc: bool,
    scan: &'v mut Scan,
) -> impl Iterator<Item = Result<Point>> + 'v {
    let prefix = TsKey::series_prefix(metric, entity);
    let view = &ctx.view;
    let read = move |range, reverse| -> Entries<'v> { Box::new(view.scan(Space::Ts, range, reverse)) };
    let points = SeriesPoints::new(read, (metric, entity, &prefix), window, desc, record.singles > 0);
    points.map(move |p| {
        scan.points += 1;
        if scan.points.is_multiple_of(4096) {
            ctx.stop.check()?;
        }
        if scan.points > MAX_POINTS_SCANNED {
            return Err(refuse(format!(
                "the statement reads more than {MAX_POINTS_SCANNED} points: narrow the time range or the series"
            )));
        }
        p
    })
}

/// The read window of a filter.
pub fn window(filter: &Filter) -> Window {
    Window { from: filter.from, to: filter.to }
}
