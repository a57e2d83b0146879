//! `POST /v1/tables/{table}/query`.

use super::admission::HeavyClass;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath};
use super::spec::{QueryBody, TablePath};
use super::stream::{NdjsonDocuments, wants_ndjson};
use super::{AppState, ClientGone};
use crate::api::db_path::Database;
use crate::service::{QueryRequest, QueryResponse, QueryResult};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, Version};
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(query))
}

/// Finds documents: `filter` (operators `$eq $ne $gt $gte $lt $lte $in $nin $exists $prefix
/// $contains $near $box $and $or $not`, dotted paths, implicit AND), `sort`, `fields`, `limit`,
/// `cursor`. The planner uses indexes wherever one fits; `explain: true` returns the plan with
/// estimated and actual row counts instead of documents.
///
/// With `Accept: application/x-ndjson` every matching document is streamed instead, one per line,
/// from one snapshot (no `limit`, `cursor` or `explain`: 400), in the order pages would give; a
/// sort that no index scan gives is done in memory for up to 10,000 matches (else 422
/// `stream_sort_too_large`). Errors before the first line are problem documents; an error after
/// it cuts the body short (no final chunk), so a complete body is a complete answer. The request
/// timeout bounds the planning, not the stream; a client that reads nothing for that long, or goes
/// away, ends it.
#[utoipa::path(post, path = "/v1/tables/{table}/query", tag = "query", request_body = QueryBody,
    params(TablePath),
    responses(
        (status = 200, description = "a page of documents (`documents`, `cursor`), or `{\"plan\": …}` with explain; \
            with `Accept: application/x-ndjson`, every match, one document per line", content(
            (QueryResponse = "application/json"),
            (NdjsonDocuments = "application/x-ndjson"),
        )),
        (status = 400, description = "invalid filter, sort, limit or cursor; or a refused full scan", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_filter", "title": "Bad Request", "status": 400,
                "detail": "invalid filter: unknown operator $foo", "code": "invalid_filter"})),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 406, description = "an NDJSON stream asked for over HTTP/1.0, which cannot tell a cut stream from a whole one \
            (`not_acceptable`)", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the scan passed the request timeout and stopped (`request_timeout`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "a body of the wrong shape (e.g. a sort entry that is not a string); a streamed query whose \
            sort no index gives matches more than 10,000 documents, or sort values over 64 MiB (`stream_sort_too_large`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "a stream asked for while the server already writes `--max-streams` streamed answers \
            (`too_many_streams`), or a page while every place of the query class (or, with `as_of`, of the history class) is \
            taken (`--max-heavy-reads`: `too_many_heavy_reads`); both with `Retry-After`", body = Problem,
            content_type = "application/problem+json"),
    ))]
async fn query(
    Database(db): Database,
    State(state): State<AppState>,
    ApiPath(table): ApiPath<String>,
    headers: HeaderMap,
    version: Version,
    gone: Option<Extension<ClientGone>>,
    ApiJson(req): ApiJson<QueryRequest>,
) -> Result<Response, ApiError> {
    if wants_ndjson(&headers) {
        super::stream::check_version(version)?;
        // taken before planning: an in-memory sort is part of the stream's cost
        let slot = super::stream::slot(&state)?;
        let mut stream = db.query.query_stream(table, req).await?;
        let guard = stream.abandon_guard();
        return Ok(super::stream::ndjson(&state, &db, slot, gone.map(|g| g.0), guard, move |pipe| {
            stream.write_to(pipe).map(drop)
        }));
    }
    let class = if req.as_of.is_some() { HeavyClass::History } else { HeavyClass::Query };
    let _permit = state.admission.enter(class).await?;
    let response = match db.query.query(table, req).await? {
        QueryResult::Page(page) => super::json_text(page.to_json()),
        QueryResult::Explain(plan) => Json(plan).into_response(),
    };
    Ok(super::stream::vary_accept(response))
}
