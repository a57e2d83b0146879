//! InfluxQL on `GET|POST /query` over hand-built points, every answer exact: raw selects, each
//! aggregate, GROUP BY time with every fill and an offset, grouping by tags, conditions on tags
//! and time, ORDER BY/LIMIT/SLIMIT, the SHOW statements, databases, epochs, and the errors
//! (of the whole query and of one statement).

use crate::common::{self, TestServer};
use reqwest::Method;
use serde_json::{Value, json};

/// 2026-01-01T00:00:00Z in seconds.
const T0: i64 = 1_767_225_600;

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

async fn query(s: &TestServer, q: &str, extra: &str) -> common::Reply {
    s.send(Method::GET, &format!("/query?q={}{extra}", encode(q)), None, &[]).await
}

/// The results of a query that succeeds.
async fn results(s: &TestServer, q: &str, extra: &str) -> Value {
    let r = query(s, q, extra).await;
    assert_eq!(r.status, 200, "{q}: {}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-influxdb-version"), Some("1.8.10"));
    r.body["results"].clone()
}

/// The series of a one-statement query.
async fn series(s: &TestServer, q: &str, extra: &str) -> Value {
    let results = results(s, q, extra).await;
    assert_eq!(results.as_array().unwrap().len(), 1, "{q}: {results}");
    assert_eq!(results[0]["statement_id"], 0);
    assert!(results[0].get("error").is_none(), "{q}: {results}");
    results[0].get("series").cloned().unwrap_or(Value::Null)
}

/// The rows of a query answering one series.
async fn rows(s: &TestServer, q: &str) -> Value {
    let series = series(s, q, "").await;
    assert_eq!(series.as_array().map(Vec::len), Some(1), "{q}: {series}");
    series[0]["values"].clone()
}

/// A statement's error.
async fn statement_error(s: &TestServer, q: &str) -> String {
    let results = results(s, q, "").await;
    assert!(results[0].get("series").is_none(), "{q}: {results}");
    results[0]["error"].as_str().unwrap_or_else(|| panic!("{q}: {results}")).to_owned()
}

fn at(seconds: i64) -> String {
    let minutes = seconds.div_euclid(60);
    let (h, m, sec) = (minutes.div_euclid(60), minutes.rem_euclid(60), seconds.rem_euclid(60));
    if h < 0 {
        format!("2025-12-31T{:02}:{m:02}:{sec:02}Z", 24 + h)
    } else {
        format!("2026-01-01T{h:02}:{m:02}:{sec:02}Z")
    }
}

async fn server() -> TestServer {
    let s = TestServer::start().await;
    let lines = [
        format!("cpu,host=a,region=eu usage=1,idle=90 {T0}"),
        format!("cpu,host=a,region=eu usage=3,idle=80 {}", T0 + 30),
        format!("cpu,host=a,region=eu usage=5 {}", T0 + 60),
        format!("cpu,host=b,region=us usage=10,idle=50 {}", T0 + 10),
        format!("cpu,host=b,region=us usage=20 {}", T0 + 180),
        format!("mem,host=a used=42 {T0}"),
    ];
    let r = s.raw(Method::POST, "/write?precision=s", "text/plain", lines.join("\n")).await;
    assert_eq!(r.status, 204, "{}", r.body);
    s
}

/// The window of the GROUP BY time queries: [T0, T0 + 4m).
fn window() -> String {
    format!("time >= '{}' AND time < {}ms", at(0), (T0 + 240) * 1000)
}

