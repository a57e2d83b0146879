//! Document history: `GET /v1/tables/{table}/documents/{id}/history` (and `?as_of=` on the
//! document itself, in `documents.rs`).

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::spec::DocumentPath;
use crate::api::db_path::Database;
use crate::service::history::read::HistoryPage;
use axum::Json;
use axum::response::IntoResponse;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(history)).routes(routes!(restore))
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

/// The body of `POST …/documents/{id}/restore`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreBody {
    /// the time whose version is written back: ms since the epoch or RFC 3339
    #[serde(deserialize_with = "crate::service::query::required_time_text")]
    #[schema(example = "2026-11-28T10:00:00Z")]
    pub as_of: String,
}

/// A time of a history read (`from`, `to`, `as_of`) in the versions' microseconds.
pub(super) fn micros(name: &str, text: &str) -> Result<i64, ApiError> {
    Ok(crate::service::history::parse_time(name, text)?)
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
    Ok(Json(db.history.history(table, id, (from, to), q.limit.unwrap_or(100), before).await?))
}

/// Writes back the version the document had at `as_of` as a new write (the history then shows
/// it as the newest version), with `If-Match` as a PUT takes it.
#[utoipa::path(post, path = "/v1/tables/{table}/documents/{id}/restore", tag = "documents",
    params(DocumentPath, ("If-Match" = Option<String>, Header, description = "restore only if the current ETag matches")),
    request_body = RestoreBody,
    responses(
        (status = 200, description = "written back", body = crate::service::PutOutcome,
            headers(("ETag" = String, description = "content tag"))),
        (status = 400, description = "invalid id, path, header or time, or the table keeps no history", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such table, or the document had no version then", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "a unique index now holds a value of that version", body = Problem,
            content_type = "application/problem+json"),
        (status = 412, description = "If-Match failed", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "the body does not fit the schema, or that version no longer fits the table", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn restore(
    Database(db): Database,
    ApiPath((table, id)): ApiPath<(String, String)>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<RestoreBody>,
) -> Result<axum::response::Response, ApiError> {
    let pre = super::extract::preconditions(&headers)?;
    let at = micros("as_of", &body.as_of)?;
    let out = db.pipeline.restore_document(table, id, at, pre).await?;
    let etag = out.etag.clone();
    Ok(super::respond::with_etag(Json(out).into_response(), &etag))
}
