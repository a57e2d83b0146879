//! Every failure answers as `application/problem+json` (RFC 9457) with a stable `code`.

use crate::service::ServiceError;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// The problem document every error response carries.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"type": "urn:mosaicdb:problem:table_not_found", "title": "Not Found", "status": 404,
    "detail": "table \"users\" does not exist", "code": "table_not_found"}))]
pub struct Problem {
    /// `urn:mosaicdb:problem:{code}`
    #[serde(rename = "type")]
    pub kind: String,
    /// the HTTP status text
    pub title: String,
    /// the HTTP status
    pub status: u16,
    /// what went wrong, for humans
    pub detail: String,
    /// what went wrong, for programs: a stable code
    pub code: String,
    /// for a failed batch: the 0-based index of the operation that failed
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<usize>,
    /// for refused line protocol: every bad line with its number
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<crate::service::timeseries::LineError>>,
    /// for `changefeed_expired`: the oldest event seq kept (follow on with `since` = it - 1)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_seq: Option<u64>,
}

/// An error on its way to the client.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    detail: String,
    operation: Option<usize>,
    lines: Option<Vec<crate::service::timeseries::LineError>>,
    oldest_seq: Option<u64>,
    /// seconds for a `Retry-After` header
    retry_after: Option<u32>,
}

impl ApiError {
    /// An error with an explicit status and code.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            operation: None,
            lines: None,
            oldest_seq: None,
            retry_after: None,
        }
    }

    /// The same error, answered with `Retry-After: {seconds}`.
    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The problem document of this error.
    pub fn problem(&self) -> Problem {
        Problem {
            kind: format!("urn:mosaicdb:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_owned(),
            operation: self.operation,
            lines: self.lines.clone(),
            oldest_seq: self.oldest_seq,
        }
    }
}

/// The HTTP status of each service error code.
fn status_of(e: &ServiceError) -> StatusCode {
    match e {
        ServiceError::TableNotFound(_)
        | ServiceError::DatabaseNotFound(_)
        | ServiceError::DocumentNotFound { .. }
        | ServiceError::IndexNotFound { .. }
        | ServiceError::ViewNotFound { .. }
        | ServiceError::NoPath { .. }
        | ServiceError::MetricNotFound(_) => StatusCode::NOT_FOUND,
        ServiceError::TableExists(_)
        | ServiceError::DatabaseExists(_)
        | ServiceError::TooManyDatabases { .. }
        | ServiceError::DatabasesInCluster
        | ServiceError::TableDropping(_)
        | ServiceError::IndexExists { .. }
        | ServiceError::IndexDropping { .. }
        | ServiceError::ViewExists { .. }
        | ServiceError::ViewDropping { .. }
        | ServiceError::ViewNotReady { .. }
        | ServiceError::UniqueViolation { .. }
        | ServiceError::VertexHasEdges { .. }
        | ServiceError::MetricDropping(_)
        | ServiceError::HistoryPurging(_) => StatusCode::CONFLICT,
        ServiceError::NoSearchIndex(_) | ServiceError::NoVectorIndex(_) | ServiceError::InvalidVector { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ServiceError::InvalidTableName { .. }
        | ServiceError::InvalidDatabaseName { .. }
        | ServiceError::InvalidId(_)
        | ServiceError::InvalidRequest(_)
        | ServiceError::InvalidFilter(_)
        | ServiceError::MalformedJson { .. }
        | ServiceError::Json(crate::entity::TextError::DuplicateKey(_) | crate::entity::TextError::InvalidNumber(..))
        | ServiceError::InvalidCursor(_)
        | ServiceError::QueryTooComplex(_)
        | ServiceError::InvalidQuery { .. }
        | ServiceError::InvalidLines(_)
        | ServiceError::ScanRefused { .. } => StatusCode::BAD_REQUEST,
        ServiceError::InvalidDocument(_)
        | ServiceError::SchemaViolation { .. }
        | ServiceError::InvalidExpiry(_)
        | ServiceError::TooManyIndexEntries { .. }
        | ServiceError::InvalidView(_)
        | ServiceError::TooManyViewKeys { .. }
        | ServiceError::TooManyEdges { .. }
        | ServiceError::MaxVisited(_)
        | ServiceError::InvalidWeight(_)
        | ServiceError::TooManyBuckets(_)
        | ServiceError::QueryTooLarge(_)
        | ServiceError::DuplicateLabelset(_)
        | ServiceError::StreamSortTooLarge { .. }
        | ServiceError::StreamSortTooLargeBytes { .. }
        | ServiceError::Json(crate::entity::TextError::TooDeep(_)) => StatusCode::UNPROCESSABLE_ENTITY,
        ServiceError::Abandoned => StatusCode::REQUEST_TIMEOUT,
        ServiceError::ChangefeedExpired { .. } => StatusCode::GONE,
        ServiceError::ChangefeedAhead { .. } => StatusCode::CONFLICT,
        ServiceError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
        ServiceError::LineTooLong { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        ServiceError::TooLarge(_) if e.code() == "key_too_large" => StatusCode::UNPROCESSABLE_ENTITY,
        ServiceError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        ServiceError::ImportStalled { .. } => StatusCode::REQUEST_TIMEOUT,
        ServiceError::BatchFailed { source, .. } => status_of(source),
        ServiceError::NotLeader => StatusCode::TEMPORARY_REDIRECT,
        ServiceError::Lagging { .. } | ServiceError::FieldsBehind(_) => StatusCode::SERVICE_UNAVAILABLE,
        ServiceError::Unavailable(_) if e.is_disk_full() => StatusCode::INSUFFICIENT_STORAGE,
        ServiceError::QuotaExceeded { .. } => StatusCode::INSUFFICIENT_STORAGE,
        ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        ServiceError::Damaged { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let status = status_of(&e);
        let operation = match &e {
            ServiceError::BatchFailed { index, .. } => Some(*index),
            _ => None,
        };
        if let ServiceError::Damaged { .. } = &e {
            tracing::error!(error = %e, "damaged data: `mosaicdb check` says where");
        }
        let detail = if status == StatusCode::INTERNAL_SERVER_ERROR {
            // Details of internal failures go to the log, not to the client.
            tracing::error!(error = %e, "internal error");
            "an internal error occurred; the server log has the details".to_owned()
        } else {
            e.to_string()
        };
        let lines = match &e {
            ServiceError::InvalidLines(lines) => Some(lines.clone()),
            _ => None,
        };
        let oldest_seq = match &e {
            ServiceError::ChangefeedExpired { oldest, .. } => Some(*oldest),
            _ => None,
        };
        // a full disk is freed by someone else: the write may be tried again after a while
        let retry_after = match &e {
            _ if e.is_disk_full() => Some(10),
            // a follower catching up, a leader being replaced: soon
            ServiceError::Lagging { .. }
            | ServiceError::FieldsBehind(_)
            | ServiceError::Unavailable(crate::storage::StorageError::Deposed) => Some(1),
            // the store opens its engine again on its own: try once it next does
            ServiceError::Unavailable(crate::storage::StorageError::Recovering { retry_after, .. }) => {
                Some(u32::try_from(*retry_after).unwrap_or(u32::MAX))
            }
            _ => None,
        };
        ApiError { status, code: e.code(), detail, operation, lines, oldest_seq, retry_after }
    }
}

/// Marks a follower's refusal of a write, which the cluster layer turns into a redirect to the
/// leader.
#[derive(Debug, Clone, Copy)]
pub struct ToLeader;

/// 413 with the body limit in the detail.
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        "the request body is larger than the server accepts (--max-body-mb)",
    )
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        let mut response = (self.status, axum::Json(&problem)).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        // for a layer that answers in another protocol's shape (the Influx writes: `influx.rs`)
        response.extensions_mut().insert(problem);
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::TEMPORARY_REDIRECT {
            // where to: the cluster layer knows the leader and the request (`cluster.rs`)
            response.extensions_mut().insert(ToLeader);
        }
        response
    }
}

