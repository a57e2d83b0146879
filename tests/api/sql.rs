//! `POST /v1/sql`: statements over schemaless, typed and edge tables, JSON paths, parameters,
//! joins, EXPLAIN naming the planner's strategy, NDJSON and truncation, every error code, the
//! read-only refusal, the statement timeout; and a property: every filter answers the same with
//! pushdown on and off.

use crate::common::{READ_KEY, TestServer, bearer};
use proptest::prelude::Just;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use reqwest::Method;
use serde_json::{Value, json};

/// Runs a statement: (status, body).
async fn sql(s: &TestServer, statement: &str, params: Value) -> (u16, Value) {
    let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": statement, "params": params})), &[]).await;
    (r.status.as_u16(), r.body)
}

/// The rows of a statement that must succeed.
async fn rows(s: &TestServer, statement: &str, params: Value) -> Value {
    let (status, body) = sql(s, statement, params).await;
    assert_eq!(status, 200, "{statement}: {body}");
    body["rows"].clone()
}

async fn insert(s: &TestServer, table: &str, docs: Value) {
    let r = s.send(Method::POST, &format!("/v1/tables/{table}/documents"), Some(&docs), &[]).await;
    assert!(r.status.is_success(), "{}", r.body);
}

async fn people(s: &TestServer) {
    s.create_table("users").await;
    insert(
        s,
        "users",
        json!([
            {"_id": "u1", "name": "Ada", "city": "Oslo", "age": 36, "tags": ["a", "b"]},
            {"_id": "u2", "name": "Bo", "city": "Bergen", "age": 25},
            {"_id": "u3", "name": "Cy", "city": "Oslo", "age": "unknown"},
            {"_id": "u4", "name": "Di", "address": {"city": "Oslo", "zip": "0150"}, "age": 41},
        ]),
    )
    .await;
}

#[tokio::test]
async fn selects_filter_by_json_paths_and_take_parameters() {
    let s = TestServer::start().await;
    people(&s).await;
    let (status, body) = sql(&s, "SELECT _id, doc->>'city' AS city FROM users ORDER BY _id", json!([])).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["columns"], json!([{"name": "_id", "type": "text"}, {"name": "city", "type": "text"}]));
    assert_eq!(body["rows"], json!([["u1", "Oslo"], ["u2", "Bergen"], ["u3", "Oslo"], ["u4", null]]));
    assert_eq!(body["truncated"], false);
    // the document itself comes back as JSON
    let doc = rows(&s, "SELECT doc FROM users WHERE _id = 'u2'", json!([])).await;
    assert_eq!(doc, json!([[{"_id": "u2", "name": "Bo", "city": "Bergen", "age": 25}]]));
    // nested paths, typed accessors, parameters
    let nested = rows(&s, "SELECT _id FROM users WHERE doc->'address'->>'city' = 'Oslo'", json!([])).await;
    assert_eq!(nested, json!([["u4"]]));
    let older = rows(&s, "SELECT _id FROM users WHERE (doc->'age')::int >= $1 ORDER BY _id", json!([30])).await;
    assert_eq!(older, json!([["u1"], ["u4"]]));
    let by_city = rows(&s, "SELECT doc->>'name' FROM users WHERE doc->>'city' = $1 ORDER BY 1", json!(["Oslo"])).await;
    assert_eq!(by_city, json!([["Ada"], ["Cy"]]));
    let groups = rows(
        &s,
        "SELECT doc->>'city' AS city, count(*) AS n FROM users GROUP BY 1 ORDER BY n DESC, city NULLS LAST",
        json!([]),
    )
    .await;
    assert_eq!(groups, json!([["Oslo", 2], ["Bergen", 1], [null, 1]]));
    // a named database answers at its own route, over its own tables
    assert_eq!(s.post("/v1/databases", json!({"name": "other"})).await.0, 201);
    assert_eq!(s.post("/v1/db/other/tables", json!({"name": "users"})).await.0, 201);
    let r = s.send(Method::POST, "/v1/db/other/sql", Some(&json!({"sql": "SELECT count(*) FROM users"})), &[]).await;
    assert_eq!((r.status.as_u16(), &r.body["rows"]), (200, &json!([[0]])), "{}", r.body);
}

