//! HTTP load over loopback against an in-process mosaicdb server, next to the "HTTP ceiling": the
//! same client against a trivial axum handler (`GET /` → `{"status":"ok"}`) in the same process.
//!
//! Scenarios (each runs N concurrent keep-alive clients for a fixed time, after a short warm-up):
//! - ceiling: `GET /` on the trivial handler;
//! - point GET of 10k preloaded ~200-byte documents (with and without `Accept-Encoding: gzip`);
//! - single-document PUT, sync and buffered durability;
//! - batch insert: POST an array of 100 documents, sync and buffered;
//! - NDJSON import of 500k 200-byte documents (no `_id`, no indexes, buffered), in one request and
//!   split over 4 concurrent requests; the bodies are built before the clock starts.
//!
//! The client is one `reqwest::Client` per scenario (it pools keep-alive connections), HTTP/1.1,
//! no proxy. Client and servers share the process and its cores, as they share the ceiling run.
//!
//! Environment:
//! - `MOSAIC_BENCH_CLIENTS`: concurrent clients (default 32);
//! - `MOSAIC_BENCH_SECS`: seconds per load scenario (default 5);
//! - `MOSAIC_BENCH_IMPORT_DOCS`: documents per import scenario (default 500000);
//! - `MOSAIC_BENCH_ONLY`: run only the scenarios whose name contains one of these comma-separated
//!   texts (case-insensitive), e.g. `ceiling,identity` — handy under `perf record`;
//! - `MOSAIC_BENCH_DIR`: where the temporary data directories go (default: the system temp dir).
//!
//! Run with `cargo bench --bench http`. Every loop is bounded by time or count; all traffic goes
//! to 127.0.0.1.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

use bytes::Bytes;
use mosaicdb::storage::Durability;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use support::{BoxError, MakeRequest, client, percentile, start_ceiling, start_server};

/// Documents preloaded for the GET scenario.
const PRELOAD_DOCS: u64 = 10_000;
/// Documents per batch insert.
const BATCH_DOCS: u64 = 100;
/// Target size of one document, in bytes of compact JSON.
const DOC_BYTES: usize = 200;

struct Settings {
    clients: usize,
    duration: Duration,
    import_docs: u64,
    /// run only the scenarios whose name contains one of these (for profiling), lowercase
    only: Vec<String>,
}

