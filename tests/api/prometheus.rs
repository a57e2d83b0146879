//! The Prometheus query API over HTTP, on hand-built counters and gauges whose answers are
//! worked out by hand: selectors and matchers, the lookback, `offset`, each range function (a
//! counter reset included), each aggregation with `by`/`without`, arithmetic, range queries,
//! form POSTs, the listings, a database's own routes, and the errors in Prometheus' shape. The
//! same queries against a real Prometheus: `tests/process/prometheus.rs`.

use crate::common::{self, TestServer};
use reqwest::Method;
use serde_json::{Value, json};

/// The first sample's time, Unix seconds.
const T0: i64 = 1_700_000_000;

/// Counters every 15 s from T0 to T0 + 300 s: `a` rises by 10, `b` by 5 and resets to 0 at
/// T0 + 150, `c` by 2; a gauge `cpu.usage_idle` (a line-protocol field) for host a.
fn samples() -> String {
    let mut out = String::new();
    for i in 0..=20i64 {
        let t = T0 + i * 15;
        let b = if i < 10 { i * 5 } else { (i - 10) * 5 };
        out.push_str(&format!("http_requests,host=a,region=eu value={} {t}\n", i * 10));
        out.push_str(&format!("http_requests,host=b,region=eu value={b} {t}\n"));
        out.push_str(&format!("http_requests,host=c,region=us value={} {t}\n", i * 2));
        out.push_str(&format!("cpu,host=a,region=eu usage_idle={} {t}\n", 90 - i));
    }
    out
}

async fn server() -> TestServer {
    let s = TestServer::start().await;
    write(&s, "/v1").await;
    s
}

async fn write(s: &TestServer, prefix: &str) {
    let r = s.raw(Method::POST, &format!("{prefix}/timeseries/write?precision=s"), "text/plain", samples()).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

fn enc(text: &str) -> String {
    common::seg(text)
}

/// `GET /api/v1/query?query=…&time=…`: the answer's data.
async fn instant(s: &TestServer, query: &str, time: i64) -> Value {
    let (status, body) = s.get(&format!("/api/v1/query?query={}&time={time}", enc(query))).await;
    assert_eq!(status, 200, "{query}: {body}");
    assert_eq!(body["status"], "success");
    body["data"].clone()
}

/// The vector of an instant query as (labels, value) pairs.
async fn vector(s: &TestServer, query: &str, time: i64) -> Vec<(Value, f64)> {
    let data = instant(s, query, time).await;
    assert_eq!(data["resultType"], "vector", "{query}: {data}");
    data["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["value"][0], json!(time), "{query}");
            (r["metric"].clone(), r["value"][1].as_str().unwrap().parse::<f64>().unwrap())
        })
        .collect()
}

