//! Time series over HTTP against an in-process server (sync durability, the default):
//! - ingest of `MOSAIC_BENCH_POINTS` points (default 1 000 000) in bodies of 5 000 points, as
//!   InfluxDB line protocol (`POST /v1/timeseries/write`) and as JSON
//!   (`POST /v1/timeseries/{metric}/points`), sent by `MOSAIC_BENCH_CLIENTS` concurrent clients
//!   (default 4); bodies are built before the clock starts; 100 series (hosts);
//! - a 1-day / 1-minute `avg` aggregation over one series of 1 000 000 points (one every 86.4 ms
//!   of the day), `MOSAIC_BENCH_REPEATS` times (default 30): p50 and p99 latency.
//!
//! `MOSAIC_BENCH_ONLY` runs only scenarios whose name contains one of these comma-separated texts
//! (`lines`, `json`, `aggregate`); `MOSAIC_BENCH_DIR` sets where the data directories go. Run with
//! `cargo bench --bench timeseries`.

#[path = "support/mod.rs"]
mod support;

use std::time::Instant;
use support::{BoxError, client, percentile, start_server};

const BODY_POINTS: usize = 5_000;
const HOSTS: usize = 100;
/// 2025-11-21T00:00:00Z in ms
const DAY_START_MS: i64 = 1_763_683_200_000;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn wanted(name: &str) -> bool {
    match std::env::var("MOSAIC_BENCH_ONLY") {
        Ok(only) => only.split(',').any(|o| !o.is_empty() && name.contains(&o.to_lowercase())),
        Err(_) => true,
    }
}

/// Point `i` of the ingest: host `i % HOSTS`, one second apart per host.
fn point(i: usize) -> (usize, i64, f64) {
    let host = i % HOSTS;
    let ts = DAY_START_MS + (i / HOSTS) as i64 * 1000;
    (host, ts, (i % 1000) as f64 / 8.0)
}

fn line_bodies(points: usize) -> Vec<(String, &'static str)> {
    (0..points.div_ceil(BODY_POINTS))
        .map(|b| {
            let mut body = String::with_capacity(BODY_POINTS * 64);
            for i in b * BODY_POINTS..((b + 1) * BODY_POINTS).min(points) {
                let (host, ts, v) = point(i);
                body.push_str(&format!("cpu,host=h{host:03},region=eu value={v} {}\n", ts * 1_000_000));
            }
            (body, "text/plain")
        })
        .collect()
}

fn json_bodies(points: usize) -> Vec<(String, &'static str)> {
    (0..points.div_ceil(BODY_POINTS))
        .map(|b| {
            let pts: Vec<serde_json::Value> = (b * BODY_POINTS..((b + 1) * BODY_POINTS).min(points))
                .map(|i| {
                    let (host, ts, v) = point(i);
                    serde_json::json!({"entity": format!("host=h{host:03},region=eu"), "ts": ts, "value": v})
                })
                .collect();
            (serde_json::json!({ "points": pts }).to_string(), "application/json")
        })
        .collect()
}

/// Sends every body with `clients` concurrent senders; returns points per second.
async fn ingest(
    url: String,
    bodies: Vec<(String, &'static str)>,
    points: usize,
    clients: usize,
) -> Result<f64, BoxError> {
    let http = client(false)?;
    // in time order, as a collector sends them
    let queue = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(bodies)));
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (http, queue, url) = (http.clone(), queue.clone(), url.clone());
            tokio::spawn(async move {
                loop {
                    let next = queue.lock().map_err(|_| "queue poisoned")?.pop_front();
                    let Some((body, content_type)) = next else { return Ok::<_, BoxError>(()) };
                    let resp = http.post(&url).header("content-type", content_type).body(body).send().await?;
                    if !resp.status().is_success() {
                        return Err(format!("{}: {}", resp.status(), resp.text().await?).into());
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    Ok(points as f64 / started.elapsed().as_secs_f64())
}

async fn run() -> Result<(), BoxError> {
    let points = env_or("MOSAIC_BENCH_POINTS", 1_000_000);
    let clients = env_or("MOSAIC_BENCH_CLIENTS", 4);
    let durability = mosaicdb::storage::Durability::Sync;
    if wanted("lines") {
        let (_dir, server, base) = start_server(durability, &[]).await?;
        let rate =
            ingest(format!("{base}/v1/timeseries/write?precision=ns"), line_bodies(points), points, clients).await?;
        println!(
            "ingest, line protocol: {points} points in bodies of {BODY_POINTS}, {clients} clients: {rate:.0} points/s"
        );
        server.shutdown().await?;
    }
    if wanted("json") {
        let (_dir, server, base) = start_server(durability, &[]).await?;
        let rate = ingest(format!("{base}/v1/timeseries/cpu/points"), json_bodies(points), points, clients).await?;
        println!("ingest, JSON: {points} points in bodies of {BODY_POINTS}, {clients} clients: {rate:.0} points/s");
        server.shutdown().await?;
    }
    if wanted("aggregate") {
        let (_dir, server, base) = start_server(durability, &[]).await?;
        let series = 1_000_000usize;
        let bodies: Vec<(String, &'static str)> = (0..series.div_ceil(BODY_POINTS))
            .map(|b| {
                let mut body = String::with_capacity(BODY_POINTS * 48);
                for i in b * BODY_POINTS..((b + 1) * BODY_POINTS).min(series) {
                    // 86.4 ms apart: one day
                    let ts_ns = DAY_START_MS * 1_000_000 + i as i64 * 86_400_000;
                    body.push_str(&format!("load,host=h1 value={} {ts_ns}\n", i % 977));
                }
                (body, "text/plain")
            })
            .collect();
        ingest(format!("{base}/v1/timeseries/write"), bodies, series, clients).await?;
        let http = client(false)?;
        let url = format!(
            "{base}/v1/timeseries/load/aggregate?entity=host%3Dh1&from={DAY_START_MS}&to={}&step=1m&fn=avg",
            DAY_START_MS + 86_400_000
        );
        let repeats = env_or("MOSAIC_BENCH_REPEATS", 30);
        let mut us = Vec::with_capacity(repeats);
        for n in 0..repeats + 3 {
            let started = Instant::now();
            let resp = http.get(&url).send().await?;
            let body: serde_json::Value = resp.json().await?;
            let buckets = body["buckets"].as_array().map_or(0, Vec::len);
            if buckets != 1440 {
                return Err(format!("expected 1440 buckets, got {buckets}: {body}").into());
            }
            if n >= 3 {
                us.push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
            }
        }
        us.sort_unstable();
        println!(
            "aggregate, 1 day / 1 minute avg over {series} points of one series: p50 {:.1} ms, p99 {:.1} ms ({repeats} runs)",
            percentile(&us, 50.0),
            percentile(&us, 99.0)
        );
        server.shutdown().await?;
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // criterion's harness flags (`--bench`) are accepted and ignored
    runtime.block_on(run())
}
