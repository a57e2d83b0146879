//! The Prometheus query API against Prometheus itself (Debian's `prometheus` 2.42, which CI
//! installs with promtool): the same samples go into both — into Prometheus as blocks made by
//! `promtool tsdb create-blocks-from openmetrics`, into mosaicdb as line protocol — and the same
//! instant and range queries (every selector form, range function, aggregation and operator of
//! the subset) must answer alike: the same result type, series and times, values within 1e-9
//! (relative); and `promtool query` prints the same from both. Where `prometheus` or `promtool` is
//! missing, the test says so and is skipped.

use crate::common::TestServer;
use reqwest::Method;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The first sample's time, Unix seconds.
const T0: i64 = 1_700_000_000;
/// Samples per series.
const SAMPLES: i64 = 120;

/// A binary on the PATH (or in Debian's places), if there.
fn binary(name: &str) -> Option<PathBuf> {
    let from_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name));
    from_path.chain([Path::new("/usr/bin").join(name)]).find(|p| p.is_file())
}

/// A series: its metric, labels and samples as (unix seconds, value).
type Series = (&'static str, Vec<(&'static str, &'static str)>, Vec<(i64, f64)>);
/// An answer as compared: its result type and its series (labels as JSON text, samples).
type Normal = (String, Vec<(String, Vec<(f64, f64)>)>);

/// The series: (metric, labels, samples as (unix seconds, value)). Counters with irregular
/// intervals (10-20 s) and resets, and a gauge that goes negative, from a fixed seed.
fn series() -> Vec<Series> {
    let mut seed: u64 = 0x5eed_1234_abcd_0042;
    let mut next = move |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut out = Vec::new();
    for (host, region) in [("a", "eu"), ("b", "eu"), ("c", "us"), ("d", "us"), ("e", "ap")] {
        let (mut t, mut counter, mut gauge) = (T0 + next(10) as i64, next(100) as f64, 50.0);
        let (mut counts, mut gauges) = (Vec::new(), Vec::new());
        for _ in 0..SAMPLES {
            counts.push((t, counter));
            gauges.push((t, gauge));
            t += 10 + next(11) as i64;
            counter = if next(25) == 0 { next(5) as f64 } else { counter + next(50) as f64 + 0.25 };
            gauge += next(21) as f64 - 10.5;
        }
        out.push(("http_requests", vec![("host", host), ("region", region)], counts));
        out.push(("cpu_usage_idle", vec![("host", host), ("region", region)], gauges));
    }
    out
}

/// The samples as OpenMetrics text (one family after the other, as promtool wants them).
fn openmetrics() -> String {
    let mut text = String::new();
    for (metric, labels, samples) in series() {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        for (t, v) in samples {
            text.push_str(&format!("{metric}{{{}}} {v} {t}\n", labels.join(",")));
        }
    }
    text.push_str("# EOF\n");
    text
}

/// The samples as line protocol: `cpu_usage_idle` as the field `usage_idle` of `cpu`, which is
/// how Telegraf would have written it.
fn line_protocol() -> String {
    let mut text = String::new();
    for (metric, labels, samples) in series() {
        let tags: String = labels.iter().map(|(k, v)| format!(",{k}={v}")).collect();
        let (measurement, field) = match metric {
            "cpu_usage_idle" => ("cpu", "usage_idle"),
            m => (m, "value"),
        };
        for (t, v) in samples {
            text.push_str(&format!("{measurement}{tags} {field}={v} {t}\n"));
        }
    }
    text
}

/// Prometheus over a data directory of the samples' blocks; killed when dropped.
struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn start_prometheus(prometheus: &Path, promtool: &Path) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("samples.om");
    std::fs::write(&input, openmetrics()).unwrap();
    let data = dir.path().join("data");
    let made = Command::new(promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(&data)
        .output()
        .unwrap();
    assert!(made.status.success(), "promtool: {}", String::from_utf8_lossy(&made.stderr));
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, "global: {}\nscrape_configs: []\n").unwrap();
    let port = free_port();
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--storage.tsdb.retention.time=100y")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Prometheus { child, base: format!("http://127.0.0.1:{port}"), _dir: dir };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client.get(format!("{}/-/ready", p.base)).send().await.is_ok_and(|r| r.status() == 200);
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "prometheus did not become ready in 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    p
}

