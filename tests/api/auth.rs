//! API keys and roles over HTTP: every operation of the OpenAPI document refuses a missing,
//! unknown or too weak key and lets the right role through; Bearer and Token; the open routes.

use crate::common;
use common::{ADMIN_KEY, READ_KEY, Reply, TestServer, WRITE_KEY, bearer};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Needs {
    Nothing,
    Read,
    Write,
    Admin,
}
use Needs::{Admin, Nothing, Read, Write};

/// The rule for every documented operation, written out here rather than taken from the server's
/// table, so that a route that changes class fails this test. A database's routes under
/// `/v1/db/{db}/…` need what the plain ones need (see [`plain`]).
const EXPECTED: &[(&str, &str, Needs)] = &[
    ("GET", "/health", Nothing),
    ("GET", "/ready", Nothing),
    ("GET", "/ping", Nothing),
    ("GET", "/v1/info", Read),
    ("GET", "/v1/databases", Read),
    ("POST", "/v1/databases", Admin),
    ("GET", "/v1/databases/{db}", Read),
    ("PATCH", "/v1/databases/{db}", Admin),
    ("DELETE", "/v1/databases/{db}", Admin),
    ("GET", "/metrics", Read),
    ("GET", "/v1/tables", Read),
    ("POST", "/v1/tables", Admin),
    ("GET", "/v1/tables/{table}", Read),
    ("PATCH", "/v1/tables/{table}", Admin),
    ("DELETE", "/v1/tables/{table}", Admin),
    ("GET", "/v1/tables/{table}/documents", Read),
    ("POST", "/v1/tables/{table}/documents", Write),
    ("GET", "/v1/tables/{table}/documents/{id}", Read),
    ("PUT", "/v1/tables/{table}/documents/{id}", Write),
    ("PATCH", "/v1/tables/{table}/documents/{id}", Write),
    ("DELETE", "/v1/tables/{table}/documents/{id}", Write),
    ("POST", "/v1/tables/{table}/import", Write),
    ("GET", "/v1/tables/{table}/documents/{id}/history", Read),
    ("POST", "/v1/tables/{table}/documents/{id}/restore", Write),
    ("POST", "/v1/batch", Write),
    ("GET", "/v1/tables/{table}/indexes", Read),
    ("POST", "/v1/tables/{table}/indexes", Admin),
    ("GET", "/v1/tables/{table}/indexes/{name}", Read),
    ("DELETE", "/v1/tables/{table}/indexes/{name}", Admin),
    ("POST", "/v1/tables/{table}/indexes/{name}/rebuild", Admin),
    ("POST", "/v1/tables/{table}/indexes/{name}/analyze", Read),
    ("GET", "/v1/tables/{table}/views", Read),
    ("POST", "/v1/tables/{table}/views", Admin),
    ("GET", "/v1/tables/{table}/views/{name}", Read),
    ("DELETE", "/v1/tables/{table}/views/{name}", Admin),
    ("GET", "/v1/tables/{table}/views/{name}/documents", Read),
    ("POST", "/v1/tables/{table}/query", Read),
    ("POST", "/v1/tables/{table}/search", Read),
    ("POST", "/v1/tables/{table}/vector-search", Read),
    ("GET", "/v1/graph/neighbors", Read),
    ("POST", "/v1/graph/traverse", Read),
    ("POST", "/v1/sql", Read),
    ("POST", "/v1/graph/shortest-path", Read),
    ("GET", "/v1/timeseries", Read),
    ("POST", "/v1/timeseries/write", Write),
    ("POST", "/write", Write),
    ("POST", "/api/v2/write", Write),
    ("GET", "/query", Read),
    ("POST", "/query", Read),
    ("POST", "/v1/timeseries/{metric}/points", Write),
    ("GET", "/v1/timeseries/{metric}/points", Read),
    ("GET", "/v1/timeseries/{metric}/aggregate", Read),
    ("GET", "/v1/timeseries/{metric}/series", Read),
    ("DELETE", "/v1/timeseries/{metric}", Write),
    ("GET", "/v1/timeseries/{metric}/retention", Read),
    ("PUT", "/v1/timeseries/{metric}/retention", Admin),
    ("POST", "/v1/admin/check", Admin),
    ("GET", "/v1/admin/tasks", Admin),
    ("POST", "/v1/admin/backup", Admin),
    ("GET", "/v1/changes", Read),
    ("GET", "/v1/changes/stream", Read),
    ("GET", "/v1/changes/stats", Read),
    ("GET", "/api/v1/query", Read),
    ("POST", "/api/v1/query", Read),
    ("GET", "/api/v1/query_range", Read),
    ("POST", "/api/v1/query_range", Read),
    ("GET", "/api/v1/series", Read),
    ("POST", "/api/v1/series", Read),
    ("GET", "/api/v1/labels", Read),
    ("POST", "/api/v1/labels", Read),
    ("GET", "/api/v1/label/{name}/values", Read),
];

