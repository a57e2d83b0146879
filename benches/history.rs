//! What document history costs, through the service layer (no HTTP): PUT throughput replacing
//! existing documents of a table with history (`max_versions` 1000, so nothing is trimmed) against
//! the same PUTs on a table without, in one run, rounds interleaved (plain, kept, plain, kept, …)
//! so that the machine's drift falls on both alike; then the bytes one kept version takes, as keys
//! and values and on disk after a compaction, beside a document's own.
//!
//! Both tables have `MOSAIC_BENCH_DOCS` (default 10 000) documents of about 200 bytes with a hash
//! index; `MOSAIC_BENCH_CLIENTS` (default 4) tasks replace random ones for
//! `MOSAIC_BENCH_SECS` (default 2) per round, `MOSAIC_BENCH_ROUNDS` (default 4) rounds per table;
//! `MOSAIC_BENCH_DURABILITY` `sync` or `buffered` (default: both, each on a fresh store).
//! `MOSAIC_BENCH_DIR` sets where the data directories go. Run with `cargo bench --bench history`.

use mosaicdb::keys::HistKey;
use mosaicdb::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions};
use mosaicdb::storage::{Durability, KeyRange, Space, StorageConfig};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn document(i: u64, n: u64) -> serde_json::Map<String, Value> {
    let doc = json!({"user": format!("u{}", i % 500), "n": n, "score": (n * 7919) % 1000,
        "text": format!("document {i} version {n}: some words of a typical record body"),
        "tags": ["a", "b", format!("t{}", n % 10)], "address": {"city": "Oslo", "zip": format!("{:04}", i % 9999)}});
    doc.as_object().cloned().unwrap_or_default()
}

/// PUTs replacing random documents of `table` from `clients` tasks for `secs`: PUTs per second.
async fn round(
    db: &Arc<Db>,
    table: &str,
    docs: u64,
    clients: usize,
    secs: u64,
    seq: &Arc<AtomicU64>,
) -> Result<f64, BoxError> {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (db, stop, seq, table) = (db.clone(), stop.clone(), seq.clone(), table.to_owned());
            tokio::spawn(async move {
                let mut done = 0u64;
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (c as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = x % docs;
                    let n = seq.fetch_add(1, Ordering::Relaxed);
                    db.pipeline
                        .put_document(table.clone(), format!("d{i:06}"), document(i, n), Preconditions::default())
                        .await?;
                    done += 1;
                }
                Ok::<_, BoxError>(done)
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Keys and bytes (keys + values) of a key family, read off a snapshot; in the history family,
/// only the versions (not the heads, one per document).
fn logical(db: &Db, space: Space) -> Result<(u64, u64), BoxError> {
    let (mut keys, mut bytes) = (0u64, 0u64);
    for item in db.core.store().snapshot().scan(space, KeyRange::Prefix(Vec::new()), false) {
        let (k, v) = item?;
        if space == Space::Hist && HistKey::decode(&k)?.start.is_none() {
            continue;
        }
        keys += 1;
        bytes += (k.len() + v.len()) as u64;
    }
    Ok((keys, bytes))
}

async fn run(durability: Durability, label: &str) -> Result<(), BoxError> {
    let docs = env_or("MOSAIC_BENCH_DOCS", 10_000) as u64;
    let clients = env_or("MOSAIC_BENCH_CLIENTS", 4);
    let secs = env_or("MOSAIC_BENCH_SECS", 2) as u64;
    let rounds = env_or("MOSAIC_BENCH_ROUNDS", 4);
    let dir = match std::env::var_os("MOSAIC_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None => tempfile::tempdir()?,
    };
    let mut config = StorageConfig::new(dir.path());
    config.durability = durability;
    // no background task (retention, TTL, merges) competes with the rounds
    let db = Db::open(config, DbOptions { background_jobs: false, ..DbOptions::default() })?;
    for (name, history) in [("plain", Value::Null), ("kept", json!({"max_versions": 1000}))] {
        db.pipeline
            .create_table(serde_json::from_value::<CreateTable>(json!({"name": name, "history": history}))?)
            .await?;
        let req: CreateIndex = serde_json::from_value(json!({"name": "by_user", "kind": "hash", "fields": ["user"]}))?;
        db.pipeline.create_index(name.into(), req).await?;
        for chunk in (0..docs).collect::<Vec<_>>().chunks(5_000) {
            let batch: Vec<Value> = chunk
                .iter()
                .map(|&i| {
                    let mut d = document(i, 0);
                    d.insert("_id".into(), json!(format!("d{i:06}")));
                    Value::Object(d)
                })
                .collect();
            db.pipeline.insert_documents(name.into(), batch).await?;
        }
    }
    let seq = Arc::new(AtomicU64::new(1));
    let (mut plain, mut kept) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        plain.push(round(&db, "plain", docs, clients, secs, &seq).await?);
        kept.push(round(&db, "kept", docs, clients, secs, &seq).await?);
    }
    let (p, k) = (median(plain.clone()), median(kept.clone()));
    println!(
        "history {label}: PUT (replace) {clients} clients, {docs} docs: plain {p:.0}/s, history on {k:.0}/s: \
         ratio {:.3} ({:+.1}%); rounds plain {:?} kept {:?}",
        k / p,
        (k / p - 1.0) * 100.0,
        plain.iter().map(|x| x.round()).collect::<Vec<_>>(),
        kept.iter().map(|x| x.round()).collect::<Vec<_>>(),
    );
    let store = db.clone();
    let (versions, hist_bytes, entity_keys, entity_bytes, hist_disk, entity_disk) =
        tokio::task::spawn_blocking(move || -> Result<_, BoxError> {
            let (versions, hist_bytes) = logical(&store, Space::Hist)?;
            let (entity_keys, entity_bytes) = logical(&store, Space::Entity)?;
            store.core.store().compact(Space::Hist)?;
            store.core.store().compact(Space::Entity)?;
            Ok((
                versions,
                hist_bytes,
                entity_keys,
                entity_bytes,
                store.core.store().disk_space(Space::Hist),
                store.core.store().disk_space(Space::Entity),
            ))
        })
        .await??;
    // (on disk, the heads — one per document, a few bytes — are counted with the versions)
    println!(
        "history {label}: {versions} versions kept: {:.0} B each as key + value ({:.0} B on disk after compaction); \
         a document: {:.0} B as key + value ({:.0} B on disk)",
        hist_bytes as f64 / versions.max(1) as f64,
        hist_disk as f64 / versions.max(1) as f64,
        entity_bytes as f64 / entity_keys.max(1) as f64,
        entity_disk as f64 / entity_keys.max(1) as f64,
    );
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Runtime::new()?;
    let modes = match std::env::var("MOSAIC_BENCH_DURABILITY").as_deref() {
        Ok("sync") => vec![(Durability::Sync, "sync")],
        Ok("buffered") => vec![(Durability::Buffered, "buffered")],
        _ => vec![(Durability::Buffered, "buffered"), (Durability::Sync, "sync")],
    };
    for (durability, label) in modes {
        runtime.block_on(run(durability, label))?;
    }
    Ok(())
}
