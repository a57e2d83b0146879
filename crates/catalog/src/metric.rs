//! Time-series metric configuration.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A metric's configuration as stored under `meta:metric:{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MetricConfig {
    /// metric name
    pub name: String,
    /// points older than this many milliseconds are removed; none = keep forever
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<i64>,
}