#[tokio::test]
async fn typed_columns_edges_and_joins_across_tables() {
    let s = TestServer::start().await;
    people(&s).await;
    let orders = json!({"name": "orders", "columns": [
        {"name": "buyer", "type": "string"},
        {"name": "amount", "type": "int"},
        {"name": "price", "type": "float", "nullable": true},
        {"name": "paid", "type": "bool", "nullable": true},
        {"name": "placed", "type": "timestamp", "nullable": true},
    ]});
    assert_eq!(s.post("/v1/tables", orders).await.0, 201);
    insert(
        &s,
        "orders",
        json!([
            {"_id": "o1", "buyer": "u1", "amount": 3, "price": 2.5, "paid": true, "placed": "2026-01-02T03:04:05Z"},
            {"_id": "o2", "buyer": "u1", "amount": 5, "paid": false},
            {"_id": "o3", "buyer": "u2", "amount": 7, "price": 1.0},
        ]),
    )
    .await;
    let (_, body) = sql(&s, "SELECT * FROM orders WHERE _id = 'o1'", json!([])).await;
    let types: Vec<&str> = body["columns"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["text", "text", "bigint", "double precision", "boolean", "timestamptz", "json"], "{body}");
    let first = Value::from(body["rows"][0].as_array().unwrap()[..6].to_vec());
    assert_eq!(first, json!(["o1", "u1", 3, 2.5, true, "2026-01-02T03:04:05Z"]), "{body}");
    let typed = rows(&s, "SELECT _id FROM orders WHERE amount > 4 AND NOT paid", json!([])).await;
    assert_eq!(typed, json!([["o2"]]));
    let joined = rows(
        &s,
        "SELECT u.doc->>'name' AS name, sum(o.amount) AS total FROM orders o JOIN users u ON u._id = o.buyer \
         GROUP BY 1 ORDER BY total DESC",
        json!([]),
    )
    .await;
    assert_eq!(joined, json!([["Ada", 8], ["Bo", 7]]));
    assert_eq!(s.post("/v1/tables", json!({"name": "knows", "kind": "edge"})).await.0, 201);
    insert(&s, "knows", json!([{"_from": "users/u1", "_to": "users/u2", "since": 2020}])).await;
    let edges = rows(
        &s,
        "SELECT k._from, k._to, (k.doc->'since')::int, u.doc->>'name' FROM knows k \
         JOIN users u ON 'users/' || u._id = k._to",
        json!([]),
    )
    .await;
    assert_eq!(edges, json!([["users/u1", "users/u2", 2020, "Bo"]]));
    // window functions and CTEs are DataFusion's
    let ranked = rows(
        &s,
        "WITH t AS (SELECT buyer, amount FROM orders) \
         SELECT buyer, amount, row_number() OVER (PARTITION BY buyer ORDER BY amount DESC) FROM t ORDER BY 1, 2",
        json!([]),
    )
    .await;
    assert_eq!(ranked, json!([["u1", 3, 2], ["u1", 5, 1], ["u2", 7, 1]]));
}

#[tokio::test]
async fn explain_names_the_strategy_of_the_query_planner() {
    let s = TestServer::start().await;
    people(&s).await;
    let (st, _) =
        s.post("/v1/tables/users/indexes", json!({"name": "by_city", "kind": "hash", "fields": ["city"]})).await;
    assert!(st.is_success());
    assert_eq!(s.index_settled("users", "by_city").await["state"], "ready");
    let plan = |rows: Value| rows.to_string();
    let by_city = plan(rows(&s, "EXPLAIN SELECT _id FROM users WHERE doc->>'city' = 'Oslo'", json!([])).await);
    assert!(by_city.contains("strategy=index_scan, index=by_city"), "{by_city}");
    let by_id = plan(rows(&s, "EXPLAIN SELECT _id FROM users WHERE _id = 'u1'", json!([])).await);
    assert!(by_id.contains("strategy=id_lookup"), "{by_id}");
    let scan = plan(rows(&s, "EXPLAIN SELECT count(*) FROM users", json!([])).await);
    assert!(scan.contains("strategy=full_scan"), "{scan}");
    // the index answers the same as a scan does
    let oslo = rows(&s, "SELECT _id FROM users WHERE doc->>'city' = 'Oslo' ORDER BY _id", json!([])).await;
    assert_eq!(oslo, json!([["u1"], ["u3"]]));
}

