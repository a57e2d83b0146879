//! `/v1/tables`: create, list, describe, add columns, drop.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath};
use super::spec::TablePath;
use crate::api::db_path::Database;
use crate::catalog::{ColumnDef, TableDef};
use crate::service::{CreateTable, TableInfo};
use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_table, list_tables)).routes(routes!(get_table, patch_table, drop_table))
}

/// The tables.
#[derive(Debug, Serialize, ToSchema)]
pub struct TableList {
    /// every table, by name
    pub tables: Vec<TableInfo>,
}

/// The body of `PATCH /v1/tables/{table}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchTable {
    /// columns to add (each nullable or with a default)
    #[serde(default)]
    pub add_columns: Vec<ColumnDef>,
    /// sets what the table's change events carry: `full`, `keys` or `off`
    #[serde(default)]
    pub changefeed: Option<crate::catalog::ChangefeedMode>,
    /// sets the table's history policy (`null`: history off; what was kept is removed)
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<crate::catalog::HistoryPolicy>)]
    pub history: Option<Option<crate::catalog::HistoryPolicy>>,
}

/// A member that may be absent (`None`), `null` (`Some(None)`) or a value.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Creates a table: schemaless (`columns` omitted), typed, or an edge table (`kind: edge`).
#[utoipa::path(post, path = "/v1/tables", tag = "tables", request_body = CreateTable, responses(
    (status = 201, description = "created", body = TableDef, links(
        ("get" = (operation_id = "get_table", parameters(("table" = "$response.body#/name")))),
        ("insert" = (operation_id = "insert_documents", parameters(("table" = "$response.body#/name")))),
        ("index" = (operation_id = "create_index", parameters(("table" = "$response.body#/name")))),
        ("query" = (operation_id = "query", parameters(("table" = "$response.body#/name")))),
        ("drop" = (operation_id = "drop_table", parameters(("table" = "$response.body#/name")))),
    )),
    (status = 400, description = "invalid table name or columns (names twice, a default that does not fit its type), or `on_vertex_delete` / `weight_field` on a document table or an invalid weight field name", body = Problem, content_type = "application/problem+json",
        example = json!({"type": "urn:mosaicdb:problem:invalid_table_name", "title": "Bad Request", "status": 400,
            "detail": "invalid table name \"a/b\": must not contain '/'", "code": "invalid_table_name"})),
    (status = 409, description = "a table of that name exists (or is still being dropped)", body = Problem,
        content_type = "application/problem+json",
        example = json!({"type": "urn:mosaicdb:problem:table_exists", "title": "Conflict", "status": 409,
            "detail": "table \"users\" already exists", "code": "table_exists"})),
    (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
    (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
    (status = 422, description = "the body does not fit the schema", body = Problem, content_type = "application/problem+json"),
    (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
))]
async fn create_table(
    Database(db): Database,
    ApiJson(req): ApiJson<CreateTable>,
) -> Result<impl IntoResponse, ApiError> {
    let def = db.pipeline.create_table(req).await?;
    let location = format!("/v1/tables/{}", super::encode_path(&def.name));
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(def)))
}

/// Lists every table with its document count.
#[utoipa::path(get, path = "/v1/tables", tag = "tables", responses((status = 200, description = "the tables", body = TableList)))]
async fn list_tables(Database(db): Database) -> Result<Json<TableList>, ApiError> {
    Ok(Json(TableList { tables: db.pipeline.list_tables().await? }))
}

/// A table's definition and document count.
#[utoipa::path(get, path = "/v1/tables/{table}", tag = "tables", params(TablePath),
    responses(
        (status = 200, description = "the table", body = TableInfo),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:table_not_found", "title": "Not Found", "status": 404,
                "detail": "table \"users\" does not exist", "code": "table_not_found"})),
    ))]
async fn get_table(Database(db): Database, ApiPath(table): ApiPath<String>) -> Result<Json<TableInfo>, ApiError> {
    Ok(Json(db.pipeline.get_table(table).await?))
}

/// Adds columns to a typed table and/or sets the table's changefeed mode.
#[utoipa::path(patch, path = "/v1/tables/{table}", tag = "tables", request_body = PatchTable,
    params(TablePath),
    responses(
        (status = 200, description = "the new definition", body = TableDef),
        (status = 400, description = "invalid columns (a name taken, neither nullable nor with a default, a default that does \
            not fit), or the table is schemaless", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "history turned on again before the `history_retention` task removed what was kept \
            before it was turned off (`history_purging`)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "the body does not fit the schema", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn patch_table(
    Database(db): Database,
    ApiPath(table): ApiPath<String>,
    ApiJson(req): ApiJson<PatchTable>,
) -> Result<Json<TableDef>, ApiError> {
    let change =
        crate::service::AlterTable { columns: req.add_columns, changefeed: req.changefeed, history: req.history };
    Ok(Json(db.pipeline.alter_table(table, change).await?))
}

/// Drops a table with every document and index entry of it.
#[utoipa::path(delete, path = "/v1/tables/{table}", tag = "tables", params(TablePath),
    responses(
        (status = 204, description = "dropped"),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn drop_table(Database(db): Database, ApiPath(table): ApiPath<String>) -> Result<StatusCode, ApiError> {
    db.pipeline.drop_table(table).await?;
    Ok(StatusCode::NO_CONTENT)
}