impl Settings {
    fn from_env() -> Settings {
        let var = |name: &str| std::env::var(name).ok();
        let clients = var("MOSAIC_BENCH_CLIENTS").and_then(|s| s.parse().ok()).unwrap_or(32usize).clamp(1, 4096);
        let secs = var("MOSAIC_BENCH_SECS").and_then(|s| s.parse().ok()).unwrap_or(5.0f64).clamp(0.2, 120.0);
        let import_docs =
            var("MOSAIC_BENCH_IMPORT_DOCS").and_then(|s| s.parse().ok()).unwrap_or(500_000u64).clamp(1, 20_000_000);
        let only = var("MOSAIC_BENCH_ONLY")
            .map(|s| s.split(',').map(|p| p.trim().to_lowercase()).filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        Settings { clients, duration: Duration::from_secs_f64(secs), import_docs, only }
    }

    fn wants(&self, scenario: &str) -> bool {
        let name = scenario.to_lowercase();
        self.only.is_empty() || self.only.iter().any(|o| name.contains(o.as_str()))
    }
}

/// A compact JSON object of `DOC_BYTES` bytes (its `_id`, when given, included).
fn doc(i: u64, id: Option<&str>) -> String {
    const CITIES: [&str; 4] = ["San Francisco", "Berlin", "Tokyo", "São Paulo"];
    let id_part = id.map(|id| format!("\"_id\":\"{id}\",")).unwrap_or_default();
    let head = format!(
        "{{{id_part}\"name\":\"user {i:07}\",\"email\":\"user{i:07}@example.com\",\"age\":{},\"city\":\"{}\",\
         \"active\":{},\"score\":{}.{:02},\"tags\":[\"alpha\",\"beta\"],\"bio\":\"",
        18 + i % 70,
        CITIES[(i % 4) as usize],
        i.is_multiple_of(3),
        i % 100,
        i % 97,
    );
    let filler = DOC_BYTES.saturating_sub(head.len() + 2).max(1);
    let mut s = head;
    s.extend(std::iter::repeat_n('x', filler));
    s.push_str("\"}");
    s
}

/// What one scenario measured.
struct Row {
    scenario: String,
    clients: usize,
    requests: u64,
    errors: u64,
    elapsed: Duration,
    /// documents per request, for the docs/s column (0: not a document write)
    docs_per_request: u64,
    /// sorted latencies in microseconds (empty: latency does not apply)
    latencies_us: Vec<u32>,
}

impl Row {
    fn per_sec(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    fn docs_per_sec(&self) -> f64 {
        (self.requests * self.docs_per_request) as f64 / self.elapsed.as_secs_f64()
    }
}

/// A warm-up, then the measured run; `None` when the scenario is filtered out.
async fn load(name: &str, settings: &Settings, docs_per_request: u64, make: MakeRequest) -> Option<Row> {
    if !settings.wants(name) {
        return None;
    }
    let m = support::load(settings.clients, settings.duration, make).await;
    eprintln!("  {name}: {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, {} errors", m.per_sec(), m.p50(), m.p99(), m.errors);
    Some(Row {
        scenario: name.to_owned(),
        clients: settings.clients,
        requests: m.requests,
        errors: m.errors,
        elapsed: m.elapsed,
        docs_per_request,
        latencies_us: m.latencies_us,
    })
}

/// One NDJSON body of `docs` documents numbered from `first`.
fn ndjson(first: u64, docs: u64, with_ids: bool) -> Bytes {
    let mut body = String::with_capacity(docs as usize * (DOC_BYTES + 16));
    for i in first..first + docs {
        let id = with_ids.then(|| format!("doc-{i:05}"));
        body.push_str(&doc(i, id.as_deref()));
        body.push('\n');
    }
    Bytes::from(body)
}

async fn import(c: &reqwest::Client, base: &str, table: &str, body: Bytes) -> Result<u64, BoxError> {
    let resp = c
        .post(format!("{base}/v1/tables/{table}/import"))
        .header(CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"))
        .body(body)
        .send()
        .await?;
    let status = resp.status();
    let report: Value = resp.json().await?;
    if !status.is_success() || report["failed"].as_u64() != Some(0) {
        return Err(format!("import into {table}: {status} {report}").into());
    }
    report["inserted"].as_u64().ok_or_else(|| format!("import report without `inserted`: {report}").into())
}

/// NDJSON import split over `streams` concurrent requests; the bodies are built before timing.
async fn import_scenario(
    name: &str,
    base: &str,
    table: &str,
    total: u64,
    streams: u64,
    seed: u64,
    settings: &Settings,
) -> Result<Option<Row>, BoxError> {
    if !settings.wants(name) {
        return Ok(None);
    }
    let per = total.div_ceil(streams);
    let bodies: Vec<Bytes> =
        (0..streams).map(|s| ndjson(seed + s * per, per.min(total.saturating_sub(s * per)), false)).collect();
    let bytes: usize = bodies.iter().map(Bytes::len).sum();
    let c = client(false)?;
    let start = Instant::now();
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|body| {
            let (c, base, table) = (c.clone(), base.to_owned(), table.to_owned());
            tokio::spawn(async move { import(&c, &base, &table, body).await })
        })
        .collect();
    let mut inserted = 0;
    for t in tasks {
        inserted += t.await??;
    }
    let elapsed = start.elapsed();
    let row = Row {
        scenario: name.to_owned(),
        clients: streams as usize,
        requests: inserted,
        errors: total - inserted,
        elapsed,
        docs_per_request: 1,
        latencies_us: Vec::new(),
    };
    eprintln!(
        "  {name}: {inserted} docs ({:.1} MB) in {:.2} s = {:.0} docs/s, {:.1} MB/s",
        bytes as f64 / 1e6,
        elapsed.as_secs_f64(),
        row.docs_per_sec(),
        bytes as f64 / 1e6 / elapsed.as_secs_f64()
    );
    Ok(Some(row))
}

async fn run(settings: Settings) -> Result<(), BoxError> {
    eprintln!(
        "http bench: {} clients, {:.1} s per scenario, {} docs per import, {} cores",
        settings.clients,
        settings.duration.as_secs_f64(),
        settings.import_docs,
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let mut rows: Vec<Row> = Vec::new();

    // The ceiling.
    let (ceiling_addr, ceiling_stop) = start_ceiling().await?;
    {
        let c = client(false)?;
        let url = format!("http://{ceiling_addr}/");
        rows.extend(load("ceiling: GET / (trivial axum)", &settings, 0, Arc::new(move |_, _| c.get(&url))).await);
    }
    let _ = ceiling_stop.send(());

    // Sync server: preload, point GETs, PUTs, batches.
    let (sync_dir, sync_server, sync_base) = start_server(Durability::Sync, &["docs", "puts", "batches"]).await?;
    let preloaded = import(&client(false)?, &sync_base, "docs", ndjson(0, PRELOAD_DOCS, true)).await?;
    eprintln!("  preloaded {preloaded} documents of ~{DOC_BYTES} bytes");
    for (name, gzip) in [("GET document (identity)", false), ("GET document (Accept-Encoding: gzip)", true)] {
        let c = client(gzip)?;
        let base = format!("{sync_base}/v1/tables/docs/documents/doc-");
        let make: MakeRequest = Arc::new(move |client, n| {
            // a cheap per-client pseudo-random walk over the preloaded ids
            let x = (n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (client as u64).wrapping_mul(0xBF58_476D))
                % PRELOAD_DOCS;
            c.get(format!("{base}{x:05}"))
        });
        rows.extend(load(name, &settings, 0, make).await);
    }

    let put_body = Bytes::from(doc(7, None));
    let batch_bodies: Arc<Vec<Bytes>> = Arc::new(
        (0..8u64)
            .map(|b| {
                let docs: Vec<String> = (0..BATCH_DOCS).map(|i| doc(b * BATCH_DOCS + i, None)).collect();
                Bytes::from(format!("[{}]", docs.join(",")))
            })
            .collect(),
    );
    let put_make = |base: &str, c: reqwest::Client| -> MakeRequest {
        let (url, body) = (format!("{base}/v1/tables/puts/documents/"), put_body.clone());
        Arc::new(move |client, n| {
            c.put(format!("{url}c{client:04}-{n:08}"))
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone())
        })
    };
    let batch_make = |base: &str, c: reqwest::Client| -> MakeRequest {
        let (url, bodies) = (format!("{base}/v1/tables/batches/documents"), batch_bodies.clone());
        Arc::new(move |client, n| {
            c.post(&url)
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(bodies[(client + n as usize) % bodies.len()].clone())
        })
    };
    rows.extend(load("PUT document, sync", &settings, 1, put_make(&sync_base, client(false)?)).await);
    rows.extend(load("POST batch of 100, sync", &settings, BATCH_DOCS, batch_make(&sync_base, client(false)?)).await);
    sync_server.shutdown().await?;
    drop(sync_dir);

    // Buffered server: PUTs, batches, imports.
    let (buf_dir, buf_server, buf_base) =
        start_server(Durability::Buffered, &["puts", "batches", "import1", "import4"]).await?;
    rows.extend(load("PUT document, buffered", &settings, 1, put_make(&buf_base, client(false)?)).await);
    rows.extend(
        load("POST batch of 100, buffered", &settings, BATCH_DOCS, batch_make(&buf_base, client(false)?)).await,
    );
    rows.extend(
        import_scenario(
            "NDJSON import, 1 request, buffered",
            &buf_base,
            "import1",
            settings.import_docs,
            1,
            0,
            &settings,
        )
        .await?,
    );
    rows.extend(
        import_scenario(
            "NDJSON import, 4 requests, buffered",
            &buf_base,
            "import4",
            settings.import_docs,
            4,
            1 << 32,
            &settings,
        )
        .await?,
    );
    buf_server.shutdown().await?;
    drop(buf_dir);

    // The report.
    println!();
    println!(
        "| {:<38} | {:>7} | {:>9} | {:>10} | {:>10} | {:>8} | {:>8} | {:>6} |",
        "scenario", "clients", "requests", "req/s", "docs/s", "p50 ms", "p99 ms", "errors"
    );
    println!("|{:-<40}|{:->9}|{:->11}|{:->12}|{:->12}|{:->10}|{:->10}|{:->8}|", "", ":", ":", ":", ":", ":", ":", ":");
    for r in &rows {
        let import = r.latencies_us.is_empty();
        let req_s = if import { "-".to_owned() } else { format!("{:.0}", r.per_sec()) };
        let docs_s = if r.docs_per_request == 0 { "-".to_owned() } else { format!("{:.0}", r.docs_per_sec()) };
        let (p50, p99) = if import {
            ("-".to_owned(), "-".to_owned())
        } else {
            (format!("{:.2}", percentile(&r.latencies_us, 50.0)), format!("{:.2}", percentile(&r.latencies_us, 99.0)))
        };
        println!(
            "| {:<38} | {:>7} | {:>9} | {:>10} | {:>10} | {:>8} | {:>8} | {:>6} |",
            r.scenario, r.clients, r.requests, req_s, docs_s, p50, p99, r.errors
        );
    }
    println!();
    let rate = |name: &str| rows.iter().find(|r| r.scenario == name).map_or(f64::NAN, Row::per_sec);
    let ceiling = rate("ceiling: GET / (trivial axum)");
    let get = rate("GET document (identity)");
    let get_gzip = rate("GET document (Accept-Encoding: gzip)");
    if get.is_finite() && ceiling.is_finite() {
        println!("GET = {:.1}% of the HTTP ceiling (target >= 70%)", 100.0 * get / ceiling);
    }
    if get_gzip.is_finite() && ceiling.is_finite() {
        println!("GET with Accept-Encoding: gzip = {:.1}% of the HTTP ceiling", 100.0 * get_gzip / ceiling);
    }
    let (sync, buffered) = (rate("PUT document, sync"), rate("PUT document, buffered"));
    if sync.is_finite() && buffered.is_finite() {
        println!("PUT: sync = {:.1}% of buffered", 100.0 * sync / buffered);
    }
    for r in rows.iter().filter(|r| r.latencies_us.is_empty()) {
        println!("{} = {:.0} docs/s (target >= 150000)", r.scenario, r.docs_per_sec());
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let settings = Settings::from_env();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(run(settings))
}
