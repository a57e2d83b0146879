//! `GET /v1/changes` (pages, long-poll), `GET /v1/changes/stream` (Server-Sent Events) and
//! `GET /v1/changes/stats`. The first two wait for events, so they are kept out of the request
//! timeout (a long-poll waits at most `wait_ms`, itself capped below a minute); both end at once
//! when the server stops.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::ApiQuery;
use crate::api::db_path::Database;
use crate::service::changefeed::{
    ChangePage, ChangePageDoc, ChangeStats, ChangesRequest, DEFAULT_LIMIT, MAX_LIMIT, MAX_WAIT_MS,
};
use crate::service::{Db, ServiceError};
use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

/// The routes that wait (outside the request timeout).
pub(super) fn waiting_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(changes)).routes(routes!(stream_changes))
}

/// The routes that answer at once.
pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(change_stats))
}

/// Events a stream reads per page.
const STREAM_PAGE: usize = 256;
/// How long a stream's read waits before it reads again (it ends sooner on shutdown).
const STREAM_WAIT: Duration = Duration::from_secs(30);
/// Keep-alive comment interval of a stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The query of `GET /v1/changes`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChangesQuery {
    /// return events with a seq greater than this (exclusive; default 0: from the oldest kept);
    /// pass the previous page's `next`
    #[param(minimum = 0)]
    pub since: Option<u64>,
    /// most events to return, 1-10000 (default 1000)
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<usize>,
    /// only events of these tables, comma-separated (default: every table)
    pub table: Option<String>,
    /// when no event is there: wait up to this many ms for one, 0-60000 (default 0: answer at once)
    #[param(minimum = 0, maximum = 60000)]
    pub wait_ms: Option<u64>,
}

/// The query of `GET /v1/changes/stream`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// stream events with a seq greater than this (exclusive; default 0); a `Last-Event-ID`
    /// header takes precedence
    #[param(minimum = 0)]
    pub since: Option<u64>,
    /// only events of these tables, comma-separated (default: every table)
    pub table: Option<String>,
}

fn tables(table: Option<String>) -> Result<Option<Vec<String>>, ApiError> {
    let Some(t) = table else { return Ok(None) };
    let names: Vec<String> = t.split(',').map(str::to_owned).collect();
    if names.iter().any(String::is_empty) {
        return Err(ServiceError::InvalidRequest("table must be comma-separated table names, none empty".into()).into());
    }
    Ok(Some(names))
}

/// A page of change events after `since`: at once when there are some; otherwise the request
/// waits up to `wait_ms` for one and answers an empty page if none came (or the server is
/// stopping). Events are committed and durable, gap-free and in commit order; with a `table`
/// filter the seqs of other tables' events are skipped, and `next` still moves past them.
#[utoipa::path(get, path = "/v1/changes", tag = "changes", params(ChangesQuery),
    responses(
        (status = 200, description = "a page of events; pass `next` as `since` for the next one", body = ChangePageDoc,
            example = json!({"events": [{"seq": 42, "ts": 1763719200000i64, "op": "put", "table": "users", "id": "alice",
                "txn": 42, "count": 1}], "next": 42})),
        (status = 400, description = "invalid since, limit, table or wait_ms", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`changefeed_ahead`: `since` is past the last event (the feed was reset: a restore, \
            or events lost in buffered mode)", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "`changefeed_expired`: retention removed events after `since`; the problem's \
            `oldest_seq` is the oldest kept", body = Problem, content_type = "application/problem+json"),
    ))]
async fn changes(Database(db): Database, ApiQuery(q): ApiQuery<ChangesQuery>) -> Result<Response, ApiError> {
    let wait_ms = q.wait_ms.unwrap_or(0);
    if wait_ms > MAX_WAIT_MS {
        return Err(ServiceError::InvalidRequest(format!("wait_ms must be at most {MAX_WAIT_MS}")).into());
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_LIMIT}")).into());
    }
    let req = ChangesRequest {
        since: q.since.unwrap_or(0),
        limit,
        tables: tables(q.table)?,
        wait: Duration::from_millis(wait_ms),
    };
    let page = db.changefeed.changes(req).await?;
    Ok(super::json_text(page.to_json()))
}

