//! Maintained views through the service layer (no HTTP), buffered durability by default (so the
//! figures are the committer's CPU cost of keeping views, not fsyncs; `MOSAIC_BENCH_DURABILITY=sync`
//! measures with fsynced group commits, the server's default):
//!
//! - write throughput: `MOSAIC_BENCH_CLIENTS` (default 4) tasks PUT `MOSAIC_BENCH_DOCS` (default
//!   20 000) documents (each id written twice: an insert, then a replace that moves it to another
//!   group) into a table with 0, 1 and 5 views; the cost per view is the throughput lost per view;
//! - reads: every page (1000 groups) of a group view of 10 000 groups, and every page (1000
//!   documents) of a filter view of 100 000 members.
//!
//! `MOSAIC_BENCH_DIR` sets where the data directories go. Run with `cargo bench --bench views`.

use mosaicdb::service::views::{GroupQuery, PageQuery};
use mosaicdb::service::{CreateTable, CreateView, Db, DbOptions, Preconditions};
use mosaicdb::storage::{Durability, StorageConfig};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// `MOSAIC_BENCH_DURABILITY=sync` for fsynced group commits (default: buffered).
fn durability() -> Durability {
    match std::env::var("MOSAIC_BENCH_DURABILITY").as_deref() {
        Ok("sync") => Durability::Sync,
        _ => Durability::Buffered,
    }
}

fn dir() -> Result<tempfile::TempDir, BoxError> {
    Ok(match std::env::var_os("MOSAIC_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None => tempfile::tempdir()?,
    })
}

fn open(dir: &std::path::Path) -> Result<Arc<Db>, BoxError> {
    let mut config = StorageConfig::new(dir);
    config.durability = durability();
    Ok(Db::open(config, DbOptions::default())?)
}

/// The views of the write benchmark, in the order they are added.
fn views() -> Vec<Value> {
    vec![
        json!({"name": "by_city", "kind": "group", "by": ["city"],
            "aggregates": {"n": "count", "total": "sum(amount)", "avg_age": "avg(age)", "youngest": "min(age)", "oldest": "max(age)"}}),
        json!({"name": "adults", "kind": "filter", "filter": {"age": {"$gte": 18}}}),
        json!({"name": "by_city_tag", "kind": "group", "by": ["city", "tags"], "aggregates": {"n": "count", "total": "sum(amount)"}}),
        json!({"name": "big_oslo", "kind": "filter", "filter": {"city": "c3", "amount": {"$gt": 500}}}),
        json!({"name": "by_age", "kind": "group", "by": ["age"], "filter": {"status": {"$ne": "void"}},
            "aggregates": {"n": "count", "max_amount": "max(amount)"}}),
    ]
}

fn doc(i: usize, round: usize) -> serde_json::Map<String, Value> {
    let j = i * 7 + round * 13;
    json!({"city": format!("c{}", j % 50), "age": (j % 90) as u64, "amount": (j % 1000) as f64 + 0.25,
        "tags": [format!("t{}", j % 5), format!("t{}", (j + 1) % 5)], "status": if j.is_multiple_of(10) { "void" } else { "ok" }})
    .as_object()
    .cloned()
    .unwrap_or_default()
}

