//! `/v1/tables/{table}/views`: maintained views — create (with background build), list, read
//! (a group view's groups, a filter view's documents), drop.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::spec::{TablePath, ViewPath};
use crate::api::db_path::Database;
use crate::catalog::ViewDef;
use crate::service::views::{GroupQuery, PageQuery, ViewDocuments};
use crate::service::{CreateView, ViewInfo, ViewList};
use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_view, list_views))
        .routes(routes!(get_view, drop_view))
        .routes(routes!(view_documents))
}

/// Creates a maintained view: `filter` (the members of a saved filter) or `group` (aggregates per
/// group of `by` values). On an empty table it is ready at once (201); otherwise it is `building`
/// (202) while a background job adds the existing documents — poll `GET …/views/{name}`. Every
/// write keeps it up to date in the write's own atomic batch; it can be read once `ready`.
#[utoipa::path(post, path = "/v1/tables/{table}/views", tag = "views", request_body = CreateView,
    params(TablePath),
    responses(
        (status = 201, description = "created and ready", body = ViewDef, headers(("Location" = String, description = "the view"))),
        (status = 202, description = "created, building", body = ViewDef, headers(("Location" = String, description = "the view"))),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "a view of that name exists (`view_exists`) or is being dropped (`view_dropping`)",
            body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:view_exists", "title": "Conflict", "status": 409,
                "detail": "view \"by_city\" already exists on table \"users\"", "code": "view_exists"})),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "an invalid definition (`invalid_view`: name, filter with $near/$box/$view, `by`, aggregates, more than 32 views) or a body of the wrong shape",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_view(
    Database(db): Database,
    ApiPath(table): ApiPath<String>,
    ApiJson(req): ApiJson<CreateView>,
) -> Result<impl IntoResponse, ApiError> {
    let def = db.pipeline.create_view(table, req).await?;
    let status = if def.is_ready() { StatusCode::CREATED } else { StatusCode::ACCEPTED };
    let location = format!("/v1/tables/{}/views/{}", super::encode_path(&def.table), super::encode_path(&def.name));
    Ok((status, [(header::LOCATION, location)], Json(def)))
}

/// Lists the views of a table with their state, and once ready their size (`count` members of a
/// filter view, `group_count` groups of a group view).
#[utoipa::path(get, path = "/v1/tables/{table}/views", tag = "views", params(TablePath),
    responses(
        (status = 200, description = "the views", body = ViewList),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_views(Database(db): Database, ApiPath(table): ApiPath<String>) -> Result<Json<ViewList>, ApiError> {
    Ok(Json(db.views.list_views(table).await?))
}

/// One view: definition, `state` (`building` with `done`/`total`, `ready`, or `failed` with
/// `error`) and size. A ready group view also answers a page of its groups in key order
/// (`groups`, each `{"key": {…}, aggregate: value, …}`, and `cursor`), or with `key` the one group
/// it names.
#[utoipa::path(get, path = "/v1/tables/{table}/views/{name}", tag = "views",
    params(ViewPath, GroupQuery),
    responses(
        (status = 200, description = "the view", body = ViewInfo),
        (status = 400, description = "bad limit, cursor, key or path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or view", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "paging the groups of a view that is not ready (`view_not_ready`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "`key`, `limit` or `cursor` given for a filter view", body = Problem,
            content_type = "application/problem+json"),
    ))]
async fn get_view(
    Database(db): Database,
    ApiPath((table, name)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<GroupQuery>,
) -> Result<Json<ViewInfo>, ApiError> {
    Ok(Json(db.views.get_view(table, name, query).await?))
}

/// Drops a view and its keys.
#[utoipa::path(delete, path = "/v1/tables/{table}/views/{name}", tag = "views",
    params(ViewPath),
    responses(
        (status = 204, description = "dropped"),
        (status = 400, description = "invalid path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or view", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn drop_view(
    Database(db): Database,
    ApiPath((table, name)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    db.pipeline.drop_view(table, name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pages a ready filter view's members in `_id` order (`fields` projects them, as a query's).
#[utoipa::path(get, path = "/v1/tables/{table}/views/{name}/documents", tag = "views",
    params(ViewPath, PageQuery),
    responses(
        (status = 200, description = "one page", body = ViewDocuments),
        (status = 400, description = "bad limit, cursor, fields or path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or view", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "the view is not ready (`view_not_ready`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "a group view (`invalid_view`): read its groups instead", body = Problem,
            content_type = "application/problem+json"),
    ))]
async fn view_documents(
    Database(db): Database,
    ApiPath((table, name)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Response, ApiError> {
    Ok(super::json_text(db.views.view_documents(table, name, query).await?.to_json()))
}
