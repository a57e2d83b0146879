//! The graph on a power-law graph, through the service layer (no HTTP): edge insert rate, and
//! criterion latencies of neighbours, 1-hop and 3-hop traversals of a median and a hub vertex,
//! and shortest paths between random pairs.
//!
//! The graph: `MOSAIC_BENCH_VERTICES` vertices (default 100 000) and `MOSAIC_BENCH_EDGES` edges
//! (default 1 000 000). An edge's `_from` is vertex `⌊N·u²⌋` and its `_to` vertex `⌊N·u³⌋` (u
//! uniform in [0, 1)): a few low-numbered vertices are hubs (vertex 0: about N^(-1/2) of the
//! `_from`s and N^(-1/3) of the `_to`s, ~3 000 out and ~21 000 in edges at the default size), most
//! have a handful of edges. Every edge has a `km` weight, the edge table's declared weight field.
//! Edges are inserted in batches of 10 000 (`insert_documents`, one atomic write each, as
//! `POST …/documents` with an array does), vertices likewise; durability is buffered.
//!
//! The loaded directory is then opened again twice: with the adjacency in memory (the default;
//! the open's time, the adjacency's load time, size and bytes per edge are printed) and with it
//! off (`graph_memory_bytes: 0`: walks read the `graph:` keys), and every case runs on each
//! (criterion groups `graph_memory` and `graph_keys`). `MOSAIC_BENCH_OPEN_ONLY=1` stops after the
//! load and the timed open (e.g. `MOSAIC_BENCH_EDGES=10000000` for the open of 10M edges).
//!
//! On 2 cores the default graph loads in 15-20 s and the whole run takes a few minutes (each
//! criterion case 20 samples; the weighted shortest paths on the keys take most of it).
//! `MOSAIC_BENCH_DIR` sets where the data directory goes. Run with `cargo bench --bench graph`.
//!
//! Not measured here: PostgreSQL's recursive CTE (no PostgreSQL in the bench environment).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mosaicdb::service::graph::{NeighborsRequest, ShortestPathRequest, TraverseRequest, WalkDirection};
use mosaicdb::service::{CreateTable, Db, DbOptions, ServiceError};
use mosaicdb::storage::{Durability, StorageConfig};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Edges (and vertices) per insert.
const BATCH: usize = 10_000;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// xorshift64*: deterministic.
struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Loaded {
    dir: tempfile::TempDir,
    vertices: usize,
    median: String,
    hub: String,
}

fn load(rt: &tokio::runtime::Runtime) -> Loaded {
    let (n, m) = (env_or("MOSAIC_BENCH_VERTICES", 100_000), env_or("MOSAIC_BENCH_EDGES", 1_000_000));
    let dir = match std::env::var_os("MOSAIC_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base),
        None => tempfile::tempdir(),
    }
    .expect("temp dir");
    let mut cfg = StorageConfig::new(dir.path());
    cfg.durability = Durability::Buffered;
    let db = rt.block_on(async { Db::open(cfg, DbOptions::default()) }).expect("open");
    rt.block_on(async {
        let table = |v: Value| serde_json::from_value::<CreateTable>(v).expect("table");
        db.pipeline.create_table(table(json!({"name": "users"}))).await?;
        db.pipeline.create_table(table(json!({"name": "follows", "kind": "edge", "weight_field": "km"}))).await?;
        let t0 = Instant::now();
        for first in (0..n).step_by(BATCH) {
            let docs = (first..(first + BATCH).min(n)).map(|i| json!({"_id": format!("u{i}"), "n": i})).collect();
            db.pipeline.insert_documents("users".into(), docs).await?;
        }
        eprintln!("{n} vertices in {:.1} s", t0.elapsed().as_secs_f64());
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut degree = vec![0u32; n];
        let edges: Vec<(usize, usize)> = (0..m)
            .map(|_| {
                let (u, v) = (rng.unit(), rng.unit());
                ((n as f64 * u * u) as usize, (n as f64 * v * v * v) as usize)
            })
            .collect();
        for &(f, t) in &edges {
            degree[f] += 1;
            degree[t] += 1;
        }
        let t0 = Instant::now();
        for (b, chunk) in edges.chunks(BATCH).enumerate() {
            let docs = chunk
                .iter()
                .enumerate()
                .map(|(i, (f, t))| {
                    json!({"_id": format!("e{}", b * BATCH + i), "_from": format!("users/u{f}"), "_to": format!("users/u{t}"),
                        "km": (f + t) % 100})
                })
                .collect();
            db.pipeline.insert_documents("follows".into(), docs).await?;
        }
        let secs = t0.elapsed().as_secs_f64();
        eprintln!("{m} edges in {secs:.1} s: {:.0} edges/s (batches of {BATCH})", m as f64 / secs);
        let mut by_degree: Vec<(u32, usize)> = degree.iter().enumerate().map(|(i, d)| (*d, i)).collect();
        by_degree.sort();
        let median = by_degree[n / 2];
        let hub = by_degree[n - 1];
        eprintln!("median vertex u{} ({} edges), hub u{} ({} edges)", median.1, median.0, hub.1, hub.0);
        Ok::<_, ServiceError>(Loaded {
            median: format!("users/u{}", median.1),
            hub: format!("users/u{}", hub.1),
            vertices: n,
            dir,
        })
    })
    .and_then(|loaded| {
        db.core.close()?;
        Ok(loaded)
    })
    .expect("load")
}

