//! The metrics: their list with each one's figures, and a metric's retention.

use super::{Timeseries, batch, read, stats, time};
use mosaic_catalog::MetricConfig;
use mosaic_core::Handle;
use mosaic_core::{Result, ServiceError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

/// A metric's retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// points older than this are removed by the retention task (`ms s m h d w`); null keeps
    /// them forever
    #[schema(example = "24h")]
    pub max_age: Option<String>,
}

impl Retention {
    fn of(config: &MetricConfig) -> Retention {
        Retention { max_age: config.retention_ms.map(time::format_duration_ms) }
    }
}

/// A metric as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MetricInfo {
    /// the metric's name
    pub name: String,
    /// points stored
    pub points: u64,
    /// series (entities) with points
    pub series: u64,
    /// the earliest point's time, ms since the epoch (null without points)
    pub first: Option<i64>,
    /// the latest point's time, ms since the epoch (null without points)
    pub last: Option<i64>,
    /// bytes of the metric's stored keys and values (blocks and single points), before the
    /// store's own compression: `bytes / points` is what a point costs
    pub bytes: u64,
    /// the retention
    pub retention: Retention,
}

/// `GET /v1/timeseries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MetricList {
    /// every metric, by name
    pub metrics: Vec<MetricInfo>,
}

impl Timeseries {
    /// Every metric with its point count, time span, bytes and retention.
    pub async fn list_metrics(self: &Arc<Self>) -> Result<MetricList> {
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |ts| Ok(MetricList { metrics: ts.metric_figures(&stop)? })).await
    }

    /// Every metric as listed, by name: one read of each series record.
    pub fn metric_figures(&self, stop: &mosaic_core::cancel::Stop) -> Result<Vec<MetricInfo>> {
        let view = self.core.store.snapshot();
        let mut metrics = Vec::new();
        for config in self.core.catalog.metrics() {
            let series = stats::records(&view, &config.name, None, stop)?;
            metrics.push(MetricInfo {
                name: config.name.clone(),
                points: series.iter().map(|(_, s)| s.count).sum(),
                series: series.len() as u64,
                first: series.iter().map(|(_, s)| s.first).min().map(read::ms_of),
                last: series.iter().map(|(_, s)| s.last).max().map(read::ms_of),
                bytes: series.iter().map(|(_, s)| s.bytes).sum(),
                retention: Retention::of(&config),
            });
        }
        metrics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(metrics)
    }

    /// A metric's retention.
    pub fn retention(&self, metric: &str) -> Result<Retention> {
        Ok(Retention::of(&*self.metric_or_404(metric)?))
    }

    /// Sets a metric's retention, creating the metric if it does not exist yet (so a retention
    /// can be set before the first point arrives).
    pub async fn set_retention(self: &Arc<Self>, metric: String, retention: Retention) -> Result<Retention> {
        batch::check_metric(&metric).map_err(ServiceError::InvalidRequest)?;
        let retention_ms = retention.max_age.as_deref().map(|a| time::duration_param("max_age", a)).transpose()?;
        self.commit(move |tx, ts| {
            if ts.state.is_dropping(&metric) {
                return Err(ServiceError::MetricDropping(metric));
            }
            let config = MetricConfig { name: metric, retention_ms };
            let out = Retention::of(&config);
            ts.core.catalog.put_metric(tx, config);
            Ok(out)
        })
        .await
    }
}