#[tokio::test]
async fn bad_statements_answer_their_codes_and_writes_are_refused() {
    let s = TestServer::start().await;
    people(&s).await;
    for (statement, status, code) in [
        ("SELEC 1", 400, "invalid_sql"),
        ("SELECT * FROM nope", 400, "invalid_sql"),
        ("SELECT nope FROM users", 400, "invalid_sql"),
        ("SELECT 1; SELECT 2", 400, "invalid_sql"),
        ("SELECT _id FROM users WHERE _id = $1", 400, "invalid_sql"),
        ("", 400, "invalid_sql"),
        ("INSERT INTO users VALUES ('x', '{}')", 400, "sql_read_only"),
        ("DELETE FROM users", 400, "sql_read_only"),
        ("CREATE TABLE t (a int)", 400, "sql_read_only"),
        ("DROP TABLE users", 400, "sql_read_only"),
        ("SET datafusion.execution.batch_size = 1", 400, "sql_read_only"),
        ("EXPLAIN INSERT INTO users VALUES ('x', '{}')", 400, "sql_read_only"),
        ("SELECT 1 INTO t2", 400, "sql_read_only"),
        ("SELECT (doc->>'age')::int FROM users", 422, "sql_failed"),
        ("SELECT 1 / 0", 422, "sql_failed"),
    ] {
        let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": statement})), &[]).await;
        assert!(r.is_problem(status, code), "{statement}: {} {}", r.status, r.body);
    }
    // a body of the wrong shape, and a deeply nested expression: answers, never a crash
    let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": "SELECT 1", "nope": 1})), &[]).await;
    assert!(r.is_problem(422, "invalid_body"), "{}", r.body);
    let deep = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
    let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": deep})), &[]).await;
    assert!(r.is_problem(400, "invalid_sql"), "{} {}", r.status, r.body);
    let long = format!("SELECT {}", vec!["1"; 20_000].join(" + "));
    let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": long})), &[]).await;
    assert!(r.status == 200 || r.status == 400, "{} {}", r.status, r.body);
    // nothing was written
    assert_eq!(rows(&s, "SELECT count(*) FROM users", json!([])).await, json!([[4]]));
}

