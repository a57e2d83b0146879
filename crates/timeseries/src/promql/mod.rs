//! The Prometheus query API over the time series: PromQL (a subset, parsed by GreptimeDB's
//! `promql-parser`) evaluated at one time or at every step of a range, and the series, label and
//! label-value listings Grafana's Prometheus data source and `promtool` call. How metrics and
//! entities look as Prometheus series is [`series`]'s; what a query may cost, [`limits`]'.
//!
//! The subset: instant and range selectors with `=`, `!=`, `=~`, `!~` matchers and `offset`;
//! `rate`, `irate`, `increase` and `sum|avg|min|max|count|last_over_time`; `sum`, `avg`, `min`,
//! `max`, `count` with `by`/`without`; `+ - * / % ^` between scalars, between a vector and a
//! scalar, and between two vectors matched one to one (`on`, `ignoring`); number literals. Anything else is refused by name (400 `invalid_request`).

mod aggregate;
mod binary;
mod eval;
mod functions;
pub mod limits;
mod params;
mod series;
mod sliding;
mod value;

pub use value::{MatrixSeries, Metric, QueryData, SamplePair, VectorSample};

use crate::Timeseries;
use eval::Eval;
use limits::Budget;
use mosaic_core::Handle;
use mosaic_core::cancel::Stop;
use mosaic_core::{Result, ServiceError};
use mosaic_storage::ReadView;
use promql_parser::label::Matcher;
use promql_parser::parser::Expr;
use series::Labels;
use std::collections::BTreeSet;
use std::sync::Arc;
use value::Value;

/// The parameters of a request of the Prometheus API, as given (the URL's query and a form
/// body together; a parameter given twice counts once, the first time, but `match[]`).
#[derive(Debug, Clone, Default)]
pub struct PromParams {
    /// the PromQL expression
    pub query: Option<String>,
    /// an instant query's time (default: now)
    pub time: Option<String>,
    /// a range's (or listing's) start
    pub start: Option<String>,
    /// a range's (or listing's) end
    pub end: Option<String>,
    /// a range query's step
    pub step: Option<String>,
    /// the listings' series selectors
    pub matches: Vec<String>,
}

fn missing(param: &str) -> ServiceError {
    ServiceError::InvalidRequest(format!("invalid parameter {param:?}: missing"))
}

impl Timeseries {
    /// An instant query: the expression's value at `time` (default: now).
    pub async fn prom_query(self: &Arc<Self>, p: PromParams) -> Result<QueryData> {
        let text = p.query.ok_or_else(|| missing("query"))?;
        let expr = params::parse_expr("query", &text)?;
        let time = match p.time.as_deref() {
            Some(t) => params::parse_time("time", t)?,
            None => now_ms(),
        };
        self.prom_eval(expr, vec![time], false).await
    }

    /// A range query: the expression's value at every step from `start` to `end`.
    pub async fn prom_query_range(self: &Arc<Self>, p: PromParams) -> Result<QueryData> {
        let text = p.query.ok_or_else(|| missing("query"))?;
        let start = params::parse_time("start", p.start.as_deref().ok_or_else(|| missing("start"))?)?;
        let end = params::parse_time("end", p.end.as_deref().ok_or_else(|| missing("end"))?)?;
        let step = params::parse_step("step", p.step.as_deref().ok_or_else(|| missing("step"))?)?;
        let steps = params::steps(start, end, step)?;
        let expr = params::parse_expr("query", &text)?;
        self.prom_eval(expr, steps, true).await
    }

