//! `/v1/timeseries`: points as JSON or InfluxDB line protocol (also at `/write` and
//! `/api/v2/write`, where Influx clients and Telegraf send them: `influx.rs`), page reads, bucket
//! aggregation, retention, listing and deletes.

use super::AppState;
use super::auth::{self, Granted, Role};
use super::error::{ApiError, Problem, too_large};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::api::db_path::Database;
use crate::service::timeseries::{
    AggregateFn, AggregateRequest, AggregateResponse, Grouping, MetricList, Order, PointsPage, PointsRequest,
    Precision, Retention, SeriesPage, WritePoints, WriteReport,
};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_metrics))
        .routes(routes!(write_points, read_points))
        .routes(routes!(aggregate))
        .routes(routes!(list_series))
        .routes(routes!(get_retention, put_retention))
        .routes(routes!(delete_metric))
        .routes(routes!(write_lines))
}

/// `/v1/timeseries/{metric}`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct MetricPath {
    /// the metric (1-256 bytes, no control characters), percent-encoded
    #[param(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", example = "cpu")]
    pub metric: String,
}

/// The precision of integer timestamps in a write.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JsonWriteQuery {
    /// the unit of integer `ts` values: `ns`, `us`, `ms` (default), `s`
    #[param(inline)]
    pub precision: Option<Precision>,
}

/// The query of the line-protocol writes. On the Influx routes, `db=` (1.x) and `bucket=` (2.x)
/// name the database (read before routing: `database.rs`); `rp` and `org` are accepted and
/// ignored: measurements are metrics.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LineWriteQuery {
    /// the unit of the line timestamps: `ns` (default, as InfluxDB), `us`, `ms`, `s` (and the
    /// Influx 1.x spellings `n`, `u`, `m`, `h`)
    #[param(inline)]
    pub precision: Option<Precision>,
}

/// The query of `GET /v1/timeseries/{metric}/points`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PointsQuery {
    /// one entity (default: every entity of the metric, by name)
    pub entity: Option<String>,
    /// a series selector as Prometheus writes one: only the series whose labels match
    #[serde(rename = "match")]
    #[param(rename = "match", example = "{host=\"h1\",region=~\"eu-.*\"}")]
    pub selector: Option<String>,
    /// inclusive start: ms since the epoch or RFC 3339
    #[param(example = "2026-11-21T00:00:00Z")]
    pub from: Option<String>,
    /// exclusive end: ms since the epoch or RFC 3339
    pub to: Option<String>,
    /// page size, 1-100000 (default 10000)
    #[param(minimum = 1, maximum = 100000)]
    pub limit: Option<usize>,
    /// `asc` (default) or `desc`
    #[param(inline)]
    pub order: Option<Order>,
    /// the `cursor` of the previous page (same metric, entity, window and order)
    pub cursor: Option<String>,
    /// the unit of the `ts` returned: `ms` (default), `ns`, `us`, `s`
    #[param(inline)]
    pub precision: Option<Precision>,
}

/// The query of `GET /v1/timeseries/{metric}/aggregate`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AggregateQuery {
    /// one entity (default: every entity together)
    pub entity: Option<String>,
    /// a series selector as Prometheus writes one: only the series whose labels match
    #[serde(rename = "match")]
    #[param(rename = "match", example = "{region=\"eu\"}")]
    pub selector: Option<String>,
    /// inclusive start: ms since the epoch or RFC 3339
    pub from: Option<String>,
    /// exclusive end: ms since the epoch or RFC 3339
    pub to: Option<String>,
    /// bucket width (`ms s m h d w`), buckets aligned to multiples of it since the epoch
    #[param(example = "1m")]
    pub step: String,
    /// `avg` (default), `min`, `max`, `sum`, `count`, `first`, `last`
    #[serde(rename = "fn")]
    #[param(rename = "fn", inline)]
    pub func: Option<AggregateFn>,
    /// `entity`: one list of buckets per entity
    #[param(inline)]
    pub group_by: Option<GroupBy>,
    /// label names, comma-separated: one list of buckets per combination of their values (as
    /// PromQL's `by`); not with `group_by`
    #[param(example = "region")]
    pub by: Option<String>,
}