/// The plain route of a database's route under `/v1/db/{db}/…` (its Prometheus API,
/// `/v1/db/{db}/api/v1/…`, is `/api/v1/…`).
fn plain(path: &str) -> String {
    match path.strip_prefix("/v1/db/{db}/") {
        Some(rest) if rest.starts_with("api/v1/") => format!("/{rest}"),
        Some(rest) => format!("/v1/{rest}"),
        None => path.to_owned(),
    }
}

fn expected(method: &str, path: &str) -> Needs {
    let path = plain(path);
    EXPECTED.iter().find(|(m, p, _)| *m == method && *p == path).map(|e| e.2).unwrap_or_else(|| {
        panic!("{method} {path} is documented but not in EXPECTED: decide its role here and in the server's table")
    })
}

/// A table with a document, an edge table, a fulltext index and a metric, so the operations reach
/// real things.
async fn fixtures(s: &TestServer) {
    for body in [json!({"name": "people"}), json!({"name": "knows", "kind": "edge"})] {
        assert_eq!(s.post("/v1/tables", body).await.0, 201);
    }
    assert_eq!(s.put("/v1/tables/people/documents/alice", json!({"name": "Alice", "bio": "graphs"})).await.0, 201);
    assert_eq!(s.put("/v1/tables/people/documents/bob", json!({"name": "Bob"})).await.0, 201);
    let edge = json!({"_from": "people/alice", "_to": "people/bob"});
    assert_eq!(s.put("/v1/tables/knows/documents/e1", edge).await.0, 201);
    let index = json!({"name": "bio_ft", "kind": "fulltext", "fields": ["bio"]});
    assert!(s.post("/v1/tables/people/indexes", index).await.0.is_success());
    assert_eq!(s.index_settled("people", "bio_ft").await["state"], "ready");
    let points = json!({"points": [{"entity": "a", "ts": 1000, "value": 1.0}]});
    assert_eq!(s.post("/v1/timeseries/cpu/points", points).await.0, 200);
    // the same in a database of its own, for the routes under /v1/db/{db}
    assert_eq!(s.post("/v1/databases", json!({"name": "scratch"})).await.0, 201);
    for body in [json!({"name": "people"}), json!({"name": "knows", "kind": "edge"})] {
        assert_eq!(s.post("/v1/db/scratch/tables", body).await.0, 201);
    }
    assert_eq!(s.put("/v1/db/scratch/tables/people/documents/alice", json!({"name": "Alice"})).await.0, 201);
    let points = json!({"points": [{"entity": "a", "ts": 1000, "value": 1.0}]});
    assert_eq!(s.post("/v1/db/scratch/timeseries/cpu/points", points).await.0, 200);
}

