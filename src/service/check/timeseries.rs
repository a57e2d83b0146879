//! The time-series part of `check`: every point decodes and belongs to a configured metric, and
//! every series' record (`meta:series:`) holds exactly its points' count, first and last time.

use super::report::{CheckReport, defs_in, internal, show};
use crate::catalog::MetricConfig;
use crate::keys::{MetaKey, TsKey};
use crate::service::Result;
use crate::service::stop::{Stop, Watched};
use crate::service::timeseries::stats::SeriesStats;
use crate::storage::{KeyRange, ReadView, Space};
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn check_points(view: &ReadView, report: &mut CheckReport, stop: &Stop) -> Result<()> {
    let metrics: BTreeSet<String> =
        defs_in::<MetricConfig>(view, MetaKey::kind_prefix("metric"))?.into_iter().map(|m| m.name).collect();
    // what the points say of each series
    let mut found: BTreeMap<(String, String), SeriesStats> = BTreeMap::new();
    let scan = view.scan(Space::Ts, KeyRange::Prefix(Vec::new()), false).map(|r| r.map_err(internal));
    for item in Watched::new(scan, stop) {
        let (key, value) = item?;
        report.checked.points += 1;
        let point = match TsKey::decode(&key) {
            Ok(p) => p,
            Err(e) => {
                report.problem("undecodable_point", show(Space::Ts, &key), e.to_string());
                continue;
            }
        };
        let tags_ok =
            value.get(8..).is_some_and(|t| t.is_empty() || serde_json::from_slice::<serde_json::Value>(t).is_ok());
        if !tags_ok {
            report.problem(
                "undecodable_point",
                show(Space::Ts, &key),
                "the value is not an f64 with optional JSON tags",
            );
        }
        if !metrics.contains(point.metric.as_ref()) {
            report.problem(
                "orphan_entry",
                show(Space::Ts, &key),
                format!("metric {:?} is not configured", point.metric),
            );
        }
        let stats = found.entry((point.metric.into_owned(), point.entity.into_owned())).or_default();
        stats.include(point.ts);
        stats.count += 1;
    }
    let scan =
        view.scan(Space::Meta, KeyRange::Prefix(MetaKey::kind_prefix("series")), false).map(|r| r.map_err(internal));
    for item in Watched::new(scan, stop) {
        let (key, value) = item?;
        let Ok(MetaKey::Series(metric, entity)) = MetaKey::decode(&key) else {
            report.problem("undecodable_point", show(Space::Meta, &key), "a series record key does not decode");
            continue;
        };
        let recorded = SeriesStats::decode(&value);
        match (found.remove(&(metric.into_owned(), entity.into_owned())), recorded) {
            (_, Err(e)) => report.problem("stat_mismatch", show(Space::Meta, &key), e.to_string()),
            (None, Ok(r)) => report.problem(
                "stale_entry",
                show(Space::Meta, &key),
                format!("records {} points; the series has none", r.count),
            ),
            (Some(actual), Ok(r)) if actual != r => report.problem(
                "stat_mismatch",
                show(Space::Meta, &key),
                format!("records {r:?}; the points say {actual:?}"),
            ),
            _ => {}
        }
    }
    for ((metric, entity), actual) in found {
        let key = MetaKey::Series(metric.as_str().into(), entity.as_str().into()).encode();
        report.problem(
            "missing_entry",
            show(Space::Meta, &key),
            format!("the series has {} points and no record", actual.count),
        );
    }
    Ok(())
}
