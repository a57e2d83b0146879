//! Evaluating a parsed PromQL expression at every step of a query (one step for an instant
//! query). Each node yields a [`Value`] over all steps: selectors read their series' points once,
//! for the whole span the steps need, and functions, aggregations and arithmetic work step by
//! step on what their operands yield. What the subset leaves out is refused by name.

use super::aggregate::{self, AGGREGATORS, Grouping};
use super::binary::{OPERATORS, binary};
use super::functions::{self, RANGE_FUNCTIONS};
use super::limits::{Budget, MAX_DEPTH};
use super::series::{self, Labels, NAME, drop_name, unsupported};
use super::sliding::Sliding;
use super::value::{RangeSeries, StepSeries, Value, unique_labelsets};
use mosaic_catalog::MetricConfig;
use mosaic_core::cancel::Stop;
use mosaic_core::{Result, ServiceError};
use mosaic_storage::ReadView;
use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{Expr, LabelModifier, Offset, VectorSelector};
use std::sync::Arc;

/// How far back an instant selector looks for a series' latest sample (Prometheus' default
/// `--query.lookback-delta`).
pub const LOOKBACK_MS: i64 = 5 * 60 * 1000;

/// Steps evaluated between two looks at the request's [`Stop`] (a few thousand: a step costs
/// well under a microsecond, so a request whose client left stops within milliseconds).
const STOP_CHECK_STEPS: usize = 4096;

/// An evaluation: what it reads and the steps it answers for.
pub struct Eval<'a> {
    pub view: &'a ReadView,
    pub metrics: Vec<Arc<MetricConfig>>,
    /// the steps, ms since the epoch, ascending
    pub steps: Vec<i64>,
    pub stop: &'a Stop,
    pub budget: Budget,
}

fn invalid(detail: String) -> ServiceError {
    ServiceError::InvalidRequest(detail)
}

