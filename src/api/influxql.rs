//! InfluxDB 1.x's read endpoint, `GET|POST /query`: InfluxQL over the time series
//! (`service::timeseries::influxql` evaluates it), answered in InfluxDB 1.8's JSON. The database
//! is `db=` as for `/write` (none: `default`; read before routing, `database.rs`), or the `db` of
//! a form-encoded POST body; errors of the whole request answer `{"error": "…"}` (`influx.rs`).

use super::AppState;
use super::admission::HeavyClass;
use super::auth::Caller;
use super::error::ApiError;
use super::influx::{INFLUXDB_VERSION, InfluxV1Error};
use super::timeseries::body_of;
use crate::api::db_path::{Database, Named};
use crate::service::timeseries::influxql::{self, Epoch, QueryResults};
use crate::service::{Db, ServiceError};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(query_get, query_post))
}

/// The parameters of `/query`, in the query string or (POST) a form-encoded body.
#[derive(Debug, Default, Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
pub struct InfluxQueryParams {
    /// the InfluxQL statements, separated by `;`
    #[param(example = "SELECT mean(\"usage\") FROM \"cpu\" WHERE time >= now() - 1h GROUP BY time(5m)")]
    pub q: Option<String>,
    /// the database (default: `default`)
    pub db: Option<String>,
    /// times as integers in this unit (`ns`, `u`, `µ`, `ms`, `s`, `m`, `h`) instead of RFC 3339
    pub epoch: Option<String>,
    /// `true`: the JSON indented
    pub pretty: Option<String>,
    /// `true` is refused: the answer always comes whole
    pub chunked: Option<String>,
    /// ignored (a retention policy: measurements are metrics)
    pub rp: Option<String>,
}

/// Runs InfluxQL statements (the subset docs/timeseries.md lists) against a database's time
/// series, answering InfluxDB 1.8's JSON. A statement's own error (a limit, an unsupported
/// condition) is its result's `error` in a 200; a query that does not parse is a 400.
#[utoipa::path(get, path = "/query", tag = "timeseries", params(InfluxQueryParams),
    responses(
        (status = 200, description = "one result per statement", body = QueryResults,
            example = json!({"results": [{"statement_id": 0, "series": [{"name": "cpu", "tags": {"host": "a"},
                "columns": ["time", "mean"], "values": [["2026-01-01T00:00:00Z", 1.5]]}]}]})),
        (status = 400, description = "no `q`, a query that does not parse, a bad `epoch`, `chunked=true` (`invalid_request`)",
            body = InfluxV1Error, example = json!({"error": "error parsing query: found x, expected FROM at character 10",
                "code": "invalid_request"})),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`)", body = InfluxV1Error),
        (status = 404, description = "`db` names no database (`database_not_found`)", body = InfluxV1Error),
        (status = 422, description = "the query would hold more than `--max-query-memory-mb` in memory (`query_too_large`)",
            body = InfluxV1Error),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`",
            body = InfluxV1Error),
    ))]
async fn query_get(
    State(state): State<AppState>,
    Database(db): Database,
    named: Option<Extension<Named>>,
    caller: Option<Extension<Caller>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let params = params(raw.as_deref().unwrap_or("").as_bytes(), InfluxQueryParams::default())?;
    answer(&state, db, named.map(|n| n.0), caller.map(|c| c.0), params).await
}

/// `/query` with its parameters in a form-encoded body (`application/x-www-form-urlencoded`)
/// and/or the query string (the body's win), as InfluxDB 1.x clients send long queries.
#[utoipa::path(post, path = "/query", tag = "timeseries", params(InfluxQueryParams),
    request_body(content = InfluxQueryParams, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "one result per statement", body = QueryResults),
        (status = 400, description = "no `q`, a query that does not parse, a bad `epoch`, `chunked=true` (`invalid_request`)",
            body = InfluxV1Error),
        (status = 401, description = "no API key, or one the server does not know (`unauthenticated`)", body = InfluxV1Error),
        (status = 404, description = "`db` names no database (`database_not_found`)", body = InfluxV1Error),
        (status = 413, description = "body too large", body = InfluxV1Error),
        (status = 422, description = "the query would hold more than `--max-query-memory-mb` in memory (`query_too_large`)",
            body = InfluxV1Error),
        (status = 503, description = "every place of the class taken (`--max-heavy-reads`): `too_many_heavy_reads`, with `Retry-After`",
            body = InfluxV1Error),
    ))]
