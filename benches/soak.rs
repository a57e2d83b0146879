//! The soak run: mixed load at saturation against the release binary for a fixed time (default
//! 10 minutes), its resident memory sampled every second, then every acknowledged write checked.
//!
//! Load, all at once, each kind from its own clients:
//! - document PUTs (new ids, and overwrites of the writer's own earlier ids) into a table with a
//!   range index, a fulltext index, a vector index and a changefeed, and edges into an edge table;
//! - point GETs, range queries, full-text searches, kNN searches and graph traversals;
//! - InfluxDB line protocol writes (a series per writer) and PromQL `rate` range queries over them;
//! - changefeed consumers following the feed by long-poll;
//! - clients that leave early: heavy reads (PromQL over the whole soak, NDJSON exports) dropped
//!   after a few milliseconds, and raw connections that send half a request head and close.
//!
//! Every answer is counted by kind and status. A 5xx is a failure, except 503 and 429 with a
//! `Retry-After` (the documented load shedding of heavy reads and writes); connection errors are
//! counted apart. At the end (load stopped): every acknowledged document reads back as its last
//! acknowledged version (a write whose answer was lost may be there or not), each line-protocol
//! series holds every acknowledged point, the changefeed consumers saw every acknowledged PUT; then
//! the server is killed (SIGKILL) and `mosaicdb check` of its data directory must be clean. The process exits non-zero if any of that fails.
//!
//! Environment: `MOSAIC_SOAK_SECS` (default 600), `MOSAIC_SOAK_WRITERS` (document writers, default
//! 16), `MOSAIC_SOAK_READERS` (GET clients, default 16), `MOSAIC_BENCH_DIR` (where the data
//! directory goes). Run with `cargo bench --bench soak`; it never runs in CI. All traffic goes to
//! 127.0.0.1, every loop is bounded by time and count.

#[path = "soak/load.rs"]
mod load;
#[path = "soak/verify.rs"]
mod verify;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The server under test: a child process on a free loopback port.
pub struct Target {
    pub base: String,
    pub http: reqwest::Client,
    child: Child,
}

