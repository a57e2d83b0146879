//! Reading points: series by series (one entity, or every entity of the metric in name order),
//! each a key-range scan of `[from, to)`, a page at a time with a cursor.

use super::stats::{self, corrupt};
use super::time::{NS_PER_MS, Precision, parse_bound};
use crate::keys::{TsKey, prefix_successor};
use crate::service::cursor::{self, Binding};
use crate::service::stop::Watched;
use crate::service::{Db, Result, ServiceError};
use crate::storage::{KeyRange, Space};
use serde::{Deserialize, Serialize};
use std::ops::Bound;
use std::sync::Arc;
use utoipa::ToSchema;

/// Default page size of a points read.
pub const DEFAULT_POINTS_LIMIT: usize = 10_000;
/// Largest page size of a points read.
pub const MAX_POINTS_LIMIT: usize = 100_000;

/// Time order of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// oldest first (entities in name order)
    #[default]
    Asc,
    /// newest first (entities in reverse name order)
    Desc,
}

/// What `GET /v1/timeseries/{metric}/points` asks.
#[derive(Debug, Clone, Default)]
pub struct PointsRequest {
    /// one series, else every series of the metric
    pub entity: Option<String>,
    /// inclusive start: ms since the epoch or RFC 3339
    pub from: Option<String>,
    /// exclusive end: ms since the epoch or RFC 3339
    pub to: Option<String>,
    /// page size
    pub limit: Option<usize>,
    /// time order
    pub order: Order,
    /// the previous page's cursor
    pub cursor: Option<String>,
    /// the unit of the `ts` returned
    pub precision: Precision,
}

/// A stored point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PointOut {
    /// the entity
    pub entity: String,
    /// the time, in the requested precision (ms by default)
    pub ts: i64,
    /// the value
    pub value: f64,
    /// the tags written with the point, if any
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub tags: Option<serde_json::Value>,
}

/// A page of points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PointsPage {
    /// the points, by entity then time
    pub points: Vec<PointOut>,
    /// pass as `cursor` for the next page; null on the last page
    pub cursor: Option<String>,
}

/// The time window `[from, to)` in ns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl Window {
    pub fn parse(from: Option<&str>, to: Option<&str>) -> Result<Window> {
        let from = from.map(|f| parse_bound("from", f)).transpose()?;
        let to = to.map(|t| parse_bound("to", t)).transpose()?;
        Ok(Window { from, to })
    }

    pub fn is_empty(&self) -> bool {
        matches!((self.from, self.to), (Some(f), Some(t)) if f >= t)
    }

    /// The key range of the window within the series of `prefix`.
    pub fn range(&self, metric: &str, entity: &str, prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let lower = match self.from {
            Some(f) => Bound::Included(TsKey::new(metric, entity, f).encode()),
            None => Bound::Included(prefix.to_vec()),
        };
        let upper = match self.to {
            Some(t) => Bound::Excluded(TsKey::new(metric, entity, t).encode()),
            None => prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded),
        };
        (lower, upper)
    }
}

/// The value and tags of a stored point.
pub(crate) fn decode_value(value: &[u8]) -> Result<(f64, &[u8])> {
    let (head, tags) =
        value.split_first_chunk::<8>().ok_or_else(|| ServiceError::Internal("a point value is not 8 bytes".into()))?;
    Ok((f64::from_be_bytes(*head), tags))
}

impl Db {
    /// The metric, or 404.
    pub(crate) fn metric_or_404(&self, metric: &str) -> Result<Arc<crate::catalog::MetricConfig>> {
        self.catalog.metric(metric).ok_or_else(|| ServiceError::MetricNotFound(metric.to_owned()))
    }

    /// A page of points.
    pub async fn read_points(self: &Arc<Self>, metric: String, req: PointsRequest) -> Result<PointsPage> {
        self.metric_or_404(&metric)?;
        let limit = req.limit.unwrap_or(DEFAULT_POINTS_LIMIT);
        if !(1..=MAX_POINTS_LIMIT).contains(&limit) {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_POINTS_LIMIT}")));
        }
        let window = Window::parse(req.from.as_deref(), req.to.as_deref())?;
        let (stop, _abandon) = self.request_stop();
        self.read(move |db| {
            let order = [req.order as u8];
            let binding = Binding::new(&[
                b"points",
                metric.as_bytes(),
                req.entity.as_deref().unwrap_or("\0all").as_bytes(),
                &order,
                &window.from.unwrap_or(i64::MIN).to_be_bytes(),
                &window.to.unwrap_or(i64::MAX).to_be_bytes(),
            ]);
            // the last key handed out
            let after = req.cursor.as_deref().map(|c| cursor::open(binding, c)).transpose()?;
            let after_entity = match &after {
                Some(key) => {
                    let point = TsKey::decode(key).map_err(|_| cursor::invalid("it does not name a point"))?;
                    // a cursor names a point this read could have returned, nothing else
                    let fits = point.metric == metric.as_str()
                        && req.entity.as_ref().is_none_or(|e| point.entity == e.as_str())
                        && window.from.is_none_or(|f| point.ts >= f)
                        && window.to.is_none_or(|t| point.ts < t);
                    if !fits {
                        return Err(cursor::invalid("it does not name a point of this read"));
                    }
                    Some(point.entity)
                }
                None => None,
            };
            let view = db.store.snapshot();
            let mut entities: Vec<String> =
                stats::records(&view, &metric, req.entity.as_deref(), &stop)?.into_iter().map(|(e, _)| e).collect();
            let desc = req.order == Order::Desc;
            if desc {
                entities.reverse();
            }
            let per = req.precision.nanos();
            let mut points = Vec::with_capacity(limit.min(4096));
            let mut last_key: Option<Vec<u8>> = None;
            let mut more = false;
            'series: for entity in &entities {
                if window.is_empty() {
                    break;
                }
                if let Some(ae) = &after_entity
                    && (if desc { entity.as_str() > ae.as_ref() } else { entity.as_str() < ae.as_ref() })
                {
                    continue;
                }
                let prefix = TsKey::series_prefix(&metric, entity);
                let (mut lower, mut upper) = window.range(&metric, entity, &prefix);
                if let (Some(key), Some(ae)) = (&after, &after_entity)
                    && ae.as_ref() == entity
                {
                    if desc {
                        upper = Bound::Excluded(key.clone());
                    } else {
                        lower = Bound::Excluded(key.clone());
                    }
                }
                for item in Watched::new(
                    view.scan(Space::Ts, KeyRange::Between(lower, upper), desc).map(|r| r.map_err(ServiceError::from)),
                    &stop,
                ) {
                    let (key, value) = item?;
                    if points.len() == limit {
                        more = true;
                        break 'series;
                    }
                    let ts = TsKey::ts_after_prefix(&key, prefix.len()).map_err(corrupt)?;
                    let (value, tags) = decode_value(&value)?;
                    let tags = if tags.is_empty() {
                        None
                    } else {
                        Some(
                            serde_json::from_slice(tags)
                                .map_err(|e| ServiceError::Internal(format!("point tags: {e}")))?,
                        )
                    };
                    points.push(PointOut { entity: entity.clone(), ts: ts.div_euclid(per), value, tags });
                    last_key = Some(key.to_vec());
                }
            }
            let cursor = match (more, last_key) {
                (true, Some(key)) => Some(cursor::seal(binding, &key)),
                _ => None,
            };
            Ok(PointsPage { points, cursor })
        })
        .await
    }
}

/// Milliseconds of a time in ns (floor).
pub(crate) fn ms_of(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_MS)
}
