//! The Prometheus HTTP query API (`/api/v1/query`, `/api/v1/query_range`, `/api/v1/series`,
//! `/api/v1/labels`, `/api/v1/label/{name}/values`), for Grafana's Prometheus data source and
//! `promtool query`: parameters in the URL's query or (POST) a form body, as Grafana sends them;
//! answers in Prometheus' shapes (`{"status": "success", "data": …}`), and errors too
//! (`{"status": "error", "errorType": "bad_data", "error": …}`, with mosaicdb's `code`), which
//! the error layer of `influx.rs` makes from the problem every error carries. Each database
//! serves them under `/v1/db/{db}/api/v1/…` (`database.rs`), so a Grafana data source's URL is
//! `http://host:8080` (the `default` database) or `http://host:8080/v1/db/{db}`.

use super::AppState;
use super::admission::HeavyClass;
use super::error::{ApiError, Problem};
use super::extract::ApiPath;
use super::timeseries::body_of;
use crate::api::db_path::Database;
use crate::service::timeseries::promql::{Metric, PromParams, QueryData};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

/// The routes' prefix (without a database's).
pub(super) const PREFIX: &str = "/api/v1/";

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(query_get, query_post))
        .routes(routes!(query_range_get, query_range_post))
        .routes(routes!(series_get, series_post))
        .routes(routes!(labels_get, labels_post))
        .routes(routes!(label_values))
}

/// The answer of a query.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryAnswer {
    /// `success`
    pub status: &'static str,
    /// the result
    pub data: QueryData,
}

/// The answer of the series listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeriesAnswer {
    /// `success`
    pub status: &'static str,
    /// each series' labels, `__name__` among them
    #[schema(value_type = Vec<Object>)]
    pub data: Vec<Metric>,
}

/// The answer of a label listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct NamesAnswer {
    /// `success`
    pub status: &'static str,
    /// the names or values, sorted
    pub data: Vec<String>,
}

const SUCCESS: &str = "success";

/// An error of the Prometheus API, as Prometheus answers one.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PromError {
    /// `error`
    pub status: String,
    /// Prometheus' error type for the status: `bad_data` (400 and other 4xx), `not_found` (404),
    /// `timeout` (408), `execution` (422), `unavailable` (503), `internal` (other 5xx)
    #[serde(rename = "errorType")]
    pub error_type: String,
    /// what went wrong, for humans (the problem's `detail`)
    pub error: String,
    /// mosaicdb's stable code (see docs/errors.md)
    pub code: String,
}

/// Prometheus' error type for a status.
pub(super) fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        404 => "not_found",
        408 => "timeout",
        422 => "execution",
        503 => "unavailable",
        s if s >= 500 => "internal",
        _ => "bad_data",
    }
}

/// The body of an error answer of these routes, made from its problem.
pub(super) fn error_body(status: StatusCode, problem: &Problem) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&PromError {
        status: "error".into(),
        error_type: error_type(status).into(),
        error: problem.detail.clone(),
        code: problem.code.clone(),
    })
}

/// The parameters of the URL's query and, when it is a form, of the body (whose values come
/// first, as Prometheus reads them); `match[]` may repeat, any other parameter counts once.
fn params(query: Option<&str>, headers: &HeaderMap, body: Option<&[u8]>) -> PromParams {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    let body = body.filter(|_| form).unwrap_or_default();
    let mut p = PromParams::default();
    for (key, value) in form_urlencoded::parse(body).chain(form_urlencoded::parse(query.unwrap_or("").as_bytes())) {
        let slot = match key.as_ref() {
            "query" => &mut p.query,
            "time" => &mut p.time,
            "start" => &mut p.start,
            "end" => &mut p.end,
            "step" => &mut p.step,
            "match[]" => {
                p.matches.push(value.into_owned());
                continue;
            }
            // timeout, limit, dedup, partial_response and whatever else clients send
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(value.into_owned());
        }
    }
    p
}

