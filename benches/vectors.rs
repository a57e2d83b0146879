//! Vector indexes over HTTP against an in-process server (release build, buffered durability like
//! the other load benches), on clustered random vectors (100 centres, Gaussian-like spread — not
//! uniform noise):
//! - build rate: an NDJSON import into a table whose `vector` index exists (docs/s), while one
//!   client PUTs small documents into another table (their p50/p99: how much the vector inserts
//!   delay other writes);
//! - recall@10 against `"exact": true`, QPS and p50/p99 of one client for `ef` 16…512, and the
//!   smallest `ef` reaching recall ≥ 0.95;
//! - filtered QPS at 10% selectivity (an unindexed filter: the walk keeps matching nodes), and its
//!   recall;
//! - resident memory before and after the import (`/proc/self/status`, Linux), and the time a
//!   shutdown (which flushes the memtables) and the restart take (the graph is read back from
//!   its keys).
//!
//! Environment: `MOSAIC_BENCH_VECTORS` (default 100 000), `MOSAIC_BENCH_DIM` (128),
//! `MOSAIC_BENCH_SECS` (3 per measurement), `MOSAIC_BENCH_DIR`. Run with
//! `cargo bench --bench vectors`. To profile the open: `MOSAIC_BENCH_KEEP=1` keeps the data
//! directory (its path is printed), and `MOSAIC_BENCH_REOPEN=<dir>` only opens that directory
//! three times and prints each open's time.

#[path = "support/mod.rs"]
mod support;

use mosaicdb::server::{Server, ServerConfig};
use mosaicdb::storage::Durability;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{BoxError, MakeRequest, Rng, client, env_or, load, start_server};

/// About normal (the sum of four uniforms).
fn gauss(rng: &mut Rng) -> f32 {
    ((rng.unit() + rng.unit() + rng.unit() + rng.unit() - 2.0) * 1.7) as f32
}

fn clustered(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let centres: Vec<Vec<f32>> = (0..100).map(|_| (0..dim).map(|_| gauss(&mut rng) * 3.0).collect()).collect();
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let c = &centres[(rng.next() % 100) as usize];
            c.iter().map(|x| x + gauss(&mut rng) * 0.6).collect()
        })
        .collect()
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

async fn post(c: &reqwest::Client, url: String, body: &Value) -> Result<Value, BoxError> {
    let resp = c.post(url).json(body).send().await?;
    let status = resp.status();
    let v: Value = resp.json().await?;
    if !status.is_success() {
        return Err(format!("{status}: {v}").into());
    }
    Ok(v)
}

fn ids(r: &Value) -> BTreeSet<String> {
    r["hits"].as_array().into_iter().flatten().filter_map(|h| h["_id"].as_str().map(str::to_owned)).collect()
}

async fn recall(
    c: &reqwest::Client,
    base: &str,
    queries: &[Vec<f32>],
    ef: usize,
    filter: Option<&Value>,
) -> Result<f64, BoxError> {
    let (mut hit, mut total) = (0, 0);
    for q in queries {
        let mut body = json!({"field": "embedding", "vector": q, "k": 10, "ef": ef, "fields": []});
        if let Some(f) = filter {
            body["filter"] = f.clone();
        }
        let got = ids(&post(c, format!("{base}/v1/tables/vec/vector-search"), &body).await?);
        body["exact"] = json!(true);
        let want = ids(&post(c, format!("{base}/v1/tables/vec/vector-search"), &body).await?);
        hit += got.intersection(&want).count();
        total += want.len();
    }
    Ok(hit as f64 / total.max(1) as f64)
}

/// Opens a kept data directory three times (the open alone, for profiling).
async fn reopen(dir: &std::path::Path) -> Result<(), BoxError> {
    for _ in 0..3 {
        let mut cfg = ServerConfig::new(dir);
        cfg.addr = "127.0.0.1:0".parse()?;
        cfg.storage.durability = Durability::Buffered;
        let t0 = Instant::now();
        let server = Server::start(cfg).await?;
        println!("open: {:.0} ms", t0.elapsed().as_secs_f64() * 1000.0);
        server.shutdown().await?;
    }
    Ok(())
}

