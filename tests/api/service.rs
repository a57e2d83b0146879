//! Service routes, the OpenAPI document and Swagger UI, and errors made outside the handlers.

use crate::common::TestServer;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn health_ready_and_info() {
    let s = TestServer::start().await;
    // in the shape of InfluxDB's /health, which InfluxDB 2.x clients read
    let health = json!({"name": "influxdb", "message": "ready for queries and writes", "status": "pass", "checks": [],
        "version": "1.8.10", "commit": concat!("mosaicdb-", env!("CARGO_PKG_VERSION"))});
    assert_eq!(s.get("/health").await, (reqwest::StatusCode::OK, health));
    assert_eq!(s.get("/ready").await, (reqwest::StatusCode::OK, json!({"status": "ready"})));
    s.create_table("info_t").await;
    s.put("/v1/tables/info_t/documents/a", json!({"x": 1})).await;
    let (status, info) = s.get("/v1/info").await;
    assert_eq!(status, 200);
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info["durability"], "buffered");
    assert_eq!(info["writable"], true);
    assert_eq!(info["data_dir"], s.dir.path().display().to_string());
    let families: Vec<&str> = info["keys"].as_array().unwrap().iter().map(|k| k["family"].as_str().unwrap()).collect();
    assert_eq!(
        families,
        [
            "entity",
            "idx",
            "ridx",
            "sidx",
            "ftidx",
            "ftstat",
            "graph",
            "vec",
            "ts",
            "ttlidx",
            "view",
            "changefeed",
            "meta",
            "hist"
        ]
    );
    assert!(info["keys"][0]["keys"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn docs_serve_swagger_ui_and_the_spec_parses() {
    let s = TestServer::start().await;
    let resp = s.client.get(format!("{}/docs/", s.base)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let html = resp.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    let (status, spec) = s.get("/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(spec["openapi"].as_str().map(|v| v.starts_with("3.")), Some(true));
    let paths = spec["paths"].as_object().unwrap();
    for p in [
        "/health",
        "/ready",
        "/v1/info",
        "/v1/tables",
        "/v1/tables/{table}",
        "/v1/tables/{table}/documents",
        "/v1/tables/{table}/documents/{id}",
        "/v1/tables/{table}/import",
        "/v1/batch",
    ] {
        assert!(paths.contains_key(p), "{p} missing from the spec");
    }
}

#[test]
fn committed_openapi_matches_the_code() {
    let generated = serde_json::to_string_pretty(&mosaicdb::api::openapi()).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json")).unwrap_or_default();
    assert!(
        committed.trim_end() == generated.trim_end(),
        "openapi/openapi.json is stale: run `cargo run -- openapi > openapi/openapi.json`"
    );
}

#[tokio::test]
async fn router_errors_are_problems() {
    let s = TestServer::start().await;
    let r = s.send(Method::GET, "/no/such/route", None, &[]).await;
    assert!(r.is_problem(404, "route_not_found"), "{}", r.body);
    let r = s.send(Method::DELETE, "/health", None, &[]).await;
    assert!(r.is_problem(405, "method_not_allowed"), "{}", r.body);
    // every response carries a request id
    assert!(r.header("x-request-id").is_some());
}

#[tokio::test]
async fn responses_are_compressed_when_asked() {
    let s = TestServer::start().await;
    s.create_table("gz").await;
    let docs: Vec<_> =
        (0..200).map(|i| json!({"_id": format!("d{i:03}"), "text": "lorem ipsum dolor sit amet"})).collect();
    assert_eq!(s.post("/v1/tables/gz/documents", json!(docs)).await.0, 201);
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let resp = raw
        .get(format!("{}/v1/tables/gz/documents?limit=200", s.base))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers().get("content-encoding").unwrap(), "gzip");
    // and reqwest (with gzip) decodes it transparently
    let (status, page) = s.get("/v1/tables/gz/documents?limit=200").await;
    assert_eq!(status, 200);
    assert_eq!(page["documents"].as_array().unwrap().len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_stops_at_the_request_timeout() {
    // the walk's own deadline (the request timeout, zero here: passed from the start), with the
    // HTTP layer's timeout long: the 408 can only come from the walk giving up
    let s = TestServer::start_with(|c| {
        c.options.query_timeout = Some(std::time::Duration::ZERO);
        c.limits.timeout = std::time::Duration::from_secs(600);
    })
    .await;
    s.create_table("big").await;
    let body: String = (0..1000).map(|i| format!("{}\n", json!({"_id": format!("d{i:04}"), "n": i}))).collect();
    let r = s.raw(Method::POST, "/v1/tables/big/import", "application/x-ndjson", body).await;
    assert_eq!(r.body["inserted"], 1000, "{}", r.body);
    let r = s.send(Method::POST, "/v1/admin/check", Some(&json!({})), &[]).await;
    assert!(r.is_problem(408, "request_timeout"), "{}", r.body);
    // and the server answers the next request
    assert_eq!(s.get("/v1/tables/big/documents/d0001").await.0, 200);
}