/// The concrete path of a template, with a query where the route needs one.
fn concrete(path: &str) -> String {
    let filled = path
        .replace("{table}", "people")
        .replace("{id}", "alice")
        .replace("{name}", "bio_ft")
        .replace("{metric}", "cpu")
        .replace("{db}", "scratch");
    match plain(path).as_str() {
        "/v1/graph/neighbors" => format!("{filled}?vertex=people/alice"),
        "/v1/timeseries/{metric}/aggregate" => format!("{filled}?step=1m&from=0&to=60000"),
        "/v1/timeseries/{metric}" => format!("{filled}?entity=gone"),
        "/query" => format!("{filled}?q=SHOW%20MEASUREMENTS"),
        "/api/v1/query" | "/api/v1/query_range" => format!("{filled}?query=cpu&time=1&start=0&end=60&step=15"),
        "/api/v1/series" => format!("{filled}?match[]=cpu"),
        _ => filled,
    }
}

/// A body the operation can take (a line-protocol text for the Influx routes, an NDJSON line for
/// the import, JSON otherwise); whether the handler likes it matters little here.
fn body_for(method: &str, path: &str) -> Option<Value> {
    match (method, plain(path).as_str()) {
        ("GET" | "DELETE", _) => None,
        (_, "/v1/timeseries/write" | "/write" | "/api/v2/write") => {
            Some(Value::String("cpu,entity=b value=2 2000".into()))
        }
        (_, "/query") => Some(Value::String("q=SHOW+DATABASES".into())),
        (_, "/v1/tables/{table}/import") => Some(Value::String("{\"_id\": \"imported\"}\n".into())),
        (_, "/v1/tables/{table}/documents/{id}") => Some(json!({"name": "Alice", "age": 31})),
        (_, "/v1/tables/{table}/query") => Some(json!({"filter": {"name": "Alice"}})),
        (_, "/v1/tables/{table}/search") => Some(json!({"query": "graphs"})),
        (_, "/v1/tables/{table}/vector-search") => Some(json!({"field": "embedding", "vector": [1.0, 0.0]})),
        (_, "/v1/tables/{table}/indexes/{name}/analyze") => Some(json!({"text": "Graphs"})),
        (_, "/v1/timeseries/{metric}/retention") => Some(json!({"max_age": "30d"})),
        (_, "/v1/timeseries/{metric}/points") => Some(json!({"points": [{"entity": "b", "ts": 2000, "value": 2.0}]})),
        (_, "/v1/batch") => Some(
            json!({"operations": [{"op": "put", "table": "people", "id": "carol", "document": {"name": "Carol"}}]}),
        ),
        (_, "/v1/graph/traverse") => Some(json!({"start": "people/alice"})),
        (_, "/v1/sql") => Some(json!({"sql": "SELECT count(*) FROM people"})),
        (_, "/v1/graph/shortest-path") => Some(json!({"from": "people/alice", "to": "people/bob"})),
        ("POST", "/v1/tables") => Some(json!({"name": "more"})),
        ("POST", "/v1/databases") => Some(json!({"name": "another"})),
        ("POST", "/v1/tables/{table}/documents/{id}/restore") => Some(json!({"as_of": "0"})),
        ("PATCH", "/v1/databases/{db}") => Some(json!({"quota_bytes": null})),
        ("POST", "/v1/tables/{table}/indexes") => Some(json!({"name": "by_name", "kind": "hash", "fields": ["name"]})),
        ("POST", "/v1/tables/{table}/views") => Some(json!({"name": "by_name", "kind": "group", "by": ["name"]})),
        _ => Some(json!({})),
    }
}

async fn call(s: &TestServer, authorization: Option<&str>, method: &str, path: &str) -> Reply {
    let m = Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = s.anon.request(m, format!("{}{}", s.base, concrete(path)));
    if let Some(value) = authorization {
        req = req.header("authorization", value);
    }
    req = match body_for(method, path) {
        None => req,
        Some(Value::String(text)) => {
            let content_type = if path.ends_with("/import") { "application/x-ndjson" } else { "text/plain" };
            req.header("content-type", content_type).body(text)
        }
        Some(json) => req.json(&json),
    };
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    // an event stream that was let through never ends: its head is the answer
    if plain(path) == "/v1/changes/stream" && status.is_success() {
        return Reply { status, headers, body: Value::Null };
    }
    let body = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null);
    Reply { status, headers, body }
}

