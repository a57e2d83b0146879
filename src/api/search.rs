//! `POST /v1/tables/{table}/search` and `POST /v1/tables/{table}/indexes/{name}/analyze`.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath};
use super::spec::{IndexPath, TablePath};
use crate::api::db_path::Database;
use crate::service::{AnalyzeRequest, AnalyzeResponse, SearchRequest, SearchResponse};
use axum::Json;
use axum::response::Response;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search)).routes(routes!(analyze))
}

/// Full-text search over a table's `fulltext` index, ranked by BM25 on whole-table statistics
/// (ties by `_id`). Query syntax: bare terms, `"quoted phrases"`, `prefix*`, `-excluded`,
/// `typo~1` / `typo~2`. `mode: all` needs every clause; `filter` (the query language) narrows the
/// hits; `total` counts every match; `highlight` marks matched words in fragments. With `vector`
/// (hybrid search) the vector search runs too, with the same filter, and both rankings are fused
/// by reciprocal rank fusion (`fusion`: Σ 1 / (k + rank), k = 60): each hit's `score` is the fused
/// score, `ranks` its rank in each list, `distance` its distance; `total` counts the fused hits.
#[utoipa::path(post, path = "/v1/tables/{table}/search", tag = "search", request_body = SearchRequest,
    params(TablePath),
    responses(
        (status = 200, description = "the hits, best first, and the total", body = SearchResponse,
            example = json!({"hits": [{"_id": "p1", "score": 1.2345, "document": {"_id": "p1", "title": "Graph databases"},
                "highlights": {"title": "<em>Graph</em> databases"}}], "total": 1})),
        (status = 400, description = "a query that does not parse (`invalid_query`, with the character position), \
            a bad filter, limit, offset or highlight, or a prefix or typo that matches too many terms (`query_too_complex`)",
            body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_query", "title": "Bad Request", "status": 400,
                "detail": "invalid search query at character 6: this quote is never closed", "code": "invalid_query"})),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the search passed the request timeout", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "no ready fulltext index to search, or `index` names none (`no_search_index`); \
            no ready vector index on a hybrid search's field (`no_vector_index`); or a body of the wrong shape",
            body = Problem, content_type = "application/problem+json"),
    ))]
async fn search(
    Database(db): Database,
    ApiPath(table): ApiPath<String>,
    ApiJson(req): ApiJson<SearchRequest>,
) -> Result<Response, ApiError> {
    if req.vector.is_some() {
        return Ok(super::json_text(db.vectors.hybrid_search(table, req).await?));
    }
    Ok(super::json_text(db.search.search(table, req).await?))
}

/// The tokens a fulltext index makes of a text, with positions and byte offsets: what is indexed
/// and what a query term must equal, for debugging relevance.
#[utoipa::path(post, path = "/v1/tables/{table}/indexes/{name}/analyze", tag = "search", request_body = AnalyzeRequest,
    params(IndexPath),
    responses(
        (status = 200, description = "the tokens", body = AnalyzeResponse,
            example = json!({"tokens": [{"token": "graph", "position": 1, "start": 4, "end": 10}]})),
        (status = 400, description = "text over 64 KiB, or a bad path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or index", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "not a fulltext index, or a body of the wrong shape", body = Problem,
            content_type = "application/problem+json"),
    ))]
async fn analyze(
    Database(db): Database,
    ApiPath((table, name)): ApiPath<(String, String)>,
    ApiJson(req): ApiJson<AnalyzeRequest>,
) -> Result<Json<AnalyzeResponse>, ApiError> {
    Ok(Json(db.search.analyze(table, name, req).await?))
}
