//! `GET /v1/timeseries/{metric}/series`: the series of a metric a selector selects, with their
//! labels, point counts and time spans, a page at a time (Prometheus' `/api/v1/series`).

use super::read::{ms_of, parse_selector};
use crate::Timeseries;
use mosaic_core::Handle;
use mosaic_core::cursor::{self, Binding};
use mosaic_core::{Result, ServiceError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::ToSchema;

/// Default page size of a series listing.
pub const DEFAULT_SERIES_LIMIT: usize = 1000;
/// Largest page size of a series listing.
pub const MAX_SERIES_LIMIT: usize = 100_000;

/// One series as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SeriesInfo {
    /// the entity
    pub entity: String,
    /// its labels (none unless the entity is of the form `k=v,k=v`)
    #[schema(value_type = Object)]
    pub labels: BTreeMap<String, String>,
    /// points stored
    pub points: u64,
    /// the earliest point's time, ms since the epoch
    pub first: i64,
    /// the latest point's time, ms since the epoch
    pub last: i64,
}

/// A page of series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SeriesPage {
    /// the series, by entity
    pub series: Vec<SeriesInfo>,
    /// pass as `cursor` for the next page; null on the last page
    pub cursor: Option<String>,
}

impl Timeseries {
    /// The series of `metric` that `selector` selects, by entity, `limit` at a time.
    pub async fn list_series(
        self: &Arc<Self>,
        metric: String,
        selector: Option<String>,
        limit: Option<usize>,
        cursor: Option<String>,
    ) -> Result<SeriesPage> {
        self.metric_or_404(&metric)?;
        let limit = limit.unwrap_or(DEFAULT_SERIES_LIMIT);
        if !(1..=MAX_SERIES_LIMIT).contains(&limit) {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_SERIES_LIMIT}")));
        }
        let parsed = parse_selector(selector.as_deref())?;
        let binding = Binding::new(&[b"series", metric.as_bytes(), selector.as_deref().unwrap_or("").as_bytes()]);
        let after = cursor.as_deref().map(|c| cursor::open(binding, c)).transpose()?;
        let after =
            after.map(String::from_utf8).transpose().map_err(|_| cursor::invalid("it does not name an entity"))?;
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |ts| {
            let view = ts.core.store.snapshot();
            let mut selected = parsed.select(&view, &metric, None, &stop)?;
            if let Some(after) = &after {
                // in entity order: everything up to the cursor's entity was on earlier pages
                let seen = selected.partition_point(|(e, _)| e <= after);
                selected.drain(..seen);
            }
            let more = selected.len() > limit;
            selected.truncate(limit);
            let cursor = match (more, selected.last()) {
                (true, Some((entity, _))) => Some(cursor::seal(binding, entity.as_bytes())),
                _ => None,
            };
            let series = (selected.into_iter())
                .map(|(entity, record)| SeriesInfo {
                    labels: super::labels::of(&entity).into_iter().collect(),
                    entity,
                    points: record.count,
                    first: ms_of(record.first),
                    last: ms_of(record.last),
                })
                .collect();
            Ok(SeriesPage { series, cursor })
        })
        .await
    }
}
