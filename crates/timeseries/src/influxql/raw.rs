//! Raw `SELECT`s: the points of each group's series, the fields of one series joined by time,
//! the series' rows merged in time order (series in entity order on a tie). `*` is every field
//! and every tag not grouped by, in name order; a column naming a tag key that is no field is
//! that tag's value.

use super::ast::{FieldExpr, Select};
use super::cond;
use super::cond::Filter;
use super::ctx::{Ctx, MAX_ROWS, refuse};
use super::out::{SeriesOut, number};
use super::reads::{self, Scan};
use mosaic_core::Result;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// What a column shows.
enum Col {
    /// a field: the index of its metric in the statement's list (none: no such field)
    Field(Option<usize>),
    /// a tag's value
    Tag(String),
}

/// A column as named before the series are known.
enum Wanted {
    Name(String, Option<String>),
    Wildcard,
}

pub fn run(
    ctx: &mut Ctx<'_>,
    s: &Select,
    (measurement, fields): (&str, &BTreeMap<String, String>),
    filter: &Filter,
    scan: &mut Scan,
) -> Result<Vec<SeriesOut>> {
    let mut wanted = Vec::new();
    for f in &s.fields {
        match &f.expr {
            FieldExpr::Wildcard => wanted.push(Wanted::Wildcard),
            FieldExpr::Field(name) if name.eq_ignore_ascii_case("time") => {}
            FieldExpr::Field(name) => wanted.push(Wanted::Name(name.clone(), f.alias.clone())),
            FieldExpr::Call(..) => unreachable_call()?,
        }
    }
    // the metrics of the fields named, and of every field for `*`
    let mut metrics: Vec<String> = Vec::new();
    let mut metric_index = |metric: &String| match metrics.iter().position(|m| m == metric) {
        Some(i) => i,
        None => {
            metrics.push(metric.clone());
            metrics.len() - 1
        }
    };
    let wildcard = wanted.iter().any(|w| matches!(w, Wanted::Wildcard));
    let mut field_cols: BTreeMap<String, usize> = BTreeMap::new();
    for (field, metric) in fields {
        let named = wanted.iter().any(|w| matches!(w, Wanted::Name(n, _) if n == field));
        if wildcard || named {
            field_cols.insert(field.clone(), metric_index(metric));
        }
    }
    if metrics.is_empty() {
        return Ok(Vec::new());
    }
    let grouped = reads::group(ctx, s, &metrics, filter, scan)?;
    let all_tags: BTreeSet<String> = (grouped.groups.values().flat_map(|g| g.values()))
        .flat_map(|m| m.labels.iter().map(|(k, _)| k.clone()))
        .filter(|k| !grouped.keys.contains(k))
        .collect();
    let mut columns = vec!["time".to_owned()];
    let mut cols = Vec::new();
    for w in &wanted {
        match w {
            Wanted::Wildcard => {
                let mut names: BTreeMap<&String, Col> =
                    field_cols.iter().map(|(f, i)| (f, Col::Field(Some(*i)))).collect();
                for tag in &all_tags {
                    names.entry(tag).or_insert_with(|| Col::Tag(tag.clone()));
                }
                for (name, col) in names {
                    columns.push(name.clone());
                    cols.push(col);
                }
            }
            Wanted::Name(name, alias) => {
                columns.push(alias.clone().unwrap_or_else(|| name.clone()));
                cols.push(match field_cols.get(name) {
                    Some(i) => Col::Field(Some(*i)),
                    None if all_tags.contains(name) || grouped.keys.contains(name) => Col::Tag(name.clone()),
                    None => Col::Field(None),
                });
            }
        }
    }
    let window = reads::window(filter);
    // the rows a group may hold: those past the OFFSET, up to the LIMIT or one more than the
    // answer has room for (so that going over is seen), which each series' first points make
    let room = MAX_ROWS.saturating_sub(ctx.rows).saturating_add(1);
    let keep = s.rows.offset.saturating_add(s.rows.limit.map_or(room, |l| l.min(room)));
    if s.rows.offset > MAX_ROWS {
        return Err(refuse(format!("OFFSET is at most {MAX_ROWS}")));
    }
    let order = |a: &(i64, usize, Vec<Option<f64>>), b: &(i64, usize, Vec<Option<f64>>)| {
        let by_time = if s.desc { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) };
        by_time.then(a.1.cmp(&b.1))
    };
    let mut out = Vec::new();
    for (values, members) in &grouped.groups {
        // (time, the member's position, its fields' values)
        let mut rows: Vec<(i64, usize, Vec<Option<f64>>)> = Vec::new();
        for (position, (entity, member)) in members.iter().enumerate() {
            let mut joined: BTreeMap<i64, Vec<Option<f64>>> = BTreeMap::new();
            for (i, record) in &member.metrics {
                let points = reads::points(ctx, (&metrics[*i], entity, record), window, s.desc, scan);
                for point in points.take(keep) {
                    let point = point?;
                    joined.entry(point.ts).or_insert_with(|| vec![None; metrics.len()])[*i] = Some(point.value);
                }
            }
            rows.extend(joined.into_iter().map(|(ts, vals)| (ts, position, vals)));
            if rows.len() > keep {
                rows.sort_by(order);
                rows.truncate(keep);
            }
        }
        rows.sort_by(order);
        let rows = s.rows.of(rows);
        if rows.is_empty() {
            continue;
        }
        reads::add_rows(ctx, rows.len(), cols.len() + 1)?;
        let labels: Vec<&Vec<(String, String)>> = members.values().map(|m| &m.labels).collect();
        let values_out = rows
            .into_iter()
            .map(|(ts, position, vals)| {
                let mut row = Vec::with_capacity(cols.len() + 1);
                row.push(ctx.epoch.time(ts));
                for col in &cols {
                    row.push(match col {
                        Col::Field(Some(i)) => vals[*i].map_or(Value::Null, number),
                        Col::Field(None) => Value::Null,
                        Col::Tag(key) => match cond::tag(labels[position], key) {
                            "" => Value::Null,
                            v => Value::String(v.to_owned()),
                        },
                    });
                }
                row
            })
            .collect();
        out.push(SeriesOut {
            name: Some(measurement.to_owned()),
            tags: grouped.tags(values),
            columns: columns.clone(),
            values: values_out,
        });
    }
    Ok(out)
}

fn unreachable_call() -> Result<()> {
    Err(refuse("mixing aggregate and non-aggregate columns is not supported"))
}
