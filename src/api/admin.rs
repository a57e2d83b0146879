//! `/v1/admin`: consistency check, background tasks.

use super::AppState;
use super::error::{ApiError, Problem};
use crate::api::db_path::Database;
use crate::service::{CheckReport, TaskList};
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(check)).routes(routes!(tasks))
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
async fn check(Database(db): Database) -> Result<Json<CheckReport>, ApiError> {
    Ok(Json(crate::service::check(&db).await?))
}

/// The periodic background tasks (TTL sweep, time-series retention): interval, whether a run is
/// under way, when the last run started and how long it took, what it removed, in total, and its
/// error if it failed.
#[utoipa::path(get, path = "/v1/admin/tasks", tag = "admin", responses(
    (status = 200, description = "every periodic task", body = TaskList,
        example = json!({"tasks": [{"name": "retention", "description": "removes time-series points older than their metric's max_age",
            "interval_ms": 60000, "running": false, "runs": 12, "last_started_at": "2026-11-22T10:00:00Z", "last_duration_ms": 3,
            "last_removed": 120, "removed_total": 1440, "last_error": null}]})),
))]
async fn tasks(Database(db): Database) -> Json<TaskList> {
    Json(db.core.tasks())
}
