//! What the HTTP benches share: a bounded load generator over keep-alive connections, latency
//! percentiles, the trivial "ceiling" server, and in-process mosaicdb servers.
#![allow(dead_code)]

use mosaicdb::server::{Server, ServerConfig};
use mosaicdb::storage::Durability;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

// The same allocator as the `mosaicdb` binary, so the benches measure what runs in production.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Upper bound on requests per client per run (the time budget normally ends it first).
const MAX_REQUESTS_PER_CLIENT: u64 = 10_000_000;

/// Builds one request; called with (client index, request number of that client).
pub type MakeRequest = Arc<dyn Fn(usize, u64) -> reqwest::RequestBuilder + Send + Sync>;

/// Percentile of sorted latencies (microseconds), in milliseconds.
pub fn percentile(sorted_us: &[u32], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted_us.len() as f64 * p / 100.0) as usize).min(sorted_us.len() - 1);
    f64::from(sorted_us[idx]) / 1000.0
}

/// What one load run measured.
pub struct Measured {
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// sorted, microseconds
    pub latencies_us: Vec<u32>,
}

impl Measured {
    pub fn per_sec(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    pub fn p50(&self) -> f64 {
        percentile(&self.latencies_us, 50.0)
    }
    pub fn p99(&self) -> f64 {
        percentile(&self.latencies_us, 99.0)
    }
}

/// `clients` tasks, each sending one request at a time until `duration` has passed; a non-2xx
/// answer counts as an error (the first one of each client is printed).
pub async fn run_clients(clients: std::ops::Range<usize>, duration: Duration, make: &MakeRequest) -> Measured {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + duration;
    let tasks: Vec<_> = clients
        .map(|c| {
            let make = make.clone();
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(16_384);
                let (mut ok, mut errors, mut first_error) = (0u64, 0u64, None::<String>);
                let mut n = 0u64;
                while n < MAX_REQUESTS_PER_CLIENT && tokio::time::Instant::now() < deadline {
                    let request = make(c, n);
                    n += 1;
                    let t0 = Instant::now();
                    let outcome = match request.send().await {
                        Ok(resp) => {
                            let status = resp.status();
                            match resp.bytes().await {
                                Ok(_) if status.is_success() => Ok(()),
                                Ok(body) => Err(format!("{status}: {}", String::from_utf8_lossy(&body))),
                                Err(e) => Err(e.to_string()),
                            }
                        }
                        Err(e) => Err(e.to_string()),
                    };
                    match outcome {
                        Ok(()) => {
                            ok += 1;
                            lat.push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
                        }
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                }
                (ok, errors, lat, first_error)
            })
        })
        .collect();
    let (mut requests, mut errors, mut latencies_us) = (0, 0, Vec::new());
    for t in tasks {
        match t.await {
            Ok((o, e, l, first)) => {
                requests += o;
                errors += e;
                latencies_us.extend(l);
                if let Some(msg) = first {
                    eprintln!("    first error of a client: {msg}");
                }
            }
            Err(e) => {
                eprintln!("    a client task failed: {e}");
                errors += 1;
            }
        }
    }
    latencies_us.sort_unstable();
    Measured { requests, errors, elapsed: start.elapsed(), latencies_us }
}

/// A warm-up (which opens the keep-alive connections) with clients `n..2n`, then the measured
/// run with clients `0..n`.
pub async fn load(clients: usize, duration: Duration, make: MakeRequest) -> Measured {
    let warmup = (duration / 5).min(Duration::from_secs(1));
    let _ = run_clients(clients..2 * clients, warmup, &make).await;
    run_clients(0..clients, duration, &make).await
}

/// A keep-alive HTTP/1.1 client.
pub fn client(gzip: bool) -> Result<reqwest::Client, BoxError> {
    let b = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(4096)
        .timeout(Duration::from_secs(600));
    Ok(if gzip { b } else { b.no_gzip() }.build()?)
}

/// A fresh data directory (under `MOSAIC_BENCH_DIR` when set).
pub fn data_dir() -> Result<tempfile::TempDir, BoxError> {
    Ok(match std::env::var_os("MOSAIC_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None => tempfile::tempdir()?,
    })
}

/// A mosaicdb server on a fresh data directory, with the given tables.
pub async fn start_server(
    durability: Durability,
    tables: &[&str],
) -> Result<(tempfile::TempDir, Server, String), BoxError> {
    let dir = data_dir()?;
    let mut cfg = ServerConfig::new(dir.path());
    cfg.addr = "127.0.0.1:0".parse()?;
    cfg.storage.durability = durability;
    let server = Server::start(cfg).await?;
    let base = format!("http://{}", server.addr());
    let c = client(false)?;
    for t in tables {
        let resp = c.post(format!("{base}/v1/tables")).json(&json!({ "name": t })).send().await?;
        if resp.status().as_u16() != 201 {
            return Err(format!("creating table {t}: {} {}", resp.status(), resp.text().await?).into());
        }
    }
    Ok((dir, server, base))
}

/// The "HTTP ceiling": a trivial axum handler on its own listener.
pub async fn start_ceiling() -> Result<(SocketAddr, tokio::sync::oneshot::Sender<()>), BoxError> {
    let app = axum::Router::new().route("/", axum::routing::get(|| async { axum::Json(json!({"status": "ok"})) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
    });
    Ok((addr, stop))
}

/// Integer from the environment, or a default.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A small deterministic generator (xorshift64), so a bench's data is the same in every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