    async fn prom_eval(self: &Arc<Self>, expr: Expr, steps: Vec<i64>, range: bool) -> Result<QueryData> {
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |ts| {
            let view = ts.core.store.snapshot();
            let mut eval = Eval {
                view: &view,
                metrics: ts.core.catalog.metrics(),
                steps,
                stop: &stop,
                budget: Budget::new(ts.core.mem_budget()),
            };
            let value = eval.eval(&expr, 0)?;
            answer(value, &eval.steps, range)
        })
        .await
    }

    /// The series any `match[]` selector selects with points within `[start, end]` (default:
    /// any time), by labels.
    pub async fn prom_series(self: &Arc<Self>, p: PromParams) -> Result<Vec<Metric>> {
        if p.matches.is_empty() {
            return Err(ServiceError::InvalidRequest("no match[] parameter provided".into()));
        }
        let listed = self.prom_listed(&p).await?;
        Ok(listed.into_iter().map(Metric).collect())
    }

    /// The label names of the series any `match[]` selects (default: every series), sorted.
    pub async fn prom_labels(self: &Arc<Self>, p: PromParams) -> Result<Vec<String>> {
        let listed = self.prom_listed(&p).await?;
        let names: BTreeSet<String> = listed.into_iter().flatten().map(|(n, _)| n).collect();
        Ok(names.into_iter().collect())
    }

    /// The values label `name` has in the series any `match[]` selects (default: every
    /// series), sorted.
    pub async fn prom_label_values(self: &Arc<Self>, name: String, p: PromParams) -> Result<Vec<String>> {
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ServiceError::InvalidRequest(format!("invalid label name: {name:?}")));
        }
        let listed = self.prom_listed(&p).await?;
        let values: BTreeSet<String> =
            listed.into_iter().flatten().filter(|(n, _)| *n == name).map(|(_, v)| v).collect();
        Ok(values.into_iter().collect())
    }

    /// The labels of the series a listing names.
    async fn prom_listed(self: &Arc<Self>, p: &PromParams) -> Result<BTreeSet<Labels>> {
        let mut selectors: Vec<Vec<Matcher>> = Vec::new();
        for text in &p.matches {
            match params::parse_expr("match[]", text)? {
                Expr::VectorSelector(vs) if vs.at.is_none() && vs.offset.is_none() => {
                    if !vs.matchers.or_matchers.is_empty() {
                        return Err(series::unsupported("`or` between matchers"));
                    }
                    let mut matchers = vs.matchers.matchers.clone();
                    if let Some(name) = &vs.name {
                        matchers.push(Matcher::new(promql_parser::label::MatchOp::Equal, series::NAME, name));
                    }
                    selectors.push(matchers);
                }
                _ => {
                    return Err(ServiceError::InvalidRequest(format!(
                        "invalid parameter \"match[]\": {text:?} is not a series selector"
                    )));
                }
            }
        }
        if p.matches.is_empty() {
            selectors.push(Vec::new());
        }
        let start = p.start.as_deref().map(|t| params::parse_time("start", t)).transpose()?;
        let end = p.end.as_deref().map(|t| params::parse_time("end", t)).transpose()?;
        let span = (start.is_some() || end.is_some()).then(|| (start.unwrap_or(i64::MIN), end.unwrap_or(i64::MAX)));
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |ts| {
            let view = ts.core.store.snapshot();
            let metrics = ts.core.catalog.metrics();
            let mut budget = Budget::listing(ts.core.mem_budget());
            let mut out = BTreeSet::new();
            for matchers in &selectors {
                list(&view, &metrics, matchers, span, &mut budget, &stop, &mut out)?;
            }
            Ok(out)
        })
        .await
    }
}

fn list(
    view: &ReadView,
    metrics: &[Arc<mosaic_catalog::MetricConfig>],
    matchers: &[Matcher],
    span: Option<(i64, i64)>,
    budget: &mut Budget,
    stop: &Stop,
    out: &mut BTreeSet<Labels>,
) -> Result<()> {
    for s in series::select(view, metrics, matchers, span, budget, stop)? {
        out.insert(s.labels);
    }
    Ok(())
}

/// The answer of a query from the value of its expression.
fn answer(value: Value, steps: &[i64], range: bool) -> Result<QueryData> {
    let first = steps.first().copied().unwrap_or(0);
    let pairs = |values: Vec<Option<f64>>| -> Vec<SamplePair> {
        steps.iter().zip(values).filter_map(|(&ms, v)| v.map(|value| SamplePair { ms, value })).collect()
    };
    Ok(match (value, range) {
        (Value::Scalar(v), false) => {
            QueryData::Scalar(SamplePair { ms: first, value: v.first().copied().unwrap_or(0.0) })
        }
        (Value::Scalar(v), true) => QueryData::Matrix(vec![MatrixSeries {
            metric: Metric(Vec::new()),
            values: pairs(v.into_iter().map(Some).collect()),
        }]),
        (Value::Vector(mut series), false) => {
            eval::by_labels(&mut series, |s| &s.labels);
            QueryData::Vector(
                series
                    .into_iter()
                    .filter_map(|s| {
                        let value = s.values.first().copied().flatten()?;
                        Some(VectorSample { metric: Metric(s.labels), value: SamplePair { ms: first, value } })
                    })
                    .collect(),
            )
        }
        (Value::Vector(mut series), true) => {
            eval::by_labels(&mut series, |s| &s.labels);
            QueryData::Matrix(
                series
                    .into_iter()
                    .map(|s| MatrixSeries { metric: Metric(s.labels), values: pairs(s.values) })
                    .collect(),
            )
        }
        (Value::Matrix { mut series, .. }, false) => {
            eval::by_labels(&mut series, |s| &s.labels);
            QueryData::Matrix(
                series
                    .into_iter()
                    .map(|s| MatrixSeries {
                        metric: Metric(s.labels),
                        values: s.points.into_iter().map(|(ms, value)| SamplePair { ms, value }).collect(),
                    })
                    .collect(),
            )
        }
        (Value::Matrix { .. }, true) => {
            return Err(ServiceError::InvalidRequest(
                "invalid expression type \"range vector\" for range query, must be Scalar or instant Vector".into(),
            ));
        }
    })
}

/// The time now, ms since the epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
