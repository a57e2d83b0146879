//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format, and the layer that records
//! every request. Each server has its own registry (tests run many servers in one process, each
//! seeing only its own counts): the request metrics ([`http`]) and the database's figures, read at
//! each scrape through [`crate::service::Db::metrics_snapshot`] ([`collect`]).

mod collect;
mod databases;
mod histogram;
mod http;
mod registry;

use super::AppState;
use super::error::ApiError;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(crate) use registry::Metrics;

/// The media type of the answer: OpenMetrics 1.0 text, which Prometheus scrapes natively.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

/// Prometheus metrics, in the OpenMetrics 1.0 text format.
///
/// Requests and their latency by method, route template and status, requests in flight; the
/// store's write groups, writes and fsyncs, disk space and keys per key family, journal, cache,
/// memtables and compactions; the periodic tasks' runs, errors, items removed and time taken;
/// each index's state and build progress. docs/operations.md lists every family.
#[utoipa::path(get, path = "/metrics", tag = "service", responses(
    (status = 200, description = "the metrics, in the OpenMetrics text format", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8",
        example = "# HELP mosaicdb_storage_fsyncs fsyncs of the journal (sync durability: each covers every write group committed before it began)\n\
            # TYPE mosaicdb_storage_fsyncs counter\nmosaicdb_storage_fsyncs_total 42\n# EOF\n"),
))]
async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let metrics = state.metrics.clone();
    // the store's figures wait for the journal's lock, which commits and fjall's flushes hold
    let text = tokio::task::spawn_blocking(move || metrics.render())
        .await
        .map_err(|e| internal(format!("the metrics task failed: {e}")))?
        .map_err(|_| internal("the metrics could not be written".to_owned()))?;
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS))], text).into_response())
}

fn internal(detail: String) -> ApiError {
    tracing::error!(detail, "GET /metrics failed");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "an internal error occurred; the server log has the details",
    )
}