/// The parameters of a POST: its URL's query and its form body.
fn posted(
    query: Option<String>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<PromParams, ApiError> {
    let body = body_of(body)?;
    Ok(params(query.as_deref(), headers, Some(&body)))
}

/// `/api/v1/query`
// described for the OpenAPI document; the handlers read the raw query, where `match[]` repeats
#[allow(dead_code)]
#[derive(Debug, Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
pub struct InstantQuery {
    /// the PromQL expression
    #[param(example = "sum by (region) (rate(http_requests[5m]))")]
    pub query: String,
    /// the evaluation time: Unix seconds (with a fraction) or RFC 3339 (default: now)
    #[param(example = "1763719200")]
    pub time: Option<String>,
    /// accepted and ignored: the server's `--timeout-secs` bounds every query
    pub timeout: Option<String>,
}

/// `/api/v1/query_range`
// described for the OpenAPI document; the handlers read the raw query, where `match[]` repeats
#[allow(dead_code)]
#[derive(Debug, Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
pub struct RangeQuery {
    /// the PromQL expression
    #[param(example = "rate(http_requests[5m])")]
    pub query: String,
    /// the first step's time: Unix seconds or RFC 3339
    #[param(example = "1763719200")]
    pub start: String,
    /// the last step's time at most: Unix seconds or RFC 3339
    #[param(example = "1763722800")]
    pub end: String,
    /// the step: seconds or a duration (`15s`, `1m`); at most 11000 steps
    #[param(example = "60")]
    pub step: String,
    /// accepted and ignored: the server's `--timeout-secs` bounds every query
    pub timeout: Option<String>,
}

/// `/api/v1/series`, `/api/v1/labels`, `/api/v1/label/{name}/values`
// described for the OpenAPI document; the handlers read the raw query, where `match[]` repeats
#[allow(dead_code)]
#[derive(Debug, Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
pub struct Listing {
    /// a series selector, repeatable: the series any selects (the series listing needs one; the
    /// others default to every series)
    #[serde(rename = "match[]")]
    #[param(rename = "match[]", example = json!(["{region=\"eu\"}"]))]
    #[schema(rename = "match[]")]
    pub matches: Option<Vec<String>>,
    /// only series with points at or after this time: Unix seconds or RFC 3339
    pub start: Option<String>,
    /// only series with points at or before this time: Unix seconds or RFC 3339
    pub end: Option<String>,
}

/// `/api/v1/label/{name}/values`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct LabelPath {
    /// a label name (`[a-zA-Z_][a-zA-Z0-9_]*`), `__name__` for the metric names
    #[param(example = "region")]
    pub name: String,
}

