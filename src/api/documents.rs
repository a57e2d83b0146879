//! `/v1/tables/{table}/documents` and `/v1/tables/{table}/import`.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, preconditions};
use super::respond::with_etag;
use super::spec::{DocumentPath, InsertAnswer, InsertBody, Inserted, TablePath};
use super::stream::{NDJSON_TYPES, NdjsonDocuments, wants_ndjson};
use crate::api::db_path::Database;
use crate::service::{DocumentPage, ImportFormat, ImportReport, PutOutcome};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_document, get_document, patch_document, delete_document))
        .routes(routes!(insert_documents, list_documents))
}

/// The import route: kept apart because it streams and is not bound by the request timeout.
pub(super) fn import_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(import))
}

/// Paging of `GET …/documents`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// page size, 1-1000 (default 100)
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// the `cursor` of the previous page (opaque)
    pub cursor: Option<String>,
    /// list (or export) the table as it was at this time: ms since the epoch or RFC 3339; only
    /// for a table that keeps history (see `as_of` of the query)
    pub as_of: Option<String>,
}

/// Creates (201) or replaces (200) the document `id`.
#[utoipa::path(put, path = "/v1/tables/{table}/documents/{id}", tag = "documents",
    params(DocumentPath,
        ("If-Match" = Option<String>, Header, description = "replace only if the current ETag matches (`*`: if it exists)"),
        ("If-None-Match" = Option<String>, Header, description = "`*`: create only if it does not exist")),
    request_body(content = Object, description = "the document: a JSON object; `_id`, if given, must equal the path id; \
        on an edge table `_from` and `_to` (`\"table/id\"`) are required; on a typed table the columns decide the fields"),
    responses(
        (status = 201, description = "created", body = PutOutcome, headers(("ETag" = String, description = "content tag")),
            links(
                ("get" = (operation_id = "get_document", parameters(("table" = "$request.path.table"), ("id" = "$request.path.id")))),
                ("patch" = (operation_id = "patch_document", parameters(("table" = "$request.path.table"), ("id" = "$request.path.id")))),
                ("delete" = (operation_id = "delete_document", parameters(("table" = "$request.path.table"), ("id" = "$request.path.id")))),
            )),
        (status = 200, description = "replaced", body = PutOutcome, headers(("ETag" = String, description = "content tag"))),
        (status = 400, description = "malformed JSON, invalid id, path or header", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:malformed_json", "title": "Bad Request", "status": 400,
                "detail": "Failed to parse the request body as JSON: EOF while parsing an object at line 1 column 9", "code": "malformed_json"})),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "a unique index already holds a value", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match / If-None-Match failed", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:precondition_failed", "title": "Precondition Failed", "status": 412,
                "detail": "precondition failed: If-Match: the current ETag is \"5c1e0b7d1a3f2e4c\"", "code": "precondition_failed"})),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "not an object; a typed table rejects a field; an edge lacks `_from`/`_to`, names a vertex that does not \
            exist, or lacks its table's weight field; `_id` differs from the path", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:schema_violation", "title": "Unprocessable Entity", "status": 422,
                "detail": "field \"age\": must be of type int", "code": "schema_violation"})),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn put_document(
    Database(db): Database,
    ApiPath((table, id)): ApiPath<(String, String)>,
    headers: HeaderMap,
    ApiJson(doc): ApiJson<Map<String, Value>>,
) -> Result<Response, ApiError> {
    let pre = preconditions(&headers)?;
    let out = db.pipeline.put_document(table.clone(), id, doc, pre).await?;
    let etag = out.etag.clone();
    let response = if out.created {
        let location = format!("/v1/tables/{}/documents/{}", super::encode_path(&table), super::encode_path(&out.id));
        (StatusCode::CREATED, [(header::LOCATION, location)], Json(out)).into_response()
    } else {
        Json(out).into_response()
    };
    Ok(with_etag(response, &etag))
}

/// The query of `GET …/documents/{id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GetQuery {
    /// the version current at this time (ms since the epoch or RFC 3339), for a table that keeps
    /// history: 404 `document_not_found` if the document did not exist then
    pub as_of: Option<String>,
}

/// Reads the document `id` (with its `_id`), or with `as_of` the version it had then.
#[utoipa::path(get, path = "/v1/tables/{table}/documents/{id}", tag = "documents",
    params(DocumentPath, GetQuery),
    responses(
        (status = 200, description = "the document", body = Object, headers(("ETag" = String, description = "content tag"))),
        (status = 400, description = "invalid id or path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or document", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:document_not_found", "title": "Not Found", "status": 404,
                "detail": "document \"alice\" not found in table \"users\"", "code": "document_not_found"})),
    ))]