#[tokio::test]
async fn raw_selects_merge_series_in_time_order_and_join_fields() {
    let s = server().await;
    let usage = json!([[at(0), 1], [at(10), 10], [at(30), 3], [at(60), 5], [at(180), 20]]);
    let got = series(&s, "SELECT usage FROM cpu", "").await;
    assert_eq!(got, json!([{"name": "cpu", "columns": ["time", "usage"], "values": usage}]));
    // `*`: fields and tags in name order; a field a point lacks is null
    let got = series(&s, "SELECT * FROM \"cpu\" WHERE \"host\" = 'a'", "").await;
    assert_eq!(
        got,
        json!([{"name": "cpu", "columns": ["time", "host", "idle", "region", "usage"], "values": [
            [at(0), "a", 90, "eu", 1], [at(30), "a", 80, "eu", 3], [at(60), "a", null, "eu", 5]]}])
    );
    assert_eq!(
        rows(&s, "SELECT usage AS u, idle, host FROM cpu WHERE host = 'b'").await,
        json!([[at(10), 10, 50, "b"], [at(180), 20, null, "b"]])
    );
    // epoch, ORDER BY time DESC, LIMIT and OFFSET
    let got = series(&s, "SELECT usage FROM cpu ORDER BY time DESC LIMIT 2 OFFSET 1", "&epoch=ms").await;
    assert_eq!(got[0]["values"], json!([[(T0 + 60) * 1000, 5], [(T0 + 30) * 1000, 3]]));
    let got = series(&s, "SELECT usage FROM cpu LIMIT 1", "&epoch=s").await;
    assert_eq!(got[0]["values"], json!([[T0, 1]]));
    for (epoch, t) in [("ns", T0 * 1_000_000_000), ("u", T0 * 1_000_000), ("m", T0 / 60), ("h", T0 / 3600)] {
        let got = series(&s, "SELECT usage FROM cpu LIMIT 1", &format!("&epoch={epoch}")).await;
        assert_eq!(got[0]["values"][0][0], t, "{epoch}");
    }
    // a measurement or field that does not exist: no series
    assert_eq!(series(&s, "SELECT usage FROM nothing", "").await, Value::Null);
    assert_eq!(series(&s, "SELECT nothing FROM cpu", "").await, Value::Null);
    // a JSON-written metric is field `value` of its measurement
    let (st, _) =
        s.post("/v1/timeseries/temp/points", json!({"points": [{"entity": "", "ts": 0, "value": 21.5}]})).await;
    assert_eq!(st, 200);
    assert_eq!(rows(&s, "SELECT value FROM temp").await, json!([["1970-01-01T00:00:00Z", 21.5]]));
}

#[tokio::test]
async fn each_aggregate_over_every_series() {
    let s = server().await;
    // usage: 1, 3, 5, 10, 20
    let got = rows(
        &s,
        "SELECT mean(usage), sum(usage), count(usage), min(usage), max(usage), first(usage), last(usage), \
         median(usage), spread(usage), stddev(usage) FROM cpu",
    )
    .await;
    let row = got[0].as_array().unwrap();
    assert_eq!(row[..10], json!(["1970-01-01T00:00:00Z", 7.8, 39, 5, 1, 20, 1, 20, 5, 19]).as_array().unwrap()[..]);
    assert!((row[10].as_f64().unwrap() - (230.8f64 / 4.0).sqrt()).abs() < 1e-9, "{row:?}");
    let cols = series(&s, "SELECT mean(usage), max(usage) AS top, mean(idle) FROM cpu", "").await[0]["columns"].clone();
    assert_eq!(cols, json!(["time", "mean", "top", "mean_1"]));
    // a lone selector reports its point's time; with a time range, others report its start
    assert_eq!(rows(&s, "SELECT max(usage) FROM cpu").await, json!([[at(180), 20]]));
    assert_eq!(rows(&s, "SELECT first(usage) FROM cpu WHERE host = 'b'").await, json!([[at(10), 10]]));
    assert_eq!(rows(&s, &format!("SELECT sum(usage) FROM cpu WHERE {}", window())).await, json!([[at(0), 39]]));
    assert_eq!(rows(&s, "SELECT median(usage) FROM cpu WHERE host = 'a'").await, json!([["1970-01-01T00:00:00Z", 3]]));
    // stddev of one point is null; agg(*) is every field
    assert_eq!(rows(&s, "SELECT stddev(used) FROM mem").await, json!([["1970-01-01T00:00:00Z", null]]));
    let got = series(&s, "SELECT count(*) FROM cpu", "").await;
    assert_eq!(got[0]["columns"], json!(["time", "count_idle", "count_usage"]));
    assert_eq!(got[0]["values"], json!([["1970-01-01T00:00:00Z", 3, 5]]));
}

