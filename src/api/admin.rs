//! `/v1/admin`: consistency check.

use super::AppState;
use super::error::{ApiError, Problem};
use crate::service::CheckReport;
use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(check))
}

/// Walks every document and index entry on one snapshot and reports inconsistencies: entries
/// without their document or with a stale value, documents missing an entry, wrong counts,
/// adjacency that disagrees with its edges. Changes nothing. The walk stops at the request
/// timeout (408) or as soon as the client goes away.
#[utoipa::path(post, path = "/v1/admin/check", tag = "admin", responses(
    (status = 200, description = "`ok: true`, or the problems found", body = CheckReport),
    (status = 408, description = "the walk passed the request timeout and stopped (`request_timeout`)", body = Problem,
        content_type = "application/problem+json"),
))]
async fn check(State(state): State<AppState>) -> Result<Json<CheckReport>, ApiError> {
    Ok(Json(state.db.check().await?))
}
