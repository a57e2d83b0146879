//! Indexes and queries on a large table, over HTTP against an in-process server:
//! - index backfill rate (entries/s) for a range and a unique index over the whole table;
//! - primary-key GET (the baseline), an equality lookup on a unique index, a range query with
//!   limit 100 (10% of the table matches), a selective range query (50 matches), a sort served by
//!   the range index with limit 10; and the lookup and the selective range forced to full scans
//!   (the same filters on unindexed copies of the fields).
//!
//! Environment: `MOSAIC_BENCH_DOCS` (default 1 000 000), `MOSAIC_BENCH_CLIENTS` (default 16),
//! `MOSAIC_BENCH_SECS` (default 5 per scenario), `MOSAIC_BENCH_DIR` (data directory parent).
//! Run with `cargo bench --bench query`. Loops are bounded by time or count; traffic stays on
//! 127.0.0.1.

#[path = "support/mod.rs"]
mod support;

use mosaicdb::storage::Durability;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{BoxError, MakeRequest, client, env_or, load, start_server};

/// Documents per import request.
const IMPORT_CHUNK: u64 = 100_000;

fn doc(i: u64) -> String {
    format!(
        "{{\"_id\":\"u{i:07}\",\"email\":\"user{i:07}@example.com\",\"email_copy\":\"user{i:07}@example.com\",\
         \"age\":{age},\"n\":{n},\"n_copy\":{n},\"city\":\"city{}\",\"score\":{}.{:02},\"tags\":[\"a\",\"b\"]}}\n",
        (i / 3) % 50,
        i % 1000,
        i % 97,
        age = (i * 7919) % 100,
        n = (i * 104_729) % 1_000_003,
    )
}

async fn wait_ready(c: &reqwest::Client, base: &str, index: &str) -> Result<(), BoxError> {
    for _ in 0..36_000 {
        let def: Value = c.get(format!("{base}/v1/tables/big/indexes/{index}")).send().await?.json().await?;
        match def["state"].as_str() {
            Some("ready") => return Ok(()),
            Some("building") => tokio::time::sleep(Duration::from_millis(20)).await,
            _ => return Err(format!("index {index}: {def}").into()),
        }
    }
    Err(format!("index {index} did not finish in an hour").into())
}