/// The code used for a bare error status produced outside the handlers (router, layers).
fn code_of_status(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "route_not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    }
}

/// Gives error responses made by the router or a layer (404 route, 405, 408 timeout, …) a
/// problem body, so every error a client sees has the same shape.
pub fn problem_for_bare_errors<B>(response: axum::http::Response<B>) -> Response
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let status = response.status();
    if (status.is_client_error() || status.is_server_error()) && !response.headers().contains_key(header::CONTENT_TYPE)
    {
        let detail = match status {
            StatusCode::NOT_FOUND => "no route matches this path".to_owned(),
            StatusCode::METHOD_NOT_ALLOWED => "this route does not take that method".to_owned(),
            StatusCode::REQUEST_TIMEOUT => "the request took longer than the server allows (--timeout-secs)".to_owned(),
            other => other.canonical_reason().unwrap_or("error").to_owned(),
        };
        let mut fresh = ApiError::new(status, code_of_status(status), detail).into_response();
        // keep headers such as Allow and x-request-id
        for (name, value) in response.headers() {
            fresh.headers_mut().entry(name.clone()).or_insert(value.clone());
        }
        return fresh;
    }
    response.map(axum::body::Body::new)
}

/// The 500 answer to a panic in a handler; the server stays up.
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "an internal error occurred; the server log has the details",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model's damaged keys answer as storage's damaged blocks do: 503 `data_corrupted`, the key
    /// family in the detail; a bug stays a 500 whose details stay in the log.
    #[test]
    fn damaged_data_is_data_corrupted_and_a_bug_is_internal() {
        let damaged = ApiError::from(ServiceError::damaged("hist", "the history of t/a"));
        assert_eq!((damaged.status, damaged.code), (StatusCode::SERVICE_UNAVAILABLE, "data_corrupted"));
        assert_eq!(damaged.detail, "damaged hist data: the history of t/a");
        let stored = ApiError::from(ServiceError::from(crate::storage::StorageError::Corrupt("a block".into())));
        assert_eq!((stored.status, stored.code), (damaged.status, damaged.code));
        let bug = ApiError::from(ServiceError::Internal("a secret detail".into()));
        assert_eq!((bug.status, bug.code), (StatusCode::INTERNAL_SERVER_ERROR, "internal"));
        assert!(!bug.detail.contains("secret"));
    }
}
