//! Document history: `GET /v1/tables/{table}/documents/{id}/history` (and `?as_of=` on the
//! document itself, in `documents.rs`).

use super::AppState;
use super::database::Database;
use super::error::{ApiError, Problem};
use super::extract::{ApiPath, ApiQuery};
use super::spec::DocumentPath;
use crate::service::history::read::HistoryPage;
use crate::service::timeseries::time::parse_bound;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(history))
}

/// The query of `GET …/documents/{id}/history`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// versions that started at or after this: ms since the epoch or RFC 3339
    pub from: Option<String>,
    /// versions that started before this: ms since the epoch or RFC 3339
    pub to: Option<String>,
    /// page size, 1-1000 (default 100)
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// the `cursor` of the previous page
    pub cursor: Option<String>,
}

/// A time of a history read (`from`, `to`, `as_of`) in the versions' microseconds.
pub(super) fn micros(name: &str, text: &str) -> Result<i64, ApiError> {
    Ok(parse_bound(name, text)?.div_euclid(1000))
}

/// A document's versions, newest first: the current one (`current: true`), then each version a
/// write replaced and each deletion (`op: delete`, no document), with when each started. Only
/// for a table that keeps history (`history` in its definition).
#[utoipa::path(get, path = "/v1/tables/{table}/documents/{id}/history", tag = "documents",
    params(DocumentPath, HistoryQuery),
    responses(
        (status = 200, description = "the versions, newest first", body = HistoryPage),
        (status = 400, description = "invalid id, path, time or cursor, or the table keeps no history", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
    ))]
async fn history(
    Database(db): Database,
    ApiPath((table, id)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryPage>, ApiError> {
    let from = q.from.as_deref().map(|t| micros("from", t)).transpose()?.unwrap_or(i64::MIN);
    let to = q.to.as_deref().map(|t| micros("to", t)).transpose()?.unwrap_or(i64::MAX);
    let before = match q.cursor.as_deref() {
        Some(c) => Some(c.parse::<i64>().map_err(|_| {
            ApiError::from(crate::service::ServiceError::InvalidCursor(
                "a history cursor is a time the last page gave".into(),
            ))
        })?),
        None => None,
    };
    Ok(Json(db.history(table, id, (from, to), q.limit.unwrap_or(100), before).await?))
}
