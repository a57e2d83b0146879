//! Aggregate `SELECT`s: each group's points (every series of the group together) gathered per
//! `GROUP BY time` interval (or one for the whole window), then each column's aggregate, then
//! `fill()` over the intervals without points.
//!
//! The aggregation of `/v1/timeseries/{metric}/aggregate` ([`super::super::aggregate`]) is not
//! reused: its buckets are aligned to the epoch with no offset, and it keeps neither the values a
//! median needs nor the moments of a standard deviation.

use super::ast::{FieldExpr, Fill, Func, Select};
use super::cond::Filter;
use super::ctx::{Ctx, MAX_BUCKETS};
use super::out::{SeriesOut, number};
use super::reads::{self, Scan};
use mosaic_core::{Result, ServiceError};
use serde_json::Value;
use std::collections::BTreeMap;

/// The running aggregate of one column in one interval.
#[derive(Debug, Clone, Default)]
pub struct Acc {
    count: u64,
    sum: f64,
    /// (time, value) of the smallest, largest, earliest and latest point
    min: Option<(i64, f64)>,
    max: Option<(i64, f64)>,
    first: Option<(i64, f64)>,
    last: Option<(i64, f64)>,
    /// Welford's running mean and sum of squared deviations
    mean: f64,
    m2: f64,
    /// every value (for the median only)
    values: Vec<f64>,
}

impl Acc {
    /// Adds a point. Series come in entity order, each in time order: on a tie the earlier series
    /// keeps `first`, `min` and `max`, the later takes `last`.
    pub fn add(&mut self, ts: i64, v: f64, keep: bool) {
        self.count += 1;
        self.sum += v;
        let delta = v - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (v - self.mean);
        if self.min.is_none_or(|(t, m)| v < m || (v == m && ts < t)) {
            self.min = Some((ts, v));
        }
        if self.max.is_none_or(|(t, m)| v > m || (v == m && ts < t)) {
            self.max = Some((ts, v));
        }
        if self.first.is_none_or(|(t, _)| ts < t) {
            self.first = Some((ts, v));
        }
        if self.last.is_none_or(|(t, _)| ts >= t) {
            self.last = Some((ts, v));
        }
        if keep {
            self.values.push(v);
        }
    }

    /// The aggregate (none without points, and for the deviation of fewer than two).
    pub fn value(&self, func: Func) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        match func {
            Func::Mean => Some(self.sum / n),
            Func::Sum => Some(self.sum),
            Func::Count => Some(n),
            Func::Min => self.min.map(|p| p.1),
            Func::Max => self.max.map(|p| p.1),
            Func::First => self.first.map(|p| p.1),
            Func::Last => self.last.map(|p| p.1),
            Func::Spread => Some(self.max?.1 - self.min?.1),
            Func::Stddev => (self.count > 1).then(|| (self.m2 / (n - 1.0)).sqrt()),
            Func::Median => {
                let mut v = self.values.clone();
                v.sort_by(f64::total_cmp);
                let mid = v.len() / 2;
                Some(if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 })
            }
        }
    }

    /// The time of the point a selector picks.
    fn time(&self, func: Func) -> Option<i64> {
        match func {
            Func::Min => self.min.map(|p| p.0),
            Func::Max => self.max.map(|p| p.0),
            Func::First => self.first.map(|p| p.0),
            Func::Last => self.last.map(|p| p.0),
            _ => None,
        }
    }
}

/// One output column: the aggregate and the index of its metric (none: no such field).
struct Col {
    func: Func,
    metric: Option<usize>,
}

