//! `POST /v1/tables/{table}/vector-search`.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath};
use super::spec::TablePath;
use crate::api::db_path::Database;
use crate::service::{VectorSearchRequest, VectorSearchResponse};
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(vector_search))
}

/// The `k` documents nearest to `vector` in a table's `vector` index on `field`, nearest first.
/// `filter` (the query language) is applied during the graph walk; a filter an index narrows to
/// few documents is searched exactly over those, and a walk that finds fewer than `k` falls back
/// to an exact search, so `k` hits come back whenever `k` documents match. `exact: true` is brute
/// force. Deleted, replaced, expired and filtered-out documents are never returned.
#[utoipa::path(post, path = "/v1/tables/{table}/vector-search", tag = "search", request_body = VectorSearchRequest,
    params(TablePath),
    responses(
        (status = 200, description = "the hits, nearest first, and the strategy that ran", body = VectorSearchResponse,
            example = json!({"hits": [{"_id": "d1", "distance": 0.0123, "document": {"_id": "d1", "title": "Graphs"}}],
                "strategy": "hnsw"})),
        (status = 400, description = "a vector of the wrong length, a zero vector (cosine), k or ef out of range, a bad filter",
            body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the search passed the request timeout", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "no ready vector index on `field` (`no_vector_index`), or a body of the wrong shape",
            body = Problem, content_type = "application/problem+json"),
    ))]
async fn vector_search(
    Database(db): Database,
    ApiPath(table): ApiPath<String>,
    ApiJson(req): ApiJson<VectorSearchRequest>,
) -> Result<Json<VectorSearchResponse>, ApiError> {
    Ok(Json(db.vectors.vector_search(table, req).await?))
}