/// The change events after `since` (or the `Last-Event-ID` header) as Server-Sent Events: each
/// event's `id` is its seq and its `data` the event JSON (as in `GET /v1/changes`); comments
/// keep the connection alive. The stream reads the store a page at a time, so a slow reader
/// holds one page; it ends when the server stops, or when retention removes events it has not
/// sent yet (reconnecting then answers 410).
#[utoipa::path(get, path = "/v1/changes/stream", tag = "changes", params(StreamQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "resume after this seq (the last `id` received)")),
    responses(
        (status = 200, description = "the event stream", content_type = "text/event-stream", body = String),
        (status = 400, description = "invalid since, table or Last-Event-ID", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`changefeed_ahead`: `since` is past the last event (the feed was reset: a restore, \
            or events lost in buffered mode)", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "`changefeed_expired`: retention removed events after `since`", body = Problem,
            content_type = "application/problem+json"),
    ))]
async fn stream_changes(
    Database(db): Database,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<StreamQuery>,
) -> Result<Response, ApiError> {
    let since = match headers.get("last-event-id") {
        Some(v) => v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()).ok_or_else(|| {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_header", "Last-Event-ID must be an event seq")
        })?,
        None => q.since.unwrap_or(0),
    };
    let tables = tables(q.table)?;
    // refused before the stream starts, as a problem
    let since = db.changefeed.check_since(since)?;
    let events = follow(db.clone(), since, tables);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response())
}

/// The events after `since`, page by page, until the server stops or the feed fails.
fn follow(
    db: Arc<Db>,
    since: u64,
    tables: Option<Vec<String>>,
) -> impl Stream<Item = Result<Event, std::convert::Infallible>> {
    stream::unfold(Some(since), move |state| {
        let (db, tables) = (db.clone(), tables.clone());
        async move {
            let since = state?;
            if db.changefeed.change_waits_stopped() {
                return None;
            }
            let req = ChangesRequest { since, limit: STREAM_PAGE, tables, wait: STREAM_WAIT };
            match db.changefeed.changes(req).await {
                Ok(page) => {
                    let next = page.next;
                    Some((events_of(page), Some(next)))
                }
                Err(e) => {
                    tracing::debug!(error = %e, "change stream ended");
                    None
                }
            }
        }
    })
    .flat_map(|events| stream::iter(events.into_iter().map(Ok)))
}

fn events_of(page: ChangePage) -> Vec<Event> {
    let mut out = Vec::with_capacity(page.events.len());
    for e in page.events {
        let seq = seq_of(&e);
        // event JSON is one line (compact, control characters escaped)
        out.push(Event::default().id(seq.to_string()).data(String::from_utf8_lossy(&e)));
    }
    out
}

/// The `seq` an event's stored JSON starts with (`{"seq":N,`).
fn seq_of(event: &[u8]) -> u64 {
    event
        .strip_prefix(b"{\"seq\":")
        .map(|r| r.iter().take_while(|b| b.is_ascii_digit()).fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
        .unwrap_or(0)
}

/// The feed's first and last seq, its event count and its disk space.
#[utoipa::path(get, path = "/v1/changes/stats", tag = "changes",
    responses((status = 200, description = "the feed's figures", body = ChangeStats,
        example = json!({"first_seq": 1, "last_seq": 42, "events": 42, "bytes": 8192}))))]
async fn change_stats(Database(db): Database) -> Result<Json<ChangeStats>, ApiError> {
    Ok(Json(db.changefeed.change_stats().await?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn seqs_of_stored_events() {
        assert_eq!(super::seq_of(br#"{"seq":1234,"ts":1}"#), 1234);
        assert_eq!(super::seq_of(b"{}"), 0);
    }
}
