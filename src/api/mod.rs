//! The HTTP API: routes, extractors, problem+json errors, the OpenAPI document, Swagger UI and the
//! web console.
//! Handlers are thin: extract, call one service function, map the result.

mod admin;
pub mod admission;
pub mod auth;
mod backup;
mod batch;
mod changes;
mod cluster;
mod console;
mod cors;
mod databases;
pub mod db_path;
mod documents;
mod error;
mod extract;
mod graph;
mod history;
mod indexes;
mod influx;
mod influxql;
mod metrics;
mod origin;
pub mod pg;
mod prometheus;
mod query;
mod respond;
#[cfg(test)]
mod schema_fields;
mod search;
mod spec;
mod sql;
mod state;
mod stream;
mod system;
mod tables;
mod timeseries;
mod vectors;
mod views;

pub use cors::CorsOrigins;
pub use error::{ApiError, Problem};
pub use extract::ClientGone;
pub use metrics::{ConnectionMetrics, ConnectionTimeout, RefusedConnection};
pub use respond::encode_path;
pub(crate) use respond::json_text;
pub use state::{AppState, HttpLimits};
pub use stream::{NDJSON_TYPES, wants_ndjson};

use crate::service::databases::Databases;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use std::sync::Arc;
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::decompression::RequestDecompressionLayer;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

#[derive(OpenApi)]
#[openapi(
    info(title = "mosaicdb", description = "A multi-model database over HTTP/JSON: tables of JSON documents, \
        indexes, graphs and time series on one ordered key-value store. Every error is application/problem+json \
        with a stable `code`. Every answer carries `X-Mosaic-Seq` (the state the server had applied); a request \
        may send `X-Mosaic-Min-Seq` to wait (at most 5 s, else 503 `lagging`) until the server has applied that \
        state. In cluster mode a follower answers every write with 307 and `Location` at the leader.", license(name = "Apache-2.0")),
    tags(
        (name = "service", description = "liveness, readiness, server information"),
        (name = "databases", description = "isolated databases in one server: every route of `/v1/…` is also under `/v1/db/{db}/…`"),
        (name = "tables", description = "schemaless, typed and edge tables"),
        (name = "documents", description = "documents by id, listing and NDJSON import"),
        (name = "indexes", description = "hash, unique, range, spatial, fulltext, ngram, ttl and vector indexes"),
        (name = "views", description = "maintained views: saved filters and group-by aggregates kept up to date in every write"),
        (name = "query", description = "filters, sorts and pages, planned over the indexes"),
        (name = "search", description = "full-text search ranked by BM25, and nearest-neighbour vector search"),
        (name = "sql", description = "read-only SQL (PostgreSQL dialect, by Apache DataFusion) over every table of a database"),
        (name = "batch", description = "several writes, all or nothing"),
        (name = "graph", description = "neighbours, traversals and shortest paths over edge tables"),
        (name = "timeseries", description = "points as JSON or InfluxDB line protocol, bucket aggregation, retention"),
        (name = "prometheus", description = "the Prometheus HTTP query API over the time series (a PromQL subset), for Grafana and promtool; also under `/v1/db/{db}/api/v1/…`"),
        (name = "admin", description = "consistency check, background tasks, online backup"),
        (name = "changes", description = "the changefeed: every committed document change, in order (long-poll and SSE)"),
    ),
    components(schemas(Problem))
)]
struct ApiDoc;

fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(system::router())
        .merge(metrics::router())
        .merge(databases::router())
        .merge(tables::router())
        .merge(documents::router())
        .merge(history::router())
        .merge(indexes::router())
        .merge(views::router())
        .merge(query::router())
        .merge(search::router())
        .merge(vectors::router())
        .merge(batch::router())
        .merge(graph::router())
        .merge(timeseries::router())
        .merge(influx::router())
        .merge(influxql::router())
        .merge(prometheus::router())
        .merge(admin::router())
        .merge(changes::router())
}

/// The OpenAPI document of every route.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = routes()
        .merge(documents::import_router())
        .merge(backup::router())
        .merge(changes::waiting_router())
        .merge(sql::router())
        .into_openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    db_path::document(&mut doc);
    auth::document(&mut doc);
    doc
}

