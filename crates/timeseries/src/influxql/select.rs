//! `SELECT`: per measurement, raw rows ([`super::raw`]) or aggregates ([`super::agg`]).

use super::ast::{FieldExpr, Select};
use super::cond;
use super::ctx::{Ctx, refuse};
use super::model;
use super::out::SeriesOut;
use super::reads::Scan;
use mosaic_core::Result;

/// Runs a `SELECT`.
pub fn run(ctx: &mut Ctx<'_>, s: &Select) -> Result<Vec<SeriesOut>> {
    let calls = s.fields.iter().filter(|f| matches!(f.expr, FieldExpr::Call(..))).count();
    if calls > 0 && calls < s.fields.len() {
        return Err(refuse("mixing aggregate and non-aggregate columns is not supported"));
    }
    if calls == 0 && s.interval.is_some() {
        return Err(refuse("GROUP BY time(…) needs an aggregate such as mean(…)"));
    }
    let mut out = Vec::new();
    let mut scan = Scan::default();
    for measurement in model::resolve(ctx, &s.from) {
        let fields = model::fields(ctx, &measurement);
        let filter = cond::split(s.cond.as_ref(), &|k| fields.contains_key(k)).map_err(refuse)?;
        if filter.is_empty() {
            continue;
        }
        let series = if calls > 0 {
            super::agg::run(ctx, s, (&measurement, &fields), &filter, &mut scan)?
        } else {
            super::raw::run(ctx, s, (&measurement, &fields), &filter, &mut scan)?
        };
        out.extend(series);
    }
    Ok(s.series.of(out))
}
