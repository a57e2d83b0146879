//! Full-text search on 100k documents of ~1 KB English-like text over a Zipf vocabulary, over HTTP
//! against an in-process server (release build, buffered durability like the other load benches):
//! - indexing rate: NDJSON import (one request with every document) into a table whose fulltext
//!   index exists (docs/s), and the same import without the index in the same run (the ratio is
//!   the index's cost);
//! - latency (one client, p50/p99) at limit 10 of 1-, 2- and 3-term queries over mid-frequency
//!   terms, a common-term query (one of the 5 most frequent words, in most documents), a phrase
//!   taken from a document, a 3-letter prefix and a one-typo fuzzy term.
//!
//! Environment: `MOSAIC_BENCH_DOCS` (default 100 000), `MOSAIC_BENCH_SECS` (default 3 per query
//! form), `MOSAIC_BENCH_DIR`. Run with `cargo bench --bench search`.

#[path = "support/mod.rs"]
mod support;

use mosaicdb::storage::Durability;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{BoxError, MakeRequest, Rng, client, env_or, load, start_server};

/// Distinct words of the vocabulary.
const VOCAB: usize = 30_000;
/// Zipf exponent.
const ZIPF_S: f64 = 1.07;
/// A query text for request number `k`.
type QueryText = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// Documents per import request: the whole corpus in one NDJSON stream, as `curl --data-binary
/// @docs.ndjson` would send it (the server commits it in chunks, preparing the next while the
/// last commits).
const IMPORT_CHUNK: usize = 1_000_000;

/// Pronounceable words made of syllables, one per rank (rank 0 most frequent).
fn vocabulary() -> Vec<String> {
    const ONSETS: [&str; 16] = ["b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "tr", "st", "pl"];
    const VOWELS: [&str; 6] = ["a", "e", "i", "o", "u", "ea"];
    let syllable = |k: usize| format!("{}{}", ONSETS[k % 16], VOWELS[(k / 16) % 6]);
    (0..VOCAB)
        .map(|r| {
            // frequent words are short, as in English
            let len = 1 + (r as f64).log(8.0).max(0.0) as usize;
            let mut w = String::new();
            let mut x = r * 7919 + 13;
            for _ in 0..len.max(1) {
                w.push_str(&syllable(x % 96));
                x /= 96;
                x += r;
            }
            format!("{w}{}", ["", "n", "s", "r"][r % 4])
        })
        .collect()
}

struct Zipf {
    cdf: Vec<f64>,
}
impl Zipf {
    fn new() -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=VOCAB)
            .map(|r| {
                acc += 1.0 / (r as f64).powf(ZIPF_S);
                acc
            })
            .collect();
        let total = acc;
        cdf.iter_mut().for_each(|c| *c /= total);
        Zipf { cdf }
    }
    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|c| *c < u).min(VOCAB - 1)
    }
}

fn document(i: usize, words: &[String], zipf: &Zipf, rng: &mut Rng) -> String {
    let mut body = String::with_capacity(1100);
    while body.len() < 1000 {
        if !body.is_empty() {
            body.push(' ');
        }
        body.push_str(&words[zipf.sample(rng)]);
    }
    let title: Vec<&str> = (0..6).map(|_| words[zipf.sample(rng)].as_str()).collect();
    format!("{}\n", json!({"_id": format!("d{i:07}"), "title": title.join(" "), "body": body, "n": i % 100}))
}

async fn import(c: &reqwest::Client, base: &str, table: &str, lines: &[String]) -> Result<f64, BoxError> {
    let t0 = Instant::now();
    for chunk in lines.chunks(IMPORT_CHUNK) {
        let report: Value = c
            .post(format!("{base}/v1/tables/{table}/import"))
            .header("content-type", "application/x-ndjson")
            .body(chunk.concat())
            .send()
            .await?
            .json()
            .await?;
        if report["inserted"] != chunk.len() {
            return Err(format!("import: {report}").into());
        }
    }
    Ok(lines.len() as f64 / t0.elapsed().as_secs_f64())
}

