//! Which database a request goes to: `/v1/db/{db}/…` names one, every other route means
//! `default`. [`scope`] turns `/v1/db/{db}/rest` into `/v1/rest` before routing, keeping the
//! name in the request ([`Named`]); the [`Database`] extractor resolves it, or answers 404
//! `database_not_found`. So every route exists in both forms with one handler, and a handler
//! never sees which form was used.

use super::error::ApiError;
use super::state::AppState;
use crate::service::Db;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Method, Request, Uri};
use std::sync::Arc;

/// The prefix of the routes of a named database.
pub const PREFIX: &str = "/v1/db/";

/// The routes that take a body with POST but only read. A cluster follower answers them itself,
/// and sends every other POST, PUT, PATCH and DELETE to the leader before anything else (so a
/// write never meets the follower's catalog, which may be a poll behind the leader's: see
/// `cluster.rs`); a database over its quota serves them.
pub(super) const READ_ONLY_POSTS: &[&str] = &[
    "/query",
    "/v1/admin/backup",
    "/v1/admin/check",
    "/v1/graph/shortest-path",
    "/v1/graph/traverse",
    "/v1/sql",
    "/v1/tables/{table}/indexes/{name}/analyze",
    "/v1/tables/{table}/query",
    "/v1/tables/{table}/search",
    "/v1/tables/{table}/vector-search",
    "/api/v1/query",
    "/api/v1/query_range",
    "/api/v1/series",
    "/api/v1/labels",
];

/// The database a request named with `/v1/db/{db}/…` (percent-decoded).
#[derive(Debug, Clone)]
pub struct Named(pub Arc<str>);

/// The database a request goes to.
pub struct Database(pub Arc<Db>);

impl FromRequestParts<AppState> for Database {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let db = match parts.extensions.get::<Named>() {
            None => state.databases.default_db().clone(),
            Some(Named(name)) => state.databases.require(name)?,
        };
        if writes(parts) {
            db.core.check_quota()?;
        }
        Ok(Database(db))
    }
}

/// Whether a request may add to what its database stores: every PUT, PATCH and POST but the
/// reads that are POSTs (a DELETE frees space, and goes on past a quota).
fn writes(parts: &Parts) -> bool {
    match parts.method {
        Method::PUT | Method::PATCH => true,
        Method::POST => parts
            .extensions
            .get::<axum::extract::MatchedPath>()
            .is_none_or(|route| !READ_ONLY_POSTS.contains(&route.as_str())),
        _ => false,
    }
}

/// The name a request named (`default` if none).
pub fn name_of(parts: &axum::http::Extensions) -> &str {
    parts.get::<Named>().map_or(crate::service::databases::DEFAULT_DATABASE, |n| &n.0)
}

/// Rewrites `/v1/db/{db}/rest?query` to `/v1/rest?query` with `{db}` kept as [`Named`]; other
/// requests pass as they are. A request under `/v1/db/` that names no database and route (a
/// name that is not valid percent-encoded UTF-8, nothing after the name,
/// `/v1/db/{db}/databases…`, which is no route of a database) passes as it is too, and meets
/// the router's 404. Runs before routing, on every request (`server::conn`).
pub fn scope<B>(mut req: Request<B>) -> Request<B> {
    let Some(tail) = req.uri().path().strip_prefix(PREFIX) else {
        return influx(req);
    };
    let (raw_name, rest) = tail.split_once('/').unwrap_or((tail, ""));
    let routed = !rest.is_empty() && !rest.starts_with("databases") && !rest.starts_with("db/");
    let Some(name) = percent_decode(raw_name).filter(|n| !n.is_empty() && routed) else {
        return req;
    };
    // the Prometheus API of a database: `/v1/db/{db}/api/v1/…` is `/api/v1/…` (a Grafana data
    // source's URL is `…/v1/db/{db}`)
    let root = if rest.starts_with("api/v1/") { "/" } else { "/v1/" };
    let path_and_query = match req.uri().query() {
        Some(q) => format!("{root}{rest}?{q}"),
        None => format!("{root}{rest}"),
    };
    let mut parts = req.uri().clone().into_parts();
    let Ok(path_and_query) = path_and_query.parse() else {
        return req;
    };
    parts.path_and_query = Some(path_and_query);
    let Ok(uri) = Uri::from_parts(parts) else {
        return req;
    };
    *req.uri_mut() = uri;
    req.extensions_mut().insert(Named(name.into()));
    req
}

/// The InfluxDB endpoints name their database in the query: `db=` (1.x, `/write`, `/query`) or
/// `bucket=` (2.x, `/api/v2/write`). A value that does not decode is left to the handler's
/// query parsing.
fn influx<B>(mut req: Request<B>) -> Request<B> {
    let param = match req.uri().path() {
        "/write" | "/query" => "db",
        "/api/v2/write" => "bucket",
        _ => return req,
    };
    // the first `db=` (`bucket=`) given; one that is empty or does not decode names no
    // database there is (404), rather than falling back to `default`
    let value = req.uri().query().into_iter().flat_map(|q| q.split('&')).find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == param).then_some(value)
    });
    if let Some(value) = value {
        let name = percent_decode(&value.replace('+', " ")).unwrap_or_default();
        req.extensions_mut().insert(Named(name.into()));
    }
    req
}

