//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format (or, when the request's
//! `Accept` prefers `text/plain`, the Prometheus text format 0.0.4: [`prometheus_text`]), and the
//! layer that records every request. Each server has its own registry (tests run many servers in one process, each
//! seeing only its own counts): the request metrics ([`http`]) and the database's figures, read at
//! each scrape through [`crate::service::metrics_snapshot`] ([`collect`]).

mod collect;
mod connections;
mod databases;
mod format;
mod histogram;
mod http;
mod prometheus_text;
mod registry;

use super::AppState;
use super::error::ApiError;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};

pub use connections::{ConnectionMetrics, ConnectionTimeout, RefusedConnection};
use format::Format;
pub(crate) use registry::Metrics;

/// The media type of the answer: OpenMetrics 1.0 text, which Prometheus scrapes natively.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

/// Prometheus metrics, in the OpenMetrics 1.0 text format; in the Prometheus text format 0.0.4
/// when the request's `Accept` prefers `text/plain` (by q-value; OpenMetrics on a tie).
///
/// Requests and their latency by method, route template and status, requests in flight; the
/// store's write groups, writes and fsyncs, disk space and keys per key family, journal, cache,
/// memtables and compactions; the periodic tasks' runs, errors, items removed and time taken;
/// each index's state and build progress. docs/operations.md lists every family.
#[utoipa::path(get, path = "/metrics", tag = "service", responses(
    (status = 200, description = "the metrics, in the OpenMetrics text format, or in the Prometheus text format 0.0.4 \
        when `Accept` prefers `text/plain`",
        content(
            (String = "application/openmetrics-text; version=1.0.0; charset=utf-8",
                example = "# HELP mosaicdb_storage_fsyncs fsyncs of the journal (sync durability: each covers every write group committed before it began)\n\
                    # TYPE mosaicdb_storage_fsyncs counter\nmosaicdb_storage_fsyncs_total 42\n# EOF\n"),
            (String = "text/plain; version=0.0.4; charset=utf-8",
                example = "# HELP mosaicdb_storage_fsyncs_total fsyncs of the journal (sync durability: each covers every write group committed before it began)\n\
                    # TYPE mosaicdb_storage_fsyncs_total counter\nmosaicdb_storage_fsyncs_total 42\n"),
        )),
))]
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let metrics = state.metrics.clone();
    let format = format::negotiate(&headers);
    // the store's figures wait for the journal's lock, which commits and fjall's flushes hold
    let text = tokio::task::spawn_blocking(move || {
        let text = metrics.render()?;
        Ok(match format {
            Format::OpenMetrics => text,
            Format::PrometheusText => prometheus_text::from_openmetrics(&text),
        })
    })
    .await
    .map_err(|e| internal(format!("the metrics task failed: {e}")))?
    .map_err(|_: std::fmt::Error| internal("the metrics could not be written".to_owned()))?;
    let content_type = match format {
        Format::OpenMetrics => OPENMETRICS,
        Format::PrometheusText => prometheus_text::CONTENT_TYPE,
    };
    let mut response = ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type))], text).into_response();
    // the answer depends on Accept: a cache between scraper and server must keep the two apart
    response.headers_mut().insert(header::VARY, HeaderValue::from_static("accept"));
    Ok(response)
}

fn internal(detail: String) -> ApiError {
    tracing::error!(detail, "GET /metrics failed");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "an internal error occurred; the server log has the details",
    )
}
