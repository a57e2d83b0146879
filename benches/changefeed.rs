//! The changefeed's cost and speed through the service layer (no HTTP): PUT throughput into a
//! table whose changefeed mode is `off`, `keys` and `full`, measured in alternating rounds in one
//! run (so the ratios compare like with like), then a consumer reading the whole feed a page at a
//! time (events/s). `MOSAIC_BENCH_DOCS` (default 20 000) PUTs per round and mode over
//! `MOSAIC_BENCH_CLIENTS` (default 8) tasks, `MOSAIC_BENCH_ROUNDS` (default 3) rounds;
//! `MOSAIC_BENCH_DURABILITY` `buffered` (default: the feed's share is largest when no fsync
//! dominates) or `sync`; `MOSAIC_BENCH_DIR` sets where the data directory goes.
//! Run with `cargo bench --bench changefeed`.

use mosaicdb::service::changefeed::ChangesRequest;
use mosaicdb::service::{CreateTable, Db, DbOptions, Preconditions};
use mosaicdb::storage::{Durability, StorageConfig};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// `docs` PUTs into `table` from `clients` tasks (ids reused across rounds: replaces, as a steady
/// workload does); returns PUTs per second.
async fn put_round(db: &Arc<Db>, table: &str, docs: usize, clients: usize, round: usize) -> Result<f64, BoxError> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (db, table) = (db.clone(), table.to_owned());
            tokio::spawn(async move {
                for n in (c..docs).step_by(clients) {
                    let doc = json!({"user": format!("u{c}"), "n": n, "round": round, "text": "some words to carry"});
                    let doc = doc.as_object().cloned().unwrap_or_default();
                    db.pipeline.put_document(table.clone(), format!("d{n}"), doc, Preconditions::default()).await?;
                }
                Ok::<_, BoxError>(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    Ok(docs as f64 / started.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn run() -> Result<(), BoxError> {
    let docs = env_or("MOSAIC_BENCH_DOCS", 20_000);
    let clients = env_or("MOSAIC_BENCH_CLIENTS", 8);
    let rounds = env_or("MOSAIC_BENCH_ROUNDS", 3).max(1);
    let sync = std::env::var("MOSAIC_BENCH_DURABILITY").is_ok_and(|d| d == "sync");
    let dir = match std::env::var_os("MOSAIC_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None => tempfile::tempdir()?,
    };
    let mut config = StorageConfig::new(dir.path());
    config.durability = if sync { Durability::Sync } else { Durability::Buffered };
    let db = Db::open(config, DbOptions::default())?;
    let modes = ["off", "keys", "full"];
    for mode in modes {
        let req: CreateTable = serde_json::from_value(json!({"name": mode, "changefeed": mode}))?;
        db.pipeline.create_table(req).await?;
    }
    // warm-up: every table gets its documents once
    for mode in modes {
        put_round(&db, mode, docs, clients, 0).await?;
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 1..=rounds {
        for (i, mode) in modes.iter().enumerate() {
            let r = put_round(&db, mode, docs, clients, round).await?;
            println!("round {round}: {mode:>4} {r:>9.0} puts/s");
            rates[i].push(r);
        }
    }
    let med: Vec<f64> = rates.into_iter().map(median).collect();
    let durability = if sync { "sync" } else { "buffered" };
    println!(
        "changefeed write cost ({durability}, {docs} puts x {clients} clients, median of {rounds}): off {:.0}/s, \
         keys {:.0}/s ({:+.1}%), full {:.0}/s ({:+.1}%)",
        med[0],
        med[1],
        (med[1] / med[0] - 1.0) * 100.0,
        med[2],
        (med[2] / med[0] - 1.0) * 100.0
    );

    // a consumer reading everything from the start, a page at a time
    let started = Instant::now();
    let (mut since, mut events) = (0u64, 0usize);
    loop {
        let req = ChangesRequest { since, limit: 10_000, tables: None, wait: Duration::ZERO };
        let page = db.changefeed.changes(req).await?;
        if page.events.is_empty() {
            break;
        }
        events += page.events.len();
        since = page.next;
    }
    let secs = started.elapsed().as_secs_f64();
    println!("consumer: {events} events in {secs:.2} s = {:.0} events/s", events as f64 / secs);
    db.shutdown().await?;
    Ok(())
}

fn main() -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}
