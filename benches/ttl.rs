//! The TTL sweep through the service layer (no HTTP), sync durability: `MOSAIC_BENCH_DOCS`
//! (default 100 000) expired documents in a table with a hash and a range index are swept
//! (`sweep_expired`, as the `ttl_sweep` task runs it) while `MOSAIC_BENCH_CLIENTS` (default 4)
//! tasks PUT documents into another table without pause; the PUT latencies are measured in the
//! same run before the sweep (baseline) and during it, and the sweep's rate is reported.
//! `MOSAIC_BENCH_DIR` sets where the data directory goes. Run with `cargo bench --bench ttl`.

use mosaicdb::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions};
use mosaicdb::storage::{Durability, StorageConfig};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// p-th percentile of sorted microseconds, in ms.
fn percentile(sorted_us: &[u64], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return f64::NAN;
    }
    sorted_us[((sorted_us.len() as f64 * p / 100.0) as usize).min(sorted_us.len() - 1)] as f64 / 1000.0
}

/// PUTs into `live` from `clients` tasks until `stop`; returns the sorted latencies (µs).
async fn put_load(db: Arc<Db>, clients: usize, stop: Arc<AtomicBool>) -> Result<Vec<u64>, BoxError> {
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (db, stop) = (db.clone(), stop.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let doc = json!({"user": format!("u{c}"), "n": n}).as_object().cloned().unwrap_or_default();
                    let started = Instant::now();
                    db.pipeline
                        .put_document("live".into(), format!("c{c}-{}", n % 1000), doc, Preconditions::default())
                        .await?;
                    lat.push(started.elapsed().as_micros() as u64);
                    n += 1;
                }
                Ok::<_, BoxError>(lat)
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    all.sort_unstable();
    Ok(all)
}

async fn run() -> Result<(), BoxError> {
    let docs = env_or("MOSAIC_BENCH_DOCS", 100_000);
    let clients = env_or("MOSAIC_BENCH_CLIENTS", 4);
    let dir = match std::env::var_os("MOSAIC_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None => tempfile::tempdir()?,
    };
    let mut config = StorageConfig::new(dir.path());
    config.durability = Durability::Sync;
    let db = Db::open(config, DbOptions::default())?;
    for name in ["sessions", "live"] {
        db.pipeline.create_table(serde_json::from_value::<CreateTable>(json!({ "name": name }))?).await?;
    }
    for (name, kind, field) in [("by_user", "hash", "user"), ("by_age", "range", "age")] {
        let req: CreateIndex = serde_json::from_value(json!({"name": name, "kind": kind, "fields": [field]}))?;
        db.pipeline.create_index("sessions".into(), req).await?;
    }
    // expired a minute ago, each at its own millisecond
    let now = mosaicdb::service::core::clock::now_ms();
    for chunk in (0..docs).collect::<Vec<_>>().chunks(10_000) {
        let batch: Vec<Value> = chunk
            .iter()
            .map(|i| {
                json!({"_id": format!("s{i:07}"), "user": format!("u{}", i % 5000), "age": i % 90,
                "_expires_at": now - 60_000 - (docs - i) as i64})
            })
            .collect();
        db.pipeline.insert_documents("sessions".into(), batch).await?;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let baseline = tokio::spawn(put_load(db.clone(), clients, stop.clone()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let baseline = baseline.await??;

    let stop = Arc::new(AtomicBool::new(false));
    let during = tokio::spawn(put_load(db.clone(), clients, stop.clone()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut removed = 0;
    loop {
        let outcome = db.pipeline.sweep_expired(mosaicdb::service::core::clock::now_ms(), 10_000).await?;
        removed += outcome.removed;
        if !outcome.more {
            break;
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let during = during.await??;
    if removed != docs as u64 {
        return Err(format!("swept {removed} of {docs}").into());
    }
    let report = mosaicdb::service::check(&db).await?;
    println!(
        "ttl sweep: {docs} expired documents (hash + range index) in {:.2} s: {:.0} docs/s; check ok: {}",
        took.as_secs_f64(),
        docs as f64 / took.as_secs_f64(),
        report.ok
    );
    println!(
        "PUT load ({clients} clients, sync): before the sweep p50 {:.2} ms p99 {:.2} ms ({} PUTs); during it p50 {:.2} ms p99 {:.2} ms ({} PUTs)",
        percentile(&baseline, 50.0),
        percentile(&baseline, 99.0),
        baseline.len(),
        percentile(&during, 50.0),
        percentile(&during, 99.0),
        during.len()
    );
    db.shutdown().await?;
    Ok(())
}

fn main() -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}
