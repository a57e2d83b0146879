//! `POST /v1/sql` (and `/v1/db/{db}/sql`): one read-only SQL statement over the database's
//! tables, answered as JSON (`columns`, `rows`, `truncated`; at most [`MAX_ROWS`] rows) or, with
//! `Accept: application/x-ndjson`, streamed: a line of columns, then one line per row.

use super::AppState;
use super::admission::HeavyClass;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ClientGone};
use super::stream::wants_ndjson;
use crate::api::db_path::{Database, Named};
use crate::service::ServiceError;
use crate::service::databases::DEFAULT_DATABASE;
use crate::service::sql::{Column, Piece, SqlAnswer, SqlError, SqlRequest};
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

/// Most rows of a JSON answer; past them, `truncated` is true (NDJSON streams every row).
pub const MAX_ROWS: usize = 10_000;
/// Most bytes of rows of a JSON answer; past them, `truncated` is true.
pub const MAX_JSON_BYTES: usize = 64 << 20;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(sql))
}

/// The answer to a statement.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // only its schema is used: the answer is written as it comes
struct SqlResponse {
    /// name and SQL type of each column
    columns: Vec<Column>,
    /// each row, its values in the order of `columns`
    #[schema(value_type = Vec<Vec<Object>>, example = json!([["u1", "Oslo"], ["u2", "Bergen"]]))]
    rows: Vec<Vec<serde_json::Value>>,
    /// true when rows past 10,000 (or 64 MiB) were left out
    truncated: bool,
}

/// A streamed answer: `{"columns": […]}`, then one JSON array per row.
#[derive(ToSchema)]
#[schema(value_type = String, example = "{\"columns\":[{\"name\":\"_id\",\"type\":\"text\"}]}\n[\"u1\"]\n[\"u2\"]\n")]
#[allow(dead_code)] // only its schema is used
struct NdjsonRows(String);

fn problem(code: &str, status: u16, detail: &str) -> serde_json::Value {
    let title = StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
    serde_json::json!({"type": format!("urn:mosaicdb:problem:{code}"), "title": title, "status": status,
        "detail": detail, "code": code})
}

/// Runs one read-only SQL statement (PostgreSQL dialect, Apache DataFusion) over the database:
/// every table is a relation — `_id`, an edge's `_from` and `_to`, a typed table's columns, and
/// `doc`, the document as JSON (`doc->>'city'`, `(doc->>'age')::int`). Joins, aggregates, window
/// functions, CTEs; `$1`, `$2` … take `params`. Conditions on `_id`, typed columns and JSON paths
/// go to the query planner, which uses indexes (`EXPLAIN` shows its strategy). See docs/sql.md.
///
/// Bounded: `--sql-timeout-secs` (the answer included), `--sql-memory-mb` per statement and
/// `--sql-total-memory-mb` in all (no spilling), `--max-heavy-reads` statements at once; a client
/// that goes away stops its statement. With `Accept: application/x-ndjson` every row is streamed:
/// an error after the first line cuts the body short (no final chunk).
#[utoipa::path(post, path = "/v1/sql", tag = "sql", request_body = SqlRequest,
    responses(
        (status = 200, description = "the columns and rows (at most 10,000; `truncated` says if more were left out); \
            with `Accept: application/x-ndjson`, a line of columns then every row, one per line", content(
            (SqlResponse = "application/json"),
            (NdjsonRows = "application/x-ndjson"),
        )),
        (status = 400, description = "the statement does not parse or plan — unknown table or column, wrong types, a \
            missing parameter (`invalid_sql`); or it would write (`sql_read_only`)", body = Problem,
            content_type = "application/problem+json",
            example = json!(problem("invalid_sql", 400, "table 'default.public.nope' not found"))),
        (status = 406, description = "an NDJSON stream asked for over HTTP/1.0 (`not_acceptable`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 408, description = "the statement ran past --sql-timeout-secs (`statement_timeout`)", body = Problem,
            content_type = "application/problem+json",
            example = json!(problem("statement_timeout", 408, "the statement ran longer than 30 s (--sql-timeout-secs) and was stopped"))),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "the statement failed on the data, e.g. a cast of text that is not a number \
            (`sql_failed`); it needed more than --sql-memory-mb (`sql_memory_exceeded`); a body of the wrong shape",
            body = Problem, content_type = "application/problem+json",
            example = json!(problem("sql_failed", 422, "Cannot cast string 'abc' to value of Int32 type"))),
        (status = 503, description = "every place of the sql class is taken (`too_many_heavy_reads`), or the memory all \
            statements share is (`sql_memory_busy`); both with `Retry-After`", body = Problem,
            content_type = "application/problem+json"),
    ))]