/// `data` with its series in label order and values as numbers.
fn normal(data: &Value) -> Normal {
    let kind = data["resultType"].as_str().unwrap_or_default().to_owned();
    let pair = |p: &Value| -> (f64, f64) {
        let v = match p[1].as_str().unwrap() {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            s => s.parse().unwrap(),
        };
        (p[0].as_f64().unwrap(), v)
    };
    let mut series: Vec<(String, Vec<(f64, f64)>)> = match kind.as_str() {
        "scalar" => vec![(String::new(), vec![pair(&data["result"])])],
        _ => data["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let points = match s.get("value") {
                    Some(v) => vec![pair(v)],
                    None => s["values"].as_array().unwrap().iter().map(pair).collect(),
                };
                (s["metric"].to_string(), points)
            })
            .collect(),
    };
    series.sort_by(|a, b| a.0.cmp(&b.0));
    (kind, series)
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

async fn ask(client: &reqwest::Client, base: &str, path: &str) -> Value {
    let r = client.request(Method::GET, format!("{base}{path}")).send().await.unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{base}{path}: {body}");
    body["data"].clone()
}

#[tokio::test]
async fn the_same_queries_answer_as_prometheus_does() {
    let (Some(prometheus), Some(promtool)) = (binary("prometheus"), binary("promtool")) else {
        eprintln!("the comparison with Prometheus is skipped: `prometheus` or `promtool` is not installed");
        return;
    };
    let prom = start_prometheus(&prometheus, &promtool).await;
    let s = TestServer::start().await;
    let r = s.raw(Method::POST, "/v1/timeseries/write?precision=s", "text/plain", line_protocol()).await;
    assert_eq!(r.status, 200, "{}", r.body);

    let selectors = [
        "http_requests",
        "http_requests{host=~\"a|b\"}",
        "http_requests{region!=\"eu\"}",
        "http_requests{host!~\"[ab].*\"}",
        "{__name__=~\"cpu_.*\",region=\"us\"}",
        "cpu_usage_idle offset 1m",
    ];
    let mut queries: Vec<String> = selectors.iter().map(|s| (*s).to_owned()).collect();
    for f in ["rate", "irate", "increase"] {
        for range in ["1m", "90s", "5m"] {
            queries.push(format!("{f}(http_requests[{range}])"));
        }
    }
    queries.push("rate(http_requests{region=\"eu\"}[2m] offset 30s)".into());
    for f in ["sum", "avg", "min", "max", "count", "last"] {
        queries.push(format!("{f}_over_time(cpu_usage_idle[2m])"));
        queries.push(format!("{f}_over_time(http_requests{{host=\"c\"}}[75s])"));
    }
    for op in ["sum", "avg", "min", "max", "count"] {
        queries.push(format!("{op}(cpu_usage_idle)"));
        queries.push(format!("{op} by (region) (http_requests)"));
        queries.push(format!("{op} without (host) (cpu_usage_idle)"));
    }
    queries.extend(
        [
            "sum by (region) (rate(http_requests[5m]))",
            "max without (region) (increase(http_requests[3m]))",
            "http_requests * 2 + 1",
            "100 - cpu_usage_idle",
            "-cpu_usage_idle / 4",
            "http_requests % 7",
            "2 ^ cpu_usage_idle{host=\"a\"}",
            "(2 ^ 3 - 1) / 4",
            "sum(http_requests) / count(http_requests)",
            "rate(http_requests[5m]) / on (host, region) cpu_usage_idle",
            "cpu_usage_idle - ignoring (region) cpu_usage_idle offset 1m",
            "sum by (region) (http_requests) * on (region) max by (region) (cpu_usage_idle)",
        ]
        .map(String::from),
    );
    let span = SAMPLES * 20;
    let times = [T0 + 5, T0 + 61, T0 + 600, T0 + span / 2 + 7, T0 + span + 100];
    let client = reqwest::Client::new();
    let mut compared = 0;
    let enc = |q: &str| crate::common::seg(q);
    for q in &queries {
        let mut paths: Vec<String> = times.iter().map(|t| format!("/api/v1/query?query={}&time={t}", enc(q))).collect();
        for (start, end, step) in [(T0 - 60, T0 + span + 400, "30"), (T0 + 3, T0 + 700, "17s"), (T0, T0 + span, "1m")] {
            paths.push(format!("/api/v1/query_range?query={}&start={start}&end={end}&step={step}", enc(q)));
        }
        for path in paths {
            let want = normal(&ask(&client, &prom.base, &path).await);
            let got = normal(&ask(&client, &s.base, &path).await);
            assert_eq!(got.0, want.0, "{path}: result type");
            let labels = |r: &(String, Vec<(f64, f64)>)| r.1.iter().map(|p| p.0).collect::<Vec<_>>();
            assert_eq!(
                got.1.iter().map(|r| (&r.0, labels(r))).collect::<Vec<_>>(),
                want.1.iter().map(|r| (&r.0, labels(r))).collect::<Vec<_>>(),
                "{path}: series and times"
            );
            for (g, w) in got.1.iter().zip(&want.1) {
                for (gp, wp) in g.1.iter().zip(&w.1) {
                    assert!(same(gp.1, wp.1), "{path}: {} at {}: mosaicdb {} Prometheus {}", g.0, gp.0, gp.1, wp.1);
                }
            }
            compared += 1;
        }
    }
    // an instant query of a range selector: the raw samples
    let path = format!("/api/v1/query?query={}&time={}", enc("http_requests{host=\"b\"}[2m]"), T0 + 300);
    assert_eq!(normal(&ask(&client, &s.base, &path).await), normal(&ask(&client, &prom.base, &path).await));
    // the listings
    for path in [
        format!("/api/v1/series?match[]={}", enc("http_requests{region=\"eu\"}")),
        "/api/v1/labels".to_owned(),
        "/api/v1/label/__name__/values".to_owned(),
        format!("/api/v1/label/host/values?match[]={}", enc("cpu_usage_idle{region=\"us\"}")),
    ] {
        let mut want = ask(&client, &prom.base, &path).await;
        let mut got = ask(&client, &s.base, &path).await;
        for v in [&mut want, &mut got] {
            v.as_array_mut().unwrap().sort_by_key(|x| x.to_string());
        }
        assert_eq!(got, want, "{path}");
    }
    eprintln!("{compared} queries answered as Prometheus answers them");
    // promtool, a client of the API, reads mosaicdb's answers as it reads Prometheus'
    let instant = format!("--time={}", T0 + 300);
    let (start, end) = (format!("--start={T0}"), format!("--end={}", T0 + 3000));
    for args in [
        vec!["query", "instant", &instant, &s.base, "sum by (region) (http_requests)"],
        vec!["query", "series", "--match=cpu_usage_idle{host=\"a\"}", &start, &end, &s.base],
        vec!["query", "labels", &start, &end, &s.base, "region"],
    ] {
        let out = Command::new(&promtool).args(&args).output().unwrap();
        let want = Command::new(&promtool)
            .args(args.iter().map(|a| if *a == s.base { &prom.base } else { *a }))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        // the same lines (an instant vector of Prometheus comes in no set order)
        let lines = |bytes: &[u8]| {
            let mut lines: Vec<String> = String::from_utf8_lossy(bytes).lines().map(str::to_owned).collect();
            lines.sort();
            lines
        };
        assert_eq!(lines(&out.stdout), lines(&want.stdout), "{args:?}");
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
    let out = Command::new(&promtool).args(["query", "instant", &s.base, "topk(1, http_requests)"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("bad_data"));
}
