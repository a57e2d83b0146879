//! InfluxDB compatibility where Influx clients and Telegraf look for it: the write endpoints
//! (`/write`, 1.x; `/api/v2/write`, 2.x), the ping with the headers clients read the version
//! from, and the errors of the two writes in the shapes the clients read (`{"error"}` for 1.x,
//! `{"code", "message"}` for 2.x) instead of problem+json. `/health`, which InfluxDB 2.x clients
//! call, answers in InfluxDB's shape too (`system.rs`).

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::ApiQuery;
use super::timeseries::{LineWriteQuery, body_of};
use crate::api::db_path::Database;
use crate::service::timeseries::{LineError, Precision};
use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pin_project_lite::pin_project;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

/// The InfluxDB version mosaicdb answers as (`X-Influxdb-Version`, `/health`'s `version`): the last
/// 1.x release, whose `/write`, `/ping`, `/health` and `/api/v2/write` these routes follow.
/// Clients print it or check that it is 1.x or 2.x; none needs more.
pub(super) const INFLUXDB_VERSION: &str = "1.8.10";

/// `X-Influxdb-Build`: the open-source build, as InfluxDB OSS says of itself.
const INFLUXDB_BUILD: &str = "OSS";

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(write_influx_v1)).routes(routes!(write_influx_v2)).routes(routes!(ping))
}

/// The InfluxDB 1.x write endpoint (`/write?db=…&precision=…`), for Influx clients and Telegraf:
/// the same write as `POST /v1/timeseries/write` to the database `db` names (none: `default`),
/// answering 204 as InfluxDB does. Errors answer as InfluxDB 1.x's do: `{"error": "…"}`, with
/// mosaicdb's `code` (and `lines`, for bad lines) beside it.
#[utoipa::path(post, path = "/write", tag = "timeseries", params(LineWriteQuery),
    request_body(content = String, content_type = "text/plain"),
    responses(
        (status = 204, description = "written"),
        (status = 400, description = "bad lines (`invalid_line_protocol`) or a bad query", body = InfluxV1Error,
            example = json!({"error": "1 bad line(s), nothing written: line 2: No fields were provided",
                "code": "invalid_line_protocol", "lines": [{"line": 2, "error": "No fields were provided"}]})),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`)", body = InfluxV1Error),
        (status = 403, description = "the API key's role is below `write` (`forbidden`)", body = InfluxV1Error),
        (status = 404, description = "`db` names no database (`database_not_found`)", body = InfluxV1Error,
            example = json!({"error": "database \"telegraf\" does not exist", "code": "database_not_found"})),
        (status = 409, description = "a metric is being deleted", body = InfluxV1Error),
        (status = 413, description = "body too large", body = InfluxV1Error),
        (status = 503, description = "the store refuses writes", body = InfluxV1Error),
        (status = 507, description = "the disk is nearly full, or the database is over its quota", body = InfluxV1Error),
    ))]
async fn write_influx_v1(
    Database(db): Database,
    ApiQuery(q): ApiQuery<LineWriteQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let precision = q.precision.unwrap_or(Precision::Nanoseconds);
    db.timeseries.write_line_protocol(body_of(body)?, precision).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The InfluxDB 2.x write endpoint (`/api/v2/write?bucket=…&org=…&precision=…`), for Influx
/// clients and Telegraf: the same write as `POST /v1/timeseries/write` to the database `bucket`
/// names (none: `default`; `org` is ignored), answering 204. Errors answer as InfluxDB 2.x's do:
/// `{"code": "invalid", "message": "…"}`, with mosaicdb's code as `mosaicdb_code` (and `lines`).
#[utoipa::path(post, path = "/api/v2/write", tag = "timeseries", params(LineWriteQuery),
    request_body(content = String, content_type = "text/plain"),
    responses(
        (status = 204, description = "written"),
        (status = 400, description = "bad lines (`invalid_line_protocol`) or a bad query", body = InfluxV2Error,
            example = json!({"code": "invalid", "message": "1 bad line(s), nothing written: line 2: No fields were provided",
                "mosaicdb_code": "invalid_line_protocol", "lines": [{"line": 2, "error": "No fields were provided"}]})),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`)", body = InfluxV2Error),
        (status = 403, description = "the API key's role is below `write` (`forbidden`)", body = InfluxV2Error),
        (status = 404, description = "`bucket` names no database (`database_not_found`)", body = InfluxV2Error,
            example = json!({"code": "not found", "message": "database \"telegraf\" does not exist",
                "mosaicdb_code": "database_not_found"})),
        (status = 409, description = "a metric is being deleted", body = InfluxV2Error),
        (status = 413, description = "body too large", body = InfluxV2Error),
        (status = 503, description = "the store refuses writes", body = InfluxV2Error),
        (status = 507, description = "the disk is nearly full, or the database is over its quota", body = InfluxV2Error),
    ))]