pub fn run(
    ctx: &mut Ctx<'_>,
    s: &Select,
    (measurement, fields): (&str, &BTreeMap<String, String>),
    filter: &Filter,
    scan: &mut Scan,
) -> Result<Vec<SeriesOut>> {
    let mut metrics: Vec<String> = Vec::new();
    let mut index = |metric: &String| match metrics.iter().position(|m| m == metric) {
        Some(i) => i,
        None => {
            metrics.push(metric.clone());
            metrics.len() - 1
        }
    };
    let (mut columns, mut cols) = (vec!["time".to_owned()], Vec::new());
    for f in &s.fields {
        let FieldExpr::Call(func, arg) = &f.expr else { continue };
        match arg {
            Some(field) => {
                columns.push(f.alias.clone().unwrap_or_else(|| func.name().to_owned()));
                cols.push(Col { func: *func, metric: fields.get(field).map(&mut index) });
            }
            None => {
                for (field, metric) in fields {
                    columns.push(format!("{}_{field}", f.alias.as_deref().unwrap_or(func.name())));
                    cols.push(Col { func: *func, metric: Some(index(metric)) });
                }
            }
        }
    }
    // repeated names get `_1`, `_2`, as InfluxDB names them
    for i in 1..columns.len() {
        let repeats = columns[..i].iter().filter(|c| **c == columns[i]).count();
        if repeats > 0 {
            columns[i] = format!("{}_{repeats}", columns[i]);
        }
    }
    if metrics.is_empty() {
        return Ok(Vec::new());
    }
    let keep: Vec<bool> = cols.iter().map(|c| c.func == Func::Median).collect();
    // the intervals one group may gather: at most MAX_BUCKETS, and MAX_CELLS values
    let most_buckets = MAX_BUCKETS.min(MAX_CELLS / cols.len().max(1));
    let grouped = reads::group(ctx, s, &metrics, filter, scan)?;
    let mut window = reads::window(filter);
    let interval = s.interval;
    if interval.is_some() && window.to.is_none() {
        // as InfluxDB: GROUP BY time without an end ends now
        window.to = Some(ctx.now.saturating_add(1));
    }
    // the start of the interval holding `t`, counted wide: near the earliest time it can fall
    // before it, and an interval whose start cannot be told is refused (not answered off the grid)
    let start_of = |t: i64| -> Result<i64> {
        let Some((every, offset)) = interval else { return Ok(0) };
        let (wide, every, offset) = (i128::from(t), i128::from(every), i128::from(offset));
        i64::try_from((wide - offset).div_euclid(every) * every + offset).map_err(|_| {
            super::ctx::refuse(format!(
                "GROUP BY time({every}ns): the interval holding time {t} (ns) would start before the earliest time \
                 that can be represented ({}): narrow the time range",
                i64::MIN
            ))
        })
    };
    // the first and last intervals answered: those of the window's ends, or of the data's
    let first_data =
        (grouped.groups.values().flat_map(|g| g.values())).flat_map(|m| m.metrics.iter().map(|(_, r)| r.first)).min();
    let lower = window.from.or(first_data).map(start_of).transpose()?;
    let upper = window.to.map(|t| start_of(t.saturating_sub(1))).transpose()?;
    let mut buckets_answered = 0usize;
    let mut out = Vec::new();
    // what an interval's state takes in memory: its accumulators and its entry in the map
    let interval_bytes = cols.len() * std::mem::size_of::<Acc>() + 64;
    let medians = keep.iter().filter(|k| **k).count();
    // the bytes the group's state holds, released once the group is answered (at the next)
    let mut held = 0usize;
    for (values, members) in &grouped.groups {
        ctx.memory.release(std::mem::take(&mut held));
        let mut accs: BTreeMap<i64, Vec<Acc>> = BTreeMap::new();
        for (entity, member) in members {
            for (i, record) in &member.metrics {
                let points = reads::points(ctx, (&metrics[*i], entity, record), window, false, scan);
                let mut fresh = 0usize;
                let mut kept = 0usize;
                for point in points {
                    let point = point?;
                    let bucket = start_of(point.ts)?;
                    if !accs.contains_key(&bucket) {
                        if accs.len() >= most_buckets {
                            return Err(too_many(cols.len()));
                        }
                        fresh += 1;
                    }
                    let row = accs.entry(bucket).or_insert_with(|| vec![Acc::default(); cols.len()]);
                    for (c, col) in cols.iter().enumerate() {
                        if col.metric == Some(*i) {
                            row[c].add(point.ts, point.value, keep[c]);
                            kept += usize::from(keep[c]);
                        }
                    }
                    if fresh + kept >= 1024 {
                        // a median keeps every value (8 bytes)
                        let bytes = fresh * interval_bytes + kept * 8;
                        ctx.memory.charge(bytes)?;
                        held += bytes;
                        (fresh, kept) = (0, 0);
                    }
                }
                let bytes = fresh * interval_bytes + kept * 8;
                ctx.memory.charge(bytes)?;
                held += bytes;
            }
        }
        if accs.is_empty() {
            continue;
        }
        if medians > 0 {
            // a median sorts a copy of its interval's values
            let largest = accs.values().flat_map(|a| a.iter().map(|a| a.values.len())).max().unwrap_or(0);
            ctx.memory.charge(largest * 8)?;
            held += largest * 8;
        }
        // (time, a value per column)
        let mut rows: Vec<(i64, Vec<Option<f64>>)> = Vec::new();
        let row_of = |accs: &[Acc]| -> Vec<Option<f64>> {
            cols.iter().zip(accs).map(|(c, a)| c.metric.and_then(|_| a.value(c.func))).collect()
        };
        match interval {
            None => {
                let accs = &accs[&0];
                let lone_selector = (cols.len() == 1 && cols[0].func.is_selector()).then(|| accs[0].time(cols[0].func));
                let ts = lone_selector.flatten().unwrap_or(window.from.unwrap_or(0));
                rows.push((ts, row_of(accs)));
            }
            Some(_) if s.fill == Fill::None => rows.extend(accs.iter().map(|(t, a)| (*t, row_of(a)))),
            Some((every, _)) => {
                let (Some(lo), Some(hi)) = (lower, upper) else { continue };
                let n = (i128::from(hi) - i128::from(lo)) / i128::from(every) + 1;
                if n <= 0 || buckets_answered as i128 + n > most_buckets as i128 {
                    return Err(too_many(cols.len()));
                }
                let mut t = lo;
                for _ in 0..n {
                    rows.push((t, accs.get(&t).map_or_else(|| vec![None; cols.len()], |a| row_of(a))));
                    t = t.saturating_add(every);
                }
                fill(&mut rows, &cols, s.fill);
            }
        }
        buckets_answered += rows.len();
        if s.desc {
            rows.reverse();
        }
        let rows = s.rows.of(rows);
        if rows.is_empty() {
            continue;
        }
        reads::add_rows(ctx, rows.len(), cols.len() + 1)?;
        let values_out = rows
            .into_iter()
            .map(|(ts, vals)| {
                std::iter::once(ctx.epoch.time(ts))
                    .chain(vals.into_iter().map(|v| v.map_or(Value::Null, number)))
                    .collect()
            })
            .collect();
        out.push(SeriesOut {
            name: Some(measurement.to_owned()),
            tags: grouped.tags(values),
            columns: columns.clone(),
            values: values_out,
        });
    }
    ctx.memory.release(held);
    Ok(out)
}

