//! InfluxQL, InfluxDB 1.x's query language, over the time series: the subset dashboards use
//! (Grafana's InfluxQL editor, Chronograf): `SELECT` of fields or aggregates with time and tag
//! conditions, `GROUP BY time(…)` and tags, `fill()`, and the `SHOW` statements that list
//! databases, measurements, tags, fields and series (docs/timeseries.md lists it exactly).
//!
//! Measurements and fields are the metrics line protocol makes: field `value` of measurement `m`
//! is the metric `m`, any other field `f` the metric `m.f`; tags are the series' labels. Every
//! statement reads the series records ([`super::stats::records`]) and the points of the series it
//! selects ([`super::series::SeriesPoints`]), within the limits below.

mod agg;
pub mod ast;
mod cond;
mod ctx;
mod lex;
mod model;
mod out;
mod parse;
mod raw;
mod reads;
mod select;
mod show;

pub use out::{Epoch, QueryResults, SeriesOut, StatementResult};
pub use parse::{MAX_QUERY_BYTES, MAX_STATEMENTS, parse};

pub use ctx::{MAX_BUCKETS, MAX_POINTS_SCANNED, MAX_ROWS, MAX_SERIES};

use crate::Timeseries;
use ctx::Ctx;
use mosaic_core::Handle;
use mosaic_core::{Result, ServiceError};
use std::sync::Arc;

impl Timeseries {
    /// Runs parsed statements (`now` is the `now()` they were parsed with) against this database,
    /// named `database` (an `ON` clause naming another is refused); `databases` answers `SHOW
    /// DATABASES` (those the caller may see). A statement's own error (a limit, a condition
    /// it cannot evaluate) is its result's `error`; the store's errors fail the whole query.
    pub async fn influxql(
        self: &Arc<Self>,
        statements: Vec<ast::Statement>,
        now: i64,
        epoch: Epoch,
        (database, databases): (String, Vec<String>),
    ) -> Result<QueryResults> {
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |ts| {
            let mut metrics: Vec<String> = ts.core.catalog.metrics().iter().map(|m| m.name.clone()).collect();
            metrics.sort();
            let mut ctx = Ctx {
                view: ts.core.store.snapshot(),
                stop: &stop,
                now,
                epoch,
                metrics,
                rows: 0,
                memory: ts.core.mem_budget(),
            };
            let mut results = Vec::with_capacity(statements.len());
            for (statement_id, statement) in statements.iter().enumerate() {
                let held = ctx.memory.used();
                let answer = match statement {
                    s if s.on().is_some_and(|on| on != database) => Err(ctx::refuse(format!(
                        "ON {:?}: this query reads the database {database:?} (ask for another with db=)",
                        s.on().unwrap_or_default()
                    ))),
                    ast::Statement::ShowDatabases => Ok(show::databases(&databases)),
                    ast::Statement::Select(s) => select::run(&mut ctx, s),
                    other => show::run(&mut ctx, other),
                };
                if answer.is_err() {
                    // what a refused statement held is gone; the next statements go on
                    ctx.memory.reset_to(held);
                }
                results.push(match answer {
                    Ok(series) => StatementResult::series(statement_id, series),
                    Err(ServiceError::InvalidRequest(why)) => StatementResult::error(statement_id, why),
                    Err(ServiceError::TooManyBuckets(n)) => StatementResult::error(
                        statement_id,
                        format!(
                            "more than {n} GROUP BY time intervals: use a longer interval or a narrower time range"
                        ),
                    ),
                    Err(other) => return Err(other),
                });
            }
            Ok(QueryResults { results })
        })
        .await
    }
}
