//! `POST /v1/tables/{table}/query`.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath};
use super::spec::{QueryBody, TablePath};
use crate::service::{QueryRequest, QueryResponse, QueryResult};
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(query))
}

/// Finds documents: `filter` (operators `$eq $ne $gt $gte $lt $lte $in $nin $exists $prefix
/// $contains $near $box $and $or $not`, dotted paths, implicit AND), `sort`, `fields`, `limit`,
/// `cursor`. The planner uses indexes wherever one fits; `explain: true` returns the plan with
/// estimated and actual row counts instead of documents.
#[utoipa::path(post, path = "/v1/tables/{table}/query", tag = "query", request_body = QueryBody,
    params(TablePath),
    responses(
        (status = 200, description = "a page of documents (`documents`, `cursor`), or `{\"plan\": …}` with explain", body = QueryResponse),
        (status = 400, description = "invalid filter, sort, limit or cursor; or a refused full scan", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_filter", "title": "Bad Request", "status": 400,
                "detail": "invalid filter: unknown operator $foo", "code": "invalid_filter"})),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the scan passed the request timeout and stopped (`request_timeout`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "a body of the wrong shape (e.g. a sort entry that is not a string)", body = Problem,
            content_type = "application/problem+json"),
    ))]
async fn query(
    State(state): State<AppState>,
    ApiPath(table): ApiPath<String>,
    ApiJson(req): ApiJson<QueryRequest>,
) -> Result<Response, ApiError> {
    Ok(match state.db.query(table, req).await? {
        QueryResult::Page(page) => super::json_text(page.to_json()),
        QueryResult::Explain(plan) => Json(plan).into_response(),
    })
}