/// Documents written per second into a table with the first `n` views.
async fn write_rate(n: usize, docs: usize, clients: usize) -> Result<f64, BoxError> {
    let dir = dir()?;
    let db = open(dir.path())?;
    db.pipeline.create_table(serde_json::from_value::<CreateTable>(json!({"name": "t"}))?).await?;
    for v in views().into_iter().take(n) {
        db.pipeline.create_view("t".into(), serde_json::from_value::<CreateView>(v)?).await?;
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let db = db.clone();
            tokio::spawn(async move {
                for round in 0..2 {
                    for i in (c..docs / 2).step_by(clients) {
                        db.pipeline
                            .put_document("t".into(), format!("d{i:07}"), doc(i, round), Preconditions::default())
                            .await?;
                    }
                }
                Ok::<_, BoxError>(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let rate = docs as f64 / started.elapsed().as_secs_f64();
    let report = mosaicdb::service::check(&db).await?;
    if !report.ok {
        return Err(format!("check failed: {:?}", report.problems.first()).into());
    }
    db.shutdown().await?;
    Ok(rate)
}

async fn insert_all(db: &Arc<Db>, table: &str, n: usize, make: impl Fn(usize) -> Value) -> Result<(), BoxError> {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        db.pipeline.insert_documents(table.into(), chunk.iter().map(|&i| make(i)).collect()).await?;
    }
    Ok(())
}

async fn reads() -> Result<(), BoxError> {
    let dir = dir()?;
    let db = open(dir.path())?;
    for t in ["g", "f"] {
        db.pipeline.create_table(serde_json::from_value::<CreateTable>(json!({ "name": t }))?).await?;
    }
    let group = json!({"name": "v", "kind": "group", "by": ["k"],
        "aggregates": {"n": "count", "s": "sum(x)", "lo": "min(x)", "hi": "max(x)"}});
    db.pipeline.create_view("g".into(), serde_json::from_value::<CreateView>(group)?).await?;
    insert_all(&db, "g", 20_000, |i| json!({"_id": format!("d{i:06}"), "k": i % 10_000, "x": i})).await?;
    let filter = json!({"name": "v", "kind": "filter", "filter": {"x": {"$gte": 0}}});
    db.pipeline.create_view("f".into(), serde_json::from_value::<CreateView>(filter)?).await?;
    insert_all(&db, "f", 100_000, |i| json!({"_id": format!("d{i:06}"), "x": i, "pad": "0123456789"})).await?;

    for _ in 0..2 {
        let started = Instant::now();
        let (mut groups, mut cursor) = (0, None);
        loop {
            let q = GroupQuery { limit: Some(1000), cursor: cursor.take(), key: None };
            let page = db.views.get_view("g".into(), "v".into(), q).await?;
            groups += page.groups.map_or(0, |g| g.len());
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let took = started.elapsed();
        println!(
            "group view: {groups} groups (count, sum, min, max) read in pages of 1000 in {:.1} ms ({:.0} groups/s)",
            took.as_secs_f64() * 1e3,
            groups as f64 / took.as_secs_f64()
        );
        let started = Instant::now();
        let (mut members, mut cursor) = (0, None);
        loop {
            let q = PageQuery { limit: Some(1000), cursor: cursor.take(), fields: None };
            let page = db.views.view_documents("f".into(), "v".into(), q).await?;
            members += page.documents.len();
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let took = started.elapsed();
        println!(
            "filter view: {members} members (whole documents) read in pages of 1000 in {:.1} ms ({:.0} documents/s)",
            took.as_secs_f64() * 1e3,
            members as f64 / took.as_secs_f64()
        );
    }
    db.shutdown().await?;
    Ok(())
}

async fn run() -> Result<(), BoxError> {
    let docs = env_or("MOSAIC_BENCH_DOCS", 20_000);
    let clients = env_or("MOSAIC_BENCH_CLIENTS", 4);
    let mut base = 0.0;
    for n in [0, 1, 5] {
        let rate = write_rate(n, docs, clients).await?;
        if n == 0 {
            base = rate;
            let mode = format!("{:?}", durability()).to_lowercase();
            println!("writes with 0 views: {rate:.0} docs/s ({docs} PUTs, {clients} clients, {mode})");
        } else {
            let per_view = (1.0 - rate / base) * 100.0 / n as f64;
            println!(
                "writes with {n} view(s): {rate:.0} docs/s ({:.1}% of 0 views; {per_view:.1}% per view)",
                rate / base * 100.0
            );
        }
    }
    reads().await
}

fn main() -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}