/// Opens the loaded directory again, with the adjacency in memory or not, and says how long the
/// open took and what the adjacency holds.
fn reopen(rt: &tokio::runtime::Runtime, l: &Loaded, memory: bool) -> Arc<Db> {
    let mut cfg = StorageConfig::new(l.dir.path());
    cfg.durability = Durability::Buffered;
    let options = DbOptions { graph_memory_bytes: if memory { 16 << 30 } else { 0 }, ..DbOptions::default() };
    let t0 = Instant::now();
    // the last open's files may still be held for a moment after its close
    let db = loop {
        match rt.block_on(async { Db::open(cfg.clone(), options) }) {
            Ok(db) => break db,
            Err(e) if t0.elapsed().as_secs() < 10 && e.to_string().contains("Locked") => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Err(e) => panic!("open: {e}"),
        }
    };
    let m = db.graph.memory_stats();
    eprintln!(
        "open with the adjacency {}: {:.2} s (its load {:.2} s); {} edges, {} vertex numbers, {:.1} MB, {:.1} bytes/edge",
        if memory { "in memory" } else { "off" },
        t0.elapsed().as_secs_f64(),
        m.load_seconds,
        m.edges,
        m.vertices,
        m.bytes as f64 / 1e6,
        m.bytes_per_edge
    );
    db
}

fn traverse(start: &str, depth: usize, direction: &str) -> TraverseRequest {
    serde_json::from_value(json!({"start": start, "direction": direction, "max_depth": depth, "limit": 10000,
        "max_visited": 10_000_000}))
    .expect("request")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let l = load(&runtime);
    if std::env::var_os("MOSAIC_BENCH_OPEN_ONLY").is_some() {
        reopen(&runtime, &l, true).core.close().expect("close");
        return;
    }
    for memory in [true, false] {
        let db = reopen(&runtime, &l, memory);
        cases(c, &runtime, &l, &db, if memory { "graph_memory" } else { "graph_keys" });
        db.core.close().expect("close");
    }
}

/// The criterion cases on one open database.
fn cases(c: &mut Criterion, rt: &tokio::runtime::Runtime, l: &Loaded, db: &Arc<Db>, group: &str) {
    let mut g = c.benchmark_group(group);
    g.sample_size(20);
    for (name, v) in [("median", &l.median), ("hub", &l.hub)] {
        let req = || NeighborsRequest {
            vertex: v.clone(),
            direction: WalkDirection::Any,
            edges: None,
            limit: 100,
            cursor: None,
        };
        g.bench_function(BenchmarkId::new("neighbors_page_100", name), |b| {
            b.iter(|| rt.block_on(db.graph.neighbors(req())).expect("neighbors"))
        });
        for (depth, direction) in [(1, "any"), (3, "any"), (3, "out")] {
            let got = rt.block_on(db.graph.traverse(traverse(v, depth, direction))).expect("traverse");
            let mut per_depth = [0usize; 4];
            for v in &got.vertices {
                per_depth[v.depth.min(3)] += 1;
            }
            eprintln!(
                "{depth}-hop {direction} of the {name} vertex: {} vertices (limit 10000) by depth 1-3: {:?}",
                got.vertices.len(),
                &per_depth[1..]
            );
            g.bench_function(BenchmarkId::new(format!("traverse_{depth}_hop_{direction}"), name), |b| {
                b.iter(|| rt.block_on(db.graph.traverse(traverse(v, depth, direction))).expect("traverse"))
            });
        }
    }
    let mut rng = Rng(7);
    let pairs: Vec<(String, String)> = (0..64)
        .map(|_| {
            let a = (rng.unit() * l.vertices as f64) as usize;
            let b = (rng.unit() * l.vertices as f64) as usize;
            (format!("users/u{a}"), format!("users/u{b}"))
        })
        .collect();
    for (name, weight) in [("hops", None), ("weighted_km", Some("km"))] {
        let mut i = 0;
        let mut found = 0;
        g.bench_function(BenchmarkId::new("shortest_path_random_pair", name), |b| {
            b.iter(|| {
                let (from, to) = &pairs[i % pairs.len()];
                i += 1;
                let req: ShortestPathRequest = serde_json::from_value(
                    json!({"from": from, "to": to, "direction": "any", "weight": weight, "max_visited": 10_000_000}),
                )
                .expect("request");
                match rt.block_on(db.graph.shortest_path(req)) {
                    Ok(_) => found += 1,
                    Err(ServiceError::NoPath { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            })
        });
        eprintln!("shortest paths ({name}): {found} of {i} pairs joined");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
