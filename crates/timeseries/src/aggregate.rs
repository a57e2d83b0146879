//! Aggregation into time buckets aligned to multiples of `step` since the epoch. One series is
//! scanned in time order, so its buckets close one after another; several series (no entity
//! given) are merged bucket by bucket, all together or per group of label values. Empty buckets
//! are omitted.

use super::labels;
use mosaic_core::{Result, ServiceError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
pub(super) struct Acc {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    first: (i64, f64),
    last: (i64, f64),
}

impl Acc {
    pub(super) fn new(ts: i64, v: f64) -> Acc {
        Acc { count: 1, sum: v, min: v, max: v, first: (ts, v), last: (ts, v) }
    }

    /// Adds a point; points of one series come in time order, and later series win ties for
    /// `last` and lose them for `first`.
    pub(super) fn add(&mut self, ts: i64, v: f64) {
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

pub(super) fn too_many() -> ServiceError {
    ServiceError::TooManyBuckets(MAX_BUCKETS)
}

/// The buckets of one series (or group), by bucket number, in order.
pub(super) type Buckets = Vec<(i64, Acc)>;

/// Where the buckets of each series go: merged all together, per group of label values, or kept
/// per entity. Series are added in entity name order (which the tie rules of `first` and `last`
/// follow).
pub(super) struct Sink {
    grouping: Grouping,
    /// every series together (one group), or each group by its label values
    merged: BTreeMap<Vec<Option<String>>, Buckets>,
    /// the lists of `group_by=entity`
    series: Vec<(String, Buckets)>,
    /// buckets held so far, over all groups
    pub(super) total: usize,
}

impl Sink {
    pub(super) fn new(grouping: Grouping) -> Sink {
        Sink { grouping, merged: BTreeMap::new(), series: Vec::new(), total: 0 }
    }

    /// An empty sink of the same grouping (for a part of the series read on another thread).
    pub(super) fn part(&self) -> Sink {
        Sink::new(self.grouping.clone())
    }

    /// Most buckets the next series may have: what is left of [`MAX_BUCKETS`] when each series
    /// is answered on its own; merged series may share buckets, so there the merge counts.
    pub(super) fn limit(&self) -> usize {
        match self.grouping {
            Grouping::Entity => MAX_BUCKETS - self.total.min(MAX_BUCKETS),
            _ => MAX_BUCKETS,
        }
    }

    fn group_of(&self, entity: &str) -> Vec<Option<String>> {
        match &self.grouping {
            Grouping::Labels(names) => {
                let labels = labels::of(entity);
                let value = |name: &String| labels.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
                names.iter().map(|n| value(n).filter(|v| !v.is_empty())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Adds one series' buckets (series come in entity name order).
    pub(super) fn add(&mut self, entity: &str, own: Buckets) -> Result<()> {
        if own.is_empty() {
            return Ok(());
        }
        if let Grouping::Entity = self.grouping {
            self.total += own.len();
            self.series.push((entity.to_owned(), own));
            return Ok(());
        }
        let group = self.group_of(entity);
        self.merge_into(group, own)
    }

    /// Merges `own` (of series after those merged so far) into a group's buckets.
    fn merge_into(&mut self, group: Vec<Option<String>>, own: Buckets) -> Result<()> {
        let held = self.merged.entry(group).or_default();
        let before = held.len();
        if held.is_empty() {
            *held = own;
        } else {
            let mut out = Vec::with_capacity(held.len() + own.len());
            let mut theirs = own.into_iter().peekable();
            for (n, mut acc) in held.drain(..) {
                while let Some(t) = theirs.next_if(|(m, _)| *m < n) {
                    out.push(t);
                }
                if let Some((_, later)) = theirs.next_if(|(m, _)| *m == n) {
                    acc.merge(later);
                }
                out.push((n, acc));
            }
            out.extend(theirs);
            *held = out;
        }
        self.total += held.len() - before;
        if self.total > MAX_BUCKETS {
            return Err(too_many());
        }
        Ok(())
    }

    /// Adds what `later` gathered from series after all of this sink's.
    pub(super) fn absorb(&mut self, later: Sink) -> Result<()> {
        if let Grouping::Entity = self.grouping {
            self.total += later.total;
            self.series.extend(later.series);
            if self.total > MAX_BUCKETS {
                return Err(too_many());
            }
            return Ok(());
        }
        for (group, own) in later.merged {
            self.merge_into(group, own)?;
        }
        Ok(())
    }

    pub(super) fn answer(self, func: AggregateFn, step_ms: i64) -> AggregateResponse {
        let bucket = |n: i64, a: &Acc| Bucket { ts: n.saturating_mul(step_ms), value: a.value(func) };
        let list = |own: &Buckets| own.iter().map(|(n, a)| bucket(*n, a)).collect();
        match self.grouping {
            Grouping::All => {
                let buckets = self.merged.values().next().map(list).unwrap_or_default();
                AggregateResponse::Buckets { buckets }
            }
            Grouping::Entity => {
                let series = (self.series.iter())
                    .map(|(entity, own)| SeriesBuckets { entity: entity.clone(), buckets: list(own) })
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