#[tokio::test]
async fn group_by_time_with_every_fill_and_an_offset() {
    let s = server().await;
    // minutes: {1, 10, 3}, {5}, {}, {20}
    let q = |rest: &str| format!("SELECT mean(usage) FROM cpu WHERE {} GROUP BY time(1m) {rest}", window());
    let first = 14.0 / 3.0;
    assert_eq!(rows(&s, &q("")).await, json!([[at(0), first], [at(60), 5], [at(120), null], [at(180), 20]]));
    assert_eq!(rows(&s, &q("fill(null)")).await, rows(&s, &q("")).await);
    assert_eq!(rows(&s, &q("fill(none)")).await, json!([[at(0), first], [at(60), 5], [at(180), 20]]));
    assert_eq!(rows(&s, &q("fill(previous)")).await, json!([[at(0), first], [at(60), 5], [at(120), 5], [at(180), 20]]));
    assert_eq!(
        rows(&s, &q("fill(linear)")).await,
        json!([[at(0), first], [at(60), 5], [at(120), 12.5], [at(180), 20]])
    );
    assert_eq!(rows(&s, &q("fill(-1)")).await, json!([[at(0), first], [at(60), 5], [at(120), -1], [at(180), 20]]));
    assert_eq!(rows(&s, &q("fill(0) ORDER BY time DESC LIMIT 2")).await, json!([[at(180), 20], [at(120), 0]]));
    let counts = format!("SELECT count(usage), max(usage) FROM cpu WHERE {} GROUP BY time(1m)", window());
    assert_eq!(rows(&s, &counts).await, json!([[at(0), 3, 10], [at(60), 1, 5], [at(120), 0, null], [at(180), 1, 20]]));
    // intervals start 30 s past the minute: the first one before the window's start
    let offset = format!("SELECT mean(usage) FROM cpu WHERE {} GROUP BY time(1m, 30s)", window());
    assert_eq!(
        rows(&s, &offset).await,
        json!([[at(-30), 5.5], [at(30), 4], [at(90), null], [at(150), 20], [at(210), null]])
    );
    let got = series(&s, &q(""), "&epoch=s").await;
    assert_eq!(got[0]["values"][1], json!([T0 + 60, 5]));
}

#[tokio::test]
async fn group_by_tags_and_conditions_on_tags_and_time() {
    let s = server().await;
    let got = series(&s, "SELECT mean(usage) FROM cpu GROUP BY host", "").await;
    assert_eq!(
        got,
        json!([
            {"name": "cpu", "tags": {"host": "a"}, "columns": ["time", "mean"], "values": [["1970-01-01T00:00:00Z", 3]]},
            {"name": "cpu", "tags": {"host": "b"}, "columns": ["time", "mean"], "values": [["1970-01-01T00:00:00Z", 15]]}
        ])
    );
    let q = format!("SELECT max(usage) FROM cpu WHERE {} GROUP BY time(2m), * fill(none)", window());
    let got = series(&s, &q, "").await;
    assert_eq!(got[0]["tags"], json!({"host": "a", "region": "eu"}));
    assert_eq!(got[0]["values"], json!([[at(0), 5]]));
    assert_eq!(got[1]["tags"], json!({"host": "b", "region": "us"}));
    assert_eq!(got[1]["values"], json!([[at(0), 10], [at(120), 20]]));
    // a tag no series has: one group, its value empty
    let got = series(&s, "SELECT count(usage) FROM cpu GROUP BY dc", "").await;
    assert_eq!(got[0]["tags"], json!({"dc": ""}));
    // raw rows grouped; SLIMIT and SOFFSET pick groups
    let got = series(&s, "SELECT usage FROM cpu GROUP BY host SLIMIT 1 SOFFSET 1", "").await;
    assert_eq!(
        got,
        json!([{"name": "cpu", "tags": {"host": "b"}, "columns": ["time", "usage"], "values": [[at(10), 10], [at(180), 20]]}])
    );
    for (cond, want) in [
        ("host != 'a'", json!([10, 20])),
        ("host <> 'a'", json!([10, 20])),
        ("host =~ /^(a|b)$/ AND region = 'us'", json!([10, 20])),
        ("host !~ /a/", json!([10, 20])),
        ("region =~ /u/", json!([1, 10, 3, 5, 20])),
        ("(host = 'a' OR region = 'us') AND time < '2026-01-01T00:01:00Z'", json!([1, 10, 3])),
        ("time > '2026-01-01T00:00:10Z' AND time <= 1767225660s", json!([3, 5])),
        ("time = 1767225630000000000", json!([3])),
        ("'2026-01-01T00:02:00Z' < time", json!([20])),
        ("time >= now() - 1d", json!(null)),
        ("host = 'c'", json!(null)),
    ] {
        let got = series(&s, &format!("SELECT usage FROM cpu WHERE {cond}"), "").await;
        let values = got.get(0).map(|g| Value::from_iter(g["values"].as_array().unwrap().iter().map(|r| r[1].clone())));
        assert_eq!(values.unwrap_or(Value::Null), want, "{cond}");
    }
    // two measurements: one series each
    let got = series(&s, "SELECT count(usage), count(used) FROM cpu, mem", "").await;
    assert_eq!(got[0]["name"], "cpu");
    assert_eq!(got[0]["values"], json!([["1970-01-01T00:00:00Z", 5, null]]));
    assert_eq!(got[1]["name"], "mem");
    assert_eq!(got[1]["values"], json!([["1970-01-01T00:00:00Z", null, 1]]));
}