/// The path under `/v1/db/{name}/` of a plain route's `path` (`/v1/…`, with its query); other
/// paths are left as they are.
pub(super) fn path_in(name: &str, path: &str) -> String {
    match path.strip_prefix("/v1/") {
        Some(rest) => format!("{PREFIX}{}/{rest}", super::encode_path(name)),
        None => path.to_owned(),
    }
}

/// `%XX` escapes decoded; `None` if one is malformed or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Adds every route of a database (`/v1/…` but `/v1/databases…`) to the OpenAPI document again
/// under `/v1/db/{db}/…`, with the `db` path parameter first and `_in_db` after its operation id.
pub(super) fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::IntoParams;
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    let db = super::spec::DatabasePath::into_params(|| Some(ParameterIn::Path));
    let missing = ResponseBuilder::new()
        .description("no such database (`database_not_found`), or one the API key may not reach")
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build();
    let components = doc.components.get_or_insert_with(Default::default);
    components.responses.insert("database_not_found".into(), RefOr::T(missing));
    let copies: Vec<_> = doc
        .paths
        .paths
        .iter()
        .filter(|(path, _)| (path.starts_with("/v1/") || path.starts_with("/api/v1/")) && is_database_route(path))
        .map(|(path, item)| {
            let mut item = item.clone();
            let operations = [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
            for op in operations.into_iter().flatten() {
                op.operation_id = op.operation_id.take().map(|id| format!("{id}_in_db"));
                // a 404 the route may already describe (no such table) is one more reason for it
                if let Some(RefOr::T(known)) = op.responses.responses.get_mut("404") {
                    known.description.push_str("; or no such database (`database_not_found`)");
                } else {
                    let missing = RefOr::Ref(Ref::new("#/components/responses/database_not_found"));
                    op.responses.responses.insert("404".into(), missing);
                }
                let parameters = op.parameters.get_or_insert_with(Vec::new);
                for (i, p) in db.iter().enumerate() {
                    parameters.insert(i, p.clone().into());
                }
            }
            let rest = path.strip_prefix("/v1/").unwrap_or_else(|| path.trim_start_matches('/'));
            (format!("{PREFIX}{{db}}/{rest}"), item)
        })
        .collect();
    doc.paths.paths.extend(copies);
}

/// Whether `route` (a route template) is a route of one database: every `/v1/…` route but the
/// databases' own (which `/v1/db/{db}/…` reaches too), the InfluxDB writes (`db=`,
/// `bucket=`) and the Prometheus API (`/v1/db/{db}/api/v1/…`).
pub fn is_database_route(route: &str) -> bool {
    let of_database = |rest: &str| !rest.starts_with("databases") && !rest.starts_with("db/");
    route.strip_prefix("/v1/").is_some_and(of_database)
        || route == "/write"
        || route == "/api/v2/write"
        || route == "/query"
        || route.starts_with("/api/v1/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(uri: &str) -> (String, Option<String>) {
        let req = scope(Request::builder().uri(uri).body(()).unwrap());
        (req.uri().to_string(), req.extensions().get::<Named>().map(|n| n.0.to_string()))
    }

    #[test]
    fn named_routes_become_the_plain_ones_with_the_name_kept() {
        assert_eq!(rewritten("/v1/tables"), ("/v1/tables".into(), None));
        assert_eq!(rewritten("/v1/db/shop/tables"), ("/v1/tables".into(), Some("shop".into())));
        assert_eq!(
            rewritten("/v1/db/a%20b/tables/t/documents?limit=2"),
            ("/v1/tables/t/documents?limit=2".into(), Some("a b".into()))
        );
        assert_eq!(rewritten("/v1/db/%C3%A9t%C3%A9/info"), ("/v1/info".into(), Some("été".into())));
        for bad in ["/v1/db/shop", "/v1/db/shop/", "/v1/db//tables", "/v1/db/%zz/tables", "/v1/db/%ff/tables"] {
            assert_eq!(rewritten(bad), (bad.into(), None), "{bad}");
        }
        assert_eq!(rewritten("/v1/db/shop/databases"), ("/v1/db/shop/databases".into(), None));
        assert_eq!(
            rewritten("/write?db=metrics&precision=ms"),
            ("/write?db=metrics&precision=ms".into(), Some("metrics".into()))
        );
        assert_eq!(
            rewritten("/api/v2/write?org=o&bucket=a+b"),
            ("/api/v2/write?org=o&bucket=a+b".into(), Some("a b".into()))
        );
        assert_eq!(rewritten("/api/v2/write?db=x"), ("/api/v2/write?db=x".into(), None));
        assert_eq!(rewritten("/write?db=&x=1"), ("/write?db=&x=1".into(), Some(String::new())));
        assert_eq!(rewritten("/write?db=%zz"), ("/write?db=%zz".into(), Some(String::new())));
        assert_eq!(rewritten("/write?db=a&db=b"), ("/write?db=a&db=b".into(), Some("a".into())));
        assert_eq!(rewritten("/v1/db/%+1/tables"), ("/v1/db/%+1/tables".into(), None));
        assert_eq!(path_in("a b", "/v1/tables/t?x=1"), "/v1/db/a%20b/tables/t?x=1");
        assert_eq!(rewritten("/v1/db/shop/db/other/tables"), ("/v1/db/shop/db/other/tables".into(), None));
        assert_eq!(
            rewritten("/v1/db/shop/api/v1/query?query=up"),
            ("/api/v1/query?query=up".into(), Some("shop".into()))
        );
        assert_eq!(rewritten("/api/v1/query?query=up"), ("/api/v1/query?query=up".into(), None));
    }
}