impl Target {
    fn start(data_dir: &std::path::Path) -> Result<Target, BoxError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(env!("CARGO_BIN_EXE_mosaicdb"))
            .args(["--addr", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .args(["--log", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()?;
        let http = reqwest::Client::builder().pool_max_idle_per_host(256).timeout(Duration::from_secs(60)).build()?;
        Ok(Target { base: format!("http://127.0.0.1:{port}"), http, child })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn wait_ready(&self) -> Result<(), BoxError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(r) = self.http.get(self.url("/ready")).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err("the server did not become ready within 60 s".into())
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Answers counted per (kind, outcome), outcome being the status or `error` (no answer).
#[derive(Default)]
pub struct Tally {
    counts: Mutex<BTreeMap<(&'static str, String), u64>>,
}

impl Tally {
    pub fn add(&self, kind: &'static str, outcome: String) {
        *self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry((kind, outcome)).or_default() += 1;
    }

    /// Counts an answer: a 503 or 429 counts as shed (documented) when it has a Retry-After; an
    /// error's problem code is kept beside its status.
    pub fn answer(&self, kind: &'static str, status: u16, shed: bool, body: &[u8]) {
        let mut outcome = status.to_string();
        if status >= 400
            && let Ok(problem) = serde_json::from_slice::<serde_json::Value>(body)
            && let Some(code) = problem["code"].as_str()
        {
            outcome = format!("{status} {code}");
        }
        if shed {
            outcome.push_str(" (shed)");
        }
        self.add(kind, outcome);
    }

    fn snapshot(&self) -> BTreeMap<(&'static str, String), u64> {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// Resident memory of `pid` in MiB, from /proc.
fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), BoxError> {
    // `cargo bench` passes `--bench`; nothing to parse
    let secs = env_or("MOSAIC_SOAK_SECS", 600).clamp(5, 7200);
    let settings = load::Settings {
        duration: Duration::from_secs(secs),
        writers: env_or("MOSAIC_SOAK_WRITERS", 16).clamp(1, 256) as usize,
        readers: env_or("MOSAIC_SOAK_READERS", 16).clamp(1, 256) as usize,
    };
    let base = std::env::var_os("MOSAIC_BENCH_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new().prefix("mosaic-soak").tempdir_in(base)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(dir.path(), settings))
}

async fn run(dir: &std::path::Path, settings: load::Settings) -> Result<(), BoxError> {
    let target = Arc::new(Target::start(&dir.join("data"))?);
    target.wait_ready().await?;
    load::prepare(&target).await?;
    let tally = Arc::new(Tally::default());
    let acked = Arc::new(verify::Acked::default());

    // resident memory, every second, while the load runs
    let pid = target.pid();
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let start = Instant::now();
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(mib) = rss_mib(pid) {
                    samples.push((start.elapsed().as_secs(), mib));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            samples
        })
    };

    let started = Instant::now();
    eprintln!("soak: {} s of mixed load against {}", settings.duration.as_secs(), target.base);
    load::run(&target, &settings, &tally, &acked).await;
    let elapsed = started.elapsed();
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let samples = sampler.await?;

    let counts = tally.snapshot();
    let mut report = verify::check(&target, &acked).await;
    // then a power-cut-like stop (SIGKILL) and the offline check of every key family, which has
    // no request deadline however large the soak made the store
    drop(Arc::into_inner(target));
    let check = Command::new(env!("CARGO_BIN_EXE_mosaicdb")).arg("check").arg(dir.join("data")).output()?;
    let check_ok = check.status.success();
    if !check_ok {
        let out = String::from_utf8_lossy(&check.stdout);
        report.problems.push(format!("check: {}", out.chars().take(600).collect::<String>()));
    }
    print_summary(elapsed, &counts, &samples, &acked, &report, check_ok);
    let failed_answers: u64 = counts
        .iter()
        .filter(|((_, outcome), _)| outcome.starts_with('5') && !outcome.ends_with("(shed)"))
        .map(|(_, n)| n)
        .sum();
    if failed_answers > 0 || !report.problems.is_empty() {
        return Err(format!("soak failed: {failed_answers} 5xx answers, {} problems", report.problems.len()).into());
    }
    Ok(())
}

fn print_summary(
    elapsed: Duration,
    counts: &BTreeMap<(&'static str, String), u64>,
    samples: &[(u64, f64)],
    acked: &verify::Acked,
    report: &verify::Report,
    check_ok: bool,
) {
    println!("\n## Soak: {:.0} s of mixed load\n", elapsed.as_secs_f64());
    println!("| kind | answers | per second | outcomes |");
    println!("|---|---|---|---|");
    let mut kinds: BTreeMap<&str, Vec<(String, u64)>> = BTreeMap::new();
    for ((kind, outcome), n) in counts {
        kinds.entry(kind).or_default().push((outcome.clone(), *n));
    }
    for (kind, outcomes) in &kinds {
        let total: u64 = outcomes.iter().map(|(_, n)| n).sum();
        let shown: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o}: {n}")).collect();
        println!("| {kind} | {total} | {:.0} | {} |", total as f64 / elapsed.as_secs_f64(), shown.join(", "));
    }
    let peak = samples.iter().map(|(_, m)| *m).fold(0.0f64, f64::max);
    let at = |frac: f64| {
        let i = ((samples.len() as f64 * frac) as usize).min(samples.len().saturating_sub(1));
        samples.get(i).map_or(f64::NAN, |(_, m)| *m)
    };
    println!(
        "\nRSS (MiB): peak {peak:.0}; at 10% {:.0}, 50% {:.0}, 90% {:.0}, end {:.0} ({} samples)",
        at(0.1),
        at(0.5),
        at(0.9),
        at(1.0),
        samples.len()
    );
    println!(
        "Checked: {} documents ({} with an answer lost), {} time series points in {} series, {} feed events; check: {}",
        acked.documents(),
        acked.uncertain_documents(),
        report.points,
        report.series,
        report.feed_events,
        if check_ok { "clean" } else { "PROBLEMS" }
    );
    for p in report.problems.iter().take(20) {
        println!("problem: {p}");
    }
}
