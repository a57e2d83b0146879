//! Measurements, fields and tags as InfluxQL sees the metrics: field `value` of measurement `m`
//! is the metric `m`, field `f` the metric `m.f`. Listed, a metric's measurement is its name up to
//! the first `.` (`cpu.usage_idle` is field `usage_idle` of `cpu`); named in `FROM`, any name is a
//! measurement whose fields are the metrics it prefixes (`FROM "disk.io"` reads `disk.io` as
//! `value` and `disk.io.reads` as `reads`).

use super::super::labels::{self, Label};
use super::super::stats::{self, SeriesStats};
use super::ast::Source;
use super::cond::Filter;
use super::ctx::{Ctx, MAX_SERIES, refuse};
use mosaic_core::Result;
use std::collections::{BTreeMap, BTreeSet};

/// The field that is the metric itself.
pub const VALUE_FIELD: &str = "value";

/// Every measurement, as listed (sorted).
pub fn measurements(ctx: &Ctx<'_>) -> Vec<String> {
    let names: BTreeSet<&str> = ctx.metrics.iter().map(|m| m.split_once('.').map_or(m.as_str(), |(a, _)| a)).collect();
    names.into_iter().map(str::to_owned).collect()
}

/// The measurements `from` names (all of them when empty), sorted, each once.
pub fn resolve(ctx: &Ctx<'_>, from: &[Source]) -> Vec<String> {
    let listed = measurements(ctx);
    if from.is_empty() {
        return listed;
    }
    let mut out = BTreeSet::new();
    for source in from {
        match source {
            Source::Name(n) => {
                out.insert(n.clone());
            }
            Source::Regex(re) => out.extend(listed.iter().filter(|m| re.is_match(m)).cloned()),
        }
    }
    out.into_iter().collect()
}

/// The fields of `measurement` with their metrics, by field name.
pub fn fields(ctx: &Ctx<'_>, measurement: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let prefix = format!("{measurement}.");
    let start = ctx.metrics.partition_point(|m| m.as_str() < measurement);
    for metric in &ctx.metrics[start..] {
        if metric == measurement {
            out.insert(VALUE_FIELD.to_owned(), metric.clone());
        } else if let Some(field) = metric.strip_prefix(&prefix) {
            out.insert(field.to_owned(), metric.clone());
        } else if !metric.starts_with(measurement) {
            break;
        }
    }
    out
}

/// One series of a field: its entity, labels and record.
pub struct Series {
    pub entity: String,
    pub labels: Vec<Label>,
    pub record: SeriesStats,
}

/// The series of `metric` the filter's tag condition selects and whose points may fall in its
/// window, in entity order; `seen` counts the series read against [`MAX_SERIES`].
pub fn series(ctx: &Ctx<'_>, metric: &str, filter: &Filter, seen: &mut usize) -> Result<Vec<Series>> {
    let records = stats::records(&ctx.view, metric, None, ctx.stop)?;
    *seen += records.len();
    if *seen > MAX_SERIES {
        return Err(refuse(format!(
            "the statement reads more than {MAX_SERIES} series: narrow it with tag conditions"
        )));
    }
    let mut out = Vec::new();
    for (entity, record) in records {
        if filter.from.is_some_and(|f| record.last < f) || filter.to.is_some_and(|t| record.first >= t) {
            continue;
        }
        let labels = labels::of(&entity);
        if filter.tags.as_ref().is_none_or(|c| super::cond::eval(c, &labels)) {
            out.push(Series { entity, labels, record });
        }
    }
    Ok(out)
}

/// The series key InfluxDB lists: the measurement and the tags, `,` `=` and spaces escaped.
pub fn series_key(measurement: &str, labels: &[Label]) -> String {
    let escape = |s: &str, out: &mut String, chars: &[char]| {
        for c in s.chars() {
            if chars.contains(&c) {
                out.push('\\');
            }
            out.push(c);
        }
    };
    let mut out = String::new();
    escape(measurement, &mut out, &[',', ' ']);
    for (k, v) in labels {
        out.push(',');
        escape(k, &mut out, &[',', '=', ' ']);
        out.push('=');
        escape(v, &mut out, &[',', '=', ' ']);
    }
    out
}