async fn get_document(
    Database(db): Database,
    ApiPath((table, id)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<GetQuery>,
) -> Result<Response, ApiError> {
    let doc = match q.as_of {
        Some(at) => db.history.get_document_as_of(table, id, super::history::micros("as_of", &at)?).await?,
        None => db.pipeline.get_document(table, id).await?,
    };
    Ok(with_etag(super::json_text(doc.json), &doc.etag))
}

/// Applies a JSON merge patch (RFC 7396) to the document `id`.
#[utoipa::path(patch, path = "/v1/tables/{table}/documents/{id}", tag = "documents",
    params(DocumentPath,
        ("If-Match" = Option<String>, Header, description = "patch only if the current ETag matches")),
    request_body(content = Object, description = "a JSON merge patch (an object): objects merge, null removes a field"),
    responses(
        (status = 200, description = "patched", body = PutOutcome, headers(("ETag" = String, description = "content tag"))),
        (status = 400, description = "malformed JSON, invalid id, path or header", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or document", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "a unique index already holds a value", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match failed", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "the patch is not an object, or the result breaks the table's schema (an edge moved to a vertex that \
            does not exist)", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn patch_document(
    Database(db): Database,
    ApiPath((table, id)): ApiPath<(String, String)>,
    headers: HeaderMap,
    ApiJson(patch): ApiJson<Value>,
) -> Result<Response, ApiError> {
    let pre = preconditions(&headers)?;
    let out = db.pipeline.patch_document(table, id, patch, pre).await?;
    let etag = out.etag.clone();
    Ok(with_etag(Json(out).into_response(), &etag))
}

/// Deletes the document `id`.
#[utoipa::path(delete, path = "/v1/tables/{table}/documents/{id}", tag = "documents",
    params(DocumentPath,
        ("If-Match" = Option<String>, Header, description = "delete only if the current ETag matches")),
    responses(
        (status = 204, description = "deleted, with the vertex's edges in every `cascade` edge table"),
        (status = 400, description = "invalid id, path or header", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table or document", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "the document is a vertex with edges in a `reject` edge table (`vertex_has_edges`)",
            body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:vertex_has_edges", "title": "Conflict", "status": 409,
                "detail": "vertex \"users/alice\" has edges in a reject edge table (e.g. \"follows/e1\"): delete them first",
                "code": "vertex_has_edges"})),
        (status = 412, description = "If-Match failed", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "the delete would cascade to more than 10000 edges (`too_many_edges`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn delete_document(
    Database(db): Database,
    ApiPath((table, id)): ApiPath<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let pre = preconditions(&headers)?;
    db.pipeline.delete_document(table, id, pre).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Inserts one document (an object) or several (an array), all or nothing; ids are generated
/// (UUIDv7, time-ordered) where `_id` is absent. Existing ids are replaced.
#[utoipa::path(post, path = "/v1/tables/{table}/documents", tag = "documents",
    params(TablePath),
    request_body(content = InsertBody, description = "a document, or an array of at most 10,000 documents; `_id`, if given, must be a \
        string; on an edge table `_from` and `_to` (`\"table/id\"`) are required; on a typed table the columns decide the fields"),
    responses(
        (status = 201, description = "written: one outcome (with an ETag) for an object, `documents` for an array",
            body = InsertAnswer, headers(("ETag" = Option<String>, description = "content tag (for an object body)"))),
        (status = 400, description = "malformed JSON, an invalid path, or more than 10,000 documents", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "a unique index already holds a value; nothing was written", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "an item is not an object or breaks the table's schema (typed columns, edges' `_from`/`_to` and \
            their vertices); nothing was written",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn insert_documents(
    Database(db): Database,
    ApiPath(table): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response, ApiError> {
    Ok(match body {
        Value::Array(docs) => {
            let documents = db.pipeline.insert_documents(table, docs).await?;
            (StatusCode::CREATED, Json(Inserted { documents })).into_response()
        }
        doc => {
            let mut out = db.pipeline.insert_documents(table, vec![doc]).await?;
            let one =
                out.pop().ok_or_else(|| ApiError::from(crate::service::ServiceError::Internal("no outcome".into())))?;
            let etag = one.etag.clone();
            with_etag((StatusCode::CREATED, Json(one)).into_response(), &etag)
        }
    })
}

/// Lists documents in id order, a page at a time.
///
/// With `Accept: application/x-ndjson`, exports the whole table instead: every document (with its
/// `_id`) in id order, one per line, from one snapshot, streamed — the format `POST …/import`
/// reads back. No `limit` or `cursor` then (400). An error after the first line cuts the body
/// short (no final chunk); the request timeout does not bound the export, but a client that reads
/// nothing for that long, or goes away, ends it.
#[utoipa::path(get, path = "/v1/tables/{table}/documents", tag = "documents",
    params(TablePath, ListParams),
    responses(
        (status = 200, description = "one page; with `Accept: application/x-ndjson`, every document, one per line", content(
            (DocumentPage = "application/json"),
            (NdjsonDocuments = "application/x-ndjson"),
        )),
        (status = 400, description = "bad limit, cursor, path or time; a limit or cursor with an export; `as_of` on a table \
            without history", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 406, description = "an export asked for over HTTP/1.0, which cannot tell a cut stream from a whole one \
            (`not_acceptable`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "an export asked for while the server already writes `--max-streams` streamed answers \
            (`too_many_streams`), or an `as_of` page while every place of the history class is taken (`--max-heavy-reads`: \
            `too_many_heavy_reads`); both with `Retry-After`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_documents(
    Database(db): Database,
    State(state): State<AppState>,
    ApiPath(table): ApiPath<String>,
    headers: HeaderMap,
    version: axum::http::Version,
    gone: Option<axum::Extension<super::ClientGone>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    if wants_ndjson(&headers) {
        if params.limit.is_some() || params.cursor.is_some() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "an export (Accept: application/x-ndjson) returns every document: limit and cursor are for pages",
            ));
        }
        super::stream::check_version(version)?;
        let slot = super::stream::slot(&state)?;
        let req = crate::service::QueryRequest { as_of: params.as_of, ..Default::default() };
        let mut stream = db.query.query_stream(table, req).await?;
        let guard = stream.abandon_guard();
        return Ok(super::stream::ndjson(&state, &db, slot, gone.map(|g| g.0), guard, move |pipe| {
            stream.write_to(pipe).map(drop)
        }));
    }
    let page = match params.as_of {
        // the table then, a page at a time in `_id` order (its cursors continue only this `as_of`)
        Some(as_of) => {
            let req = crate::service::QueryRequest {
                as_of: Some(as_of),
                limit: params.limit,
                cursor: params.cursor,
                ..Default::default()
            };
            let _permit = state.admission.enter(super::admission::HeavyClass::History).await?;
            match db.query.query(table, req).await? {
                crate::service::QueryResult::Page(page) => page,
                crate::service::QueryResult::Explain(_) => {
                    return Err(crate::service::ServiceError::Internal("a listing was explained".into()).into());
                }
            }
        }
        None => db.pipeline.list_documents(table, params.limit.unwrap_or(100), params.cursor).await?,
    };
    Ok(super::stream::vary_accept(super::json_text(page.to_json())))
}

/// Imports newline-delimited JSON (one document per line) or CSV (a header row naming the fields,
/// then one document per row), streamed: good lines are written in chunks as they arrive, bad
/// lines are reported by number.
///
/// A CSV field is typed by the table's column of its name where there is one, else inferred:
/// empty is absent, `true`/`false` a boolean, a JSON number stored exactly a number, anything
/// else a string; `_id` gives the document's id.
#[utoipa::path(post, path = "/v1/tables/{table}/import", tag = "documents",
    params(TablePath),
    request_body(content(
        (String = "application/x-ndjson", example = json!("{\"_id\":\"u1\",\"name\":\"Ann\",\"age\":30}\n{\"name\":\"Bo\"}\n")),
        (String = "text/csv", example = json!("_id,name,age\nu1,Ann,30\n,Bo,\n")),
    ), description = "NDJSON: one JSON object per line. CSV (RFC 4180, UTF-8): a header row naming the fields, then one \
        document per row, each field typed by the table's column of that name, else inferred (empty: absent; `true`/`false`: \
        a boolean; a JSON number stored exactly: a number; else a string); `_id`, `_from` and `_to` are strings"),
    responses(
        (status = 200, description = "what was written and which lines failed", body = ImportReport),
        (status = 400, description = "invalid path, the body could not be read, or a CSV header row that cannot name fields \
            (an empty or repeated name)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such table", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "a line (a CSV row) is longer than the body limit", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "neither application/x-ndjson nor text/csv (UTF-8)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn import(
    Database(db): Database,
    State(state): State<AppState>,
    ApiPath(table): ApiPath<String>,
    headers: HeaderMap,
    gone: Option<axum::Extension<super::ClientGone>>,
    body: Body,
) -> Result<Json<ImportReport>, ApiError> {
    let format = import_format(&headers)?;
    // When the client goes away, dropping the import stops it: no further line is read.
    tokio::select! {
        report = db.pipeline.import_as(table, format, body.into_data_stream(), state.import) => Ok(Json(report?)),
        () = super::ClientGone::wait(gone.map(|g| g.0)) => {
            Err(ApiError::new(StatusCode::BAD_REQUEST, "client_gone", "the client closed the connection"))
        }
    }
}

/// What an import's `Content-Type` says its body is: NDJSON, or CSV in UTF-8 (the only charset
/// taken).
fn import_format(headers: &HeaderMap) -> Result<ImportFormat, ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mut parts = content_type.split(';');
    let essence = parts.next().unwrap_or("").trim();
    if NDJSON_TYPES.iter().any(|t| t.eq_ignore_ascii_case(essence)) {
        return Ok(ImportFormat::Ndjson);
    }
    let charset = parts.filter_map(|p| p.split_once('=')).find(|(k, _)| k.trim().eq_ignore_ascii_case("charset"));
    let utf8 = charset.is_none_or(|(_, v)| {
        let v = v.trim().trim_matches('"');
        v.eq_ignore_ascii_case("utf-8") || v.eq_ignore_ascii_case("utf8")
    });
    if essence.eq_ignore_ascii_case("text/csv") && utf8 {
        return Ok(ImportFormat::Csv);
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "expected Content-Type: application/x-ndjson, or text/csv in UTF-8",
    ))
}
