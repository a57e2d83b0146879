//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format, and the layer that records
//! every request. Each server has its own registry (tests run many servers in one process, each
//! seeing only its own counts): the request metrics ([`http`]) and the database's figures, read at
//! each scrape through [`crate::service::Db::metrics_snapshot`] ([`collect`]).

mod collect;
mod histogram;
mod http;

use super::AppState;
use super::error::ApiError;
use crate::service::Db;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(crate) use http::RecordLayer;

/// The media type of the answer: OpenMetrics 1.0 text, which Prometheus scrapes natively.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One server's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    http: Arc<http::HttpMetrics>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("http", &self.http).finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry of the request metrics and of `db`'s figures.
    pub(crate) fn new(db: Arc<Db>) -> Metrics {
        let http = Arc::new(http::HttpMetrics::default());
        let mut registry = Registry::default();
        registry.register_collector(Box::new(http.clone()));
        registry.register_collector(Box::new(collect::DbCollector(db)));
        Metrics { registry, http }
    }

    /// The layer recording every request into these metrics (add it with `Router::layer`, which
    /// wraps each route: the route template is known there).
    pub(crate) fn layer(&self) -> RecordLayer {
        self.http.layer()
    }

    /// The exposition, `# EOF` included. Reads the store's figures: call it from a blocking
    /// context.
    fn render(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::with_capacity(16 << 10);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

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
