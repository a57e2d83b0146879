//! Heavy reads under their bounds: a PromQL window over a big series answers in a bound (the
//! window slides) or is refused by the memory budget; a query whose client left stops its work;
//! heavy reads past the places of their class (`--max-heavy-reads`) get 503 with `Retry-After`;
//! an InfluxQL query past the memory budget gets 422 while one within it answers.

use crate::common::{self, TestServer};
use reqwest::Method;
use std::time::{Duration, Instant};

/// The first point's time, Unix seconds.
const T0: i64 = 1_700_000_000;

/// Writes `points` points of a counter `big` (one a second, rising by 1) in batches.
async fn big_series(s: &TestServer, points: i64) {
    let mut start = 0;
    while start < points {
        let end = (start + 20_000).min(points);
        let body: String = (start..end).map(|i| format!("big value={i} {}\n", T0 + i)).collect();
        let r = s.raw(Method::POST, "/v1/timeseries/write?precision=s", "text/plain", body).await;
        assert_eq!(r.status, 200, "{}", r.body);
        start = end;
    }
}

fn range_query(query: &str, points: i64, step: i64) -> String {
    format!("/api/v1/query_range?query={}&start={T0}&end={}&step={step}", common::seg(query), T0 + points)
}

/// The CPU time this process has used (user and system), from /proc.
#[cfg(target_os = "linux")]
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // the fields after the command's closing parenthesis: utime and stime are the 12th and 13th
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // USER_HZ is 100 on every Linux this runs on
    Duration::from_millis(ticks * 10)
}

/// The value of a matrix series at time `t` (Unix seconds).
fn at(values: &[serde_json::Value], t: i64) -> f64 {
    let pair = values.iter().find(|p| p[0].as_i64() == Some(t)).unwrap_or_else(|| panic!("no value at {t}"));
    pair[1].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_week_long_window_over_a_big_series_answers_within_a_bound() {
    let s = TestServer::start().await;
    let points = 60_000;
    big_series(&s, points).await;
    // ~12 000 steps would be over the limit: 10 000 steps, each window holding every point
    // before it (steps × window points = 3·10⁸ samples gone over the old way)
    let began = Instant::now();
    let (status, body) = s.get(&range_query("rate(big[7d])", points, 6)).await;
    let took = began.elapsed();
    assert_eq!(status, 200, "{body}");
    let values = body["data"]["result"][0]["values"].as_array().unwrap();
    // every step but the first, whose window holds one point
    assert_eq!(values.len(), 10_000);
    // a counter rising by one a second, over a window of 7 days holding t seconds of it: the
    // increase is t (no extrapolation past the first sample, which is the counter's zero), per
    // second of the window
    let t = T0 + 30_000;
    let v = at(values, t);
    let expected = (t - T0) as f64 / (7.0 * 86_400.0);
    assert!((v - expected).abs() <= 1e-9 * expected, "{v} != {expected}");
    assert!(took < Duration::from_secs(30), "the query took {took:?}");
    // each *_over_time answers as the whole window would
    for (func, at_5000) in [
        ("count_over_time", 30_001.0),
        ("sum_over_time", (0..=30_000).map(f64::from).sum::<f64>()),
        ("avg_over_time", 15_000.0),
        ("min_over_time", 0.0),
        ("max_over_time", 30_000.0),
        ("last_over_time", 30_000.0),
    ] {
        let (status, body) = s.get(&range_query(&format!("{func}(big[7d])"), points, 6)).await;
        assert_eq!(status, 200, "{func}: {body}");
        let v = at(body["data"]["result"][0]["values"].as_array().unwrap(), T0 + 30_000);
        assert!((v - at_5000).abs() <= 1e-9 * at_5000.max(1.0), "{func}: {v} != {at_5000}");
    }
}

#[tokio::test]
async fn a_query_past_the_memory_budget_is_refused_at_once() {
    let s = TestServer::start_with(|c| c.options.max_query_bytes = 512 << 10).await;
    let points = 40_000;
    big_series(&s, points).await;
    // 40 000 points of 16 bytes: over half a MiB
    let began = Instant::now();
    let r = s.send(Method::GET, &range_query("rate(big[7d])", points, 4), None, &[]).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["errorType"], "execution");
    assert_eq!(r.body["code"], "query_too_large");
    assert!(r.body["error"].as_str().unwrap().contains("--max-query-memory-mb"), "{}", r.body);
    assert!(began.elapsed() < Duration::from_secs(30));
    // a query within the budget still answers
    let (status, body) = s.get(&format!("/api/v1/query?query=big&time={}", T0 + 100)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"][0]["value"][1], "100");
}

/// A query reading the series ten times: long enough to outlast its impatient clients.
const SLOW: &str = "count_over_time(big[30d]) + count_over_time(big[30d] offset 1s) + count_over_time(big[30d] offset 2s) \
    + count_over_time(big[30d] offset 3s) + count_over_time(big[30d] offset 4s) + count_over_time(big[30d] offset 5s) \
    + count_over_time(big[30d] offset 6s) + count_over_time(big[30d] offset 7s) + count_over_time(big[30d] offset 8s) \
    + count_over_time(big[30d] offset 9s)";

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_query_whose_client_left_stops_its_work() {
    // no merge task packing the points while the CPU time is measured
    let s = TestServer::start_with(|c| c.tasks.merge_interval = Duration::from_secs(3600)).await;
    let points = 100_000;
    big_series(&s, points).await;
    let path = format!("{}/api/v1/query?query={}&time={}", s.base, common::seg(SLOW), T0 + points);
    // how long one takes, whole
    let (cpu, began) = (cpu_time(), Instant::now());
    let r = s.client.get(&path).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let (whole_cpu, whole) = (cpu_time() - cpu, began.elapsed());
    // four clients that give up after 50 ms
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(50)).build().unwrap();
    let gone = futures_util::future::join_all((0..4).map(|_| impatient.get(&path).send())).await;
    assert!(gone.iter().all(Result::is_err), "a query answered within 50 ms: the test needs a slower one");
    // what the server burns from 200 ms after they left: their work has stopped by then
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cpu = cpu_time();
    tokio::time::sleep(whole.max(Duration::from_millis(500))).await;
    let after = cpu_time() - cpu;
    assert!(
        after < whole_cpu.mul_f64(2.0).min(whole_cpu + Duration::from_millis(400)),
        "{after:?} of CPU after the clients left (one query takes {whole_cpu:?}, four would take four times that)"
    );
}