impl Eval<'_> {
    /// The value of `expr` at every step.
    pub fn eval(&mut self, expr: &Expr, depth: usize) -> Result<Value> {
        let value = self.node(expr, depth)?;
        // a function or an operator may have dropped the names that told two series apart
        if let (Value::Vector(series), Expr::Call(_) | Expr::Unary(_) | Expr::Binary(_)) = (&value, expr) {
            unique_labelsets(series)?;
        }
        Ok(value)
    }

    fn node(&mut self, expr: &Expr, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(invalid(format!("the query nests expressions deeper than {MAX_DEPTH}")));
        }
        self.stop.check()?;
        match expr {
            Expr::NumberLiteral(n) => Ok(Value::Scalar(vec![n.val; self.steps.len()])),
            Expr::Paren(p) => self.eval(&p.expr, depth + 1),
            Expr::Unary(u) => match self.eval(&u.expr, depth + 1)? {
                Value::Scalar(v) => Ok(Value::Scalar(v.into_iter().map(|x| -x).collect())),
                Value::Vector(series) => Ok(Value::Vector(
                    series
                        .into_iter()
                        .map(|s| StepSeries {
                            labels: drop_name(s.labels),
                            values: s.values.into_iter().map(|v| v.map(|x| -x)).collect(),
                        })
                        .collect(),
                )),
                Value::Matrix { .. } => Err(invalid("unary minus needs a scalar or an instant vector".into())),
            },
            Expr::Binary(b) => {
                let op = b.op.to_string();
                if !OPERATORS.contains(&op.as_str()) {
                    return Err(unsupported(&format!("the operator {op:?}")));
                }
                let lhs = self.eval(&b.lhs, depth + 1)?;
                let rhs = self.eval(&b.rhs, depth + 1)?;
                binary(&op, b.modifier.as_ref(), lhs, rhs)
            }
            Expr::VectorSelector(vs) => self.vector_selector(vs),
            Expr::MatrixSelector(ms) => {
                let range = millis(ms.range)?;
                self.matrix_selector(&ms.vs, range)
            }
            Expr::Call(call) => {
                let name = call.func.name;
                if !RANGE_FUNCTIONS.contains(&name) {
                    return Err(unsupported(&format!(
                        "the function {name}() (the functions answered: {})",
                        RANGE_FUNCTIONS.join(", ")
                    )));
                }
                let [arg] = call.args.args.as_slice() else {
                    return Err(invalid(format!("{name}() takes one range vector")));
                };
                match self.eval(arg, depth + 1)? {
                    Value::Matrix { series, range, offset } => self.range_function(name, series, range, offset),
                    _ => Err(invalid(format!("{name}() takes a range vector such as metric[5m]"))),
                }
            }
            Expr::Aggregate(a) => {
                let op = a.op.to_string();
                if !AGGREGATORS.contains(&op.as_str()) {
                    return Err(unsupported(&format!(
                        "the aggregation {op} (the aggregations answered: {})",
                        AGGREGATORS.join(", ")
                    )));
                }
                if a.param.is_some() {
                    return Err(unsupported(&format!("a parameter of {op}")));
                }
                let grouping = match &a.modifier {
                    None => Grouping::By(Vec::new()),
                    Some(LabelModifier::Include(l)) => Grouping::By(l.labels.clone()),
                    Some(LabelModifier::Exclude(l)) => Grouping::Without(l.labels.clone()),
                };
                match self.eval(&a.expr, depth + 1)? {
                    Value::Vector(series) => Ok(Value::Vector(aggregate::aggregate(
                        &op,
                        &grouping,
                        series,
                        self.steps.len(),
                        &mut self.budget,
                    )?)),
                    _ => Err(invalid(format!("{op} takes an instant vector"))),
                }
            }
            Expr::Subquery(_) => Err(unsupported("a subquery")),
            Expr::StringLiteral(_) => Err(unsupported("a string literal")),
            Expr::Extension(_) => Err(unsupported("an extension expression")),
        }
    }

    /// The matchers of a selector, its name as an equal matcher on `__name__`; the offset in ms.
    fn selector_parts(&self, vs: &VectorSelector) -> Result<(Vec<Matcher>, i64)> {
        if vs.at.is_some() {
            return Err(unsupported("the @ modifier"));
        }
        if !vs.matchers.or_matchers.is_empty() {
            return Err(unsupported("`or` between matchers"));
        }
        let mut matchers = vs.matchers.matchers.clone();
        if let Some(name) = &vs.name {
            matchers.push(Matcher::new(MatchOp::Equal, NAME, name));
        }
        let offset = match vs.offset {
            None => 0,
            Some(Offset::Pos(d)) => millis(d)?,
            Some(Offset::Neg(d)) => -millis(d)?,
        };
        Ok((matchers, offset))
    }

    fn first_last(&self) -> (i64, i64) {
        (self.steps.first().copied().unwrap_or(0), self.steps.last().copied().unwrap_or(0))
    }

    /// An instant selector: at each step, each series' latest sample within the lookback.
    fn vector_selector(&mut self, vs: &VectorSelector) -> Result<Value> {
        let (matchers, offset) = self.selector_parts(vs)?;
        let (first, last) = self.first_last();
        let span = (first.saturating_sub(offset).saturating_sub(LOOKBACK_MS), last.saturating_sub(offset));
        let selected = series::select(self.view, &self.metrics, &matchers, Some(span), &mut self.budget, self.stop)?;
        let mut out = Vec::new();
        for s in &selected {
            let points = series::points(self.view, s, span, &mut self.budget, self.stop)?;
            let mut seen = 0;
            let values: Vec<Option<f64>> = (self.steps.iter().enumerate())
                .map(|(i, t)| {
                    if i % STOP_CHECK_STEPS == 0 {
                        self.stop.check()?;
                    }
                    let at = t.saturating_sub(offset);
                    while seen < points.len() && points[seen].0 <= at {
                        seen += 1;
                    }
                    let latest = seen.checked_sub(1).map(|i| points[i]);
                    Ok(latest.filter(|p| p.0 >= at.saturating_sub(LOOKBACK_MS)).map(|p| p.1))
                })
                .collect::<Result<_>>()?;
            if values.iter().any(Option::is_some) {
                self.budget.samples(values.len())?;
                out.push(StepSeries { labels: s.labels.clone(), values });
            }
        }
        Ok(Value::Vector(out))
    }

    /// A range selector: each series' samples over the span every step's window covers.
    fn matrix_selector(&mut self, vs: &VectorSelector, range: i64) -> Result<Value> {
        let (matchers, offset) = self.selector_parts(vs)?;
        let (first, last) = self.first_last();
        let span = (first.saturating_sub(offset).saturating_sub(range), last.saturating_sub(offset));
        let selected = series::select(self.view, &self.metrics, &matchers, Some(span), &mut self.budget, self.stop)?;
        let mut out = Vec::new();
        for s in selected {
            let points = series::points(self.view, &s, span, &mut self.budget, self.stop)?;
            if !points.is_empty() {
                out.push(RangeSeries { labels: s.labels, points });
            }
        }
        Ok(Value::Matrix { series: out, range, offset })
    }

    /// A range function at every step over the window `[t - offset - range, t - offset]`, the
    /// window sliding along each series' points ([`Sliding`]).
    fn range_function(&mut self, name: &str, series: Vec<RangeSeries>, range: i64, offset: i64) -> Result<Value> {
        let mut out = Vec::new();
        for s in series {
            let mut sliding = Sliding::new(name, &s.points);
            let mut values: Vec<Option<f64>> = Vec::with_capacity(self.steps.len());
            for (i, t) in self.steps.iter().enumerate() {
                if i % STOP_CHECK_STEPS == 0 {
                    self.stop.check()?;
                }
                let end = t.saturating_sub(offset);
                let (value, touched) = sliding.at(end.saturating_sub(range), end, range);
                if touched > 0 {
                    self.budget.touched(touched)?;
                }
                values.push(value);
            }
            drop(sliding);
            if values.iter().any(Option::is_some) {
                self.budget.samples(values.len())?;
                let labels = if functions::keeps_name(name) { s.labels } else { drop_name(s.labels) };
                out.push(StepSeries { labels, values });
            }
        }
        Ok(Value::Vector(out))
    }
}

/// The longest range or offset, in ms: the span of the times a point may have (1678-2262), so
/// that no time computed from one overflows.
const MAX_DURATION_MS: i64 = i64::MAX / 1_000_000;

/// A duration of the query in ms.
fn millis(d: std::time::Duration) -> Result<i64> {
    i64::try_from(d.as_millis())
        .ok()
        .filter(|ms| *ms <= MAX_DURATION_MS)
        .ok_or_else(|| invalid("a range or offset of the query is longer than 292 years".into()))
}

/// Sorts series by their labels (a query's answer lists them so).
pub fn by_labels<T>(items: &mut [T], labels: impl Fn(&T) -> &Labels) {
    items.sort_by(|a, b| labels(a).cmp(labels(b)));
}
