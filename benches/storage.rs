//! Write throughput of the store, straight through the committer (no HTTP, no JSON).
//!
//! Cases, each on a fresh data directory:
//! - batched inserts: one writer, each write puts 100 keys of 200-byte values (sync, buffered);
//! - single-key writes from 1 writer thread and from 8 concurrent writer threads (sync, buffered).
//!
//! Every case runs a fixed number of writes or until its time budget is spent, whichever comes
//! first, and reports writes/s (and keys/s). The summary table goes to stderr, ending with the
//! group-commit speed-up: 8 sync writers' writes/s over 1 sync writer's.
//!
//! Environment:
//! - `MOSAIC_BENCH_SECS`: time budget of one case in seconds (default 3);
//! - `MOSAIC_BENCH_DIR`: where the temporary data directories go (default: the system temp dir).
//!
//! Run with `cargo bench --bench storage`. It is a plain `main` (not criterion): a sync write
//! costs an fsync, so criterion's sampling would take far too long; the figures here are rates
//! over thousands of writes.

use std::time::{Duration, Instant};

use mosaicdb::keys::EntityKey;
use mosaicdb::storage::{Durability, Space, StorageConfig, StorageError, Store};

/// Keys per write in the batched case.
const BATCH_KEYS: usize = 100;
/// Bytes per value.
const VALUE_BYTES: usize = 200;
/// Writes done (and not timed) before each case, so the journal and memtable exist.
const WARMUP_WRITES: usize = 20;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A value of `VALUE_BYTES` bytes that differs per key (so it does not compress away).
fn value(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..VALUE_BYTES)
        .map(|_| {
            // xorshift64: cheap, deterministic, incompressible enough
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect()
}

fn key(writer: usize, n: usize) -> Vec<u8> {
    EntityKey::new("bench", &format!("w{writer:02}-{n:09}")).encode()
}

struct Outcome {
    name: String,
    writes: usize,
    keys: usize,
    elapsed: Duration,
}

impl Outcome {
    fn writes_per_sec(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }
    fn keys_per_sec(&self) -> f64 {
        self.keys as f64 / self.elapsed.as_secs_f64()
    }
}

fn open(durability: Durability) -> Result<(tempfile::TempDir, Store), BoxError> {
    let dir = match std::env::var_os("MOSAIC_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None => tempfile::tempdir()?,
    };
    let mut cfg = StorageConfig::new(dir.path());
    cfg.durability = durability;
    let store = Store::open(cfg, &mosaicdb::service::changefeed::Events)?;
    Ok((dir, store))
}

/// One write of `keys` keys by `writer`, numbered from `first`.
fn put(store: &Store, writer: usize, first: usize, keys: usize) -> Result<(), StorageError> {
    let staged: Vec<(Vec<u8>, Vec<u8>)> =
        (first..first + keys).map(|n| (key(writer, n), value((writer as u64) << 32 | n as u64))).collect();
    store.write_blocking(move |tx| {
        for (k, v) in staged {
            tx.put(Space::Entity, k, v);
        }
        Ok::<_, StorageError>(())
    })
}

/// `threads` writers, each doing up to `per_thread` writes of `keys_per_write` keys, until the
/// budget is spent. Keys and values are built by the writer just before each write (cheap next to
/// the write itself; the committer is the bottleneck being measured).
fn run_case(
    name: &str,
    durability: Durability,
    threads: usize,
    per_thread: usize,
    keys_per_write: usize,
    budget: Duration,
) -> Result<Outcome, BoxError> {
    let (dir, store) = open(durability)?;
    for i in 0..WARMUP_WRITES {
        put(&store, 99, i * keys_per_write, keys_per_write)?;
    }
    let start = Instant::now();
    let deadline = start + budget;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || -> Result<usize, StorageError> {
                let mut done = 0;
                while done < per_thread && Instant::now() < deadline {
                    put(&store, t, done * keys_per_write, keys_per_write)?;
                    done += 1;
                }
                Ok(done)
            })
        })
        .collect();
    let mut writes = 0;
    for h in handles {
        writes += h.join().map_err(|_| "a writer thread panicked")??;
    }
    let elapsed = start.elapsed();
    // Spot-check that the writes landed.
    if store.get(Space::Entity, &key(0, 0))?.is_none() {
        return Err(format!("{name}: the first key is missing").into());
    }
    store.close()?;
    drop(store);
    drop(dir);
    let out = Outcome { name: name.to_owned(), writes, keys: writes * keys_per_write, elapsed };
    eprintln!(
        "  {:<34} {:>8} writes in {:>6.2} s  {:>11.0} writes/s",
        out.name,
        out.writes,
        out.elapsed.as_secs_f64(),
        out.writes_per_sec()
    );
    Ok(out)
}

fn main() -> Result<(), BoxError> {
    let secs: f64 = std::env::var("MOSAIC_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let budget = Duration::from_secs_f64(secs.clamp(0.1, 60.0));
    eprintln!("storage write throughput ({VALUE_BYTES}-byte values, budget {secs} s per case)");

    let cases: [(&str, Durability, usize, usize, usize); 6] = [
        ("batch 100 keys/write, sync", Durability::Sync, 1, 1_000_000, BATCH_KEYS),
        ("batch 100 keys/write, buffered", Durability::Buffered, 1, 1_000_000, BATCH_KEYS),
        ("single key, 1 writer, sync", Durability::Sync, 1, 10_000_000, 1),
        ("single key, 8 writers, sync", Durability::Sync, 8, 10_000_000, 1),
        ("single key, 1 writer, buffered", Durability::Buffered, 1, 10_000_000, 1),
        ("single key, 8 writers, buffered", Durability::Buffered, 8, 10_000_000, 1),
    ];
    let mut results = Vec::new();
    for (name, durability, threads, per_thread, keys) in cases {
        results.push(run_case(name, durability, threads, per_thread, keys, budget)?);
    }

    eprintln!();
    eprintln!("| case                               |     writes/s |       keys/s |");
    eprintln!("|------------------------------------|-------------:|-------------:|");
    for r in &results {
        eprintln!("| {:<34} | {:>12.0} | {:>12.0} |", r.name, r.writes_per_sec(), r.keys_per_sec());
    }
    let rate = |name: &str| results.iter().find(|r| r.name == name).map_or(0.0, Outcome::writes_per_sec);
    let (one, eight) = (rate("single key, 1 writer, sync"), rate("single key, 8 writers, sync"));
    eprintln!();
    eprintln!("group-commit speed-up (8 sync writers / 1 sync writer): {:.2}x", eight / one);
    let (one_b, eight_b) = (rate("single key, 1 writer, buffered"), rate("single key, 8 writers, buffered"));
    eprintln!("buffered 8 writers / 1 writer: {:.2}x", eight_b / one_b);
    Ok(())
}