async fn run() -> Result<(), BoxError> {
    let docs: u64 = env_or("MOSAIC_BENCH_DOCS", 1_000_000);
    let clients: usize = env_or("MOSAIC_BENCH_CLIENTS", 16);
    let secs: f64 = env_or("MOSAIC_BENCH_SECS", 5.0);
    let duration = Duration::from_secs_f64(secs);
    let (_dir, server, base) = start_server(Durability::Buffered, &["big"]).await?;
    let c = client(false)?;

    let t0 = Instant::now();
    let mut first = 0;
    while first < docs {
        let n = IMPORT_CHUNK.min(docs - first);
        let body: String = (first..first + n).map(doc).collect();
        let report: Value = c
            .post(format!("{base}/v1/tables/big/import"))
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await?
            .json()
            .await?;
        if report["inserted"] != n {
            return Err(format!("import: {report}").into());
        }
        first += n;
    }
    eprintln!(
        "loaded {docs} documents in {:.1} s ({:.0} docs/s)",
        t0.elapsed().as_secs_f64(),
        docs as f64 / t0.elapsed().as_secs_f64()
    );

    let mut backfill = Vec::new();
    for (name, kind, field) in [("by_age", "range", "age"), ("by_email", "unique", "email"), ("by_n", "range", "n")] {
        let t0 = Instant::now();
        let r = c
            .post(format!("{base}/v1/tables/big/indexes"))
            .json(&json!({"name": name, "kind": kind, "fields": [field]}))
            .send()
            .await?;
        if !r.status().is_success() {
            return Err(format!("create {name}: {}", r.text().await?).into());
        }
        wait_ready(&c, &base, name).await?;
        let secs = t0.elapsed().as_secs_f64();
        backfill.push((name, secs, docs as f64 / secs));
    }

    let get: MakeRequest = {
        let (c, base) = (c.clone(), base.clone());
        Arc::new(move |client, n| {
            let i = (client as u64 * 7_919 + n * 104_729) % docs;
            c.get(format!("{base}/v1/tables/big/documents/u{i:07}"))
        })
    };
    let query = |body: Arc<dyn Fn(u64) -> Value + Send + Sync>| -> MakeRequest {
        let (c, base) = (c.clone(), base.clone());
        Arc::new(move |client, n| {
            c.post(format!("{base}/v1/tables/big/query")).json(&body(client as u64 * 7_919 + n * 104_729))
        })
    };
    let email = move |field: &'static str| -> Arc<dyn Fn(u64) -> Value + Send + Sync> {
        Arc::new(move |k| json!({"filter": {field: format!("user{:07}@example.com", k % docs)}, "limit": 1}))
    };
    let narrow = |field: &'static str| -> Arc<dyn Fn(u64) -> Value + Send + Sync> {
        Arc::new(move |k| json!({"filter": {field: {"$gte": k % 1_000_000, "$lt": k % 1_000_000 + 50}}, "limit": 100}))
    };
    let lookup = query(email("email"));
    let range = query(Arc::new(|k| json!({"filter": {"age": {"$gte": k % 90, "$lt": k % 90 + 10}}, "limit": 100})));
    let selective = query(narrow("n"));
    let sorted = query(Arc::new(|_| json!({"sort": ["-age"], "limit": 10})));
    let lookup_scan = query(email("email_copy"));
    let selective_scan = query(narrow("n_copy"));

    let mut rows = Vec::new();
    for (name, make, clients, duration) in [
        ("primary-key GET", get, clients, duration),
        ("unique-index lookup (limit 1)", lookup, clients, duration),
        ("range query, limit 100 (10% match)", range, clients, duration),
        ("selective range query (50 match)", selective, clients, duration),
        ("sort by range index, limit 10", sorted, clients, duration),
        ("lookup forced to a full scan (2 clients)", lookup_scan, 2, duration.max(Duration::from_secs(10))),
        ("selective range forced to a full scan (2 clients)", selective_scan, 2, duration.max(Duration::from_secs(10))),
    ] {
        let m = load(clients, duration, make).await;
        eprintln!(
            "  {name}: {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, {} errors",
            m.per_sec(),
            m.p50(),
            m.p99(),
            m.errors
        );
        rows.push((name, m));
    }

    // a plan check: the bench measures what it says it measures
    for (what, body, want) in [
        ("lookup", json!({"filter": {"email": "user0000001@example.com"}, "explain": true}), "by_email"),
        ("range", json!({"filter": {"age": {"$gte": 5, "$lt": 15}}, "limit": 100, "explain": true}), "by_age"),
        ("selective", json!({"filter": {"n": {"$gte": 5, "$lt": 55}}, "limit": 100, "explain": true}), "by_n"),
        ("sort", json!({"sort": ["-age"], "limit": 10, "explain": true}), "by_age"),
    ] {
        let plan: Value = c.post(format!("{base}/v1/tables/big/query")).json(&body).send().await?.json().await?;
        eprintln!("  plan of {what}: {}", plan["plan"]);
        if plan["plan"]["scans"][0]["index"] != want {
            return Err(format!("{what} does not use {want}").into());
        }
    }

    println!("\n## query bench: {docs} documents, {clients} clients, {secs} s per scenario\n");
    println!("| index backfill | seconds | entries/s |\n|---|---|---|");
    for (name, secs, rate) in &backfill {
        println!("| {name} | {secs:.2} | {rate:.0} |");
    }
    let base_rps = rows[0].1.per_sec();
    println!("\n| scenario | req/s | p50 ms | p99 ms | cost vs GET | errors |\n|---|---|---|---|---|---|");
    for (name, m) in &rows {
        println!(
            "| {name} | {:.0} | {:.2} | {:.2} | {:.2}x | {} |",
            m.per_sec(),
            m.p50(),
            m.p99(),
            base_rps / m.per_sec(),
            m.errors
        );
    }
    server.shutdown().await?;
    Ok(())
}

fn main() -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}