async fn run() -> Result<(), BoxError> {
    let docs: usize = env_or("MOSAIC_BENCH_DOCS", 100_000);
    let secs: f64 = env_or("MOSAIC_BENCH_SECS", 3.0);
    let (_dir, server, base) = start_server(Durability::Buffered, &["plain", "posts"]).await?;
    let c = client(false)?;
    let words = vocabulary();
    let zipf = Zipf::new();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let lines: Vec<String> = (0..docs).map(|i| document(i, &words, &zipf, &mut rng)).collect();
    let bytes: usize = lines.iter().map(String::len).sum();
    eprintln!("{docs} documents, {:.0} bytes on average", bytes as f64 / docs as f64);

    let plain = import(&c, &base, "plain", &lines).await?;
    let r = c
        .post(format!("{base}/v1/tables/posts/indexes"))
        .json(
            &json!({"name": "ft", "kind": "fulltext", "fields": ["title", "body"], "options": {"language": "english"}}),
        )
        .send()
        .await?;
    if r.status() != 201 {
        return Err(format!("create index: {}", r.text().await?).into());
    }
    let indexed = import(&c, &base, "posts", &lines).await?;
    eprintln!("import: {plain:.0} docs/s without the index, {indexed:.0} docs/s with it");

    // query terms by rank: mid-frequency for the term queries, the top 5 for the common one
    let shared = Arc::new(words.clone());
    let mid = {
        let w = shared.clone();
        move |k: u64| w[200 + (k as usize * 7919) % 2000].clone()
    };
    let common = {
        let w = shared.clone();
        move |k: u64| w[(k % 5) as usize].clone()
    };
    let phrase_source: Vec<Vec<String>> = lines
        .iter()
        .step_by((docs / 500).max(1))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_default();
            v["body"].as_str().unwrap_or_default().split(' ').map(str::to_owned).collect()
        })
        .collect();
    let forms: Vec<(&str, QueryText)> = vec![
        ("1 term", {
            let mid = mid.clone();
            Arc::new(mid)
        }),
        ("2 terms", {
            let mid = mid.clone();
            Arc::new(move |k| format!("{} {}", mid(k), mid(k + 1)))
        }),
        ("3 terms", Arc::new(move |k| format!("{} {} {}", mid(k), mid(k + 1), mid(k + 2)))),
        ("common term", Arc::new(common)),
        ("phrase", {
            let src = phrase_source.clone();
            Arc::new(move |k| {
                let w = &src[k as usize % src.len()];
                let at = (k as usize * 31) % w.len().saturating_sub(2).max(1);
                format!("\"{} {}\"", w[at], w.get(at + 1).cloned().unwrap_or_default())
            })
        }),
        ("prefix", {
            let words = words.clone();
            Arc::new(move |k| {
                let w = &words[100 + (k as usize * 13) % 3000];
                format!("{}*", &w[..3.min(w.len())])
            })
        }),
        ("fuzzy ~1", {
            let words = words.clone();
            Arc::new(move |k| {
                let w: Vec<char> = words[300 + (k as usize * 17) % 3000].chars().collect();
                let i = (k as usize) % w.len();
                let typo: String = w.iter().enumerate().map(|(j, c)| if j == i { 'x' } else { *c }).collect();
                format!("{typo}~1")
            })
        }),
    ];
    let mut rows = Vec::new();
    for (name, q) in forms {
        let (c2, base2) = (c.clone(), base.clone());
        let make: MakeRequest = Arc::new(move |client, n| {
            let k = client as u64 * 1_000_003 + n * 7919;
            c2.post(format!("{base2}/v1/tables/posts/search")).json(&json!({"query": q(k), "limit": 10}))
        });
        // the hits count, once, to show what each form matches
        let sample: Value = make(0, 1).send().await?.json().await?;
        let m = load(1, Duration::from_secs_f64(secs), make).await;
        eprintln!(
            "  {name}: p50 {:.2} ms, p99 {:.2} ms, {:.0} q/s, total e.g. {}",
            m.p50(),
            m.p99(),
            m.per_sec(),
            sample["total"]
        );
        rows.push((name, m, sample["total"].clone()));
    }
    println!(
        "\n## search bench: {docs} documents of ~{:.0} bytes, Zipf vocabulary of {VOCAB} words\n",
        bytes as f64 / docs as f64
    );
    println!(
        "| import | docs/s |\n|---|---|\n| without an index | {plain:.0} |\n| with the fulltext index | {indexed:.0} |"
    );
    println!(
        "\n| query (limit 10, 1 client) | p50 ms | p99 ms | q/s | matches (one sample) | errors |\n|---|---|---|---|---|---|"
    );
    for (name, m, total) in &rows {
        println!("| {name} | {:.2} | {:.2} | {:.0} | {total} | {} |", m.p50(), m.p99(), m.per_sec(), m.errors);
    }
    server.shutdown().await?;
    Ok(())
}

fn main() -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}
