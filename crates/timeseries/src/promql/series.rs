//! How mosaicdb's series look to PromQL, and reading them. A metric's Prometheus name
//! (`__name__`) is its name with every character Prometheus does not allow in one (anything but
//! `[a-zA-Z0-9_:]`) replaced by `_`: line protocol's field `usage_idle` of measurement `cpu` is
//! stored as the metric `cpu.usage_idle` and queried as `cpu_usage_idle`, the name Telegraf's own
//! Prometheus output gives it. A series' labels are its entity's (see [`super::super::labels`]);
//! an entity not of the `k=v,k=v` form (`server1`) is the one label `entity`.
//!
//! Selecting reads the series index for the equal matchers (as `match=` does), then checks every
//! matcher against the labels; reading a series' points goes through [`SeriesPoints`], the read
//! path of every time-series read.

use super::super::labels;
use super::super::select::Selector;
use super::super::series::{Entries, SeriesPoints, Window};
use super::super::stats::SeriesStats;
use super::limits::Budget;
use mosaic_core::cancel::{Stop, Watched};
use mosaic_core::{Result, ServiceError};
use mosaic_keys::TsKey;
use mosaic_storage::{ReadView, Space};
use promql_parser::label::{MatchOp, Matcher};

/// A series' labels, sorted by name, none with an empty value.
pub type Labels = Vec<(String, String)>;

/// The label holding the metric's Prometheus name.
pub const NAME: &str = "__name__";
/// The label of an entity that has no labels of its own.
pub const ENTITY: &str = "entity";
/// Nanoseconds per millisecond.
const NS_PER_MS: i64 = 1_000_000;

/// The Prometheus name of a metric.
pub fn prom_name(metric: &str) -> String {
    let mut out: String =
        metric.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The labels of a series of the metric named `prom` (its Prometheus name).
pub fn series_labels(prom: &str, entity: &str) -> Labels {
    let mut out = labels::of(entity);
    if out.is_empty() && !entity.is_empty() {
        out.push((ENTITY.to_owned(), entity.to_owned()));
    }
    out.retain(|(n, v)| !v.is_empty() && n != NAME);
    out.push((NAME.to_owned(), prom.to_owned()));
    out.sort_unstable();
    out
}

/// The value of label `name` (empty when the series lacks it, as in Prometheus).
pub fn value_of<'l>(labels: &'l [(String, String)], name: &str) -> &'l str {
    labels.iter().find(|(n, _)| n == name).map_or("", |(_, v)| v.as_str())
}

/// The labels without `__name__`.
pub fn drop_name(mut labels: Labels) -> Labels {
    labels.retain(|(n, _)| n != NAME);
    labels
}

/// A selected series.
#[derive(Debug, Clone)]
pub struct Selected {
    pub metric: String,
    pub entity: String,
    pub labels: Labels,
    pub record: SeriesStats,
}

/// The series every matcher selects (`name`: the selector's metric name, an equal matcher on
/// `__name__`), whose points reach into `[from, to]` (ms; None: any time), in label order.
pub fn select(
    view: &ReadView,
    metrics: &[std::sync::Arc<mosaic_catalog::MetricConfig>],
    matchers: &[Matcher],
    span: Option<(i64, i64)>,
    budget: &mut Budget,
    stop: &Stop,
) -> Result<Vec<Selected>> {
    // the index answers the equal matchers on real labels (not `__name__`, nor `entity`, which
    // an entity without labels has without the index knowing it)
    let equal: Vec<(String, String)> = matchers
        .iter()
        .filter(|m| matches!(m.op, MatchOp::Equal) && !m.value.is_empty() && m.name != NAME && m.name != ENTITY)
        .map(|m| (m.name.clone(), m.value.clone()))
        .collect();
    let selector = Selector::equal(equal);
    let mut out = Vec::new();
    for config in metrics {
        let prom = prom_name(&config.name);
        if !matchers.iter().filter(|m| m.name == NAME).all(|m| m.is_match(&prom)) {
            continue;
        }
        for (entity, record) in selector.select(view, &config.name, None, stop)? {
            if let Some((from, to)) = span
                && (record.last.div_euclid(NS_PER_MS) < from || record.first.div_euclid(NS_PER_MS) > to)
            {
                continue;
            }
            let labels = series_labels(&prom, &entity);
            if matchers.iter().all(|m| m.is_match(value_of(&labels, &m.name))) {
                budget.series(1)?;
                budget.labels(&labels)?;
                out.push(Selected { metric: config.name.clone(), entity, labels, record });
            }
        }
    }
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(out)
}

/// The points of a selected series in `[from, to]` (ms, both inclusive), in time order, each at
/// its time in ms (of points within one ms, the last).
pub fn points(
    view: &ReadView,
    series: &Selected,
    (from, to): (i64, i64),
    budget: &mut Budget,
    stop: &Stop,
) -> Result<Vec<(i64, f64)>> {
    let window =
        Window { from: Some(from.saturating_mul(NS_PER_MS)), to: Some(to.saturating_add(1).saturating_mul(NS_PER_MS)) };
    let prefix = TsKey::series_prefix(&series.metric, &series.entity);
    let scan = |range, reverse| -> Entries<'_> { Box::new(view.scan(Space::Ts, range, reverse)) };
    let read =
        SeriesPoints::new(scan, (&series.metric, &series.entity, &prefix), window, false, series.record.singles > 0);
    let mut out: Vec<(i64, f64)> = Vec::new();
    for point in Watched::new(read, stop) {
        let point = point?;
        let ms = point.ts.div_euclid(NS_PER_MS);
        match out.last_mut() {
            Some(last) if last.0 == ms => last.1 = point.value,
            _ => {
                budget.samples(1)?;
                out.push((ms, point.value));
            }
        }
    }
    Ok(out)
}

/// An error for what the subset leaves out.
pub fn unsupported(what: &str) -> ServiceError {
    ServiceError::InvalidRequest(format!(
        "{what} is not supported: mosaicdb answers a subset of PromQL (see docs/timeseries.md#prometheus-query-api)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_as_prometheus_sees_them() {
        assert_eq!(prom_name("cpu"), "cpu");
        assert_eq!(prom_name("cpu.usage_idle"), "cpu_usage_idle");
        assert_eq!(prom_name("http-requests:total"), "http_requests:total");
        assert_eq!(prom_name("9lives"), "_9lives");
        assert_eq!(prom_name("été"), "_t_");
        let own = |pairs: &[(&str, &str)]| -> Labels {
            pairs.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
        };
        assert_eq!(series_labels("cpu", "host=h1,region=eu"), own(&[(NAME, "cpu"), ("host", "h1"), ("region", "eu")]));
        assert_eq!(series_labels("cpu", "server1"), own(&[(NAME, "cpu"), (ENTITY, "server1")]));
        assert_eq!(series_labels("cpu", ""), own(&[(NAME, "cpu")]));
        assert_eq!(series_labels("cpu", "a=,b=1"), own(&[(NAME, "cpu"), ("b", "1")]));
        assert_eq!(value_of(&series_labels("cpu", "b=1"), "zone"), "");
    }
}
