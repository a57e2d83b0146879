//! `/v1/databases`: create, list, describe, drop. Every other route of a database is the plain
//! route under `/v1/db/{db}` (see `database.rs`).

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath};
use super::spec::DatabasePath;
use crate::service::ServiceError;
use crate::service::databases::{CreateDatabase, DatabaseInfo, DatabaseList, PatchDatabase};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_database, list_databases)).routes(routes!(
        get_database,
        patch_database,
        drop_database
    ))
}

/// Creates a database: its own tables, indexes, changefeed and background tasks, reached under
/// `/v1/db/{db}/…` (every route of `/v1/…` is there).
#[utoipa::path(post, path = "/v1/databases", tag = "databases", request_body = CreateDatabase, responses(
    (status = 201, description = "created", body = DatabaseInfo, links(
        ("get" = (operation_id = "get_database", parameters(("db" = "$response.body#/name")))),
        ("drop" = (operation_id = "drop_database", parameters(("db" = "$response.body#/name")))),
    )),
    (status = 400, description = "invalid database name (`invalid_database_name`)", body = Problem, content_type = "application/problem+json",
        example = json!({"type": "urn:mosaicdb:problem:invalid_database_name", "title": "Bad Request", "status": 400,
            "detail": "invalid database name \"a/b\": must not contain '/' (it separates table and id in vertex references)",
            "code": "invalid_database_name"})),
    (status = 409, description = "a database of that name exists (`database_exists`), the server holds --max-databases \
        (`too_many_databases`), or it runs in cluster mode (`cluster_mode`)", body = Problem, content_type = "application/problem+json",
        example = json!({"type": "urn:mosaicdb:problem:database_exists", "title": "Conflict", "status": 409,
            "detail": "database \"shop\" already exists", "code": "database_exists"})),
    (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
    (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
    (status = 422, description = "the body does not fit the schema", body = Problem, content_type = "application/problem+json"),
    (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
))]
async fn create_database(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CreateDatabase>,
) -> Result<impl IntoResponse, ApiError> {
    let info = state.databases.create(req).await?;
    let location = format!("/v1/databases/{}", super::encode_path(&info.name));
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(info)))
}

/// Lists every database, `default` first (those the API key may reach).
#[utoipa::path(get, path = "/v1/databases", tag = "databases",
    responses((status = 200, description = "the databases", body = DatabaseList)))]
async fn list_databases(State(state): State<AppState>, caller: Option<Extension<Caller>>) -> Json<DatabaseList> {
    let mut list = state.databases.list();
    if let Some(Extension(caller)) = caller {
        list.databases.retain(|d| caller.role_in(&d.name).is_some());
    }
    Json(list)
}

/// One database: its id, creation time, tables and documents.
#[utoipa::path(get, path = "/v1/databases/{db}", tag = "databases", params(DatabasePath),
    responses(
        (status = 200, description = "the database", body = DatabaseInfo),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such database (`database_not_found`)", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:database_not_found", "title": "Not Found", "status": 404,
                "detail": "database \"shop\" does not exist", "code": "database_not_found"})),
    ))]
async fn get_database(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath(db): ApiPath<String>,
) -> Result<Json<DatabaseInfo>, ApiError> {
    if let Some(Extension(caller)) = caller
        && caller.role_in(&db).is_none()
    {
        return Err(ServiceError::DatabaseNotFound(db).into());
    }
    Ok(Json(state.databases.describe(&db)?))
}

/// Sets a database's quota of stored bytes (`null`: none), effective at once.
#[utoipa::path(patch, path = "/v1/databases/{db}", tag = "databases", request_body = PatchDatabase, params(DatabasePath),
    responses(
        (status = 200, description = "the database, with its new quota", body = DatabaseInfo),
        (status = 400, description = "invalid path, a quota below 1 MiB, or the database `default` (which has none)", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such database (`database_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "the body does not fit the schema", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn patch_database(
    State(state): State<AppState>,
    ApiPath(db): ApiPath<String>,
    ApiJson(req): ApiJson<PatchDatabase>,
) -> Result<Json<DatabaseInfo>, ApiError> {
    Ok(Json(state.databases.patch(&db, req).await?))
}

/// Drops a database with every key of it: its name answers 404 at once (and may be used again);
/// its store is removed in the background, under a durable drop mark a restart resumes.
#[utoipa::path(delete, path = "/v1/databases/{db}", tag = "databases", params(DatabasePath),
    responses(
        (status = 204, description = "dropped"),
        (status = 400, description = "invalid path, or the database `default` (which cannot be dropped)", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such database (`database_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn drop_database(State(state): State<AppState>, ApiPath(db): ApiPath<String>) -> Result<StatusCode, ApiError> {
    state.databases.drop_database(&db).await?;
    Ok(StatusCode::NO_CONTENT)
}
