//! The time-series part of `check`: every point and block decodes and belongs to a configured
//! metric, a series' blocks are in time order without overlapping each other or its single points,
//! and every series' record (`meta:series:`) holds exactly its points' count, first and last time,
//! loose keys, single points and bytes; the series index (`meta:label:`) holds exactly the labels of the series that
//! have a record.

use crate::stats::SeriesStats;
use crate::{labels, series};
use mosaic_catalog::MetricConfig;
use mosaic_core::Result;
use mosaic_core::cancel::{Stop, Watched};
use mosaic_core::check_report::{CheckReport, defs_in, internal, show};
use mosaic_keys::{MetaKey, TsKey};
use mosaic_storage::{KeyRange, ReadView, Space};
use std::collections::{BTreeMap, BTreeSet};

pub fn check_points(view: &ReadView, report: &mut CheckReport, stop: &Stop) -> Result<()> {
    let metrics: BTreeSet<String> =
        defs_in::<MetricConfig>(view, MetaKey::kind_prefix("metric"))?.into_iter().map(|m| m.name).collect();
    // what the points say of each series
    let mut found: BTreeMap<(String, String), SeriesStats> = BTreeMap::new();
    // the blocks of the series being read (its keys are contiguous, blocks first): their spans
    let mut spans: Vec<(i64, i64)> = Vec::new();
    let mut current: Option<(String, String)> = None;
    let scan = view.scan(Space::Ts, KeyRange::Prefix(Vec::new()), false).map(|r| r.map_err(internal));
    for item in Watched::new(scan, stop) {
        let (key, value) = item?;
        report.checked.points += 1;
        let (stored, block) = match (TsKey::decode(&key), TsKey::decode_block(&key)) {
            (Ok(p), _) => (p, None),
            (Err(_), Ok(b)) => match series::decode_block(&value) {
                Ok(points) => (b, Some(points)),
                Err(e) => {
                    report.problem("undecodable_point", show(Space::Ts, &key), e.to_string());
                    continue;
                }
            },
            (Err(e), Err(_)) => {
                report.problem("undecodable_point", show(Space::Ts, &key), e.to_string());
                continue;
            }
        };
        if !metrics.contains(stored.metric.as_ref()) {
            report.problem(
                "orphan_entry",
                show(Space::Ts, &key),
                format!("metric {:?} is not configured", stored.metric),
            );
        }
        let series = (stored.metric.into_owned(), stored.entity.into_owned());
        if current.as_ref() != Some(&series) {
            spans.clear();
            current = Some(series.clone());
        }
        let stats = found.entry(series).or_default();
        stats.bytes += (key.len() + value.len()) as u64;
        let tags_ok = |t: &[u8]| t.is_empty() || serde_json::from_slice::<serde_json::Value>(t).is_ok();
        match block {
            Some(points) => {
                let (Some(first), Some(last)) = (points.first(), points.last()) else { continue };
                if last.ts != stored.ts {
                    report.problem(
                        "undecodable_point",
                        show(Space::Ts, &key),
                        format!("the block's last point is at {}, its key says {}", last.ts, stored.ts),
                    );
                }
                if spans.last().is_some_and(|&(_, prev)| first.ts <= prev) {
                    report.problem("undecodable_point", show(Space::Ts, &key), "the block overlaps the one before");
                }
                if !points.iter().all(|p| p.tags.as_deref().is_none_or(tags_ok)) {
                    report.problem("undecodable_point", show(Space::Ts, &key), "a point's tags are not JSON");
                }
                spans.push((first.ts, last.ts));
                stats.include(first.ts);
                stats.count += points.len() as u64;
                stats.include(last.ts);
                stats.loose += u64::from(series::is_loose(points.len()));
            }
            None => {
                if !value.get(8..).is_some_and(tags_ok) {
                    report.problem(
                        "undecodable_point",
                        show(Space::Ts, &key),
                        "the value is not an f64 with optional JSON tags",
                    );
                }
                let at = spans.partition_point(|&(_, last)| last < stored.ts);
                if spans.get(at).is_some_and(|&(first, _)| first <= stored.ts) {
                    report.problem("undecodable_point", show(Space::Ts, &key), "the point lies within a block's span");
                }
                stats.include(stored.ts);
                stats.count += 1;
                stats.loose += 1;
                stats.singles += 1;
            }
        }
    }
    // a directory of format 1 or 2 (not opened by a server since) has neither the series index
    // nor the bytes in its records yet
    let upgraded = mosaic_core::data_format::read_view(view)? >= 3;
    // the series index as the records say it must be
    let mut postings: BTreeSet<Vec<u8>> = BTreeSet::new();
    let scan =
        view.scan(Space::Meta, KeyRange::Prefix(MetaKey::kind_prefix("series")), false).map(|r| r.map_err(internal));
    for item in Watched::new(scan, stop) {
        let (key, value) = item?;
        let Ok(MetaKey::Series(metric, entity)) = MetaKey::decode(&key) else {
            report.problem("undecodable_point", show(Space::Meta, &key), "a series record key does not decode");
            continue;
        };
        for (name, label) in labels::of(&entity) {
            postings.insert(MetaKey::Label(metric.clone(), name.into(), label.into(), entity.clone()).encode());
        }
        let recorded = SeriesStats::decode(&value);
        let mut actual = found.remove(&(metric.into_owned(), entity.into_owned()));
        if let (Some(actual), Ok(r), false) = (&mut actual, &recorded, upgraded) {
            (actual.bytes, actual.singles) = (r.bytes, r.singles);
        }
        match (actual, recorded) {
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
    if upgraded {
        check_postings(view, report, postings, stop)?;
    }
    Ok(())
}

/// Every key of the series index is one of `expected`, and every one of `expected` is stored.
fn check_postings(
    view: &ReadView,
    report: &mut CheckReport,
    mut expected: BTreeSet<Vec<u8>>,
    stop: &Stop,
) -> Result<()> {
    let scan =
        view.scan(Space::Meta, KeyRange::Prefix(MetaKey::kind_prefix("label")), false).map(|r| r.map_err(internal));
    for item in Watched::new(scan, stop) {
        let (key, _) = item?;
        report.checked.series_labels += 1;
        if !expected.remove(key.as_ref()) {
            let why = match MetaKey::decode(&key) {
                Ok(MetaKey::Label(..)) => "no series with a record has this label",
                _ => "a series index key does not decode",
            };
            report.problem("stale_entry", show(Space::Meta, &key), why);
        }
    }
    for key in expected {
        report.problem("missing_entry", show(Space::Meta, &key), "the series has this label; the index lacks it");
    }
    Ok(())
}
