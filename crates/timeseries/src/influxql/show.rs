//! The `SHOW` statements, in InfluxDB 1.8's shapes: `SHOW DATABASES` and `SHOW MEASUREMENTS`
//! one series of names; `SHOW TAG KEYS`, `SHOW TAG VALUES` and `SHOW FIELD KEYS` one series per
//! measurement; `SHOW SERIES` one unnamed series of keys. Their `WHERE` conditions select series
//! by tags (time conditions are ignored, as InfluxDB 1.x ignores them there).

use super::ast::{Cond, Source, Statement};
use super::cond::{self, Filter};
use super::ctx::{Ctx, refuse};
use super::model::{self, Series};
use super::out::SeriesOut;
use mosaic_core::Result;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// `SHOW DATABASES`.
pub fn databases(names: &[String]) -> Vec<SeriesOut> {
    vec![SeriesOut::list(Some("databases"), "name", names.iter().cloned())]
}

pub fn run(ctx: &mut Ctx<'_>, statement: &Statement) -> Result<Vec<SeriesOut>> {
    match statement {
        Statement::ShowRetentionPolicies { .. } => Ok(vec![SeriesOut {
            name: None,
            tags: None,
            columns: ["name", "duration", "shardGroupDuration", "replicaN", "default"].map(String::from).to_vec(),
            values: vec![vec![
                Value::from("autogen"),
                Value::from("0s"),
                Value::from("168h0m0s"),
                Value::from(1),
                Value::from(true),
            ]],
        }]),
        Statement::ShowMeasurements { name, cond, page, .. } => {
            let mut names = Vec::new();
            for m in model::measurements(ctx) {
                if name.as_ref().is_some_and(|f| !f.matches(&m)) {
                    continue;
                }
                if cond.is_some() && series_of(ctx, &m, cond.as_ref())?.is_empty() {
                    continue;
                }
                names.push(m);
            }
            let names = page.of(names);
            Ok(if names.is_empty() { Vec::new() } else { vec![SeriesOut::list(Some("measurements"), "name", names)] })
        }
        Statement::ShowTagKeys { from, cond, page } => per_measurement(ctx, from, cond.as_ref(), |_, series| {
            let keys: BTreeSet<&String> = series.iter().flat_map(|s| s.labels.iter().map(|(k, _)| k)).collect();
            let keys = page.of(keys.into_iter().map(|k| vec![Value::String(k.clone())]));
            Ok((vec!["tagKey".into()], keys))
        }),
        Statement::ShowTagValues { from, key, cond, page } => per_measurement(ctx, from, cond.as_ref(), |_, series| {
            let pairs: BTreeSet<(&String, &String)> = (series.iter())
                .flat_map(|s| s.labels.iter().filter(|(k, _)| key.matches(k)).map(|(k, v)| (k, v)))
                .collect();
            let rows = pairs.into_iter().map(|(k, v)| vec![Value::String(k.clone()), Value::String(v.clone())]);
            Ok((vec!["key".into(), "value".into()], page.of(rows)))
        }),
        Statement::ShowFieldKeys { from, page } => {
            let mut out = Vec::new();
            for m in model::resolve(ctx, from) {
                let fields = model::fields(ctx, &m);
                let rows = page.of(fields.into_keys().map(|f| vec![Value::String(f), Value::from("float")]));
                if !rows.is_empty() {
                    out.push(SeriesOut {
                        name: Some(m),
                        tags: None,
                        columns: vec!["fieldKey".into(), "fieldType".into()],
                        values: rows,
                    });
                }
            }
            Ok(out)
        }
        Statement::ShowSeries { from, cond, page } => {
            let mut keys = Vec::new();
            for m in model::resolve(ctx, from) {
                keys.extend(series_of(ctx, &m, cond.as_ref())?.iter().map(|s| model::series_key(&m, &s.labels)));
            }
            let keys = page.of(keys);
            Ok(if keys.is_empty() { Vec::new() } else { vec![SeriesOut::list(None, "key", keys)] })
        }
        Statement::Select(_) | Statement::ShowDatabases => Err(refuse("not a SHOW statement")),
    }
}

/// One series per measurement of `from` (all without), of the rows `rows` makes of its series.
fn per_measurement(
    ctx: &mut Ctx<'_>,
    from: &[Source],
    cond: Option<&Cond>,
    rows: impl Fn(&str, &[Series]) -> Result<(Vec<String>, Vec<Vec<Value>>)>,
) -> Result<Vec<SeriesOut>> {
    let mut out = Vec::new();
    for m in model::resolve(ctx, from) {
        let series = series_of(ctx, &m, cond)?;
        let (columns, values) = rows(&m, &series)?;
        if !values.is_empty() {
            out.push(SeriesOut { name: Some(m), tags: None, columns, values });
        }
    }
    Ok(out)
}

/// The series of a measurement's fields together (each once, in entity order) that the tag
/// condition selects.
fn series_of(ctx: &Ctx<'_>, measurement: &str, cond: Option<&Cond>) -> Result<Vec<Series>> {
    let fields = model::fields(ctx, measurement);
    let mut filter = cond::split(cond, &|k| fields.contains_key(k)).map_err(refuse)?;
    // time conditions select nothing here
    filter = Filter { from: None, to: None, tags: filter.tags };
    let mut seen = 0;
    let mut by_entity: BTreeMap<String, Series> = BTreeMap::new();
    for metric in fields.values() {
        for s in model::series(ctx, metric, &filter, &mut seen)? {
            by_entity.entry(s.entity.clone()).or_insert(s);
        }
    }
    Ok(by_entity.into_values().collect())
}