/// Whether `r` is the error `code` with `status`: a problem, or on the Influx writes the error
/// in the shape of their InfluxDB version, on the Prometheus API in Prometheus' shape.
fn is_error(r: &Reply, what: &str, status: u16, influx_code: &str, code: &str) -> bool {
    if what.contains("/api/v1/") {
        r.status.as_u16() == status
            && r.header("content-type") == Some("application/json")
            && r.body["status"] == "error"
            && r.body["code"] == code
            && r.body["error"].as_str().is_some_and(|e| !e.is_empty())
    } else if what.contains(" /write") || what.contains(" /query") {
        r.is_influx_v1_error(status, code)
    } else if what.contains(" /api/v2/write") {
        r.is_influx_v2_error(status, influx_code, code)
    } else {
        r.is_problem(status, code)
    }
}

/// The human-readable text of an error, whatever its shape.
fn detail(r: &Reply) -> &str {
    ["detail", "error", "message"].iter().find_map(|field| r.body[*field].as_str()).unwrap_or_default()
}

fn assert_unauthenticated(r: &Reply, what: &str, presented: bool) {
    assert!(is_error(r, what, 401, "unauthorized", "unauthenticated"), "{what}: {} {}", r.status, r.body);
    let challenge = r.header("www-authenticate").unwrap_or_default();
    assert!(challenge.starts_with("Bearer realm=\"mosaicdb\""), "{what}: {challenge}");
    assert_eq!(challenge.contains("invalid_token"), presented, "{what}: {challenge}");
    assert!(r.header("x-request-id").is_some(), "{what}: no request id");
}

fn assert_forbidden(r: &Reply, what: &str, needed: &str, has: &str) {
    assert!(is_error(r, what, 403, "forbidden", "forbidden"), "{what}: {} {}", r.status, r.body);
    let detail = detail(r);
    assert!(detail.contains(&format!("the {needed} role")) && detail.contains(&format!("the {has} role")), "{detail}");
    for key in [READ_KEY, WRITE_KEY, ADMIN_KEY] {
        assert!(!detail.contains(key), "{what}: the key is in {detail}");
    }
}

fn assert_let_through(r: &Reply, what: &str) {
    assert!(![StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&r.status), "{what}: {} {}", r.status, r.body);
    assert!(!r.status.is_server_error(), "{what}: {} {}", r.status, r.body);
}