/// An instant query: the value of a PromQL expression at one time (see docs/timeseries.md for
/// the subset of PromQL answered).
#[utoipa::path(get, path = "/api/v1/query", tag = "prometheus", params(InstantQuery),
    responses(
        (status = 200, description = "the result: a vector, a scalar, or (a range selector alone) a matrix", body = QueryAnswer,
            example = json!({"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"region": "eu"}, "value": [1763719200, "0.25"]}]}})),
        (status = 400, description = "a query that does not parse, or is outside the subset; a bad time (`bad_data`)", body = PromError,
            example = json!({"status": "error", "errorType": "bad_data", "code": "invalid_request",
                "error": "the function abs() (the functions answered: rate, irate, increase, sum_over_time, avg_over_time, min_over_time, max_over_time, count_over_time, last_over_time) is not supported: mosaicdb answers a subset of PromQL (see docs/timeseries.md#prometheus-query-api)"})),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the query passed the request timeout (`timeout`)", body = PromError),
        (status = 422, description = "more series, samples or memory (`--max-query-memory-mb`) than a query may take (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn query_get(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Json<QueryAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(QueryAnswer {
        status: SUCCESS,
        data: db.timeseries.prom_query(params(q.as_deref(), &headers, None)).await?,
    }))
}

/// An instant query with its parameters in a form body (as Grafana sends it).
#[utoipa::path(post, path = "/api/v1/query", tag = "prometheus",
    request_body(content = Option<InstantQuery>, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "the result", body = QueryAnswer),
        (status = 400, description = "a query that does not parse, or is outside the subset; a bad time (`bad_data`)", body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the query passed the request timeout (`timeout`)", body = PromError),
        (status = 413, description = "body too large", body = PromError),
        (status = 422, description = "more series, samples or memory (`--max-query-memory-mb`) than a query may take (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn query_post(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<QueryAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(QueryAnswer { status: SUCCESS, data: db.timeseries.prom_query(posted(q, &headers, body)?).await? }))
}

/// A range query: the value of a PromQL expression at every step from `start` to `end`.
#[utoipa::path(get, path = "/api/v1/query_range", tag = "prometheus", params(RangeQuery),
    responses(
        (status = 200, description = "the result: a matrix, one series per label set", body = QueryAnswer,
            example = json!({"status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": {"host": "h1"}, "values": [[1763719200, "0.5"], [1763719260, "0.75"]]}]}})),
        (status = 400, description = "a query that does not parse, is outside the subset or yields a range vector; bad times or step; more than 11000 steps (`bad_data`)",
            body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the query passed the request timeout (`timeout`)", body = PromError),
        (status = 422, description = "more series, samples or memory (`--max-query-memory-mb`) than a query may take (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn query_range_get(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Json<QueryAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(QueryAnswer {
        status: SUCCESS,
        data: db.timeseries.prom_query_range(params(q.as_deref(), &headers, None)).await?,
    }))
}

/// A range query with its parameters in a form body (as Grafana sends it).
#[utoipa::path(post, path = "/api/v1/query_range", tag = "prometheus",
    request_body(content = Option<RangeQuery>, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "the result", body = QueryAnswer),
        (status = 400, description = "a query that does not parse, is outside the subset or yields a range vector; bad times or step; more than 11000 steps (`bad_data`)",
            body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the query passed the request timeout (`timeout`)", body = PromError),
        (status = 413, description = "body too large", body = PromError),
        (status = 422, description = "more series, samples or memory (`--max-query-memory-mb`) than a query may take (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn query_range_post(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<QueryAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(QueryAnswer { status: SUCCESS, data: db.timeseries.prom_query_range(posted(q, &headers, body)?).await? }))
}

/// The series the `match[]` selectors select, each as its labels.
#[utoipa::path(get, path = "/api/v1/series", tag = "prometheus", params(Listing),
    responses(
        (status = 200, description = "the series' labels", body = SeriesAnswer,
            example = json!({"status": "success", "data": [{"__name__": "cpu", "host": "h1", "region": "eu"}]})),
        (status = 400, description = "no `match[]`, one that is not a series selector, or a bad time (`bad_data`)", body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the listing passed the request timeout (`timeout`)", body = PromError),
        (status = 422, description = "more than 100000 series (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn series_get(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Json<SeriesAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(SeriesAnswer {
        status: SUCCESS,
        data: db.timeseries.prom_series(params(q.as_deref(), &headers, None)).await?,
    }))
}

/// The series listing with its parameters in a form body.
#[utoipa::path(post, path = "/api/v1/series", tag = "prometheus",
    request_body(content = Option<Listing>, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "the series' labels", body = SeriesAnswer),
        (status = 400, description = "no `match[]`, one that is not a series selector, or a bad time (`bad_data`)", body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the listing passed the request timeout (`timeout`)", body = PromError),
        (status = 413, description = "body too large", body = PromError),
        (status = 422, description = "more than 100000 series (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn series_post(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SeriesAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(SeriesAnswer { status: SUCCESS, data: db.timeseries.prom_series(posted(q, &headers, body)?).await? }))
}

/// The label names of the series the `match[]` selectors select (default: every series).
#[utoipa::path(get, path = "/api/v1/labels", tag = "prometheus", params(Listing),
    responses(
        (status = 200, description = "the label names, sorted", body = NamesAnswer,
            example = json!({"status": "success", "data": ["__name__", "host", "region"]})),
        (status = 400, description = "a `match[]` that is not a series selector, or a bad time (`bad_data`)", body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the listing passed the request timeout (`timeout`)", body = PromError),
        (status = 422, description = "more than 100000 series (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn labels_get(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Json<NamesAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(NamesAnswer {
        status: SUCCESS,
        data: db.timeseries.prom_labels(params(q.as_deref(), &headers, None)).await?,
    }))
}

