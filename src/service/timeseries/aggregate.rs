//! Aggregation into time buckets aligned to multiples of `step` since the epoch. One series is
//! scanned in time order, so its buckets close one after another; several series (no entity
//! given) are merged bucket by bucket. Empty buckets are omitted.

use super::series::{Entries, Point, SeriesPoints, Window};
use super::stats::{self, SeriesStats};
use super::time::{NS_PER_MS, bucket_of, duration_param};
use crate::keys::TsKey;
use crate::service::stop::Stop;
use crate::service::{Db, Result, ServiceError};
use crate::storage::{ReadView, Space};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::ToSchema;

/// Most buckets one answer may hold (over all series).
pub const MAX_BUCKETS: usize = 100_000;

/// The aggregate of each bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AggregateFn {
    /// mean
    #[default]
    Avg,
    /// smallest value
    Min,
    /// largest value
    Max,
    /// sum
    Sum,
    /// number of points
    Count,
    /// the value of the earliest point (of the first entity by name on a tie)
    First,
    /// the value of the latest point (of the last entity by name on a tie)
    Last,
}

/// What `GET /v1/timeseries/{metric}/aggregate` asks.
#[derive(Debug, Clone, Default)]
pub struct AggregateRequest {
    /// one series, else every series of the metric together (or each, with `group_by_entity`)
    pub entity: Option<String>,
    /// inclusive start: ms since the epoch or RFC 3339
    pub from: Option<String>,
    /// exclusive end: ms since the epoch or RFC 3339
    pub to: Option<String>,
    /// bucket width, e.g. `1m`
    pub step: String,
    /// the aggregate
    pub func: AggregateFn,
    /// one list of buckets per entity
    pub group_by_entity: bool,
}

/// One bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Bucket {
    /// the bucket's start, ms since the epoch (a multiple of `step`)
    pub ts: i64,
    /// the aggregate of the bucket's points
    pub value: f64,
}

/// The buckets of one entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SeriesBuckets {
    /// the entity
    pub entity: String,
    /// its non-empty buckets in time order
    pub buckets: Vec<Bucket>,
}

/// The answer: one list of buckets, or one per entity (`group_by=entity`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum AggregateResponse {
    /// every entity together (or the one asked for)
    Buckets {
        /// the non-empty buckets in time order
        buckets: Vec<Bucket>,
    },
    /// one list per entity, entities in name order
    Series {
        /// the entities that have points in the window
        series: Vec<SeriesBuckets>,
    },
}

/// The running aggregate of one bucket.
#[derive(Debug, Clone, Copy)]
struct Acc {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    first: (i64, f64),
    last: (i64, f64),
}

impl Acc {
    fn new(ts: i64, v: f64) -> Acc {
        Acc { count: 1, sum: v, min: v, max: v, first: (ts, v), last: (ts, v) }
    }

    /// Adds a point; points of one series come in time order, and later series win ties for
    /// `last` and lose them for `first`.
    fn add(&mut self, ts: i64, v: f64) {
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if ts < self.first.0 {
            self.first = (ts, v);
        }
        if ts >= self.last.0 {
            self.last = (ts, v);
        }
    }

    /// Adds another series' aggregate of the same bucket, with the tie rules of [`Acc::add`]
    /// (`other` is of a later series).
    fn merge(&mut self, other: Acc) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        if other.first.0 < self.first.0 {
            self.first = other.first;
        }
        if other.last.0 >= self.last.0 {
            self.last = other.last;
        }
    }

    fn value(&self, func: AggregateFn) -> f64 {
        match func {
            AggregateFn::Avg => self.sum / self.count as f64,
            AggregateFn::Min => self.min,
            AggregateFn::Max => self.max,
            AggregateFn::Sum => self.sum,
            AggregateFn::Count => self.count as f64,
            AggregateFn::First => self.first.1,
            AggregateFn::Last => self.last.1,
        }
    }
}

/// Series with fewer points than this in the window are scanned on one thread.
const PARALLEL_MIN_POINTS: u64 = 100_000;

/// Where to split a long series' window in two for a parallel scan: a bucket boundary near the
/// middle of the points' span within the window (None for a short series, or no boundary inside).
fn split_point(stats: &SeriesStats, window: Window, step: i64) -> Option<i64> {
    if stats.count < PARALLEL_MIN_POINTS {
        return None;
    }
    let lo = window.from.map_or(stats.first, |f| f.max(stats.first));
    let hi = window.to.map_or(stats.last, |t| t.min(stats.last));
    if hi <= lo {
        return None;
    }
    let middle = (i128::from(lo) + i128::from(hi)) / 2;
    let mid = middle.div_euclid(i128::from(step)) * i128::from(step);
    i64::try_from(mid).ok().filter(|m| *m > lo && *m < hi)
}