#[tokio::test]
async fn show_statements_list_what_dashboards_offer() {
    let s = server().await;
    assert_eq!(s.post("/v1/databases", json!({"name": "shop"})).await.0, 201);
    let list = |name: &str, column: &str, values: Value| json!([{"name": name, "columns": [column], "values": values}]);
    assert_eq!(series(&s, "SHOW DATABASES", "").await, list("databases", "name", json!([["default"], ["shop"]])));
    assert_eq!(series(&s, "SHOW MEASUREMENTS", "").await, list("measurements", "name", json!([["cpu"], ["mem"]])));
    let got = series(&s, "SHOW MEASUREMENTS WITH MEASUREMENT =~ /^c/ LIMIT 10", "").await;
    assert_eq!(got, list("measurements", "name", json!([["cpu"]])));
    let got = series(&s, "SHOW MEASUREMENTS WHERE host = 'a' LIMIT 1 OFFSET 1", "").await;
    assert_eq!(got, list("measurements", "name", json!([["mem"]])));
    assert_eq!(series(&s, "SHOW TAG KEYS FROM cpu", "").await, list("cpu", "tagKey", json!([["host"], ["region"]])));
    let got = series(&s, "SHOW TAG KEYS", "").await;
    assert_eq!(got[1], list("mem", "tagKey", json!([["host"]]))[0]);
    let got = series(&s, "SHOW TAG VALUES FROM cpu WITH KEY = \"host\"", "").await;
    assert_eq!(got, json!([{"name": "cpu", "columns": ["key", "value"], "values": [["host", "a"], ["host", "b"]]}]));
    let got =
        series(&s, "SHOW TAG VALUES FROM \"cpu\" WITH KEY IN (\"host\", \"region\") WHERE region = 'us'", "").await;
    assert_eq!(got[0]["values"], json!([["host", "b"], ["region", "us"]]));
    let got = series(&s, "SHOW TAG VALUES WITH KEY =~ /reg/", "").await;
    assert_eq!(got[0]["values"], json!([["region", "eu"], ["region", "us"]]));
    let got = series(&s, "SHOW FIELD KEYS FROM cpu", "").await;
    assert_eq!(
        got,
        json!([{"name": "cpu", "columns": ["fieldKey", "fieldType"], "values": [["idle", "float"], ["usage", "float"]]}])
    );
    let got = series(&s, "SHOW SERIES", "").await;
    assert_eq!(
        got,
        json!([{"columns": ["key"], "values": [["cpu,host=a,region=eu"], ["cpu,host=b,region=us"], ["mem,host=a"]]}])
    );
    let got = series(&s, "SHOW SERIES FROM cpu WHERE host = 'b'", "").await;
    assert_eq!(got[0]["values"], json!([["cpu,host=b,region=us"]]));
    let got = series(&s, "SHOW RETENTION POLICIES ON \"default\"", "").await;
    assert_eq!(got[0]["values"], json!([["autogen", "0s", "168h0m0s", 1, true]]));
    // several statements, each its own result
    let got = results(&s, "SHOW MEASUREMENTS; SELECT count(used) FROM mem; SELECT * FROM none", "").await;
    assert_eq!(
        got[1],
        json!({"statement_id": 1, "series": [{"name": "mem", "columns": ["time", "count"], "values": [["1970-01-01T00:00:00Z", 1]]}]})
    );
    assert_eq!(got[2], json!({"statement_id": 2}));
}

#[tokio::test]
async fn databases_forms_and_pretty_answers() {
    let s = server().await;
    assert_eq!(s.post("/v1/databases", json!({"name": "shop"})).await.0, 201);
    let r = s.raw(Method::POST, "/write?db=shop&precision=s", "text/plain", "disk,host=x free=7 1767225600").await;
    assert_eq!(r.status, 204);
    let got = series(&s, "SHOW MEASUREMENTS ON \"shop\"", "&db=shop").await;
    assert_eq!(got[0]["values"], json!([["disk"]]));
    assert_eq!(series(&s, "SELECT free FROM disk", "&db=shop").await[0]["values"], json!([[at(0), 7]]));
    assert_eq!(series(&s, "SELECT free FROM disk", "&db=default").await, Value::Null);
    // a form-encoded body, its parameters over the query string's
    let body = format!("q={}&db=shop", encode("SELECT free FROM disk"));
    let r = s.raw(Method::POST, "/query?epoch=s&db=default", "application/x-www-form-urlencoded", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["results"][0]["series"][0]["values"], json!([[T0, 7]]));
    let r = s.raw(Method::POST, "/query", "application/x-www-form-urlencoded", "q=SHOW+DATABASES&db=nowhere").await;
    assert!(r.is_influx_v1_error(404, "database_not_found"), "{}", r.body);
    let r = s.send(Method::GET, "/query?q=SHOW%20DATABASES&pretty=true", None, &[]).await;
    assert_eq!(r.status, 200);
    let text =
        reqwest::get(format!("{}/query?q=SHOW%20DATABASES&pretty=true", s.base)).await.unwrap().text().await.unwrap();
    assert!(text.contains("\n  \"results\""), "{text}");
}