/// Most values (intervals × columns) one statement may gather.
const MAX_CELLS: usize = 2_000_000;

fn too_many(columns: usize) -> ServiceError {
    if MAX_BUCKETS.saturating_mul(columns) > MAX_CELLS {
        return super::ctx::refuse(format!(
            "more than {MAX_CELLS} values (GROUP BY time intervals × {columns} columns): use a longer interval, a narrower time range or fewer columns"
        ));
    }
    ServiceError::TooManyBuckets(MAX_BUCKETS)
}

/// Fills the intervals without a value, column by column (rows in time order).
fn fill(rows: &mut [(i64, Vec<Option<f64>>)], cols: &[Col], how: Fill) {
    for (c, col) in cols.iter().enumerate() {
        match how {
            Fill::None => {}
            Fill::Null => {
                if col.func == Func::Count {
                    // InfluxDB counts an empty interval as 0
                    rows.iter_mut().filter(|r| r.1[c].is_none()).for_each(|r| r.1[c] = Some(0.0));
                }
            }
            Fill::Value(v) => rows.iter_mut().filter(|r| r.1[c].is_none()).for_each(|r| r.1[c] = Some(v)),
            Fill::Previous => {
                let mut previous = None;
                for r in rows.iter_mut() {
                    match r.1[c] {
                        Some(v) => previous = Some(v),
                        None => r.1[c] = previous,
                    }
                }
            }
            Fill::Linear => {
                let known: Vec<(usize, i64, f64)> =
                    rows.iter().enumerate().filter_map(|(i, r)| r.1[c].map(|v| (i, r.0, v))).collect();
                for pair in known.windows(2) {
                    let ((i, ta, a), (j, tb, b)) = (pair[0], pair[1]);
                    for row in &mut rows[i + 1..j] {
                        let share = (row.0 as f64 - ta as f64) / (tb as f64 - ta as f64);
                        row.1[c] = Some(a + (b - a) * share);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(points: &[(i64, f64)]) -> Acc {
        let mut a = Acc::default();
        for (t, v) in points {
            a.add(*t, *v, true);
        }
        a
    }

    #[test]
    fn each_aggregate_of_a_few_points() {
        let a = acc(&[(1, 2.0), (2, 4.0), (3, 4.0), (4, 4.0), (5, 5.0), (6, 5.0), (7, 7.0), (8, 9.0)]);
        let v = |f| a.value(f).unwrap();
        assert_eq!((v(Func::Mean), v(Func::Sum), v(Func::Count)), (5.0, 40.0, 8.0));
        assert_eq!((v(Func::Min), v(Func::Max), v(Func::Spread)), (2.0, 9.0, 7.0));
        assert_eq!((v(Func::First), v(Func::Last), v(Func::Median)), (2.0, 9.0, 4.5));
        assert!((v(Func::Stddev) - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(a.time(Func::Max), Some(8));
        assert_eq!(acc(&[(1, 3.0)]).value(Func::Stddev), None);
        assert_eq!(acc(&[(1, 3.0), (2, 1.0), (3, 2.0)]).value(Func::Median), Some(2.0));
        assert_eq!(Acc::default().value(Func::Count), None);
    }

    #[test]
    fn fills_of_empty_intervals() {
        let rows =
            || vec![(0, vec![Some(1.0)]), (10, vec![None]), (20, vec![None]), (30, vec![Some(4.0)]), (40, vec![None])];
        let col = [Col { func: Func::Mean, metric: Some(0) }];
        let filled = |how| {
            let mut r = rows();
            fill(&mut r, &col, how);
            r.into_iter().map(|(_, v)| v[0]).collect::<Vec<_>>()
        };
        assert_eq!(filled(Fill::Null), [Some(1.0), None, None, Some(4.0), None]);
        assert_eq!(filled(Fill::Previous), [Some(1.0), Some(1.0), Some(1.0), Some(4.0), Some(4.0)]);
        assert_eq!(filled(Fill::Linear), [Some(1.0), Some(2.0), Some(3.0), Some(4.0), None]);
        assert_eq!(filled(Fill::Value(-1.0)), [Some(1.0), Some(-1.0), Some(-1.0), Some(4.0), Some(-1.0)]);
        let mut r = rows();
        fill(&mut r, &[Col { func: Func::Count, metric: Some(0) }], Fill::Null);
        assert_eq!(r[1].1[0], Some(0.0));
    }
}