async fn query_post(
    State(state): State<AppState>,
    Database(db): Database,
    named: Option<Extension<Named>>,
    caller: Option<Extension<Caller>>,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let url = params(raw.as_deref().unwrap_or("").as_bytes(), InfluxQueryParams::default())?;
    let params = params(&body_of(body)?, url)?;
    answer(&state, db, named.map(|n| n.0), caller.map(|c| c.0), params).await
}

fn bad(detail: impl Into<String>) -> ApiError {
    ApiError::from(ServiceError::InvalidRequest(detail.into()))
}

/// The parameters of a form-encoded text over `under` (those it gives replace them).
fn params(text: &[u8], under: InfluxQueryParams) -> Result<InfluxQueryParams, ApiError> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(text).map_err(|e| bad(format!("the parameters do not decode: {e}")))?;
    let mut p = under;
    for (key, value) in pairs {
        let slot = match key.as_str() {
            "q" => &mut p.q,
            "db" => &mut p.db,
            "epoch" => &mut p.epoch,
            "pretty" => &mut p.pretty,
            "chunked" => &mut p.chunked,
            "rp" => &mut p.rp,
            _ => continue,
        };
        *slot = Some(value);
    }
    Ok(p)
}

async fn answer(
    state: &AppState,
    mut db: Arc<Db>,
    named: Option<Named>,
    caller: Option<Caller>,
    p: InfluxQueryParams,
) -> Result<Response, ApiError> {
    let sees = |name: &str| caller.as_ref().is_none_or(|c| c.role_in(name).is_some());
    // a `db` in the body that the query string did not name
    let resolved = named.as_ref().map_or(crate::service::databases::DEFAULT_DATABASE, |n| &n.0);
    if let Some(name) = p.db.as_deref().filter(|n| *n != resolved) {
        if !sees(name) {
            return Err(ServiceError::DatabaseNotFound(name.to_owned()).into());
        }
        db = state.databases.require(name)?;
    }
    if p.chunked.as_deref().is_some_and(|c| c == "true") {
        return Err(bad("chunked=true is not supported: the answer comes whole (leave chunked out)"));
    }
    let epoch = match p.epoch.as_deref() {
        None | Some("") => Epoch::default(),
        Some(unit) => {
            Epoch::parse(unit).ok_or_else(|| bad(format!("epoch: {unit:?} is not one of ns, u, µ, ms, s, m, h")))?
        }
    };
    let Some(q) = p.q.filter(|q| !q.trim().is_empty()) else {
        return Err(bad("missing required parameter \"q\""));
    };
    let now = crate::service::timeseries::time::now_nanos();
    let statements = influxql::parse(&q, now).map_err(|e| bad(format!("error parsing query: {e}")))?;
    let databases: Vec<String> =
        state.databases.all().into_iter().map(|(name, _)| name).filter(|name| sees(name)).collect();
    let name = p.db.clone().unwrap_or_else(|| resolved.to_owned());
    let _permit = state.admission.enter(HeavyClass::Influxql).await?;
    let answer = db.timeseries.influxql(statements, now, epoch, (name, databases)).await?;
    let pretty = p.pretty.as_deref().is_some_and(|v| v == "true");
    let body = if pretty { serde_json::to_vec_pretty(&answer) } else { serde_json::to_vec(&answer) }
        .map_err(|e| ApiError::from(ServiceError::Internal(format!("encoding an answer: {e}"))))?;
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::HeaderName::from_static("x-influxdb-version"), HeaderValue::from_static(INFLUXDB_VERSION)),
    ];
    Ok((StatusCode::OK, headers, body).into_response())
}