#[tokio::test]
async fn errors_of_the_query_and_of_one_statement() {
    let s = server().await;
    for (q, extra, says) in [
        ("SELECT FROM cpu", "", "error parsing query: "),
        ("SELECT usage FROM cpu; DROP DATABASE x", "", "SELECT or SHOW"),
        ("SELECT usage FROM cpu", "&epoch=years", "epoch"),
        ("SELECT usage FROM cpu", "&chunked=true", "chunked"),
        ("", "", "missing required parameter \"q\""),
    ] {
        let r = query(&s, q, extra).await;
        assert!(r.is_influx_v1_error(400, "invalid_request"), "{q}: {}", r.body);
        assert!(r.body["error"].as_str().unwrap().contains(says), "{q}: {}", r.body);
    }
    let r = query(&s, "SHOW DATABASES", "&db=nowhere").await;
    assert!(r.is_influx_v1_error(404, "database_not_found"), "{}", r.body);
    assert_eq!(r.body["error"], "database \"nowhere\" does not exist");
    for (q, says) in [
        ("SELECT usage FROM cpu WHERE usage > 5", "conditions on fields"),
        ("SELECT usage, mean(idle) FROM cpu", "mixing aggregate"),
        ("SELECT usage FROM cpu GROUP BY time(1m)", "needs an aggregate"),
        ("SELECT usage FROM cpu WHERE host = 5", "tag values are strings"),
        ("SELECT usage FROM cpu WHERE time > now() - 1h OR host = 'a'", "only be joined with AND"),
        ("SELECT mean(usage) FROM cpu WHERE time >= 0 GROUP BY time(1s)", "more than 100000 GROUP BY time intervals"),
        ("SELECT usage FROM cpu LIMIT 1 OFFSET 100001", "OFFSET is at most 100000"),
        // the interval holding the earliest times would start before the earliest time: refused,
        // not answered with intervals off the grid
        (
            "SELECT mean(usage) FROM cpu WHERE time >= '1677-09-21T00:12:44Z' AND time < '1677-09-21T03:00:00Z' \
             GROUP BY time(1h)",
            "narrow the time range",
        ),
        ("SHOW MEASUREMENTS ON shop", "ON \"shop\": this query reads the database \"default\""),
        (
            "SELECT mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), \
             mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), mean(usage), \
             mean(usage), mean(usage), mean(usage), mean(usage), mean(usage) FROM cpu WHERE time >= 0 GROUP BY time(1s)",
            "more than 2000000 values",
        ),
    ] {
        assert!(statement_error(&s, q).await.contains(says), "{q}");
    }
    // the other statements still answer
    let got = results(&s, "SELECT usage FROM cpu WHERE usage > 5; SELECT count(usage) FROM cpu", "").await;
    assert!(got[0]["error"].is_string());
    assert_eq!(got[1]["series"][0]["values"], json!([["1970-01-01T00:00:00Z", 5]]));
}

#[tokio::test]
async fn answers_are_bounded_in_rows() {
    let s = TestServer::start().await;
    let lines: Vec<String> = (0..100_001).map(|i| format!("big value={i} {i}")).collect();
    let r = s.raw(Method::POST, "/write", "text/plain", lines.join("\n")).await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert!(statement_error(&s, "SELECT value FROM big").await.contains("more than 100000 rows"));
    assert_eq!(
        rows(&s, "SELECT value FROM big ORDER BY time DESC LIMIT 1").await,
        json!([["1970-01-01T00:00:00.0001Z", 100000]])
    );
    assert_eq!(
        rows(&s, "SELECT count(value), sum(value) FROM big").await,
        json!([["1970-01-01T00:00:00Z", 100001, 5000050000u64]])
    );
}

#[tokio::test]
async fn keys_reach_query_with_the_read_role_and_their_databases_only() {
    let s = TestServer::start_with_keys(|_| {}).await;
    let read = common::bearer(common::READ_KEY);
    let r = s.send_as(None, Method::GET, "/query?q=SHOW%20DATABASES", None).await;
    assert!(r.is_influx_v1_error(401, "unauthenticated"), "{}", r.body);
    let r = s.send_as(Some(&read), Method::GET, "/query?q=SHOW%20DATABASES", None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["results"][0]["series"][0]["values"], json!([["default"]]));
}
