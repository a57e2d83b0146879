//! Liveness, readiness and server information.

use super::AppState;
use super::error::{ApiError, Problem};
use crate::service::Info;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

/// A status answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// `ok` or `ready`
    #[schema(example = "ok")]
    pub status: &'static str,
}

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(health)).routes(routes!(ready)).routes(routes!(info))
}

/// The process is up.
#[utoipa::path(get, path = "/health", tag = "service", responses((status = 200, description = "up", body = Status)))]
async fn health() -> Json<Status> {
    Json(Status { status: "ok" })
}

/// The store is open and takes writes.
#[utoipa::path(get, path = "/ready", tag = "service", responses(
    (status = 200, description = "ready", body = Status),
    (status = 503, description = "the store refuses writes (a disk write failed)", body = Problem,
        content_type = "application/problem+json"),
))]
async fn ready(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    if state.db.is_writable() {
        Ok(Json(Status { status: "ready" }))
    } else {
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the store is poisoned after a failed write to disk and refuses writes; restart after checking the disk",
        ))
    }
}

/// Version, uptime, data directory, durability and key counts per family.
#[utoipa::path(get, path = "/v1/info", tag = "service", responses((status = 200, description = "server information", body = Info)))]
async fn info(State(state): State<AppState>) -> Result<Json<Info>, ApiError> {
    Ok(Json(state.db.info().await?))
}
