//! Aggregation into time buckets aligned to multiples of `step` since the epoch. One series is
//! scanned in time order, so its buckets close one after another; several series (no entity
//! given) are merged bucket by bucket, all together or per group of label values. Empty buckets
//! are omitted.

use super::labels;
use super::series::{Entries, Point, SeriesPoints, Window};
use super::stats::SeriesStats;
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
    /// one series, else every series of the metric together (or grouped, see `group_by`)
    pub entity: Option<String>,
    /// a series selector (`{host="a",region=~"eu.*"}`): only the series it selects
    pub selector: Option<String>,
    /// inclusive start: ms since the epoch or RFC 3339
    pub from: Option<String>,
    /// exclusive end: ms since the epoch or RFC 3339
    pub to: Option<String>,
    /// bucket width, e.g. `1m`
    pub step: String,
    /// the aggregate
    pub func: AggregateFn,
    /// how the buckets of several series are grouped
    pub group_by: Grouping,
}

/// How an aggregation groups the buckets of several series.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Grouping {
    /// every series together
    #[default]
    All,
    /// one list of buckets per entity
    Entity,
    /// one list per combination of these labels' values (a series without one has it empty)
    Labels(Vec<String>),
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

/// The buckets of one combination of label values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupBuckets {
    /// the grouping labels' values (a label the group's series lack is left out)
    #[schema(value_type = Object)]
    pub labels: BTreeMap<String, String>,
    /// its non-empty buckets in time order
    pub buckets: Vec<Bucket>,
}

/// The answer: one list of buckets, one per entity (`group_by=entity`) or one per combination
/// of label values (`by=`).
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
    /// one list per combination of the `by` labels' values, in the order of those values
    Groups {
        /// the groups that have points in the window
        groups: Vec<GroupBuckets>,
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

/// Where the buckets of each series go.
struct Sink {
    grouping: Grouping,
    /// every series together, or each group by its label values
    merged: BTreeMap<Vec<Option<String>>, BTreeMap<i64, Acc>>,
    /// the lists of `group_by=entity`
    series: Vec<(String, Vec<(i64, Acc)>)>,
    /// buckets held so far, over all groups
    total: usize,
}

impl Sink {
    fn new(grouping: Grouping) -> Sink {
        Sink { grouping, merged: BTreeMap::new(), series: Vec::new(), total: 0 }
    }

    /// Most buckets the next series may have: what is left of [`MAX_BUCKETS`] when each series
    /// is answered on its own; merged series may share buckets, so there the merge counts.
    fn limit(&self) -> usize {
        match self.grouping {
            Grouping::Entity => MAX_BUCKETS - self.total.min(MAX_BUCKETS),
            _ => MAX_BUCKETS,
        }
    }

    /// Adds one series' buckets (series come in entity name order).
    fn add(&mut self, entity: &str, own: Vec<(i64, Acc)>) -> Result<()> {
        if own.is_empty() {
            return Ok(());
        }
        let group = match &self.grouping {
            Grouping::Entity => {
                self.total += own.len();
                self.series.push((entity.to_owned(), own));
                return Ok(());
            }
            Grouping::All => Vec::new(),
            Grouping::Labels(names) => {
                let labels = labels::of(entity);
                let value = |name: &String| labels.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
                names.iter().map(|n| value(n).filter(|v| !v.is_empty())).collect()
            }
        };
        let buckets = self.merged.entry(group).or_default();
        for (n, acc) in own {
            match buckets.entry(n) {
                std::collections::btree_map::Entry::Occupied(mut o) => o.get_mut().merge(acc),
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(acc);
                    self.total += 1;
                }
            }
        }
        if self.total > MAX_BUCKETS {
            return Err(too_many());
        }
        Ok(())
    }

    fn answer(self, func: AggregateFn, step_ms: i64) -> AggregateResponse {
        let bucket = |n: i64, a: &Acc| Bucket { ts: n.saturating_mul(step_ms), value: a.value(func) };
        let list = |own: &BTreeMap<i64, Acc>| own.iter().map(|(n, a)| bucket(*n, a)).collect();
        match self.grouping {
            Grouping::All => {
                let buckets = self.merged.values().next().map(list).unwrap_or_default();
                AggregateResponse::Buckets { buckets }
            }
            Grouping::Entity => {
                let series = (self.series.into_iter())
                    .map(|(entity, own)| SeriesBuckets {
                        entity,
                        buckets: own.iter().map(|(n, a)| bucket(*n, a)).collect(),
                    })
                    .collect();
                AggregateResponse::Series { series }
            }
            Grouping::Labels(names) => {
                let groups = (self.merged.iter())
                    .map(|(values, own)| GroupBuckets {
                        labels: (names.iter().zip(values))
                            .filter_map(|(n, v)| v.as_ref().map(|v| (n.clone(), v.clone())))
                            .collect(),
                        buckets: list(own),
                    })
                    .collect();
                AggregateResponse::Groups { groups }
            }
        }
    }
}

impl Db {
    /// Buckets of one metric.
    pub async fn aggregate(self: &Arc<Self>, metric: String, req: AggregateRequest) -> Result<AggregateResponse> {
        self.metric_or_404(&metric)?;
        let step_ms = duration_param("step", &req.step)?;
        let step_ns =
            step_ms.checked_mul(NS_PER_MS).ok_or_else(|| ServiceError::InvalidRequest("step is too long".into()))?;
        let window = Window::parse(req.from.as_deref(), req.to.as_deref())?;
        let selector = super::read::parse_selector(req.selector.as_deref())?;
        let (stop, _abandon) = self.request_stop();
        self.read(move |db| {
            let view = db.store.snapshot();
            let entities = selector.select(&view, &metric, req.entity.as_deref(), &stop)?;
            let mut sink = Sink::new(req.group_by);
            for (entity, record) in &entities {
                if window.is_empty() {
                    break;
                }
                let prefix = TsKey::series_prefix(&metric, entity);
                let limit = sink.limit();
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
                sink.add(entity, own)?;
            }
            Ok(sink.answer(req.func, step_ms))
        })
        .await
    }
}
