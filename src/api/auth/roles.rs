//! Which role each route needs: one table from method and route template (the path as the
//! router declares it, `/v1/tables/{table}`) to [`Need`]. A route missing from the table needs
//! `admin`, so a new route is closed until someone decides otherwise.

use axum::http::Method;
use serde::Serialize;

/// What a key may do. Ordered: every role may do what the roles below it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// reads: documents, listings, queries, searches, graph walks, time-series reads, server info
    Read,
    /// reads, and every document, edge and point write
    Write,
    /// everything: tables, indexes, retention, `/v1/admin/*`
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Read, Role::Write, Role::Admin];

    /// `read`, `write` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    /// The role of a name, exactly as [`Role::as_str`] spells it.
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a request must bring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// nothing: liveness, readiness, the OpenAPI document and Swagger UI, the web console's
    /// files, Influx's ping
    Open,
    /// a key of this role or a higher one
    Role(Role),
}

/// The role `method route` needs; `route` is the router's template. `metrics_public` opens
/// `GET /metrics` (`--metrics-public`).
pub fn required(method: &Method, route: &str, metrics_public: bool) -> Need {
    explicit(method, route, metrics_public).unwrap_or(Need::Role(Role::Admin))
}

/// The table itself: `None` for a route it does not name (which [`required`] closes to admin).
pub fn explicit(method: &Method, route: &str, metrics_public: bool) -> Option<Need> {
    use Role::{Admin, Read, Write};
    // HEAD is served by the GET route and tells no less than GET.
    let get = *method == Method::GET || *method == Method::HEAD;
    let post = *method == Method::POST;
    let put = *method == Method::PUT;
    let patch = *method == Method::PATCH;
    let delete = *method == Method::DELETE;
    let role = |r| Some(Need::Role(r));
    // a database's routes under `/v1/db/{db}/…` need what the plain ones need (the router
    // matches the plain template; the OpenAPI document names both)
    if let Some(rest) = route.strip_prefix("/v1/db/{db}/") {
        let root = if rest.starts_with("api/v1/") { "/" } else { "/v1/" };
        return explicit(method, &format!("{root}{rest}"), metrics_public);
    }
    if route.starts_with("/v1/admin/") {
        // check, tasks, backup and whatever joins them
        return role(Admin);
    }
    match route {
        // Liveness and readiness for orchestrators; Influx clients ping without credentials (as
        // InfluxDB answers them); the document and the UI describe the API and hold no data, and
        // the UI must load before anyone can type a key into it.
        "/health" | "/ready" | "/ping" | "/openapi.json" | "/docs" | "/docs/" | "/docs/{*rest}" if get => {
            Some(Need::Open)
        }
        // the web console's files, the same: a page that asks for the key its calls then carry
        "/console" | "/console/" | "/console/{*file}" if get => Some(Need::Open),
        "/metrics" if get => Some(if metrics_public { Need::Open } else { Need::Role(Read) }),
        "/v1/info" if get => role(Read),

        // the databases: listed and described to readers (each key sees those it may reach),
        // made and dropped by admins
        "/v1/databases" | "/v1/databases/{db}" if get => role(Read),
        "/v1/databases" if post => role(Admin),
        "/v1/databases/{db}" if patch || delete => role(Admin),

        "/v1/tables" if get => role(Read),
        "/v1/tables" if post => role(Admin),
        "/v1/tables/{table}" if get => role(Read),
        "/v1/tables/{table}" if patch || delete => role(Admin),

        "/v1/tables/{table}/documents" if get => role(Read),
        "/v1/tables/{table}/documents" if post => role(Write),
        "/v1/tables/{table}/documents/{id}" if get => role(Read),
        "/v1/tables/{table}/documents/{id}" if put || patch || delete => role(Write),
        "/v1/tables/{table}/import" if post => role(Write),
        "/v1/tables/{table}/documents/{id}/history" if get => role(Read),
        "/v1/tables/{table}/documents/{id}/restore" if post => role(Write),
        "/v1/batch" if post => role(Write),

        "/v1/tables/{table}/indexes" if get => role(Read),
        "/v1/tables/{table}/indexes" if post => role(Admin),
        "/v1/tables/{table}/indexes/{name}" if get => role(Read),
        "/v1/tables/{table}/indexes/{name}" if delete => role(Admin),
        // drops and rebuilds a vector index's keys
        "/v1/tables/{table}/indexes/{name}/rebuild" if post => role(Admin),
        "/v1/tables/{table}/views" if get => role(Read),
        "/v1/tables/{table}/views" if post => role(Admin),
        "/v1/tables/{table}/views/{name}" if get => role(Read),
        "/v1/tables/{table}/views/{name}" if delete => role(Admin),
        "/v1/tables/{table}/views/{name}/documents" if get => role(Read),
        // what an index makes of a text: reads the index's definition, writes nothing
        "/v1/tables/{table}/indexes/{name}/analyze" if post => role(Read),

        "/v1/sql" if post => role(Read),
        "/v1/tables/{table}/query" | "/v1/tables/{table}/search" | "/v1/tables/{table}/vector-search" if post => {
            role(Read)
        }

        "/v1/graph/neighbors" if get => role(Read),
        "/v1/graph/traverse" | "/v1/graph/shortest-path" if post => role(Read),

        "/v1/timeseries" if get => role(Read),
        "/v1/timeseries/{metric}/points" | "/v1/timeseries/{metric}/aggregate" | "/v1/timeseries/{metric}/series"
            if get =>
        {
            role(Read)
        }
        "/v1/timeseries/{metric}/points" | "/v1/timeseries/write" | "/write" | "/api/v2/write" if post => role(Write),
        // InfluxQL reads, the long ones POSTed as forms
        "/query" if get || post => role(Read),
        // Deleting points (a series, or a metric with all of its): a metric is made by the
        // writes themselves, so whoever may write it may delete it.
        "/v1/timeseries/{metric}" if delete => role(Write),
        "/v1/timeseries/{metric}/retention" if get => role(Read),
        "/v1/timeseries/{metric}/retention" if put => role(Admin),

        // the Prometheus query API: reads, whether asked with GET or with a form POST
        "/api/v1/query" | "/api/v1/query_range" | "/api/v1/series" | "/api/v1/labels" if get || post => role(Read),
        "/api/v1/label/{name}/values" if get => role(Read),

        // the changefeed: reads of what was written
        "/v1/changes" | "/v1/changes/stream" | "/v1/changes/stats" if get => role(Read),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_named() {
        assert!(Role::Read < Role::Write && Role::Write < Role::Admin);
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("Admin"), None);
        assert_eq!(Role::parse("root"), None);
    }

    #[test]
    fn unknown_routes_and_methods_need_admin() {
        assert_eq!(required(&Method::GET, "/v1/something-new", false), Need::Role(Role::Admin));
        assert_eq!(required(&Method::POST, "/health", false), Need::Role(Role::Admin));
        assert_eq!(required(&Method::OPTIONS, "/v1/tables", false), Need::Role(Role::Admin));
        assert_eq!(required(&Method::POST, "/v1/admin/backup", false), Need::Role(Role::Admin));
        assert_eq!(required(&Method::HEAD, "/v1/tables", false), Need::Role(Role::Read));
    }

    #[test]
    fn metrics_need_read_unless_public() {
        assert_eq!(required(&Method::GET, "/metrics", false), Need::Role(Role::Read));
        assert_eq!(required(&Method::GET, "/metrics", true), Need::Open);
    }

    /// Every operation of the OpenAPI document (as committed: a test keeps it the one the code
    /// makes) is decided in the table, not by the admin default.
    #[test]
    fn every_documented_operation_is_in_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut seen = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, _) in item.as_object().unwrap() {
                let Ok(m) = Method::from_bytes(method.to_uppercase().as_bytes()) else { continue };
                if ![Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(&m) {
                    continue;
                }
                seen += 1;
                assert!(explicit(&m, path, false).is_some(), "{method} {path} is missing from the role table");
            }
        }
        assert!(seen > 30);
    }
}