/// What to group aggregation buckets by.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    /// one list of buckets per entity
    Entity,
}

/// The query of `GET /v1/timeseries/{metric}/series`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SeriesQuery {
    /// a series selector as Prometheus writes one (default: every series)
    #[serde(rename = "match")]
    #[param(rename = "match", example = "{region=\"eu\"}")]
    pub selector: Option<String>,
    /// page size, 1-100000 (default 1000)
    #[param(minimum = 1, maximum = 100000)]
    pub limit: Option<usize>,
    /// the `cursor` of the previous page (same metric and match)
    pub cursor: Option<String>,
}

/// The query of `DELETE /v1/timeseries/{metric}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteQuery {
    /// only this entity's series (default: the whole metric and its retention)
    pub entity: Option<String>,
}

/// What a delete removed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeleteReport {
    /// points removed
    pub points: u64,
}

pub(super) fn body_of(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::new(r.status(), "invalid_body", r.body_text())
        }
    })
}

/// Every metric with its point and series counts, first and last time, and retention.
#[utoipa::path(get, path = "/v1/timeseries", tag = "timeseries", responses(
    (status = 200, description = "the metrics", body = MetricList,
        example = json!({"metrics": [{"name": "cpu", "points": 1440, "series": 2, "first": 1763683200000i64,
            "last": 1763769540000i64, "bytes": 1210, "retention": {"max_age": "7d"}}]})),
))]
async fn list_metrics(Database(db): Database) -> Result<Json<MetricList>, ApiError> {
    Ok(Json(db.timeseries.list_metrics().await?))
}

/// Writes points of one metric, all or none. The same entity and time overwrites; the metric is
/// created by its first point.
#[utoipa::path(post, path = "/v1/timeseries/{metric}/points", tag = "timeseries", params(MetricPath, JsonWriteQuery),
    request_body(content = WritePoints, example = json!({"points": [
        {"entity": "server1", "ts": 1763719200000i64, "value": 0.5},
        {"entity": "server1", "ts": "2025-11-21T10:01:00Z", "value": 0.7, "tags": {"dc": "eu"}}]})),
    responses(
        (status = 200, description = "written", body = WriteReport, example = json!({"points": 2, "skipped_string_fields": 0})),
        (status = 400, description = "a bad metric name, entity, time or value (every bad point is named)", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_request", "title": "Bad Request", "status": 400,
                "detail": "points[1]: \"noon\" is not an RFC 3339 time such as 2026-11-21T10:00:00Z", "code": "invalid_request"})),
        (status = 409, description = "the metric is being deleted (`metric_dropping`)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "a body of the wrong shape", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn write_points(
    Database(db): Database,
    ApiPath(path): ApiPath<MetricPath>,
    ApiQuery(q): ApiQuery<JsonWriteQuery>,
    ApiJson(body): ApiJson<WritePoints>,
) -> Result<Json<WriteReport>, ApiError> {
    Ok(Json(db.timeseries.write_json_points(path.metric, body, q.precision.unwrap_or_default()).await?))
}

/// A page of points, by entity then time.
#[utoipa::path(get, path = "/v1/timeseries/{metric}/points", tag = "timeseries", params(MetricPath, PointsQuery),
    responses(
        (status = 200, description = "a page of points", body = PointsPage,
            example = json!({"points": [{"entity": "server1", "ts": 1763719200000i64, "value": 0.5}], "cursor": null})),
        (status = 400, description = "invalid from, to, match, limit, order, precision or cursor", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "no such metric (`metric_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the read passed the request timeout", body = Problem, content_type = "application/problem+json"),
    ))]
async fn read_points(
    Database(db): Database,
    ApiPath(path): ApiPath<MetricPath>,
    ApiQuery(q): ApiQuery<PointsQuery>,
) -> Result<Json<PointsPage>, ApiError> {
    let req = PointsRequest {
        entity: q.entity,
        selector: q.selector,
        from: q.from,
        to: q.to,
        limit: q.limit,
        order: q.order.unwrap_or_default(),
        cursor: q.cursor,
        precision: q.precision.unwrap_or_default(),
    };
    Ok(Json(db.timeseries.read_points(path.metric, req).await?))
}

