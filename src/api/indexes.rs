//! `/v1/tables/{table}/indexes`: create (with background backfill), list, inspect, drop.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath};
use super::spec::{CreateIndexBody, IndexPath, TablePath};
use crate::api::db_path::Database;
use crate::catalog::IndexDef;
use crate::service::CreateIndex;
use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_index, list_indexes))
        .routes(routes!(get_index, drop_index))
        .routes(routes!(rebuild_index))
}

/// The indexes of a table.
#[derive(Debug, Serialize, ToSchema)]
pub struct IndexList {
    /// by name
    pub indexes: Vec<IndexDef>,
}

/// Creates an index. On an empty table it is ready at once (201); otherwise it is `building` (202)
/// while a background job indexes the existing documents — poll `GET …/indexes/{name}` for the
/// progress. Writes keep it up to date from the start; queries use it once it is `ready`.
#[utoipa::path(post, path = "/v1/tables/{table}/indexes", tag = "indexes", request_body = CreateIndexBody,
    params(TablePath),
    responses(
        (status = 201, description = "created and ready", body = IndexDef, headers(("Location" = String, description = "the index")),
            links(
                ("get" = (operation_id = "get_index", parameters(("table" = "$response.body#/table"), ("name" = "$response.body#/name")))),
                ("drop" = (operation_id = "drop_index", parameters(("table" = "$response.body#/table"), ("name" = "$response.body#/name")))),
            )),
        (status = 202, description = "created, building", body = IndexDef, headers(("Location" = String, description = "the index"))),
        (status = 400, description = "invalid name, fields or path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "an index of that name exists or is being dropped", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:index_exists", "title": "Conflict", "status": 409,
                "detail": "index \"by_age\" already exists on table \"users\"", "code": "index_exists"})),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "unknown or unsupported kind, or a body of the wrong shape", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_index(
    Database(db): Database,
    ApiPath(table): ApiPath<String>,
    ApiJson(req): ApiJson<CreateIndex>,
) -> Result<impl IntoResponse, ApiError> {
    let def = db.pipeline.create_index(table, req).await?;
    let status = if def.is_ready() { StatusCode::CREATED } else { StatusCode::ACCEPTED };
    let location = format!("/v1/tables/{}/indexes/{}", super::encode_path(&def.table), super::encode_path(&def.name));
    Ok((status, [(header::LOCATION, location)], Json(def)))
}

/// Lists the indexes of a table with their state.
#[utoipa::path(get, path = "/v1/tables/{table}/indexes", tag = "indexes", params(TablePath),
    responses(
        (status = 200, description = "the indexes", body = IndexList),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_indexes(Database(db): Database, ApiPath(table): ApiPath<String>) -> Result<Json<IndexList>, ApiError> {
    Ok(Json(IndexList { indexes: db.pipeline.list_indexes(table).await? }))
}

/// One index: definition, `state` (`building` with `done`/`total`, `ready`, or `failed` with `error`).
#[utoipa::path(get, path = "/v1/tables/{table}/indexes/{name}", tag = "indexes",
    params(IndexPath),
    responses(
        (status = 200, description = "the index", body = IndexDef),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or index", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_index(
    Database(db): Database,
    ApiPath((table, name)): ApiPath<(String, String)>,
) -> Result<Json<IndexDef>, ApiError> {
    Ok(Json(db.pipeline.get_index(table, name).await?))
}

/// Drops an index and its entries.
#[utoipa::path(delete, path = "/v1/tables/{table}/indexes/{name}", tag = "indexes",
    params(IndexPath),
    responses(
        (status = 204, description = "dropped"),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or index", body = Problem, content_type = "application/problem+json"),
    ))]
async fn drop_index(
    Database(db): Database,
    ApiPath((table, name)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    db.pipeline.drop_index(table, name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Rebuilds a `vector` index from the documents (after a crash left its keys in doubt, or
/// `check` reported them): its keys go and a background build indexes every document again; the
/// index is `building` meanwhile (poll `GET …/indexes/{name}`), and vector searches refuse it
/// until it is `ready`. Writes keep it up to date throughout.
#[utoipa::path(post, path = "/v1/tables/{table}/indexes/{name}/rebuild", tag = "indexes",
    params(IndexPath),
    responses(
        (status = 202, description = "rebuilding", body = IndexDef, headers(("Location" = String, description = "the index"))),
        (status = 400, description = "not a vector index, still building, or a bad path", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such table or index", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn rebuild_index(
    Database(db): Database,
    ApiPath((table, name)): ApiPath<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let def = db.pipeline.rebuild_index(table, name).await?;
    let location = format!("/v1/tables/{}/indexes/{}", super::encode_path(&def.table), super::encode_path(&def.name));
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(def)))
}