/// The buckets of one series within `window` by number, closed in time order (at most `limit`).
#[allow(clippy::too_many_arguments)]
fn buckets_of(
    view: &ReadView,
    metric: &str,
    entity: &str,
    prefix: &[u8],
    window: Window,
    step: i64,
    limit: usize,
    stop: &Stop,
) -> Result<Vec<(i64, Acc)>> {
    let mut own: Vec<(i64, Acc)> = Vec::new();
    let scan = |range, reverse| -> Entries<'_> { Box::new(view.scan(Space::Ts, range, reverse)) };
    for (n, point) in SeriesPoints::new(scan, metric, entity, prefix, window, false).enumerate() {
        if n % 4096 == 4095 {
            stop.check()?;
        }
        let Point { ts, value: v, .. } = point?;
        let start = bucket_of(ts, step);
        match own.last_mut() {
            Some((s, acc)) if *s == start => acc.add(ts, v),
            _ => {
                if own.len() == limit {
                    return Err(too_many());
                }
                own.push((start, Acc::new(ts, v)));
            }
        }
    }
    Ok(own)
}

fn too_many() -> ServiceError {
    ServiceError::TooManyBuckets(MAX_BUCKETS)
}

impl Db {
    /// Buckets of one metric.
    pub async fn aggregate(self: &Arc<Self>, metric: String, req: AggregateRequest) -> Result<AggregateResponse> {
        self.metric_or_404(&metric)?;
        let step_ms = duration_param("step", &req.step)?;
        let step_ns =
            step_ms.checked_mul(NS_PER_MS).ok_or_else(|| ServiceError::InvalidRequest("step is too long".into()))?;
        let window = Window::parse(req.from.as_deref(), req.to.as_deref())?;
        let (stop, _abandon) = self.request_stop();
        self.read(move |db| {
            let view = db.store.snapshot();
            let bucket = |n: i64, a: &Acc| Bucket { ts: n.saturating_mul(step_ms), value: a.value(req.func) };
            let entities = stats::records(&view, &metric, req.entity.as_deref(), &stop)?;
            let mut merged: BTreeMap<i64, Acc> = BTreeMap::new();
            let mut series = Vec::new();
            // buckets of the series answered so far (group_by=entity)
            let mut total = 0usize;
            for (entity, record) in &entities {
                if window.is_empty() {
                    break;
                }
                let prefix = TsKey::series_prefix(&metric, entity);
                let limit = MAX_BUCKETS - total;
                let own = match split_point(record, window, step_ns) {
                    // two halves of a long series on two threads; no bucket straddles the split
                    Some(mid) => {
                        let (early, late) = (Window { to: Some(mid), ..window }, Window { from: Some(mid), ..window });
                        let (view, metric, prefix, stop) = (&view, &metric, &prefix, &stop);
                        let (a, b) = std::thread::scope(|scope| {
                            let second = scope
                                .spawn(move || buckets_of(view, metric, entity, prefix, late, step_ns, limit, stop));
                            let first = buckets_of(view, metric, entity, prefix, early, step_ns, limit, stop);
                            (first, second.join())
                        });
                        let mut own = a?;
                        own.extend(b.map_err(|_| ServiceError::Internal("an aggregation thread panicked".into()))??);
                        if own.len() > limit {
                            return Err(too_many());
                        }
                        own
                    }
                    None => buckets_of(&view, &metric, entity, &prefix, window, step_ns, limit, &stop)?,
                };
                if req.group_by_entity {
                    total += own.len();
                    if !own.is_empty() {
                        let buckets = own.iter().map(|(n, a)| bucket(*n, a)).collect();
                        series.push(SeriesBuckets { entity: entity.clone(), buckets });
                    }
                } else {
                    for (n, acc) in own {
                        merged.entry(n).and_modify(|m| m.merge(acc)).or_insert(acc);
                    }
                    if merged.len() > MAX_BUCKETS {
                        return Err(too_many());
                    }
                }
            }
            if req.group_by_entity {
                return Ok(AggregateResponse::Series { series });
            }
            let buckets = merged.iter().map(|(n, a)| bucket(*n, a)).collect();
            Ok(AggregateResponse::Buckets { buckets })
        })
        .await
    }
}