#[tokio::test]
async fn heavy_reads_past_their_places_are_refused_with_retry_after() {
    let s = TestServer::start_with(|c| {
        c.limits.heavy_reads.per_class = 1;
        c.limits.heavy_reads.wait = Duration::from_millis(20);
    })
    .await;
    let points = 100_000;
    big_series(&s, points).await;
    let path = format!("/api/v1/query?query={}&time={}", common::seg(SLOW), T0 + points);
    let replies = futures_util::future::join_all((0..4).map(|_| s.send(Method::GET, &path, None, &[]))).await;
    let ok = replies.iter().filter(|r| r.status == 200).count();
    let refused: Vec<_> = replies.iter().filter(|r| r.status == 503).collect();
    assert!(ok >= 1, "{:?}", replies.iter().map(|r| &r.body).collect::<Vec<_>>());
    assert!(!refused.is_empty(), "four slow queries at once, one place: some must be refused");
    assert_eq!(ok + refused.len(), 4);
    for r in &refused {
        assert_eq!(r.header("retry-after"), Some("1"));
        assert_eq!(r.body["errorType"], "unavailable");
        assert_eq!(r.body["code"], "too_many_heavy_reads");
    }
    // the places of another class are its own
    let r = s.send(Method::GET, &format!("/query?q={}", common::seg("SELECT count(value) FROM big")), None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // the refusals are counted, by class
    let text = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    let refused_line = format!("mosaicdb_heavy_reads_refused_total{{class=\"promql\"}} {}", refused.len());
    assert!(text.contains(&refused_line), "{refused_line} not in the metrics");
    assert!(text.contains("mosaicdb_heavy_reads_running{class=\"promql\"} 0"));
}

#[tokio::test]
async fn an_influxql_query_past_the_memory_budget_is_refused() {
    let s = TestServer::start_with(|c| c.options.max_query_bytes = 1 << 20).await;
    // 20 fields, a point a second for 2000 s
    let body: String = (0..2000)
        .map(|i| {
            let fields: Vec<String> = (0..20).map(|f| format!("f{f}={}", i * f)).collect();
            format!("m,host=a {} {}\n", fields.join(","), T0 + i)
        })
        .collect();
    let r = s.raw(Method::POST, "/write?precision=s", "text/plain", body).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let q = |text: &str| {
        format!("/query?q={}", common::seg(&format!("{text} WHERE time >= {T0}s AND time < {}s", T0 + 2000)))
    };
    // 2000 intervals × 20 columns of aggregate state, and every value for the medians: over 1 MiB
    let r = s.send(Method::GET, &q("SELECT median(*) FROM m"), None, &[]).await;
    assert_eq!(r.status, 200, "one interval only: {}", r.body);
    let grouped = format!(
        "/query?q={}",
        common::seg(&format!(
            "SELECT median(*) FROM m WHERE time >= {T0}s AND time < {}s GROUP BY time(1s)",
            T0 + 2000
        ))
    );
    let r = s.send(Method::GET, &grouped, None, &[]).await;
    assert!(r.is_influx_v1_error(422, "query_too_large"), "{} {}", r.status, r.body);
    assert!(r.body["error"].as_str().unwrap().contains("--max-query-memory-mb"), "{}", r.body);
    // within the budget: the same query over 100 seconds
    let small = format!(
        "/query?q={}",
        common::seg(&format!(
            "SELECT median(f3) FROM m WHERE time >= {T0}s AND time < {}s GROUP BY time(1s)",
            T0 + 100
        ))
    );
    let r = s.send(Method::GET, &small, None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let values = r.body["results"][0]["series"][0]["values"].as_array().unwrap();
    assert_eq!(values.len(), 100);
    assert_eq!(values[7][1], 21.0);
}