/// Aggregates points into buckets of `step` aligned to multiples of it since the epoch; empty
/// buckets are omitted. Without `entity`, every entity (or every one `match` selects) together;
/// with `group_by=entity`, one list per entity; with `by=region,…`, one list per combination of
/// those labels' values.
#[utoipa::path(get, path = "/v1/timeseries/{metric}/aggregate", tag = "timeseries", params(MetricPath, AggregateQuery),
    responses(
        (status = 200, description = "the buckets (or, with group_by=entity, the series; with by=, the groups)", body = AggregateResponse,
            example = json!({"buckets": [{"ts": 1763719200000i64, "value": 0.6}, {"ts": 1763719260000i64, "value": 0.4}]})),
        (status = 400, description = "invalid step, fn, from, to, match, group_by or by", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such metric (`metric_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the aggregation passed the request timeout", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "more than 100000 buckets (`too_many_buckets`)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn aggregate(
    Database(db): Database,
    ApiPath(path): ApiPath<MetricPath>,
    ApiQuery(q): ApiQuery<AggregateQuery>,
) -> Result<Json<AggregateResponse>, ApiError> {
    let req = AggregateRequest {
        entity: q.entity,
        from: q.from,
        to: q.to,
        step: q.step,
        func: q.func.unwrap_or_default(),
        selector: q.selector,
        group_by: grouping(q.group_by, q.by.as_deref())?,
    };
    Ok(Json(db.timeseries.aggregate(path.metric, req).await?))
}

/// The series of a metric (those `match` selects), by entity, with their labels, point counts
/// and time spans.
#[utoipa::path(get, path = "/v1/timeseries/{metric}/series", tag = "timeseries", params(MetricPath, SeriesQuery),
    responses(
        (status = 200, description = "a page of series", body = SeriesPage,
            example = json!({"series": [{"entity": "host=h1,region=eu", "labels": {"host": "h1", "region": "eu"},
                "points": 1440, "first": 1763683200000i64, "last": 1763769540000i64}], "cursor": null})),
        (status = 400, description = "invalid match, limit or cursor", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_request", "title": "Bad Request", "status": 400,
                "detail": "match: expected a quoted value at character 7, found 'e'", "code": "invalid_request"})),
        (status = 404, description = "no such metric (`metric_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "the listing passed the request timeout", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_series(
    Database(db): Database,
    ApiPath(path): ApiPath<MetricPath>,
    ApiQuery(q): ApiQuery<SeriesQuery>,
) -> Result<Json<SeriesPage>, ApiError> {
    Ok(Json(db.timeseries.list_series(path.metric, q.selector, q.limit, q.cursor).await?))
}

/// The grouping of `group_by` and `by`.
fn grouping(group_by: Option<GroupBy>, by: Option<&str>) -> Result<Grouping, ApiError> {
    match (group_by, by) {
        (Some(_), Some(_)) => Err(invalid("give group_by=entity or by=, not both".into())),
        (Some(GroupBy::Entity), None) => Ok(Grouping::Entity),
        (None, None) => Ok(Grouping::All),
        (None, Some(by)) => {
            let names: Vec<String> = by.split(',').map(|n| n.trim().to_owned()).collect();
            if names.iter().any(String::is_empty) || names.len() > MAX_BY_LABELS {
                return Err(invalid(format!("by: 1 to {MAX_BY_LABELS} label names, comma-separated, none empty")));
            }
            Ok(Grouping::Labels(names))
        }
    }
}

fn invalid(detail: String) -> ApiError {
    crate::service::ServiceError::InvalidRequest(detail).into()
}

/// Most labels `by=` may name.
const MAX_BY_LABELS: usize = 16;

/// A metric's retention.
#[utoipa::path(get, path = "/v1/timeseries/{metric}/retention", tag = "timeseries", params(MetricPath),
    responses(
        (status = 200, description = "the retention (null: points are kept forever)", body = Retention, example = json!({"max_age": "24h"})),
        (status = 404, description = "no such metric (`metric_not_found`)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_retention(
    Database(db): Database,
    ApiPath(path): ApiPath<MetricPath>,
) -> Result<Json<Retention>, ApiError> {
    Ok(Json(db.timeseries.retention(&path.metric)?))
}

/// Sets a metric's retention (creating the metric if needed): the retention task removes points
/// older than `max_age` at every `--retention-interval`. `{"max_age": null}` keeps them forever.
#[utoipa::path(put, path = "/v1/timeseries/{metric}/retention", tag = "timeseries", params(MetricPath),
    request_body(content = Retention, example = json!({"max_age": "24h"})),
    responses(
        (status = 200, description = "the retention now in force", body = Retention, example = json!({"max_age": "1d"})),
        (status = 400, description = "an invalid metric name or duration", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_request", "title": "Bad Request", "status": 400,
                "detail": "max_age: \"1y\" is not a duration such as 500ms, 90s, 5m, 24h, 7d or 2w (a positive integer and a unit)",
                "code": "invalid_request"})),
        (status = 409, description = "the metric is being deleted (`metric_dropping`)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "a body of the wrong shape", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn put_retention(
    Database(db): Database,
    ApiPath(path): ApiPath<MetricPath>,
    ApiJson(body): ApiJson<Retention>,
) -> Result<Json<Retention>, ApiError> {
    Ok(Json(db.timeseries.set_retention(path.metric, body).await?))
}

/// Deletes one series (`?entity=`) or the whole metric with its retention, in bounded writes.
/// A series needs the `write` role; the whole metric needs `admin`, as dropping a table does.
#[utoipa::path(delete, path = "/v1/timeseries/{metric}", tag = "timeseries", params(MetricPath, DeleteQuery),
    responses(
        (status = 200, description = "deleted", body = DeleteReport, example = json!({"points": 1440})),
        (status = 404, description = "no such metric (`metric_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "the metric is being deleted already (`metric_dropping`)", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn delete_metric(
    granted: Option<Extension<Granted>>,
    Database(db): Database,
    ApiPath(path): ApiPath<MetricPath>,
    ApiQuery(q): ApiQuery<DeleteQuery>,
) -> Result<Json<DeleteReport>, ApiError> {
    if q.entity.is_none() {
        auth::require(granted.map(|g| g.0), Role::Admin, "deleting a whole metric (without `entity`)")?;
    }
    Ok(Json(DeleteReport { points: db.timeseries.delete_timeseries(path.metric, q.entity).await? }))
}

/// Writes InfluxDB line protocol, all lines or none: the measurement is the metric, the tag set
/// (sorted, `k=v,k=v`) the entity, a field `value` the metric itself and any other field `f` the
/// metric `{measurement}.{f}`; string fields are skipped and counted; a line without a time gets
/// the server's time.
#[utoipa::path(post, path = "/v1/timeseries/write", tag = "timeseries", params(LineWriteQuery),
    request_body(content = String, content_type = "text/plain",
        example = "cpu,host=h1,region=eu value=0.5,idle=97i 1763719200000000000\n"),
    responses(
        (status = 200, description = "written", body = WriteReport, example = json!({"points": 2, "skipped_string_fields": 0})),
        (status = 400, description = "bad lines (`invalid_line_protocol`, each with its number in `lines`), or a body that is not UTF-8",
            body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:mosaicdb:problem:invalid_line_protocol", "title": "Bad Request", "status": 400,
                "detail": "1 bad line(s), nothing written: line 2: No fields were provided", "code": "invalid_line_protocol",
                "lines": [{"line": 2, "error": "No fields were provided"}]})),
        (status = 409, description = "a metric is being deleted (`metric_dropping`)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
    ))]
async fn write_lines(
    Database(db): Database,
    ApiQuery(q): ApiQuery<LineWriteQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<WriteReport>, ApiError> {
    let precision = q.precision.unwrap_or(Precision::Nanoseconds);
    Ok(Json(db.timeseries.write_line_protocol(body_of(body)?, precision).await?))
}