async fn sql(
    Database(db): Database,
    State(state): State<AppState>,
    headers: HeaderMap,
    version: Version,
    named: Option<Extension<Named>>,
    gone: Option<Extension<ClientGone>>,
    ApiJson(req): ApiJson<SqlRequest>,
) -> Result<Response, ApiError> {
    let ndjson = wants_ndjson(&headers);
    if ndjson {
        super::stream::check_version(version)?;
    }
    let permit = state.admission.enter(HeavyClass::Sql).await?;
    let gone = gone.map(|g| g.0);
    let cap = if ndjson { None } else { Some(MAX_ROWS) };
    let name = named.map_or_else(|| DEFAULT_DATABASE.to_owned(), |n| n.0.0.to_string());
    let answer = tokio::select! {
        answer = state.sql.run(db, &name, req, cap) => answer.map_err(sql_error)?,
        () = ClientGone::wait(gone.clone()) => return Err(ServiceError::Abandoned.into()),
    };
    if ndjson {
        return Ok(ndjson_answer(answer, permit));
    }
    json_answer(answer, gone).await
}

/// Collects the rows into one JSON document (the client's going away stops the statement).
async fn json_answer(mut answer: SqlAnswer, gone: Option<ClientGone>) -> Result<Response, ApiError> {
    let mut body = Vec::with_capacity(1 << 12);
    body.extend_from_slice(b"{\"columns\":");
    serde_json::to_writer(&mut body, &answer.columns).map_err(|e| sql_error(SqlError::Failed(e.to_string())))?;
    body.extend_from_slice(b",\"rows\":[");
    let mut rows = 0usize;
    let truncated = 'rows: loop {
        let piece = tokio::select! {
            piece = answer.pieces.recv() => piece,
            () = ClientGone::wait(gone.clone()) => return Err(ServiceError::Abandoned.into()),
        };
        match piece {
            Some(Ok(Piece::Rows(text))) => {
                for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    if body.len() + line.len() > MAX_JSON_BYTES {
                        break 'rows true;
                    }
                    if rows > 0 {
                        body.push(b',');
                    }
                    body.extend_from_slice(line);
                    rows += 1;
                }
            }
            Some(Ok(Piece::Done { truncated })) => break truncated,
            Some(Err(e)) => return Err(sql_error(e)),
            None => return Err(sql_error(SqlError::Failed("the statement stopped before its end".into()))),
        }
    };
    body.extend_from_slice(if truncated { b"],\"truncated\":true}" } else { b"],\"truncated\":false}" });
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(super::stream::vary_accept(response))
}

/// Streams the answer: a line of columns, then the rows as they come. An error, or a statement
/// stopped on the way, ends the body without its final chunk.
fn ndjson_answer(answer: SqlAnswer, permit: super::admission::HeavyPermit) -> Response {
    let mut head = b"{\"columns\":".to_vec();
    // a Vec of plain structs always serializes
    let _ = serde_json::to_writer(&mut head, &answer.columns);
    head.extend_from_slice(b"}\n");
    struct Streamed {
        head: Option<Bytes>,
        pieces: tokio::sync::mpsc::Receiver<Result<Piece, SqlError>>,
        over: bool,
        _permit: super::admission::HeavyPermit,
    }
    let state = Streamed { head: Some(Bytes::from(head)), pieces: answer.pieces, over: false, _permit: permit };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        if s.over {
            return None;
        }
        if let Some(head) = s.head.take() {
            return Some((Ok(head), s));
        }
        let cut = |why: String| Err(std::io::Error::other(why));
        let item = match s.pieces.recv().await {
            Some(Ok(Piece::Rows(text))) => Ok(Bytes::from(text)),
            Some(Ok(Piece::Done { .. })) => return None,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "a streamed SQL answer was cut");
                cut(e.to_string())
            }
            None => cut("the statement stopped before its end".into()),
        };
        s.over = item.is_err();
        Some((item, s))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(super::NDJSON_TYPES[0]));
    super::stream::vary_accept(response)
}

/// The problem of a failed statement.
fn sql_error(e: SqlError) -> ApiError {
    if let SqlError::Service(e) = e {
        return e.into();
    }
    let error = ApiError::new(status_of(&e), code_of(&e), e.to_string());
    match e {
        SqlError::MemoryBusy(_) => error.retry_after(1),
        _ => error,
    }
}

fn status_of(e: &SqlError) -> StatusCode {
    match e {
        SqlError::Invalid(_) | SqlError::ReadOnly(_) => StatusCode::BAD_REQUEST,
        SqlError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
        SqlError::MemoryBusy(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

fn code_of(e: &SqlError) -> &'static str {
    match e {
        SqlError::Invalid(_) => "invalid_sql",
        SqlError::ReadOnly(_) => "sql_read_only",
        SqlError::Timeout(_) => "statement_timeout",
        SqlError::MemoryExceeded(_) => "sql_memory_exceeded",
        SqlError::MemoryBusy(_) => "sql_memory_busy",
        _ => "sql_failed",
    }
}
