//! `/v1/graph`: neighbours, traversals and shortest paths over the edge tables.

use super::AppState;
use super::admission::HeavyClass;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiQuery};
use crate::api::db_path::Database;
use crate::service::graph::{
    NeighborsPage, NeighborsRequest, ShortestPathRequest, ShortestPathResponse, TraverseRequest, TraverseResponse,
    WalkDirection,
};
use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(neighbors)).routes(routes!(traverse)).routes(routes!(shortest_path))
}

/// The query of `GET /v1/graph/neighbors`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NeighborsQuery {
    /// the vertex, `"table/id"` (the id may hold `/` and `:`; percent-encode as usual)
    #[param(min_length = 3, pattern = "^[^/]+/.+$", example = "users/alice")]
    pub vertex: String,
    /// `out` (default: edges whose `_from` is the vertex), `in` or `any`
    #[serde(default)]
    #[param(inline)]
    pub direction: WalkDirection,
    /// comma-separated edge tables (default: every edge table; at most 32)
    #[param(example = "follows,likes")]
    pub edges: Option<String>,
    /// page size, 1-1000 (default 100)
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// the `cursor` of the previous page (same vertex, direction and edges)
    pub cursor: Option<String>,
}

/// The edges at a vertex with the vertex at their other end, a page at a time: by edge table (as
/// listed in `edges`, else by name), `out` before `in`, then edge id.
#[utoipa::path(get, path = "/v1/graph/neighbors", tag = "graph", params(NeighborsQuery),
    responses(
        (status = 200, description = "a page of neighbours", body = NeighborsPage,
            example = json!({"neighbors": [{"vertex": "users/bob", "edge": "follows/e1", "direction": "out"}], "cursor": null})),
        (status = 400, description = "invalid vertex, limit, cursor or edge table list", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_request", "title": "Bad Request", "status": 400,
                "detail": "vertex must be a vertex \"table/id\", not \"alice\"", "code": "invalid_request"})),
        (status = 404, description = "no such table or vertex (`table_not_found`, `document_not_found`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 408, description = "the walk passed the request timeout", body = Problem, content_type = "application/problem+json"),
    ))]
async fn neighbors(
    Database(db): Database,
    ApiQuery(q): ApiQuery<NeighborsQuery>,
) -> Result<Json<NeighborsPage>, ApiError> {
    let edges = q.edges.map(|e| e.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect());
    let req = NeighborsRequest {
        vertex: q.vertex,
        direction: q.direction,
        edges,
        limit: q.limit.unwrap_or(100),
        cursor: q.cursor,
    };
    Ok(Json(db.graph.neighbors(req).await?))
}

/// A breadth-first walk from `start` along the given edge tables and direction, from `min_depth`
/// to `max_depth`. `vertex_filter` and `edge_filter` use the query filter language: a vertex that
/// fails it is neither returned nor expanded, an edge that fails it is not followed. The walk
/// reads adjacency entries only (edge documents for an edge filter, vertex documents for a vertex
/// filter or `fields`) and stops with 422 `max_visited_exceeded` past `max_visited` entries.
#[utoipa::path(post, path = "/v1/graph/traverse", tag = "graph", request_body = TraverseRequest,
    responses(
        (status = 200, description = "the vertices reached, in breadth-first order (and the paths)", body = TraverseResponse,
            example = json!({"vertices": [{"_id": "users/bob", "depth": 1}, {"_id": "users/carol", "depth": 2}],
                "paths": [{"vertices": ["users/alice", "users/bob"], "edges": ["follows/e1"]},
                          {"vertices": ["users/alice", "users/bob", "users/carol"], "edges": ["follows/e1", "follows/e2"]}]})),
        (status = 400, description = "invalid depths, limit, max_visited, fields, filter or edge table list", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such table or start vertex", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the walk passed the request timeout", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "a body of the wrong shape, or the walk read more than `max_visited` entries \
            (`max_visited_exceeded`)", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:max_visited_exceeded", "title": "Unprocessable Entity", "status": 422,
                "detail": "the walk read more than max_visited = 1000 adjacency entries: narrow it (depth, edges, filters) or raise max_visited",
                "code": "max_visited_exceeded"})),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`",
            body = Problem, content_type = "application/problem+json"),
    ))]
async fn traverse(
    State(state): State<AppState>,
    Database(db): Database,
    ApiJson(req): ApiJson<TraverseRequest>,
) -> Result<Response, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Graph).await?;
    let answer = db.graph.traverse(req).await?;
    // `{"_id":"…","depth":N}` per vertex, about; paths about twice that again
    let per_vertex = if answer.paths.is_some() { 160 } else { 48 };
    Ok(super::respond::json_sized(&answer, 64 + per_vertex * answer.vertices.len()))
}

/// The shortest path from `from` to `to`: by hops (bidirectional breadth-first search), or by the
/// sum of a numeric edge field `weight` (Dijkstra); with `k` > 1 the k shortest loop-free paths
/// (Yen). The first path is also given at the top level.
#[utoipa::path(post, path = "/v1/graph/shortest-path", tag = "graph", request_body = ShortestPathRequest,
    responses(
        (status = 200, description = "the paths, shortest first", body = ShortestPathResponse,
            example = json!({"paths": [{"vertices": ["cities/oslo", "cities/bergen"], "edges": ["roads/r1"], "cost": 463}],
                "vertices": ["cities/oslo", "cities/bergen"], "edges": ["roads/r1"], "cost": 463})),
        (status = 400, description = "invalid k, weight, max_visited or edge table list", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such table or vertex, or no path (`no_path`)", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:no_path", "title": "Not Found", "status": 404,
                "detail": "no path from \"users/alice\" to \"users/zoe\"", "code": "no_path"})),
        (status = 408, description = "the search passed the request timeout", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "a body of the wrong shape; an edge whose weight is missing, not a number or negative \
            (`invalid_weight`); or more than `max_visited` entries read (`max_visited_exceeded`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`",
            body = Problem, content_type = "application/problem+json"),
    ))]
async fn shortest_path(
    State(state): State<AppState>,
    Database(db): Database,
    ApiJson(req): ApiJson<ShortestPathRequest>,
) -> Result<Json<ShortestPathResponse>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Graph).await?;
    Ok(Json(db.graph.shortest_path(req).await?))
}