/// The single value of an instant query.
async fn one(s: &TestServer, query: &str, time: i64) -> f64 {
    let v = vector(s, query, time).await;
    assert_eq!(v.len(), 1, "{query}: {v:?}");
    v[0].1
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// A Prometheus error: status, shape and type.
async fn error(s: &TestServer, path: &str, status: u16, error_type: &str) -> String {
    let r = s.send(Method::GET, path, None, &[]).await;
    assert_eq!(r.status.as_u16(), status, "{path}: {}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"), "{path}");
    assert_eq!(r.body["status"], "error", "{path}");
    assert_eq!(r.body["errorType"], error_type, "{path}: {}", r.body);
    r.body["error"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn selectors_matchers_lookback_and_offset() {
    let s = server().await;
    let end = T0 + 300;
    let v = vector(&s, "http_requests{host=\"a\"}", end).await;
    assert_eq!(v, vec![(json!({"__name__": "http_requests", "host": "a", "region": "eu"}), 200.0)]);
    // the latest sample within 5 minutes, inclusive
    assert_eq!(one(&s, "http_requests{host=\"a\"}", end + 300).await, 200.0);
    assert_eq!(vector(&s, "http_requests{host=\"a\"}", end + 301).await, vec![]);
    assert_eq!(one(&s, "http_requests{host=\"a\"}", T0 + 20).await, 10.0);
    assert_eq!(vector(&s, "http_requests", T0 - 1).await, vec![]);
    // offset looks back
    assert_eq!(one(&s, "http_requests{host=\"a\"} offset 1m", end).await, 160.0);
    // matchers: regular expressions anchored at both ends, negations, the name as a label
    let hosts =
        |v: Vec<(Value, f64)>| v.into_iter().map(|(m, _)| m["host"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(hosts(vector(&s, "http_requests{region=~\"e.*\"}", end).await), ["a", "b"]);
    assert_eq!(hosts(vector(&s, "http_requests{region=~\"e\"}", end).await), Vec::<String>::new());
    assert_eq!(hosts(vector(&s, "http_requests{host!=\"a\"}", end).await), ["b", "c"]);
    assert_eq!(hosts(vector(&s, "http_requests{host!~\"a|b\"}", end).await), ["c"]);
    assert_eq!(hosts(vector(&s, "{__name__=~\"http_.*\",host=\"c\"}", end).await), ["c"]);
    assert_eq!(hosts(vector(&s, "{__name__=\"http_requests\",host=~\"[bc]\",region!=\"us\"}", end).await), ["b"]);
    // a line-protocol field is `{measurement}_{field}`
    let v = vector(&s, "cpu_usage_idle", end).await;
    assert_eq!(v, vec![(json!({"__name__": "cpu_usage_idle", "host": "a", "region": "eu"}), 70.0)]);
    // a range selector alone: its raw samples at their own times
    let data = instant(&s, "http_requests{host=\"a\"}[30s]", T0 + 30).await;
    assert_eq!(
        data,
        json!({"resultType": "matrix", "result": [{"metric": {"__name__": "http_requests", "host": "a", "region": "eu"},
            "values": [[T0, "0"], [T0 + 15, "10"], [T0 + 30, "20"]]}]})
    );
}

#[tokio::test]
async fn range_functions_with_counter_resets() {
    let s = server().await;
    let end = T0 + 300;
    // a window covering the samples exactly: no extrapolation
    assert_eq!(one(&s, "increase(http_requests{host=\"a\"}[5m])", end).await, 200.0);
    assert!(close(one(&s, "rate(http_requests{host=\"a\"}[5m])", end).await, 200.0 / 300.0));
    // b: 0..45, reset, 0..50 → 45 + 50
    assert_eq!(one(&s, "increase(http_requests{host=\"b\"}[5m])", end).await, 95.0);
    assert!(close(one(&s, "rate(http_requests{host=\"b\"}[5m])", end).await, 95.0 / 300.0));
    // extrapolation: samples 10..=40 at 15..=60 s of a window [10 s, 70 s]: 5 s and 10 s from
    // its edges, both under 1.1 intervals, so the increase of 30 over 45 s is stretched to 60 s
    let inc = one(&s, "increase(http_requests{host=\"a\"}[1m])", T0 + 70).await;
    assert!(close(inc, 30.0 * 60.0 / 45.0), "{inc}");
    // irate: the last two samples, the value alone after a reset
    assert_eq!(one(&s, "irate(http_requests{host=\"b\"}[1m])", T0 + 150).await, 0.0);
    assert!(close(one(&s, "irate(http_requests{host=\"b\"}[1m])", T0 + 165).await, 5.0 / 15.0));
    assert!(close(one(&s, "irate(http_requests{host=\"a\"}[1m])", T0 + 140).await, 10.0 / 15.0));
    // fewer than two samples: nothing
    assert_eq!(vector(&s, "rate(http_requests{host=\"a\"}[10s])", T0 + 20).await, vec![]);
    // the *_over_time family over samples 0, 10, 20, 30, 40
    let a = "http_requests{host=\"a\"}[1m]";
    for (f, want) in [("sum", 100.0), ("avg", 20.0), ("min", 0.0), ("max", 40.0), ("count", 5.0), ("last", 40.0)] {
        let v = vector(&s, &format!("{f}_over_time({a})"), T0 + 60).await;
        assert_eq!(v.len(), 1, "{f}");
        assert_eq!(v[0].1, want, "{f}");
        // only last_over_time keeps the name, as in Prometheus
        assert_eq!(v[0].0.get("__name__").is_some(), f == "last", "{f}: {:?}", v[0].0);
    }
    let rates = vector(&s, "rate(http_requests[5m])", end).await;
    assert_eq!(rates[0].0, json!({"host": "a", "region": "eu"}));
}

#[tokio::test]
async fn aggregations_by_and_without() {
    let s = server().await;
    let end = T0 + 300;
    // a = 200, b = 50, c = 40
    for (op, want) in [("sum", 290.0), ("avg", 290.0 / 3.0), ("min", 40.0), ("max", 200.0), ("count", 3.0)] {
        let v = vector(&s, &format!("{op}(http_requests)"), end).await;
        assert_eq!(v.len(), 1, "{op}");
        assert_eq!(v[0].0, json!({}), "{op}");
        assert!(close(v[0].1, want), "{op}: {}", v[0].1);
    }
    let v = vector(&s, "sum by (region) (http_requests)", end).await;
    assert_eq!(v, vec![(json!({"region": "eu"}), 250.0), (json!({"region": "us"}), 40.0)]);
    let v = vector(&s, "max without (host) (http_requests)", end).await;
    assert_eq!(v, vec![(json!({"region": "eu"}), 200.0), (json!({"region": "us"}), 40.0)]);
    let v = vector(&s, "count without (host, region) (http_requests)", end).await;
    assert_eq!(v, vec![(json!({}), 3.0)]);
    let v = vector(&s, "min by (region, host) (http_requests{region=\"eu\"})", end).await;
    assert_eq!(v[1], (json!({"host": "b", "region": "eu"}), 50.0));
    let v = vector(&s, "sum by (region) (rate(http_requests[5m]))", end).await;
    assert_eq!(v.len(), 2);
    assert!(close(v[0].1, 295.0 / 300.0) && close(v[1].1, 40.0 / 300.0), "{v:?}");
    let v = vector(&s, "avg by (nothing) (http_requests)", end).await;
    assert!(close(v[0].1, 290.0 / 3.0) && v[0].0 == json!({}));
}

#[tokio::test]
async fn arithmetic_and_scalars() {
    let s = server().await;
    let end = T0 + 300;
    let v = vector(&s, "http_requests{host=\"a\"} * 2 + 1", end).await;
    assert_eq!(v, vec![(json!({"host": "a", "region": "eu"}), 401.0)]);
    assert_eq!(one(&s, "1000 / http_requests{host=\"a\"}", end).await, 5.0);
    assert_eq!(one(&s, "-http_requests{host=\"a\"} % 7", end).await, -4.0);
    assert_eq!(one(&s, "sum(http_requests) / 10 - 2 ^ 2", end).await, 25.0);
    let data = instant(&s, "(2 ^ 3 - 1) * 2 / 4", end).await;
    assert_eq!(data, json!({"resultType": "scalar", "result": [end, "3.5"]}));
    assert_eq!(instant(&s, "1 / 0", end).await["result"][1], "+Inf");
    assert_eq!(instant(&s, "-1 / 0", end).await["result"][1], "-Inf");
    assert_eq!(instant(&s, "0 / 0", end).await["result"][1], "NaN");
    // fractional times: ms precision, written as Prometheus writes them
    let (_, body) = s.get(&format!("/api/v1/query?query=1.5&time={}.25", T0)).await;
    assert_eq!(body["data"]["result"], json!([T0 as f64 + 0.25, "1.5"]));
    let (_, body) = s.get("/api/v1/query?query=2&time=2023-11-14T22:13:20.5Z").await;
    assert_eq!(body["data"]["result"], json!([T0 as f64 + 0.5, "2"]));
}

#[tokio::test]
async fn range_queries_and_form_posts() {
    let s = server().await;
    let path = |q: &str, start: i64, end: i64, step: &str| {
        format!("/api/v1/query_range?query={}&start={start}&end={end}&step={step}", enc(q))
    };
    let (status, body) = s.get(&path("http_requests{host=\"a\"}", T0, T0 + 60, "30")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"status": "success", "data": {"resultType": "matrix", "result": [{"metric":
            {"__name__": "http_requests", "host": "a", "region": "eu"},
            "values": [[T0, "0"], [T0 + 30, "20"], [T0 + 60, "40"]]}]}})
    );
    // steps without a value are left out; a duration step
    let (_, body) = s.get(&path("http_requests{host=\"a\"}", T0 - 600, T0, "5m")).await;
    assert_eq!(body["data"]["result"][0]["values"], json!([[T0, "0"]]));
    // a scalar: one series without labels
    let (_, body) = s.get(&path("1 + 1", T0, T0 + 20, "10s")).await;
    assert_eq!(body["data"]["result"], json!([{"metric": {}, "values": [[T0, "2"], [T0 + 10, "2"], [T0 + 20, "2"]]}]));
    // rates at each step: b's reset at T0 + 150
    let (_, body) = s.get(&path("increase(http_requests{host=\"b\"}[30s])", T0 + 120, T0 + 180, "30")).await;
    let values: Vec<f64> = body["data"]["result"][0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(values, [10.0, 5.0, 10.0], "{body}");
    // Grafana's form POSTs (and a URL query beside them)
    let form = format!("query={}&start={T0}&end={}&step=30", enc("sum by (region) (http_requests)"), T0 + 30);
    let r = s.raw(Method::POST, "/api/v1/query_range", "application/x-www-form-urlencoded", form).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["data"]["result"],
        json!([{"metric": {"region": "eu"}, "values": [[T0, "0"], [T0 + 30, "30"]]},
               {"metric": {"region": "us"}, "values": [[T0, "0"], [T0 + 30, "4"]]}])
    );
    let form = format!("query={}", enc("count(http_requests)"));
    let r = s.raw(Method::POST, &format!("/api/v1/query?time={T0}"), "application/x-www-form-urlencoded", form).await;
    assert_eq!(r.body["data"]["result"], json!([{"metric": {}, "value": [T0, "3"]}]), "{}", r.body);
}

#[tokio::test]
async fn series_labels_and_label_values() {
    let s = server().await;
    let (status, body) = s.get(&format!("/api/v1/series?match[]={}", enc("http_requests{region=\"eu\"}"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"status": "success", "data": [
            {"__name__": "http_requests", "host": "a", "region": "eu"},
            {"__name__": "http_requests", "host": "b", "region": "eu"}]})
    );
    // several selectors: their union; a window without points: nothing
    let two = format!("match[]={}&match[]={}", enc("cpu_usage_idle"), enc("http_requests{host=\"c\"}"));
    let (_, body) = s.get(&format!("/api/v1/series?{two}")).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 2, "{body}");
    let (_, body) = s.get(&format!("/api/v1/series?{two}&start={}&end={}", T0 + 400, T0 + 500)).await;
    assert_eq!(body["data"], json!([]));
    let (_, body) = s.get("/api/v1/labels").await;
    assert_eq!(body["data"], json!(["__name__", "host", "region"]));
    let (_, body) = s.get("/api/v1/label/__name__/values").await;
    assert_eq!(body["data"], json!(["cpu_usage_idle", "http_requests"]));
    let (_, body) = s.get(&format!("/api/v1/label/host/values?match[]={}", enc("{region=\"us\"}"))).await;
    assert_eq!(body["data"], json!(["c"]));
    let r = s.raw(Method::POST, "/api/v1/labels", "application/x-www-form-urlencoded", "match[]=cpu_usage_idle").await;
    assert_eq!(r.body["data"], json!(["__name__", "host", "region"]));
    // an entity that is no tag set is the label `entity`
    let (status, _) = s
        .post("/v1/timeseries/temp/points", json!({"points": [{"entity": "sensor-1", "ts": T0 * 1000, "value": 21.5}]}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(vector(&s, "temp", T0).await, vec![(json!({"__name__": "temp", "entity": "sensor-1"}), 21.5)]);
}

#[tokio::test]
async fn each_database_has_its_own() {
    let s = TestServer::start().await;
    let (status, body) = s.post("/v1/databases", json!({"name": "metrics"})).await;
    assert_eq!(status, 201, "{body}");
    write(&s, "/v1/db/metrics").await;
    let q = format!("query={}&time={}", enc("sum(http_requests)"), T0 + 300);
    let (status, body) = s.get(&format!("/v1/db/metrics/api/v1/query?{q}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"], json!([{"metric": {}, "value": [T0 + 300, "290"]}]));
    // the default database has none of it
    let (_, body) = s.get(&format!("/api/v1/query?{q}")).await;
    assert_eq!(body["data"]["result"], json!([]));
    let r = s.send(Method::GET, &format!("/v1/db/nothing/api/v1/query?{q}"), None, &[]).await;
    assert_eq!((r.status.as_u16(), &r.body["errorType"]), (404, &json!("not_found")), "{}", r.body);
}

#[tokio::test]
async fn errors_in_prometheus_shape() {
    let s = server().await;
    let q = |text: &str| format!("/api/v1/query?query={}&time={T0}", enc(text));
    let e = error(&s, &q("sum(http_requests"), 400, "bad_data").await;
    assert!(e.contains("invalid parameter \"query\""), "{e}");
    for (query, names) in [
        ("abs(http_requests)", "abs()"),
        ("topk(2, http_requests)", "topk"),
        ("http_requests > 1", "\">\""),
        ("http_requests / on (host) group_left cpu_usage_idle", "group_left"),
        ("rate(http_requests[5m:1m])", "subquery"),
        ("http_requests @ 100", "@ modifier"),
        ("quantile_over_time(0.5, http_requests[1m])", "quantile_over_time()"),
        ("stddev(http_requests)", "stddev"),
    ] {
        let e = error(&s, &q(query), 400, "bad_data").await;
        assert!(e.contains(names) && e.contains("not supported"), "{query}: {e}");
    }
    let e = error(&s, "/api/v1/query", 400, "bad_data").await;
    assert!(e.contains("\"query\""), "{e}");
    let e = error(&s, "/api/v1/query?query=1&time=noon", 400, "bad_data").await;
    assert!(e.contains("\"time\""), "{e}");
    let range = |q: &str, start: &str, end: &str, step: &str| {
        format!("/api/v1/query_range?query={}&start={start}&end={end}&step={step}", enc(q))
    };
    let e = error(&s, &range("http_requests[1m]", "0", "60", "15"), 400, "bad_data").await;
    assert!(e.contains("range vector"), "{e}");
    let e = error(&s, &range("1", "0", "11001", "1"), 400, "bad_data").await;
    assert!(e.contains("11,000"), "{e}");
    assert!(error(&s, &range("1", "60", "0", "1"), 400, "bad_data").await.contains("before start"));
    assert!(error(&s, &range("1", "0", "60", "0"), 400, "bad_data").await.contains("zero or negative"));
    assert!(error(&s, &range("1", "0", "60", "-5"), 400, "bad_data").await.contains("zero or negative"));
    assert!(error(&s, &range("1", "0", "60", "NaN"), 400, "bad_data").await.contains("\"step\""));
    assert!(error(&s, &range("1", "0", "60", "5x"), 400, "bad_data").await.contains("\"step\""));
    assert!(error(&s, "/api/v1/query_range?query=1&start=0&end=60", 400, "bad_data").await.contains("\"step\""));
    assert!(error(&s, "/api/v1/series", 400, "bad_data").await.contains("match[]"));
    let e = error(&s, &format!("/api/v1/series?match[]={}", enc("sum(x)")), 400, "bad_data").await;
    assert!(e.contains("series selector"), "{e}");
    assert!(error(&s, "/api/v1/label/1x/values", 400, "bad_data").await.contains("label name"));
    let long = format!("http_requests{{host=\"{}\"}}", "a".repeat(20_000));
    let r = s.raw(Method::POST, "/api/v1/query", "application/x-www-form-urlencoded", format!("query={long}")).await;
    assert_eq!((r.status.as_u16(), &r.body["errorType"]), (400, &json!("bad_data")));
    let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    let r = s
        .raw(Method::POST, "/api/v1/query", "application/x-www-form-urlencoded", format!("query={}", enc(&deep)))
        .await;
    assert_eq!((r.status.as_u16(), &r.body["errorType"]), (400, &json!("bad_data")));
    // a function that drops the names apart: two series with one label set
    let (status, _) = s
        .post(
            "/v1/timeseries/http_errors/points",
            serde_json::json!({"points": [
        {"entity": "host=a,region=eu", "ts": T0 * 1000, "value": 1.0},
        {"entity": "host=a,region=eu", "ts": (T0 + 15) * 1000, "value": 2.0}]}),
        )
        .await;
    assert_eq!(status, 200);
    let e = error(
        &s,
        &q("rate({__name__=~\"http_.*\",host=\"a\"}[1m])").replace(&format!("time={T0}"), &format!("time={}", T0 + 30)),
        422,
        "execution",
    )
    .await;
    assert!(e.contains("same labelset") && e.contains("host=\"a\""), "{e}");
    assert_eq!(vector(&s, "http_requests{host=\"a\"} offset 1m", T0 + 30).await, vec![]);
    for huge in
        ["rate(http_requests[100000000y])", "http_requests offset 100000000y", "http_requests offset -100000000y"]
    {
        assert!(error(&s, &q(huge), 400, "bad_data").await.contains("292 years"), "{huge}");
    }
    assert_eq!(vector(&s, "rate(http_requests[200y])", T0 + 30).await.len(), 3);
    let chain = vec!["1"; 2000].join("*");
    let r = s
        .raw(Method::POST, "/api/v1/query", "application/x-www-form-urlencoded", format!("query={}", enc(&chain)))
        .await;
    assert_eq!((r.status.as_u16(), &r.body["errorType"]), (400, &json!("bad_data")));
}

#[tokio::test]
async fn a_query_over_its_sample_budget_is_refused_with_422() {
    let s = TestServer::start().await;
    // 500 series of one sample each: 500 × 11 000 steps of values is past 5 000 000
    let body: String = (0..500).map(|i| format!("wide,n=s{i} value={i} {T0}\n")).collect();
    let r = s.raw(Method::POST, "/v1/timeseries/write?precision=s", "text/plain", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let path = format!("/api/v1/query_range?query=wide&start={}&end={}&step=0.001", T0, T0 as f64 + 10.999);
    let e = error(&s, &path, 422, "execution").await;
    assert!(e.contains("too many samples"), "{e}");
    let r = s.send(Method::GET, &path, None, &[]).await;
    assert_eq!(r.body["code"], "query_too_large");
    // a narrower range is answered
    let path = format!("/api/v1/query_range?query=sum(wide)&start={T0}&end={}&step=1", T0 + 10);
    let (status, body) = s.get(&path).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"][0]["values"][0], json!([T0, "124750"]));
}