#[tokio::test]
async fn a_json_answer_is_capped_and_an_ndjson_answer_streams_every_row() {
    let s = TestServer::start().await;
    let (status, body) = sql(&s, "SELECT value FROM generate_series(1, 10005) ORDER BY value", json!([])).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["truncated"], true);
    assert_eq!(body["rows"].as_array().unwrap().len(), 10_000);
    assert_eq!(body["rows"][9999], json!([10000]));
    let exact = rows(&s, "SELECT value FROM generate_series(1, 10000) ORDER BY value", json!([])).await;
    assert_eq!(exact.as_array().unwrap().len(), 10_000);
    let resp = s
        .client
        .post(format!("{}/v1/sql", s.base))
        .header("accept", "application/x-ndjson")
        .json(&json!({"sql": "SELECT value, value * 2 AS twice FROM generate_series(1, 10005) ORDER BY value"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let text = resp.text().await.unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        lines[0],
        json!({"columns": [{"name": "value", "type": "bigint"}, {"name": "twice", "type": "bigint"}]})
    );
    assert_eq!(lines.len(), 10_006);
    assert_eq!(lines[10_005], json!([10005, 20010]));
    // an error before the first row is a problem document, as without NDJSON
    let resp = s
        .client
        .post(format!("{}/v1/sql", s.base))
        .header("accept", "application/x-ndjson")
        .json(&json!({"sql": "SELECT * FROM nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
}

#[tokio::test]
async fn a_long_statement_times_out_without_stalling_other_requests() {
    let s = TestServer::start_with(|c| c.limits.sql.timeout = std::time::Duration::from_secs(3)).await;
    people(&s).await;
    // 10^10 pairs through a nested-loop join: far longer than the timeout
    let heavy = "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b \
                 WHERE a.value + b.value = 7";
    let started = std::time::Instant::now();
    let (statement, others) = tokio::join!(sql(&s, heavy, json!([])), async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let asked = std::time::Instant::now();
        let (status, _) = s.get("/v1/tables/users/documents/u1").await;
        (status, asked.elapsed())
    });
    assert_eq!(statement.0, 408, "{}", statement.1);
    assert_eq!(statement.1["code"], "statement_timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(others.0, 200);
    // answered while the statement still ran, not after it
    assert!(others.1 < std::time::Duration::from_millis(1500), "a read waited {:?} behind a statement", others.1);
}

/// The `sql` class's running statements, as `/metrics` counts them.
async fn running(s: &TestServer) -> String {
    let text = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    text.lines().find(|l| l.starts_with("mosaicdb_heavy_reads_running{class=\"sql\"}")).unwrap_or("").to_owned()
}

#[tokio::test]
async fn a_client_that_goes_away_stops_its_statement() {
    let s = TestServer::start().await;
    let heavy = json!({"sql": "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b \
                                WHERE a.value + b.value = 7"})
    .to_string();
    let addr = s.base.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/sql HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        heavy.len()
    );
    std::io::Write::write_all(&mut tcp, format!("{head}{heavy}").as_bytes()).unwrap();
    let mut seen = false;
    for _ in 0..50 {
        seen |= running(&s).await.ends_with(" 1");
        if seen {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(seen, "the statement never ran");
    drop(tcp);
    let gone = std::time::Instant::now();
    while !running(&s).await.ends_with(" 0") {
        assert!(gone.elapsed() < std::time::Duration::from_secs(5), "the statement still runs without its client");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_statement_over_its_memory_is_refused() {
    let s = TestServer::start_with(|c| c.limits.sql.statement_memory = 1 << 20).await;
    let (status, body) = sql(
        &s,
        "SELECT value % 500000 AS k, count(*) FROM generate_series(1, 2000000) GROUP BY 1 ORDER BY 2 DESC LIMIT 1",
        json!([]),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("sql_memory_exceeded")), "{body}");
}

#[tokio::test]
async fn the_read_role_may_run_statements() {
    let s = TestServer::start_with_keys(|_| {}).await;
    s.create_table("t").await;
    let resp = s
        .anon
        .post(format!("{}/v1/sql", s.base))
        .header("authorization", bearer(READ_KEY))
        .json(&json!({"sql": "SELECT count(*) FROM t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = s.anon.post(format!("{}/v1/sql", s.base)).json(&json!({"sql": "SELECT 1"})).send().await.unwrap();
    assert_eq!(resp.status(), 401);
}

/// One conjunct of the property's filters, as SQL.
fn atom() -> impl Strategy<Value = String> {
    let id = (0..30u8).prop_map(|n| format!("'d{n:02}'"));
    let city = proptest::sample::select(vec!["'Oslo'", "'Bergen'", "'Rome'", "'30'", "'x.y'"]);
    proptest::prop_oneof![
        id.clone().prop_map(|v| format!("_id = {v}")),
        id.clone().prop_map(|v| format!("_id >= {v}")),
        id.clone().prop_map(|v| format!("_id < {v}")),
        (id.clone(), id.clone()).prop_map(|(a, b)| format!("_id IN ({a}, {b})")),
        (id.clone(), id).prop_map(|(a, b)| format!("_id BETWEEN {a} AND {b}")),
        (0..4u8).prop_map(|n| format!("_id LIKE 'd{n}%'")),
        (0..10i64).prop_map(|n| format!("n > {n}")),
        (0..10i64).prop_map(|n| format!("n = {n}")),
        city.clone().prop_map(|c| format!("s = {c}")),
        Just("flag".to_owned()),
        Just("NOT flag".to_owned()),
        (0..10i64).prop_map(|n| format!("f <= {n}.5")),
        city.prop_map(|c| format!("doc->>'c' = {c}")),
        (0..10i64).prop_map(|n| format!("(doc->'k')::int < {n}")),
        (0..10i64).prop_map(|n| format!("(doc->'k')::int = {n}")),
        (0..10i64).prop_map(|n| format!("_id = 'd0{n}' OR n = {n}")),
    ]
}

#[tokio::test]
async fn every_filter_answers_the_same_with_pushdown_on_and_off() {
    let s = TestServer::start().await;
    let def = json!({"name": "p", "columns": [
        {"name": "n", "type": "int", "nullable": true},
        {"name": "s", "type": "string", "nullable": true},
        {"name": "flag", "type": "bool", "nullable": true},
        {"name": "f", "type": "float", "nullable": true},
        {"name": "c", "type": "json", "nullable": true},
        {"name": "k", "type": "json", "nullable": true},
    ]});
    assert_eq!(s.post("/v1/tables", def).await.0, 201);
    for (name, kind, field) in [("pn", "range", "n"), ("ps", "hash", "s"), ("pc", "hash", "c"), ("pk", "range", "k")] {
        let (st, b) = s.post("/v1/tables/p/indexes", json!({"name": name, "kind": kind, "fields": [field]})).await;
        assert!(st.is_success(), "{b}");
        assert_eq!(s.index_settled("p", name).await["state"], "ready");
    }
    let cities = ["Oslo", "Bergen", "Rome", "30", "x.y"];
    let docs: Vec<Value> = (0..30u64)
        .map(|i| {
            let mut d = json!({"_id": format!("d{i:02}")});
            let x = i * 7919 % 31;
            if x % 5 != 0 {
                d["n"] = json!(x % 11);
            }
            if x % 4 != 0 {
                d["s"] = json!(cities[(x % 5) as usize]);
            }
            if x % 3 != 0 {
                d["flag"] = json!(x % 2 == 0);
            }
            d["f"] = json!(x as f64 / 3.0);
            d["c"] = match x % 6 {
                0 => json!(30),
                1 => json!([cities[(x % 5) as usize], "Oslo"]),
                _ => json!(cities[(x % 5) as usize]),
            };
            d["k"] = match x % 5 {
                0 => json!("7"),
                1 => json!([3, 8]),
                2 => json!(x % 10),
                _ => json!(x as f64 / 2.0),
            };
            d
        })
        .collect();
    insert(&s, "p", Value::Array(docs)).await;
    let filter = proptest::collection::vec(atom(), 1..4).prop_map(|atoms| atoms.join(" AND "));
    let mut runner = TestRunner::deterministic();
    for case in 0..60 {
        let filter = filter.new_tree(&mut runner).unwrap().current();
        let limit = if case % 3 == 0 { " LIMIT 3" } else { "" };
        let statement = format!("SELECT _id, n, doc FROM p WHERE {filter} ORDER BY _id{limit}");
        let answer = |pushdown: bool| {
            let body = json!({"sql": statement, "pushdown": pushdown});
            let s = &s;
            async move { s.send(Method::POST, "/v1/sql", Some(&body), &[]).await }
        };
        let (on, off) = (answer(true).await, answer(false).await);
        assert_eq!(on.status, 200, "{statement}: {}", on.body);
        assert_eq!(off.status, 200, "{statement}: {}", off.body);
        assert_eq!(on.body["rows"], off.body["rows"], "{statement}");
    }
}