/// The whole application, ready to serve; `access` holds the API keys (none: no authentication);
/// `connections`, the counts of the server's connections, which `GET /metrics` shows; `sql`, the
/// engine of `POST /v1/sql`.
pub(crate) fn app(
    databases: Arc<Databases>,
    limits: HttpLimits,
    access: &auth::Access,
    connections: Arc<ConnectionMetrics>,
    sql: Arc<crate::service::sql::SqlEngine>,
    admission: Arc<admission::Admission>,
) -> Router {
    let import = crate::service::ImportLimits {
        max_line: limits.max_body_bytes,
        window: limits.timeout,
        min_bytes: limits.min_import_bytes,
    };
    let metrics = Arc::new(metrics::Metrics::new(databases.clone(), connections, admission.clone()));
    let record = metrics.layer();
    let max_streams = limits.max_streams.max(1);
    let streams = Arc::new(tokio::sync::Semaphore::new(max_streams));
    let ready_details = access.ready_details || !access.enabled();
    let state = AppState {
        databases,
        max_body_bytes: limits.max_body_bytes,
        import,
        streams,
        max_streams,
        metrics,
        admission,
        sql,
        ready_details,
    };
    let cluster = axum::middleware::from_fn_with_state(state.clone(), cluster::layer);
    let (timed, _) = routes().split_for_parts();
    // imports and backups stream for as long as they take: no request timeout
    let (import, _) = documents::import_router().split_for_parts();
    let (backup, _) = backup::router().split_for_parts();
    // long-polls and event streams wait for events (bounded by wait_ms, or until shutdown)
    let (waiting, _) = changes::waiting_router().split_for_parts();
    // SQL statements are bounded by --sql-timeout-secs (their answer included), not the request
    // timeout
    let (sql, _) = sql::router().split_for_parts();
    let sql = sql.layer(extract::RefuseOversizedLayer(limits.max_body_bytes));
    // Each `Router::layer` call wraps every route in one more boxed service, cloned (with all it
    // wraps) on every request: so each group of layers goes on in one call, as one stack.
    let timed = timed.layer(
        ServiceBuilder::new()
            .layer(extract::RefuseOversizedLayer(limits.max_body_bytes))
            .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.timeout)),
    );
    let swagger = SwaggerUi::new("/docs")
        .url("/openapi.json", openapi())
        .config(utoipa_swagger_ui::Config::default().persist_authorization(true));
    let router = Router::new()
        .merge(timed)
        .merge(import)
        .merge(backup)
        .merge(waiting)
        .merge(sql)
        .merge(swagger)
        .merge(console::router());
    // Last, over every route merged above: a route layer runs once the route is matched (its
    // template known) and before the handler reads the body. The key check (not there at all
    // without keys) comes first: a request it refuses makes the server wait for nothing (the
    // gate's `X-Mosaic-Min-Seq`) and learns nothing of the cluster.
    let guard = auth::Guard::new(access).map(|guard| axum::middleware::from_fn_with_state(guard, auth::authorize));
    let gate = axum::middleware::from_fn_with_state(state.clone(), cluster::gate);
    let router = router.route_layer(ServiceBuilder::new().option_layer(guard).layer(gate));
    // every route: the state applied, the redirect of a follower's writes
    router
        .layer(cluster)
        .layer(
            ServiceBuilder::new()
                // the Influx writes' errors in the shapes Influx clients read: around everything
                // that may answer one (it changes no status, so the record below counts the same)
                .layer(influx::InfluxErrorsLayer)
                // outermost but for that, so that a request's status is the one the client gets
                // (a timeout's 408; a panic under it, which it answers with the 500 problem) and
                // its latency covers every layer
                .layer(record)
                .layer(SetRequestIdLayer::x_request_id(SequentialRequestId::new()))
                .layer(TraceLayer::new_for_http().make_span_with(auth::request_span).on_body_chunk(()).on_eos(()))
                .layer(PropagateRequestIdLayer::x_request_id())
                // cross-origin requests, when configured: preflights answered here, before the key
                // check; every answer to an allowed origin with its headers, errors too
                .option_layer(cors::layer(&access.cors))
                // without keys: requests to a foreign host name (DNS rebinding) and writes from
                // foreign web pages refused, before anything runs
                .option_layer(origin::layer(access))
                .map_response(error::problem_for_bare_errors)
                // Small bodies (a document, a status) cost more to deflate than they save on the
                // wire. Streams (SSE, NDJSON) are not compressed: the encoder would hold pieces back.
                .layer(
                    CompressionLayer::new().compress_when(
                        SizeAbove::new(1024)
                            .and(NotForContentType::SSE)
                            .and(NotForContentType::const_new(stream::NDJSON_TYPES[0])),
                    ),
                )
                .layer(RequestDecompressionLayer::new())
                .layer(DefaultBodyLimit::max(limits.max_body_bytes)),
        )
        .with_state(state)
}

/// Request ids `{boot}-{n}`: unique per process run without a random draw per request.
#[derive(Clone)]
struct SequentialRequestId {
    boot: Arc<str>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl SequentialRequestId {
    fn new() -> Self {
        let boot = uuid::Uuid::now_v7().simple().to_string();
        SequentialRequestId { boot: boot[..16].into(), next: Default::default() }
    }
}

impl MakeRequestId for SequentialRequestId {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        use std::fmt::Write;
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // one allocation, handed to the header value as it is (no copy)
        let mut id = String::with_capacity(self.boot.len() + 21);
        let _ = write!(id, "{}-{n}", self.boot);
        axum::http::HeaderValue::from_maybe_shared(bytes::Bytes::from(id.into_bytes())).ok().map(RequestId::new)
    }
}