async fn run() -> Result<(), BoxError> {
    if let Some(dir) = std::env::var_os("MOSAIC_BENCH_REOPEN") {
        return reopen(std::path::Path::new(&dir)).await;
    }
    let n: usize = env_or("MOSAIC_BENCH_VECTORS", 100_000);
    let dim: usize = env_or("MOSAIC_BENCH_DIM", 128);
    let secs: f64 = env_or("MOSAIC_BENCH_SECS", 3.0);
    let duration = Duration::from_secs_f64(secs);
    let rss_before = rss_mb();
    let (dir, server, base) = start_server(Durability::Buffered, &["vec", "other"]).await?;
    let c = client(false)?;
    let index = json!({"name": "emb", "kind": "vector", "fields": ["embedding"],
        "options": {"dimension": dim, "metric": "l2"}});
    post(&c, format!("{base}/v1/tables/vec/indexes"), &index).await?;
    let data = clustered(n, dim, 1);
    let lines: Vec<String> = data
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{}\n", json!({"_id": format!("v{i:07}"), "embedding": v, "p": i % 100})))
        .collect();

    // build rate, with one client writing to another table meanwhile
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let writer = {
        let (c, base) = (c.clone(), base.clone());
        tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut k = 0u64;
            while !*stop_rx.borrow() {
                let t0 = Instant::now();
                let r = c
                    .put(format!("{base}/v1/tables/other/documents/d{}", k % 1000))
                    .json(&json!({"k": k}))
                    .send()
                    .await;
                if r.is_ok_and(|r| r.status().is_success()) {
                    lat.push(t0.elapsed().as_micros() as u32);
                }
                k += 1;
            }
            lat.sort_unstable();
            lat
        })
    };
    let t0 = Instant::now();
    for chunk in lines.chunks(20_000) {
        let report: Value = c
            .post(format!("{base}/v1/tables/vec/import"))
            .header("content-type", "application/x-ndjson")
            .body(chunk.concat())
            .send()
            .await?
            .json()
            .await?;
        if report["inserted"] != chunk.len() {
            return Err(format!("import: {report}").into());
        }
    }
    let build = n as f64 / t0.elapsed().as_secs_f64();
    stop_tx.send(true)?;
    let lat = writer.await?;
    println!(
        "build: {n} × {dim}-d imported with the index at {build:.0} vectors/s; concurrent PUTs to another table: {} done, p50 {:.2} ms, p99 {:.2} ms",
        lat.len(),
        support::percentile(&lat, 50.0),
        support::percentile(&lat, 99.0)
    );
    println!("memory: resident {rss_before:.0} MiB before, {:.0} MiB after the import", rss_mb());

    // recall and QPS per ef
    let queries = clustered(100, dim, 2);
    let queries = Arc::new(queries);
    let mut reaching = None;
    for ef in [16, 32, 64, 128, 256, 512] {
        let r = recall(&c, &base, &queries, ef, None).await?;
        let (c2, b2, q2) = (c.clone(), base.clone(), queries.clone());
        let make: MakeRequest = Arc::new(move |_, k| {
            let q = &q2[k as usize % q2.len()];
            c2.post(format!("{b2}/v1/tables/vec/vector-search"))
                .json(&json!({"field": "embedding", "vector": q, "k": 10, "ef": ef, "fields": []}))
        });
        let m = load(1, duration, make).await;
        println!(
            "ef {ef:>3}: recall@10 {r:.3}, {:.0} QPS, p50 {:.2} ms, p99 {:.2} ms (1 client)",
            m.per_sec(),
            m.p50(),
            m.p99()
        );
        if r >= 0.95 && reaching.is_none() {
            reaching = Some(ef);
        }
    }
    println!("smallest ef with recall@10 ≥ 0.95: {reaching:?}");

    // filtered at 10% selectivity
    let filter = json!({"p": {"$lt": 10}});
    let r = recall(&c, &base, &queries, 64, Some(&filter)).await?;
    let (c2, b2, q2, f2) = (c.clone(), base.clone(), queries.clone(), filter.clone());
    let make: MakeRequest = Arc::new(move |_, k| {
        let q = &q2[k as usize % q2.len()];
        c2.post(format!("{b2}/v1/tables/vec/vector-search"))
            .json(&json!({"field": "embedding", "vector": q, "k": 10, "filter": f2, "fields": []}))
    });
    let m = load(1, duration, make).await;
    println!("filtered (10%): recall@10 {r:.3}, {:.0} QPS, p50 {:.2} ms, p99 {:.2} ms", m.per_sec(), m.p50(), m.p99());

    // restart (the shutdown flushes the memtables, so the open replays no journal)
    let metrics = c.get(format!("{base}/metrics")).send().await?.text().await?;
    let storage: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("family=\"vec\"") || l.starts_with("mosaicdb_storage_journal_bytes"))
        .collect();
    println!("before the restart: {}", storage.join("; "));
    let t0 = Instant::now();
    server.shutdown().await?;
    println!("shutdown: {:.0} ms", t0.elapsed().as_secs_f64() * 1000.0);
    let mut cfg = ServerConfig::new(dir.path());
    cfg.addr = "127.0.0.1:0".parse()?;
    cfg.storage.durability = Durability::Buffered;
    let t0 = Instant::now();
    let server = Server::start(cfg).await?;
    println!(
        "open after restart: {:.0} ms ({n} vectors read back from their keys)",
        t0.elapsed().as_secs_f64() * 1000.0
    );
    server.shutdown().await?;
    if std::env::var_os("MOSAIC_BENCH_KEEP").is_some() {
        println!("data directory kept: {}", dir.keep().display());
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}