async fn write_influx_v2(
    db: Database,
    q: ApiQuery<LineWriteQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    write_influx_v1(db, q, body).await
}

/// The InfluxDB liveness probe that Influx clients and Telegraf call before writing (`HEAD` too):
/// 204 with the InfluxDB version and build the clients read.
#[utoipa::path(get, path = "/ping", tag = "timeseries", responses((status = 204, description = "alive",
    headers(
        ("X-Influxdb-Version" = String, description = "the InfluxDB version mosaicdb answers as: `1.8.10`"),
        ("X-Influxdb-Build" = String, description = "`OSS`"),
    ))))]
async fn ping() -> Response {
    let headers = [
        ("x-influxdb-version", HeaderValue::from_static(INFLUXDB_VERSION)),
        ("x-influxdb-build", HeaderValue::from_static(INFLUXDB_BUILD)),
    ];
    (StatusCode::NO_CONTENT, headers).into_response()
}

/// An error of `/write`, as InfluxDB 1.x answers one.
#[derive(Debug, Serialize, ToSchema)]
pub struct InfluxV1Error {
    /// what went wrong, for humans (the problem's `detail`): what Influx 1.x clients show
    pub error: String,
    /// mosaicdb's stable code (see docs/errors.md)
    pub code: String,
    /// for refused line protocol: every bad line with its number
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<LineError>>,
}

/// An error of `/api/v2/write`, as InfluxDB 2.x answers one.
#[derive(Debug, Serialize, ToSchema)]
pub struct InfluxV2Error {
    /// InfluxDB's code for the status: `invalid`, `unauthorized`, `forbidden`, `not found`,
    /// `method not allowed`, `conflict`, `request too large`, `unprocessable entity`,
    /// `too many requests`, `internal error`, `not implemented`, `unavailable`
    #[schema(example = "invalid")]
    pub code: &'static str,
    /// what went wrong, for humans (the problem's `detail`): what Influx 2.x clients show
    pub message: String,
    /// mosaicdb's stable code (see docs/errors.md)
    pub mosaicdb_code: String,
    /// for refused line protocol: every bad line with its number
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<LineError>>,
}

/// InfluxDB 2.x's error code for an HTTP status (its `kit/platform/errors` names).
fn influx_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not found",
        405 => "method not allowed",
        409 => "conflict",
        413 => "request too large",
        422 => "unprocessable entity",
        429 => "too many requests",
        501 => "not implemented",
        500 => "internal error",
        s if s >= 500 => "unavailable",
        _ => "invalid",
    }
}

/// Which Influx API a request's path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    V1,
    V2,
    /// the Prometheus query API (`prometheus.rs`)
    Prometheus,
}

impl Api {
    fn of_path(path: &str) -> Option<Api> {
        match path {
            "/write" => Some(Api::V1),
            "/api/v2/write" => Some(Api::V2),
            "/query" => Some(Api::V1),
            p if p.starts_with(super::prometheus::PREFIX) => Some(Api::Prometheus),
            _ => None,
        }
    }
}

/// The Influx body of an error answer of `api`, made from the problem it carries (every
/// problem does, as an extension: `error.rs`); any other answer as it is.
fn reshape(api: Api, response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let Some(problem) = response.extensions().get::<Problem>() else { return response };
    let body = match api {
        Api::V1 => serde_json::to_vec(&InfluxV1Error {
            error: problem.detail.clone(),
            code: problem.code.clone(),
            lines: problem.lines.clone(),
        }),
        Api::V2 => serde_json::to_vec(&InfluxV2Error {
            code: influx_code(status),
            message: problem.detail.clone(),
            mosaicdb_code: problem.code.clone(),
            lines: problem.lines.clone(),
        }),
        Api::Prometheus => super::prometheus::error_body(status, problem),
    };
    let Ok(body) = body else { return response };
    let (mut parts, _) = response.into_parts();
    // a new body: whatever encoded the old one no longer applies
    parts.headers.remove(header::CONTENT_ENCODING);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Body::from(body))
}

