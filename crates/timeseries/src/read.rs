//! Reading points: series by series (one entity, or every entity of the metric in name order),
//! each a key-range scan of `[from, to)`, a page at a time with a cursor.

use super::select::Selector;
use super::series::{Entries, SeriesPoints, Window};
use super::time::{NS_PER_MS, Precision};
use crate::Timeseries;
use mosaic_core::Handle;
use mosaic_core::cancel::Watched;
use mosaic_core::cursor::{self, Binding};
use mosaic_core::{Result, ServiceError};
use mosaic_keys::TsKey;
use mosaic_storage::Space;
use serde::{Deserialize, Serialize};
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
    /// a series selector (`{host="a",region=~"eu.*"}`): only the series it selects
    pub selector: Option<String>,
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

impl Timeseries {
    /// The metric, or 404.
    pub fn metric_or_404(&self, metric: &str) -> Result<Arc<mosaic_catalog::MetricConfig>> {
        self.core.catalog.metric(metric).ok_or_else(|| ServiceError::MetricNotFound(metric.to_owned()))
    }

    /// A page of points.
    pub async fn read_points(self: &Arc<Self>, metric: String, req: PointsRequest) -> Result<PointsPage> {
        self.metric_or_404(&metric)?;
        let limit = req.limit.unwrap_or(DEFAULT_POINTS_LIMIT);
        if !(1..=MAX_POINTS_LIMIT).contains(&limit) {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_POINTS_LIMIT}")));
        }
        let window = Window::parse(req.from.as_deref(), req.to.as_deref())?;
        let selector = parse_selector(req.selector.as_deref())?;
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |ts| {
            let order = [req.order as u8];
            let binding = Binding::new(&[
                b"points",
                metric.as_bytes(),
                req.entity.as_deref().unwrap_or("\0all").as_bytes(),
                &order,
                &window.from.unwrap_or(i64::MIN).to_be_bytes(),
                &window.to.unwrap_or(i64::MAX).to_be_bytes(),
                req.selector.as_deref().unwrap_or("").as_bytes(),
            ]);
            // the last key handed out
            let after_key = req.cursor.as_deref().map(|c| cursor::open(binding, c)).transpose()?;
            // the entity and time of the point the cursor names
            let after = match &after_key {
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
                    Some((point.entity.into_owned(), point.ts))
                }
                None => None,
            };
            let view = ts.core.store.snapshot();
            let mut entities = selector.select(&view, &metric, req.entity.as_deref(), &stop)?;
            let desc = req.order == Order::Desc;
            if desc {
                entities.reverse();
            }
            let per = req.precision.nanos();
            let mut points = Vec::with_capacity(limit.min(4096));
            let mut last_key: Option<Vec<u8>> = None;
            let mut more = false;
            'series: for (entity, record) in &entities {
                if window.is_empty() {
                    break;
                }
                if let Some((ae, _)) = &after
                    && (if desc { entity > ae } else { entity < ae })
                {
                    continue;
                }
                let prefix = TsKey::series_prefix(&metric, entity);
                let mut window = window;
                if let Some((ae, ts)) = &after
                    && ae == entity
                {
                    // resume past the cursor's point
                    let ts = *ts;
                    if desc {
                        window.to = Some(ts);
                    } else if ts == i64::MAX {
                        continue;
                    } else {
                        window.from = Some(ts + 1);
                    }
                }
                let scan = |range, reverse| -> Entries<'_> { Box::new(view.scan(Space::Ts, range, reverse)) };
                let points_of = SeriesPoints::new(scan, (&metric, entity, &prefix), window, desc, record.singles > 0);
                for point in Watched::new(points_of, &stop) {
                    let point = point?;
                    if points.len() == limit {
                        more = true;
                        break 'series;
                    }
                    let tags = match &point.tags {
                        None => None,
                        Some(t) => Some(
                            serde_json::from_slice(t)
                                .map_err(|e| ServiceError::Internal(format!("point tags: {e}")))?,
                        ),
                    };
                    points.push(PointOut {
                        entity: entity.clone(),
                        ts: point.ts.div_euclid(per),
                        value: point.value,
                        tags,
                    });
                    last_key = Some(TsKey::new(&metric, entity, point.ts).encode());
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

/// The selector of a read's `match` parameter (none: every series).
pub fn parse_selector(text: Option<&str>) -> Result<Selector> {
    text.map_or(Ok(Selector::default()), |t| {
        Selector::parse(t).map_err(|e| ServiceError::InvalidRequest(format!("match: {e}")))
    })
}

/// Milliseconds of a time in ns (floor).
pub fn ms_of(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_MS)
}