/// Every documented operation, sorted so that deletes come last (they remove the fixtures), the
/// most specific first.
fn operations(spec: &Value) -> Vec<(String, String, Value)> {
    let mut ops = Vec::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if ["get", "put", "post", "patch", "delete"].contains(&method.as_str()) {
                ops.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    ops.sort_by_key(|(m, p, _)| (m == "DELETE", if m == "DELETE" { usize::MAX - p.len() } else { 0 }, p.clone()));
    ops
}

#[tokio::test]
async fn every_operation_refuses_missing_unknown_and_weak_keys_and_lets_its_role_through() {
    let s = TestServer::start_with_keys(|_| {}).await;
    fixtures(&s).await;
    let (_, spec) = s.get("/openapi.json").await;
    let ops = operations(&spec);
    let documented: std::collections::BTreeSet<_> = ops.iter().map(|(m, p, _)| (m.clone(), plain(p))).collect();
    let listed: std::collections::BTreeSet<_> =
        EXPECTED.iter().map(|(m, p, _)| (m.to_string(), p.to_string())).collect();
    assert_eq!(documented, listed, "documented operations and EXPECTED differ");
    // every route of a database is there in both forms
    let in_db = ops.iter().filter(|(_, p, _)| p.starts_with("/v1/db/{db}/")).count();
    let of_db = EXPECTED
        .iter()
        .filter(|(_, p, _)| (p.starts_with("/v1/") && !p.starts_with("/v1/databases")) || p.starts_with("/api/v1/"))
        .count();
    assert_eq!(in_db, of_db);
    let wrong = "Bearer not-a-configured-key-0123456789";
    let mut refused_writes = 0;
    for (method, path, op) in &ops {
        let what = format!("{method} {path}");
        let needs = expected(method, path);
        // the document says what the server does
        let declared: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
        assert_eq!(declared.iter().any(|s| *s == "401"), needs != Nothing, "{what} declares {declared:?}");
        assert_eq!(declared.iter().any(|s| *s == "403"), needs > Read, "{what} declares {declared:?}");
        assert_eq!(op["security"] == json!([]), needs == Nothing, "{what}: {}", op["security"]);

        if needs == Nothing {
            assert_let_through(&call(&s, None, method, path).await, &what);
            continue;
        }
        assert_unauthenticated(&call(&s, None, method, path).await, &format!("{what}, no key"), false);
        assert_unauthenticated(&call(&s, Some(wrong), method, path).await, &format!("{what}, wrong key"), true);
        let basic = "Basic dXNlcjp0ZXN0LWFkbWluLWtleS0wMTIzNDU2Nzg5";
        assert_unauthenticated(&call(&s, Some(basic), method, path).await, &format!("{what}, Basic"), false);
        if needs >= Write {
            let r = call(&s, Some(&bearer(READ_KEY)), method, path).await;
            assert_forbidden(&r, &format!("{what}, read key"), if needs == Write { "write" } else { "admin" }, "read");
            refused_writes += 1;
        }
        if needs == Admin {
            let r = call(&s, Some(&bearer(WRITE_KEY)), method, path).await;
            assert_forbidden(&r, &format!("{what}, write key"), "admin", "write");
        }
    }
    assert_eq!(refused_writes, ops.iter().filter(|(m, p, _)| expected(m, p) >= Write).count());
    // nothing a refused request sent was written
    let (_, alice) = s.get("/v1/tables/people/documents/alice").await;
    assert_eq!(alice, json!({"_id": "alice", "name": "Alice", "bio": "graphs"}));
    assert_eq!(s.get("/v1/tables/people/documents/imported").await.0, 404);
    assert_eq!(s.get("/v1/timeseries/cpu/retention").await.1["max_age"], Value::Null);

    // the role an operation needs is enough (Bearer, or Token as Influx clients send it), and
    // admin may do anything
    for (method, path, _) in &ops {
        let what = format!("{method} {path}");
        let key = match expected(method, path) {
            Nothing | Read => READ_KEY,
            Write => WRITE_KEY,
            Admin => ADMIN_KEY,
        };
        assert_let_through(&call(&s, Some(&bearer(key)), method, path).await, &format!("{what}, its role"));
        let token = format!("Token {ADMIN_KEY}");
        assert_let_through(&call(&s, Some(&token), method, path).await, &format!("{what}, admin"));
    }
}

#[tokio::test]
async fn each_role_does_its_work_end_to_end() {
    let s = TestServer::start_with_keys(|_| {}).await;
    let as_ = |key: &'static str| Some(bearer(key));
    let r = s.send_as(as_(ADMIN_KEY).as_deref(), Method::POST, "/v1/tables", Some(&json!({"name": "t"}))).await;
    assert_eq!(r.status, 201);
    // write: documents and points
    let r = s.send_as(as_(WRITE_KEY).as_deref(), Method::PUT, "/v1/tables/t/documents/a", Some(&json!({"x": 1}))).await;
    assert_eq!(r.status, 201);
    let line = Value::String("m,entity=e value=1 1000000000".into());
    let token = format!("token {WRITE_KEY}");
    for path in ["/write?precision=ns", "/api/v2/write?org=o&bucket=default"] {
        let r = s.send_as(Some(&token), Method::POST, path, Some(&line)).await;
        assert_eq!(r.status, 204, "{path}: {}", r.body);
    }
    // read: documents, queries, points
    let r = s.send_as(as_(READ_KEY).as_deref(), Method::GET, "/v1/tables/t/documents/a", None).await;
    assert_eq!((r.status, r.body.clone()), (StatusCode::OK, json!({"_id": "a", "x": 1})));
    let r = s.send_as(as_(READ_KEY).as_deref(), Method::POST, "/v1/tables/t/query", Some(&json!({}))).await;
    assert_eq!(r.body["documents"].as_array().map(Vec::len), Some(1), "{}", r.body);
    let r = s.send_as(as_(READ_KEY).as_deref(), Method::GET, "/v1/timeseries/m/points", None).await;
    assert_eq!(r.body["points"].as_array().map(Vec::len), Some(1), "{}", r.body);
    // a read key writes nothing, a write key creates no index
    let r = s.send_as(as_(READ_KEY).as_deref(), Method::PUT, "/v1/tables/t/documents/b", Some(&json!({"x": 2}))).await;
    assert!(r.is_problem(403, "forbidden"));
    assert_eq!(s.get("/v1/tables/t/documents/b").await.0, 404);
    let index = json!({"name": "by_x", "kind": "range", "fields": ["x"]});
    let r = s.send_as(as_(WRITE_KEY).as_deref(), Method::POST, "/v1/tables/t/indexes", Some(&index)).await;
    assert!(r.is_problem(403, "forbidden"));
    assert_eq!(s.get("/v1/tables/t/indexes/by_x").await.0, 404);
    // admin: the index, the check
    let r = s.send_as(as_(ADMIN_KEY).as_deref(), Method::POST, "/v1/tables/t/indexes", Some(&index)).await;
    assert!(r.status.is_success(), "{}", r.body);
    s.check_ok().await;
}

#[tokio::test]
async fn open_routes_and_swagger_ui() {
    let s = TestServer::start_with_keys(|_| {}).await;
    for path in ["/health", "/ready", "/ping", "/openapi.json", "/docs/"] {
        let r = s.send_as(None, Method::GET, path, None).await;
        assert!(r.status.is_success(), "{path}: {}", r.status);
    }
    // HEAD is GET's
    assert_eq!(s.send_as(None, Method::HEAD, "/health", None).await.status, 200);
    assert_eq!(s.send_as(None, Method::HEAD, "/v1/tables", None).await.status, 401);
    // the UI keeps the key the user gives "Authorize" (and sends it), the document declares it
    let js = s.anon.get(format!("{}/docs/swagger-initializer.js", s.base)).send().await.unwrap().text().await.unwrap();
    assert!(js.contains("\"persistAuthorization\": true"), "{js}");
    let (_, spec) = s.get("/openapi.json").await;
    assert_eq!(spec["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert_eq!(spec["security"], json!([{"bearer": []}]));
    // an unknown route is 404 whoever asks: the document lists the routes anyway
    assert!(s.send_as(None, Method::GET, "/v2/nothing", None).await.is_problem(404, "route_not_found"));
}

/// `/metrics` needs the read role, unless `--metrics-public` opens it to a scraper without a key.
#[tokio::test]
async fn metrics_need_a_read_key_unless_public() {
    let s = TestServer::start_with_keys(|_| {}).await;
    assert_eq!(s.send_as(None, Method::GET, "/metrics", None).await.status, 401);
    let r = s.send_as(Some(&format!("Bearer {}", common::READ_KEY)), Method::GET, "/metrics", None).await;
    assert_eq!(r.status, 200);
    let public = TestServer::start_with_keys(|c| c.access.metrics_public = true).await;
    assert_eq!(public.send_as(None, Method::GET, "/metrics", None).await.status, 200);
    // only /metrics: everything else still asks
    assert_eq!(public.send_as(None, Method::GET, "/v1/tables", None).await.status, 401);
}

/// The 401 comes before the body is read: a body that never ends does not hold it up.
#[tokio::test]
async fn refused_before_the_body_is_read() {
    let s = TestServer::start_with_keys(|_| {}).await;
    s.create_table("t").await;
    for (path, content_type) in
        [("/v1/tables/t/import", "application/x-ndjson"), ("/v1/tables/t/documents", "application/json")]
    {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
        tx.send(Ok(b"{\"_id\": \"a\"".to_vec())).await.unwrap();
        let body = reqwest::Body::wrap_stream(tokio_stream(rx));
        let send = s.anon.post(format!("{}{path}", s.base)).header("content-type", content_type).body(body).send();
        // a guard against a hang, not a timing assertion: the body never ends while `tx` lives
        let resp = tokio::time::timeout(std::time::Duration::from_secs(60), send).await.expect("no answer").unwrap();
        assert_eq!(resp.status(), 401, "{path}");
        drop(tx);
    }
}

/// A receiver as a stream (no extra dependency).
fn tokio_stream<T>(mut rx: tokio::sync::mpsc::Receiver<T>) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::test]
async fn without_keys_nothing_is_asked() {
    let s = TestServer::start().await;
    let r = s.send_as(Some("Bearer whatever"), Method::POST, "/v1/tables", Some(&json!({"name": "t"}))).await;
    assert_eq!(r.status, 201);
    assert_eq!(s.send_as(None, Method::DELETE, "/v1/tables/t", None).await.status, 204);
}

/// `X-Mosaic-Min-Seq` is waited for only once the key is checked: a request without one is
/// refused at once (not after the 5 s wait); a keyed one waits until a write publishes the state
/// it asks for, and 503 `lagging` past the wait.
#[tokio::test]
async fn min_seq_waits_after_the_key_check_and_until_a_write_publishes_it() {
    let s = TestServer::start_with_keys(|_| {}).await;
    s.create_table("t").await;
    let far = (u64::MAX / 2).to_string();
    let started = std::time::Instant::now();
    let r = s.send_as(None, Method::GET, "/v1/tables", None).await;
    assert_eq!(r.status, 401);
    let mut anon = s.anon.get(format!("{}/v1/tables", s.base)).header("x-mosaic-min-seq", &far);
    anon = anon.header("accept", "application/json");
    assert_eq!(anon.send().await.unwrap().status(), 401);
    // the wait is 5 s: well under it, on a loaded machine too
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "{:?}", started.elapsed());

    // the state after the next write, asked for before it: answered once the write is published
    let now: u64 = s.send(Method::GET, "/v1/tables", None, &[]).await.header("x-mosaic-seq").unwrap().parse().unwrap();
    let wanted = (now + 1).to_string();
    let read = {
        let (client, url) = (s.client.clone(), format!("{}/v1/tables/t/documents/a", s.base));
        tokio::spawn(async move { client.get(url).header("x-mosaic-min-seq", wanted).send().await.unwrap() })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!read.is_finished(), "answered before the state it asks for was published");
    assert_eq!(s.put("/v1/tables/t/documents/a", json!({"n": 1})).await.0, 201);
    let read = tokio::time::timeout(std::time::Duration::from_secs(4), read).await.expect("still waiting").unwrap();
    assert_eq!(read.status(), 200, "the write it waited for is read");
    let seen: u64 = read.headers()["x-mosaic-seq"].to_str().unwrap().parse().unwrap();
    assert!(seen > now);
    // a state no write reaches within the wait
    let r = s.send(Method::GET, "/v1/tables", None, &[("x-mosaic-min-seq", &far)]).await;
    assert!(r.is_problem(503, "lagging"), "{}", r.body);
    let r = s.send(Method::GET, "/v1/tables", None, &[("x-mosaic-min-seq", "soon")]).await;
    assert!(r.is_problem(400, "invalid_header"), "{}", r.body);
}

/// The state number tells when the server is written: not to a request without a valid key,
/// nor on the open routes; a keyed request gets it.
#[tokio::test]
async fn no_state_number_on_a_401_or_an_open_route() {
    for keyed in [true, false] {
        let s = if keyed { TestServer::start_with_keys(|_| {}).await } else { TestServer::start().await };
        for path in ["/health", "/ready", "/ping", "/openapi.json"] {
            let r = s.send_as(None, Method::GET, path, None).await;
            assert!(r.status.is_success(), "{path}: {}", r.status);
            assert_eq!(r.header("x-mosaic-seq"), None, "{path}");
        }
        let r = s.send_as(None, Method::GET, "/v1/tables", None).await;
        assert_eq!(r.status, if keyed { 401 } else { 200 });
        assert_eq!(r.header("x-mosaic-seq").is_some(), !keyed);
        let r = s.send_as(Some("Bearer not-a-configured-key-0123456789"), Method::GET, "/v1/tables", None).await;
        assert_eq!(r.header("x-mosaic-seq").is_some(), !keyed);
        let r = s.send_as(Some(&bearer(READ_KEY)), Method::GET, "/v1/tables", None).await;
        assert!(r.header("x-mosaic-seq").is_some());
        // a key's holder too is refused a route above its role, and told the state
        let r = s.send_as(Some(&bearer(READ_KEY)), Method::POST, "/v1/tables", Some(&json!({"name": "x"}))).await;
        assert!(r.header("x-mosaic-seq").is_some(), "{}", r.status);
    }
}

/// A series is deleted with the write role; the whole metric (its retention too) needs admin,
/// as dropping a table does.
#[tokio::test]
async fn deleting_a_whole_metric_needs_admin() {
    let s = TestServer::start_with_keys(|_| {}).await;
    let points =
        json!({"points": [{"entity": "a", "ts": 1000, "value": 1.0}, {"entity": "b", "ts": 1000, "value": 2.0}]});
    assert_eq!(s.post("/v1/timeseries/cpu/points", points).await.0, 200);
    let write = Some(bearer(WRITE_KEY));
    let r = s.send_as(write.as_deref(), Method::DELETE, "/v1/timeseries/cpu?entity=a", None).await;
    assert_eq!((r.status, &r.body["points"]), (StatusCode::OK, &json!(1)), "{}", r.body);
    let r = s.send_as(write.as_deref(), Method::DELETE, "/v1/timeseries/cpu", None).await;
    assert_forbidden(&r, "DELETE /v1/timeseries/cpu, write key", "admin", "write");
    let r = s.send_as(write.as_deref(), Method::DELETE, "/v1/db/default/timeseries/cpu", None).await;
    assert!(r.is_problem(403, "forbidden"), "{}", r.body);
    assert_eq!(s.get("/v1/timeseries/cpu/points").await.1["points"].as_array().map(Vec::len), Some(1));
    let r = s.send_as(Some(&bearer(ADMIN_KEY)), Method::DELETE, "/v1/timeseries/cpu", None).await;
    assert_eq!((r.status, &r.body["points"]), (StatusCode::OK, &json!(1)), "{}", r.body);
}

/// `/v1/info` names the data directory to an admin key only (and to anyone without keys).
#[tokio::test]
async fn info_shows_the_data_directory_to_admins_only() {
    let s = TestServer::start_with_keys(|_| {}).await;
    let dir = s.dir.path().display().to_string();
    for (key, shown) in [(READ_KEY, false), (WRITE_KEY, false), (ADMIN_KEY, true)] {
        let r = s.send_as(Some(&bearer(key)), Method::GET, "/v1/info", None).await;
        assert_eq!(r.status, 200);
        assert!(r.body["version"].is_string() && r.body["keys"].is_array(), "{}", r.body);
        assert_eq!(r.body.get("data_dir").is_some(), shown, "{key}: {}", r.body);
        assert!(!r.body.to_string().contains(&dir) || shown, "{}", r.body);
    }
    let open = TestServer::start().await;
    assert_eq!(open.get("/v1/info").await.1["data_dir"], open.dir.path().display().to_string());
}