/// Gives the error answers of the Influx writes their Influx shape (and those of the Prometheus
/// API theirs: `prometheus.rs`). Outermost in the stack
/// `api::app` adds, so that it sees every error of those routes as the client would (the auth
/// layer's 401 and 403, a timeout's 408, a panic's 500); it changes no status. Costs every other
/// request one comparison of its path.
#[derive(Debug, Clone, Copy)]
pub(super) struct InfluxErrorsLayer;

impl<S> tower_layer::Layer<S> for InfluxErrorsLayer {
    type Service = InfluxErrors<S>;

    fn layer(&self, inner: S) -> InfluxErrors<S> {
        InfluxErrors { inner }
    }
}

/// See [`InfluxErrorsLayer`].
#[derive(Debug, Clone)]
pub(super) struct InfluxErrors<S> {
    inner: S,
}

impl<S, B> tower_service::Service<Request> for InfluxErrors<S>
where
    S: tower_service::Service<Request, Response = axum::http::Response<B>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = InfluxErrorsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let api = Api::of_path(request.uri().path());
        InfluxErrorsFuture { inner: self.inner.call(request), api }
    }
}

pin_project! {
    /// The response future of [`InfluxErrors`].
    pub(super) struct InfluxErrorsFuture<F> {
        #[pin]
        inner: F,
        api: Option<Api>,
    }
}

impl<F, E, B> Future for InfluxErrorsFuture<F>
where
    F: Future<Output = Result<axum::http::Response<B>, E>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?.map(Body::new);
        Poll::Ready(Ok(match *this.api {
            Some(api) => reshape(api, response),
            None => response,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::{get, post};
    use tower::ServiceExt;

    async fn answer(path: &str, accept_gzip: bool) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
        let failing = || async {
            let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "x".repeat(2000));
            e = e.retry_after(1);
            e
        };
        let app = axum::Router::new()
            .route("/write", post(failing))
            .route("/api/v2/write", post(failing))
            .route("/v1/timeseries/write", post(failing))
            .route("/ping", get(|| async { StatusCode::NO_CONTENT }))
            .layer(
                tower::ServiceBuilder::new()
                    .layer(InfluxErrorsLayer)
                    .layer(tower_http::compression::CompressionLayer::new()),
            );
        let mut request = Request::builder().method(if path == "/ping" { "GET" } else { "POST" }).uri(path);
        if accept_gzip {
            request = request.header(header::ACCEPT_ENCODING, "gzip");
        }
        let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, headers, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    #[tokio::test]
    async fn the_writes_answer_errors_in_their_influx_shape_and_nothing_else_changes() {
        let detail = "x".repeat(2000);
        for gzip in [false, true] {
            let (status, headers, body) = answer("/write", gzip).await;
            assert_eq!(status, 503);
            assert_eq!(headers[header::CONTENT_TYPE], "application/json");
            assert_eq!(headers[header::RETRY_AFTER], "1");
            assert!(!headers.contains_key(header::CONTENT_ENCODING), "the compressed problem is replaced");
            assert_eq!(body, serde_json::json!({"error": detail, "code": "unavailable"}));
            let (status, headers, body) = answer("/api/v2/write", gzip).await;
            assert_eq!(status, 503);
            assert_eq!(headers[header::CONTENT_TYPE], "application/json");
            assert_eq!(
                body,
                serde_json::json!({"code": "unavailable", "message": detail, "mosaicdb_code": "unavailable"})
            );
            // the other routes keep their problem
            let (status, headers, _) = answer("/v1/timeseries/write", gzip).await;
            assert_eq!(status, 503);
            assert_eq!(headers[header::CONTENT_TYPE], "application/problem+json");
            assert_eq!(headers.contains_key(header::CONTENT_ENCODING), gzip);
        }
        assert_eq!(answer("/ping", false).await.0, 204);
    }

    #[test]
    fn influx_codes_of_statuses() {
        let codes: Vec<_> = [400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429, 500, 501, 503, 507]
            .into_iter()
            .map(|s| influx_code(StatusCode::from_u16(s).unwrap()))
            .collect();
        assert_eq!(
            codes,
            [
                "invalid",
                "unauthorized",
                "forbidden",
                "not found",
                "method not allowed",
                "invalid",
                "conflict",
                "request too large",
                "invalid",
                "unprocessable entity",
                "too many requests",
                "internal error",
                "not implemented",
                "unavailable",
                "unavailable"
            ]
        );
    }
}