/// The label names listing with its parameters in a form body.
#[utoipa::path(post, path = "/api/v1/labels", tag = "prometheus",
    request_body(content = Option<Listing>, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "the label names, sorted", body = NamesAnswer),
        (status = 400, description = "a `match[]` that is not a series selector, or a bad time (`bad_data`)", body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the listing passed the request timeout (`timeout`)", body = PromError),
        (status = 413, description = "body too large", body = PromError),
        (status = 422, description = "more than 100000 series (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn labels_post(
    State(state): State<AppState>,
    Database(db): Database,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<NamesAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(NamesAnswer { status: SUCCESS, data: db.timeseries.prom_labels(posted(q, &headers, body)?).await? }))
}

/// The values a label has in the series the `match[]` selectors select (default: every series);
/// `__name__`: the metric names.
#[utoipa::path(get, path = "/api/v1/label/{name}/values", tag = "prometheus", params(LabelPath, Listing),
    responses(
        (status = 200, description = "the values, sorted", body = NamesAnswer,
            example = json!({"status": "success", "data": ["eu", "us"]})),
        (status = 400, description = "an invalid label name, a `match[]` that is not a series selector, or a bad time (`bad_data`)",
            body = PromError),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`), when the server has keys", body = PromError),
        (status = 404, description = "under `/v1/db/{db}/…`: no such database (`database_not_found`)", body = PromError),
        (status = 408, description = "the listing passed the request timeout (`timeout`)", body = PromError),
        (status = 422, description = "more than 100000 series (`execution`, `query_too_large`)", body = PromError),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`", body = PromError),
    ))]
async fn label_values(
    State(state): State<AppState>,
    Database(db): Database,
    ApiPath(path): ApiPath<LabelPath>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Json<NamesAnswer>, ApiError> {
    let _permit = state.admission.enter(HeavyClass::Promql).await?;
    Ok(Json(NamesAnswer {
        status: SUCCESS,
        data: db.timeseries.prom_label_values(path.name, params(q.as_deref(), &headers, None)).await?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_come_from_the_form_first_then_the_url() {
        let mut headers = HeaderMap::new();
        let p = params(Some("query=up&match[]=a&time=1"), &headers, Some(b"query=down"));
        assert_eq!(
            (p.query.as_deref(), p.time.as_deref()),
            (Some("up"), Some("1")),
            "a body that is no form is ignored"
        );
        headers.insert(header::CONTENT_TYPE, "application/x-www-form-urlencoded; charset=utf-8".parse().unwrap());
        let body = b"query=sum%28rate%28x%5B5m%5D%29%29+%2B+1&match%5B%5D=b&start=2&step=15s&timeout=5s";
        let p = params(Some("query=up&match[]=a&time=1"), &headers, Some(body));
        assert_eq!(p.query.as_deref(), Some("sum(rate(x[5m])) + 1"));
        assert_eq!(p.matches, ["b", "a"]);
        assert_eq!((p.time.as_deref(), p.start.as_deref(), p.step.as_deref()), (Some("1"), Some("2"), Some("15s")));
        assert_eq!(error_type(StatusCode::BAD_REQUEST), "bad_data");
        assert_eq!(error_type(StatusCode::UNPROCESSABLE_ENTITY), "execution");
        assert_eq!(error_type(StatusCode::SERVICE_UNAVAILABLE), "unavailable");
    }
}
